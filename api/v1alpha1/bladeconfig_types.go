package v1alpha1

import (
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

	// TaintThermalCritical is set (NoSchedule) while critical, if asked for.
	TaintThermalCritical = "kubeblade.io/thermal-critical"
	// NodeConditionThermalCritical is the Node condition type.
	NodeConditionThermalCritical = "BladeThermalCritical"

	// FinalizerCleanup holds a BladeConfig until the operator removed its
	// agent DaemonSet and its kubeblade.io/config Node labels.
	FinalizerCleanup = "kubeblade.io/cleanup"
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
	// +optional
	Agent agentconfigv1.AgentConfig `json:"agent,omitempty"`
	// DaemonSet shapes the agent DaemonSet.
	// +optional
	DaemonSet DaemonSetSpec `json:"daemonSet,omitempty"`
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
