package core

import (
	"fmt"
	"time"

	"github.com/kubeblade/kubeblade/internal/hardware"
)

// Machine holds one blade's state. It is not safe for concurrent use: the
// agent drives it from a single loop.
type Machine struct {
	s Settings

	temp       float64
	tempValid  bool
	air        float64
	airValid   bool
	rpm        float64
	rpmValid   bool
	power      hardware.PowerSource
	powerKnown bool

	identify        bool
	stealthOverride *bool
	manual          bool
	manualPercent   uint8
	ledOverride     [2]*hardware.Color

	critical     bool
	stalled      bool
	zeroRPMSince time.Time
	stallTiming  bool

	peerName     string
	peerSince    time.Time // when the peer was named
	peerSeen     bool      // its Blade has been present at least once
	peerObserved bool
	peer         PeerObservation
	peerState    PeerState
	maintenance  MaintenanceState
	// maintenanceRequested mirrors the kubeblade.io/maintenance request,
	// which a long press toggles.
	maintenanceRequested bool
	attention            bool

	events []Event
}

// New returns a machine with no observations yet; until the first
// temperature arrives it asks for a full fan.
func New(s Settings) *Machine {
	return &Machine{s: s}
}

// Settings returns the settings in force.
func (m *Machine) Settings() Settings { return m.s }

// TakeEvents returns the events raised since the last call and forgets them.
func (m *Machine) TakeEvents() []Event {
	ev := m.events
	m.events = nil
	return ev
}

func (m *Machine) emit(now time.Time, r Reason, warning bool, src Source, format string, args ...any) {
	m.events = append(m.events, Event{Reason: r, Warning: warning, Message: fmt.Sprintf(format, args...), Time: now, Source: src})
}

// ApplySettings switches to new settings, re-evaluating critical mode
// against the new thresholds at once.
func (m *Machine) ApplySettings(now time.Time, s Settings, generation string) {
	oldStealth := m.stealthRequested()
	oldMode := m.fanMode()
	m.s = s
	m.evaluateCritical(now)
	m.noteStealthChange(now, oldStealth, SourceConfig)
	m.noteFanModeChange(now, oldMode, SourceConfig)
	m.emit(now, ReasonConfigApplied, false, SourceConfig, "applied configuration %s", generation)
	m.checkStall(now)
}

// ObserveTemperature records a SoC temperature reading.
func (m *Machine) ObserveTemperature(now time.Time, celsius float64) {
	m.temp, m.tempValid = celsius, true
	m.evaluateCritical(now)
	m.checkStall(now)
}

// TemperatureUnavailable records a failed reading. The fan goes to full
// until readings return; critical mode keeps its state, since nothing says
// the blade cooled down.
func (m *Machine) TemperatureUnavailable(now time.Time) {
	m.tempValid = false
	m.checkStall(now)
}

// ObserveAirflow records the smart fan unit's airflow temperature.
func (m *Machine) ObserveAirflow(now time.Time, celsius float64) {
	m.air, m.airValid = celsius, true
}

// ObserveFanRPM records a tachometer reading.
func (m *Machine) ObserveFanRPM(now time.Time, rpm float64) {
	m.rpm, m.rpmValid = rpm, true
	m.checkStall(now)
}

// ObservePower records the PoE detect line.
func (m *Machine) ObservePower(now time.Time, p hardware.PowerSource) {
	if m.powerKnown && p != m.power {
		m.emit(now, ReasonPowerSourceChanged, false, "", "power source changed from %s to %s", m.power, p)
	}
	m.power, m.powerKnown = p, true
}

// Tick lets time-based rules (stall detection, a fan peer's heartbeat
// ageing out) advance without a new reading.
func (m *Machine) Tick(now time.Time) {
	m.evaluatePeer(now)
	m.checkStall(now)
}

// SetFanPeer names the blade that shares this blade's standard fan unit
// ("" for none). Until the peer is observed its demand is unknown, so the
// lost-peer floor applies.
func (m *Machine) SetFanPeer(now time.Time, name string) {
	if name == m.peerName {
		return
	}
	m.peerName, m.peerObserved, m.peer = name, false, PeerObservation{}
	m.peerSince, m.peerSeen = now, false
	m.peerState = PeerNone
	if name != "" {
		m.peerState = PeerPending
	}
	m.checkStall(now)
}

// ObserveFanPeer records what the agent read of its fan peer's Blade. It
// keeps working when the cluster is down: the last observation simply
// ages, and Tick declares the peer lost once its heartbeat is older than
// StaleAfter.
func (m *Machine) ObserveFanPeer(now time.Time, o PeerObservation) {
	if m.peerName == "" {
		return
	}
	if o.DemandPercent != nil {
		v := *o.DemandPercent
		o.DemandPercent = &v
	}
	m.peer, m.peerObserved = o, true
	m.peerSeen = m.peerSeen || o.Present
	m.evaluatePeer(now)
	m.checkStall(now)
}

