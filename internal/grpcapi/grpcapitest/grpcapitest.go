// Package grpcapitest runs a real agent on a simulated blade behind the
// gRPC server, on a unix socket and a mutual-TLS loopback port, for tests
// and benchmarks of the API and of bladectl.
package grpcapitest

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubeblade/kubeblade/internal/agent"
	"github.com/kubeblade/kubeblade/internal/clientconfig"
	"github.com/kubeblade/kubeblade/internal/config"
	"github.com/kubeblade/kubeblade/internal/core"
	"github.com/kubeblade/kubeblade/internal/eventbus"
	"github.com/kubeblade/kubeblade/internal/grpcapi"
	"github.com/kubeblade/kubeblade/internal/hardware"
	"github.com/kubeblade/kubeblade/internal/hardware/simulated"
	"github.com/kubeblade/kubeblade/internal/pki"
	"github.com/kubeblade/kubeblade/internal/pki/standalone"
	"github.com/kubeblade/kubeblade/internal/unixsock"
	"github.com/kubeblade/kubeblade/internal/version"
)

// Version is what the test agents report.
var Version = version.Info{Version: "v1.2.3-test", Commit: "0123456789abcdef", Date: time.Unix(1767225600, 0).UTC()}

// Epoch is the fake clock's start.
var Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Options configure Start.
type Options struct {
	// TCP also serves mutual TLS on 127.0.0.1 with certificates from a
	// standalone issuer in the blade's state directory.
	TCP bool
	// Dir holds the socket and state (default t.TempDir()).
	Dir string
	// Audit receives the server's audit log (default: discarded).
	Audit *slog.Logger
	// Missing removes capabilities from the simulated blade.
	Missing []hardware.Capability
}

// Blade is a running agent with its endpoints.
type Blade struct {
	Agent *agent.Agent
	Sim   *simulated.Blade
	Clock *clocktesting.FakeClock
	// Events subscribes to the agent from before it started.
	Events *eventbus.Subscription[core.Event]
	// Socket is the unix socket; TCPAddr the mutual-TLS address.
	Socket   string
	TCPAddr  string
	StateDir string
	// Issuer is set with TCP.
	Issuer *standalone.Issuer
}

// Start runs an agent and its gRPC server until the test ends.
func Start(t testing.TB, o Options) *Blade {
	t.Helper()
	if o.Dir == "" {
		o.Dir = t.TempDir()
	}
	clk := clocktesting.NewFakeClock(Epoch)
	sim := simulated.New(simulated.Options{Clock: clk, Load: 0.2, Missing: o.Missing})
	settings, err := config.Settings(config.Default())
	if err != nil {
		t.Fatal(err)
	}
	a, err := agent.New(agent.Options{Backend: sim, Settings: settings, Clock: clk, ConfigName: "test", Version: Version.Version})
	if err != nil {
		t.Fatal(err)
	}
	b := &Blade{Agent: a, Sim: sim, Clock: clk, Events: a.Subscribe(1024),
		Socket: filepath.Join(o.Dir, "agent.sock"), StateDir: filepath.Join(o.Dir, "state")}

	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 2)
	agentDone := make(chan error, 1)
	srv := grpcapi.New(grpcapi.Options{Agent: a, Version: Version, Audit: o.Audit})
	ln, err := unixsock.Listen(b.Socket, 0o660)
	if err != nil {
		t.Fatal(err)
	}
	go func() { served <- srv.Serve(ctx, ln, nil) }()
	servers := 1
	if o.TCP {
		tcp, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		b.TCPAddr = tcp.Addr().String()
		_, port, _ := net.SplitHostPort(b.TCPAddr)
		p, _ := strconv.Atoi(port)
		// "localhost" is in every serving certificate and resolves here,
		// so the bladectl config the issuer writes works as it is.
		b.Issuer, err = standalone.New(standalone.Options{
			Dir: b.StateDir, Hostname: "localhost", Port: p, SocketPath: b.Socket,
			Addresses: func() ([]net.IP, error) { return nil, nil },
			ClientConfig: func(a standalone.Admin) ([]byte, error) {
				return clientconfig.ForAdmin(a.Host, a.ServerHost, a.Port, a.SocketPath, a.CAPEM, a.Client.CertPEM, a.Client.KeyPEM)
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		go func() { served <- srv.Serve(ctx, tcp, pki.ServerTLSConfig(b.Issuer)) }()
		servers++
	}
	go func() { agentDone <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		for range servers {
			if err := <-served; err != nil && !errors.Is(err, net.ErrClosed) {
				t.Errorf("serve: %v", err)
			}
		}
		if err := <-agentDone; err != nil {
			t.Errorf("agent: %v", err)
		}
		_ = sim.Close()
	})
	// A request is served only from the agent's main loop, so once this
	// no-op (identify is off) returns, the first status is stored and the
	// sample ticker exists for Clock.Step to fire.
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer wcancel()
	if err := a.WaitForIdentifyConfirm(wctx); err != nil {
		t.Fatalf("agent did not start: %v", err)
	}
	return b
}

// WaitFor waits for an event with the given reason and returns it.
func (b *Blade) WaitFor(t testing.TB, r core.Reason) core.Event {
	t.Helper()
	timeout := time.NewTimer(10 * time.Second)
	defer timeout.Stop()
	for {
		select {
		case ev := <-b.Events.C():
			if ev.Reason == r {
				return ev
			}
		case <-timeout.C:
			t.Fatalf("no %s event within 10s", r)
		}
	}
}

// Overheat jumps the SoC temperature to celsius and lets the agent sample
// it; with celsius above the critical threshold it returns once critical
// mode is on.
func (b *Blade) Overheat(t testing.TB, celsius float64) {
	t.Helper()
	b.Sim.SetTemperature(celsius)
	b.Clock.Step(agent.DefaultSampleInterval)
	b.WaitFor(t, core.ReasonCriticalTemperature)
}

// UnixBlade is the clientconfig entry for the socket.
func (b *Blade) UnixBlade() clientconfig.Blade {
	return clientconfig.Blade{Server: "unix://" + b.Socket}
}

// CA is the certificate authority of the standalone issuer (Options.TCP),
// to issue client certificates of any kind in tests.
func (b *Blade) CA(t testing.TB) *pki.CA {
	t.Helper()
	var kp pki.KeyPair
	var err error
	if kp.CertPEM, err = os.ReadFile(filepath.Join(b.StateDir, standalone.CACert)); err != nil {
		t.Fatal(err)
	}
	if kp.KeyPEM, err = os.ReadFile(filepath.Join(b.StateDir, standalone.CAKey)); err != nil {
		t.Fatal(err)
	}
	ca, err := pki.LoadCA(kp)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// TLSBlade is the clientconfig entry for the mutual-TLS port using the
// admin certificate the issuer wrote.
func (b *Blade) TLSBlade() clientconfig.Blade {
	d := b.StateDir
	return clientconfig.Blade{
		Server:               b.TCPAddr,
		CertificateAuthority: filepath.Join(d, standalone.CACert),
		ClientCertificate:    filepath.Join(d, standalone.AdminCert),
		ClientKey:            filepath.Join(d, standalone.AdminKey),
	}
}
