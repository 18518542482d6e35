package bladectl

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kubeblade/kubeblade/internal/clientconfig"
	"github.com/kubeblade/kubeblade/internal/core"
	"github.com/kubeblade/kubeblade/internal/grpcapi/grpcapitest"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// fleet is two live blades (one over the socket, one over mutual TLS) and
// one whose agent is down, in one bladectl config.
type fleet struct {
	dir        string
	cfg        string
	one, two   *grpcapitest.Blade
	downSocket string
}

func newFleet(t *testing.T) *fleet {
	t.Helper()
	f := &fleet{dir: t.TempDir()}
	f.one = grpcapitest.Start(t, grpcapitest.Options{})
	f.two = grpcapitest.Start(t, grpcapitest.Options{TCP: true})
	f.downSocket = filepath.Join(f.dir, "down.sock")
	cfg := &clientconfig.Config{CurrentBlade: "blade1"}
	cfg.Set("blade1", f.one.UnixBlade())
	cfg.Set("blade2", f.two.TLSBlade())
	cfg.Set("down", clientconfig.Blade{Server: "unix://" + f.downSocket})
	f.cfg = filepath.Join(f.dir, "bladectl.yaml")
	if err := clientconfig.Save(f.cfg, cfg); err != nil {
		t.Fatal(err)
	}
	return f
}

type run struct {
	code           int
	stdout, stderr string
}

func (f *fleet) run(t *testing.T, args ...string) run {
	t.Helper()
	return f.runCtx(t, context.Background(), "bladectl", args...)
}

func (f *fleet) runCtx(t *testing.T, ctx context.Context, argv0 string, args ...string) run {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(ctx, args, Env{Stdout: &out, Stderr: &errb, Argv0: argv0,
		Getenv: func(k string) string {
			if k == clientconfig.EnvVar {
				return f.cfg
			}
			return ""
		}})
	return run{code, out.String(), errb.String()}
}

// golden compares got with testdata/name, after replacing the test's
// temporary paths; -update rewrites the file.
func golden(t *testing.T, name, got string, f *fleet) {
	t.Helper()
	got = strings.ReplaceAll(got, f.dir, "$TMP")
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s (-want +got):\n%s", name, diff)
	}
}

func TestStatusGolden(t *testing.T) {
	f := newFleet(t)
	for _, format := range []string{"table", "json", "yaml"} {
		t.Run(format, func(t *testing.T) {
			r := f.run(t, "status", "--blade", "blade1", "--blade", "blade2", "-o", format)
			if r.code != ExitOK || r.stderr != "" {
				t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
			}
			golden(t, "status."+format, r.stdout, f)
		})
	}
}

func TestAllWithOneBladeDown(t *testing.T) {
	f := newFleet(t)
	for _, format := range []string{"table", "json"} {
		t.Run(format, func(t *testing.T) {
			r := f.run(t, "status", "--all", "-o", format)
			if r.code != ExitFailed {
				t.Fatalf("exit %d, want %d", r.code, ExitFailed)
			}
			wantErr := "down: cannot reach agent at unix://" + f.downSocket + ": no such socket — is kubeblade-agent running?\n"
			if !strings.HasPrefix(r.stderr, wantErr) || !strings.Contains(r.stderr, "error: 1 of 3 blades failed") {
				t.Errorf("stderr = %q", r.stderr)
			}
			golden(t, "status-all-one-down."+format, r.stdout, f)
		})
	}
}