// peerProblem says why the observed peer cannot be followed ("" when it can).
func (m *Machine) peerProblem(now time.Time) string {
	p := m.peer
	switch {
	case !p.Present:
		return fmt.Sprintf("fan peer %s has no Blade", m.peerName)
	case p.HeartbeatTime.IsZero():
		return fmt.Sprintf("fan peer %s has never reported a heartbeat", m.peerName)
	case now.Sub(p.HeartbeatTime) > p.StaleAfter:
		return fmt.Sprintf("fan peer %s's last heartbeat is %s old (stale after %s)",
			m.peerName, now.Sub(p.HeartbeatTime).Round(time.Second), p.StaleAfter)
	case p.DemandPercent == nil:
		return fmt.Sprintf("fan peer %s publishes no fan demand", m.peerName)
	}
	return ""
}

func (m *Machine) evaluatePeer(now time.Time) {
	if m.peerName == "" {
		return
	}
	var problem string
	if m.peerObserved {
		problem = m.peerProblem(now)
	} else {
		// Nothing read at all: the peer watch has not synced, typically
		// because the cluster has been unreachable since the agent
		// started. That is as good as lost once the grace is over.
		problem = fmt.Sprintf("fan peer %s's Blade has not been read for %s (is the cluster reachable?)",
			m.peerName, now.Sub(m.peerSince).Round(time.Second))
	}
	if problem != "" && !m.peerSeen && m.peerState == PeerPending && now.Sub(m.peerSince) < PeerGrace {
		// Not there yet, never seen: blades of one chassis start
		// together and their Blades appear seconds apart, and the peer
		// watch needs a moment to sync. The floor applies; the Warning
		// waits for the grace to pass.
		return
	}
	switch {
	case problem == "" && m.peerState != PeerSynced:
		if m.peerState == PeerLost {
			m.emit(now, ReasonFanPeerRestored, false, "", "fan peer %s reports again: the fan follows the higher of both demands", m.peerName)
		}
		m.peerState = PeerSynced
	case problem != "" && m.peerState != PeerLost:
		m.peerState = PeerLost
		m.emit(now, ReasonFanPeerLost, true, "", "%s: the fan runs at least at %d %%", problem, m.s.FanPeerLostPercent)
	}
}

// SetMaintenance records the Node's maintenance request (the
// kubeblade.io/maintenance annotation is "true") and the operator's state
// (kubeblade.io/maintenance-state). A request the operator has not
// answered yet shows as MaintenanceRequested.
func (m *Machine) SetMaintenance(now time.Time, requested bool, st MaintenanceState) {
	m.maintenanceRequested = requested
	if st == MaintenanceNone && requested {
		st = MaintenanceRequested
	}
	m.maintenance = st
}

// SetNodeAttention records whether the Node needs a person's attention
// (cordoned by someone other than kubeblade, or not Ready).
func (m *Machine) SetNodeAttention(now time.Time, on bool) { m.attention = on }

// ButtonLongPressed handles a press held for LongPress or longer: it asks
// for maintenance to be toggled and leaves identify alone.
func (m *Machine) ButtonLongPressed(now time.Time, held time.Duration) {
	verb := "start"
	if m.maintenanceRequested {
		verb = "end"
	}
	m.emit(now, ReasonButtonLongPressed, false, SourceButton,
		"edge button held for %.1f s (long press): %s maintenance", held.Seconds(), verb)
}

// ButtonPressed handles one debounced press: it toggles identify, so a
// press both starts identify and confirms a running one.
func (m *Machine) ButtonPressed(now time.Time) {
	m.emit(now, ReasonButtonPressed, false, SourceButton, "edge button pressed")
	m.SetIdentify(now, !m.identify, SourceButton)
}

// SetIdentify starts or stops identify.
func (m *Machine) SetIdentify(now time.Time, on bool, src Source) {
	if on == m.identify {
		return
	}
	m.identify = on
	if on {
		m.emit(now, ReasonIdentifyStarted, false, src, "identify started by %s", src)
		return
	}
	verb := "stopped"
	if src == SourceButton {
		verb = "confirmed"
	}
	m.emit(now, ReasonIdentifyStopped, false, src, "identify %s by %s", verb, src)
}

// SetStealth overrides the configured stealth mode; nil returns to it.
func (m *Machine) SetStealth(now time.Time, override *bool, src Source) {
	old := m.stealthRequested()
	if override != nil {
		v := *override
		override = &v
	}
	m.stealthOverride = override
	m.noteStealthChange(now, old, src)
}

