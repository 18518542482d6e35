// Package backends opens the hardware backend a config asks for. It is the
// only place that knows every backend, so the agent and its tests depend on
// the hardware interface alone.
package backends

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"k8s.io/utils/clock"

	agentconfigv1 "github.com/kubeblade/kubeblade/api/agentconfig/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/hardware"
	"github.com/kubeblade/kubeblade/internal/hardware/bcm2711"
	"github.com/kubeblade/kubeblade/internal/hardware/bcm2712"
	"github.com/kubeblade/kubeblade/internal/hardware/linux"
	"github.com/kubeblade/kubeblade/internal/hardware/linux/gpio"
	"github.com/kubeblade/kubeblade/internal/hardware/linux/sysfs"
	"github.com/kubeblade/kubeblade/internal/hardware/regs"
	"github.com/kubeblade/kubeblade/internal/hardware/simulated"
)

// Opened is an opened backend. Simulated is set when the backend is the
// simulated blade, so its controls can be served.
type Opened struct {
	Backend   hardware.Backend
	Simulated *simulated.Blade
}

// Deps are the process-wide dependencies a backend may use.
type Deps struct {
	Clock  clock.WithTicker
	Logger *slog.Logger
	// NoTach is tachEnabled: false. The tach is then not opened at all,
	// so its GPIO line stays free (the setting takes effect at start).
	NoTach bool
	// DevMem opens the physical-memory device for the register backends
	// (default regs.OpenDevMem); tests pass a register file.
	DevMem func(path string) (regs.Mapper, error)
	// GPIO is the linux backend's GPIO port (default the character device).
	GPIO gpio.Driver
	// Roots are where sysfs, device nodes and procfs are (default
	// linux.DefaultRoots); tests use temporary trees.
	Roots linux.Roots
	// LEDStream is the linux backend's opener of the /dev/ledsN stream
	// (default: the ws2812-pio-rp1 character device only); tests model
	// the driver with a plain file.
	LEDStream sysfs.LEDStreamOpener
	// RegisterSleep is the register drivers' pause (default time.Sleep).
	RegisterSleep func(time.Duration)
	// RegisterNow is the clock that bounds feeding RP1's FIFO (default
	// time.Now); tests pass the register model's, so a loaded machine
	// does not turn into a timeout.
	RegisterNow func() time.Time
}

