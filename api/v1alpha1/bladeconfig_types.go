package v1alpha1

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentconfigv1 "github.com/kubeblade/kubeblade/api/agentconfig/v1alpha1"
)

// BladeConfig condition types, readable by Flux and kstatus health checks.
const (
	BladeConfigReady       = "Ready"
	BladeConfigProgressing = "Progressing"
	BladeConfigDegraded    = "Degraded"
	BladeConfigConflict    = "Conflict"
)

// Labels and annotations of kubeblade's Kubernetes contract.
const (
	// LabelConfig on a Node names the BladeConfig it is assigned to.
	LabelConfig = "kubeblade.io/config"
	// LabelBlade is "true" on blades and "false" where the agent found none.
	LabelBlade   = "kubeblade.io/blade"
	LabelSoC     = "kubeblade.io/soc"
	LabelFanUnit = "kubeblade.io/fan-unit"
	LabelPower   = "kubeblade.io/power"

	AnnotationIdentify = "kubeblade.io/identify"
	AnnotationStealth  = "kubeblade.io/stealth"
	AnnotationFanSpeed = "kubeblade.io/fan-speed"
	// AnnotationFanPeer names the Node whose blade shares this blade's
	// standard fan unit; both run the fan at the higher of their demands.
	AnnotationFanPeer = "kubeblade.io/fan-peer"

	// AnnotationMaintenance "true" asks the operator to cordon and drain
	// the Node ("false" ends maintenance). A long press of the blade's
	// button toggles it; people may set it too.
	AnnotationMaintenance = "kubeblade.io/maintenance"
	// AnnotationMaintenanceState is the operator's progress report:
	// queued, draining, drained or failed.
	AnnotationMaintenanceState = "kubeblade.io/maintenance-state"
	// AnnotationMaintenanceRequestedAt records (RFC 3339) when the operator
	// first saw the request: the queue's order, kept across restarts.
	AnnotationMaintenanceRequestedAt = "kubeblade.io/maintenance-requested-at"
	// AnnotationMaintenanceDrainStartedAt records when draining began, so
	// the drain timeout survives an operator restart.
	AnnotationMaintenanceDrainStartedAt = "kubeblade.io/maintenance-drain-started-at"
	// AnnotationMaintenanceCordoned is "true" while the Node's cordon is
	// kubeblade's own: only such a cordon is lifted when maintenance ends.
	AnnotationMaintenanceCordoned = "kubeblade.io/maintenance-cordoned"

	// TaintThermalCritical is set (NoSchedule) while critical, if asked for.
	TaintThermalCritical = "kubeblade.io/thermal-critical"
	// NodeConditionThermalCritical is the Node condition type.
	NodeConditionThermalCritical = "BladeThermalCritical"

	// FinalizerCleanup holds a BladeConfig until the operator removed its
	// agent DaemonSet and its kubeblade.io/config Node labels.
	FinalizerCleanup = "kubeblade.io/cleanup"
)

// Maintenance states (AnnotationMaintenanceState).
const (
	MaintenanceQueued   = "queued"
	MaintenanceDraining = "draining"
	MaintenanceDrained  = "drained"
	MaintenanceFailed   = "failed"
)

// BladeConfig says how the agents on a set of blades behave and how they are
// deployed. Each candidate Node is assigned to exactly one BladeConfig: the
// one with the highest priority, ties going to the oldest, then the name.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=bc
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Priority",type=integer,JSONPath=`.spec.priority`
// +kubebuilder:printcolumn:name="Matched",type=integer,JSONPath=`.status.matchedNodes`
// +kubebuilder:printcolumn:name="Applied",type=integer,JSONPath=`.status.appliedNodes`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type BladeConfig struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec BladeConfigSpec `json:"spec,omitempty"`
	// +optional
	Status BladeConfigStatus `json:"status,omitempty"`
}