func TestControlCommands(t *testing.T) {
	f := newFleet(t)
	cases := []struct {
		args   []string
		code   int
		stdout string
		stderr string
		check  func(t *testing.T)
	}{
		{args: []string{"identify"}, stdout: "BLADE    RESULT\nblade1   identify started\n",
			check: func(t *testing.T) { want(t, f.one.Agent.Status().Identify, "identify on") }},
		{args: []string{"identify", "--off"}, stdout: "BLADE    RESULT\nblade1   identify stopped\n",
			check: func(t *testing.T) { want(t, !f.one.Agent.Status().Identify, "identify off") }},
		{args: []string{"stealth", "on", "--all"}, code: ExitFailed,
			stdout: "BLADE    RESULT\nblade1   stealth on\nblade2   stealth on\n", stderr: "down: cannot reach agent",
			check: func(t *testing.T) {
				want(t, f.one.Sim.State().Stealth && f.two.Sim.State().Stealth, "stealth on both live blades")
			}},
		{args: []string{"stealth", "clear", "-b", "blade1", "-b", "blade2"},
			stdout: "BLADE    RESULT\nblade1   stealth back to the configured mode\nblade2   stealth back to the configured mode\n",
			check:  func(t *testing.T) { want(t, !f.one.Agent.Status().Stealth, "stealth off") }},
		{args: []string{"fan", "55", "-b", "blade2"}, stdout: "BLADE    RESULT\nblade2   fan at 55 %\n",
			check: func(t *testing.T) { want(t, f.two.Agent.Status().FanPercent == 55, "fan 55 %") }},
		{args: []string{"fan", "auto", "-b", "blade2"}, stdout: "BLADE    RESULT\nblade2   fan follows the curve\n",
			check: func(t *testing.T) { want(t, !f.two.Agent.Status().ManualFan, "fan auto") }},
		{args: []string{"fan", "101"}, code: ExitUsage, stderr: `error: fan "101": want auto or a percent from 0 to 100`},
		{args: []string{"fan", "-5"}, code: ExitUsage, stderr: "error: unknown shorthand flag"},
		{args: []string{"stealth", "maybe"}, code: ExitUsage, stderr: `error: stealth "maybe": want on, off or clear`},
		{args: []string{"identify", "--wait", "--off"}, code: ExitUsage, stderr: "none of the others can be"},
		{args: []string{"status", "-o", "xml"}, code: ExitUsage, stderr: `error: --output "xml": want one of table, json, yaml`},
		{args: []string{"status", "--blade", "nope"}, code: ExitUsage, stderr: `error: no blade named "nope"`},
		{args: []string{"status", "--blade", "blade1", "--all"}, code: ExitUsage, stderr: "error: use either --blade or --all"},
		{args: []string{"status", "--node", "blade1"}, code: ExitFailed, stderr: "error: no Kubernetes configuration: use --kubeconfig"},
		{args: []string{"version", "--client", "-o", "json"}, stdout: "{\n  \"client\": {\n"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			r := f.run(t, tc.args...)
			if r.code != tc.code || !strings.HasPrefix(r.stdout, tc.stdout) || (tc.stdout == "" && r.stdout != "") ||
				!strings.Contains(r.stderr, tc.stderr) || (tc.stderr == "" && r.stderr != "") {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
			}
			if strings.Contains(r.stderr, "goroutine ") || strings.Contains(r.stderr, "rpc error") {
				t.Errorf("raw error leaked: %s", r.stderr)
			}
			if tc.check != nil {
				tc.check(t)
			}
		})
	}
}

