// Package simulated is a Compute Blade in software: a first-order thermal
// model whose temperature follows load and is pulled down by the fan, a
// tachometer consistent with the duty, an injectable button, and LEDs and a
// stealth output that tests and the demo can read. It backs the demo, the
// end-to-end tests and the fleet benchmarks.
package simulated

import (
	"fmt"
	"math"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/kubeblade/kubeblade/internal/hardware"
)

// Options shape the simulated blade. Zero values take the defaults noted.
type Options struct {
	// Clock drives the thermal model; default the real clock.
	Clock clock.PassiveClock
	// AmbientCelsius is the temperature the blade settles at with no load
	// (default 25).
	AmbientCelsius float64
	// Load is the CPU load, 0 (idle) upwards; 1 is all cores busy and
	// values above 1 model a hot rack (default 0.2).
	Load float64
	// HeatCelsius is how far load 1 with the fan stopped lifts the
	// temperature above ambient (default 50).
	HeatCelsius float64
	// FanCooling is the share of that rise a fan at 100 % removes, 0–1
	// (default 0.6).
	FanCooling float64
	// TimeConstant is how fast the temperature approaches equilibrium
	// (default 20 s).
	TimeConstant time.Duration
	// MaxRPM is the tachometer reading at 100 % duty (default 5000).
	MaxRPM float64
	// Power is the initial power source (default PoE+).
	Power hardware.PowerSource
	// FanUnit is reported in Info (default standard).
	FanUnit hardware.FanUnit
	// Missing removes capabilities, to exercise degraded hardware.
	Missing []hardware.Capability
}

func (o *Options) defaults() {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.AmbientCelsius == 0 {
		o.AmbientCelsius = 25
	}
	if o.Load == 0 {
		o.Load = 0.2
	}
	if o.HeatCelsius == 0 {
		o.HeatCelsius = 50
	}
	if o.FanCooling == 0 {
		o.FanCooling = 0.6
	}
	if o.TimeConstant == 0 {
		o.TimeConstant = 20 * time.Second
	}
	if o.MaxRPM == 0 {
		o.MaxRPM = 5000
	}
	if o.Power == "" {
		o.Power = hardware.PowerPoEPlus
	}
	if o.FanUnit == "" {
		o.FanUnit = hardware.FanUnitStandard
	}
}

// Blade is the simulated blade. It implements hardware.Backend and adds
// controls (button, load, faults) and read-outs (LEDs, stealth, duty).
type Blade struct {
	mu      sync.Mutex
	opts    Options
	caps    hardware.Capabilities
	temp    float64
	last    time.Time
	duty    uint8
	leds    [2]hardware.Color
	stealth bool
	stalled bool
	tempErr bool
	// hang, while non-nil, blocks temperature reads until it is closed
	// (SetSensorHang(false) or Close).
	hang   chan struct{}
	closed bool
	button chan hardware.ButtonEvent
	writes int
}

var _ hardware.Backend = (*Blade)(nil)

// New returns a simulated blade at equilibrium for its load with the fan at
// full speed, which is the state a freshly booted blade's firmware leaves.
func New(opts Options) *Blade {
	opts.defaults()
	caps := hardware.Capabilities{}
	for _, c := range hardware.AllCapabilities {
		caps[c] = c != hardware.CapAirflowTemperature || opts.FanUnit == hardware.FanUnitSmart
	}
	for _, c := range opts.Missing {
		delete(caps, c)
	}
	b := &Blade{
		opts:   opts,
		caps:   caps,
		duty:   100,
		last:   opts.Clock.Now(),
		button: make(chan hardware.ButtonEvent, 16),
	}
	b.temp = b.equilibrium()
	return b
}

// equilibrium is the temperature the blade settles at for the current load
// and duty. Caller holds mu.
func (b *Blade) equilibrium() float64 {
	cooling := 1 - b.opts.FanCooling*float64(b.effectiveDuty())/100
	return b.opts.AmbientCelsius + b.opts.Load*b.opts.HeatCelsius*cooling
}

func (b *Blade) effectiveDuty() uint8 {
	if b.stalled || !b.caps[hardware.CapFan] {
		return 0
	}
	return b.duty
}

