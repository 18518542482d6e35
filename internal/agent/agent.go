// Package agent runs one blade: it samples the hardware backend on a clock,
// feeds the core state machine, writes the outputs it asks for, renders LED
// blinking, publishes events, and serves requests from the API layers. All
// state changes happen on the agent's single loop goroutine; everything else
// talks to it through methods that are safe for concurrent use.
package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	"github.com/kubeblade/kubeblade/internal/core"
	"github.com/kubeblade/kubeblade/internal/debounce"
	"github.com/kubeblade/kubeblade/internal/eventbus"
	"github.com/kubeblade/kubeblade/internal/hardware"
)

// Defaults for Options.
const (
	// DefaultSampleInterval is how often sensors are read and the fan
	// curve re-evaluated; the spec asks for at least every 2 s.
	DefaultSampleInterval = time.Second
	// DefaultButtonDebounce absorbs contact bounce while still letting a
	// person's quick double press count twice.
	DefaultButtonDebounce = 50 * time.Millisecond
	// blinkTick renders blinking LEDs; half the blink period so each phase
	// is shown.
	blinkTick = core.BlinkPeriod / 2
	// MinStallAfter is the least time without a loop iteration before
	// Stalled reports the loop stuck: a slow but working sysfs or UART
	// read takes well under a second, so this is far beyond a hiccup.
	MinStallAfter = 15 * time.Second
	// stallSamples is how many missed sample ticks count as a stall when
	// that is longer than MinStallAfter.
	stallSamples = 15
)

// ErrStalled is returned by Stalled when the loop stopped ticking.
var ErrStalled = errors.New("agent loop stalled")

// ErrNotRunning is returned by requests made while the loop is not running.
var ErrNotRunning = errors.New("agent is not running")

// Options configure an Agent.
type Options struct {
	Backend  hardware.Backend
	Settings core.Settings
	// ConfigName names the applied configuration in events and status
	// (e.g. a file path or "BladeConfig default generation 3").
	ConfigName string
	Clock      clock.WithTicker
	Logger     *slog.Logger
	// SampleInterval defaults to DefaultSampleInterval.
	SampleInterval time.Duration
	// ButtonDebounce defaults to DefaultButtonDebounce.
	ButtonDebounce time.Duration
	// LongPress is how long the button must be held to toggle
	// maintenance (default core.LongPress, 3 s).
	LongPress time.Duration
	// Version is reported in status.
	Version string
}

// Status is the agent's observable state: the core's plus what the agent
// knows about the hardware and itself.
type Status struct {
	core.Status
	Info         hardware.Info
	Capabilities hardware.Capabilities
	ConfigName   string
	Settings     core.Settings
	Version      string
	// Running is true between the loop's start and its safe exit.
	Running bool
	// UpdatedAt is when the state last changed.
	UpdatedAt time.Time
}

// Counters are monotonically increasing totals for metrics.
type Counters struct {
	Events         map[core.Reason]uint64
	HardwareErrors map[string]uint64
	ButtonEdges    uint64
	ButtonPresses  uint64
	Samples        uint64
	BusDropped     uint64
}

// Agent drives one blade.
type Agent struct {
	hw      hardware.Backend
	clk     clock.WithTicker
	log     *slog.Logger
	sample  time.Duration
	version string
	bus     *eventbus.Bus[core.Event]
	cmds    chan command
	running atomic.Bool
	runOnce atomic.Bool
	// lastTick is when the loop last finished an iteration (UnixNano of
	// clk), the heartbeat that Stalled reads.
	lastTick atomic.Int64
	stopped  chan struct{}
	caps     hardware.Capabilities
	info     hardware.Info
	machine  *core.Machine
	button   debounce.Button
	// written caches the last successful write per output so unchanged
	// outputs cost nothing; a failed write clears its entry to retry.
	written written

	mu         sync.RWMutex
	status     Status
	counters   Counters
	errLogged  map[string]bool
	confirmers []chan struct{}
}

type written struct {
	fan     *uint8
	leds    [2]*hardware.Color
	stealth *bool
}

type command struct {
	do   func(now time.Time) error
	done chan error
}

