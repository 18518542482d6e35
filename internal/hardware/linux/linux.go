// Package linux is the hardware backend for real Compute Blades that uses
// standard kernel interfaces only — the GPIO character device, sysfs PWM,
// hwmon, thermal and LED classes, and the smart fan unit's UART — so it runs
// on Talos Linux, which has no /dev/mem. It detects the machine, assembles
// what it finds and reports what it cannot drive as missing capabilities,
// never as a failure.
package linux

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"

	agentconfigv1 "github.com/kubeblade/kubeblade/api/agentconfig/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/hardware"
	"github.com/kubeblade/kubeblade/internal/hardware/linux/gpio"
	"github.com/kubeblade/kubeblade/internal/hardware/linux/sysfs"
	"github.com/kubeblade/kubeblade/internal/smartfan/uart"
	"github.com/kubeblade/kubeblade/internal/tach"
)

// Defaults for paths and the blade's wiring (SPEC §2).
const (
	DefaultSysfsRoot       = "/sys"
	DefaultDevRoot         = "/dev"
	DefaultProcRoot        = "/proc"
	DefaultThermalZoneType = "cpu-thermal"
	// DefaultSmartFanDetect is how long to listen for the smart fan unit:
	// it reports every couple of seconds.
	DefaultSmartFanDetect = 3 * time.Second
	// ButtonDebounce is the kernel debounce on the edge button; the agent
	// debounces presses again on top.
	ButtonDebounce = 10 * time.Millisecond
	buttonBuffer   = 16
)

var (
	lineButton  = gpio.LineSpec{Name: "GPIO20", Offset: 20}
	lineStealth = gpio.LineSpec{Name: "GPIO21", Offset: 21}
	linePoE     = gpio.LineSpec{Name: "GPIO23", Offset: 23}
	lineTach    = gpio.LineSpec{Name: "GPIO13", Offset: 13}
	lineFan     = gpio.LineSpec{Name: "GPIO12", Offset: 12}
)

// Options configure Open. Only Config is needed in production.
type Options struct {
	Config agentconfigv1.LinuxHardwareConfig
	Clock  clock.WithTicker
	Logger *slog.Logger
	// GPIO is the GPIO port (default the character device).
	GPIO gpio.Driver
	// Serial dials the smart fan unit's UART (default go.bug.st/serial).
	Serial func(path string) uart.Dialer
	// SmartFanDetect bounds listening for the smart fan unit.
	SmartFanDetect time.Duration
	// SmartFanRetry is the UART reconnect interval (default uart's).
	SmartFanRetry time.Duration
	// AwaitPWMExport is passed to sysfs.OpenPWM (tests simulate the
	// kernel with it).
	AwaitPWMExport func(attempt int) bool
}

type fanKind string

const (
	fanNone  fanKind = "none"
	fanPWM   fanKind = "sysfs-pwm"
	fanHwmon fanKind = "hwmon"
	fanGPIO  fanKind = "gpio-on-off"
	fanSmart fanKind = "smart-fan-unit"
)

// Backend is the linux backend. It implements hardware.Backend.
type Backend struct {
	info hardware.Info
	caps hardware.Capabilities
	log  *slog.Logger
	clk  clock.PassiveClock
	drv  gpio.Driver

	chip    gpio.Chip
	claimed []gpio.Line
	stealth gpio.Line
	poe     gpio.Line
	fanLine gpio.Line
	meter   *tach.Meter

	fan   fanKind
	pwm   *sysfs.PWM
	hwmon *sysfs.Hwmon
	// hwmonTach reads fan1_input when the GPIO tach line is unavailable.
	hwmonTach bool
	zone      *sysfs.ThermalZone

	ledClass [2]*sysfs.MulticolorLED
	stream   *sysfs.LEDStream
	ledMu    sync.Mutex
	leds     [2]hardware.Color

	smart       *uart.Client
	smartCancel context.CancelFunc
	smartDone   chan struct{}
	forwardDone chan struct{}

	mu      sync.Mutex
	closed  bool
	buttons chan hardware.ButtonEvent
	dropped uint64
}

