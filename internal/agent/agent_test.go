package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubeblade/kubeblade/internal/config"
	"github.com/kubeblade/kubeblade/internal/core"
	"github.com/kubeblade/kubeblade/internal/eventbus"
	"github.com/kubeblade/kubeblade/internal/hardware"
	"github.com/kubeblade/kubeblade/internal/hardware/simulated"
	"github.com/kubeblade/kubeblade/internal/testwait"
)

var (
	idleColor     = hardware.Color{G: 0x10}
	identifyColor = hardware.Color{R: 0x10, B: 0x10}
	criticalColor = hardware.Color{R: 0x40}
)

type harness struct {
	t     *testing.T
	clk   *clocktesting.FakeClock
	blade *simulated.Blade
	hw    hardware.Backend
	a     *Agent
	sub   *eventbus.Subscription[core.Event]
	stop  context.CancelFunc
	errc  chan error
}

type harnessOpt func(*simulated.Options, *Options)

func start(t *testing.T, opts ...harnessOpt) *harness {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	so := simulated.Options{Clock: clk, Load: 0.2}
	s, err := config.Settings(config.Default())
	if err != nil {
		t.Fatal(err)
	}
	ao := Options{Settings: s, Clock: clk, ConfigName: "test", Version: "v0.0.0-test"}
	for _, o := range opts {
		o(&so, &ao)
	}
	h := &harness{t: t, clk: clk, blade: simulated.New(so), errc: make(chan error, 1)}
	h.hw = h.blade
	if ao.Backend != nil {
		h.hw = ao.Backend
	} else {
		ao.Backend = h.blade
	}
	h.a, err = New(ao)
	if err != nil {
		t.Fatal(err)
	}
	h.sub = h.a.Subscribe(1024)
	ctx, cancel := context.WithCancel(context.Background())
	h.stop = cancel
	go func() { h.errc <- h.a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-h.a.Done()
		_ = h.blade.Close()
	})
	h.sync()
	return h
}

// sync returns once the loop has handled everything that was due: requests
// drain pending samples and button edges first.
func (h *harness) sync() {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.a.exec(ctx, func(time.Time) error { return nil }); err != nil {
		h.t.Fatalf("sync: %v", err)
	}
}

// advance moves the fake clock in sample-interval steps, letting the loop
// handle each.
func (h *harness) advance(d time.Duration) {
	h.t.Helper()
	for step := DefaultSampleInterval; d > 0; d -= step {
		if d < step {
			step = d
		}
		h.clk.Step(step)
		h.sync()
	}
}

// reasons drains the subscription, ignoring StatusChanged.
func (h *harness) reasons() []core.Reason {
	var out []core.Reason
	for {
		select {
		case ev := <-h.sub.C():
			if ev.Reason != core.ReasonStatusChanged {
				out = append(out, ev.Reason)
			}
		default:
			return out
		}
	}
}

func (h *harness) shutdown() error {
	h.t.Helper()
	h.stop()
	select {
	case err := <-h.errc:
		return err
	case <-time.After(10 * time.Second):
		h.t.Fatal("Run did not return")
		return nil
	}
}

