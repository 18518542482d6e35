package simulated

import (
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubeblade/kubeblade/internal/hardware"
)

func newBlade(t *testing.T, o Options) (*Blade, *clocktesting.FakeClock) {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	o.Clock = clk
	b := New(o)
	t.Cleanup(func() { _ = b.Close() })
	return b, clk
}

func mustTemp(t *testing.T, b *Blade) float64 {
	t.Helper()
	v, err := b.SoCTemperature()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestStartsAtEquilibriumWithFullFan(t *testing.T) {
	b, _ := newBlade(t, Options{Load: 1})
	// 25 + 1*50*(1-0.6) = 45
	if got := mustTemp(t, b); math.Abs(got-45) > 1e-9 {
		t.Fatalf("initial temperature = %v, want 45", got)
	}
}

func TestTemperatureFollowsLoadAndFan(t *testing.T) {
	cases := map[string]struct {
		load float64
		duty uint8
		want float64 // equilibrium
	}{
		"idle, fan off":  {0.2, 0, 35},
		"busy, fan off":  {1, 0, 75},
		"busy, fan full": {1, 100, 45},
		"busy, fan half": {1, 50, 60},
		"hot rack, full": {2, 100, 65},
		"no load":        {0.0001, 100, 25.002},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			b, clk := newBlade(t, Options{})
			if err := b.SetLoad(tc.load); err != nil {
				t.Fatal(err)
			}
			if err := b.SetFanPercent(tc.duty); err != nil {
				t.Fatal(err)
			}
			start := mustTemp(t, b)
			clk.Step(20 * time.Second) // one time constant: 63 % of the way
			mid := mustTemp(t, b)
			wantMid := tc.want + (start-tc.want)*math.Exp(-1)
			if math.Abs(mid-wantMid) > 0.01 {
				t.Errorf("after one time constant: %v, want %v", mid, wantMid)
			}
			clk.Step(10 * time.Minute)
			if got := mustTemp(t, b); math.Abs(got-tc.want) > 0.01 {
				t.Errorf("settled at %v, want %v", got, tc.want)
			}
		})
	}
}

func TestTachFollowsDutyAndStall(t *testing.T) {
	b, _ := newBlade(t, Options{MaxRPM: 6000})
	for _, tc := range []struct {
		duty    uint8
		stalled bool
		want    float64
	}{{0, false, 0}, {50, false, 3000}, {100, false, 6000}, {100, true, 0}} {
		if err := b.SetFanPercent(tc.duty); err != nil {
			t.Fatal(err)
		}
		b.SetFanStalled(tc.stalled)
		got, err := b.FanRPM()
		if err != nil || got != tc.want {
			t.Errorf("duty %d stalled %v: rpm = %v, %v; want %v", tc.duty, tc.stalled, got, err, tc.want)
		}
	}
	if err := b.SetFanPercent(101); err == nil {
		t.Error("duty 101 accepted")
	}
}

func TestStalledFanHeatsUp(t *testing.T) {
	b, clk := newBlade(t, Options{Load: 1})
	b.SetFanStalled(true)
	clk.Step(10 * time.Minute)
	if got := mustTemp(t, b); math.Abs(got-75) > 0.01 {
		t.Fatalf("stalled fan settled at %v, want 75", got)
	}
}

func TestButtonAndOutputs(t *testing.T) {
	b, clk := newBlade(t, Options{})
	if !b.PressButton() {
		t.Fatal("press refused")
	}
	select {
	case ev := <-b.ButtonEvents():
		if !ev.Time.Equal(clk.Now()) || ev.Edge != hardware.ButtonClick {
			t.Errorf("press %+v, want a click at %v", ev, clk.Now())
		}
	default:
		t.Fatal("no button event")
	}
	// A held press: down, then up 3.5 s later, each at the clock's time.
	down := clk.Now()
	b.ButtonDown()
	clk.Step(3500 * time.Millisecond)
	b.ButtonUp()
	for _, want := range []hardware.ButtonEvent{{Time: down, Edge: hardware.ButtonDown}, {Time: down.Add(3500 * time.Millisecond), Edge: hardware.ButtonUp}} {
		if ev := <-b.ButtonEvents(); ev != want {
			t.Errorf("edge %+v, want %+v", ev, want)
		}
	}
	red := hardware.Color{R: 255}
	if err := b.SetLED(hardware.LEDEdge, red); err != nil {
		t.Fatal(err)
	}
	if err := b.SetStealth(true); err != nil {
		t.Fatal(err)
	}
	if b.LED(hardware.LEDEdge) != red || !b.State().Stealth || b.State().EdgeLED != "#ff0000" {
		t.Errorf("outputs not observable: %+v", b.State())
	}
	if err := b.SetLED(hardware.LED(5), red); err == nil {
		t.Error("unknown LED accepted")
	}
	_ = b.Close()
	if b.PressButton() {
		t.Error("press accepted after Close")
	}
	if _, ok := <-b.ButtonEvents(); ok {
		t.Error("button channel open after Close")
	}
}

