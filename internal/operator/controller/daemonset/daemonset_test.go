package daemonset_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbv1 "github.com/kubeblade/kubeblade/api/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/operator"
	"github.com/kubeblade/kubeblade/internal/operator/agentdaemonset"
	"github.com/kubeblade/kubeblade/internal/operator/controller/daemonset"
	"github.com/kubeblade/kubeblade/internal/operator/optest"
	"github.com/kubeblade/kubeblade/internal/testwait"
)

// The daemonset controller runs alone.
var suite = optest.NewSuite(func(_ context.Context, mgr ctrl.Manager, o operator.Options) error {
	r := reconciler(mgr.GetClient(), o)
	r.APIReader = mgr.GetAPIReader()
	r.Recorder = mgr.GetEventRecorder(operator.Name)
	return r.SetupWithManager(mgr)
})

// reconciler is the controller as operator.Setup configures it. Tests also
// call one directly, on the uncached client, to know a change was seen.
func reconciler(c client.Client, o operator.Options) *daemonset.Reconciler {
	d := o.DaemonSet
	d.Namespace = o.Namespace
	return &daemonset.Reconciler{Client: c, Defaults: d, Images: o.AgentImages}
}

func TestMain(m *testing.M) { os.Exit(suite.Run(m)) }

func getDS(ctx context.Context, e *optest.Env, config string) (*appsv1.DaemonSet, error) {
	ds := &appsv1.DaemonSet{}
	err := e.Client.Get(ctx, types.NamespacedName{Namespace: optest.Namespace, Name: agentdaemonset.Name(config)}, ds)
	return ds, err
}

func waitDS(t *testing.T, e *optest.Env, config, what string, cond func(*appsv1.DaemonSet) bool) *appsv1.DaemonSet {
	t.Helper()
	var ds *appsv1.DaemonSet
	testwait.Eventually(t, optest.Timeout, "the DaemonSet of "+config+": "+what, func(ctx context.Context) (bool, string) {
		var err error
		if ds, err = getDS(ctx, e, config); err != nil {
			return false, err.Error()
		}
		return cond(ds), ""
	})
	return ds
}

func exists(*appsv1.DaemonSet) bool { return true }

func TestContents(t *testing.T) {
	e := suite.Need(t)
	e.CreateAll(t, optest.Config("ds-defaults", 0, map[string]string{"kbtest": "ds-defaults"}))
	ds := waitDS(t, e, "ds-defaults", "created", exists)
	bc := e.GetConfig(t, "ds-defaults")

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
	if c.Image != e.Options.DaemonSet.Image || c.ImagePullPolicy != corev1.PullIfNotPresent {
		t.Errorf("image %s %s, want the operator's default", c.Image, c.ImagePullPolicy)
	}
	if diff := cmp.Diff([]string{"kubeblade-agent"}, c.Command); diff != "" {
		t.Errorf("command: %s", diff)
	}
	if diff := cmp.Diff(agentdaemonset.AgentArgs(), c.Args); diff != "" {
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
	if note := e.WaitEvent(t, "BladeConfig", "ds-defaults", daemonset.ReasonDaemonSetApplied); note != "Applied DaemonSet kubeblade-system/kubeblade-agent-ds-defaults" {
		t.Errorf("DaemonSetApplied note %q", note)
	}
}

func TestSpecAndDrift(t *testing.T) {
	e := suite.Need(t)
	bc := optest.Config("ds-custom", 0, map[string]string{"kbtest": "ds-custom"})
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
	e.CreateAll(t, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "blades"}, Value: 1000}, bc)
	ds := waitDS(t, e, "ds-custom", "created", exists)
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
	if err := e.Client.Patch(optest.Ctx(t), ds, client.MergeFrom(orig), client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
	waitDS(t, e, "ds-custom", "the hand edit reverted", func(ds *appsv1.DaemonSet) bool {
		return ds.Spec.Template.Spec.Containers[0].Image == "example.com/agent:v1" && ds.Spec.Template.Spec.PriorityClassName == "blades"
	})

	// An agent config change leaves the pod template alone. A reconcile
	// called here, on a direct client, has certainly seen the change.
	ds, _ = getDS(optest.Ctx(t), e, "ds-custom")
	gen := ds.Generation
	e.UpdateConfig(t, "ds-custom", func(bc *kbv1.BladeConfig) { bc.Spec.Agent.CriticalCelsius = 70 })
	direct := reconciler(e.Client, e.Options)
	if _, err := direct.Reconcile(optest.Ctx(t), ctrl.Request{NamespacedName: types.NamespacedName{Name: "ds-custom"}}); err != nil {
		t.Fatal(err)
	}
	if ds, _ := getDS(optest.Ctx(t), e, "ds-custom"); ds.Generation != gen {
		t.Errorf("an agent config change rolled the DaemonSet (generation %d -> %d)", gen, ds.Generation)
	}

	// A change to a start-only setting (here the metrics address) rolls it:
	// agents cannot apply it live.
	cur := e.UpdateConfig(t, "ds-custom", func(bc *kbv1.BladeConfig) { bc.Spec.Agent.Metrics.BindAddress = ":9777" })
	want := agentdaemonset.StartupConfigHash(cur.Spec.Agent)
	ds = waitDS(t, e, "ds-custom", "the new start-up hash", func(ds *appsv1.DaemonSet) bool {
		return ds.Spec.Template.Annotations[agentdaemonset.AnnotationStartupConfig] == want && ds.Generation > gen
	})
	gen = ds.Generation

	// A DaemonSet change rolls it.
	e.UpdateConfig(t, "ds-custom", func(bc *kbv1.BladeConfig) { bc.Spec.DaemonSet.Image = "example.com/agent:v2" })
	waitDS(t, e, "ds-custom", "the new image", func(ds *appsv1.DaemonSet) bool {
		return ds.Spec.Template.Spec.Containers[0].Image == "example.com/agent:v2" && ds.Generation > gen
	})
}

