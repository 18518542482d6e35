package agentd

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubeblade/kubeblade/internal/agent"
	"github.com/kubeblade/kubeblade/internal/core"
	"github.com/kubeblade/kubeblade/internal/hardware"
	"github.com/kubeblade/kubeblade/internal/statedir"
	"github.com/kubeblade/kubeblade/internal/testwait"
)

type running struct {
	d      *Daemon
	cancel context.CancelFunc
	errc   chan error
	reload chan struct{}
	cfg    string
}

func startDaemon(t *testing.T, yaml string, opts ...func(*Options)) *running {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "agent.yaml")
	base := "hardware:\n  backend: simulated\nmetrics:\n  bindAddress: 127.0.0.1:0\ngrpc:\n  socketPath: " + filepath.Join(dir, "agent.sock") + "\n"
	if err := os.WriteFile(cfg, []byte(base+yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, errc: make(chan error, 1), reload: make(chan struct{}), cfg: cfg}
	started := make(chan *Daemon, 1)
	o := Options{
		ConfigPath: cfg,
		StateDir:   filepath.Join(dir, "state"),
		Reload:     r.reload,
		Started:    func(d *Daemon) { started <- d },
	}
	for _, opt := range opts {
		opt(&o)
	}
	go func() { r.errc <- Run(ctx, o) }()
	select {
	case r.d = <-started:
	case err := <-r.errc:
		t.Fatalf("Run returned before starting: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("daemon did not start")
	}
	t.Cleanup(func() {
		cancel()
		_ = r.d.Simulated.Close() // releases a hung sensor read
		<-r.d.Agent.Done()
	})
	return r
}

func httpGet(t *testing.T, c *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitEvent reads the agent's events until one with reason r arrives.
func waitEvent(t *testing.T, r *running, reason core.Reason, trigger func()) {
	t.Helper()
	sub := r.d.Agent.Subscribe(256)
	defer sub.Close()
	trigger()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case ev := <-sub.C():
			if ev.Reason == reason {
				return
			}
		case <-deadline:
			t.Fatalf("no %s event", reason)
		}
	}
}

func TestDaemonServesMetricsAndSimulator(t *testing.T) {
	r := startDaemon(t, "")
	if r.d.MetricsAddr == "" || r.d.ControlSocket == "" {
		t.Fatalf("daemon = %+v", r.d)
	}
	web := &http.Client{Timeout: 10 * time.Second}
	// Readiness follows the loop's first pass.
	testwait.Eventually(t, 30*time.Second, "the agent ready", func(context.Context) (bool, string) {
		return r.d.Agent.Ready(), ""
	})
	for path, want := range map[string]string{
		"/metrics": "kubeblade_agent_running 1",
		"/healthz": "ok",
		"/readyz":  "ok",
	} {
		if code, body := httpGet(t, web, "http://"+r.d.MetricsAddr+path); code != 200 || !strings.Contains(body, want) {
			t.Errorf("GET %s = %d %q, want %q", path, code, body, want)
		}
	}
	sim := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", r.d.ControlSocket)
		},
	}}
	waitEvent(t, r, core.ReasonIdentifyStarted, func() {
		resp, err := sim.Post("http://blade/button", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	})
	if !r.d.Agent.Status().Identify {
		t.Fatal("identify not active after a simulated press")
	}
}

