// Package agentdaemonset builds the agent DaemonSet of a BladeConfig, which
// runs on the Nodes labelled kubeblade.io/config=<name>, and names and
// labels it. It is pure: the daemonset controller applies what Build
// returns, and the status and finalizer controllers, the uninstall command
// and the tests find DaemonSets by the same names and labels. The pod
// template depends on spec.daemonSet and on the agent settings that take
// effect only at start: agents read the rest of spec.agent live, so most
// config changes never restart a pod.
//
// The admission policy kubeblade-operator-daemonsets
// (config/admission/operator-daemonsets.yaml) lets the operator's
// ServiceAccount write nothing but what Build renders: its names, labels,
// command, arguments, environment, volumes and their mounts, probes,
// security context and single container, and no pod template field Build
// does not set. A change here that the policy does not allow fails
// test/security.
package agentdaemonset

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	agentconfigv1 "github.com/kubeblade/kubeblade/api/agentconfig/v1alpha1"
	kbv1 "github.com/kubeblade/kubeblade/api/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/config"
)

// Paths on the host the agent needs.
const (
	StateDir  = "/var/lib/kubeblade"
	SocketDir = "/run/kubeblade"
	// ContainerName is the agent container's name.
	ContainerName = "agent"
	// Component is the app.kubernetes.io/component label value.
	Component = "agent"
	// NamePrefix prefixes every agent DaemonSet's name.
	NamePrefix = "kubeblade-agent-"
)

// Well-known labels on the DaemonSet and its pods.
const (
	LabelName      = "app.kubernetes.io/name"
	LabelInstance  = "app.kubernetes.io/instance"
	LabelComponent = "app.kubernetes.io/component"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "kubeblade-operator"
)

// Defaults fill what a BladeConfig leaves out.
type Defaults struct {
	// Namespace the DaemonSets live in.
	Namespace string
	// Image is the agent image when spec.daemonSet.image is empty: the
	// operator's own (one image holds all binaries).
	Image string
	// ImagePullPolicy when spec.daemonSet.imagePullPolicy is empty.
	ImagePullPolicy corev1.PullPolicy
	// ServiceAccountName the agents run as.
	ServiceAccountName string
	// PriorityClassName when spec.daemonSet.priorityClassName is empty.
	PriorityClassName string
}

// DefaultDefaults are the operator's built-in defaults.
func DefaultDefaults() Defaults {
	return Defaults{
		Namespace:          "kubeblade-system",
		ImagePullPolicy:    corev1.PullIfNotPresent,
		ServiceAccountName: "kubeblade-agent",
		PriorityClassName:  "system-node-critical",
	}
}

// AgentArgs are the agent's command-line arguments in a DaemonSet: the
// Kubernetes mode, its Node from the downward API and the hostPath state
// directory that keeps its key across restarts.
func AgentArgs() []string {
	return []string{
		"--kubernetes",
		"--node-name=$(NODE_NAME)",
		"--state-dir=" + StateDir,
	}
}

// Name is the DaemonSet's name for a BladeConfig.
func Name(configName string) string { return NamePrefix + configName }

// SelectorLabels select one config's agent pods.
func SelectorLabels(configName string) map[string]string {
	return map[string]string{
		LabelName:      "kubeblade",
		LabelInstance:  configName,
		LabelComponent: Component,
	}
}

// Build returns the DaemonSet for bc as a server-side apply configuration.
func Build(bc *kbv1.BladeConfig, d Defaults) *appsv1ac.DaemonSetApplyConfiguration {
	spec := bc.Spec.DaemonSet
	image := spec.Image
	if image == "" {
		image = d.Image
	}
	pull := spec.ImagePullPolicy
	if pull == "" {
		pull = d.ImagePullPolicy
	}
	prio := spec.PriorityClassName
	if prio == "" {
		prio = d.PriorityClassName
	}
	sel := SelectorLabels(bc.Name)
	objLabels := map[string]string{LabelManagedBy: ManagedBy}
	for k, v := range sel {
		objLabels[k] = v
	}

	container := corev1ac.Container().
		WithName(ContainerName).
		WithImage(image).
		WithImagePullPolicy(pull).
		WithCommand("kubeblade-agent").
		WithArgs(AgentArgs()...).
		WithEnv(corev1ac.EnvVar().WithName("NODE_NAME").WithValueFrom(
			corev1ac.EnvVarSource().WithFieldRef(corev1ac.ObjectFieldSelector().WithAPIVersion("v1").WithFieldPath("spec.nodeName")))).
		// Privileged: the GPIO character devices, PWM and LED class files
		// under /dev and /sys belong to root and are not in the default
		// device cgroup allow-list.
		WithSecurityContext(corev1ac.SecurityContext().WithPrivileged(true).WithRunAsUser(0)).
		WithVolumeMounts(
			corev1ac.VolumeMount().WithName("dev").WithMountPath("/dev"),
			corev1ac.VolumeMount().WithName("sys").WithMountPath("/sys"),
			corev1ac.VolumeMount().WithName("state").WithMountPath(StateDir),
			corev1ac.VolumeMount().WithName("run").WithMountPath(SocketDir),
		)
	if live, ready := Probes(bc.Spec.Agent.Metrics.BindAddress); live != nil {
		container.WithLivenessProbe(live).WithReadinessProbe(ready)
	}
	if r := spec.Resources; r != nil {
		rr := corev1ac.ResourceRequirements()
		if len(r.Limits) > 0 {
			rr.WithLimits(r.Limits)
		}
		if len(r.Requests) > 0 {
			rr.WithRequests(r.Requests)
		}
		container.WithResources(rr)
	}

	pod := corev1ac.PodSpec().
		WithServiceAccountName(d.ServiceAccountName).
		WithPriorityClassName(prio).
		// Service links would put KUBEBLADE_* variables of any Service
		// named kubeblade-* into the agent's environment, where its config
		// loader reads KUBEBLADE_<PATH> overrides.
		WithEnableServiceLinks(false).
		// The agent serves gRPC on the blade's own addresses and its port
		// is live config, so it uses the host's network.
		WithHostNetwork(true).
		WithDNSPolicy(corev1.DNSClusterFirstWithHostNet).
		WithNodeSelector(map[string]string{kbv1.LabelConfig: bc.Name}).
		WithTolerations(tolerations(spec.Tolerations)...).
		WithContainers(container).
		WithVolumes(
			hostPath("dev", "/dev", ""),
			hostPath("sys", "/sys", ""),
			hostPath("state", StateDir, corev1.HostPathDirectoryOrCreate),
			hostPath("run", SocketDir, corev1.HostPathDirectoryOrCreate),
		)

	return appsv1ac.DaemonSet(Name(bc.Name), d.Namespace).
		WithLabels(objLabels).
		WithOwnerReferences(metav1ac.OwnerReference().
			WithAPIVersion(kbv1.GroupVersion.String()).
			WithKind("BladeConfig").
			WithName(bc.Name).
			WithUID(bc.UID).
			WithController(true).
			WithBlockOwnerDeletion(true)).
		WithSpec(appsv1ac.DaemonSetSpec().
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(sel)).
			WithUpdateStrategy(appsv1ac.DaemonSetUpdateStrategy().
				WithType("RollingUpdate").
				WithRollingUpdate(appsv1ac.RollingUpdateDaemonSet().WithMaxUnavailable(intstr.FromInt32(1)))).
			WithTemplate(corev1ac.PodTemplateSpec().
				WithLabels(objLabels).
				WithAnnotations(map[string]string{AnnotationStartupConfig: StartupConfigHash(bc.Spec.Agent)}).
				WithSpec(pod)))
}

