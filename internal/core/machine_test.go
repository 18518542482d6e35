package core

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kubeblade/kubeblade/internal/fancurve"
	"github.com/kubeblade/kubeblade/internal/hardware"
)

var (
	t0       = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	idle     = hardware.Color{G: 16}
	identify = hardware.Color{R: 16, B: 16}
	crit     = hardware.Color{R: 64}
)

func settings(t *testing.T) Settings {
	t.Helper()
	c, err := fancurve.New([]fancurve.Step{{TemperatureCelsius: 45, Percent: 40}, {TemperatureCelsius: 55, Percent: 80}})
	if err != nil {
		t.Fatal(err)
	}
	return Settings{
		Curve: c, CriticalCelsius: 60, HysteresisCelsius: 5, TachEnabled: true,
		IdleColor: idle, IdentifyColor: identify, CriticalColor: crit,
	}
}

func reasons(ev []Event) []Reason {
	var out []Reason
	for _, e := range ev {
		out = append(out, e.Reason)
	}
	return out
}

func at(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

func TestFanPercentByMode(t *testing.T) {
	cases := map[string]struct {
		steps    func(m *Machine) error
		wantPct  uint8
		wantMode FanMode
	}{
		"no reading yet is full fan": {func(m *Machine) error { return nil }, 100, FanModeAuto},
		"curve midway": {func(m *Machine) error {
			m.ObserveTemperature(at(0), 50)
			return nil
		}, 60, FanModeAuto},
		"curve below first step": {func(m *Machine) error {
			m.ObserveTemperature(at(0), 30)
			return nil
		}, 40, FanModeAuto},
		"failed reading is full fan": {func(m *Machine) error {
			m.ObserveTemperature(at(0), 30)
			m.TemperatureUnavailable(at(1))
			return nil
		}, 100, FanModeAuto},
		"manual override": {func(m *Machine) error {
			m.ObserveTemperature(at(0), 50)
			return m.SetFanManual(at(1), 25, SourceAPI)
		}, 25, FanModeManual},
		"manual zero": {func(m *Machine) error {
			m.ObserveTemperature(at(0), 50)
			return m.SetFanManual(at(1), 0, SourceAPI)
		}, 0, FanModeManual},
		"back to auto": {func(m *Machine) error {
			m.ObserveTemperature(at(0), 50)
			if err := m.SetFanManual(at(1), 25, SourceAPI); err != nil {
				return err
			}
			m.SetFanAuto(at(2), SourceAPI)
			return nil
		}, 60, FanModeAuto},
		"critical forces full": {func(m *Machine) error {
			m.ObserveTemperature(at(0), 61)
			return nil
		}, 100, FanModeCritical},
		"critical beats an earlier manual": {func(m *Machine) error {
			m.ObserveTemperature(at(0), 50)
			if err := m.SetFanManual(at(1), 10, SourceAPI); err != nil {
				return err
			}
			m.ObserveTemperature(at(2), 65)
			return nil
		}, 100, FanModeCritical},
		"manual resumes after critical ends": {func(m *Machine) error {
			m.ObserveTemperature(at(0), 50)
			if err := m.SetFanManual(at(1), 10, SourceAPI); err != nil {
				return err
			}
			m.ObserveTemperature(at(2), 65)
			m.ObserveTemperature(at(3), 50)
			return nil
		}, 10, FanModeManual},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			m := New(settings(t))
			if err := tc.steps(m); err != nil {
				t.Fatal(err)
			}
			st := m.Status()
			if st.FanPercent != tc.wantPct || st.FanMode != tc.wantMode {
				t.Errorf("fan = %d %% %s, want %d %% %s", st.FanPercent, st.FanMode, tc.wantPct, tc.wantMode)
			}
			if got := m.Outputs().FanPercent; got != tc.wantPct {
				t.Errorf("Outputs().FanPercent = %d, want %d", got, tc.wantPct)
			}
		})
	}
}

