package security

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
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

		// Issue 31, finding 3: the pod template as a whole.
		"the binary's directory from the host's /dev/shm": {func(ds *appsv1.DaemonSet) {
			agent(ds).VolumeMounts = append(agent(ds).VolumeMounts, corev1.VolumeMount{Name: "dev", MountPath: "/usr/local/bin", SubPath: "shm"})
		}, "mounts exactly dev at /dev"},
		"a subPath of the /dev mount":   {func(ds *appsv1.DaemonSet) { agent(ds).VolumeMounts[0].SubPath = "shm" }, "without subPath"},
		"the state directory elsewhere": {func(ds *appsv1.DaemonSet) { agent(ds).VolumeMounts[2].MountPath = "/etc" }, "mounts exactly"},
		"/dev mounted with bidirectional propagation": {func(ds *appsv1.DaemonSet) {
			agent(ds).VolumeMounts[0].MountPropagation = ptr.To(corev1.MountPropagationBidirectional)
		}, "mounts exactly"},
		"a mount dropped": {func(ds *appsv1.DaemonSet) { agent(ds).VolumeMounts = agent(ds).VolumeMounts[:3] }, "mounts exactly"},
		"/dev's volume of another hostPath type": {func(ds *appsv1.DaemonSet) {
			pod(ds).Volumes[0].HostPath.Type = ptr.To(corev1.HostPathDirectoryOrCreate)
		}, "have exactly the volumes"},
		"a working directory in /dev/shm": {func(ds *appsv1.DaemonSet) { agent(ds).WorkingDir = "/dev/shm" }, "not workingDir"},
		"a probe at the metadata address": {func(ds *appsv1.DaemonSet) {
			agent(ds).LivenessProbe.HTTPGet.Host = "169.254.169.254"
			agent(ds).LivenessProbe.HTTPGet.Port = intstr.FromInt32(80)
			agent(ds).LivenessProbe.HTTPGet.Path = "/latest/meta-data/iam/security-credentials/"
		}, "not livenessProbe"},
		"a probe at a host name": {func(ds *appsv1.DaemonSet) { agent(ds).ReadinessProbe.HTTPGet.Host = "metadata.google.internal" }, "not readinessProbe"},
		"a probe with headers": {func(ds *appsv1.DaemonSet) {
			agent(ds).ReadinessProbe.HTTPGet.HTTPHeaders = []corev1.HTTPHeader{{Name: "Metadata-Flavor", Value: "Google"}}
		}, "not readinessProbe"},
		"a TCP probe": {func(ds *appsv1.DaemonSet) {
			agent(ds).LivenessProbe.HTTPGet = nil
			agent(ds).LivenessProbe.TCPSocket = &corev1.TCPSocketAction{Host: "10.0.0.1", Port: intstr.FromInt32(22)}
		}, "not livenessProbe"},
		"a startup HTTP probe": {func(ds *appsv1.DaemonSet) {
			agent(ds).StartupProbe = agent(ds).LivenessProbe.DeepCopy()
		}, "not startupProbe"},
		"image pull secrets": {func(ds *appsv1.DaemonSet) {
			pod(ds).ImagePullSecrets = []corev1.LocalObjectReference{{Name: "kubeblade-ca"}}
		}, "not imagePullSecrets"},
		"a runtime class":         {func(ds *appsv1.DaemonSet) { pod(ds).RuntimeClassName = ptr.To("unconfined") }, "not runtimeClassName"},
		"the template's nodeName": {func(ds *appsv1.DaemonSet) { pod(ds).NodeName = "control-plane-1" }, "not nodeName"},
		"the CA key as termination message": {func(ds *appsv1.DaemonSet) {
			agent(ds).TerminationMessagePath = "/var/lib/kubeblade/ca.key"
		}, "not terminationMessagePath"},
		"host aliases": {func(ds *appsv1.DaemonSet) {
			pod(ds).HostAliases = []corev1.HostAlias{{IP: "192.0.2.66", Hostnames: []string{"ghcr.io"}}}
		}, "not hostAliases"},
		"a DNS config": {func(ds *appsv1.DaemonSet) {
			pod(ds).DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{"192.0.2.53"}}
		}, "not dnsConfig"},
		"another DNS policy": {func(ds *appsv1.DaemonSet) { pod(ds).DNSPolicy = corev1.DNSDefault }, "not dnsPolicy"},
		"an affinity to the control plane": {func(ds *appsv1.DaemonSet) {
			pod(ds).Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.NodeSelectorOpExists}}}}}}}
		}, "not affinity"},
		"no ServiceAccount token":    {func(ds *appsv1.DaemonSet) { pod(ds).AutomountServiceAccountToken = ptr.To(false) }, "not automountServiceAccountToken"},
		"a shared process namespace": {func(ds *appsv1.DaemonSet) { pod(ds).ShareProcessNamespace = ptr.To(true) }, "not shareProcessNamespace"},
		"pod sysctls": {func(ds *appsv1.DaemonSet) {
			pod(ds).SecurityContext = &corev1.PodSecurityContext{Sysctls: []corev1.Sysctl{{Name: "kernel.shm_rmid_forced", Value: "0"}}}
		}, "not securityContext"},
		"a long grace period": {func(ds *appsv1.DaemonSet) { pod(ds).TerminationGracePeriodSeconds = ptr.To[int64](86400) }, "not terminationGracePeriodSeconds"},
		"another scheduler":   {func(ds *appsv1.DaemonSet) { pod(ds).SchedulerName = "evil-scheduler" }, "not schedulerName"},
		"a host port": {func(ds *appsv1.DaemonSet) {
			agent(ds).Ports = []corev1.ContainerPort{{ContainerPort: 22, HostPort: 22}}
		}, "not ports"},
		"added capabilities": {func(ds *appsv1.DaemonSet) {
			agent(ds).SecurityContext.Capabilities = &corev1.Capabilities{Add: []corev1.Capability{"SYS_ADMIN"}}
		}, "not securityContext"},
		"no seccomp and no AppArmor": {func(ds *appsv1.DaemonSet) {
			agent(ds).SecurityContext.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}
			agent(ds).SecurityContext.AppArmorProfile = &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}
		}, "not securityContext"},
		"another user":       {func(ds *appsv1.DaemonSet) { agent(ds).SecurityContext.RunAsUser = ptr.To[int64](1000) }, "not securityContext"},
		"a terminal":         {func(ds *appsv1.DaemonSet) { agent(ds).Stdin, agent(ds).TTY = true, true }, "not stdin, tty"},
		"a second NODE_NAME": {func(ds *appsv1.DaemonSet) { agent(ds).Env = append(agent(ds).Env, agent(ds).Env[0]) }, "NODE_NAME as its one"},
		"a pod annotation": {func(ds *appsv1.DaemonSet) {
			ds.Spec.Template.Annotations["k8s.v1.cni.cncf.io/networks"] = "macvlan-conf"
		}, "not annotations"},
		"a pod label": {func(ds *appsv1.DaemonSet) { ds.Spec.Template.Labels["team"] = "evil" }, "not labels"},
		"a pod finalizer": {func(ds *appsv1.DaemonSet) {
			ds.Spec.Template.Finalizers = []string{"evil.example/keep"}
		}, "not finalizers"},
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
	ds = orig.DeepCopy()
	ds.Spec.Template.Spec.Containers[0].VolumeMounts = append(ds.Spec.Template.Spec.Containers[0].VolumeMounts,
		corev1.VolumeMount{Name: "dev", MountPath: "/usr/local/bin", SubPath: "shm"})
	refused(t, "mounting /dev/shm over the agent's binaries", op.Patch(ctx(t), ds, client.MergeFrom(orig)), daemonSetPolicy, "mounts exactly")
	for how, p := range map[string]client.Patch{
		"JSON patch": client.RawPatch(types.JSONPatchType, []byte(`[{"op":"add","path":"/spec/template/spec/nodeName","value":"control-plane-1"}]`)),
		"strategic merge patch": client.RawPatch(types.StrategicMergePatchType,
			[]byte(`{"spec":{"template":{"spec":{"containers":[{"name":"agent","workingDir":"/dev/shm"}]}}}}`)),
	} {
		refused(t, how+" widening its DaemonSet", op.Patch(ctx(t), orig.DeepCopy(), p), daemonSetPolicy)
		refused(t, "dry-run "+how+" widening its DaemonSet", op.Patch(ctx(t), orig.DeepCopy(), p, client.DryRunAll), daemonSetPolicy)
	}
	widened := agentdaemonset.Build(bc, agentDefaults())
	widened.Spec.Template.Spec.WithRuntimeClassName("unconfined")
	refused(t, "applying a widened DaemonSet with force", op.Apply(ctx(t), widened, client.FieldOwner(daemonset.FieldManager), client.ForceOwnership),
		daemonSetPolicy, "runtimeClassName")

	// kubectl rollout restart, by an administrator, stays possible: the
	// operator still applies the DaemonSet afterwards.
	if err := admin.Patch(ctx(t), orig.DeepCopy(), client.RawPatch(types.StrategicMergePatchType,
		[]byte(`{"spec":{"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":"2026-01-01T00:00:00Z"}}}}}`))); err != nil {
		t.Fatal(err)
	}
	allowed(t, "applying after kubectl rollout restart", op.Apply(ctx(t), agentdaemonset.Build(bc, agentDefaults()),
		client.FieldOwner(daemonset.FieldManager), client.ForceOwnership))

	// It deletes only its own DaemonSets.
	foreign := rendered(t, phantomConfig(nil))
	foreign.Name, foreign.Labels = "someone-elses", map[string]string{"app": "someone-elses"}
	foreign.OwnerReferences = nil
	if err := admin.Create(ctx(t), foreign); err != nil {
		t.Fatal(err)
	}
	// The name is fixed: the next run of go test -count=N creates it again.
	t.Cleanup(func() {
		if err := admin.Delete(context.Background(), foreign); client.IgnoreNotFound(err) != nil {
			t.Errorf("deleting %s: %v", foreign.Name, err)
		}
	})
	refused(t, "deleting someone else's DaemonSet", op.Delete(ctx(t), foreign), daemonSetPolicy, "may only write its agent DaemonSets", "someone-elses")
	allowed(t, "deleting its own", op.Delete(ctx(t), orig))
}