var _ hardware.Backend = (*Backend)(nil)

func (o *Options) defaults() {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.GPIO == nil {
		o.GPIO = gpio.CDev{}
	}
	if o.Serial == nil {
		o.Serial = uart.Serial
	}
	if o.SmartFanDetect <= 0 {
		o.SmartFanDetect = DefaultSmartFanDetect
	}
	c := &o.Config
	if c.SysfsRoot == "" {
		c.SysfsRoot = DefaultSysfsRoot
	}
	if c.DevRoot == "" {
		c.DevRoot = DefaultDevRoot
	}
	if c.ProcRoot == "" {
		c.ProcRoot = DefaultProcRoot
	}
	if c.ThermalZoneType == "" {
		c.ThermalZoneType = DefaultThermalZoneType
	}
}

// Open detects the machine and opens whatever blade hardware it can reach.
// A machine that is not a blade gives a backend with IsBlade false and no
// capabilities; a blade with missing drivers gives a backend without those
// capabilities. The only errors are a cancelled ctx and a config that names
// hardware that cannot be there.
func Open(ctx context.Context, o Options) (*Backend, error) {
	o.defaults()
	cfg := o.Config
	b := &Backend{
		log:     o.Logger.With("backend", "linux"),
		clk:     o.Clock,
		drv:     o.GPIO,
		caps:    hardware.Capabilities{},
		buttons: make(chan hardware.ButtonEvent, buttonBuffer),
	}
	plat := Detect(cfg.SysfsRoot, cfg.ProcRoot, cfg.DevRoot, o.GPIO)
	b.info = hardware.Info{Backend: "linux", IsBlade: plat.IsBlade, SoC: plat.SoC, FanUnit: hardware.FanUnitNone, Detail: plat.Detail}
	if b.info.SoC == "" {
		b.info.SoC = "unknown"
	}
	if !plat.IsBlade {
		return b, nil
	}

	var missing []string
	miss := func(c hardware.Capability, why error) {
		missing = append(missing, fmt.Sprintf("%s: %v", c, why))
		b.log.Warn("hardware capability missing", "capability", c, "reason", why)
	}

	b.openGPIO(cfg, plat, miss)

	unit, err := b.openFanUnit(ctx, o, plat)
	if err != nil {
		b.Close()
		return nil, err
	}
	b.info.FanUnit = unit
	b.openFan(o, unit, miss)
	b.openThermal(cfg, miss)
	b.openLEDs(cfg, miss)

	notes := []string{plat.Detail, "fan: " + string(b.fan)}
	if len(missing) > 0 {
		sort.Strings(missing)
		notes = append(notes, "missing "+strings.Join(missing, "; "))
	}
	b.info.Detail = strings.Join(notes, "; ")
	return b, nil
}

type missFunc func(hardware.Capability, error)

// openGPIO claims the button, PoE detect and stealth lines.
func (b *Backend) openGPIO(cfg agentconfigv1.LinuxHardwareConfig, plat Platform, miss missFunc) {
	want := []string{LabelBCM2711, LabelRP1}
	if plat.SoC == SoCBCM2712 {
		want = []string{LabelRP1}
	}
	if cfg.GPIOChip != "" {
		want = []string{cfg.GPIOChip}
	}
	chip, err := gpio.FindChip(b.drv, cfg.DevRoot, want...)
	if err != nil {
		for _, c := range []hardware.Capability{hardware.CapButton, hardware.CapStealth, hardware.CapPoEDetect} {
			miss(c, err)
		}
		return
	}
	b.chip = chip

	if _, err := b.claim(gpio.ParseLineSpec(cfg.Lines.Button, lineButton), gpio.Request{
		Consumer: "kubeblade-button", Bias: gpio.BiasPullUp, Edge: gpio.EdgeBoth,
		Debounce: ButtonDebounce, Handler: b.onButtonEdge,
	}); err != nil {
		miss(hardware.CapButton, err)
	} else {
		b.caps[hardware.CapButton] = true
	}
	if l, err := b.claim(gpio.ParseLineSpec(cfg.Lines.PoEDetect, linePoE), gpio.Request{Consumer: "kubeblade-poe"}); err != nil {
		miss(hardware.CapPoEDetect, err)
	} else {
		b.poe = l
		b.caps[hardware.CapPoEDetect] = true
	}
	if l, err := b.claim(gpio.ParseLineSpec(cfg.Lines.Stealth, lineStealth), gpio.Request{Consumer: "kubeblade-stealth", Output: true}); err != nil {
		miss(hardware.CapStealth, err)
	} else {
		b.stealth = l
		b.caps[hardware.CapStealth] = true
	}
}

