package core

import (
	"errors"
	"time"

	"github.com/kubeblade/kubeblade/internal/fancurve"
	"github.com/kubeblade/kubeblade/internal/hardware"
)

// Errors returned for requests the machine refuses. They are sentinel values
// so transports can map them (gRPC InvalidArgument / FailedPrecondition).
var (
	// ErrInvalidArgument marks a request whose value is out of range.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrCriticalActive marks a request refused because critical mode owns
	// the fan: a manual override must never drop the forced 100 %.
	ErrCriticalActive = errors.New("critical temperature mode is active")
)

// Defaults for the thresholds the spec fixes.
const (
	// StallDutyPercent is the duty at and above which a fan must turn.
	StallDutyPercent = 20
	// StallAfter is how long a fan may read 0 RPM at StallDutyPercent or
	// more before it counts as stalled.
	StallAfter = 10 * time.Second
	// BlinkPeriod is one on+off cycle of a blinking LED.
	BlinkPeriod = time.Second
	// PeerGrace is how long a fan peer whose Blade has never been seen may
	// stay missing before it counts as lost (FanPeerLost): blades that
	// boot together create their Blades seconds apart. Its demand is
	// unknown meanwhile, so the lost-peer floor applies from the start.
	PeerGrace = time.Minute
	// LongPress is how long the button must be held to toggle maintenance
	// rather than identify.
	LongPress = 3 * time.Second
)

// Settings is the validated configuration the machine runs with. It can be
// replaced at run time (live config).
type Settings struct {
	Curve             fancurve.Curve
	CriticalCelsius   float64
	HysteresisCelsius float64
	// Stealth is the configured stealth mode; a request may override it.
	Stealth       bool
	TachEnabled   bool
	IdleColor     hardware.Color
	IdentifyColor hardware.Color
	CriticalColor hardware.Color
	// MaintenanceColor, SafeToPullColor and NodeAttentionColor show the
	// Node's maintenance and attention states (docs/cluster-aware.md).
	MaintenanceColor   hardware.Color
	SafeToPullColor    hardware.Color
	NodeAttentionColor hardware.Color
	// FanPeerLostPercent is the least duty while a configured fan peer is
	// missing, stale or not known yet.
	FanPeerLostPercent uint8
}

// MaintenanceState is the blade's maintenance as its Node tells it: the
// kubeblade.io/maintenance request and the operator's
// kubeblade.io/maintenance-state answer.
type MaintenanceState string

const (
	MaintenanceNone MaintenanceState = ""
	// MaintenanceRequested: asked for, the operator has not answered yet.
	MaintenanceRequested MaintenanceState = "requested"
	MaintenanceQueued    MaintenanceState = "queued"
	MaintenanceDraining  MaintenanceState = "draining"
	MaintenanceDrained   MaintenanceState = "drained"
	MaintenanceFailed    MaintenanceState = "failed"
)

// PeerState is how far the fan peer's demand is trusted.
type PeerState string

const (
	// PeerNone: no fan peer is configured.
	PeerNone PeerState = ""
	// PeerPending: a peer is configured but nothing is known of it yet
	// (its Blade was not listed yet). The lost-peer floor applies, but
	// no FanPeerLost is raised: it was never found to be lost.
	PeerPending PeerState = "pending"
	// PeerSynced: the peer's demand is fresh and followed.
	PeerSynced PeerState = "synced"
	// PeerLost: the peer is missing, stale or publishes no demand.
	PeerLost PeerState = "lost"
)

// PeerObservation is what the agent last read of its fan peer's Blade.
type PeerObservation struct {
	// Present is false when the peer has no Blade.
	Present bool
	// DemandPercent is the peer's own demand; nil when it publishes none.
	DemandPercent *uint8
	// Critical is true while the peer is in critical temperature mode.
	Critical bool
	// HeartbeatTime is the peer's last status write.
	HeartbeatTime time.Time
	// StaleAfter is how long after HeartbeatTime the peer is stale
	// (three of the peer's heartbeat periods).
	StaleAfter time.Duration
}

// FanMode says who decides the fan duty.
type FanMode string

const (
	FanModeAuto     FanMode = "auto"
	FanModeManual   FanMode = "manual"
	FanModeCritical FanMode = "critical"
)

// Pattern is how an LED shows its colour.
type Pattern string

const (
	PatternOff    Pattern = "off"
	PatternSteady Pattern = "steady"
	PatternBlink  Pattern = "blink"
)

