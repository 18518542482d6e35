package core

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kubeblade/kubeblade/internal/hardware"
)

var (
	maint = hardware.Color{R: 48, G: 16}
	pull  = hardware.Color{B: 64}
	attn  = hardware.Color{R: 48, G: 32}
)

func clusterSettings(t *testing.T) Settings {
	s := settings(t)
	s.MaintenanceColor, s.SafeToPullColor, s.NodeAttentionColor = maint, pull, attn
	s.FanPeerLostPercent = 60
	return s
}

// TestLEDPrecedenceAllCombinations walks every combination of the states
// that claim LEDs and checks each LED against docs/cluster-aware.md's precedence,
// critical > identify > maintenance > node attention > stealth > idle,
// written here as one ordered list of claims per LED.
func TestLEDPrecedenceAllCombinations(t *testing.T) {
	type combo struct {
		critical, identify, attention, stealth bool
		maintenance                            MaintenanceState
	}
	type claim struct {
		applies func(c combo) bool
		led     LEDState
	}
	steady := func(c hardware.Color) LEDState { return LEDState{Pattern: PatternSteady, Color: c} }
	blink := func(c hardware.Color) LEDState { return LEDState{Pattern: PatternBlink, Color: c} }
	off := LEDState{Pattern: PatternOff}
	always := func(combo) bool { return true }
	top := []claim{
		{func(c combo) bool { return c.critical }, blink(crit)},
		{func(c combo) bool { return c.maintenance == MaintenanceFailed }, blink(maint)},
		{func(c combo) bool { return c.attention }, steady(attn)},
		{func(c combo) bool { return c.stealth }, off},
		{always, off},
	}
	edge := []claim{
		{func(c combo) bool { return c.critical }, steady(crit)},
		{func(c combo) bool { return c.identify }, blink(identify)},
		{func(c combo) bool {
			return c.maintenance == MaintenanceRequested || c.maintenance == MaintenanceQueued
		}, steady(maint)},
		{func(c combo) bool { return c.maintenance == MaintenanceDraining }, blink(maint)},
		{func(c combo) bool { return c.maintenance == MaintenanceDrained }, steady(pull)},
		{func(c combo) bool { return c.stealth }, off},
		{always, steady(idle)},
	}
	first := func(cs []claim, c combo) LEDState {
		for _, cl := range cs {
			if cl.applies(c) {
				return cl.led
			}
		}
		panic("no claim")
	}
	states := []MaintenanceState{MaintenanceNone, MaintenanceRequested, MaintenanceQueued, MaintenanceDraining, MaintenanceDrained, MaintenanceFailed}
	n := 0
	for _, critical := range []bool{false, true} {
		for _, ident := range []bool{false, true} {
			for _, ms := range states {
				for _, attention := range []bool{false, true} {
					for _, stealth := range []bool{false, true} {
						c := combo{critical, ident, attention, stealth, ms}
						name := fmt.Sprintf("critical=%t/identify=%t/maintenance=%q/attention=%t/stealth=%t", critical, ident, ms, attention, stealth)
						t.Run(name, func(t *testing.T) {
							s := clusterSettings(t)
							s.Stealth = stealth
							m := New(s)
							temp := 40.0
							if critical {
								temp = 70
							}
							m.ObserveTemperature(at(0), temp)
							m.SetIdentify(at(0), ident, SourceAPI)
							m.SetMaintenance(at(0), ms == MaintenanceRequested, map[bool]MaintenanceState{true: MaintenanceNone, false: ms}[ms == MaintenanceRequested])
							m.SetNodeAttention(at(0), attention)
							o := m.Outputs()
							want := [2]LEDState{first(top, c), first(edge, c)}
							if diff := cmp.Diff(want, o.LEDs); diff != "" {
								t.Errorf("LEDs [top, edge] (-want +got):\n%s", diff)
							}
							if wantStealth := stealth && !critical; o.StealthOutput != wantStealth {
								t.Errorf("stealth output = %t, want %t", o.StealthOutput, wantStealth)
							}
							if st := m.Status(); st.Maintenance != ms || st.NodeAttention != attention {
								t.Errorf("status maintenance=%q attention=%t, want %q %t", st.Maintenance, st.NodeAttention, ms, attention)
							}
						})
						n++
					}
				}
			}
		}
	}
	if n != 2*2*6*2*2 {
		t.Fatalf("walked %d combinations", n)
	}
}

func TestMaintenanceRequestShowsUntilTheOperatorAnswers(t *testing.T) {
	m := New(clusterSettings(t))
	m.ObserveTemperature(at(0), 40)
	m.SetMaintenance(at(0), true, MaintenanceNone)
	if st := m.Status(); st.Maintenance != MaintenanceRequested || !st.MaintenanceRequested {
		t.Fatalf("maintenance = %q requested=%t", st.Maintenance, st.MaintenanceRequested)
	}
	// "false" was set but the operator still reports drained: the LED
	// keeps saying so until the state is cleared.
	m.SetMaintenance(at(1), false, MaintenanceDrained)
	if got := m.Outputs().LEDs[hardware.LEDEdge]; got != (LEDState{Pattern: PatternSteady, Color: pull}) {
		t.Fatalf("edge = %+v", got)
	}
	m.SetMaintenance(at(2), false, MaintenanceNone)
	if got := m.Outputs().LEDs[hardware.LEDEdge]; got != (LEDState{Pattern: PatternSteady, Color: idle}) {
		t.Fatalf("edge after maintenance = %+v", got)
	}
}