func (b *Backend) claim(spec gpio.LineSpec, r gpio.Request) (gpio.Line, error) {
	if b.chip == nil {
		return nil, errors.New("no GPIO chip")
	}
	off, err := gpio.Resolve(b.chip, spec)
	if err != nil {
		return nil, err
	}
	r.Offset = off
	l, err := b.chip.Request(r)
	if err != nil {
		return nil, fmt.Errorf("requesting line %s on %s: %w", spec, b.chip.Name(), err)
	}
	b.claimed = append(b.claimed, l)
	return l, nil
}

// onButtonEdge runs on the GPIO event goroutine. It converts the kernel's
// monotonic timestamp to the agent's clock, so debouncing sees when the
// edge happened, not when it was scheduled.
func (b *Backend) onButtonEdge(ev gpio.Event) {
	now := b.clk.Now()
	if lag := b.drv.Now() - ev.Time; lag > 0 && lag < time.Minute {
		now = now.Add(-lag)
	}
	// Both edges, so the agent can time a press (long press = maintenance).
	// The button is active low: falling is down, rising is up.
	edge := hardware.ButtonDown
	if ev.Rising {
		edge = hardware.ButtonUp
	}
	b.deliverButton(now, edge)
}

func (b *Backend) deliverButton(t time.Time, edge hardware.ButtonEdge) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	select {
	case b.buttons <- hardware.ButtonEvent{Time: t, Edge: edge}:
	default:
		b.dropped++ // the agent is far behind; more presses add nothing
	}
}

func (b *Backend) serialPath(cfg agentconfigv1.LinuxHardwareConfig, plat Platform) string {
	p := cfg.SerialDevice
	if p == "" {
		p = "ttyAMA5" // UART5 on a CM4
		if plat.SoC == SoCBCM2712 {
			p = "ttyAMA4" // UART4 on a CM5
		}
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(cfg.DevRoot, p)
	}
	return p
}

// openFanUnit decides between the smart and the standard fan unit. The
// smart unit is recognised by a valid frame within SmartFanDetect; once
// found (or forced by config) its link stays up and reconnects by itself.
func (b *Backend) openFanUnit(ctx context.Context, o Options, plat Platform) (hardware.FanUnit, error) {
	mode := o.Config.FanUnit
	switch mode {
	case "standard":
		return hardware.FanUnitStandard, nil
	case "none":
		return hardware.FanUnitNone, nil
	}
	path := b.serialPath(o.Config, plat)
	if mode != "smart" {
		if _, err := os.Stat(path); err != nil {
			b.log.Info("no smart fan unit UART; using the standard fan unit", "device", path)
			return hardware.FanUnitStandard, nil
		}
	}
	c := uart.New(uart.Options{Dial: o.Serial(path), Clock: o.Clock, Logger: b.log.With("device", path), RetryInterval: o.SmartFanRetry})
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(runCtx); close(done) }()
	found := c.Detect(ctx, o.SmartFanDetect)
	if err := ctx.Err(); err != nil {
		cancel()
		<-done
		return "", err
	}
	if !found && mode != "smart" {
		cancel()
		<-done
		b.log.Info("no smart fan unit answered; using the standard fan unit", "device", path, "waited", o.SmartFanDetect)
		return hardware.FanUnitStandard, nil
	}
	if !found {
		b.log.Warn("smart fan unit forced by config but silent so far; keeps listening", "device", path)
	}
	b.smart, b.smartCancel, b.smartDone = c, cancel, done
	b.forwardDone = make(chan struct{})
	go func() {
		defer close(b.forwardDone)
		for t := range c.Buttons() {
			b.deliverButton(t, hardware.ButtonClick) // the unit reports presses, no releases
		}
	}()
	return hardware.FanUnitSmart, nil
}