// TestRefusedImageIsNotRun: a BladeConfig whose image is from no allowed
// repository (it got past the admission policy, or predates it) gets a
// DaemonSet with the operator's own agent image, so its blades keep fan
// control, and a Warning Event that says why.
func TestRefusedImageIsNotRun(t *testing.T) {
	e := suite.Need(t)
	bc := optest.Config("ds-refused", 0, map[string]string{"kbtest": "ds-refused"})
	bc.Spec.DaemonSet.Image = "evil.example.com/root-shell:v1"
	e.CreateAll(t, bc)
	ds := waitDS(t, e, "ds-refused", "created", exists)
	if img := ds.Spec.Template.Spec.Containers[0].Image; img != e.Options.DaemonSet.Image {
		t.Errorf("image %s, want the operator's own %s", img, e.Options.DaemonSet.Image)
	}
	note := e.WaitEvent(t, "BladeConfig", "ds-refused", daemonset.ReasonImageNotAllowed)
	for _, w := range []string{"evil.example.com/root-shell:v1", "not from an allowed repository", e.Options.DaemonSet.Image} {
		if !strings.Contains(note, w) {
			t.Errorf("event %q does not say %q", note, w)
		}
	}
	// Allowed again: the DaemonSet follows.
	e.UpdateConfig(t, "ds-refused", func(bc *kbv1.BladeConfig) { bc.Spec.DaemonSet.Image = "example.com/agent:v3" })
	waitDS(t, e, "ds-refused", "the allowed image", func(ds *appsv1.DaemonSet) bool {
		return ds.Spec.Template.Spec.Containers[0].Image == "example.com/agent:v3"
	})
}

// TestMissingPriorityClassRunsTheDefault: the API server accepts a
// DaemonSet naming a PriorityClass that does not exist but refuses its
// pods, so such a BladeConfig gets a DaemonSet with the default class, and
// its blades keep an agent, with a Warning Event that says why; the class
// appearing is enough for the DaemonSet to follow it.
func TestMissingPriorityClassRunsTheDefault(t *testing.T) {
	e := suite.Need(t)
	bc := optest.Config("ds-prio", 0, map[string]string{"kbtest": "ds-prio"})
	bc.Spec.DaemonSet.PriorityClassName = "ds-late"
	e.CreateAll(t, bc)
	ds := waitDS(t, e, "ds-prio", "created", exists)
	if got := ds.Spec.Template.Spec.PriorityClassName; got != "system-node-critical" {
		t.Errorf("priorityClassName %q, want the default system-node-critical while ds-late does not exist", got)
	}
	note := e.WaitEvent(t, "BladeConfig", "ds-prio", daemonset.ReasonPriorityClassNotFound)
	for _, w := range []string{`PriorityClass "ds-late" does not exist`, "system-node-critical"} {
		if !strings.Contains(note, w) {
			t.Errorf("event %q does not say %q", note, w)
		}
	}
	e.CreateAll(t, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "ds-late"}, Value: 1000})
	waitDS(t, e, "ds-prio", "the PriorityClass that now exists", func(ds *appsv1.DaemonSet) bool {
		return ds.Spec.Template.Spec.PriorityClassName == "ds-late"
	})
}

// TestNoProbesIsAWarning: a metrics address the kubelet cannot probe (port
// 0) gives agents without probes, which a Warning Event says.
func TestNoProbesIsAWarning(t *testing.T) {
	e := suite.Need(t)
	bc := optest.Config("ds-noprobes", 0, map[string]string{"kbtest": "ds-noprobes"})
	bc.Spec.Agent.Metrics.BindAddress = "127.0.0.1:0"
	e.CreateAll(t, bc)
	ds := waitDS(t, e, "ds-noprobes", "created", exists)
	if c := ds.Spec.Template.Spec.Containers[0]; c.LivenessProbe != nil || c.ReadinessProbe != nil {
		t.Errorf("probes %+v %+v on port 0", c.LivenessProbe, c.ReadinessProbe)
	}
	if note := e.WaitEvent(t, "BladeConfig", "ds-noprobes", daemonset.ReasonNoProbes); !strings.Contains(note, `"127.0.0.1:0" has no fixed port to probe`) {
		t.Errorf("event %q does not name the address", note)
	}
}

// A BladeConfig whose name cannot be a label value can select no Node and
// gets no DaemonSet.
func TestUnlabellableNameGetsNoDaemonSet(t *testing.T) {
	e := suite.Need(t)
	long := fmt.Sprintf("ds-long-%060d", 0)
	e.CreateAll(t, optest.Config(long, 0, nil))
	direct := reconciler(e.Client, e.Options)
	if _, err := direct.Reconcile(optest.Ctx(t), ctrl.Request{NamespacedName: types.NamespacedName{Name: long}}); err != nil {
		t.Fatal(err)
	}
	if _, err := getDS(optest.Ctx(t), e, long); client.IgnoreNotFound(err) != nil || err == nil {
		t.Errorf("a DaemonSet for %s exists (err %v)", long, err)
	}
}