// SetFanManual fixes the fan duty until SetFanAuto. It is refused while
// critical mode holds the fan at 100 %.
func (m *Machine) SetFanManual(now time.Time, percent int, src Source) error {
	if percent < 0 || percent > 100 {
		return fmt.Errorf("%w: fan percent %d is outside 0–100", ErrInvalidArgument, percent)
	}
	if m.critical {
		return fmt.Errorf("%w: the fan is held at 100 %% until the temperature falls to %g °C",
			ErrCriticalActive, m.s.CriticalCelsius-m.s.HysteresisCelsius)
	}
	old := m.fanMode()
	m.manual, m.manualPercent = true, uint8(percent)
	m.noteFanModeChange(now, old, src)
	m.checkStall(now)
	return nil
}

// SetFanAuto returns the fan to the curve.
func (m *Machine) SetFanAuto(now time.Time, src Source) {
	old := m.fanMode()
	m.manual = false
	m.noteFanModeChange(now, old, src)
	m.checkStall(now)
}

// SetLEDOverride fixes one LED's colour where it would otherwise show the
// idle colour; nil removes the override.
func (m *Machine) SetLEDOverride(led hardware.LED, c *hardware.Color) error {
	if led != hardware.LEDTop && led != hardware.LEDEdge {
		return fmt.Errorf("%w: unknown LED %d", ErrInvalidArgument, led)
	}
	if c != nil {
		v := *c
		c = &v
	}
	m.ledOverride[led] = c
	return nil
}

func (m *Machine) stealthRequested() bool {
	if m.stealthOverride != nil {
		return *m.stealthOverride
	}
	return m.s.Stealth
}

func (m *Machine) noteStealthChange(now time.Time, old bool, src Source) {
	switch cur := m.stealthRequested(); {
	case cur && !old:
		m.emit(now, ReasonStealthEnabled, false, src, "stealth mode enabled by %s", src)
	case !cur && old:
		m.emit(now, ReasonStealthDisabled, false, src, "stealth mode disabled by %s", src)
	}
}

func (m *Machine) noteFanModeChange(now time.Time, old FanMode, src Source) {
	if cur := m.fanMode(); cur != old {
		m.emit(now, ReasonFanModeChanged, false, src, "fan mode changed from %s to %s", old, cur)
	}
}

func (m *Machine) evaluateCritical(now time.Time) {
	if !m.tempValid {
		return
	}
	switch {
	case !m.critical && m.temp >= m.s.CriticalCelsius:
		m.critical = true
		m.emit(now, ReasonCriticalTemperature, true, "",
			"SoC temperature %.1f °C reached the critical threshold %g °C: fan forced to 100 %%", m.temp, m.s.CriticalCelsius)
	case m.critical && m.temp <= m.s.CriticalCelsius-m.s.HysteresisCelsius:
		m.critical = false
		m.emit(now, ReasonTemperatureNormal, false, "",
			"SoC temperature %.1f °C is back at or below %g °C", m.temp, m.s.CriticalCelsius-m.s.HysteresisCelsius)
	}
}

func (m *Machine) fanMode() FanMode {
	switch {
	case m.critical:
		return FanModeCritical
	case m.manual:
		return FanModeManual
	default:
		return FanModeAuto
	}
}

// demand is the duty this blade wants for itself: what it publishes to
// its fan peer. It never includes the peer's demand, or two peers would
// hold each other's fans up for ever.
func (m *Machine) demand() uint8 {
	switch m.fanMode() {
	case FanModeCritical:
		return 100
	case FanModeManual:
		return m.manualPercent
	}
	if !m.tempValid {
		return 100
	}
	return m.s.Curve.Percent(m.temp)
}

// fanPercent is the duty driven: the own demand, raised to the peer's
// (100 % for a critical peer) or to the lost-peer floor.
func (m *Machine) fanPercent() uint8 {
	d := m.demand()
	switch m.peerState {
	case PeerSynced:
		if m.peer.Critical {
			return 100
		}
		return max(d, *m.peer.DemandPercent)
	case PeerPending, PeerLost:
		return max(d, m.s.FanPeerLostPercent)
	}
	return d
}

func (m *Machine) checkStall(now time.Time) {
	spinning := m.rpmValid && m.rpm > 0
	shouldSpin := m.fanPercent() >= StallDutyPercent
	if !m.s.TachEnabled || !m.rpmValid || spinning || !shouldSpin {
		m.stallTiming = false
		if m.stalled && (!m.s.TachEnabled || spinning || !shouldSpin) {
			m.stalled = false
			m.emit(now, ReasonFanRecovered, false, "", "fan turns again (%.0f RPM)", m.rpm)
		}
		return
	}
	if !m.stallTiming {
		m.stallTiming, m.zeroRPMSince = true, now
	}
	if !m.stalled && now.Sub(m.zeroRPMSince) >= StallAfter {
		m.stalled = true
		m.emit(now, ReasonFanStalled, true, "",
			"fan reads 0 RPM at %d %% duty for %s: it has stalled or is disconnected", m.fanPercent(), StallAfter)
	}
}