// AnnotationStartupConfig on the pod template carries a hash of the agent
// settings that take effect only when the agent starts
// (agentconfigv1.StartOnly). Everything else in spec.agent is applied live
// by the agents and must not roll the pods; a change to these must, or it
// would never take effect.
const AnnotationStartupConfig = "kubeblade.io/startup-config-hash"

// StartupConfigHash hashes the start-only sections of an agent config.
func StartupConfigHash(a agentconfigv1.AgentConfig) string {
	raw, _ := json.Marshal(a.StartOnly())
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:8])
}

// tolerations default to tolerating every taint, so blades tainted for
// special workloads still get their agent.
func tolerations(ts []corev1.Toleration) []*corev1ac.TolerationApplyConfiguration {
	if len(ts) == 0 {
		return []*corev1ac.TolerationApplyConfiguration{corev1ac.Toleration().WithOperator(corev1.TolerationOpExists)}
	}
	out := make([]*corev1ac.TolerationApplyConfiguration, 0, len(ts))
	for _, t := range ts {
		ac := corev1ac.Toleration()
		if t.Key != "" {
			ac.WithKey(t.Key)
		}
		if t.Operator != "" {
			ac.WithOperator(t.Operator)
		}
		if t.Value != "" {
			ac.WithValue(t.Value)
		}
		if t.Effect != "" {
			ac.WithEffect(t.Effect)
		}
		if t.TolerationSeconds != nil {
			ac.WithTolerationSeconds(*t.TolerationSeconds)
		}
		out = append(out, ac)
	}
	return out
}

// Probe timings of the agent container. Liveness restarts an agent whose
// loop has stalled (the agent itself waits agent.MinStallAfter before it
// reports that), after three failed probes; readiness follows the agent's
// own view within a few seconds.
const (
	LivenessPeriodSeconds  = 10
	ReadinessPeriodSeconds = 5
	ProbeTimeoutSeconds    = 5
	ProbeFailureThreshold  = 3
)

// Probes returns the agent container's liveness (/healthz) and readiness
// (/readyz) probes on the agent's ops endpoint, spec.agent.metrics.bindAddress
// (default config.DefaultMetricsAddress). The agent uses the host network,
// so the kubelet probes it from the host: a wildcard bind is probed on
// 127.0.0.1, a specific address on that address. With the endpoint
// disabled ("0", which the CRD refuses in a BladeConfig), on port 0 (any
// free port: tests) or unparsable (the CRD refuses that too) there is
// nothing to probe and both are nil; the daemonset controller then warns.
func Probes(bindAddress string) (live, ready *corev1ac.ProbeApplyConfiguration) {
	if bindAddress == "" {
		bindAddress = config.DefaultMetricsAddress
	}
	if bindAddress == "0" {
		return nil, nil
	}
	host, portStr, err := net.SplitHostPort(bindAddress)
	if err != nil {
		return nil, nil
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil || port == 0 {
		return nil, nil
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	probe := func(path string, period int32) *corev1ac.ProbeApplyConfiguration {
		return corev1ac.Probe().
			WithHTTPGet(corev1ac.HTTPGetAction().WithHost(host).WithPath(path).WithPort(intstr.FromInt32(int32(port))).WithScheme(corev1.URISchemeHTTP)).
			WithPeriodSeconds(period).
			WithTimeoutSeconds(ProbeTimeoutSeconds).
			WithFailureThreshold(ProbeFailureThreshold)
	}
	return probe("/healthz", LivenessPeriodSeconds), probe("/readyz", ReadinessPeriodSeconds)
}

func hostPath(name, path string, typ corev1.HostPathType) *corev1ac.VolumeApplyConfiguration {
	hp := corev1ac.HostPathVolumeSource().WithPath(path)
	if typ != "" {
		hp.WithType(typ)
	}
	return corev1ac.Volume().WithName(name).WithHostPath(hp)
}