func TestStartDrivesTheCurveAndIdleColour(t *testing.T) {
	h := start(t)
	if diff := cmp.Diff([]core.Reason{core.ReasonAgentStarted}, h.reasons()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	st := h.blade.State()
	// 0.2 load settles well below the first step: the curve's floor.
	if st.FanPercent != 40 || st.EdgeLED != idleColor.String() || st.TopLED != "#000000" || st.Stealth {
		t.Errorf("hardware after start: %+v", st)
	}
	as := h.a.Status()
	if !as.Running || as.FanMode != core.FanModeAuto || as.Info.Backend != "simulated" || as.Version != "v0.0.0-test" {
		t.Errorf("status after start: %+v", as)
	}
	if !h.a.Ready() {
		t.Error("not ready while running")
	}
}

func TestOverheatEntersCriticalAndRecovers(t *testing.T) {
	h := start(t)
	h.reasons()
	h.blade.SetTemperature(62)
	h.advance(time.Second)
	st := h.a.Status()
	if !st.Critical || st.FanMode != core.FanModeCritical || h.blade.State().FanPercent != 100 {
		t.Fatalf("not critical at 62 °C: %+v / %+v", st.Status, h.blade.State())
	}
	if diff := cmp.Diff([]core.Reason{core.ReasonCriticalTemperature}, h.reasons()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	// The top LED blinks: it changes every half period.
	seen := map[hardware.Color]bool{}
	for i := 0; i < 4; i++ {
		h.clk.Step(blinkTick)
		h.sync()
		seen[h.blade.LED(hardware.LEDTop)] = true
	}
	if !seen[criticalColor] || !seen[hardware.Off] {
		t.Errorf("top LED colours seen while critical: %v", seen)
	}
	if h.blade.LED(hardware.LEDEdge) != criticalColor {
		t.Errorf("edge LED = %v, want steady critical colour", h.blade.LED(hardware.LEDEdge))
	}
	// 58 °C (about 56.6 °C a second later at full fan) is inside the
	// hysteresis band: still critical.
	h.blade.SetTemperature(58)
	h.advance(time.Second)
	if !h.a.Status().Critical {
		t.Fatal("left critical above critical − hysteresis")
	}
	h.blade.SetTemperature(50)
	h.advance(time.Second)
	st = h.a.Status()
	if st.Critical || st.FanMode != core.FanModeAuto {
		t.Fatalf("still critical at 50 °C: %+v", st.Status)
	}
	if diff := cmp.Diff([]core.Reason{core.ReasonTemperatureNormal}, h.reasons()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if h.blade.LED(hardware.LEDTop) != hardware.Off || h.blade.LED(hardware.LEDEdge) != idleColor {
		t.Errorf("LEDs after recovery: top %v edge %v", h.blade.LED(hardware.LEDTop), h.blade.LED(hardware.LEDEdge))
	}
}

func TestLoadHeatsTheSimulatedBladeIntoCritical(t *testing.T) {
	h := start(t)
	if err := h.blade.SetLoad(3); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 300 && !h.a.Status().Critical; i++ {
		h.advance(time.Second)
	}
	if !h.a.Status().Critical {
		t.Fatalf("load 3 never reached critical; at %.1f °C", h.a.Status().TemperatureCelsius)
	}
}

func TestButtonDebouncedTogglesIdentify(t *testing.T) {
	h := start(t)
	h.reasons()
	now := h.clk.Now()
	// One press with bounce: three edges within 10 ms.
	for _, d := range []time.Duration{0, 3 * time.Millisecond, 9 * time.Millisecond} {
		h.blade.PressButtonAt(now.Add(d))
	}
	h.sync()
	if !h.a.Status().Identify {
		t.Fatal("identify not started by the button")
	}
	if diff := cmp.Diff([]core.Reason{core.ReasonButtonPressed, core.ReasonIdentifyStarted}, h.reasons()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	c := h.a.Counters()
	if c.ButtonEdges != 3 || c.ButtonPresses != 1 {
		t.Errorf("edges %d presses %d, want 3 and 1", c.ButtonEdges, c.ButtonPresses)
	}
	seen := map[hardware.Color]bool{}
	for i := 0; i < 4; i++ {
		h.clk.Step(blinkTick)
		h.sync()
		seen[h.blade.LED(hardware.LEDEdge)] = true
	}
	if !seen[identifyColor] || !seen[hardware.Off] {
		t.Errorf("edge LED colours seen while identifying: %v", seen)
	}
	h.clk.Step(time.Second)
	h.blade.PressButton()
	h.sync()
	if h.a.Status().Identify {
		t.Fatal("second press did not confirm identify")
	}
}

func TestWaitForIdentifyConfirm(t *testing.T) {
	h := start(t)
	ctx := context.Background()
	// Not identifying: returns at once.
	if err := h.a.WaitForIdentifyConfirm(ctx); err != nil {
		t.Fatal(err)
	}
	if err := h.a.SetIdentify(ctx, true, core.SourceAPI); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- h.a.WaitForIdentifyConfirm(ctx) }()
	// Wait until the waiter is registered before pressing.
	testwait.Eventually(t, 10*time.Second, "the confirmation waiter registered", func(context.Context) (bool, string) {
		select {
		case err := <-done:
			t.Fatalf("returned before confirmation: %v", err)
		default:
		}
		h.sync()
		h.a.mu.RLock()
		defer h.a.mu.RUnlock()
		return len(h.a.confirmers) == 1, fmt.Sprintf("%d waiters", len(h.a.confirmers))
	})
	h.blade.PressButton()
	h.sync()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("not released by the button")
	}
	tctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := h.a.SetIdentify(ctx, true, core.SourceAPI); err != nil {
		t.Fatal(err)
	}
	if err := h.a.WaitForIdentifyConfirm(tctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait without confirmation = %v, want deadline exceeded", err)
	}
}

func TestFanRequests(t *testing.T) {
	h := start(t)
	ctx := context.Background()
	if err := h.a.SetFanManual(ctx, 70, core.SourceAPI); err != nil {
		t.Fatal(err)
	}
	if got := h.blade.State().FanPercent; got != 70 || h.a.Status().FanMode != core.FanModeManual {
		t.Fatalf("manual 70: hardware %d mode %s", got, h.a.Status().FanMode)
	}
	if err := h.a.SetFanManual(ctx, 120, core.SourceAPI); !errors.Is(err, core.ErrInvalidArgument) {
		t.Fatalf("120 %%: err = %v", err)
	}
	if got := h.blade.State().FanPercent; got != 70 {
		t.Fatalf("refused request changed the fan to %d", got)
	}
	h.blade.SetTemperature(65)
	h.advance(time.Second)
	if err := h.a.SetFanManual(ctx, 30, core.SourceAPI); !errors.Is(err, core.ErrCriticalActive) {
		t.Fatalf("during critical: err = %v", err)
	}
	if got := h.blade.State().FanPercent; got != 100 {
		t.Fatalf("critical fan = %d, want 100", got)
	}
	h.blade.SetTemperature(40)
	h.advance(time.Second)
	if got := h.blade.State().FanPercent; got != 70 {
		t.Fatalf("after critical the manual 70 %% should resume, fan = %d", got)
	}
	if err := h.a.SetFanAuto(ctx, core.SourceAPI); err != nil {
		t.Fatal(err)
	}
	if got := h.a.Status().FanMode; got != core.FanModeAuto {
		t.Fatalf("mode after auto = %s", got)
	}
}

func TestStealthOutputAndLEDs(t *testing.T) {
	h := start(t)
	on := true
	if err := h.a.SetStealth(context.Background(), &on, core.SourceAPI); err != nil {
		t.Fatal(err)
	}
	st := h.blade.State()
	if !st.Stealth || st.EdgeLED != "#000000" || st.TopLED != "#000000" {
		t.Fatalf("stealth hardware: %+v", st)
	}
	h.blade.SetTemperature(70)
	h.advance(time.Second)
	if h.blade.State().Stealth {
		t.Fatal("critical must suspend the stealth output")
	}
	if h.blade.LED(hardware.LEDEdge) != criticalColor {
		t.Fatal("critical must light the LEDs in stealth")
	}
	h.blade.SetTemperature(40)
	h.advance(time.Second)
	if st := h.blade.State(); !st.Stealth || st.EdgeLED != "#000000" {
		t.Fatalf("stealth not resumed after critical: %+v", st)
	}
}

func TestFanStallDetected(t *testing.T) {
	h := start(t)
	h.reasons()
	h.blade.SetFanStalled(true)
	h.advance(9 * time.Second)
	if h.a.Status().FanStalled {
		t.Fatal("stalled after 9 s")
	}
	h.advance(2 * time.Second)
	if !h.a.Status().FanStalled {
		t.Fatal("not stalled after 11 s at 0 RPM")
	}
	got := h.reasons()
	if len(got) == 0 || got[0] != core.ReasonFanStalled {
		t.Fatalf("events = %v, want FanStalled first", got)
	}
	h.blade.SetFanStalled(false)
	h.advance(time.Second)
	if h.a.Status().FanStalled {
		t.Fatal("still stalled with the fan turning")
	}
}

func TestSafeExit(t *testing.T) {
	h := start(t)
	ctx := context.Background()
	if err := h.a.SetFanManual(ctx, 30, core.SourceAPI); err != nil {
		t.Fatal(err)
	}
	if err := h.a.SetIdentify(ctx, true, core.SourceAPI); err != nil {
		t.Fatal(err)
	}
	waiter := make(chan error, 1)
	go func() { waiter <- h.a.WaitForIdentifyConfirm(ctx) }()
	if err := h.shutdown(); err != nil {
		t.Fatal(err)
	}
	st := h.blade.State()
	if st.FanPercent != 100 || st.TopLED != "#000000" || st.EdgeLED != "#000000" {
		t.Fatalf("after safe exit: %+v", st)
	}
	if h.a.Status().Running || h.a.Ready() {
		t.Error("still reported running")
	}
	if err := h.a.SetIdentify(ctx, false, core.SourceAPI); !errors.Is(err, ErrNotRunning) {
		t.Errorf("request after stop: %v", err)
	}
	select {
	case err := <-waiter:
		if err != nil && !errors.Is(err, ErrNotRunning) {
			t.Errorf("identify waiter: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("identify waiter not released by shutdown")
	}
	if err := h.a.Run(ctx); err == nil {
		t.Error("second Run accepted")
	}
}

func TestUnchangedOutputsAreNotRewritten(t *testing.T) {
	h := start(t)
	h.advance(5 * time.Minute) // settle at the curve floor
	before := h.blade.State().Writes
	h.advance(time.Minute)
	if after := h.blade.State().Writes; after != before {
		t.Fatalf("%d writes in a steady minute, want 0", after-before)
	}
}

func TestMissingCapabilitiesKeepTheRestWorking(t *testing.T) {
	h := start(t, func(so *simulated.Options, _ *Options) {
		so.Missing = []hardware.Capability{hardware.CapLEDs, hardware.CapTach, hardware.CapPoEDetect}
	})
	h.blade.SetTemperature(70)
	h.advance(time.Second)
	st := h.a.Status()
	if !st.Critical || h.blade.State().FanPercent != 100 {
		t.Fatalf("critical must work without LEDs: %+v", st.Status)
	}
	if st.Capabilities.Has(hardware.CapLEDs) {
		t.Error("LED capability reported")
	}
	if n := h.a.Counters().HardwareErrors["led"]; n != 0 {
		t.Errorf("%d LED errors: missing capabilities must be skipped, not retried", n)
	}
}

func TestTemperatureReadErrorsGoFullFan(t *testing.T) {
	h := start(t)
	h.blade.SetTemperatureError(true)
	h.advance(3 * time.Second)
	if got := h.blade.State().FanPercent; got != 100 {
		t.Fatalf("fan with a failing sensor = %d, want 100", got)
	}
	if n := h.a.Counters().HardwareErrors["temperature"]; n != 3 {
		t.Errorf("temperature errors = %d, want 3", n)
	}
	h.blade.SetTemperatureError(false)
	h.advance(time.Second)
	if got := h.blade.State().FanPercent; got != 40 {
		t.Fatalf("fan after the sensor recovered = %d, want 40", got)
	}
}

// flakyFan fails its first n fan writes.
type flakyFan struct {
	hardware.Backend
	n int
}

func (f *flakyFan) SetFanPercent(p uint8) error {
	if f.n > 0 {
		f.n--
		return errors.New("pwm write: input/output error")
	}
	return f.Backend.SetFanPercent(p)
}

func TestFailedWritesAreRetried(t *testing.T) {
	var blade *simulated.Blade
	h := start(t, func(so *simulated.Options, ao *Options) {
		blade = simulated.New(*so)
		ao.Backend = &flakyFan{Backend: blade, n: 2}
	})
	// The harness's own blade is unused; read the wrapped one.
	if got := blade.State().FanPercent; got != 100 {
		t.Fatalf("fan before successful write = %d", got)
	}
	h.advance(2 * time.Second)
	if got := blade.State().FanPercent; got != 40 {
		t.Fatalf("fan after retries = %d, want 40", got)
	}
	if n := h.a.Counters().HardwareErrors["fan"]; n != 2 {
		t.Errorf("fan errors = %d, want 2", n)
	}
}

type notABlade struct{ *simulated.Blade }

func (n notABlade) Info() hardware.Info {
	i := n.Blade.Info()
	i.IsBlade = false
	return i
}

func TestNotABladeDrivesNothing(t *testing.T) {
	var blade *simulated.Blade
	h := start(t, func(so *simulated.Options, ao *Options) {
		blade = simulated.New(*so)
		ao.Backend = notABlade{blade}
	})
	h.advance(3 * time.Second)
	if err := h.shutdown(); err != nil {
		t.Fatal(err)
	}
	if w := blade.State().Writes; w != 0 {
		t.Fatalf("%d hardware writes on a machine that is not a blade", w)
	}
}

func TestApplySettingsLive(t *testing.T) {
	h := start(t)
	h.blade.SetTemperature(40)
	h.advance(time.Second)
	h.reasons()
	cfg := config.Default()
	cfg.CriticalCelsius = 35
	cfg.HysteresisCelsius = 2
	s, err := config.Settings(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.a.ApplySettings(context.Background(), s, "BladeConfig hot/2"); err != nil {
		t.Fatal(err)
	}
	st := h.a.Status()
	if !st.Critical || st.ConfigName != "BladeConfig hot/2" || st.Settings.CriticalCelsius != 35 {
		t.Fatalf("after a live config with a 35 °C threshold: critical %v config %q", st.Critical, st.ConfigName)
	}
	got := h.reasons()
	if diff := cmp.Diff([]core.Reason{core.ReasonCriticalTemperature, core.ReasonFanModeChanged, core.ReasonConfigApplied}, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestSlowSubscriberDoesNotBlock(t *testing.T) {
	h := start(t)
	stuck := h.a.Subscribe(1) // never read
	defer stuck.Close()
	for i := 0; i < 50; i++ {
		h.blade.SetTemperature(40 + float64(i%2)*30) // flip critical on and off
		h.advance(time.Second)
	}
	if stuck.Dropped() == 0 {
		t.Fatal("a stuck subscriber lost nothing: it must have been blocking")
	}
	if h.a.Counters().BusDropped == 0 {
		t.Error("drops not counted")
	}
}

func TestTwoAgentsInOneProcessAreIndependent(t *testing.T) {
	h1, h2 := start(t), start(t)
	h1.blade.SetTemperature(70)
	h1.advance(time.Second)
	h2.advance(time.Second)
	if !h1.a.Status().Critical || h2.a.Status().Critical {
		t.Fatalf("critical: agent1 %v agent2 %v", h1.a.Status().Critical, h2.a.Status().Critical)
	}
	if err := h2.a.SetIdentify(context.Background(), true, core.SourceAPI); err != nil {
		t.Fatal(err)
	}
	if h1.a.Status().Identify {
		t.Fatal("identify leaked between agents")
	}
}

func TestPowerSourceChangeEvent(t *testing.T) {
	h := start(t)
	h.reasons()
	h.blade.SetPower(hardware.PowerPoEOrUSBC)
	h.advance(time.Second)
	if diff := cmp.Diff([]core.Reason{core.ReasonPowerSourceChanged}, h.reasons()); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	if h.a.Status().PowerSource != hardware.PowerPoEOrUSBC {
		t.Fatal("power source not in status")
	}
}

// TestLongAndShortPressFromEdges drives the button as the GPIO backend
// reports it, down and up edges: a press held 3 s asks for maintenance at
// the threshold, while still held, and leaves identify alone; a short one
// toggles identify when released.
func TestLongAndShortPressFromEdges(t *testing.T) {
	h := start(t)
	h.reasons()
	h.blade.ButtonDown()
	h.advance(2 * time.Second)
	if got := h.reasons(); len(got) != 0 {
		t.Fatalf("events while held 2 s: %v", got)
	}
	h.advance(1100 * time.Millisecond)
	if diff := cmp.Diff([]core.Reason{core.ReasonButtonLongPressed}, h.reasons()); diff != "" {
		t.Fatalf("events at 3.1 s held (-want +got):\n%s", diff)
	}
	h.blade.ButtonUp()
	h.advance(time.Second)
	if got := h.reasons(); len(got) != 0 {
		t.Fatalf("events after releasing a long press: %v", got)
	}
	if h.a.Status().Identify {
		t.Fatal("a long press started identify")
	}

	h.blade.ButtonDown()
	h.advance(300 * time.Millisecond)
	h.blade.ButtonUp()
	h.advance(100 * time.Millisecond)
	if diff := cmp.Diff([]core.Reason{core.ReasonButtonPressed, core.ReasonIdentifyStarted}, h.reasons()); diff != "" {
		t.Fatalf("events of a short press (-want +got):\n%s", diff)
	}
	if c := h.a.Counters(); c.ButtonEdges != 4 || c.ButtonPresses != 2 {
		t.Errorf("counters edges=%d presses=%d, want 4 and 2", c.ButtonEdges, c.ButtonPresses)
	}
}

// TestFanPeerAndNodeStateReachTheHardware: the agent's requests for the
// cluster-aware states end in the fan duty and the LEDs.
func TestFanPeerAndNodeStateReachTheHardware(t *testing.T) {
	h := start(t)
	ctx := context.Background()
	own := h.a.Status().FanPercent
	if err := h.a.SetFanPeer(ctx, "blade-2"); err != nil {
		t.Fatal(err)
	}
	d := uint8(95)
	if err := h.a.ObserveFanPeer(ctx, core.PeerObservation{Present: true, DemandPercent: &d, HeartbeatTime: h.clk.Now(), StaleAfter: 15 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	if st := h.blade.State(); st.FanPercent != 95 || h.a.Status().DemandPercent != own {
		t.Fatalf("fan %d %%, demand %d %%; want 95 and the own %d", st.FanPercent, h.a.Status().DemandPercent, own)
	}
	if err := h.a.SetNodeState(ctx, true, core.MaintenanceDrained, true); err != nil {
		t.Fatal(err)
	}
	s := h.a.Status().Settings
	if got := h.blade.LED(hardware.LEDEdge); got != s.SafeToPullColor {
		t.Errorf("edge LED %v, want safe-to-pull %v", got, s.SafeToPullColor)
	}
	if got := h.blade.LED(hardware.LEDTop); got != s.NodeAttentionColor {
		t.Errorf("top LED %v, want node attention %v", got, s.NodeAttentionColor)
	}
}

func TestStalledWhenTheLoopStopsTicking(t *testing.T) {
	h := start(t)
	limit := max(stallSamples*DefaultSampleInterval, MinStallAfter)
	h.advance(2 * limit)
	if err := h.a.Stalled(); err != nil {
		t.Fatalf("a ticking loop reports %v", err)
	}
	// A wedged sensor bus: the next sample blocks inside the backend, so
	// no iteration finishes after the last sync, whenever the loop takes
	// the tick.
	h.blade.SetSensorHang(true)
	h.clk.Step(DefaultSampleInterval)
	h.clk.Step(limit - DefaultSampleInterval)
	if err := h.a.Stalled(); err != nil {
		t.Fatalf("stalled after exactly the limit: %v, want nil", err)
	}
	h.clk.Step(time.Second)
	if err := h.a.Stalled(); !errors.Is(err, ErrStalled) {
		t.Fatalf("Stalled() = %v, want ErrStalled", err)
	}
	if !h.a.Ready() {
		t.Fatal("Ready() = false: a stalled loop is still running, the probe decides")
	}
	h.blade.SetSensorHang(false)
	h.sync()
	if err := h.a.Stalled(); err != nil {
		t.Fatalf("after the sensor recovered: %v", err)
	}
}

func TestNotStalledBeforeRunOrAfterExit(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s, err := config.Settings(config.Default())
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(Options{Backend: simulated.New(simulated.Options{Clock: clk}), Settings: s, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	clk.Step(time.Hour)
	if err := a.Stalled(); err != nil {
		t.Fatalf("before Run: %v", err)
	}
	h := start(t)
	if err := h.shutdown(); err != nil {
		t.Fatal(err)
	}
	h.clk.Step(time.Hour)
	if err := h.a.Stalled(); err != nil {
		t.Fatalf("after Run returned: %v", err)
	}
}

// lateFanUnit is a blade whose smart fan unit has not spoken yet: like the
// linux backend, it reports what the unit provides as missing, with the
// reason in Info.Detail, until heard.
type lateFanUnit struct {
	*simulated.Blade
	heard atomic.Bool
}

var unitCaps = []hardware.Capability{hardware.CapFan, hardware.CapTach, hardware.CapAirflowTemperature}

const silentReason = "missing fan: smart fan unit on /dev/ttyAMA5: no frame yet"

func (l *lateFanUnit) Capabilities() hardware.Capabilities {
	cs := l.Blade.Capabilities()
	if !l.heard.Load() {
		for _, c := range unitCaps {
			delete(cs, c)
		}
	}
	return cs
}

func (l *lateFanUnit) Info() hardware.Info {
	i := l.Blade.Info()
	if !l.heard.Load() {
		i.Detail += "; " + silentReason
	}
	return i
}

// TestCapabilitiesFoundLateReachTheStatus: a capability that appears after
// start (the smart unit's first frame) is in the next sample's status, with
// a StatusChanged event for the Blade status to follow, and its output is
// written then; before, it is missing with the backend's reason.
func TestCapabilitiesFoundLateReachTheStatus(t *testing.T) {
	var late *lateFanUnit
	h := start(t, func(so *simulated.Options, ao *Options) {
		so.FanUnit = hardware.FanUnitSmart
		late = &lateFanUnit{Blade: simulated.New(*so)}
		ao.Backend = late
	})
	st := h.a.Status()
	for _, c := range unitCaps {
		if st.Capabilities.Has(c) {
			t.Errorf("%s reported before the unit spoke", c)
		}
	}
	if !strings.Contains(st.Info.Detail, silentReason) {
		t.Errorf("detail %q does not say why the fan is missing", st.Info.Detail)
	}
	writes := late.State().Writes
	h.advance(3 * time.Second)
	if got := late.State(); got.Writes != writes || got.FanPercent != 100 {
		t.Fatalf("the agent drove a fan it does not have: %+v", got)
	}

	late.heard.Store(true)
	h.reasons()
	h.advance(DefaultSampleInterval)
	st = h.a.Status()
	for _, c := range unitCaps {
		if !st.Capabilities.Has(c) {
			t.Errorf("%s still missing after the unit spoke", c)
		}
	}
	if strings.Contains(st.Info.Detail, silentReason) {
		t.Errorf("detail %q still says the unit is silent", st.Info.Detail)
	}
	if got := late.State().FanPercent; got != st.FanPercent || got == 100 {
		t.Errorf("fan %d %% once present, want the curve's %d %%", got, st.FanPercent)
	}
	if !st.FanRPMValid || !st.AirflowValid {
		t.Errorf("readings of the unit not taken: %+v", st.Status)
	}
}

// TestHardwareChangesAreObservable: watchers (the Blade status) are told
// when only the capabilities or the hardware detail change.
func TestHardwareChangesAreObservable(t *testing.T) {
	base := Status{Info: hardware.Info{Backend: "linux", Detail: "missing fan: silent"},
		Capabilities: hardware.Capabilities{hardware.CapLEDs: true}}
	for name, change := range map[string]func(*Status){
		"a capability appears": func(s *Status) {
			s.Capabilities = hardware.Capabilities{hardware.CapLEDs: true, hardware.CapFan: true}
		},
		"a capability goes":  func(s *Status) { s.Capabilities = hardware.Capabilities{} },
		"the detail changes": func(s *Status) { s.Info.Detail = "fan: smart-fan-unit" },
	} {
		t.Run(name, func(t *testing.T) {
			next := base
			change(&next)
			if sameObservable(base, next) {
				t.Fatal("change not observable")
			}
		})
	}
	same := base
	same.Capabilities = hardware.Capabilities{hardware.CapLEDs: true, hardware.CapFan: false}
	if !sameObservable(base, same) {
		t.Fatal("an absent and a false capability differ")
	}
}