func TestMissingCapabilities(t *testing.T) {
	b, _ := newBlade(t, Options{Missing: []hardware.Capability{hardware.CapLEDs, hardware.CapTach}})
	caps := b.Capabilities()
	if caps.Has(hardware.CapLEDs) || caps.Has(hardware.CapTach) || !caps.Has(hardware.CapFan) {
		t.Fatalf("capabilities = %v", caps.List())
	}
	if err := b.SetLED(hardware.LEDTop, hardware.Off); !errors.Is(err, hardware.ErrNotSupported) {
		t.Errorf("SetLED err = %v, want ErrNotSupported", err)
	}
	if _, err := b.FanRPM(); !errors.Is(err, hardware.ErrNotSupported) {
		t.Errorf("FanRPM err = %v, want ErrNotSupported", err)
	}
	if _, err := b.AirflowTemperature(); !errors.Is(err, hardware.ErrNotSupported) {
		t.Errorf("standard fan unit has no airflow sensor, err = %v", err)
	}
}

func TestSmartFanUnitAirflow(t *testing.T) {
	b, _ := newBlade(t, Options{FanUnit: hardware.FanUnitSmart, Load: 1})
	v, err := b.AirflowTemperature()
	if err != nil || v != 35 {
		t.Fatalf("airflow = %v, %v; want 35", v, err)
	}
}

func TestControlHandler(t *testing.T) {
	b, _ := newBlade(t, Options{})
	h := ControlHandler(b)
	cases := []struct {
		method, path string
		wantCode     int
		wantBody     string
	}{
		{"GET", "/state", 200, `"fanPercent": 100`},
		{"POST", "/load?value=1.5", 200, `"load": 1.5`},
		{"POST", "/load?value=-1", 400, "must be a number"},
		{"POST", "/load?value=abc", 400, "want a number"},
		{"POST", "/temperature?celsius=70", 200, `"temperatureCelsius": 70`},
		{"POST", "/power?source=poe-or-usbc", 200, `"power": "poe-or-usbc"`},
		{"POST", "/power?source=mains", 400, "want poe-802.3at or poe-or-usbc"},
		{"POST", "/fan-stall?stalled=true", 200, `"fanStalled": true`},
		{"POST", "/fan-stall?stalled=maybe", 400, "want true or false"},
		{"POST", "/sensor-hang?hung=true", 200, `"sensorHung": true`},
		{"POST", "/sensor-hang?hung=false", 200, `"sensorHung": false`},
		{"POST", "/sensor-hang?hung=perhaps", 400, "want true or false"},
		{"POST", "/button", 200, `"load"`},
		{"POST", "/button?hold=10ms", 200, `"load"`},
		{"POST", "/button?hold=forever", 400, "want a duration"},
		{"POST", "/button?hold=2m", 400, "want a duration"},
		{"DELETE", "/state", 405, ""},
	}
	for _, tc := range cases {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, nil))
		if rec.Code != tc.wantCode || !strings.Contains(rec.Body.String(), tc.wantBody) {
			t.Errorf("%s %s = %d %q, want %d containing %q", tc.method, tc.path, rec.Code, rec.Body.String(), tc.wantCode, tc.wantBody)
		}
	}
	var got []hardware.ButtonEdge
	for len(b.ButtonEvents()) > 0 {
		got = append(got, (<-b.ButtonEvents()).Edge)
	}
	if want := []hardware.ButtonEdge{hardware.ButtonClick, hardware.ButtonDown, hardware.ButtonUp}; !slices.Equal(got, want) {
		t.Errorf("POST /button, /button?hold=10ms queued %v, want %v", got, want)
	}
	_ = http.StatusOK
}

func TestSensorHangBlocksReadsUntilReleased(t *testing.T) {
	for name, release := range map[string]func(*Blade){
		"released": func(b *Blade) { b.SetSensorHang(false) },
		"closed":   func(b *Blade) { _ = b.Close() },
	} {
		t.Run(name, func(t *testing.T) {
			b, _ := newBlade(t, Options{})
			b.SetSensorHang(true)
			done := make(chan error, 1)
			go func() {
				_, err := b.SoCTemperature()
				done <- err
			}()
			// The other sensors and the outputs keep working: only the
			// thermal sensor's bus is wedged.
			if _, err := b.FanRPM(); err != nil {
				t.Fatalf("FanRPM while the sensor hangs: %v", err)
			}
			if err := b.SetFanPercent(50); err != nil {
				t.Fatalf("SetFanPercent while the sensor hangs: %v", err)
			}
			select {
			case err := <-done:
				t.Fatalf("SoCTemperature returned (%v) while the sensor hangs", err)
			default:
			}
			release(b)
			if err := <-done; err != nil {
				t.Fatalf("SoCTemperature after release: %v", err)
			}
		})
	}
}