// openFan sets up fan duty and tach for the unit found.
func (b *Backend) openFan(o Options, unit hardware.FanUnit, miss missFunc) {
	cfg := o.Config
	switch unit {
	case hardware.FanUnitNone:
		b.fan = fanNone
		return
	case hardware.FanUnitSmart:
		// The unit drives its fan itself and reports speed and airflow;
		// GPIO12/13 are not connected to it.
		b.fan = fanSmart
		b.caps[hardware.CapFan] = true
		b.caps[hardware.CapTach] = true
		b.caps[hardware.CapAirflowTemperature] = true
		return
	}

	var errs []error
	try := func(kind fanKind) bool {
		switch kind {
		case fanPWM:
			ch := 0
			if cfg.PWMChannel != nil {
				ch = int(*cfg.PWMChannel)
			}
			p, err := sysfs.OpenPWM(sysfs.PWMOptions{SysfsRoot: cfg.SysfsRoot, Chip: cfg.PWMChip, Channel: ch, AwaitExport: o.AwaitPWMExport})
			if err != nil {
				errs = append(errs, err)
				return false
			}
			b.pwm = p
		case fanHwmon:
			h, err := sysfs.FindHwmon(cfg.SysfsRoot, cfg.HwmonName)
			if err != nil {
				errs = append(errs, err)
				return false
			}
			b.hwmon = h
		case fanGPIO:
			// Last resort (a CM5 kernel without an RP1 PWM driver): full
			// speed or off. Initially on, the safe state.
			l, err := b.claim(gpio.ParseLineSpec(cfg.Lines.FanPWM, lineFan), gpio.Request{Consumer: "kubeblade-fan", Output: true, Initial: 1})
			if err != nil {
				errs = append(errs, fmt.Errorf("GPIO fan: %w", err))
				return false
			}
			b.fanLine = l
		}
		b.fan = kind
		return true
	}
	order := []fanKind{fanPWM, fanHwmon, fanGPIO}
	switch cfg.FanDriver {
	case "pwm":
		order = []fanKind{fanPWM}
	case "hwmon":
		order = []fanKind{fanHwmon}
	case "gpio":
		order = []fanKind{fanGPIO}
	}
	b.fan = fanNone
	for _, k := range order {
		if try(k) {
			b.caps[hardware.CapFan] = true
			break
		}
	}
	if b.fan == fanNone {
		miss(hardware.CapFan, errors.Join(errs...))
	}

	meter := tach.New(tach.Options{PulsesPerRevolution: 2})
	_, err := b.claim(gpio.ParseLineSpec(cfg.Lines.FanTach, lineTach), gpio.Request{
		Consumer: "kubeblade-tach", Bias: gpio.BiasPullUp, Edge: gpio.EdgeFalling,
		Handler: func(ev gpio.Event) { meter.Edge(ev.Time) },
	})
	switch {
	case err == nil:
		b.meter = meter
		b.caps[hardware.CapTach] = true
	case b.hwmon != nil && b.hwmon.HasTach():
		// A pwm-fan node with a tach holds GPIO13 itself; use its count.
		b.hwmonTach = true
		b.caps[hardware.CapTach] = true
	default:
		miss(hardware.CapTach, err)
	}
}