// Outputs returns what the hardware should be doing. Each LED shows the
// highest of the states that claim it (docs/cluster-aware.md: critical > identify >
// maintenance > node attention > stealth > idle; API colour overrides sit
// just above idle):
//
//	state                 top LED                 edge LED
//	critical              blinks critical colour  steady critical colour
//	identify              —                       blinks identify colour
//	maintenance requested —                       steady maintenance colour
//	  or queued
//	draining              —                       blinks maintenance colour
//	drained               —                       steady safe-to-pull colour
//	failed                blinks maintenance      —
//	node attention        steady attention colour —
//	stealth               dark                    dark
//	override              steady override colour  steady override colour
//	idle                  dark                    steady idle colour
//
// Critical suspends stealth; the stealth output follows the request
// otherwise.
func (m *Machine) Outputs() Outputs {
	o := Outputs{FanPercent: m.fanPercent()}
	stealth := m.stealthRequested() && !m.critical
	o.StealthOutput = stealth
	o.LEDs[hardware.LEDTop] = m.topLED(stealth)
	o.LEDs[hardware.LEDEdge] = m.edgeLED(stealth)
	for i := range o.LEDs {
		if o.LEDs[i].Pattern != PatternOff && o.LEDs[i].Color.IsOff() {
			o.LEDs[i] = LEDState{Pattern: PatternOff}
		}
	}
	return o
}

func (m *Machine) topLED(stealth bool) LEDState {
	switch {
	case m.critical:
		return LEDState{Pattern: PatternBlink, Color: m.s.CriticalColor}
	case m.maintenance == MaintenanceFailed:
		return LEDState{Pattern: PatternBlink, Color: m.s.MaintenanceColor}
	case m.attention:
		return LEDState{Pattern: PatternSteady, Color: m.s.NodeAttentionColor}
	case stealth:
		return LEDState{Pattern: PatternOff}
	case m.ledOverride[hardware.LEDTop] != nil:
		return LEDState{Pattern: PatternSteady, Color: *m.ledOverride[hardware.LEDTop]}
	}
	return LEDState{Pattern: PatternOff}
}

func (m *Machine) edgeLED(stealth bool) LEDState {
	switch {
	case m.critical:
		return LEDState{Pattern: PatternSteady, Color: m.s.CriticalColor}
	case m.identify:
		return LEDState{Pattern: PatternBlink, Color: m.s.IdentifyColor}
	case m.maintenance == MaintenanceRequested || m.maintenance == MaintenanceQueued:
		return LEDState{Pattern: PatternSteady, Color: m.s.MaintenanceColor}
	case m.maintenance == MaintenanceDraining:
		return LEDState{Pattern: PatternBlink, Color: m.s.MaintenanceColor}
	case m.maintenance == MaintenanceDrained:
		return LEDState{Pattern: PatternSteady, Color: m.s.SafeToPullColor}
	case stealth:
		return LEDState{Pattern: PatternOff}
	case m.ledOverride[hardware.LEDEdge] != nil:
		return LEDState{Pattern: PatternSteady, Color: *m.ledOverride[hardware.LEDEdge]}
	}
	return LEDState{Pattern: PatternSteady, Color: m.s.IdleColor}
}

// Status returns the observable state.
func (m *Machine) Status() Status {
	o := m.Outputs()
	st := Status{
		TemperatureCelsius:   m.temp,
		TemperatureValid:     m.tempValid,
		AirflowCelsius:       m.air,
		AirflowValid:         m.airValid,
		FanRPM:               m.rpm,
		FanRPMValid:          m.rpmValid,
		FanPercent:           o.FanPercent,
		FanMode:              m.fanMode(),
		ManualFan:            m.manual,
		ManualFanPercent:     m.manualPercent,
		FanStalled:           m.stalled,
		Critical:             m.critical,
		Identify:             m.identify,
		StealthRequested:     m.stealthRequested(),
		Stealth:              o.StealthOutput,
		PowerSource:          m.power,
		LEDs:                 o.LEDs,
		DemandPercent:        m.demand(),
		FanPeer:              m.peerName,
		FanPeerState:         m.peerState,
		Maintenance:          m.maintenance,
		MaintenanceRequested: m.maintenanceRequested,
		NodeAttention:        m.attention,
	}
	if m.stealthOverride != nil {
		v := *m.stealthOverride
		st.StealthOverride = &v
	}
	for i, c := range m.ledOverride {
		if c != nil {
			v := *c
			st.LEDOverride[i] = &v
		}
	}
	return st
}
