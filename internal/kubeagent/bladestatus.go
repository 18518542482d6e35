package kubeagent

import (
	"math"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeblade/kubeblade/api/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/agent"
	"github.com/kubeblade/kubeblade/internal/core"
	"github.com/kubeblade/kubeblade/internal/hardware"
	"github.com/kubeblade/kubeblade/internal/kubeevents"
)

// Condition reasons on Blades.
const (
	ReasonLoopRunning      = "LoopRunning"
	ReasonLoopStopped      = "LoopStopped"
	ReasonAboveCritical    = "AboveCriticalTemperature"
	ReasonBelowCritical    = "BelowCriticalTemperature"
	ReasonZeroRPM          = "ZeroRPMAtDuty"
	ReasonFanTurning       = "FanTurning"
	ReasonCapabilityAbsent = "CapabilitiesMissing"
	ReasonAllCapabilities  = "AllCapabilitiesPresent"
)

// bladeStatus renders the agent's state as a Blade status. prev carries
// the conditions' transition times forward.
func bladeStatus(node string, st agent.Status, applied *v1alpha1.AppliedConfig, prev []metav1.Condition, now time.Time) v1alpha1.BladeStatus {
	bs := v1alpha1.BladeStatus{
		NodeName:            node,
		State:               bladeState(st),
		SoC:                 st.Info.SoC,
		FanUnit:             string(st.Info.FanUnit),
		PowerSource:         string(st.PowerSource),
		Identify:            st.Identify,
		Stealth:             st.Stealth,
		Critical:            st.Critical,
		HardwareBackend:     st.Info.Backend,
		AgentVersion:        st.Version,
		Capabilities:        st.Capabilities.List(),
		MissingCapabilities: relevantMissing(st),
		HardwareDetail:      kubeevents.Truncate(st.Info.Detail, maxHardwareDetail),
		Fan: v1alpha1.BladeFanStatus{
			Percent: int32(st.FanPercent),
			Mode:    string(st.FanMode),
			Stalled: st.FanStalled,
		},
		LEDs: v1alpha1.BladeLEDsStatus{
			Top:  v1alpha1.LEDStatus{Color: st.LEDs[hardware.LEDTop].Color.String(), Pattern: string(st.LEDs[hardware.LEDTop].Pattern)},
			Edge: v1alpha1.LEDStatus{Color: st.LEDs[hardware.LEDEdge].Color.String(), Pattern: string(st.LEDs[hardware.LEDEdge].Pattern)},
		},
	}
	if st.TemperatureValid {
		t := int32(math.Round(st.TemperatureCelsius))
		bs.TemperatureCelsius = &t
	}
	if st.AirflowValid {
		t := int32(math.Round(st.AirflowCelsius))
		bs.AirflowTemperatureCelsius = &t
	}
	if st.FanRPMValid {
		r := int32(math.Round(st.FanRPM))
		bs.Fan.RPM = &r
	}
	if applied != nil {
		a := *applied
		bs.Config = &a
	}
	if st.Info.IsBlade {
		d := int32(st.DemandPercent)
		bs.Fan.DemandPercent = &d
	}
	if st.FanPeer != "" {
		state := v1alpha1.FanPeerLost // pending counts as lost: the floor applies
		if st.FanPeerState == core.PeerSynced {
			state = v1alpha1.FanPeerSynced
		}
		bs.Fan.Peer = &v1alpha1.FanPeerStatus{Name: st.FanPeer, State: state}
	}
	conds := append([]metav1.Condition(nil), prev...)
	set := func(typ string, on bool, yes, no, msgYes, msgNo string) {
		c := metav1.Condition{Type: typ, Status: metav1.ConditionFalse, Reason: no, Message: msgNo, LastTransitionTime: metav1.NewTime(now)}
		if on {
			c.Status, c.Reason, c.Message = metav1.ConditionTrue, yes, msgYes
		}
		meta.SetStatusCondition(&conds, c)
	}
	set(v1alpha1.BladeConditionAgentReady, st.Running, ReasonLoopRunning, ReasonLoopStopped,
		"the agent's control loop is running", "the agent's control loop is not running")
	set(v1alpha1.BladeConditionThermalCritical, st.Critical, ReasonAboveCritical, ReasonBelowCritical,
		"SoC temperature reached the critical threshold; fan forced to 100 %", "SoC temperature is below the critical threshold")
	set(v1alpha1.BladeConditionFanStalled, st.FanStalled, ReasonZeroRPM, ReasonFanTurning,
		"the fan reads 0 RPM although it is driven", "the fan turns as driven")
	set(v1alpha1.BladeConditionHardwareDegraded, len(bs.MissingCapabilities) > 0, ReasonCapabilityAbsent, ReasonAllCapabilities,
		"missing: "+joinComma(bs.MissingCapabilities), "every blade capability is available")
	sort.Slice(conds, func(i, j int) bool { return conds[i].Type < conds[j].Type })
	bs.Conditions = conds
	return bs
}

