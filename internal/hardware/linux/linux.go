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
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/utils/clock"

	agentconfigv1 "github.com/kubeblade/kubeblade/api/agentconfig/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/hardware"
	"github.com/kubeblade/kubeblade/internal/hardware/linux/devnode"
	"github.com/kubeblade/kubeblade/internal/hardware/linux/gpio"
	"github.com/kubeblade/kubeblade/internal/hardware/linux/sysfs"
	"github.com/kubeblade/kubeblade/internal/smartfan/uart"
	"github.com/kubeblade/kubeblade/internal/tach"
)

// Roots are where the backend finds sysfs, device nodes and procfs. They
// are not configuration: on a blade they are /sys, /dev and /proc
// (DefaultRoots), so neither a BladeConfig nor a config file can point the
// agent, which runs as root, at other host files. Tests build trees of
// their own.
type Roots struct {
	Sys, Dev, Proc string
}

// DefaultRoots are a blade's.
func DefaultRoots() Roots { return Roots{Sys: "/sys", Dev: "/dev", Proc: "/proc"} }

// OrDefault fills the roots r leaves empty with DefaultRoots.
func (r Roots) OrDefault() Roots {
	d := DefaultRoots()
	if r.Sys == "" {
		r.Sys = d.Sys
	}
	if r.Dev == "" {
		r.Dev = d.Dev
	}
	if r.Proc == "" {
		r.Proc = d.Proc
	}
	return r
}

