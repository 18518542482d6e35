// Package backends opens the hardware backend a config asks for. It is the
// only place that knows every backend, so the agent and its tests depend on
// the hardware interface alone.
package backends

import (
	"context"
	"fmt"
	"log/slog"

	"k8s.io/utils/clock"

	agentconfigv1 "github.com/kubeblade/kubeblade/api/agentconfig/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/hardware"
	"github.com/kubeblade/kubeblade/internal/hardware/linux"
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
}

// Open opens the backend cfg selects. "auto" means linux: it never falls back
// to the simulation, since a real blade silently simulated would not be
// cooled.
func Open(ctx context.Context, cfg agentconfigv1.HardwareConfig, deps Deps) (Opened, error) {
	if deps.Clock == nil {
		deps.Clock = clock.RealClock{}
	}
	switch cfg.Backend {
	case agentconfigv1.BackendSimulated:
		o := simulated.Options{Clock: deps.Clock, Load: float64(cfg.Simulated.LoadPercent) / 100}
		if cfg.Simulated.FanUnit == string(hardware.FanUnitSmart) {
			o.FanUnit = hardware.FanUnitSmart
		}
		b := simulated.New(o)
		return Opened{Backend: b, Simulated: b}, nil
	case agentconfigv1.BackendLinux, agentconfigv1.BackendAuto, "":
		return openLinux(ctx, cfg.Linux, deps)
	default:
		return Opened{}, fmt.Errorf("hardware.backend: unknown backend %q", cfg.Backend)
	}
}

// openLinux opens the linux backend. On a machine that is not a blade it
// still succeeds, with Info().IsBlade false, so the agent can say so (and
// the node be labelled) instead of crash-looping.
func openLinux(ctx context.Context, cfg agentconfigv1.LinuxHardwareConfig, deps Deps) (Opened, error) {
	logger := deps.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	b, err := linux.Open(ctx, linux.Options{Config: cfg, Clock: deps.Clock, Logger: logger, NoTach: deps.NoTach})
	if err != nil {
		return Opened{}, fmt.Errorf("linux hardware backend: %w", err)
	}
	return Opened{Backend: b}, nil
}
