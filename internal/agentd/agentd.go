// Package agentd assembles and runs the kubeblade-agent process: it loads
// the config, opens the hardware backend, runs the agent and serves its
// endpoints (metrics and health, the simulated blade's control socket) until
// the context ends, then lets the agent leave the blade safe.
package agentd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"

	agentconfigv1 "github.com/kubeblade/kubeblade/api/agentconfig/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/agent"
	"github.com/kubeblade/kubeblade/internal/config"
	"github.com/kubeblade/kubeblade/internal/hardware"
	"github.com/kubeblade/kubeblade/internal/hardware/backends"
	"github.com/kubeblade/kubeblade/internal/hardware/simulated"
	"github.com/kubeblade/kubeblade/internal/metrics"
	"github.com/kubeblade/kubeblade/internal/opsserver"
	"github.com/kubeblade/kubeblade/internal/statedir"
	"github.com/kubeblade/kubeblade/internal/unixsock"
	"github.com/kubeblade/kubeblade/internal/version"
)

// SimulatorSocket is the simulated blade's control socket, in the state
// directory.
const SimulatorSocket = "simulator.sock"

// DefaultStateDir keeps what must survive restarts (keys, certificates).
// It is a host directory, never a ConfigMap, so it stays writable on
// read-only systems such as Talos.
const DefaultStateDir = "/var/lib/kubeblade"

// Options configure the process.
type Options struct {
	ConfigPath string
	StateDir   string
	// Environ supplies KUBEBLADE_* overrides (os.Environ() form).
	Environ []string
	Logger  *slog.Logger
	// Audit gets the gRPC audit log (who changed what); default Logger.
	Audit *slog.Logger
	Clock clock.WithTicker
	// Reload, when it receives, re-reads the config file and applies it
	// live (the standalone agent wires SIGHUP to it).
	Reload <-chan struct{}
	// Started, if set, is called once everything listens.
	Started func(*Daemon)
	// Kubernetes, when set, turns on the Kubernetes mode: Node annotations,
	// labels, conditions, Blade objects, Events and BladeConfig following.
	Kubernetes *KubernetesOptions
	// RemoteAddress overrides the gRPC TCP listen address (default
	// ":<grpc.remote.port>"); tests use 127.0.0.1:0.
	RemoteAddress string
}

// KubeReporter is the running Kubernetes side of the agent.
type KubeReporter interface {
	Run(ctx context.Context) error
	// ConfigApplied reports whether the first config (the assigned
	// BladeConfig, or the local one when there is none) has been applied.
	ConfigApplied() bool
}

// Daemon is a running agent process.
type Daemon struct {
	Agent     *agent.Agent
	Config    agentconfigv1.AgentConfig
	Simulated *simulated.Blade
	// MetricsAddr is the bound metrics address, empty when disabled.
	MetricsAddr string
	// ControlSocket is the simulated blade's control socket, if any.
	ControlSocket string
	// GRPCSocket is the gRPC unix socket.
	GRPCSocket string
	// GRPCAddr is the bound mutual-TLS address, empty when remote access
	// is off; BladectlConfig is the admin config written for it.
	GRPCAddr       string
	BladectlConfig string
	// Kube is the Kubernetes side, nil in standalone mode.
	Kube KubeReporter
}

// Run runs the agent process until ctx ends.
func Run(ctx context.Context, o Options) error {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.StateDir == "" {
		o.StateDir = DefaultStateDir
	}
	log := o.Logger
	local, ignored, err := config.LoadChecked(o.ConfigPath, o.Environ)
	if err != nil {
		return err
	}
	if len(ignored) > 0 {
		log.Warn("ignoring KUBEBLADE_ environment variables that name no config key", "variables", ignored)
	}
	checked := local
	var initial *kubeInitial
	if o.Kubernetes != nil {
		// Hardware, gRPC and metrics settings take effect only at start,
		// so read the assigned BladeConfig before opening anything.
		checked, initial = bootstrapConfig(ctx, o, local)
	}
	cfg, settings := checked.Config, checked.Settings
	// The agent adopts the CA and keys it finds there: refuse a directory
	// someone else could have written to.
	if err := statedir.Ensure(o.StateDir); err != nil {
		return err
	}

	hw, err := backends.Open(ctx, cfg.Hardware, backends.Deps{Clock: o.Clock, Logger: log, NoTach: !settings.TachEnabled})
	if err != nil {
		return fmt.Errorf("hardware: %w", err)
	}
	defer hw.Backend.Close()
	info := hw.Backend.Info()
	log.Info("hardware opened", "backend", info.Backend, "soc", info.SoC, "fanUnit", info.FanUnit,
		"blade", info.IsBlade, "capabilities", hw.Backend.Capabilities().List(), "detail", info.Detail)

	ver := version.Get()
	a, err := agent.New(agent.Options{
		Backend:    hw.Backend,
		Settings:   settings,
		ConfigName: configName(o.ConfigPath),
		Clock:      o.Clock,
		Logger:     log,
		Version:    ver.Version,
	})
	if err != nil {
		return err
	}
	d := &Daemon{Agent: a, Config: cfg, Simulated: hw.Simulated}
	var extraMetrics []prometheus.Collector
	if o.Kubernetes != nil {
		rep, collector, err := newKubeReporter(o, a, local, initial)
		if err != nil {
			return err
		}
		d.Kube = rep
		extraMetrics = append(extraMetrics, collector)
	}

	// Everything that serves runs under runCtx; the agent itself runs
	// under ctx so its safe exit happens once, when the caller stops us.
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errc := make(chan error, 8)
	goServe := func(name string, fn func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(runCtx); err != nil && !errors.Is(err, context.Canceled) {
				errc <- fmt.Errorf("%s: %w", name, err)
			}
		}()
	}

	if addr := cfg.Metrics.BindAddress; addr != "" && addr != "0" {
		srv, err := opsserver.Listen(opsserver.Options{
			Address:  addr,
			Gatherer: metrics.NewRegistry(a, extraMetrics...),
			Live:     liveChecks(a),
			Ready:    readyChecks(a, d.Kube),
			Logger:   log,
		})
		if err != nil {
			return err
		}
		d.MetricsAddr = srv.Addr().String()
		goServe("metrics server", srv.Serve)
	}
	if hw.Simulated != nil {
		// In the state directory only: the socket's path is not
		// configuration, so no config can place or replace a socket
		// elsewhere on the host.
		path := filepath.Join(o.StateDir, SimulatorSocket)
		ln, err := unixsock.Listen(path, 0o660)
		if err != nil {
			return fmt.Errorf("simulator control socket: %w", err)
		}
		d.ControlSocket = path
		goServe("simulator control socket", func(ctx context.Context) error {
			return serveHTTP(ctx, ln, simulated.ControlHandler(hw.Simulated))
		})
	}

	if err := startGRPC(o, d, goServe); err != nil {
		return err
	}

	agentDone := make(chan error, 1)
	go func() { agentDone <- a.Run(ctx) }()
	if d.Kube != nil {
		goServe("kubernetes reporter", d.Kube.Run)
	}
	if o.Started != nil {
		o.Started(d)
	}
	log.Info("kubeblade agent running", "version", ver.String(), "config", configName(o.ConfigPath),
		"stateDir", o.StateDir, "metrics", d.MetricsAddr, "simulatorSocket", d.ControlSocket,
		"grpcSocket", d.GRPCSocket, "grpcRemote", d.GRPCAddr)

	var runErr error