func relevantMissing(st agent.Status) []string {
	var out []string
	for _, c := range st.Capabilities.Missing() {
		if c == string(hardware.CapAirflowTemperature) && st.Info.FanUnit != hardware.FanUnitSmart {
			continue
		}
		out = append(out, c)
	}
	return out
}

func joinComma(s []string) string {
	out := ""
	for i, v := range s {
		if i > 0 {
			out += ", "
		}
		out += v
	}
	return out
}

func bladeState(st agent.Status) string {
	switch {
	case !st.Info.IsBlade:
		return v1alpha1.BladeStateNotABlade
	case !st.Running:
		return v1alpha1.BladeStateStopped
	case st.Critical:
		return v1alpha1.BladeStateCritical
	case st.FanStalled:
		return v1alpha1.BladeStateFanStalled
	case st.Identify:
		return v1alpha1.BladeStateIdentify
	case st.Stealth:
		return v1alpha1.BladeStateStealth
	default:
		return v1alpha1.BladeStateIdle
	}
}

// drift strips what changes continuously with temperature (readings and,
// in automatic mode, the duty that follows the curve), leaving what a
// person would call a change of state.
func drift(s v1alpha1.BladeStatus) v1alpha1.BladeStatus {
	s = *s.DeepCopy()
	s.TemperatureCelsius, s.AirflowTemperatureCelsius, s.Fan.RPM, s.HeartbeatTime = nil, nil, nil, nil
	// The demand follows the temperature; a move of DemandStep or more
	// is a change of state of its own (classify).
	s.Fan.DemandPercent = nil
	if s.Fan.Mode == "auto" {
		s.Fan.Percent = 0
	}
	for i := range s.Conditions {
		s.Conditions[i].LastTransitionTime = metav1.Time{}
		s.Conditions[i].ObservedGeneration = 0
	}
	return s
}

// statusChange classifies the difference between what was last written
// and what would be written now.
type statusChange int

const (
	noChange statusChange = iota
	driftOnly
	stateChange
)

func classify(last *v1alpha1.BladeStatus, next v1alpha1.BladeStatus) statusChange {
	if last == nil {
		return stateChange
	}
	if !equality.Semantic.DeepEqual(drift(*last), drift(next)) || demandMoved(last.Fan.DemandPercent, next.Fan.DemandPercent) {
		return stateChange
	}
	l, n := *last.DeepCopy(), *next.DeepCopy()
	l.HeartbeatTime, n.HeartbeatTime = nil, nil
	if equality.Semantic.DeepEqual(l, n) {
		return noChange
	}
	return driftOnly
}

// DemandStep is the move of the published fan demand that is written at
// once (docs/cluster-aware.md: "when it moves by 5 points or more"); smaller moves wait
// for the next drift write or the heartbeat.
const DemandStep = 5

func demandMoved(last, next *int32) bool {
	if (last == nil) != (next == nil) {
		return true
	}
	if last == nil {
		return false
	}
	d := *next - *last
	return d >= DemandStep || d <= -DemandStep
}

// maxHardwareDetail is the Blade CRD's limit on status.hardwareDetail.
const maxHardwareDetail = 4096
