package security

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbv1 "github.com/kubeblade/kubeblade/api/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/operator/agentdaemonset"
	"github.com/kubeblade/kubeblade/internal/operator/controller/daemonset"
	"github.com/kubeblade/kubeblade/internal/operator/imagepolicy"
	"github.com/kubeblade/kubeblade/internal/testenv"
	"github.com/kubeblade/kubeblade/internal/testwait"
)

const daemonSetPolicy = "kubeblade-operator-daemonsets"

var dsSeq atomic.Int32

// phantomConfig is a BladeConfig that is never created, so the running
// operator leaves DaemonSets named after it alone; the tests write them as
// the operator would.
func phantomConfig(mutate func(*kbv1.BladeConfig)) *kbv1.BladeConfig {
	n := dsSeq.Add(1)
	bc := &kbv1.BladeConfig{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ds-%d", n), UID: types.UID(fmt.Sprintf("00000000-0000-0000-0001-%012d", n))}}
	if mutate != nil {
		mutate(bc)
	}
	return bc
}

// agentDefaults are the operator's DaemonSet defaults in this suite.
func agentDefaults() agentdaemonset.Defaults {
	d := opts.DaemonSet
	d.Namespace = opts.Namespace
	return d
}

// rendered is what agentdaemonset.Build renders for bc, as a typed object.
func rendered(t *testing.T, bc *kbv1.BladeConfig) *appsv1.DaemonSet {
	t.Helper()
	raw, err := json.Marshal(agentdaemonset.Build(bc, agentDefaults()))
	if err != nil {
		t.Fatal(err)
	}
	ds := &appsv1.DaemonSet{}
	if err := json.Unmarshal(raw, ds); err != nil {
		t.Fatal(err)
	}
	return ds
}

// TestOperatorDaemonSetsAsRendered: every DaemonSet agentdaemonset renders
// (with the defaults and with everything spec.daemonSet may choose) is
// applied, changed and deleted by the operator's identity as the daemonset
// controller does it: server-side apply, field manager kubeblade-operator.
func TestOperatorDaemonSetsAsRendered(t *testing.T) {
	testenv.Need(t)
	op := as(operatorConfig())
	for name, mutate := range map[string]func(*kbv1.BladeConfig){
		"defaults": nil,
		"everything spec.daemonSet chooses": func(bc *kbv1.BladeConfig) {
			bc.Spec.DaemonSet.Image = imagepolicy.DefaultRepository + ":v9@sha256:" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
			bc.Spec.DaemonSet.ImagePullPolicy = corev1.PullAlways
			bc.Spec.DaemonSet.PriorityClassName = "blades"
			bc.Spec.DaemonSet.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "storage", Effect: corev1.TaintEffectNoSchedule}}
			bc.Spec.DaemonSet.Resources = &corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
			}
			bc.Spec.Agent.Metrics.BindAddress = "192.0.2.10:9100"
		},
		"no ops endpoint, so no probes": func(bc *kbv1.BladeConfig) { bc.Spec.Agent.Metrics.BindAddress = "0" },
	} {
		t.Run(name, func(t *testing.T) {
			bc := phantomConfig(mutate)
			want := agentdaemonset.Build(bc, agentDefaults())
			allowed(t, "applying the rendered DaemonSet", op.Apply(ctx(t), want, client.FieldOwner(daemonset.FieldManager), client.ForceOwnership))
			bc.Spec.DaemonSet.Image = imagepolicy.DefaultRepository + ":next"
			bc.Spec.Agent.Metrics.BindAddress = ":9777"
			allowed(t, "applying a changed one", op.Apply(ctx(t), agentdaemonset.Build(bc, agentDefaults()), client.FieldOwner(daemonset.FieldManager), client.ForceOwnership))
			allowed(t, "deleting it", op.Delete(ctx(t), &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: opts.Namespace, Name: agentdaemonset.Name(bc.Name)}},
				client.PropagationPolicy(metav1.DeletePropagationBackground)))
		})
	}
}

