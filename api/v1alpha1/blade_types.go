package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Blade states shown in the State printer column, most important first.
const (
	BladeStateNotABlade  = "NotABlade"
	BladeStateCritical   = "Critical"
	BladeStateFanStalled = "FanStalled"
	BladeStateIdentify   = "Identify"
	BladeStateStealth    = "Stealth"
	BladeStateIdle       = "Idle"
	BladeStateStopped    = "Stopped"
	// BladeStateUnknown is set by the operator when the agent's heartbeat
	// is older than three heartbeat periods: nobody knows the blade's state.
	BladeStateUnknown = "Unknown"
)

// BladeReasonHeartbeatStale is the AgentReady=Unknown reason the operator
// sets on a Blade whose agent stopped reporting.
const BladeReasonHeartbeatStale = "HeartbeatStale"

// StaleHeartbeats is how many heartbeat periods without a status write make
// a Blade stale, for the operator and for a fan peer alike.
const StaleHeartbeats = 3

// DefaultHeartbeatPeriodSeconds is the agent's default heartbeat period,
// assumed for a Blade that does not publish its own.
const DefaultHeartbeatPeriodSeconds = 300

// Condition types on a Blade.
const (
	// BladeConditionAgentReady is True while the agent's control loop runs.
	BladeConditionAgentReady = "AgentReady"
	// BladeConditionThermalCritical mirrors the Node condition.
	BladeConditionThermalCritical = "ThermalCritical"
	// BladeConditionFanStalled is True while the fan is stalled.
	BladeConditionFanStalled = "FanStalled"
	// BladeConditionHardwareDegraded is True when capabilities are missing.
	BladeConditionHardwareDegraded = "HardwareDegraded"
)