func TestDaemonReloadAppliesAndRefuses(t *testing.T) {
	r := startDaemon(t, "criticalCelsius: 60\n")
	rewrite := func(old, new string) {
		b, err := os.ReadFile(r.cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(r.cfg, []byte(strings.Replace(string(b), old, new, 1)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	rewrite("criticalCelsius: 60", "criticalCelsius: 70")
	waitEvent(t, r, core.ReasonConfigApplied, func() { r.reload <- struct{}{} })
	if got := r.d.Agent.Status().Settings.CriticalCelsius; got != 70 {
		t.Fatalf("critical after reload = %v, want 70", got)
	}
	// A broken edit is refused and the running config stays.
	rewrite("criticalCelsius: 70", "criticalCelsius: 500")
	r.reload <- struct{}{}
	r.reload <- struct{}{} // the second send returns only after the first was handled
	if got := r.d.Agent.Status().Settings.CriticalCelsius; got != 70 {
		t.Fatalf("critical after a refused reload = %v, want 70", got)
	}
}

func TestDaemonSafeExit(t *testing.T) {
	r := startDaemon(t, "")
	r.cancel()
	select {
	case err := <-r.errc:
		if err != nil {
			t.Fatalf("Run = %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return")
	}
	st := r.d.Simulated.State()
	if st.FanPercent != 100 || r.d.Simulated.LED(hardware.LEDEdge) != hardware.Off {
		t.Fatalf("after exit: %+v", st)
	}
	if _, err := os.Stat(r.d.ControlSocket); err == nil {
		// The socket file may remain; what matters is nobody serves it.
		if c, err := net.Dial("unix", r.d.ControlSocket); err == nil {
			c.Close()
			t.Fatal("control socket still served after exit")
		}
	}
}

func TestDaemonRefusesBadConfig(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "agent.yaml")
	if err := os.WriteFile(cfg, []byte("fanCurve: [{temperatureCelsius: 40, percent: 120}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := Run(context.Background(), Options{ConfigPath: cfg, StateDir: dir})
	if err == nil || !strings.Contains(err.Error(), "fanCurve[0].percent: 120 is outside 0–100") {
		t.Fatalf("Run = %v", err)
	}
}

// TestDaemonRefusesUnsafeStateDir: a CA planted in a state directory
// others can write to is never adopted: the agent does not start.
func TestDaemonRefusesUnsafeStateDir(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(state, "ca.crt"), []byte("planted"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(state, "ca.crt"), 0o666); err != nil {
		t.Fatal(err)
	}
	err := Run(context.Background(), Options{ConfigPath: filepath.Join(dir, "missing.yaml"), StateDir: state})
	if !errors.Is(err, statedir.ErrUnsafe) || !strings.Contains(err.Error(), "ca.crt is writable by group or others") {
		t.Fatalf("Run = %v, want a refusal naming the planted file", err)
	}
}

// TestDaemonRefusesReadableKey (issue 31, finding 5): a private key others
// may read is refused with the command that fixes it, before the agent
// opens anything; 8f44781 started with it silently.
func TestDaemonRefusesReadableKey(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(state, "server.key")
	if err := os.WriteFile(key, []byte("key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(key, 0o644); err != nil {
		t.Fatal(err)
	}
	err := Run(context.Background(), Options{ConfigPath: filepath.Join(dir, "missing.yaml"), StateDir: state})
	if !errors.Is(err, statedir.ErrUnsafe) || !strings.Contains(err.Error(), "server.key holds a private key and is readable by group or others (mode 0644)") ||
		!strings.Contains(err.Error(), "chmod 600 "+key) {
		t.Fatalf("Run = %v, want a refusal naming the key and the fix", err)
	}
}

func TestDaemonRefusesSecondInstanceOnSameSocket(t *testing.T) {
	r := startDaemon(t, "")
	dir := t.TempDir()
	cfg := filepath.Join(dir, "agent.yaml")
	body := "hardware:\n  backend: simulated\nmetrics:\n  bindAddress: \"0\"\n"
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	// The same state directory, so the same simulator socket.
	if filepath.Base(r.d.ControlSocket) != SimulatorSocket {
		t.Fatalf("simulator socket %s, want one named %s in the state directory", r.d.ControlSocket, SimulatorSocket)
	}
	err := Run(context.Background(), Options{ConfigPath: cfg, StateDir: filepath.Dir(r.d.ControlSocket)})
	if err == nil || !strings.Contains(err.Error(), "in use by another process") {
		t.Fatalf("second instance: %v", err)
	}
}

func TestDaemonStalledLoopFailsLivenessAndExits(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	r := startDaemon(t, "", func(o *Options) { o.Clock = clk })
	web := &http.Client{Timeout: 10 * time.Second}
	url := "http://" + r.d.MetricsAddr
	testwait.Eventually(t, 30*time.Second, "the agent to be ready", func(context.Context) (bool, string) {
		code, body := httpGet(t, web, url+"/readyz?verbose")
		return code == 200, body
	})
	// A wedged sensor bus: the loop blocks in its next temperature read.
	r.d.Simulated.SetSensorHang(true)
	clk.Step(agent.DefaultSampleInterval)
	clk.Step(agent.MinStallAfter)
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, body := httpGet(t, web, url+path); code != http.StatusServiceUnavailable || !strings.Contains(body, "agent-loop failed: agent loop stalled") {
			t.Errorf("GET %s with a stalled loop = %d %q, want 503 naming the stalled loop", path, code, body)
		}
	}
	// Stopping it: the stuck loop cannot run the safe exit, so the process
	// turns the fan to full itself and exits with an error.
	if err := r.d.Simulated.SetFanPercent(30); err != nil {
		t.Fatal(err)
	}
	r.cancel()
	var runErr error
	testwait.Eventually(t, 30*time.Second, "Run to give up on the stuck loop", func(context.Context) (bool, string) {
		select {
		case runErr = <-r.errc:
			return true, ""
		default:
			clk.Step(time.Second) // the wait for the safe exit is on the fake clock
			return false, "Run still waits"
		}
	})
	if runErr == nil || !strings.Contains(runErr.Error(), "did not exit") {
		t.Errorf("Run = %v, want the stuck loop reported", runErr)
	}
	if got := r.d.Simulated.State().FanPercent; got != 100 {
		t.Errorf("fan after a stuck exit = %d %%, want 100", got)
	}
}