// BladeConfigSpec is the desired configuration.
type BladeConfigSpec struct {
	// NodeSelector picks candidate Nodes. Empty means
	// kubernetes.io/arch=arm64. Nodes labelled kubeblade.io/blade=false are
	// never candidates.
	// +optional
	NodeSelector *metav1.LabelSelector `json:"nodeSelector,omitempty"`
	// Priority decides between BladeConfigs that select the same Node:
	// highest wins; ties go to the oldest, then to the name.
	// +optional
	Priority int32 `json:"priority,omitempty"`
	// Agent is the agents' configuration, applied live without restarts.
	// Here the metrics endpoint binds an IP address or every interface and
	// cannot be disabled (the DaemonSet's probes use it), and the gRPC socket
	// is a file name or a file in /run/kubeblade. The agent checks the same
	// (config.ValidateSpec).
	// +kubebuilder:validation:XValidation:rule="!has(self.metrics) || !has(self.metrics.bindAddress) || self.metrics.bindAddress != '0'",message="metrics.bindAddress cannot be \"0\" in a BladeConfig: the agent DaemonSet's liveness and readiness probes use that endpoint; bind it to 127.0.0.1:9666 to keep it off the network"
	// +kubebuilder:validation:XValidation:rule="!has(self.metrics) || !has(self.metrics.bindAddress) || self.metrics.bindAddress == '0' || !self.metrics.bindAddress.contains(':') || self.metrics.bindAddress.substring(0, self.metrics.bindAddress.lastIndexOf(':')).replace('[', '').replace(']', '') == '' || (isIP(self.metrics.bindAddress.substring(0, self.metrics.bindAddress.lastIndexOf(':')).replace('[', '').replace(']', '')) && !ip(self.metrics.bindAddress.substring(0, self.metrics.bindAddress.lastIndexOf(':')).replace('[', '').replace(']', '')).isLinkLocalUnicast())",message="metrics.bindAddress in a BladeConfig binds an IP address or every interface (\":9666\"), not a host name or a link-local address: the kubelet probes that host"
	// +kubebuilder:validation:XValidation:rule="!has(self.grpc) || !has(self.grpc.socketPath) || self.grpc.socketPath.matches('^(/run/kubeblade/)?[A-Za-z0-9_-][A-Za-z0-9_.-]{0,63}[.]sock$')",message="grpc.socketPath in a BladeConfig is a socket file name (agent.sock) or one in /run/kubeblade (/run/kubeblade/agent.sock)"
	// +optional
	Agent agentconfigv1.AgentConfig `json:"agent,omitempty"`
	// DaemonSet shapes the agent DaemonSet.
	// +optional
	DaemonSet DaemonSetSpec `json:"daemonSet,omitempty"`
	// Maintenance says how the operator drains this config's blades when
	// kubeblade.io/maintenance is "true" on their Node.
	// +optional
	Maintenance MaintenanceSpec `json:"maintenance,omitempty"`
}

// MaintenanceSpec shapes maintenance: cordon, then drain through the
// Eviction API.
type MaintenanceSpec struct {
	// MaxConcurrent is the most blades in maintenance (draining, drained or
	// failed) cluster-wide before one of this config's blades may start:
	// others wait, queued in the order they asked. Default 1.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	// +kubebuilder:default=1
	// +optional
	MaxConcurrent *int32 `json:"maxConcurrent,omitempty"`
	// DeleteEmptyDirData lets the drain evict pods with emptyDir volumes,
	// whose data is then lost; without it such pods stop the drain.
	// +optional
	DeleteEmptyDirData bool `json:"deleteEmptyDirData,omitempty"`
	// DrainTimeout is how long a drain may take before it ends as failed,
	// naming the pods that block it (default 10m).
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('24h')",message="drainTimeout must be between 1s and 24h"
	// +optional
	DrainTimeout *metav1.Duration `json:"drainTimeout,omitempty"`
}

// Defaults of MaintenanceSpec.
const (
	DefaultMaintenanceMaxConcurrent = 1
	DefaultDrainTimeout             = 10 * time.Minute
)

// MaxConcurrentOrDefault is MaxConcurrent or its default.
func (m MaintenanceSpec) MaxConcurrentOrDefault() int {
	if m.MaxConcurrent == nil || *m.MaxConcurrent < 1 {
		return DefaultMaintenanceMaxConcurrent
	}
	return int(*m.MaxConcurrent)
}