// Blade is one Compute Blade as its agent reports it. Its name is the Node's
// name and it is owned by the Node, so it goes away with it. The agent
// writes only status.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=bl
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.status.nodeName`
// +kubebuilder:printcolumn:name="Temp",type=integer,JSONPath=`.status.temperatureCelsius`,description="SoC temperature in °C"
// +kubebuilder:printcolumn:name="Fan",type=integer,JSONPath=`.status.fan.percent`,description="Fan duty in percent"
// +kubebuilder:printcolumn:name="RPM",type=integer,JSONPath=`.status.fan.rpm`,priority=1
// +kubebuilder:printcolumn:name="Power",type=string,JSONPath=`.status.powerSource`
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="Config",type=string,JSONPath=`.status.config.name`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Blade struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec BladeSpec `json:"spec,omitempty"`
	// +optional
	Status BladeStatus `json:"status,omitempty"`
}

// BladeSpec is empty: a Blade is a report, not a request. Requests go
// through Node annotations (kubeblade.io/identify, stealth, fan-speed).
type BladeSpec struct{}

// BladeStatus is what the agent observed.
type BladeStatus struct {
	// NodeName is the Node this blade is.
	// +optional
	NodeName string `json:"nodeName,omitempty"`
	// State summarises the blade: Critical, FanStalled, Identify, Stealth,
	// Idle, NotABlade or Stopped.
	// +optional
	State string `json:"state,omitempty"`
	// SoC is bcm2711 (CM4), bcm2712 (CM5), simulated, ...
	// +optional
	SoC string `json:"soc,omitempty"`
	// FanUnit is standard, smart or none.
	// +optional
	FanUnit string `json:"fanUnit,omitempty"`
	// PowerSource is poe-802.3at or poe-or-usbc.
	// +optional
	PowerSource string `json:"powerSource,omitempty"`
	// TemperatureCelsius is the SoC temperature, rounded to whole degrees.
	// +optional
	TemperatureCelsius *int32 `json:"temperatureCelsius,omitempty"`
	// AirflowTemperatureCelsius is the smart fan unit's air temperature.
	// +optional
	AirflowTemperatureCelsius *int32 `json:"airflowTemperatureCelsius,omitempty"`
	// Fan is the fan's state.
	// +optional
	Fan BladeFanStatus `json:"fan,omitempty"`
	// Identify is true while identify is active.
	// +optional
	Identify bool `json:"identify,omitempty"`
	// Stealth is true while stealth mode is in effect.
	// +optional
	Stealth bool `json:"stealth,omitempty"`
	// Critical is true while the blade is in critical temperature mode.
	// +optional
	Critical bool `json:"critical,omitempty"`
	// LEDs are the colours the LEDs show.
	// +optional
	LEDs BladeLEDsStatus `json:"leds,omitempty"`
	// Capabilities the hardware backend can drive.
	// +optional
	// +listType=set
	Capabilities []string `json:"capabilities,omitempty"`
	// MissingCapabilities the backend could not find (e.g. leds on stock Talos).
	// +optional
	// +listType=set
	MissingCapabilities []string `json:"missingCapabilities,omitempty"`
	// HardwareDetail is what the backend found and, for each missing
	// capability, why (the agent's capability report, as its local socket
	// gives it); `bladectl doctor --node` reads it.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	HardwareDetail string `json:"hardwareDetail,omitempty"`
	// HardwareBackend is linux or simulated.
	// +optional
	HardwareBackend string `json:"hardwareBackend,omitempty"`
	// AgentVersion is the agent's build version.
	// +optional
	AgentVersion string `json:"agentVersion,omitempty"`
	// Config is the BladeConfig the agent applied.
	// +optional
	Config *AppliedConfig `json:"config,omitempty"`
	// Conditions: AgentReady, ThermalCritical, FanStalled, HardwareDegraded.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// HeartbeatTime is when the agent last wrote this status.
	// +optional
	HeartbeatTime *metav1.Time `json:"heartbeatTime,omitempty"`
	// HeartbeatPeriodSeconds is the longest time the agent lets pass
	// between status writes. A Blade whose heartbeatTime is older than
	// three periods is stale: the operator marks it Unknown and a fan peer
	// stops trusting its demand. Absent means 300.
	// +kubebuilder:validation:Minimum=1
	// +optional
	HeartbeatPeriodSeconds int32 `json:"heartbeatPeriodSeconds,omitempty"`
}

// StalePeriod is how long after HeartbeatTime a Blade counts as stale.
func (s *BladeStatus) StalePeriod() time.Duration {
	p := s.HeartbeatPeriodSeconds
	if p <= 0 {
		p = DefaultHeartbeatPeriodSeconds
	}
	return StaleHeartbeats * time.Duration(p) * time.Second
}

// BladeFanStatus is the fan's state.
type BladeFanStatus struct {
	// Percent is the duty.
	// +optional
	Percent int32 `json:"percent"`
	// RPM is the tachometer reading.
	// +optional
	RPM *int32 `json:"rpm,omitempty"`
	// Mode is auto, manual or critical.
	// +optional
	Mode string `json:"mode,omitempty"`
	// Stalled is true when the fan should turn but reads 0 RPM.
	// +optional
	Stalled bool `json:"stalled,omitempty"`
	// DemandPercent is the duty this blade wants for itself (its curve,
	// its manual setting, or 100 while critical or without a temperature),
	// before its fan peer is taken into account. Written when it moves by
	// 5 points or more, and with every heartbeat.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	DemandPercent *int32 `json:"demandPercent,omitempty"`
	// Peer is the fan peer (Node annotation kubeblade.io/fan-peer) this
	// blade shares its standard fan unit with.
	// +optional
	Peer *FanPeerStatus `json:"peer,omitempty"`
}

// Fan peer states.
const (
	// FanPeerSynced: the peer's demand is fresh and taken into account.
	FanPeerSynced = "Synced"
	// FanPeerLost: the peer is missing or stale; the fan runs at least at
	// fanPeerLostPercent.
	FanPeerLost = "Lost"
)

// FanPeerStatus is what a blade knows of its fan peer.
type FanPeerStatus struct {
	// Name of the peer's Node (and Blade).
	Name string `json:"name"`
	// State is Synced or Lost.
	// +kubebuilder:validation:Enum=Synced;Lost
	State string `json:"state"`
}

// BladeLEDsStatus are the LEDs' colours and patterns.
type BladeLEDsStatus struct {
	// +optional
	Top LEDStatus `json:"top,omitempty"`
	// +optional
	Edge LEDStatus `json:"edge,omitempty"`
}

// LEDStatus is one LED.
type LEDStatus struct {
	// Color is #rrggbb.
	// +optional
	Color string `json:"color,omitempty"`
	// Pattern is off, steady or blink.
	// +optional
	Pattern string `json:"pattern,omitempty"`
}

// AppliedConfig names a BladeConfig generation an agent applied.
type AppliedConfig struct {
	// Name of the BladeConfig; empty when the agent runs on its local config.
	// +optional
	Name string `json:"name,omitempty"`
	// Generation of the BladeConfig's spec that was applied.
	// +optional
	Generation int64 `json:"generation,omitempty"`
}

// BladeList is a list of Blades.
//
// +kubebuilder:object:root=true
type BladeList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Blade `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Blade{}, &BladeList{})
}