// Open opens the backend cfg selects. "auto" means linux, or the register
// backend of the SoC when no kernel driver provides the LEDs and /dev/mem is
// usable; it never falls back to the simulation, since a real blade silently
// simulated would not be cooled.
func Open(ctx context.Context, cfg agentconfigv1.HardwareConfig, deps Deps) (Opened, error) {
	if deps.Clock == nil {
		deps.Clock = clock.RealClock{}
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	deps.Roots = deps.Roots.OrDefault()
	if deps.DevMem == nil {
		deps.DevMem = func(path string) (regs.Mapper, error) { return regs.OpenDevMem(path) }
	}
	switch cfg.Backend {
	case agentconfigv1.BackendSimulated:
		o := simulated.Options{Clock: deps.Clock, Load: float64(cfg.Simulated.LoadPercent) / 100}
		if cfg.Simulated.FanUnit == string(hardware.FanUnitSmart) {
			o.FanUnit = hardware.FanUnitSmart
		}
		b := simulated.New(o)
		return Opened{Backend: b, Simulated: b}, nil
	case agentconfigv1.BackendLinux:
		return openLinux(ctx, cfg.Linux, deps, nil, "")
	case agentconfigv1.BackendAuto, "":
		return openAuto(ctx, cfg.Linux, deps)
	case agentconfigv1.BackendBCM2711, agentconfigv1.BackendBCM2712:
		return openRegisters(ctx, cfg.Linux, string(cfg.Backend), deps)
	default:
		return Opened{}, fmt.Errorf("hardware.backend: unknown backend %q", cfg.Backend)
	}
}

// openLinux opens the linux backend, with register outputs when given. On
// a machine that is not a blade it still succeeds, with Info().IsBlade
// false, so the agent can say so (and the node be labelled) instead of
// crash-looping.
func openLinux(ctx context.Context, cfg agentconfigv1.LinuxHardwareConfig, deps Deps, out linux.Outputs, note string) (Opened, error) {
	b, err := linux.Open(ctx, linux.Options{Config: cfg, Roots: deps.Roots, Clock: deps.Clock, Logger: deps.Logger, GPIO: deps.GPIO,
		LEDStream: deps.LEDStream, NoTach: deps.NoTach, Outputs: out, Note: note})
	if err != nil {
		if out != nil {
			out.Close()
		}
		return Opened{}, fmt.Errorf("linux hardware backend: %w", err)
	}
	return Opened{Backend: b}, nil
}

func detect(deps Deps) linux.Platform {
	d := deps.GPIO
	if d == nil {
		d = gpio.CDev{}
	}
	return linux.Detect(deps.Roots.Sys, deps.Roots.Proc, deps.Roots.Dev, d)
}

// openAuto picks linux unless a register backend is what drives this
// blade's LEDs: a CM4 or CM5 whose kernel has no LED driver for them, not
// Talos, and /dev/mem mappable. Why a register backend was not taken is
// kept in Info.Detail, so the missing LEDs explain themselves.
func openAuto(ctx context.Context, cfg agentconfigv1.LinuxHardwareConfig, deps Deps) (Opened, error) {
	plat := detect(deps)
	if !plat.IsBlade || (plat.SoC != linux.SoCBCM2711 && plat.SoC != linux.SoCBCM2712) {
		return openLinux(ctx, cfg, deps, nil, "")
	}
	if drv := linux.KernelLEDs(cfg, deps.Roots); drv != "" {
		return openLinux(ctx, cfg, deps, nil, "")
	}
	if regs.IsTalos(deps.Roots.Proc) {
		return openLinux(ctx, cfg, deps, nil, "")
	}
	out, err := openOutputs(cfg, plat.SoC, deps)
	if err != nil {
		deps.Logger.Info("register backend not used", "soc", plat.SoC, "reason", err)
		return openLinux(ctx, cfg, deps, nil, "register backend "+plat.SoC+" not used: "+err.Error())
	}
	return openLinux(ctx, cfg, deps, out, "chosen by auto: no kernel LED driver, /dev/mem usable")
}

// openRegisters opens the register backend the config names. When it
// cannot (another SoC, Talos, /dev/mem refused) the agent still runs on the
// linux backend and says why the LEDs are missing: a clear status, never a
// crash loop, and never another SoC's registers.
func openRegisters(ctx context.Context, cfg agentconfigv1.LinuxHardwareConfig, soc string, deps Deps) (Opened, error) {
	plat := detect(deps)
	var err error
	switch {
	case !plat.IsBlade:
		err = fmt.Errorf("this machine is not a Compute Blade (%s)", plat.Detail)
	case plat.SoC != soc:
		err = fmt.Errorf("this blade's SoC is %s", plat.SoC)
	case regs.IsTalos(deps.Roots.Proc):
		err = fmt.Errorf("Talos has no /dev/mem; use the linux backend with the kubeblade-leds extension")
	}
	var out linux.Outputs
	if err == nil {
		out, err = openOutputs(cfg, soc, deps)
	}
	if err != nil {
		deps.Logger.Error("register backend unavailable; running the linux backend without it", "backend", soc, "err", err)
		return openLinux(ctx, cfg, deps, nil, "hardware.backend "+soc+" unavailable: "+err.Error())
	}
	return openLinux(ctx, cfg, deps, out, "")
}

// openOutputs maps the SoC's registers and opens its driver.
func openOutputs(cfg agentconfigv1.LinuxHardwareConfig, soc string, deps Deps) (linux.Outputs, error) {
	m, err := deps.DevMem(filepath.Join(deps.Roots.Dev, "mem"))
	if err != nil {
		return nil, err
	}
	var out linux.Outputs
	switch soc {
	case linux.SoCBCM2711:
		var d *bcm2711.Driver
		d, err = bcm2711.Open(bcm2711.Options{Mapper: m, Sleep: deps.RegisterSleep})
		out = d
	case linux.SoCBCM2712:
		var d *bcm2712.Driver
		d, err = bcm2712.Open(bcm2712.Options{Mapper: m, Sleep: deps.RegisterSleep, Now: deps.RegisterNow})
		out = d
	default:
		err = fmt.Errorf("no register backend for SoC %q", soc)
	}
	if err != nil {
		m.Close()
		return nil, err
	}
	return out, nil
}