// DrainTimeoutOrDefault is DrainTimeout or its default.
func (m MaintenanceSpec) DrainTimeoutOrDefault() time.Duration {
	if m.DrainTimeout == nil || m.DrainTimeout.Duration <= 0 {
		return DefaultDrainTimeout
	}
	return m.DrainTimeout.Duration
}

// DaemonSetSpec shapes the agent DaemonSet.
type DaemonSetSpec struct {
	// Image of the agent; default: the operator's own image. A reference
	// as `docker pull` takes it: [registry[:port]/]path[:tag][@digest],
	// path components lower case.
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^(([a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])(\.([a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))*(:[0-9]+)?/)?[a-z0-9]+(([._]|__|-+)[a-z0-9]+)*(/[a-z0-9]+(([._]|__|-+)[a-z0-9]+)*)*(:[a-zA-Z0-9_][a-zA-Z0-9_.-]{0,127})?(@[A-Za-z][A-Za-z0-9]*([-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?$`
	// +optional
	Image string `json:"image,omitempty"`
	// ImagePullPolicy of the agent container.
	// +kubebuilder:validation:Enum=Always;IfNotPresent;Never
	// +optional
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`
	// Tolerations of the agent pods. Unset means tolerate every taint, so
	// blades tainted for special workloads still get their agent. The
	// rules the API server applies to a pod's tolerations are checked here
	// already, so a BladeConfig that would give an invalid DaemonSet is
	// refused instead of accepted and failing later.
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:XValidation:rule="self.all(t, !has(t.effect) || t.effect in ['NoSchedule', 'PreferNoSchedule', 'NoExecute'])",message="toleration effect must be NoSchedule, PreferNoSchedule or NoExecute (or empty: every effect)"
	// +kubebuilder:validation:XValidation:rule="self.all(t, !has(t.operator) || t.operator in ['Exists', 'Equal'])",message="toleration operator must be Exists or Equal"
	// +kubebuilder:validation:XValidation:rule="self.all(t, !has(t.operator) || t.operator != 'Exists' || !has(t.value) || t.value == '')",message="a toleration with operator Exists takes no value"
	// +kubebuilder:validation:XValidation:rule="self.all(t, (has(t.key) && t.key != '') || (has(t.operator) && t.operator == 'Exists'))",message="a toleration without a key must have operator Exists"
	// +kubebuilder:validation:XValidation:rule="self.all(t, !has(t.tolerationSeconds) || (has(t.effect) && t.effect == 'NoExecute'))",message="tolerationSeconds needs effect NoExecute"
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
	// Resources of the agent container.
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`
	// PriorityClassName of the agent pods (default system-node-critical).
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`
}

// BladeConfigStatus is the observed state.
type BladeConfigStatus struct {
	// ObservedGeneration is the spec generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Ready, Progressing, Degraded, Conflict.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// MatchedNodes is how many Nodes are assigned to this config.
	// +optional
	MatchedNodes int32 `json:"matchedNodes"`
	// AppliedNodes is how many of them report this generation applied.
	// +optional
	AppliedNodes int32 `json:"appliedNodes"`
	// ConflictingNodes lists (up to 20) Nodes this config selects that
	// another config won.
	// +optional
	// +listType=set
	ConflictingNodes []string `json:"conflictingNodes,omitempty"`
	// DaemonSet is the agent DaemonSet's rollout.
	// +optional
	DaemonSet DaemonSetStatus `json:"daemonSet,omitempty"`
}

// DaemonSetStatus summarises the agent DaemonSet.
type DaemonSetStatus struct {
	// Name of the DaemonSet.
	// +optional
	Name string `json:"name,omitempty"`
	// +optional
	DesiredNumberScheduled int32 `json:"desiredNumberScheduled"`
	// +optional
	NumberReady int32 `json:"numberReady"`
	// +optional
	UpdatedNumberScheduled int32 `json:"updatedNumberScheduled"`
}

// BladeConfigList is a list of BladeConfigs.
//
// +kubebuilder:object:root=true
type BladeConfigList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BladeConfig `json:"items"`
}

func init() {
	SchemeBuilder.Register(&BladeConfig{}, &BladeConfigList{})
}