func TestLongPressTogglesNothingButAsks(t *testing.T) {
	m := New(clusterSettings(t))
	m.ObserveTemperature(at(0), 40)
	m.TakeEvents()
	m.ButtonLongPressed(at(1), 3200*time.Millisecond)
	ev := m.TakeEvents()
	if diff := cmp.Diff([]Reason{ReasonButtonLongPressed}, reasons(ev)); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	if !strings.Contains(ev[0].Message, "held for 3.2 s") || !strings.Contains(ev[0].Message, "start maintenance") || ev[0].Source != SourceButton {
		t.Errorf("event = %+v", ev[0])
	}
	if m.Status().Identify {
		t.Error("a long press started identify")
	}
	m.SetMaintenance(at(2), true, MaintenanceDrained)
	m.ButtonLongPressed(at(3), 4*time.Second)
	if ev := m.TakeEvents(); len(ev) != 1 || !strings.Contains(ev[0].Message, "end maintenance") {
		t.Errorf("second long press events = %+v", ev)
	}
}

func pct(v uint8) *uint8 { return &v }

// TestFanPeer drives the fan-sync rules of docs/cluster-aware.md with explicit times: the
// maximum of both demands, 100 % for a critical peer, the lost-peer floor
// for a missing, stale or silent peer, and the Events on the transitions.
func TestFanPeer(t *testing.T) {
	const staleAfter = 15 * time.Minute
	fresh := func(demand uint8) PeerObservation {
		return PeerObservation{Present: true, DemandPercent: pct(demand), HeartbeatTime: at(0), StaleAfter: staleAfter}
	}
	type step struct {
		at      time.Duration // since t0
		observe *PeerObservation
		own     float64 // own temperature; 0 keeps it
		peer    *string // SetFanPeer
		tick    bool
		// expectations after the step
		fan    uint8
		state  PeerState
		events []Reason
	}
	str := func(s string) *string { return &s }
	obs := func(o PeerObservation) *PeerObservation { return &o }
	cases := map[string][]step{
		"no peer: own demand only": {
			{own: 40, fan: 40, state: PeerNone},
		},
		"never observed (the peer watch never syncs): floor at once, FanPeerLost after the grace": {
			{own: 40, peer: str("blade-2"), fan: 60, state: PeerPending},
			{at: PeerGrace - time.Second, tick: true, fan: 60, state: PeerPending},
			{at: PeerGrace, tick: true, fan: 60, state: PeerLost, events: []Reason{ReasonFanPeerLost}},
			{at: time.Hour, tick: true, fan: 60, state: PeerLost},
		},
		"never observed, then read within the grace: no Events at all": {
			{own: 40, peer: str("blade-2"), fan: 60, state: PeerPending},
			{at: PeerGrace - time.Second, tick: true, fan: 60, state: PeerPending},
			{at: PeerGrace - time.Second, observe: obs(fresh(30)), fan: 40, state: PeerSynced},
		},
		"never observed past the grace, then read: FanPeerRestored": {
			{own: 40, peer: str("blade-2"), fan: 60, state: PeerPending},
			{at: PeerGrace, tick: true, fan: 60, state: PeerLost, events: []Reason{ReasonFanPeerLost}},
			{at: PeerGrace + time.Second, observe: obs(PeerObservation{Present: true, DemandPercent: pct(30), HeartbeatTime: t0.Add(PeerGrace), StaleAfter: staleAfter}), fan: 40, state: PeerSynced, events: []Reason{ReasonFanPeerRestored}},
		},
		"never observed, a new peer named: the grace starts again": {
			{own: 40, peer: str("blade-2"), fan: 60, state: PeerPending},
			{at: PeerGrace - time.Second, peer: str("blade-3"), fan: 60, state: PeerPending},
			{at: PeerGrace, tick: true, fan: 60, state: PeerPending},
			{at: 2*PeerGrace - time.Second, tick: true, fan: 60, state: PeerLost, events: []Reason{ReasonFanPeerLost}},
		},
		"higher peer demand wins, lower loses": {
			{own: 50, peer: str("blade-2"), observe: obs(fresh(75)), fan: 75, state: PeerSynced},
			{observe: obs(fresh(20)), fan: 60, state: PeerSynced},
		},
		"critical peer means full fan": {
			{own: 40, peer: str("blade-2"), observe: obs(PeerObservation{Present: true, DemandPercent: pct(100), Critical: true, HeartbeatTime: at(0), StaleAfter: staleAfter}), fan: 100, state: PeerSynced},
		},
		"missing peer: floor at once, FanPeerLost after the grace, back: FanPeerRestored": {
			{own: 40, peer: str("blade-2"), observe: obs(PeerObservation{}), fan: 60, state: PeerPending},
			{at: PeerGrace - time.Second, tick: true, fan: 60, state: PeerPending},
			{at: PeerGrace, tick: true, fan: 60, state: PeerLost, events: []Reason{ReasonFanPeerLost}},
			{at: PeerGrace + time.Second, observe: obs(fresh(30)), fan: 40, state: PeerSynced, events: []Reason{ReasonFanPeerRestored}},
		},
		"peer appearing within the grace: no Events at all": {
			{own: 40, peer: str("blade-2"), observe: obs(PeerObservation{}), fan: 60, state: PeerPending},
			{at: 10 * time.Second, observe: obs(PeerObservation{Present: true, DemandPercent: pct(30), HeartbeatTime: t0.Add(10 * time.Second), StaleAfter: staleAfter}), fan: 40, state: PeerSynced},
		},
		"seen, then deleted: lost at once": {
			{own: 40, peer: str("blade-2"), observe: obs(fresh(30)), fan: 40, state: PeerSynced},
			{at: time.Second, observe: obs(PeerObservation{}), fan: 60, state: PeerLost, events: []Reason{ReasonFanPeerLost}},
		},
		"stale at start (its agent is dead): lost at once": {
			{at: time.Hour, own: 40, peer: str("blade-2"), observe: obs(fresh(30)), fan: 60, state: PeerLost, events: []Reason{ReasonFanPeerLost}},
		},
		"own demand above the floor stays": {
			{own: 54, peer: str("blade-2"), observe: obs(PeerObservation{}), fan: 76, state: PeerPending},
		},
		"heartbeat ages out with no news (cluster down)": {
			{own: 40, peer: str("blade-2"), observe: obs(fresh(45)), fan: 45, state: PeerSynced},
			{at: staleAfter, tick: true, fan: 45, state: PeerSynced},
			{at: staleAfter + time.Second, tick: true, fan: 60, state: PeerLost, events: []Reason{ReasonFanPeerLost}},
			{at: staleAfter + time.Minute, tick: true, fan: 60, state: PeerLost},
		},
		"peer without demand is lost": {
			{own: 40, peer: str("blade-2"), observe: obs(PeerObservation{Present: true, HeartbeatTime: at(0), StaleAfter: staleAfter}), fan: 60, state: PeerLost, events: []Reason{ReasonFanPeerLost}},
		},
		"peer removed: own demand, no Event": {
			{own: 40, peer: str("blade-2"), observe: obs(fresh(30)), fan: 40, state: PeerSynced},
			{at: time.Second, observe: obs(PeerObservation{}), fan: 60, state: PeerLost, events: []Reason{ReasonFanPeerLost}},
			{at: 2 * time.Second, peer: str(""), fan: 40, state: PeerNone},
		},
	}
	for name, steps := range cases {
		t.Run(name, func(t *testing.T) {
			m := New(clusterSettings(t))
			for i, st := range steps {
				now := t0.Add(st.at)
				if st.own != 0 {
					m.ObserveTemperature(now, st.own)
				}
				m.TakeEvents()
				if st.peer != nil {
					m.SetFanPeer(now, *st.peer)
				}
				if st.observe != nil {
					m.ObserveFanPeer(now, *st.observe)
				}
				if st.tick {
					m.Tick(now)
				}
				got := m.Status()
				if got.FanPercent != st.fan || got.FanPeerState != st.state {
					t.Errorf("step %d: fan %d %% peer %q, want %d %% %q", i, got.FanPercent, got.FanPeerState, st.fan, st.state)
				}
				evs := m.TakeEvents()
				if diff := cmp.Diff(st.events, reasons(evs)); diff != "" {
					t.Errorf("step %d events (-want +got):\n%s", i, diff)
				}
				for _, ev := range evs {
					if want := ev.Reason == ReasonFanPeerLost; ev.Warning != want {
						t.Errorf("step %d: %s is Warning=%v, want %v (docs/cluster-aware.md)", i, ev.Reason, ev.Warning, want)
					}
				}
			}
		})
	}
}

// TestDemandIsOwnOnly: the published demand never includes the peer's, or
// two peers would hold each other's fans up for ever.
func TestDemandIsOwnOnly(t *testing.T) {
	m := New(clusterSettings(t))
	m.ObserveTemperature(at(0), 45) // curve: 40 %
	m.SetFanPeer(at(0), "blade-2")
	m.ObserveFanPeer(at(0), PeerObservation{Present: true, DemandPercent: pct(90), HeartbeatTime: at(0), StaleAfter: time.Minute})
	st := m.Status()
	if st.FanPercent != 90 || st.DemandPercent != 40 || st.FanMode != FanModeAuto {
		t.Fatalf("fan %d %% demand %d %% mode %s, want 90 40 auto", st.FanPercent, st.DemandPercent, st.FanMode)
	}
	if err := m.SetFanManual(at(1), 20, SourceAPI); err != nil {
		t.Fatal(err)
	}
	if st := m.Status(); st.FanPercent != 90 || st.DemandPercent != 20 {
		t.Fatalf("manual: fan %d %% demand %d %%, want 90 20 (the shared unit must still cool the peer)", st.FanPercent, st.DemandPercent)
	}
}