// TestOperatorAppliesUnderThePolicy: the running operator, under both
// operator policies since the suite installed them, assigns a Node to a new
// BladeConfig, applies its DaemonSet and, when the BladeConfig goes,
// deletes the DaemonSet and takes the label back.
func TestOperatorAppliesUnderThePolicy(t *testing.T) {
	testenv.Need(t)
	n := seedNode(t)
	orig := n.DeepCopy()
	n.Labels["kbtest-live"] = n.Name
	if err := admin.Patch(ctx(t), n, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
	bc := &kbv1.BladeConfig{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("live-%d", dsSeq.Add(1))}}
	bc.Spec.NodeSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"kbtest-live": n.Name}}
	bc.Spec.DaemonSet.Image = imagepolicy.DefaultRepository + ":live"
	if err := admin.Create(ctx(t), bc); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKey{Namespace: opts.Namespace, Name: agentdaemonset.Name(bc.Name)}
	testwait.Eventually(t, time.Minute, "the Node assigned and the DaemonSet applied", func(c context.Context) (bool, string) {
		node := &corev1.Node{}
		if err := admin.Get(c, client.ObjectKey{Name: n.Name}, node); err != nil {
			return false, err.Error()
		}
		ds := &appsv1.DaemonSet{}
		if err := admin.Get(c, key, ds); err != nil {
			return false, err.Error()
		}
		img := ds.Spec.Template.Spec.Containers[0].Image
		return node.Labels[kbv1.LabelConfig] == bc.Name && img == bc.Spec.DaemonSet.Image,
			fmt.Sprintf("label %q, image %s", node.Labels[kbv1.LabelConfig], img)
	})
	if err := admin.Delete(ctx(t), bc); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, time.Minute, "the DaemonSet and the label gone with the BladeConfig", func(c context.Context) (bool, string) {
		node := &corev1.Node{}
		if err := admin.Get(c, client.ObjectKey{Name: n.Name}, node); err != nil {
			return false, err.Error()
		}
		err := admin.Get(c, key, &appsv1.DaemonSet{})
		_, labelled := node.Labels[kbv1.LabelConfig]
		return apierrors.IsNotFound(err) && !labelled, fmt.Sprintf("DaemonSet: %v, labelled: %v", err, labelled)
	})
}