// TestOperatorDaemonSetPolicyCoversEveryField guards the DaemonSet policy
// against API growth, as TestNodePolicyCoversEveryField does the Node
// policies: every field of the pod template, the container, its security
// contexts, mounts and probes is named by the policy (checked to be
// absent, at its default or as rendered) or listed here as free. A
// Kubernetes upgrade that adds a field fails this test until the policy
// names it.
func TestOperatorDaemonSetPolicyCoversEveryField(t *testing.T) {
	raw := readPolicyFile(t, "operator-daemonsets.yaml")
	for _, s := range []struct {
		typ      reflect.Type
		prefixes []string
		free     map[string]string
	}{
		{reflect.TypeOf(corev1.PodSpec{}), []string{"variables.pod.", "variables.pod.?"}, map[string]string{
			"containers":        "variables.containers",
			"tolerations":       "chosen in the BladeConfig's spec.daemonSet",
			"priorityClassName": "chosen in the BladeConfig's spec.daemonSet",
		}},
		{reflect.TypeOf(corev1.PodSecurityContext{}), []string{"variables.pod.securityContext."}, nil},
		{reflect.TypeOf(corev1.Container{}), []string{"variables.agent.", "variables.agent.?", "variables.containers[0].", "variables.containers[0].?"}, map[string]string{
			"image":           "the allowed repositories (variables.image)",
			"imagePullPolicy": "chosen in the BladeConfig's spec.daemonSet",
			"resources":       "chosen in the BladeConfig's spec.daemonSet (claims are refused)",
			"livenessProbe":   "badProbes",
			"readinessProbe":  "badProbes",
		}},
		{reflect.TypeOf(corev1.SecurityContext{}), []string{"variables.agent.securityContext.", "variables.agent.?securityContext.?"}, nil},
		{reflect.TypeOf(corev1.VolumeMount{}), []string{"m.", "m.?"}, nil},
		{reflect.TypeOf(corev1.Probe{}), []string{"variables.agent[k].", "variables.agent[k].?"}, nil},
		{reflect.TypeOf(corev1.ProbeHandler{}), []string{"variables.agent[k]."}, nil},
		{reflect.TypeOf(corev1.HTTPGetAction{}), []string{"variables.agent[k].httpGet.", "variables.agent[k].httpGet.?"}, map[string]string{
			"port": "follows the agent's metrics address",
		}},
		{reflect.TypeOf(metav1.ObjectMeta{}), []string{"variables.template.metadata.?", "variables.template.metadata."}, map[string]string{
			"selfLink": "server-managed; not copied from a template", "uid": "server-managed; not copied from a template",
			"resourceVersion": "server-managed; not copied from a template", "generation": "server-managed; not copied from a template",
			"creationTimestamp": "server-managed; not copied from a template", "deletionTimestamp": "server-managed; not copied from a template",
			"managedFields": "server-managed; not copied from a template",
		}},
	} {
		t.Run(s.typ.Name(), func(t *testing.T) {
			for i := 0; i < s.typ.NumField(); i++ {
				f := s.typ.Field(i)
				tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
				if tag == "" || tag == "-" {
					continue // embedded (Probe's ProbeHandler): its own row
				}
				if _, ok := s.free[tag]; ok {
					continue
				}
				named := false
				for _, p := range s.prefixes {
					if regexp.MustCompile(regexp.QuoteMeta(p+tag) + `\b`).MatchString(raw) {
						named = true
					}
				}
				if !named {
					t.Errorf("config/admission/operator-daemonsets.yaml does not name %s.%s: a DaemonSet could set it", s.typ.Name(), tag)
				}
			}
		})
	}
}