// New creates an agent. It does not touch the hardware until Run.
func New(o Options) (*Agent, error) {
	if o.Backend == nil {
		return nil, errors.New("agent: no hardware backend")
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.SampleInterval <= 0 {
		o.SampleInterval = DefaultSampleInterval
	}
	if o.ButtonDebounce <= 0 {
		o.ButtonDebounce = DefaultButtonDebounce
	}
	if o.LongPress <= 0 {
		o.LongPress = core.LongPress
	}
	a := &Agent{
		hw:        o.Backend,
		clk:       o.Clock,
		log:       o.Logger,
		sample:    o.SampleInterval,
		version:   o.Version,
		bus:       eventbus.New[core.Event](),
		cmds:      make(chan command),
		stopped:   make(chan struct{}),
		caps:      o.Backend.Capabilities(),
		info:      o.Backend.Info(),
		machine:   core.New(o.Settings),
		button:    debounce.Button{Window: o.ButtonDebounce, LongPress: o.LongPress},
		counters:  Counters{Events: map[core.Reason]uint64{}, HardwareErrors: map[string]uint64{}},
		errLogged: map[string]bool{},
	}
	a.status = a.buildStatus(o.Clock.Now(), o.ConfigName)
	return a, nil
}

// Subscribe returns a subscription to the agent's events. Every state change
// publishes at least a StatusChanged event. Slow subscribers lose their
// oldest events, never block the agent.
func (a *Agent) Subscribe(buffer int) *eventbus.Subscription[core.Event] {
	return a.bus.Subscribe(buffer)
}

// Status returns a snapshot of the agent's state.
func (a *Agent) Status() Status {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.status
}

// Counters returns a copy of the agent's counters.
func (a *Agent) Counters() Counters {
	a.mu.RLock()
	defer a.mu.RUnlock()
	c := a.counters
	c.Events = make(map[core.Reason]uint64, len(a.counters.Events))
	for k, v := range a.counters.Events {
		c.Events[k] = v
	}
	c.HardwareErrors = make(map[string]uint64, len(a.counters.HardwareErrors))
	for k, v := range a.counters.HardwareErrors {
		c.HardwareErrors[k] = v
	}
	c.BusDropped = a.bus.Dropped()
	return c
}

// Ready reports whether the loop runs.
func (a *Agent) Ready() bool { return a.running.Load() }

// Stalled returns an error wrapping ErrStalled when Run has been called,
// has not returned, and its loop has not finished an iteration for max(15 sample intervals, MinStallAfter),
// e.g. because a hardware read never returned; nil otherwise. A stalled
// loop no longer protects the blade, so the liveness probe reports it and
// the kubelet (or systemd's watchdog) restarts the process.
func (a *Agent) Stalled() error {
	if !a.runOnce.Load() {
		return nil
	}
	select {
	case <-a.stopped:
		return nil
	default:
	}
	limit := max(stallSamples*a.sample, MinStallAfter)
	last := time.Unix(0, a.lastTick.Load())
	if since := a.clk.Since(last); since > limit {
		return fmt.Errorf("%w: no iteration for %s (limit %s)", ErrStalled, since.Round(time.Second), limit)
	}
	return nil
}

// Done is closed when Run has returned.
func (a *Agent) Done() <-chan struct{} { return a.stopped }

// SetIdentify starts or stops identify.
func (a *Agent) SetIdentify(ctx context.Context, on bool, src core.Source) error {
	return a.exec(ctx, func(now time.Time) error {
		a.machine.SetIdentify(now, on, src)
		return nil
	})
}

// SetStealth overrides the configured stealth mode; nil clears the override.
func (a *Agent) SetStealth(ctx context.Context, override *bool, src core.Source) error {
	return a.exec(ctx, func(now time.Time) error {
		a.machine.SetStealth(now, override, src)
		return nil
	})
}

// SetFanManual fixes the fan duty. It fails with core.ErrInvalidArgument
// or core.ErrCriticalActive and then changes nothing.
func (a *Agent) SetFanManual(ctx context.Context, percent int, src core.Source) error {
	return a.exec(ctx, func(now time.Time) error { return a.machine.SetFanManual(now, percent, src) })
}

// SetFanAuto returns the fan to the curve.
func (a *Agent) SetFanAuto(ctx context.Context, src core.Source) error {
	return a.exec(ctx, func(now time.Time) error {
		a.machine.SetFanAuto(now, src)
		return nil
	})
}

// SetLEDOverride fixes (or with nil releases) one LED's colour.
func (a *Agent) SetLEDOverride(ctx context.Context, led hardware.LED, c *hardware.Color) error {
	return a.exec(ctx, func(now time.Time) error { return a.machine.SetLEDOverride(led, c) })
}

// ApplySettings switches to new settings live.
func (a *Agent) ApplySettings(ctx context.Context, s core.Settings, name string) error {
	return a.exec(ctx, func(now time.Time) error {
		a.machine.ApplySettings(now, s, name)
		a.mu.Lock()
		a.status.ConfigName = name
		a.mu.Unlock()
		return nil
	})
}

// SetFanPeer names the blade sharing this blade's standard fan unit ("" for
// none).
func (a *Agent) SetFanPeer(ctx context.Context, name string) error {
	return a.exec(ctx, func(now time.Time) error {
		a.machine.SetFanPeer(now, name)
		return nil
	})
}

// ObserveFanPeer records what was read of the fan peer's Blade.
func (a *Agent) ObserveFanPeer(ctx context.Context, o core.PeerObservation) error {
	return a.exec(ctx, func(now time.Time) error {
		a.machine.ObserveFanPeer(now, o)
		return nil
	})
}

// SetNodeState records the Node's maintenance request and state and whether
// the Node needs attention; they decide LED patterns.
func (a *Agent) SetNodeState(ctx context.Context, maintenanceRequested bool, st core.MaintenanceState, attention bool) error {
	return a.exec(ctx, func(now time.Time) error {
		a.machine.SetMaintenance(now, maintenanceRequested, st)
		a.machine.SetNodeAttention(now, attention)
		return nil
	})
}

// WaitForIdentifyConfirm blocks until identify stops (a button press
// confirms it, or it is switched off), or ctx ends. It returns at once when
// identify is not active.
func (a *Agent) WaitForIdentifyConfirm(ctx context.Context) error {
	ch := make(chan struct{})
	err := a.exec(ctx, func(now time.Time) error {
		if !a.machine.Status().Identify {
			close(ch)
			return nil
		}
		a.mu.Lock()
		a.confirmers = append(a.confirmers, ch)
		a.mu.Unlock()
		return nil
	})
	if err != nil {
		return err
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-a.stopped:
		return ErrNotRunning
	}
}

// exec runs fn on the loop goroutine and waits for its result.
func (a *Agent) exec(ctx context.Context, fn func(now time.Time) error) error {
	c := command{do: fn, done: make(chan error, 1)}
	select {
	case a.cmds <- c:
	case <-ctx.Done():
		return ctx.Err()
	case <-a.stopped:
		return ErrNotRunning
	}
	select {
	case err := <-c.done:
		return err
	case <-ctx.Done():
		// The command still runs; only the caller stops waiting.
		return ctx.Err()
	}
}

// Run drives the blade until ctx ends, then leaves it safe: fan at 100 %,
// LEDs dark. It can be called once.
func (a *Agent) Run(ctx context.Context) error {
	if !a.runOnce.CompareAndSwap(false, true) {
		return errors.New("agent: Run called twice")
	}
	defer close(a.stopped)
	a.reportMissingCapabilities()

	now := a.clk.Now()
	a.lastTick.Store(now.UnixNano())
	a.machine.TakeEvents()
	a.publish(core.Event{Reason: core.ReasonAgentStarted, Time: now,
		Message: fmt.Sprintf("kubeblade agent %s started on %s backend (%s)", a.version, a.info.Backend, a.info.SoC)})
	a.sampleSensors(now)
	a.lastTick.Store(a.clk.Now().UnixNano())
	a.running.Store(true)
	a.step(now)

	sampler := a.clk.NewTicker(a.sample)
	defer sampler.Stop()
	var blink clock.Ticker
	var blinkC <-chan time.Time
	buttons := a.hw.ButtonEvents()
	// btnTimer wakes the loop when the button's debounce settles or a held
	// press reaches the long-press threshold.
	var btnTimer clock.Timer
	var btnC <-chan time.Time
	var btnAt time.Time
	defer func() {
		if btnTimer != nil {
			btnTimer.Stop()
		}
	}()

	for {
		a.buttonDue()
		if next, ok := a.button.Next(); !ok {
			if btnTimer != nil {
				btnTimer.Stop()
				btnTimer, btnC = nil, nil
			}
		} else if btnTimer == nil || !next.Equal(btnAt) {
			if btnTimer != nil {
				btnTimer.Stop()
			}
			btnTimer, btnAt = a.clk.NewTimer(max(next.Sub(a.clk.Now()), 0)), next
			btnC = btnTimer.C()
		}
		// Only tick for blinking while an LED blinks: an idle agent wakes
		// once per sample interval and no more.
		if a.machine.Outputs().Blinking() {
			if blink == nil {
				blink = a.clk.NewTicker(blinkTick)
				blinkC = blink.C()
			}
		} else if blink != nil {
			blink.Stop()
			blink, blinkC = nil, nil
		}

		select {
		case <-ctx.Done():
			if blink != nil {
				blink.Stop()
			}
			return a.safeExit()
		case <-sampler.C():
			a.onSample()
		case <-blinkC:
			a.writeOutputs(a.clk.Now())
		case <-btnC:
			btnTimer, btnC = nil, nil
			a.onPresses(a.button.Advance(a.clk.Now()))
		case ev, ok := <-buttons:
			if !ok {
				buttons = nil // backend closed; keep the blade safe anyway
				continue
			}
			a.onButton(ev)
		case c := <-a.cmds:
			// Hardware comes first: a request is answered against the
			// freshest readings, and a due sample is never starved by a
			// stream of requests.
			select {
			case <-sampler.C():
				a.onSample()
			default:
			}
			for drained := false; !drained && buttons != nil; {
				select {
				case ev, ok := <-buttons:
					if !ok {
						buttons = nil
						continue
					}
					a.onButton(ev)
				default:
					drained = true
				}
			}
			a.buttonDue()
			now := a.clk.Now()
			err := c.do(now)
			a.step(now)
			c.done <- err
		}
		a.lastTick.Store(a.clk.Now().UnixNano())
	}
}

func (a *Agent) onSample() {
	now := a.clk.Now()
	a.sampleSensors(now)
	a.step(now)
}

func (a *Agent) onButton(ev hardware.ButtonEvent) {
	a.mu.Lock()
	a.counters.ButtonEdges++
	a.mu.Unlock()
	switch ev.Edge {
	case hardware.ButtonDown:
		a.onPresses(a.button.Edge(ev.Time, true))
	case hardware.ButtonUp:
		a.onPresses(a.button.Edge(ev.Time, false))
	default:
		a.onPresses(a.button.Click(ev.Time))
	}
}

// buttonDue decides what the button's debounce and long-press timing have
// decided by now. The loop calls it before it waits and before it answers
// a request, so a decision whose time has passed never waits for a timer.
func (a *Agent) buttonDue() {
	if next, ok := a.button.Next(); ok && !next.After(a.clk.Now()) {
		a.onPresses(a.button.Advance(a.clk.Now()))
	}
}

// onPresses feeds decided presses to the machine: a short press toggles
// identify, a long one asks for maintenance to be toggled.
func (a *Agent) onPresses(ps []debounce.Press) {
	if len(ps) == 0 {
		return
	}
	a.mu.Lock()
	a.counters.ButtonPresses += uint64(len(ps))
	a.mu.Unlock()
	now := a.clk.Now()
	for _, p := range ps {
		if p.Kind == debounce.Long {
			a.machine.ButtonLongPressed(now, p.Held)
		} else {
			a.machine.ButtonPressed(now)
		}
	}
	a.step(now)
}

// missingCapabilities lists the absent capabilities that matter here.
func (a *Agent) missingCapabilities() []string {
	var missing []string
	for _, c := range a.caps.Missing() {
		// Only the smart fan unit measures airflow; its absence on a
		// standard unit is expected, not degraded.
		if c == string(hardware.CapAirflowTemperature) && a.info.FanUnit != hardware.FanUnitSmart {
			continue
		}
		missing = append(missing, c)
	}
	return missing
}

func (a *Agent) reportMissingCapabilities() {
	if missing := a.missingCapabilities(); len(missing) > 0 {
		a.log.Warn("hardware capabilities missing; the agent runs without them",
			"backend", a.info.Backend, "missing", missing, "detail", a.info.Detail)
	}
	if !a.info.IsBlade {
		a.log.Warn("this machine is not a Compute Blade; the agent will not drive any hardware", "detail", a.info.Detail)
	}
}

// refreshHardware reads the backend's capabilities and Info again: they
// change when hardware is found after Open (a smart fan unit that was
// silent sends its first frame), and the status must say so. An output
// whose capability changed is written afresh, whatever the cache says.
func (a *Agent) refreshHardware() {
	caps, info := a.hw.Capabilities(), a.hw.Info()
	if info == a.info && sameCapabilities(caps, a.caps) {
		return
	}
	for _, c := range hardware.AllCapabilities {
		if caps.Has(c) == a.caps.Has(c) {
			continue
		}
		switch c {
		case hardware.CapFan:
			a.written.fan = nil
		case hardware.CapLEDs:
			a.written.leds = [2]*hardware.Color{}
		case hardware.CapStealth:
			a.written.stealth = nil
		}
	}
	a.caps, a.info = caps, info
	a.log.Info("hardware capabilities changed", "backend", info.Backend,
		"capabilities", caps.List(), "missing", a.missingCapabilities(), "detail", info.Detail)
}

func sameCapabilities(x, y hardware.Capabilities) bool {
	for _, c := range hardware.AllCapabilities {
		if x.Has(c) != y.Has(c) {
			return false
		}
	}
	return true
}

func (a *Agent) sampleSensors(now time.Time) {
	a.mu.Lock()
	a.counters.Samples++
	a.mu.Unlock()
	a.refreshHardware()
	if !a.info.IsBlade {
		return
	}
	if a.caps.Has(hardware.CapTemperature) {
		if t, err := a.hw.SoCTemperature(); err != nil {
			a.hwError("temperature", err)
			a.machine.TemperatureUnavailable(now)
		} else {
			a.hwOK("temperature")
			a.machine.ObserveTemperature(now, t)
		}
	} else {
		a.machine.TemperatureUnavailable(now)
	}
	if a.caps.Has(hardware.CapAirflowTemperature) {
		if t, err := a.hw.AirflowTemperature(); err == nil {
			a.machine.ObserveAirflow(now, t)
		}
	}
	if a.caps.Has(hardware.CapTach) && a.machine.Settings().TachEnabled {
		if rpm, err := a.hw.FanRPM(); err != nil {
			a.hwError("tach", err)
		} else {
			a.hwOK("tach")
			a.machine.ObserveFanRPM(now, rpm)
		}
	}
	if a.caps.Has(hardware.CapPoEDetect) {
		if p, err := a.hw.PowerSource(); err != nil {
			a.hwError("power", err)
		} else {
			a.hwOK("power")
			a.machine.ObservePower(now, p)
		}
	}
	a.machine.Tick(now)
}

// step writes outputs, stores the new status and then publishes the events
// the machine raised and, when anything observable changed, a StatusChanged:
// whoever receives an event already sees its effect in Status().
func (a *Agent) step(now time.Time) {
	a.writeOutputs(now)
	events := a.machine.TakeEvents()
	st := a.buildStatus(now, "")
	a.mu.Lock()
	prev := a.status
	st.ConfigName = prev.ConfigName
	changed := !sameObservable(prev, st)
	if !changed {
		st.UpdatedAt = prev.UpdatedAt
	}
	a.status = st
	a.mu.Unlock()
	for _, ev := range events {
		a.publish(ev)
		if ev.Reason == core.ReasonIdentifyStopped {
			a.releaseConfirmers()
		}
	}
	if changed || len(events) > 0 {
		a.bus.Publish(core.Event{Reason: core.ReasonStatusChanged, Time: now})
	}
}

func (a *Agent) buildStatus(now time.Time, cfgName string) Status {
	return Status{
		Status:       a.machine.Status(),
		Info:         a.info,
		Capabilities: a.caps,
		ConfigName:   cfgName,
		Settings:     a.machine.Settings(),
		Version:      a.version,
		Running:      a.running.Load(),
		UpdatedAt:    now,
	}
}

// sameObservable compares what watchers care about; the fan curve is
// compared by its steps since curves hold slices.
func sameObservable(x, y Status) bool {
	if x.Running != y.Running || x.ConfigName != y.ConfigName ||
		x.Info != y.Info || !sameCapabilities(x.Capabilities, y.Capabilities) {
		return false
	}
	xs, ys := x.Status, y.Status
	if (xs.StealthOverride == nil) != (ys.StealthOverride == nil) ||
		(xs.StealthOverride != nil && *xs.StealthOverride != *ys.StealthOverride) {
		return false
	}
	for i := range xs.LEDOverride {
		xo, yo := xs.LEDOverride[i], ys.LEDOverride[i]
		if (xo == nil) != (yo == nil) || (xo != nil && *xo != *yo) {
			return false
		}
	}
	xs.StealthOverride, ys.StealthOverride = nil, nil
	xs.LEDOverride, ys.LEDOverride = [2]*hardware.Color{}, [2]*hardware.Color{}
	return xs == ys
}

func (a *Agent) publish(ev core.Event) {
	a.mu.Lock()
	a.counters.Events[ev.Reason]++
	a.mu.Unlock()
	level := slog.LevelInfo
	if ev.Warning {
		level = slog.LevelWarn
	}
	a.log.Log(context.Background(), level, ev.Message, "reason", ev.Reason, "source", ev.Source)
	a.bus.Publish(ev)
}

func (a *Agent) releaseConfirmers() {
	a.mu.Lock()
	cs := a.confirmers
	a.confirmers = nil
	a.mu.Unlock()
	for _, c := range cs {
		close(c)
	}
}

func (a *Agent) writeOutputs(now time.Time) {
	if !a.info.IsBlade {
		return
	}
	o := a.machine.Outputs()
	if a.caps.Has(hardware.CapFan) && (a.written.fan == nil || *a.written.fan != o.FanPercent) {
		if err := a.hw.SetFanPercent(o.FanPercent); err != nil {
			a.hwError("fan", err)
			a.written.fan = nil
		} else {
			a.hwOK("fan")
			v := o.FanPercent
			a.written.fan = &v
		}
	}
	if a.caps.Has(hardware.CapStealth) && (a.written.stealth == nil || *a.written.stealth != o.StealthOutput) {
		if err := a.hw.SetStealth(o.StealthOutput); err != nil {
			a.hwError("stealth", err)
			a.written.stealth = nil
		} else {
			a.hwOK("stealth")
			v := o.StealthOutput
			a.written.stealth = &v
		}
	}
	if a.caps.Has(hardware.CapLEDs) {
		for _, led := range hardware.LEDs {
			c := o.LEDs[led].ColorAt(now)
			if w := a.written.leds[led]; w != nil && *w == c {
				continue
			}
			if err := a.hw.SetLED(led, c); err != nil {
				a.hwError("led", err)
				a.written.leds[led] = nil
			} else {
				a.hwOK("led")
				a.written.leds[led] = &c
			}
		}
	}
}

// hwError counts a hardware error and logs it once until the operation
// succeeds again, so a broken sensor does not flood the log every second.
func (a *Agent) hwError(op string, err error) {
	a.mu.Lock()
	a.counters.HardwareErrors[op]++
	first := !a.errLogged[op]
	a.errLogged[op] = true
	a.mu.Unlock()
	if first {
		a.log.Error("hardware operation failed", "op", op, "err", err)
	}
}

func (a *Agent) hwOK(op string) {
	a.mu.Lock()
	was := a.errLogged[op]
	delete(a.errLogged, op)
	a.mu.Unlock()
	if was {
		a.log.Info("hardware operation works again", "op", op)
	}
}

// safeExit leaves the blade cool and dark whatever state it was in: a
// stopped agent cannot react to heat, so the fan must not depend on it.
func (a *Agent) safeExit() error {
	a.running.Store(false)
	var errs []error
	if a.info.IsBlade {
		if a.caps.Has(hardware.CapFan) {
			if err := a.hw.SetFanPercent(100); err != nil {
				errs = append(errs, fmt.Errorf("fan to 100 %%: %w", err))
			}
		}
		if a.caps.Has(hardware.CapLEDs) {
			for _, led := range hardware.LEDs {
				if err := a.hw.SetLED(led, hardware.Off); err != nil {
					errs = append(errs, fmt.Errorf("%s LED off: %w", led, err))
				}
			}
		}
	}
	// Identify waiters are not released here: they see Done and learn that
	// the agent stopped, which is not a confirmation.
	a.mu.Lock()
	a.status.Running = false
	a.mu.Unlock()
	a.bus.Publish(core.Event{Reason: core.ReasonStatusChanged, Time: a.clk.Now()})
	if err := errors.Join(errs...); err != nil {
		a.log.Error("safe exit incomplete", "err", err)
		return fmt.Errorf("safe exit: %w", err)
	}
	a.log.Info("safe exit: fan at 100 %, LEDs dark")
	return nil
}