loop:
	for {
		select {
		case err := <-agentDone:
			runErr = err
			break loop
		case <-ctx.Done():
			// The agent's loop sees the same context and exits safely in
			// milliseconds; one stuck in a hardware call never does.
			select {
			case err := <-agentDone:
				runErr = err
			case <-o.Clock.After(SafeExitTimeout):
				runErr = stuckExit(hw.Backend, log)
			}
			break loop
		case err := <-errc:
			// A failed endpoint stops the process so a supervisor restarts
			// it; the agent still exits safely first.
			log.Error("component failed; stopping", "err", err)
			runErr = err
			cancel()
			<-a.Done()
			break loop
		case <-o.Reload:
			reload(ctx, o, a, log)
		}
	}
	cancel()
	wg.Wait()
	if runErr == nil {
		// The agent finished its safe exit; wait for it to report.
		select {
		case err := <-agentDone:
			runErr = err
		default:
		}
	}
	return runErr
}

// SafeExitTimeout bounds how long the process waits, once stopped, for the
// agent's loop to leave the blade safe, before it does the essential part
// itself and exits: a loop stuck in a hardware call (the liveness probe's
// reason to stop it) would otherwise hold the process until SIGKILL.
const SafeExitTimeout = 5 * time.Second

// stuckExit turns the fan to full from outside the stuck loop, since a
// blade nobody watches must not overheat, and reports the stuck loop.
func stuckExit(hw hardware.Backend, log *slog.Logger) error {
	err := fmt.Errorf("the agent loop did not exit within %s (stuck in a hardware call?)", SafeExitTimeout)
	if hw.Capabilities().Has(hardware.CapFan) {
		if ferr := hw.SetFanPercent(100); ferr != nil {
			err = errors.Join(err, fmt.Errorf("fan to 100 %%: %w", ferr))
		}
	}
	log.Error("exiting without the agent's safe exit; fan set to 100 % directly", "err", err)
	return err
}

func reload(ctx context.Context, o Options, a *agent.Agent, log *slog.Logger) {
	cfg, _, err := config.LoadChecked(o.ConfigPath, o.Environ)
	if err == nil {
		err = a.ApplySettings(ctx, cfg.Settings, configName(o.ConfigPath))
	}
	if err != nil {
		// A bad edit keeps the running config: the blade stays protected.
		log.Error("config reload refused; keeping the running config", "err", err)
		return
	}
	log.Info("config reloaded", "config", configName(o.ConfigPath))
}

func configName(path string) string {
	if path == "" {
		return "defaults"
	}
	return "file " + path
}

// liveChecks fail when the agent's loop has stopped ticking: the blade is
// then unprotected and only a restart helps.
func liveChecks(a *agent.Agent) map[string]opsserver.Check {
	return map[string]opsserver.Check{"agent-loop": a.Stalled}
}

// readyChecks pass once the hardware backend is open and the loop runs,
// the first config is applied (in Kubernetes mode: the assigned
// BladeConfig, read from the API server), and while the loop ticks.
func readyChecks(a *agent.Agent, kube KubeReporter) map[string]opsserver.Check {
	checks := liveChecks(a)
	checks["hardware"] = func() error {
		if !a.Ready() {
			return errors.New("the hardware loop is not running")
		}
		return nil
	}
	if kube != nil {
		checks["config"] = func() error {
			if !kube.ConfigApplied() {
				return errors.New("no config from the cluster applied yet")
			}
			return nil
		}
	}
	return checks
}

func serveHTTP(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		<-errc
		return nil
	}
}