func TestSetFanManualRefusals(t *testing.T) {
	cases := map[string]struct {
		temp    float64
		percent int
		wantErr error
	}{
		"over 100":        {50, 120, ErrInvalidArgument},
		"negative":        {50, -1, ErrInvalidArgument},
		"during critical": {70, 50, ErrCriticalActive},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			m := New(settings(t))
			m.ObserveTemperature(at(0), tc.temp)
			m.TakeEvents()
			before := m.Status()
			err := m.SetFanManual(at(1), tc.percent, SourceAPI)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("SetFanManual error = %v, want %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(before, m.Status()); diff != "" {
				t.Errorf("refused request changed state (-before +after):\n%s", diff)
			}
			if ev := m.TakeEvents(); len(ev) != 0 {
				t.Errorf("refused request raised events %v", reasons(ev))
			}
		})
	}
}

func TestCriticalHysteresis(t *testing.T) {
	// Critical 60, hysteresis 5: enter at >= 60, leave at <= 55.
	cases := []struct {
		temp         float64
		wantCritical bool
		wantEvents   []Reason
	}{
		{59.9, false, nil},
		{60, true, []Reason{ReasonCriticalTemperature}},
		{62, true, nil},
		{58, true, nil},
		{55.1, true, nil},
		{55, false, []Reason{ReasonTemperatureNormal}},
		{57, false, nil},
		{59.99, false, nil},
		{60.5, true, []Reason{ReasonCriticalTemperature}},
	}
	m := New(settings(t))
	for i, tc := range cases {
		m.ObserveTemperature(at(i), tc.temp)
		st := m.Status()
		if st.Critical != tc.wantCritical {
			t.Errorf("step %d at %g °C: critical = %v, want %v", i, tc.temp, st.Critical, tc.wantCritical)
		}
		if diff := cmp.Diff(tc.wantEvents, reasons(m.TakeEvents())); diff != "" {
			t.Errorf("step %d at %g °C: events (-want +got):\n%s", i, tc.temp, diff)
		}
	}
}

func TestCriticalEventIsWarning(t *testing.T) {
	m := New(settings(t))
	m.ObserveTemperature(at(0), 70)
	ev := m.TakeEvents()
	if len(ev) != 1 || !ev[0].Warning || ev[0].Time != at(0) {
		t.Fatalf("events = %+v, want one Warning CriticalTemperature at t0", ev)
	}
}

func TestCriticalSurvivesFailedReading(t *testing.T) {
	m := New(settings(t))
	m.ObserveTemperature(at(0), 70)
	m.TemperatureUnavailable(at(1))
	if st := m.Status(); !st.Critical || st.FanPercent != 100 {
		t.Fatalf("after a failed reading in critical: %+v", st)
	}
}