// LEDState is the desired look of one LED.
type LEDState struct {
	Pattern Pattern
	Color   hardware.Color
}

// ColorAt renders the state at an instant. Blinking derives its phase from
// the wall clock rather than from when the pattern started, so every LED (and
// every blade) blinks in step and the rendering needs no state.
func (l LEDState) ColorAt(now time.Time) hardware.Color {
	switch l.Pattern {
	case PatternSteady:
		return l.Color
	case PatternBlink:
		if now.UnixNano()%int64(BlinkPeriod) < int64(BlinkPeriod/2) {
			return l.Color
		}
	}
	return hardware.Off
}

// Outputs is what the hardware should be doing now.
type Outputs struct {
	FanPercent uint8
	LEDs       [2]LEDState // indexed by hardware.LED
	// StealthOutput drives the blade's stealth line.
	StealthOutput bool
}

// Blinking reports whether any LED blinks, i.e. whether the outputs need
// re-rendering over time.
func (o Outputs) Blinking() bool {
	for _, l := range o.LEDs {
		if l.Pattern == PatternBlink {
			return true
		}
	}
	return false
}

// Status is the machine's observable state.
type Status struct {
	TemperatureCelsius float64
	TemperatureValid   bool
	AirflowCelsius     float64
	AirflowValid       bool
	FanRPM             float64
	FanRPMValid        bool
	FanPercent         uint8
	FanMode            FanMode
	// ManualFanPercent is the requested manual duty (meaningful when
	// ManualFan is true, even while critical mode overrides it).
	ManualFan        bool
	ManualFanPercent uint8
	FanStalled       bool
	Critical         bool
	Identify         bool
	// StealthRequested is the configured mode or its override.
	StealthRequested bool
	// StealthOverride is set when a request overrides the configured mode.
	StealthOverride *bool
	// Stealth is true while stealth is in effect (requested and not
	// suspended by critical mode).
	Stealth     bool
	PowerSource hardware.PowerSource
	LEDs        [2]LEDState
	// LEDOverride holds per-LED colour overrides set through the API.
	LEDOverride [2]*hardware.Color
	// DemandPercent is the duty this blade wants for itself, before the
	// fan peer is taken into account.
	DemandPercent uint8
	// FanPeer names the configured fan peer; FanPeerState says whether
	// its demand is followed.
	FanPeer      string
	FanPeerState PeerState
	// Maintenance is the Node's maintenance state; MaintenanceRequested
	// is the request a long press toggles.
	Maintenance          MaintenanceState
	MaintenanceRequested bool
	// NodeAttention is true while the Node is cordoned by someone other
	// than kubeblade or not Ready.
	NodeAttention bool
}

// Reason names an event. The Kubernetes-facing names are the spec's Event
// reasons; StatusChanged only tells watchers to look again.
type Reason string

const (
	ReasonAgentStarted  Reason = "AgentStarted"
	ReasonButtonPressed Reason = "ButtonPressed"
	// ReasonButtonLongPressed is a press held for LongPress or longer: it
	// toggles maintenance.
	ReasonButtonLongPressed   Reason = "ButtonLongPressed"
	ReasonFanPeerLost         Reason = "FanPeerLost"
	ReasonFanPeerRestored     Reason = "FanPeerRestored"
	ReasonIdentifyStarted     Reason = "IdentifyStarted"
	ReasonIdentifyStopped     Reason = "IdentifyStopped"
	ReasonCriticalTemperature Reason = "CriticalTemperature"
	ReasonTemperatureNormal   Reason = "TemperatureNormal"
	ReasonStealthEnabled      Reason = "StealthEnabled"
	ReasonStealthDisabled     Reason = "StealthDisabled"
	ReasonFanStalled          Reason = "FanStalled"
	ReasonFanRecovered        Reason = "FanRecovered"
	ReasonPowerSourceChanged  Reason = "PowerSourceChanged"
	ReasonConfigApplied       Reason = "ConfigApplied"
	ReasonFanModeChanged      Reason = "FanModeChanged"
	ReasonStatusChanged       Reason = "StatusChanged"
)

// Source says who asked for a change; it ends up in event messages.
type Source string

const (
	SourceButton     Source = "button"
	SourceAPI        Source = "api"
	SourceAnnotation Source = "annotation"
	SourceConfig     Source = "config"
)

// Event is something that happened on the blade.
type Event struct {
	Reason  Reason
	Warning bool
	Message string
	Time    time.Time
	// Source is set for events caused by a request.
	Source Source
}