// TestOperatorDaemonSetAttacks: the operator's identity may write nothing
// but what agentdaemonset renders. Each attack widens the rendered
// DaemonSet in one way and is refused, while the same object is valid
// (an administrator's dry run passes).
func TestOperatorDaemonSetAttacks(t *testing.T) {
	testenv.Need(t)
	op := as(operatorConfig())
	pod := func(ds *appsv1.DaemonSet) *corev1.PodSpec { return &ds.Spec.Template.Spec }
	agent := func(ds *appsv1.DaemonSet) *corev1.Container { return &ds.Spec.Template.Spec.Containers[0] }
	hostPath := func(name, path string) corev1.Volume {
		return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path}}}
	}
	attacks := map[string]struct {
		widen func(ds *appsv1.DaemonSet)
		say   string
	}{
		"a name that is no BladeConfig's": {func(ds *appsv1.DaemonSet) { ds.Name = "node-exporter" }, "may only write its agent DaemonSets"},
		"another config's name":           {func(ds *appsv1.DaemonSet) { ds.Name = agentdaemonset.Name("other") }, "may only write its agent DaemonSets"},
		"without the managed-by label": {func(ds *appsv1.DaemonSet) { delete(ds.Labels, agentdaemonset.LabelManagedBy) },
			"may only write its agent DaemonSets"},
		"not owned by its BladeConfig": {func(ds *appsv1.DaemonSet) { ds.OwnerReferences = nil }, "must be controlled by BladeConfig"},
		"a selector adopting other pods": {func(ds *appsv1.DaemonSet) {
			ds.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{agentdaemonset.LabelName: "kubeblade"}}
		}, "select exactly its agent pods"},
		"an image from another repository": {func(ds *appsv1.DaemonSet) { agent(ds).Image = "ghcr.io/evil/kubeblade:v1" },
			"(repository ghcr.io/evil/kubeblade) is not from an allowed repository"},
		"every Node": {func(ds *appsv1.DaemonSet) { pod(ds).NodeSelector = nil }, "must run only on the Nodes labelled kubeblade.io/config="},
		"one chosen Node": {func(ds *appsv1.DaemonSet) {
			pod(ds).NodeSelector = map[string]string{"kubernetes.io/hostname": "control-plane-1"}
		}, "must run only on the Nodes labelled"},
		"another ServiceAccount":   {func(ds *appsv1.DaemonSet) { pod(ds).ServiceAccountName = "kubeblade-operator" }, "as ServiceAccount kubeblade-agent"},
		"service links":            {func(ds *appsv1.DaemonSet) { pod(ds).EnableServiceLinks = ptr.To(true) }, "enableServiceLinks false"},
		"the host's PID namespace": {func(ds *appsv1.DaemonSet) { pod(ds).HostPID = true }, "PID or IPC namespace"},
		"the host's IPC namespace": {func(ds *appsv1.DaemonSet) { pod(ds).HostIPC = true }, "PID or IPC namespace"},
		"a second container": {func(ds *appsv1.DaemonSet) {
			c := *agent(ds).DeepCopy()
			c.Name = "sidecar"
			pod(ds).Containers = append(pod(ds).Containers, c)
		}, "one container, agent"},
		"an init container": {func(ds *appsv1.DaemonSet) {
			c := *agent(ds).DeepCopy()
			c.Name, c.LivenessProbe, c.ReadinessProbe = "init", nil, nil
			pod(ds).InitContainers = []corev1.Container{c}
		}, "no init or ephemeral containers"},
		"a renamed container":         {func(ds *appsv1.DaemonSet) { agent(ds).Name = "shell" }, "one container, agent"},
		"another command":             {func(ds *appsv1.DaemonSet) { agent(ds).Command = []string{"sh", "-c", "nsenter -t 1 -m -- sh"} }, "must run kubeblade-agent"},
		"another binary of the image": {func(ds *appsv1.DaemonSet) { agent(ds).Command = []string{"kubeblade-operator"} }, "must run kubeblade-agent"},
		"other arguments": {func(ds *appsv1.DaemonSet) { agent(ds).Args = append(agent(ds).Args, "--config=/dev/shm/evil.yaml") },
			"must run kubeblade-agent"},
		"a config override in the environment": {func(ds *appsv1.DaemonSet) {
			agent(ds).Env = append(agent(ds).Env, corev1.EnvVar{Name: "KUBEBLADE_STEALTH", Value: "true"})
		}, "only NODE_NAME"},
		"a Secret in the environment": {func(ds *appsv1.DaemonSet) {
			agent(ds).Env = append(agent(ds).Env, corev1.EnvVar{Name: "NODE_NAME", ValueFrom: &corev1.EnvVarSource{
				SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "kubeblade-ca"}, Key: "tls.key"}}})
		}, "only NODE_NAME"},
		"a whole Secret as environment": {func(ds *appsv1.DaemonSet) {
			agent(ds).EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "kubeblade-ca"}}}}
		}, "only NODE_NAME"},
		"an exec probe": {func(ds *appsv1.DaemonSet) {
			agent(ds).LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c", "id"}}}}
		}, "no exec probes"},
		"a startup exec probe": {func(ds *appsv1.DaemonSet) {
			agent(ds).StartupProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c", "id"}}}}
		}, "no exec probes"},
		"a postStart hook": {func(ds *appsv1.DaemonSet) {
			agent(ds).Lifecycle = &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c", "id"}}}}
		}, "no lifecycle hooks"},
		"the host's root": {func(ds *appsv1.DaemonSet) {
			pod(ds).Volumes = append(pod(ds).Volumes, hostPath("root", "/"))
		}, "may mount only the host paths /dev, /sys, /var/lib/kubeblade, /run/kubeblade"},
		"the host's /etc": {func(ds *appsv1.DaemonSet) { pod(ds).Volumes = append(pod(ds).Volumes, hostPath("etc", "/etc")) }, "may mount only the host paths"},
		"a path below an allowed one": {func(ds *appsv1.DaemonSet) {
			pod(ds).Volumes = append(pod(ds).Volumes, hostPath("kubelet", "/var/lib/kubeblade/../kubelet"))
		}, ""},
		"the state directory's parent": {func(ds *appsv1.DaemonSet) { pod(ds).Volumes = append(pod(ds).Volumes, hostPath("lib", "/var/lib")) }, "may mount only the host paths"},
		"a Secret volume": {func(ds *appsv1.DaemonSet) {
			pod(ds).Volumes = append(pod(ds).Volumes, corev1.Volume{Name: "ca", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "kubeblade-ca"}}})
		}, "and no other volumes"},
	}
	for name, a := range attacks {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ds := rendered(t, phantomConfig(nil))
			a.widen(ds)
			if a.say == "" {
				// Refused by the API server's own validation already.
				refused(t, name, op.Create(ctx(t), ds.DeepCopy()))
				return
			}
			allowed(t, "the same DaemonSet, validated for an administrator", admin.Create(ctx(t), ds.DeepCopy(), client.DryRunAll))
			refused(t, name, op.Create(ctx(t), ds.DeepCopy()), daemonSetPolicy, a.say)
		})
	}

	// Widening a DaemonSet the operator wrote before (an update) is refused
	// the same way.
	bc := phantomConfig(nil)
	if err := op.Apply(ctx(t), agentdaemonset.Build(bc, agentDefaults()), client.FieldOwner(daemonset.FieldManager), client.ForceOwnership); err != nil {
		t.Fatal(err)
	}
	ds := &appsv1.DaemonSet{}
	if err := admin.Get(ctx(t), client.ObjectKey{Namespace: opts.Namespace, Name: agentdaemonset.Name(bc.Name)}, ds); err != nil {
		t.Fatal(err)
	}
	orig := ds.DeepCopy()
	ds.Spec.Template.Spec.Containers[0].Image = "ghcr.io/evil/kubeblade:v1"
	refused(t, "changing the image of its DaemonSet", op.Patch(ctx(t), ds, client.MergeFrom(orig)), daemonSetPolicy, "is not from an allowed repository")
	ds = orig.DeepCopy()
	ds.Spec.Template.Spec.Volumes = append(ds.Spec.Template.Spec.Volumes, corev1.Volume{Name: "root",
		VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}})
	refused(t, "adding a volume to its DaemonSet", op.Patch(ctx(t), ds, client.MergeFrom(orig)), daemonSetPolicy, "may mount only the host paths")

	// It deletes only its own DaemonSets.
	foreign := rendered(t, phantomConfig(nil))
	foreign.Name, foreign.Labels = "someone-elses", map[string]string{"app": "someone-elses"}
	foreign.OwnerReferences = nil
	if err := admin.Create(ctx(t), foreign); err != nil {
		t.Fatal(err)
	}
	refused(t, "deleting someone else's DaemonSet", op.Delete(ctx(t), foreign), daemonSetPolicy, "may only write its agent DaemonSets", "someone-elses")
	allowed(t, "deleting its own", op.Delete(ctx(t), orig))
}
