package operator_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbv1 "github.com/kubeblade/kubeblade/api/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/operator/daemonset"
)

func getDS(t *testing.T, config string) (*appsv1.DaemonSet, error) {
	ds := &appsv1.DaemonSet{}
	err := k8s.Get(ctx(t), types.NamespacedName{Namespace: ns, Name: daemonset.Name(config)}, ds)
	return ds, err
}

func waitDS(t *testing.T, config string, cond func(*appsv1.DaemonSet) bool) *appsv1.DaemonSet {
	t.Helper()
	var ds *appsv1.DaemonSet
	eventually(t, "DaemonSet of "+config, func() (bool, error) {
		var err error
		ds, err = getDS(t, config)
		return err == nil && cond(ds), err
	})
	return ds
}

func TestDaemonSetContents(t *testing.T) {
	bc := config("ds-defaults", 0, map[string]string{"kbtest": "ds-defaults"})
	createAll(t, bc)
	ds := waitDS(t, "ds-defaults", func(*appsv1.DaemonSet) bool { return true })
	bc = getConfig(t, "ds-defaults")

	if len(ds.OwnerReferences) != 1 || ds.OwnerReferences[0].UID != bc.UID || !*ds.OwnerReferences[0].Controller {
		t.Errorf("owner references %+v, want the BladeConfig as controller", ds.OwnerReferences)
	}
	pod := ds.Spec.Template.Spec
	if diff := cmp.Diff(map[string]string{kbv1.LabelConfig: "ds-defaults"}, pod.NodeSelector); diff != "" {
		t.Errorf("nodeSelector (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]corev1.Toleration{{Operator: corev1.TolerationOpExists}}, pod.Tolerations); diff != "" {
		t.Errorf("tolerations (-want +got):\n%s", diff)
	}
	checks := map[string]bool{
		"priorityClassName system-node-critical": pod.PriorityClassName == "system-node-critical",
		"enableServiceLinks false":               pod.EnableServiceLinks != nil && !*pod.EnableServiceLinks,
		"no runtimeClassName":                    pod.RuntimeClassName == nil,
		"hostNetwork":                            pod.HostNetwork,
		"serviceAccount kubeblade-agent":         pod.ServiceAccountName == "kubeblade-agent",
		"RollingUpdate":                          ds.Spec.UpdateStrategy.Type == appsv1.RollingUpdateDaemonSetStrategyType,
		"one container":                          len(pod.Containers) == 1,
	}
	for what, ok := range checks {
		if !ok {
			t.Errorf("want %s", what)
		}
	}
	c := pod.Containers[0]
	if c.Image != opts.DaemonSet.Image || c.ImagePullPolicy != corev1.PullIfNotPresent {
		t.Errorf("image %s %s, want the operator's default", c.Image, c.ImagePullPolicy)
	}
	if diff := cmp.Diff([]string{"kubeblade-agent"}, c.Command); diff != "" {
		t.Errorf("command: %s", diff)
	}
	if diff := cmp.Diff(daemonset.AgentArgs(), c.Args); diff != "" {
		t.Errorf("args: %s", diff)
	}
	if c.SecurityContext == nil || c.SecurityContext.Privileged == nil || !*c.SecurityContext.Privileged {
		t.Error("the agent container must be privileged (GPIO character devices)")
	}
	// Probes on the agent's default ops endpoint, from the host (the pod
	// uses the host network).
	for path, p := range map[string]*corev1.Probe{"/healthz": c.LivenessProbe, "/readyz": c.ReadinessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != path || p.HTTPGet.Port.IntValue() != 9666 || p.HTTPGet.Host != "127.0.0.1" {
			t.Errorf("probe %s = %+v, want GET http://127.0.0.1:9666%s", path, p, path)
		}
	}
	if len(c.Env) != 1 || c.Env[0].Name != "NODE_NAME" || c.Env[0].ValueFrom.FieldRef.FieldPath != "spec.nodeName" {
		t.Errorf("env %+v, want NODE_NAME from spec.nodeName", c.Env)
	}
	paths := map[string]string{}
	for _, v := range pod.Volumes {
		typ := ""
		if v.HostPath.Type != nil {
			typ = string(*v.HostPath.Type)
		}
		paths[v.HostPath.Path] = typ
	}
	if diff := cmp.Diff(map[string]string{"/dev": "", "/sys": "", "/var/lib/kubeblade": "DirectoryOrCreate", "/run/kubeblade": "DirectoryOrCreate"}, paths); diff != "" {
		t.Errorf("hostPath volumes (-want +got):\n%s", diff)
	}
}

func TestDaemonSetSpecAndDrift(t *testing.T) {
	bc := config("ds-custom", 0, map[string]string{"kbtest": "ds-custom"})
	bc.Spec.DaemonSet = kbv1.DaemonSetSpec{
		Image:             "example.com/agent:v1",
		ImagePullPolicy:   corev1.PullAlways,
		Tolerations:       []corev1.Toleration{{Key: "blade", Operator: corev1.TolerationOpEqual, Value: "yes", Effect: corev1.TaintEffectNoSchedule}},
		PriorityClassName: "blades",
		Resources: &corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
		},
	}
	createAll(t, bc)
	ds := waitDS(t, "ds-custom", func(*appsv1.DaemonSet) bool { return true })
	pod := ds.Spec.Template.Spec
	c := pod.Containers[0]
	if c.Image != "example.com/agent:v1" || c.ImagePullPolicy != corev1.PullAlways || pod.PriorityClassName != "blades" {
		t.Errorf("image %s/%s priority %s not from spec.daemonSet", c.Image, c.ImagePullPolicy, pod.PriorityClassName)
	}
	if diff := cmp.Diff(bc.Spec.DaemonSet.Tolerations, pod.Tolerations); diff != "" {
		t.Errorf("tolerations (-want +got):\n%s", diff)
	}
	if c.Resources.Limits.Memory().String() != "64Mi" || c.Resources.Requests.Cpu().String() != "10m" {
		t.Errorf("resources %+v", c.Resources)
	}

	// A hand edit is reverted.
	orig := ds.DeepCopy()
	ds.Spec.Template.Spec.Containers[0].Image = "evil.example.com/agent:latest"
	ds.Spec.Template.Spec.PriorityClassName = ""
	if err := k8s.Patch(ctx(t), ds, client.MergeFrom(orig), client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
	waitDS(t, "ds-custom", func(ds *appsv1.DaemonSet) bool {
		return ds.Spec.Template.Spec.Containers[0].Image == "example.com/agent:v1" && ds.Spec.Template.Spec.PriorityClassName == "blades"
	})

	// An agent config change leaves the pod template alone.
	ds, _ = getDS(t, "ds-custom")
	gen := ds.Generation
	cur := getConfig(t, "ds-custom")
	o := cur.DeepCopy()
	cur.Spec.Agent.CriticalCelsius = 70
	if err := k8s.Patch(ctx(t), cur, client.MergeFrom(o)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "status to observe the agent change", func() (bool, error) {
		bc := getConfig(t, "ds-custom")
		return bc.Status.ObservedGeneration == bc.Generation && bc.Generation == cur.Generation, nil
	})
	if ds, _ := getDS(t, "ds-custom"); ds.Generation != gen {
		t.Errorf("an agent config change rolled the DaemonSet (generation %d -> %d)", gen, ds.Generation)
	}

	// A change to a start-only setting (here the metrics address) rolls it:
	// agents cannot apply it live.
	cur = getConfig(t, "ds-custom")
	o = cur.DeepCopy()
	cur.Spec.Agent.Metrics.BindAddress = ":9777"
	if err := k8s.Patch(ctx(t), cur, client.MergeFrom(o)); err != nil {
		t.Fatal(err)
	}
	want := daemonset.StartupConfigHash(cur.Spec.Agent)
	waitDS(t, "ds-custom", func(ds *appsv1.DaemonSet) bool {
		return ds.Spec.Template.Annotations[daemonset.AnnotationStartupConfig] == want && ds.Generation > gen
	})
	ds, _ = getDS(t, "ds-custom")
	gen = ds.Generation

	// A DaemonSet change rolls it.
	cur = getConfig(t, "ds-custom")
	o = cur.DeepCopy()
	cur.Spec.DaemonSet.Image = "example.com/agent:v2"
	if err := k8s.Patch(ctx(t), cur, client.MergeFrom(o)); err != nil {
		t.Fatal(err)
	}
	waitDS(t, "ds-custom", func(ds *appsv1.DaemonSet) bool {
		return ds.Spec.Template.Spec.Containers[0].Image == "example.com/agent:v2" && ds.Generation > gen
	})
}