// advance integrates the thermal model up to now. Load and duty are
// constant between calls, so the exponential step is exact for any dt.
// Caller holds mu.
func (b *Blade) advance() {
	now := b.opts.Clock.Now()
	dt := now.Sub(b.last)
	if dt <= 0 {
		return
	}
	eq := b.equilibrium()
	b.temp = eq + (b.temp-eq)*math.Exp(-dt.Seconds()/b.opts.TimeConstant.Seconds())
	b.last = now
}

func (b *Blade) need(c hardware.Capability) error {
	if !b.caps[c] {
		return fmt.Errorf("simulated %s: %w", c, hardware.ErrNotSupported)
	}
	return nil
}

// Info implements hardware.Backend.
func (b *Blade) Info() hardware.Info {
	return hardware.Info{Backend: "simulated", IsBlade: true, SoC: "simulated", FanUnit: b.opts.FanUnit, Detail: "software blade; leds: simulated WS2812 pair"}
}

// Capabilities implements hardware.Backend.
func (b *Blade) Capabilities() hardware.Capabilities {
	out := hardware.Capabilities{}
	for c, ok := range b.caps {
		out[c] = ok
	}
	return out
}

// SetFanPercent implements hardware.Backend.
func (b *Blade) SetFanPercent(p uint8) error {
	if err := b.need(hardware.CapFan); err != nil {
		return err
	}
	if p > 100 {
		return fmt.Errorf("simulated fan: duty %d %% is outside 0–100", p)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.advance()
	b.duty = p
	b.writes++
	return nil
}

// FanRPM implements hardware.Backend.
func (b *Blade) FanRPM() (float64, error) {
	if err := b.need(hardware.CapTach); err != nil {
		return 0, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return float64(b.effectiveDuty()) / 100 * b.opts.MaxRPM, nil
}

// SetLED implements hardware.Backend.
func (b *Blade) SetLED(led hardware.LED, c hardware.Color) error {
	if err := b.need(hardware.CapLEDs); err != nil {
		return err
	}
	if led != hardware.LEDTop && led != hardware.LEDEdge {
		return fmt.Errorf("simulated LEDs: no LED %s", led)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.leds[led] = c
	b.writes++
	return nil
}

// SetStealth implements hardware.Backend.
func (b *Blade) SetStealth(on bool) error {
	if err := b.need(hardware.CapStealth); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.stealth = on
	b.writes++
	return nil
}

// PowerSource implements hardware.Backend.
func (b *Blade) PowerSource() (hardware.PowerSource, error) {
	if err := b.need(hardware.CapPoEDetect); err != nil {
		return hardware.PowerUnknown, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.opts.Power, nil
}

// SoCTemperature implements hardware.Backend.
func (b *Blade) SoCTemperature() (float64, error) {
	if err := b.need(hardware.CapTemperature); err != nil {
		return 0, err
	}
	b.mu.Lock()
	if hang := b.hang; hang != nil {
		b.mu.Unlock()
		<-hang
		b.mu.Lock()
	}
	defer b.mu.Unlock()
	if b.tempErr {
		return 0, fmt.Errorf("simulated thermal sensor: read error (injected)")
	}
	b.advance()
	return math.Round(b.temp*1000) / 1000, nil
}

// AirflowTemperature implements hardware.Backend: the smart fan unit sees
// the air between ambient and the SoC.
func (b *Blade) AirflowTemperature() (float64, error) {
	if err := b.need(hardware.CapAirflowTemperature); err != nil {
		return 0, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.advance()
	return math.Round((b.opts.AmbientCelsius+b.temp)/2*10) / 10, nil
}

// ButtonEvents implements hardware.Backend.
func (b *Blade) ButtonEvents() <-chan hardware.ButtonEvent { return b.button }

// Close implements hardware.Backend.
func (b *Blade) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.closed {
		b.closed = true
		close(b.button)
		if b.hang != nil {
			close(b.hang)
			b.hang = nil
		}
	}
	return nil
}

// PressButton injects one click (a press without a reported release, as
// the smart fan unit's button frame is) at the clock's current time. It
// reports false when the blade is closed, has no button or its button
// queue is full.
func (b *Blade) PressButton() bool {
	return b.PressButtonAt(b.opts.Clock.Now())
}

// PressButtonAt injects one click with the given timestamp, to model
// contact bounce.
func (b *Blade) PressButtonAt(t time.Time) bool {
	return b.ButtonEdgeAt(t, hardware.ButtonClick)
}

// ButtonDown and ButtonUp inject the edges of a held press at the clock's
// current time, as the GPIO edge button reports them; the agent times the
// press between them (3 s or more is a long press).
func (b *Blade) ButtonDown() bool { return b.ButtonEdgeAt(b.opts.Clock.Now(), hardware.ButtonDown) }

// ButtonUp: see ButtonDown.
func (b *Blade) ButtonUp() bool { return b.ButtonEdgeAt(b.opts.Clock.Now(), hardware.ButtonUp) }

// ButtonEdgeAt injects one raw button event with the given timestamp.
func (b *Blade) ButtonEdgeAt(t time.Time, edge hardware.ButtonEdge) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || !b.caps[hardware.CapButton] {
		return false
	}
	select {
	case b.button <- hardware.ButtonEvent{Time: t, Edge: edge}:
		return true
	default:
		return false
	}
}

// SetLoad changes the CPU load (0 upwards).
func (b *Blade) SetLoad(load float64) error {
	if load < 0 || math.IsNaN(load) || math.IsInf(load, 0) {
		return fmt.Errorf("load %v: must be a number ≥ 0", load)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.advance()
	b.opts.Load = load
	return nil
}

// SetTemperature jumps the SoC temperature, for tests and the demo's
// "overheat now".
func (b *Blade) SetTemperature(celsius float64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.advance()
	b.temp = celsius
}

// SetPower changes what the PoE detect line reads.
func (b *Blade) SetPower(p hardware.PowerSource) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.opts.Power = p
}

// SetFanStalled makes the fan stop turning whatever its duty.
func (b *Blade) SetFanStalled(stalled bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.advance()
	b.stalled = stalled
}

// SetTemperatureError makes temperature reads fail.
func (b *Blade) SetTemperatureError(fail bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tempErr = fail
}

// SetSensorHang makes temperature reads block until it is called with false
// (or the blade is closed), as a read of an I2C or 1-Wire hwmon sensor can
// block in the kernel while the bus is wedged. It is the fault that stops
// an agent's loop from ticking, for the liveness probe's tests.
func (b *Blade) SetSensorHang(hang bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case hang && b.hang == nil && !b.closed:
		b.hang = make(chan struct{})
	case !hang && b.hang != nil:
		close(b.hang)
		b.hang = nil
	}
}

// State is a read-out of the simulated hardware.
type State struct {
	TemperatureCelsius float64              `json:"temperatureCelsius"`
	Load               float64              `json:"load"`
	FanPercent         uint8                `json:"fanPercent"`
	FanRPM             float64              `json:"fanRPM"`
	FanStalled         bool                 `json:"fanStalled"`
	SensorHung         bool                 `json:"sensorHung"`
	TopLED             string               `json:"topLED"`
	EdgeLED            string               `json:"edgeLED"`
	Stealth            bool                 `json:"stealth"`
	Power              hardware.PowerSource `json:"power"`
	// Writes counts output writes, so tests can see the agent does not
	// rewrite unchanged outputs.
	Writes int `json:"writes"`
}

// State returns the hardware's current read-out.
func (b *Blade) State() State {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.advance()
	return State{
		TemperatureCelsius: math.Round(b.temp*10) / 10,
		Load:               b.opts.Load,
		FanPercent:         b.duty,
		FanRPM:             float64(b.effectiveDuty()) / 100 * b.opts.MaxRPM,
		FanStalled:         b.stalled,
		SensorHung:         b.hang != nil,
		TopLED:             b.leds[hardware.LEDTop].String(),
		EdgeLED:            b.leds[hardware.LEDEdge].String(),
		Stealth:            b.stealth,
		Power:              b.opts.Power,
		Writes:             b.writes,
	}
}

// LED returns one LED's current colour.
func (b *Blade) LED(led hardware.LED) hardware.Color {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.leds[led]
}