func (b *Backend) openThermal(cfg agentconfigv1.LinuxHardwareConfig, miss missFunc) {
	z, err := sysfs.FindThermalZone(cfg.SysfsRoot, cfg.ThermalZoneType)
	if err != nil {
		miss(hardware.CapTemperature, err)
		return
	}
	b.zone = z
	b.caps[hardware.CapTemperature] = true
}

// openLEDs finds kernel LED drivers. Stock Talos has none, so no LEDs is
// the normal outcome there, not an error; with a smart fan unit the edge
// LED is still mirrored on the unit.
func (b *Backend) openLEDs(cfg agentconfigv1.LinuxHardwareConfig, miss missFunc) {
	names := [2]string{cfg.LEDs.Top, cfg.LEDs.Edge}
	auto := sysfs.MulticolorLEDs(cfg.SysfsRoot)
	var errs []error
	for i, hint := range [2]string{"top", "edge"} {
		if names[i] == "" {
			for _, n := range auto {
				if strings.Contains(n, hint) {
					names[i] = n
					break
				}
			}
		}
		if names[i] == "" {
			continue
		}
		l, err := sysfs.OpenMulticolorLED(cfg.SysfsRoot, names[i])
		if err != nil {
			errs = append(errs, err)
			continue
		}
		b.ledClass[i] = l
	}
	if b.ledClass[0] == nil && b.ledClass[1] == nil {
		stream := cfg.LEDs.Stream
		if stream == "" {
			stream = "leds0"
		}
		if !filepath.IsAbs(stream) {
			stream = filepath.Join(cfg.DevRoot, stream)
		}
		if s, err := sysfs.OpenLEDStream(stream); err == nil {
			b.stream = s
		} else if cfg.LEDs.Stream != "" {
			errs = append(errs, err)
		}
	}
	if b.ledClass[0] != nil || b.ledClass[1] != nil || b.stream != nil || b.smart != nil {
		b.caps[hardware.CapLEDs] = true
		if len(errs) > 0 {
			b.log.Warn("some LEDs unavailable", "err", errors.Join(errs...))
		}
		return
	}
	if len(errs) == 0 {
		errs = append(errs, errors.New("no kernel LED driver (multicolor LED class or /dev/ledsN) for the WS2812 LEDs"))
	}
	miss(hardware.CapLEDs, errors.Join(errs...))
}

func (b *Backend) need(c hardware.Capability) error {
	if !b.caps[c] {
		return fmt.Errorf("linux %s: %w", c, hardware.ErrNotSupported)
	}
	return nil
}

// Info implements hardware.Backend.
func (b *Backend) Info() hardware.Info { return b.info }

// Capabilities implements hardware.Backend.
func (b *Backend) Capabilities() hardware.Capabilities {
	out := hardware.Capabilities{}
	for c, ok := range b.caps {
		out[c] = ok
	}
	return out
}

// SetFanPercent implements hardware.Backend.
func (b *Backend) SetFanPercent(p uint8) error {
	if err := b.need(hardware.CapFan); err != nil {
		return err
	}
	if p > 100 {
		return fmt.Errorf("linux fan: duty %d %% is outside 0–100", p)
	}
	switch b.fan {
	case fanSmart:
		return b.smart.SetFanPercent(p)
	case fanPWM:
		return b.pwm.SetPercent(p)
	case fanHwmon:
		return b.hwmon.SetPercent(p)
	case fanGPIO:
		// On/off only: any duty runs the fan flat out, erring cool.
		v := 0
		if p > 0 {
			v = 1
		}
		return b.fanLine.SetValue(v)
	}
	return fmt.Errorf("linux fan: %w", hardware.ErrNotSupported)
}