func port(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

func want(t *testing.T, ok bool, what string) {
	t.Helper()
	if !ok {
		t.Errorf("want %s", what)
	}
}

func TestFanRefusedInCritical(t *testing.T) {
	f := newFleet(t)
	f.one.Overheat(t, 80)
	r := f.run(t, "fan", "30")
	if r.code != ExitFailed || !strings.HasPrefix(r.stderr, "blade1: refused by the agent: critical temperature mode is active") {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
	if st := f.one.Agent.Status(); st.FanPercent != 100 || st.ManualFan {
		t.Errorf("fan changed: %+v", st)
	}
}

func TestIdentifyWaitReturnsOnButton(t *testing.T) {
	f := newFleet(t)
	done := make(chan run, 1)
	go func() { done <- f.run(t, "identify", "--wait", "-b", "blade2") }()
	f.two.WaitFor(t, core.ReasonIdentifyStarted)
	f.two.Sim.PressButton()
	r := <-done
	if r.code != ExitOK || r.stdout != "BLADE    RESULT\nblade2   identify confirmed\n" {
		t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
}

func TestTimeoutIsHonoured(t *testing.T) {
	f := newFleet(t)
	// A socket that accepts and then never says a word.
	silent := filepath.Join(f.dir, "silent.sock")
	ln, err := net.Listen("unix", silent)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	cfg, _, _ := clientconfig.Load(f.cfg)
	cfg.Set("silent", clientconfig.Blade{Server: "unix://" + silent})
	if err := clientconfig.Save(f.cfg, cfg); err != nil {
		t.Fatal(err)
	}
	// The server never answers, so the only way out is the deadline:
	// the message says it was --timeout's (how soon it fires is the
	// context's business, and a wall-clock bound would measure the
	// machine's load).
	r := f.run(t, "status", "-b", "silent", "--timeout", "300ms")
	if r.code != ExitFailed || !strings.Contains(r.stderr, "silent: no answer from unix://"+silent+" within 300ms") {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
}

// lineWriter collects output and announces each write.
type lineWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	wrote chan struct{}
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.buf.Write(p)
	select {
	case w.wrote <- struct{}{}:
	default:
	}
	return n, err
}

func (w *lineWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// waitFor blocks until the output contains s.
func (w *lineWriter) waitFor(t *testing.T, s string) {
	t.Helper()
	deadline := time.NewTimer(15 * time.Second)
	defer deadline.Stop()
	for !strings.Contains(w.String(), s) {
		select {
		case <-w.wrote:
		case <-deadline.C:
			t.Fatalf("output never contained %q:\n%s", s, w.String())
		}
	}
}

func TestMonitorFollowsButtonIdentifyAndCritical(t *testing.T) {
	f := newFleet(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &lineWriter{wrote: make(chan struct{}, 1)}
	var errb bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"monitor", "-b", "blade1", "-b", "blade2"}, Env{Stdout: out, Stderr: &errb,
			Getenv: func(k string) string {
				if k == clientconfig.EnvVar {
					return f.cfg
				}
				return ""
			}})
	}()
	out.waitFor(t, "blade2        status")
	out.waitFor(t, "blade1        status")
	f.one.Sim.PressButton()
	out.waitFor(t, "blade1        ButtonPressed")
	out.waitFor(t, "blade1        IdentifyStarted")
	f.two.Overheat(t, 85)
	out.waitFor(t, "blade2        CriticalTemperature")
	cancel()
	if code := <-done; code != ExitOK {
		t.Fatalf("monitor exit %d, stderr %q", code, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if lines[0] != "TIME      BLADE         CHANGE                TEMP      FAN                   STATE" {
		t.Errorf("header %q", lines[0])
	}
	for _, l := range lines {
		if strings.Contains(l, "CriticalTemperature") && !strings.Contains(l, "100% critical") {
			t.Errorf("critical line without the forced fan: %q", l)
		}
	}
}

func TestMonitorJSONLinesAndTimeout(t *testing.T) {
	f := newFleet(t)
	// --timeout ends monitor normally.
	r := f.run(t, "monitor", "-o", "json", "--timeout", "1s")
	if r.code != ExitOK {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
	if !strings.HasPrefix(r.stdout, `{"blade":"blade1","time":"2026-01-01T00:00:00Z","status":{`) || strings.Count(r.stdout, "\n") < 1 {
		t.Errorf("stdout %q", r.stdout)
	}
}

func TestConfigCommands(t *testing.T) {
	f := newFleet(t)
	f.cfg = filepath.Join(f.dir, "new", "bladectl.yaml")
	// No file: the built-in local blade.
	if r := f.run(t, "config", "list"); r.code != 0 || r.stdout != "CURRENT   NAME    SERVER\n*         local   unix:///run/kubeblade/agent.sock\n" {
		t.Fatalf("list without a file: %+v", r)
	}
	if r := f.run(t, "config", "add", "b1", "--server", "unix://"+f.one.Socket); r.code != 0 {
		t.Fatalf("add: %+v", r)
	}
	if r := f.run(t, "config", "add", "b2", "--server", "127.0.0.1:1"); r.code != ExitUsage || !strings.Contains(r.stderr, "TCP needs a certificate authority") {
		t.Fatalf("add TCP without certificates: %+v", r)
	}
	// The agent's own bladectl config (mutual TLS, hostname "localhost").
	if r := f.run(t, "config", "import", f.two.Issuer.BladectlConfigPath()); r.code != 0 || !strings.Contains(r.stdout, `blade "localhost" imported`) {
		t.Fatalf("import: %+v", r)
	}
	if r := f.run(t, "config", "use", "b1"); r.code != 0 {
		t.Fatalf("use: %+v", r)
	}
	r := f.run(t, "config", "list", "-o", "json")
	var got []configBladeView
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("config list -o json: %v\n%s", err, r.stdout)
	}
	wantList := []configBladeView{
		{Name: "local", Server: "unix:///run/kubeblade/agent.sock"},
		{Name: "b1", Server: "unix://" + f.one.Socket, Current: true},
		{Name: "localhost", Server: "localhost:" + port(f.two.TCPAddr)},
		{Name: "localhost-local", Server: "unix://" + f.two.Socket},
	}
	if diff := cmp.Diff(wantList, got); diff != "" {
		t.Errorf("config list (-want +got):\n%s", diff)
	}
	if fi, err := os.Stat(f.cfg); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("config file mode: %v %v", fi, err)
	}
	if r := f.run(t, "status", "-b", "localhost", "-o", "json"); r.code != 0 || !strings.Contains(r.stdout, `"backend": "simulated"`) {
		t.Fatalf("status over the imported mutual-TLS entry: %+v", r)
	}
	if r := f.run(t, "config", "remove", "localhost-local"); r.code != 0 {
		t.Fatalf("remove: %+v", r)
	}
	if r := f.run(t, "config", "use", "gone"); r.code != ExitFailed || !strings.Contains(r.stderr, `no blade named "gone"`) {
		t.Fatalf("use unknown: %+v", r)
	}
}

func TestKubectlPlugin(t *testing.T) {
	f := newFleet(t)
	r := f.runCtx(t, context.Background(), "/usr/local/bin/kubectl-blade", "--help")
	if r.code != 0 || !strings.Contains(r.stdout, "kubectl blade [command]") {
		t.Fatalf("help as kubectl-blade: %+v", r)
	}
	// Without --blade the plugin works through the Kubernetes API (see
	// kube_test.go), on nodes it must be told.
	r = f.runCtx(t, context.Background(), "kubectl-blade", "status")
	if r.code != ExitUsage || !strings.Contains(r.stderr, "which nodes?") {
		t.Fatalf("kubectl blade status: %+v", r)
	}
	// Named blades still work over gRPC.
	r = f.runCtx(t, context.Background(), "kubectl-blade", "status", "-b", "blade1")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "BLADE ") {
		t.Fatalf("kubectl blade status -b blade1: %+v", r)
	}
}

func TestCompletion(t *testing.T) {
	f := newFleet(t)
	r := f.run(t, "__complete", "status", "--blade", "")
	if r.code != 0 || !strings.Contains(r.stdout, "blade1\nblade2\ndown\n") {
		t.Fatalf("blade completion: %+v", r)
	}
	r = f.run(t, "__complete", "stealth", "")
	if !strings.Contains(r.stdout, "on\noff\nclear\n") {
		t.Fatalf("stealth completion: %+v", r)
	}
	if r := f.run(t, "completion", "bash"); r.code != 0 || !strings.Contains(r.stdout, "bash completion") {
		t.Fatalf("completion bash: exit %d", r.code)
	}
}