// The blade's wiring (docs/hardware.md#pins).
const (
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

// Line biases. The button is active low, pressed pulls it to ground; the
// old agent requests a pull-up and so do we. PoE detect is high for
// 802.3at; the BCM2711's reset default on GPIO23 is a pull-down, which the
// old agent overrode with a pull-up, so a detect output that is not driven
// (how it behaves without PoE+ has not been checked on a board) read as
// PoE+. With the pull-down an undriven line reads "not PoE+".
const (
	biasButton = gpio.BiasPullUp
	biasPoE    = gpio.BiasPullDown
	biasTach   = gpio.BiasPullUp // open-collector tach output
	// biasFan is the on/off fan output's pull: what the line reads once
	// it is released, however the agent ends.
	biasFan = gpio.BiasPullUp
)

// Options configure Open. Only Config is needed in production.
type Options struct {
	Config agentconfigv1.LinuxHardwareConfig
	// Roots default to DefaultRoots; only tests change them.
	Roots  Roots
	Clock  clock.WithTicker
	Logger *slog.Logger
	// GPIO is the GPIO port (default the character device).
	GPIO gpio.Driver
	// Serial dials the smart fan unit's UART. The default opens the node
	// only if it is the amba-pl011 or 8250 character device its name says
	// (package devnode), then with go.bug.st/serial; tests dial ptys.
	Serial func(path string) uart.Dialer
	// LEDStream opens the ws2812-pio-rp1 stream for each write. The
	// default opens the node only if it is that driver's character device
	// (package devnode); tests model the driver with a plain file.
	LEDStream sysfs.LEDStreamOpener
	// SmartFanRetry is the first UART reconnect interval (default uart's).
	SmartFanRetry time.Duration
	// NoTach leaves the tachometer alone (tachEnabled: false): its line
	// is not requested at all.
	NoTach bool
	// AwaitPWMExport is passed to sysfs.OpenPWM (tests simulate the
	// kernel with it).
	AwaitPWMExport func(attempt int) bool
	// Outputs, when set, drive the LEDs and a standard fan unit's PWM in
	// place of kernel drivers (the bcm2711/bcm2712 register backends);
	// everything else stays on the kernel interfaces. The backend then
	// reports Outputs.Name() as its name and closes Outputs on Close.
	Outputs Outputs
	// Note is added to Info.Detail: why this backend and not another.
	Note string
}

// Outputs drive the WS2812 LEDs and a standard fan unit's PWM by other
// means than kernel drivers.
type Outputs interface {
	// Name is the backend name reported in Info (bcm2711, bcm2712).
	Name() string
	// Describe says what drives the LEDs, for Info.Detail.
	Describe() string
	// StartFan takes the fan PWM pin; only called for a standard fan unit
	// (with the smart unit the pin is a UART).
	StartFan() error
	SetFanPercent(percent uint8) error
	// SetLEDs sends both colours, top first.
	SetLEDs(top, edge hardware.Color) error
	Close() error
}

type fanKind string

const (
	fanNone  fanKind = "none"
	fanPWM   fanKind = "sysfs-pwm"
	fanHwmon fanKind = "hwmon"
	fanGPIO  fanKind = "gpio-on-off"
	fanSmart fanKind = "smart-fan-unit"
	fanRegs  fanKind = "registers"
)

// Backend is the linux backend. It implements hardware.Backend.
type Backend struct {
	info hardware.Info
	// caps is what the backend drives; Capabilities reports it less
	// smartCaps while the smart fan unit has not been heard.
	caps hardware.Capabilities
	// notes and missing make up Info.Detail (missing is "cap: why").
	notes   []string
	missing []string
	log     *slog.Logger
	clk     clock.PassiveClock
	drv     gpio.Driver

	chip    gpio.Chip
	claimed []gpio.Line
	stealth gpio.Line
	poe     gpio.Line
	fanLine gpio.Line
	meter   *tach.Meter

	fan    fanKind
	fanWhy string
	pwm    *sysfs.PWM
	hwmon  *sysfs.Hwmon
	// hwmonWant is the pwm1 value last asked for (-1: none yet).
	hwmonWant int64
	// hwmonTach reads fan1_input when the GPIO tach line is unavailable.
	hwmonTach bool
	zone      *sysfs.ThermalZone

	ledClass [2]*sysfs.MulticolorLED
	stream   *sysfs.LEDStream
	outputs  Outputs
	// ledDesc says what drives the LEDs, for Info.Detail.
	ledDesc string
	ledMu   sync.Mutex
	leds    [2]hardware.Color

	smart     *uart.Client
	smartPath string
	// smartCaps are the capabilities that only the smart fan unit
	// provides: missing until its first frame.
	smartCaps   []hardware.Capability
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
	o.Roots = o.Roots.OrDefault()
	if o.Serial == nil {
		o.Serial = checkedSerial(o.Roots.Proc)
	}
	if o.LEDStream == nil {
		proc := o.Roots.Proc
		o.LEDStream = func(path string) (io.WriteCloser, error) {
			n, err := devnode.LEDStream(filepath.Dir(path), filepath.Base(path))
			if err != nil {
				return nil, err
			}
			return n.Open(unix.O_WRONLY, proc)
		}
	}
}

// checkedSerial dials a UART with go.bug.st/serial after devnode checked
// the node: the port is opened through the checked descriptor, so nothing
// is written to a node that is not the UART its name says.
func checkedSerial(procRoot string) func(path string) uart.Dialer {
	return func(path string) uart.Dialer {
		return func() (io.ReadWriteCloser, error) {
			n, err := devnode.UART(filepath.Dir(path), filepath.Base(path))
			if err != nil {
				return nil, err
			}
			p, err := n.Pin(procRoot)
			if err != nil {
				return nil, err
			}
			defer p.Close()
			rw, err := uart.Serial(p.ProcPath())()
			if err != nil {
				return nil, fmt.Errorf("opening %s: %w", path, err)
			}
			return rw, nil
		}
	}
}

// Open detects the machine and opens whatever blade hardware it can reach.
// A machine that is not a blade gives a backend with IsBlade false and no
// capabilities; a blade with missing drivers gives a backend without those
// capabilities. The only errors are a cancelled ctx and a config that names
// hardware that cannot be there.
func Open(ctx context.Context, o Options) (*Backend, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	o.defaults()
	cfg := o.Config
	b := &Backend{
		log:       o.Logger.With("backend", "linux"),
		clk:       o.Clock,
		drv:       o.GPIO,
		caps:      hardware.Capabilities{},
		buttons:   make(chan hardware.ButtonEvent, buttonBuffer),
		hwmonWant: -1,
	}
	roots := o.Roots
	plat := Detect(roots.Sys, roots.Proc, roots.Dev, o.GPIO)
	b.info = hardware.Info{Backend: "linux", IsBlade: plat.IsBlade, SoC: plat.SoC, FanUnit: hardware.FanUnitNone, Detail: plat.Detail}
	if o.Outputs != nil {
		b.outputs = o.Outputs
		b.info.Backend = o.Outputs.Name()
	}
	if b.info.SoC == "" {
		b.info.SoC = "unknown"
	}
	if !plat.IsBlade {
		return b, nil
	}

	miss := func(c hardware.Capability, why error) {
		b.missing = append(b.missing, fmt.Sprintf("%s: %v", c, why))
		b.log.Warn("hardware capability missing", "capability", c, "reason", why)
	}

	if plat.SoC == SoCRK3588 {
		// The Radxa CM5's pins behind the blade's connector are not
		// mapped yet (the old agent stubs them too): no GPIO at all,
		// rather than guessing lines on another SoC's numbering.
		why := errors.New("the Radxa CM5's GPIO mapping to the blade's connector is not known")
		for _, c := range []hardware.Capability{hardware.CapButton, hardware.CapStealth, hardware.CapPoEDetect} {
			miss(c, why)
		}
	} else {
		b.openGPIO(cfg, roots, plat, miss)
	}
	b.info.FanUnit = b.openFanUnit(o, plat)
	b.openFan(o, plat, miss)
	b.openThermal(cfg, roots, plat, miss)
	b.openLEDs(o, miss)

	fan := string(b.fan)
	if b.fanWhy != "" {
		fan += " (" + b.fanWhy + ")"
	}
	notes := []string{plat.Detail, "fan: " + fan}
	if o.Note != "" {
		notes = append(notes, o.Note)
	}
	if b.ledDesc != "" {
		notes = append(notes, "leds: "+b.ledDesc)
	}
	b.notes = notes
	b.info.Detail = b.detail(nil)
	return b, nil
}

// detail is Info.Detail: the notes, then every missing capability with
// its reason, the static ones and extra.
func (b *Backend) detail(extra []string) string {
	missing := append(append([]string(nil), b.missing...), extra...)
	notes := b.notes
	if len(missing) > 0 {
		sort.Strings(missing)
		notes = append(notes[:len(notes):len(notes)], "missing "+strings.Join(missing, "; "))
	}
	return strings.Join(notes, "; ")
}

// smartSilent reports a smart fan unit that has not sent one valid frame
// yet: configured (its UART exists) but maybe unpowered, unplugged or not
// a smart unit at all. Nothing it provides can be believed until it
// speaks, so its capabilities are missing; the link keeps listening and
// the pins stay the UART's.
func (b *Backend) smartSilent() bool {
	if b.smart == nil {
		return false
	}
	_, heard := b.smart.LastHeard()
	return !heard
}

type missFunc func(hardware.Capability, error)

// openGPIO claims the button, PoE detect and stealth lines.
func (b *Backend) openGPIO(cfg agentconfigv1.LinuxHardwareConfig, roots Roots, plat Platform, miss missFunc) {
	want := []string{LabelBCM2711, LabelRP1}
	if plat.SoC == SoCBCM2712 {
		want = []string{LabelRP1}
	}
	if cfg.GPIOChip != "" {
		want = []string{cfg.GPIOChip}
	}
	chip, err := gpio.FindChip(b.drv, roots.Dev, want...)
	if err != nil {
		for _, c := range []hardware.Capability{hardware.CapButton, hardware.CapStealth, hardware.CapPoEDetect} {
			miss(c, err)
		}
		return
	}
	b.chip = chip

	if _, err := b.claim(gpio.ParseLineSpec(cfg.Lines.Button, lineButton), gpio.Request{
		Consumer: "kubeblade-button", Bias: biasButton, Edge: gpio.EdgeBoth,
		Debounce: ButtonDebounce, Handler: b.onButtonEdge,
	}); err != nil {
		miss(hardware.CapButton, err)
	} else {
		b.caps[hardware.CapButton] = true
	}
	if l, err := b.claim(gpio.ParseLineSpec(cfg.Lines.PoEDetect, linePoE), gpio.Request{Consumer: "kubeblade-poe", Bias: biasPoE}); err != nil {
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

// lineHolder returns who holds the line spec names ("" when free or not
// found): a kernel driver such as pwm-gpio shows up by its device name.
func (b *Backend) lineHolder(spec gpio.LineSpec) string {
	if b.chip == nil {
		return ""
	}
	off, err := gpio.Resolve(b.chip, spec)
	if err != nil {
		return ""
	}
	li, err := b.chip.LineInfo(off)
	if err != nil || !li.Used {
		return ""
	}
	return li.Consumer
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

// serialPath is the smart fan unit's UART under the device root, or ""
// when the SoC has none on the fan pins or the configured name is not a
// UART's (the config refuses that already).
func (b *Backend) serialPath(cfg agentconfigv1.LinuxHardwareConfig, roots Roots, plat Platform) string {
	p := cfg.SerialDevice
	if p == "" {
		switch plat.SoC {
		case SoCBCM2711:
			p = "ttyAMA5" // UART5 on GPIO12/13 (dtoverlay=uart5)
		case SoCBCM2712:
			p = "ttyAMA4" // RP1 UART4 on GPIO12/13
		default:
			return "" // no known UART on the blade's fan pins
		}
	}
	n, err := devnode.UART(roots.Dev, p)
	if err != nil {
		b.log.Error("linux.serialDevice is not a UART; no smart fan unit", "err", err)
		return ""
	}
	return n.Path
}

// openFanUnit decides between the smart and the standard fan unit. The
// smart unit's UART and the fan PWM share GPIO12/13, so a UART device that
// exists means those pins are muxed to the UART: the unit is taken as
// smart and the pins are never claimed as GPIO, even while the unit is
// silent. The link listens and reconnects by itself; until the first
// frame, what the unit provides is reported missing (Capabilities, Info)
// and fan commands are still sent but reported as failing.
func (b *Backend) openFanUnit(o Options, plat Platform) hardware.FanUnit {
	mode := o.Config.FanUnit
	switch mode {
	case "standard":
		return hardware.FanUnitStandard
	case "none":
		return hardware.FanUnitNone
	}
	path := b.serialPath(o.Config, o.Roots, plat)
	if mode != "smart" {
		if path == "" {
			return hardware.FanUnitStandard
		}
		if _, err := os.Stat(path); err != nil {
			b.log.Info("no smart fan unit UART; using the standard fan unit", "device", path)
			return hardware.FanUnitStandard
		}
	}
	if path == "" {
		b.log.Warn("smart fan unit forced by config but no UART known for this SoC; set linux.serialDevice")
		return hardware.FanUnitSmart
	}
	c := uart.New(uart.Options{Dial: o.Serial(path), Clock: o.Clock, Logger: b.log.With("device", path), RetryInterval: o.SmartFanRetry})
	// Full speed until the agent's first command, as with a PWM fan. The
	// agent sends nothing while the unit is silent (its fan is missing
	// then), and a unit that hears but is not heard (a broken TX wire)
	// would otherwise run at its 40 % default: the client replays and
	// re-sends this request from the moment the UART opens. It fails now
	// only because nothing is connected yet.
	_ = c.SetFanPercent(100)
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(runCtx); close(done) }()
	b.log.Info("smart fan unit UART configured; GPIO12/13 belong to it", "device", path)
	b.smart, b.smartPath, b.smartCancel, b.smartDone = c, path, cancel, done
	b.forwardDone = make(chan struct{})
	go func() {
		defer close(b.forwardDone)
		for t := range c.Buttons() {
			b.deliverButton(t, hardware.ButtonClick) // the unit reports presses, no releases
		}
	}()
	return hardware.FanUnitSmart
}

// openFan sets up fan duty and tach for the unit found.
func (b *Backend) openFan(o Options, plat Platform, miss missFunc) {
	cfg := o.Config
	b.fan = fanNone
	switch b.info.FanUnit {
	case hardware.FanUnitNone:
		return
	case hardware.FanUnitSmart:
		// The unit drives its fan itself and reports speed and airflow;
		// GPIO12/13 carry its UART.
		b.fan = fanSmart
		b.fanWhy = b.smartPath
		if b.smart != nil {
			b.smartCaps = []hardware.Capability{hardware.CapFan, hardware.CapTach, hardware.CapAirflowTemperature}
			for _, c := range b.smartCaps {
				b.caps[c] = true
			}
		} else {
			miss(hardware.CapFan, errors.New("no UART for the smart fan unit"))
		}
		return
	}

	chips := sysfs.ListPWMChips(o.Roots.Sys)
	fanSpec := gpio.ParseLineSpec(cfg.Lines.FanPWM, lineFan)
	pick, pickErr := pickFanPWM(chips, plat.SoC, b.lineHolder(fanSpec), cfg.PWMChip, cfg.PWMChannel)
	var picked *pwmPick
	if pickErr == nil {
		picked = &pick
	}
	hw, hwWhy, hwErr := pickFanHwmon(sysfs.ListHwmon(o.Roots.Sys), plat.SoC, cfg.HwmonName, picked)

	var errs []error
	try := func(kind fanKind) bool {
		switch kind {
		case fanPWM:
			if pickErr != nil {
				errs = append(errs, pickErr)
				return false
			}
			p, err := sysfs.OpenPWM(sysfs.PWMOptions{SysfsRoot: o.Roots.Sys, Chip: pick.chip.Name, Channel: pick.channel, AwaitExport: o.AwaitPWMExport})
			if err == nil {
				// Full speed until the agent's first command.
				err = p.SetPercent(100)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", pick.why, err))
				return false
			}
			b.pwm = p
			b.fanWhy = fmt.Sprintf("%s, %s channel %d", pick.why, pick.chip.Name, pick.channel)
		case fanHwmon:
			if hwErr != nil {
				errs = append(errs, hwErr)
				return false
			}
			h, err := sysfs.OpenHwmon(hw)
			if err != nil {
				errs = append(errs, err)
				return false
			}
			b.hwmon = h
			b.fanWhy = hwWhy
		case fanRegs:
			if err := o.Outputs.StartFan(); err != nil {
				errs = append(errs, err)
				return false
			}
		case fanGPIO:
			// Last resort (a CM5 kernel without any PWM on GPIO12):
			// full speed or off. Initially on, the safe state, and
			// pulled up from the start: when the agent dies without
			// Close (SIGKILL, the OOM killer, the kubelet after the
			// grace period) the kernel releases the line, and a
			// released output becomes an input that keeps its pull
			// (see Close), which a 4-wire fan reads as full speed.
			l, err := b.claim(fanSpec, gpio.Request{Consumer: "kubeblade-fan", Output: true, Initial: 1, Bias: biasFan})
			if err != nil {
				errs = append(errs, fmt.Errorf("GPIO fan: %w", err))
				return false
			}
			b.fanLine = l
			// Why not proportional is the one thing a person needs to
			// fix it (docs/fan-units.md, "the agent uses GPIO12 on/off and says why"): the reasons
			// of the drivers tried before, in Info.Detail and the log.
			b.fanWhy = "fan on or off only"
			if len(errs) > 0 {
				b.fanWhy = errors.Join(errs...).Error()
				b.fanWhy = strings.ReplaceAll(b.fanWhy, "\n", "; ")
				b.log.Warn("no PWM for the fan; driving GPIO12 on or off only", "reason", b.fanWhy)
			}
		}
		b.fan = kind
		return true
	}
	var order []fanKind
	switch cfg.FanDriver {
	case "pwm":
		order = []fanKind{fanPWM}
	case "hwmon":
		order = []fanKind{fanHwmon}
	case "gpio":
		order = []fanKind{fanGPIO}
	default:
		if plat.SoC == SoCRK3588 {
			order = []fanKind{fanHwmon, fanPWM}
			if cfg.PWMChip == "" {
				order = []fanKind{fanHwmon}
			}
		} else {
			// A pwm-fan driver that holds the GPIO12 PWM owns it, so
			// hwmon goes first when one does.
			order = []fanKind{fanPWM, fanGPIO}
			if hwErr == nil {
				order = []fanKind{fanHwmon, fanPWM, fanGPIO}
			}
		}
	}
	if o.Outputs != nil {
		// GPIO12 belongs to the register backend's PWM.
		order = []fanKind{fanRegs}
	}
	for _, k := range order {
		if try(k) {
			b.caps[hardware.CapFan] = true
			break
		}
	}
	if b.fan == fanNone {
		miss(hardware.CapFan, errors.Join(errs...))
	}
	b.openTach(o, plat, miss)
}

// openTach claims GPIO13 for the tachometer, unless the tach is turned off
// (then the line is left alone entirely) or a pwm-fan driver counts it.
func (b *Backend) openTach(o Options, plat Platform, miss missFunc) {
	if o.NoTach {
		return
	}
	var err error
	if plat.SoC == SoCRK3588 {
		err = errors.New("the Radxa CM5's GPIO mapping to the blade's connector is not known")
	} else {
		meter := tach.New(tach.Options{PulsesPerRevolution: 2})
		_, err = b.claim(gpio.ParseLineSpec(o.Config.Lines.FanTach, lineTach), gpio.Request{
			Consumer: "kubeblade-tach", Bias: biasTach, Edge: gpio.EdgeFalling,
			Handler: func(ev gpio.Event) { meter.Edge(ev.Time) },
		})
		if err == nil {
			b.meter = meter
			b.caps[hardware.CapTach] = true
			return
		}
	}
	if b.hwmon != nil && b.hwmon.HasTach() {
		// A pwm-fan node with a tach holds the tach line itself.
		b.hwmonTach = true
		b.caps[hardware.CapTach] = true
		return
	}
	miss(hardware.CapTach, err)
}

func (b *Backend) openThermal(cfg agentconfigv1.LinuxHardwareConfig, roots Roots, plat Platform, miss missFunc) {
	types := thermalZoneTypes[plat.SoC]
	if cfg.ThermalZoneType != "" {
		types = []string{cfg.ThermalZoneType}
	}
	z, err := sysfs.FindThermalZone(roots.Sys, types...)
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
func (b *Backend) openLEDs(o Options, miss missFunc) {
	if b.outputs != nil {
		b.caps[hardware.CapLEDs] = true
		b.ledDesc = b.outputs.Describe()
		return
	}
	cfg := o.Config
	names := [2]string{cfg.LEDs.Top, cfg.LEDs.Edge}
	auto := sysfs.MulticolorLEDs(o.Roots.Sys)
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
		if !ledClassName(names[i]) {
			errs = append(errs, fmt.Errorf("LED %q is not an LED class name", names[i]))
			continue
		}
		l, err := sysfs.OpenMulticolorLED(o.Roots.Sys, names[i])
		if err != nil {
			errs = append(errs, err)
			continue
		}
		b.ledClass[i] = l
	}
	// One LED of two is a half-loaded or misnamed driver: driving it alone
	// would leave the other showing a stale colour the status does not.
	for i, hint := range [2]string{"top", "edge"} {
		if b.ledClass[i] == nil && b.ledClass[1-i] != nil {
			errs = append(errs, fmt.Errorf("LED class: %s found but no multicolor LED for the %s LED (driver half-loaded?)", b.ledClass[1-i].Name(), hint))
			b.ledClass = [2]*sysfs.MulticolorLED{}
			break
		}
	}
	if b.ledClass[0] != nil {
		b.ledDesc = "LED class " + b.ledClass[0].Name() + ", " + b.ledClass[1].Name()
	}
	if b.ledClass[0] == nil && b.ledClass[1] == nil {
		stream := cfg.LEDs.Stream
		if stream == "" {
			stream = "leds0"
		}
		n, err := devnode.LEDStream(o.Roots.Dev, stream)
		switch {
		case err != nil:
			errs = append(errs, err)
		case exists(n.Path) || cfg.LEDs.Stream != "":
			if s, err := sysfs.OpenLEDStreamWith(n.Path, o.LEDStream); err == nil {
				b.stream = s
				b.ledDesc = n.Path + " (ws2812-pio-rp1)"
			} else {
				errs = append(errs, err)
			}
		}
	}
	if b.ledDesc == "" && b.smart != nil {
		b.ledDesc = "smart fan unit (edge LED only)"
	}
	if b.ledClass[0] != nil || b.ledClass[1] != nil || b.stream != nil || b.smart != nil {
		b.caps[hardware.CapLEDs] = true
		if b.ledClass[0] == nil && b.ledClass[1] == nil && b.stream == nil {
			b.smartCaps = append(b.smartCaps, hardware.CapLEDs) // the unit's LED is the only one
		}
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

// Info implements hardware.Backend. Its Detail names what a silent smart
// fan unit leaves missing, until the unit's first frame.
func (b *Backend) Info() hardware.Info {
	info := b.info
	if b.smartSilent() {
		why := fmt.Sprintf("smart fan unit on %s: no frame yet, still listening (retrying the UART with backoff)", b.smartPath)
		extra := make([]string, 0, len(b.smartCaps))
		for _, c := range b.smartCaps {
			extra = append(extra, fmt.Sprintf("%s: %s", c, why))
		}
		info.Detail = b.detail(extra)
	}
	return info
}

// Capabilities implements hardware.Backend. While the smart fan unit is
// silent, what it provides is missing: the agent then neither trusts its
// readings nor reports a fan it cannot see, and picks them up on a later
// sample once the unit speaks.
func (b *Backend) Capabilities() hardware.Capabilities {
	out := hardware.Capabilities{}
	for c, ok := range b.caps {
		out[c] = ok
	}
	if b.smartSilent() {
		for _, c := range b.smartCaps {
			delete(out, c)
		}
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
		if err := b.smart.SetFanPercent(p); err != nil {
			return err
		}
		return b.smartHeard()
	case fanPWM:
		return b.pwm.SetPercent(p)
	case fanHwmon:
		if err := b.hwmon.SetPercent(p); err != nil {
			return err
		}
		b.hwmonWant = sysfs.Scale(p)
		return nil
	case fanRegs:
		return b.outputs.SetFanPercent(p)
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

// smartHeard reports a smart fan unit that has not been heard from: the
// request went out and will be re-sent, but nobody may be listening.
func (b *Backend) smartHeard() error {
	at, ok := b.smart.LastHeard()
	if !ok {
		return fmt.Errorf("smart fan unit on %s: no report yet (request sent, still listening)", b.smartPath)
	}
	if age := b.clk.Since(at); age > uart.DefaultStaleAfter {
		return fmt.Errorf("smart fan unit on %s: silent for %s (request sent, still listening)", b.smartPath, age.Round(time.Second))
	}
	return nil
}

// keepHwmonFan puts pwm1 back when something else lowered it below what
// the agent asked for: a pwm-fan that is also a thermal cooling device
// (Radxa's CM5 image maps its fan to soc-thermal) is set by the kernel's
// governor too. A higher value is left alone: the kernel wants more
// cooling, which errs safe.
func (b *Backend) keepHwmonFan() {
	if b.hwmon == nil || b.hwmonWant < 0 {
		return
	}
	cur, err := b.hwmon.Raw()
	if err != nil || cur >= b.hwmonWant {
		return
	}
	b.log.Info("hwmon fan was lowered by someone else; restoring", "pwm1", cur, "want", b.hwmonWant)
	if err := b.hwmon.SetPercent(uint8((b.hwmonWant*100 + 127) / 255)); err != nil {
		b.log.Warn("restoring the hwmon fan failed", "err", err)
	}
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
	if b.outputs != nil {
		errs = append(errs, b.outputs.SetLEDs(b.leds[hardware.LEDTop], b.leds[hardware.LEDEdge]))
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

// SoCTemperature implements hardware.Backend. The agent reads it on every
// sample, which is also when an hwmon fan is checked (keepHwmonFan).
func (b *Backend) SoCTemperature() (float64, error) {
	b.keepHwmonFan()
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

// Close implements hardware.Backend. What the agent's safe exit set stays
// where the kernel lets it:
//   - a sysfs PWM channel stays exported, enabled, at its last duty (100 %
//     after a safe exit): the kernel keeps PWM state after the process;
//   - an hwmon pwm1 stays (the driver holds it);
//   - GPIO lines are released, and mainline pin controllers turn released
//     outputs into inputs that keep their pull (pinctrl-bcm2835's
//     bcm2835_pmx_free, unless persist_gpio_outputs=1; pinctrl-rp1 keeps
//     outputs by default). The GPIO fan line is therefore made an input
//     with a pull-up first: a 4-wire fan reads a high PWM input as full
//     speed, so the fan keeps running flat out after the agent. The line
//     was requested with that pull-up from the start (biasFan), so a
//     process killed before it could get here leaves the same.
func (b *Backend) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	b.mu.Unlock()

	var errs []error
	if b.fanLine != nil {
		errs = append(errs, b.fanLine.SetInput(gpio.BiasPullUp))
	}
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
	if b.outputs != nil {
		errs = append(errs, b.outputs.Close())
	}
	b.mu.Lock()
	close(b.buttons)
	b.mu.Unlock()
	return errors.Join(errs...)
}

// ledClassName says whether name can be an LED class device's name: one
// path element under /sys/class/leds, not "." or "..".
func ledClassName(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsRune(name, '/') && len(name) <= 64
}

// exists says whether something (a symbolic link too) is at path.
func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}