// FanRPM implements hardware.Backend.
func (b *Backend) FanRPM() (float64, error) {
	if err := b.need(hardware.CapTach); err != nil {
		return 0, err
	}
	switch {
	case b.smart != nil:
		return b.smart.FanRPM()
	case b.meter != nil:
		return b.meter.RPM(b.drv.Now()), nil
	case b.hwmonTach:
		return b.hwmon.FanRPM()
	}
	return 0, fmt.Errorf("linux tach: %w", hardware.ErrNotSupported)
}

// SetLED implements hardware.Backend. Each LED goes to its LED class
// device or the /dev/ledsN stream; the edge LED is mirrored on a smart fan
// unit, which has one LED per blade at the rack front. With only a smart
// unit, the top LED has nothing to show on and is accepted silently.
func (b *Backend) SetLED(led hardware.LED, c hardware.Color) error {
	if err := b.need(hardware.CapLEDs); err != nil {
		return err
	}
	if led != hardware.LEDTop && led != hardware.LEDEdge {
		return fmt.Errorf("linux LEDs: no LED %s", led)
	}
	b.ledMu.Lock()
	defer b.ledMu.Unlock()
	b.leds[led] = c
	var errs []error
	if l := b.ledClass[led]; l != nil {
		errs = append(errs, l.Set(c.R, c.G, c.B))
	}
	if b.stream != nil {
		chain := make([][3]uint8, len(hardware.LEDs))
		for i, l := range hardware.LEDs {
			chain[i] = [3]uint8{b.leds[l].R, b.leds[l].G, b.leds[l].B}
		}
		errs = append(errs, b.stream.Write(chain))
	}
	if b.smart != nil && led == hardware.LEDEdge {
		errs = append(errs, b.smart.SetLED(c.R, c.G, c.B))
	}
	return errors.Join(errs...)
}

// SetStealth implements hardware.Backend.
func (b *Backend) SetStealth(on bool) error {
	if err := b.need(hardware.CapStealth); err != nil {
		return err
	}
	v := 0
	if on {
		v = 1
	}
	return b.stealth.SetValue(v)
}

// PowerSource implements hardware.Backend.
func (b *Backend) PowerSource() (hardware.PowerSource, error) {
	if err := b.need(hardware.CapPoEDetect); err != nil {
		return hardware.PowerUnknown, err
	}
	v, err := b.poe.Value()
	if err != nil {
		return hardware.PowerUnknown, fmt.Errorf("linux PoE detect: %w", err)
	}
	if v == 1 {
		return hardware.PowerPoEPlus, nil
	}
	return hardware.PowerPoEOrUSBC, nil
}

// SoCTemperature implements hardware.Backend.
func (b *Backend) SoCTemperature() (float64, error) {
	if err := b.need(hardware.CapTemperature); err != nil {
		return 0, err
	}
	return b.zone.Celsius()
}

// AirflowTemperature implements hardware.Backend.
func (b *Backend) AirflowTemperature() (float64, error) {
	if err := b.need(hardware.CapAirflowTemperature); err != nil {
		return 0, err
	}
	return b.smart.AirflowTemperature()
}

// ButtonEvents implements hardware.Backend: edge-button presses from GPIO
// and, with a smart fan unit, presses of the unit's button for this blade.
func (b *Backend) ButtonEvents() <-chan hardware.ButtonEvent { return b.buttons }

// DroppedButtons counts presses dropped because nobody read them.
func (b *Backend) DroppedButtons() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.dropped
}

// Close implements hardware.Backend. Outputs keep their last state: the
// agent's safe exit has set them.
func (b *Backend) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	b.mu.Unlock()

	var errs []error
	for _, l := range b.claimed {
		errs = append(errs, l.Close())
	}
	if b.chip != nil {
		errs = append(errs, b.chip.Close())
	}
	if b.smartCancel != nil {
		b.smartCancel()
		<-b.smartDone
		<-b.forwardDone
	}
	b.mu.Lock()
	close(b.buttons)
	b.mu.Unlock()
	return errors.Join(errs...)
}