func TestIdentify(t *testing.T) {
	cases := map[string]struct {
		steps      func(m *Machine)
		want       bool
		wantEvents []Reason
	}{
		"button starts": {func(m *Machine) { m.ButtonPressed(at(0)) }, true,
			[]Reason{ReasonButtonPressed, ReasonIdentifyStarted}},
		"button confirms": {func(m *Machine) {
			m.ButtonPressed(at(0))
			m.ButtonPressed(at(1))
		}, false, []Reason{ReasonButtonPressed, ReasonIdentifyStarted, ReasonButtonPressed, ReasonIdentifyStopped}},
		"api starts, button confirms": {func(m *Machine) {
			m.SetIdentify(at(0), true, SourceAPI)
			m.ButtonPressed(at(1))
		}, false, []Reason{ReasonIdentifyStarted, ReasonButtonPressed, ReasonIdentifyStopped}},
		"api twice is one event": {func(m *Machine) {
			m.SetIdentify(at(0), true, SourceAPI)
			m.SetIdentify(at(1), true, SourceAnnotation)
		}, true, []Reason{ReasonIdentifyStarted}},
		"api off when already off": {func(m *Machine) { m.SetIdentify(at(0), false, SourceAPI) }, false, nil},
		"api stops": {func(m *Machine) {
			m.SetIdentify(at(0), true, SourceAPI)
			m.SetIdentify(at(1), false, SourceAPI)
		}, false, []Reason{ReasonIdentifyStarted, ReasonIdentifyStopped}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			m := New(settings(t))
			tc.steps(m)
			if got := m.Status().Identify; got != tc.want {
				t.Errorf("identify = %v, want %v", got, tc.want)
			}
			if diff := cmp.Diff(tc.wantEvents, reasons(m.TakeEvents())); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

func TestIdentifyStoppedByButtonSaysConfirmed(t *testing.T) {
	m := New(settings(t))
	m.SetIdentify(at(0), true, SourceAnnotation)
	m.ButtonPressed(at(1))
	ev := m.TakeEvents()
	last := ev[len(ev)-1]
	if last.Reason != ReasonIdentifyStopped || last.Source != SourceButton || last.Message != "identify confirmed by button" {
		t.Fatalf("last event = %+v", last)
	}
}

func TestStealth(t *testing.T) {
	on, off := true, false
	cases := map[string]struct {
		configured  bool
		override    *bool
		wantReq     bool
		wantEvents  []Reason
		wantOverSet bool
	}{
		"configured off, no override":   {false, nil, false, nil, false},
		"configured on, no override":    {true, nil, true, nil, false},
		"override on":                   {false, &on, true, []Reason{ReasonStealthEnabled}, true},
		"override off beats configured": {true, &off, false, []Reason{ReasonStealthDisabled}, true},
		"override equal to configured":  {true, &on, true, nil, true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := settings(t)
			s.Stealth = tc.configured
			m := New(s)
			m.SetStealth(at(0), tc.override, SourceAnnotation)
			st := m.Status()
			if st.StealthRequested != tc.wantReq || (st.StealthOverride != nil) != tc.wantOverSet {
				t.Errorf("status = requested %v override %v", st.StealthRequested, st.StealthOverride)
			}
			if diff := cmp.Diff(tc.wantEvents, reasons(m.TakeEvents())); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStealthOverrideCleared(t *testing.T) {
	s := settings(t)
	s.Stealth = true
	m := New(s)
	off := false
	m.SetStealth(at(0), &off, SourceAPI)
	m.SetStealth(at(1), nil, SourceAPI)
	if st := m.Status(); !st.StealthRequested || st.StealthOverride != nil {
		t.Fatalf("after clearing the override: %+v", st)
	}
	if diff := cmp.Diff([]Reason{ReasonStealthDisabled, ReasonStealthEnabled}, reasons(m.TakeEvents())); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestOutputsPrecedence(t *testing.T) {
	steady := func(c hardware.Color) LEDState { return LEDState{Pattern: PatternSteady, Color: c} }
	blink := func(c hardware.Color) LEDState { return LEDState{Pattern: PatternBlink, Color: c} }
	dark := LEDState{Pattern: PatternOff}
	cases := map[string]struct {
		critical, identify, stealth bool
		want                        Outputs
	}{
		"idle":                      {false, false, false, Outputs{FanPercent: 60, LEDs: [2]LEDState{dark, steady(idle)}}},
		"stealth":                   {false, false, true, Outputs{FanPercent: 60, LEDs: [2]LEDState{dark, dark}, StealthOutput: true}},
		"identify":                  {false, true, false, Outputs{FanPercent: 60, LEDs: [2]LEDState{dark, blink(identify)}}},
		"identify over stealth":     {false, true, true, Outputs{FanPercent: 60, LEDs: [2]LEDState{dark, blink(identify)}, StealthOutput: true}},
		"critical":                  {true, false, false, Outputs{FanPercent: 100, LEDs: [2]LEDState{blink(crit), steady(crit)}}},
		"critical over identify":    {true, true, false, Outputs{FanPercent: 100, LEDs: [2]LEDState{blink(crit), steady(crit)}}},
		"critical suspends stealth": {true, false, true, Outputs{FanPercent: 100, LEDs: [2]LEDState{blink(crit), steady(crit)}}},
		"critical over all":         {true, true, true, Outputs{FanPercent: 100, LEDs: [2]LEDState{blink(crit), steady(crit)}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			m := New(settings(t))
			temp := 50.0
			if tc.critical {
				temp = 70
			}
			m.ObserveTemperature(at(0), temp)
			m.SetIdentify(at(0), tc.identify, SourceAPI)
			m.SetStealth(at(0), &tc.stealth, SourceAPI)
			if diff := cmp.Diff(tc.want, m.Outputs()); diff != "" {
				t.Errorf("outputs (-want +got):\n%s", diff)
			}
			if got := m.Status().Stealth; got != tc.want.StealthOutput {
				t.Errorf("Status().Stealth = %v, want %v", got, tc.want.StealthOutput)
			}
		})
	}
}

func TestLEDOverride(t *testing.T) {
	m := New(settings(t))
	m.ObserveTemperature(at(0), 50)
	blue := hardware.Color{B: 200}
	if err := m.SetLEDOverride(hardware.LEDTop, &blue); err != nil {
		t.Fatal(err)
	}
	if got := m.Outputs().LEDs[hardware.LEDTop]; got != (LEDState{PatternSteady, blue}) {
		t.Errorf("top with override = %+v", got)
	}
	m.SetIdentify(at(1), true, SourceAPI)
	if got := m.Outputs().LEDs[hardware.LEDTop]; got != (LEDState{PatternSteady, blue}) {
		t.Errorf("identify must leave the top override alone, got %+v", got)
	}
	m.ObserveTemperature(at(2), 70)
	if got := m.Outputs().LEDs[hardware.LEDTop]; got.Pattern != PatternBlink || got.Color != crit {
		t.Errorf("critical must beat the override, got %+v", got)
	}
	if err := m.SetLEDOverride(hardware.LED(7), &blue); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("unknown LED: err = %v", err)
	}
	if err := m.SetLEDOverride(hardware.LEDTop, nil); err != nil {
		t.Fatal(err)
	}
	if m.Status().LEDOverride[hardware.LEDTop] != nil {
		t.Error("override not cleared")
	}
}

func TestBlackColourIsOff(t *testing.T) {
	s := settings(t)
	s.IdleColor = hardware.Off
	m := New(s)
	m.ObserveTemperature(at(0), 50)
	if got := m.Outputs().LEDs[hardware.LEDEdge]; got.Pattern != PatternOff {
		t.Fatalf("black idle colour should render as off, got %+v", got)
	}
}

func TestLEDStateColorAt(t *testing.T) {
	c := hardware.Color{R: 1}
	base := time.Unix(100, 0)
	cases := map[string]struct {
		s    LEDState
		at   time.Time
		want hardware.Color
	}{
		"steady":            {LEDState{PatternSteady, c}, base.Add(700 * time.Millisecond), c},
		"off":               {LEDState{PatternOff, c}, base, hardware.Off},
		"blink first half":  {LEDState{PatternBlink, c}, base.Add(499 * time.Millisecond), c},
		"blink second half": {LEDState{PatternBlink, c}, base.Add(500 * time.Millisecond), hardware.Off},
		"blink next period": {LEDState{PatternBlink, c}, base.Add(1000 * time.Millisecond), c},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := tc.s.ColorAt(tc.at); got != tc.want {
				t.Errorf("ColorAt = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestFanStall(t *testing.T) {
	type obs struct {
		sec  int
		rpm  float64
		temp float64 // 0: no temperature reading at this step
	}
	cases := map[string]struct {
		tach        bool
		manual      *int
		steps       []obs
		wantStalled bool
		wantEvents  []Reason
	}{
		"spinning":                       {true, nil, []obs{{0, 2000, 50}, {20, 2000, 0}}, false, nil},
		"zero for 9s is not yet a stall": {true, nil, []obs{{0, 0, 50}, {9, 0, 0}}, false, nil},
		"zero for 10s stalls": {true, nil, []obs{{0, 0, 50}, {10, 0, 0}}, true,
			[]Reason{ReasonFanStalled}},
		"stall reported once": {true, nil, []obs{{0, 0, 50}, {10, 0, 0}, {30, 0, 0}}, true,
			[]Reason{ReasonFanStalled}},
		"spin in between restarts timer": {true, nil, []obs{{0, 0, 50}, {5, 100, 0}, {6, 0, 0}, {15, 0, 0}}, false, nil},
		"recovers": {true, nil, []obs{{0, 0, 50}, {10, 0, 0}, {11, 900, 0}}, false,
			[]Reason{ReasonFanStalled, ReasonFanRecovered}},
		"low duty may stand still": {true, intp(10), []obs{{0, 0, 50}, {60, 0, 0}}, false, nil},
		"exactly 20 percent must turn": {true, intp(20), []obs{{0, 0, 50}, {10, 0, 0}}, true,
			[]Reason{ReasonFanStalled}},
		"tach disabled never stalls": {false, nil, []obs{{0, 0, 50}, {60, 0, 0}}, false, nil},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := settings(t)
			s.TachEnabled = tc.tach
			m := New(s)
			if tc.manual != nil {
				if err := m.SetFanManual(at(0), *tc.manual, SourceAPI); err != nil {
					t.Fatal(err)
				}
			}
			m.TakeEvents()
			for _, o := range tc.steps {
				if o.temp != 0 {
					m.ObserveTemperature(at(o.sec), o.temp)
				}
				m.ObserveFanRPM(at(o.sec), o.rpm)
			}
			if got := m.Status().FanStalled; got != tc.wantStalled {
				t.Errorf("stalled = %v, want %v", got, tc.wantStalled)
			}
			if diff := cmp.Diff(tc.wantEvents, reasons(m.TakeEvents())); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFanStallAdvancesOnTick(t *testing.T) {
	m := New(settings(t))
	m.ObserveTemperature(at(0), 50)
	m.ObserveFanRPM(at(0), 0)
	m.Tick(at(10))
	if !m.Status().FanStalled {
		t.Fatal("Tick did not advance stall detection")
	}
}

func TestPowerSourceChange(t *testing.T) {
	m := New(settings(t))
	m.ObservePower(at(0), hardware.PowerPoEPlus)
	m.ObservePower(at(1), hardware.PowerPoEPlus)
	if ev := m.TakeEvents(); len(ev) != 0 {
		t.Fatalf("first reading and an unchanged one raised %v", reasons(ev))
	}
	m.ObservePower(at(2), hardware.PowerPoEOrUSBC)
	if diff := cmp.Diff([]Reason{ReasonPowerSourceChanged}, reasons(m.TakeEvents())); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	if m.Status().PowerSource != hardware.PowerPoEOrUSBC {
		t.Fatal("power source not recorded")
	}
}

func TestApplySettingsLive(t *testing.T) {
	m := New(settings(t))
	m.ObserveTemperature(at(0), 58)
	m.TakeEvents()
	s := settings(t)
	s.CriticalCelsius, s.HysteresisCelsius = 57, 2
	s.Stealth = true
	m.ApplySettings(at(1), s, "default/3")
	st := m.Status()
	if !st.Critical || !st.StealthRequested || st.Stealth {
		t.Fatalf("after lowering the threshold: critical %v stealth requested %v in effect %v", st.Critical, st.StealthRequested, st.Stealth)
	}
	want := []Reason{ReasonCriticalTemperature, ReasonStealthEnabled, ReasonFanModeChanged, ReasonConfigApplied}
	if diff := cmp.Diff(want, reasons(m.TakeEvents())); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	steep, _ := fancurve.New([]fancurve.Step{{TemperatureCelsius: 30, Percent: 90}})
	s.Curve, s.CriticalCelsius = steep, 80
	m.ApplySettings(at(2), s, "default/4")
	if st := m.Status(); st.Critical || st.FanPercent != 90 {
		t.Fatalf("after the new curve and threshold: critical %v fan %d", st.Critical, st.FanPercent)
	}
}

func intp(v int) *int { return &v }
