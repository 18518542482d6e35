package bladectl

// The compatibility suite: bladectl against agents that serve only
// compute-blade-agent's API (internal/oldagenttest, the old agent's wire
// behaviour) and kubeblade agents, in one config and one --all call, with
// the config imported from the old bladectl's file and exported back to it.

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	yaml "go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/types/known/emptypb"
	clocktesting "k8s.io/utils/clock/testing"

	bladeapiv1 "github.com/kubeblade/kubeblade/api/bladeapi/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/clientconfig"
	"github.com/kubeblade/kubeblade/internal/core"
	"github.com/kubeblade/kubeblade/internal/grpcapi/grpcapitest"
	"github.com/kubeblade/kubeblade/internal/hardware"
	"github.com/kubeblade/kubeblade/internal/oldagenttest"
	"github.com/kubeblade/kubeblade/internal/testwait"
)

// mixedFleet is two kubeblade agents (socket, mutual TLS) and two old
// agents (socket, mutual TLS), all in one bladectl config.
type mixedFleet struct {
	dir, cfg, home string
	// oldConfig is the old bladectl's config the old agents' entries are in.
	oldConfig  string
	new1, new2 *grpcapitest.Blade
	old1, old2 *oldagenttest.Agent
	clock      *clocktesting.FakeClock
}

func newMixedFleet(t *testing.T) *mixedFleet {
	t.Helper()
	f := &mixedFleet{dir: t.TempDir(), clock: clocktesting.NewFakeClock(grpcapitest.Epoch)}
	f.home = filepath.Join(f.dir, "home")
	f.cfg = filepath.Join(f.home, ".config", "kubeblade", "bladectl.yaml")
	f.new1 = grpcapitest.Start(t, grpcapitest.Options{})
	f.new2 = grpcapitest.Start(t, grpcapitest.Options{TCP: true})
	f.old1 = oldagenttest.Start(t, oldagenttest.Options{})
	f.old2 = oldagenttest.Start(t, oldagenttest.Options{TCP: true, Authenticated: true})
	cfg := &clientconfig.Config{CurrentBlade: "new1"}
	cfg.Set("new1", f.new1.UnixBlade())
	cfg.Set("new2", f.new2.TLSBlade())
	if err := clientconfig.Save(f.cfg, cfg); err != nil {
		t.Fatal(err)
	}
	// What the old agents wrote for their users (the old bladectl's file).
	f.oldConfig = filepath.Join(f.home, ".config", "bladectl", "config.yaml")
	if err := oldagenttest.WriteBladectlConfig(f.oldConfig, "old2", f.old1.BladectlEntry("old1"), f.old2.BladectlEntry("old2")); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *mixedFleet) env(stdout, stderr interface{ Write([]byte) (int, error) }) Env {
	return Env{Stdout: stdout, Stderr: stderr, Argv0: "bladectl", Clock: f.clock,
		Getenv: func(k string) string {
			switch k {
			case clientconfig.EnvVar:
				return f.cfg
			case "HOME":
				return f.home
			}
			return ""
		}}
}

func (f *mixedFleet) run(t *testing.T, args ...string) run {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(context.Background(), args, f.env(&out, &errb))
	return run{code, out.String(), errb.String()}
}

// imported is a mixed fleet whose old blades came in through
// `bladectl config import` of the old bladectl's file.
func imported(t *testing.T) *mixedFleet {
	t.Helper()
	f := newMixedFleet(t)
	r := f.run(t, "config", "import")
	want := "blade \"old1\" imported (from compute-blade-agent's bladectl config)\nblade \"old2\" imported (from compute-blade-agent's bladectl config)\n"
	if r.code != ExitOK || r.stdout != want || r.stderr != "" {
		t.Fatalf("config import: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	return f
}

func TestCompatImportOldBladectlConfig(t *testing.T) {
	f := imported(t)
	r := f.run(t, "config", "list", "-o", "json")
	var got []configBladeView
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
	want := []configBladeView{
		{Name: "new1", Server: "unix://" + f.new1.Socket, Current: true},
		{Name: "new2", Server: f.new2.TCPAddr},
		// The old agent writes its socket as a bare path.
		{Name: "old1", Server: "unix://" + f.old1.Socket},
		{Name: "old2", Server: "localhost:" + port(f.old2.Addr)},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("config list (-want +got):\n%s", diff)
	}
	// An old file passed as the config itself says what to do with it.
	var out, errb bytes.Buffer
	env := f.env(&out, &errb)
	env.Getenv = func(k string) string {
		if k == clientconfig.EnvVar {
			return f.oldConfig
		}
		return ""
	}
	if code := Main(context.Background(), []string{"status"}, env); code != ExitFailed ||
		!strings.Contains(errb.String(), "is compute-blade-agent's bladectl config, not kubeblade's: add its blades to yours with 'bladectl config import") {
		t.Errorf("status with the old file as config: exit %d, %q", code, errb.String())
	}
}

// TestCompatEveryCommandMixedFleet drives every command with --all over
// two kubeblade and two old agents, checking what each agent did.
func TestCompatEveryCommandMixedFleet(t *testing.T) {
	f := imported(t)
	note := "note: old1, old2 serve compute-blade-agent's API only: their status has no LED colours, hardware facts or capabilities\n"
	newIdentify := func() bool { return f.new1.Agent.Status().Identify && f.new2.Agent.Status().Identify }
	oldState := func(a *oldagenttest.Agent) oldagenttest.State { return a.State() }
	steps := []struct {
		args   []string
		code   int
		stdout string // exact, unless empty
		stderr string // exact
		check  func(t *testing.T)
	}{
		{args: []string{"status", "--all"}, stderr: note, check: func(t *testing.T) {}},
		{args: []string{"identify", "--all"},
			stdout: "BLADE   RESULT\nnew1    identify started\nnew2    identify started\nold1    identify started\nold2    identify started\n",
			check: func(t *testing.T) {
				want(t, newIdentify(), "identify on the kubeblade agents")
				want(t, oldState(f.old1).Identify && oldState(f.old2).Identify, "identify on the old agents")
			}},
		{args: []string{"identify", "--off", "--all"},
			stdout: "BLADE   RESULT\nnew1    identify stopped\nnew2    identify stopped\nold1    identify stopped\nold2    identify stopped\n",
			check: func(t *testing.T) {
				want(t, !f.new1.Agent.Status().Identify && !f.new2.Agent.Status().Identify, "identify off on the kubeblade agents")
				want(t, !oldState(f.old1).Identify && !oldState(f.old2).Identify, "identify off on the old agents")
			}},
		{args: []string{"stealth", "on", "--all"},
			stdout: "BLADE   RESULT\nnew1    stealth on\nnew2    stealth on\nold1    stealth on\nold2    stealth on\n",
			check: func(t *testing.T) {
				want(t, f.new1.Sim.State().Stealth && f.new2.Sim.State().Stealth, "stealth on the kubeblade blades")
				want(t, oldState(f.old1).Stealth && oldState(f.old2).Stealth, "stealth on the old agents")
			}},
		{args: []string{"stealth", "off", "--all"},
			stdout: "BLADE   RESULT\nnew1    stealth off\nnew2    stealth off\nold1    stealth off\nold2    stealth off\n",
			check: func(t *testing.T) {
				want(t, !oldState(f.old1).Stealth && !oldState(f.old2).Stealth, "stealth off on the old agents")
			}},
		{args: []string{"stealth", "clear", "--all"}, code: ExitUnsupported,
			stdout: "BLADE   RESULT\nnew1    stealth back to the configured mode\nnew2    stealth back to the configured mode\n",
			stderr: "old1: stealth clear (back to the configured mode): this agent serves only compute-blade-agent's API, which cannot do that (install kubeblade there)\n" +
				"old2: stealth clear (back to the configured mode): this agent serves only compute-blade-agent's API, which cannot do that (install kubeblade there)\n" +
				"error: 2 of 4 blades failed\n"},
		{args: []string{"fan", "55", "--all"},
			stdout: "BLADE   RESULT\nnew1    fan at 55 %\nnew2    fan at 55 %\nold1    fan at 55 %\nold2    fan at 55 %\n",
			check: func(t *testing.T) {
				want(t, f.new1.Agent.Status().FanPercent == 55 && f.new2.Agent.Status().FanPercent == 55, "55 % on the kubeblade agents")
				for _, a := range []*oldagenttest.Agent{f.old1, f.old2} {
					if o := oldState(a).FanOverride; o == nil || *o != 55 {
						t.Errorf("old agent fan override %v, want 55", o)
					}
				}
			}},
		{args: []string{"fan", "auto", "--all"},
			stdout: "BLADE   RESULT\nnew1    fan follows the curve\nnew2    fan follows the curve\nold1    fan follows the curve\nold2    fan follows the curve\n",
			check: func(t *testing.T) {
				want(t, oldState(f.old1).FanOverride == nil && oldState(f.old2).FanOverride == nil, "the old agents back on their curve")
			}},
		{args: []string{"led", "top", "ff8000", "--all"}, code: ExitUnsupported,
			stdout: "BLADE   RESULT\nnew1    top LED #ff8000\nnew2    top LED #ff8000\n",
			stderr: "old1: LED colours: this agent serves only compute-blade-agent's API, which cannot do that (install kubeblade there)\n" +
				"old2: LED colours: this agent serves only compute-blade-agent's API, which cannot do that (install kubeblade there)\n" +
				"error: 2 of 4 blades failed\n",
			check: func(t *testing.T) {
				want(t, f.new1.Agent.Status().LEDOverride[hardware.LEDTop] != nil, "the override on a kubeblade agent")
			}},
		{args: []string{"led", "top", "clear", "--all"}, code: ExitUnsupported},
		{args: []string{"version", "--all"},
			stdout: "BLADE   RESULT\nnew1    v1.2.3-test\nnew2    v1.2.3-test\nold1    " + oldagenttest.DefaultVersion + "\nold2    " + oldagenttest.DefaultVersion + "\n"},
	}
	for _, s := range steps {
		t.Run(strings.Join(s.args, " "), func(t *testing.T) {
			r := f.run(t, s.args...)
			out := r.stdout
			if s.args[0] == "version" {
				// The first line is bladectl's own version.
				_, out, _ = strings.Cut(out, "\n")
			}
			if r.code != s.code || (s.stdout != "" && out != s.stdout) || (s.stderr != "" || s.code == ExitOK) && r.stderr != s.stderr {
				t.Fatalf("exit %d (want %d)\nstdout:\n%s\nstderr:\n%s", r.code, s.code, r.stdout, r.stderr)
			}
			if strings.Contains(r.stderr, "rpc error") || strings.Contains(r.stderr, "unknown service") {
				t.Errorf("raw error leaked: %s", r.stderr)
			}
			if s.check != nil {
				s.check(t)
			}
		})
	}
	// The old agents were only ever spoken to through their own API.
	for _, m := range []string{"GetStatus", "EmitEvent", "SetStealthMode", "SetFanSpeed", "SetFanSpeedAuto"} {
		if f.old1.Calls(m) == 0 {
			t.Errorf("old1 never got %s", m)
		}
	}
}

func TestCompatStatusOutput(t *testing.T) {
	f := imported(t)
	f.old2.SetPoEPlus(true)
	f.old2.SetTemperature(51.9)
	r := f.run(t, "status", "--all")
	if r.code != ExitOK {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
	golden(t, "status-mixed.table", r.stdout, &fleet{dir: f.dir})

	r = f.run(t, "status", "--all", "-o", "json")
	var got []result
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
	if len(got) != 4 || got[0].API != "" || got[1].API != "" || got[2].API != apiLegacy || got[3].API != apiLegacy {
		t.Fatalf("api fields: %+v", got)
	}
	temp, rpm := 51.0, 2412.0
	// 51.9 °C is reported as 51, and the fan follows the unrounded
	// reading: 40 + (80-40)/(55-45)*(51.9-45) = 67.6, truncated to 67.
	wantOld := &statusView{
		TemperatureCelsius: &temp, FanPercent: 67, FanMode: "auto", FanRPM: &rpm, PowerSource: "poe-802.3at",
		LEDs: map[string]ledView{}, AgentVersion: oldagenttest.DefaultVersion, Running: true,
	}
	if diff := cmp.Diff(wantOld, got[3].Status); diff != "" {
		t.Errorf("old2 status (-want +got):\n%s", diff)
	}
}

func TestCompatIdentifyWaitMixedFleet(t *testing.T) {
	f := imported(t)
	done := make(chan run, 1)
	go func() { done <- f.run(t, "identify", "--wait", "--all") }()
	// The old agent blocks WaitForIdentifyConfirm until a confirmation.
	testwait.Eventually(t, 20*time.Second, "both old agents waiting for a confirmation", func(context.Context) (bool, string) {
		return f.old1.Waiting() == 1 && f.old2.Waiting() == 1 && f.old1.State().Identify && f.old2.State().Identify, ""
	})
	f.new1.WaitFor(t, core.ReasonIdentifyStarted)
	f.new2.WaitFor(t, core.ReasonIdentifyStarted)
	select {
	case r := <-done:
		t.Fatalf("returned before any button was pressed: %+v", r)
	default:
	}
	for _, b := range []*grpcapitest.Blade{f.new1, f.new2} {
		b.Sim.PressButton()
	}
	f.old1.PressButton()
	f.old2.PressButton()
	r := <-done
	want := "BLADE   RESULT\nnew1    identify confirmed\nnew2    identify confirmed\nold1    identify confirmed\nold2    identify confirmed\n"
	if r.code != ExitOK || r.stdout != want || r.stderr != "" {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if f.old1.State().Identify || f.old2.State().Identify {
		t.Error("identify still on an old agent")
	}
}

func TestCompatFanAutoRefusedOnHotOldAgent(t *testing.T) {
	f := imported(t)
	// The old agent entered critical mode only when told to.
	c, closeConn, err := oldagenttest.Dial("unix://"+f.old1.Socket, "", "", "")
	if err != nil {
		t.Fatal(err)
	}
	defer closeConn()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.EmitEvent(ctx, &bladeapiv1.EmitEventRequest{Event: bladeapiv1.Event_CRITICAL}); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, 10*time.Second, "old1 critical", func(context.Context) (bool, string) { return f.old1.State().Critical, "" })

	// bladectl refuses this itself, and says so: the agent was never asked.
	r := f.run(t, "fan", "auto", "-b", "old1")
	if r.code != ExitFailed || r.stderr != "old1: fan auto not sent: the blade is in critical mode, and the old agent would let its fan leave 100 % while it is still hot (kubeblade's agent keeps it); bladectl refuses it\n" {
		t.Fatalf("fan auto: exit %d stderr %q", r.code, r.stderr)
	}
	if strings.Contains(r.stderr, "refused by the agent") {
		t.Errorf("bladectl's own refusal is worded as the agent's: %q", r.stderr)
	}
	if o := f.old1.State().FanOverride; o == nil || *o != 100 || f.old1.Calls("SetFanSpeedAuto") != 0 {
		t.Errorf("fan override %v, SetFanSpeedAuto calls %d", o, f.old1.Calls("SetFanSpeedAuto"))
	}
	// The old agent's own refusal comes through in its words.
	r = f.run(t, "fan", "30", "-b", "old1")
	if r.code != ExitFailed || r.stderr != "old1: unix://"+f.old1.Socket+": cannot set fan speed while the blade is in a critical state\n" {
		t.Fatalf("fan 30: exit %d stderr %q", r.code, r.stderr)
	}
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
	// onWrite, when set, sees everything written so far after each write.
	onWrite func(all string)
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	n, err := s.b.Write(p)
	all := s.b.String()
	s.mu.Unlock()
	if s.onWrite != nil {
		s.onWrite(all)
	}
	return n, err
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (s *syncBuffer) lines(blade, change string) int {
	n := 0
	for _, l := range strings.Split(s.String(), "\n") {
		f := strings.Fields(l)
		if len(f) >= 3 && f[1] == blade && f[2] == change {
			n++
		}
	}
	return n
}

// TestCompatMonitorPollsOldAgents: monitor streams the kubeblade agents
// and polls the old ones, once per --poll-interval of bladectl's clock.
func TestCompatMonitorPollsOldAgents(t *testing.T) {
	f := imported(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb syncBuffer
	done := make(chan int, 1)
	go func() { done <- Main(ctx, []string{"monitor", "--all", "--poll-interval", "5s"}, f.env(&out, &errb)) }()
	testwait.Eventually(t, 20*time.Second, "a first line from every blade", func(context.Context) (bool, string) {
		return out.lines("new1", "status") >= 1 && out.lines("new2", "status") >= 1 && out.lines("old1", "status") == 1 && out.lines("old2", "status") == 1, out.String()
	})
	// Between polls the old agents are not asked anything.
	calls := f.old1.Calls("GetStatus")
	if calls != 1 {
		t.Errorf("old1 asked %d times before the first interval passed", calls)
	}
	f.old1.PressButton()
	testwait.Eventually(t, 10*time.Second, "old1 in identify", func(context.Context) (bool, string) { return f.old1.State().Identify, "" })
	f.clock.Step(5 * time.Second)
	testwait.Eventually(t, 10*time.Second, "old1's identify seen by a poll", func(context.Context) (bool, string) {
		return out.lines("old1", "IdentifyStarted") == 1, out.String()
	})
	cancel()
	if code := <-done; code != ExitOK {
		t.Fatalf("monitor exit %d, stderr %q", code, errb.String())
	}
	if got := f.old1.Calls("GetStatus"); got != 2 {
		t.Errorf("old1 polled %d times over one interval, want 2", got)
	}
	wantNotes := "note: old1 serves compute-blade-agent's API only: no live events; its status is polled every 5s\n" +
		"note: old2 serves compute-blade-agent's API only: no live events; its status is polled every 5s\n"
	var notes []string
	for _, l := range strings.SplitAfter(errb.String(), "\n") {
		if strings.HasPrefix(l, "note:") {
			notes = append(notes, l)
		}
	}
	if len(notes) != 2 || !strings.Contains(wantNotes, notes[0]) || !strings.Contains(wantNotes, notes[1]) || notes[0] == notes[1] {
		t.Errorf("notes:\n%s", errb.String())
	}
}

// oldEntry is one blade of the old bladectl's file.
type oldEntry = oldagenttest.OldBladectlEntry

func readOldConfig(t *testing.T, raw []byte) (entries []oldEntry, current string) {
	t.Helper()
	var doc struct {
		Blades  []oldEntry `yaml:"blades"`
		Current string     `yaml:"current-blade"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("the old bladectl could not read the export: %v\n%s", err, raw)
	}
	return doc.Blades, doc.Current
}

// TestCompatExportForOldBladectl exports the mixed fleet in the old
// format and dials every entry the way the old bladectl does; it reaches
// every agent (kubeblade's serve the old API too), with mutual TLS where
// the blade had it. The export, imported again, is the same config.
func TestCompatExportForOldBladectl(t *testing.T) {
	f := imported(t)
	out := filepath.Join(f.dir, "export", "config.yaml")
	r := f.run(t, "config", "export", "--format", "compute-blade-agent", "--file", out)
	if r.code != ExitOK || r.stderr != "wrote "+out+"\n" {
		t.Fatalf("export: exit %d stderr %q", r.code, r.stderr)
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(out); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", fi.Mode())
	}
	entries, current := readOldConfig(t, raw)
	if len(entries) != 4 || current != "new1" {
		t.Fatalf("entries %d current %q\n%s", len(entries), current, raw)
	}
	for _, e := range entries {
		tcp := !strings.HasPrefix(e.Blade.Server, "unix://")
		if tls := e.Blade.Cert.ClientKeyData != ""; tls != tcp {
			t.Errorf("%s: server %s with TLS %v", e.Name, e.Blade.Server, tls)
		}
		c, closeConn, err := oldagenttest.Dial(e.Blade.Server, e.Blade.Cert.CertificateAuthorityData, e.Blade.Cert.ClientCertificateData, e.Blade.Cert.ClientKeyData)
		if err != nil {
			t.Fatalf("%s: %v", e.Name, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		st, err := c.GetStatus(ctx, &emptypb.Empty{})
		cancel()
		closeConn()
		if err != nil || st.GetVersion().GetVersion() == "" {
			t.Errorf("%s: the old bladectl's GetStatus: %v %v", e.Name, st, err)
		}
	}

	// Round trip: import the export into an empty config; exporting that
	// gives the same bytes, and its blades are the ones we had, with the
	// new agent's certificate files now inline.
	second := filepath.Join(f.dir, "second.yaml")
	var o2, e2 bytes.Buffer
	env := f.env(&o2, &e2)
	env.Getenv = func(k string) string {
		if k == clientconfig.EnvVar {
			return second
		}
		return ""
	}
	if code := Main(context.Background(), []string{"config", "import", out}, env); code != ExitOK {
		t.Fatalf("re-import: %d %s", code, e2.String())
	}
	// The second config also has the built-in local blade: export the four.
	o2.Reset()
	if code := Main(context.Background(), []string{"config", "export", "--format", "compute-blade-agent", "-b", "new1", "-b", "new2", "-b", "old1", "-b", "old2"}, env); code != ExitOK {
		t.Fatalf("re-export: %d %s", code, e2.String())
	}
	if diff := cmp.Diff(string(raw), o2.String()); diff != "" {
		t.Errorf("import → export is not stable (-first +second):\n%s", diff)
	}
}

// TestCompatPredecessorAgent: uptime-industries' agent, the old agent's
// predecessor, has no SetFanSpeedAuto and reports less.
func TestCompatPredecessorAgent(t *testing.T) {
	f := newMixedFleet(t)
	older := oldagenttest.Start(t, oldagenttest.Options{Predecessor: true})
	cfg, _, err := clientconfig.Load(f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Set("older", clientconfig.Blade{Server: "unix://" + older.Socket})
	if err := clientconfig.Save(f.cfg, cfg); err != nil {
		t.Fatal(err)
	}
	r := f.run(t, "fan", "auto", "-b", "older", "-b", "new1")
	if r.code != ExitUnsupported || r.stdout != "BLADE   RESULT\nnew1    fan follows the curve\n" ||
		r.stderr != "older: fan auto (this agent predates SetFanSpeedAuto): this agent serves only compute-blade-agent's API, which cannot do that (install kubeblade there)\nerror: 1 of 2 blades failed\n" {
		t.Fatalf("fan auto: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if r := f.run(t, "fan", "70", "-b", "older"); r.code != ExitOK || older.State().FanOverride == nil {
		t.Fatalf("fan 70: %+v", r)
	}
	r = f.run(t, "status", "-b", "older", "-o", "json")
	var got []result
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || len(got) != 1 {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
	if st := got[0].Status; st.FanMode != "unspecified" || st.AgentVersion != "" || *st.TemperatureCelsius != 42 {
		t.Errorf("status %+v", st)
	}
	if r := f.run(t, "version", "-b", "older"); r.code != ExitOK || !strings.HasSuffix(r.stdout, "older   unknown (the agent does not say)\n") {
		t.Errorf("version: %+v", r)
	}
}

// TestCompatBadInputWritesNothing: an old config that cannot be imported
// whole is not imported at all, and a failed export leaves no file.
func TestCompatBadInputWritesNothing(t *testing.T) {
	f := newMixedFleet(t)
	before, err := os.ReadFile(f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	good := f.old2.BladectlEntry("old2")
	broken := good
	broken.Name = "broken"
	broken.Blade.Cert.ClientCertificateData = "bm90IGEgY2VydGlmaWNhdGU=" // "not a certificate"
	plain := f.old2.BladectlEntry("plain")
	plain.Blade.Cert.CertificateAuthorityData, plain.Blade.Cert.ClientCertificateData, plain.Blade.Cert.ClientKeyData = "", "", ""
	bad := filepath.Join(f.dir, "bad.yaml")
	if err := oldagenttest.WriteBladectlConfig(bad, "old2", good, broken, plain); err != nil {
		t.Fatal(err)
	}
	r := f.run(t, "config", "import", bad)
	if r.code != ExitFailed || r.stdout != "" ||
		!strings.Contains(r.stderr, "error: nothing imported from compute-blade-agent's bladectl config:\n  "+bad+":") ||
		!strings.Contains(r.stderr, `blade "broken".blade.cert.client-certificate-data: client certificate and key do not load`) ||
		!strings.Contains(r.stderr, `blade "plain".blade.server: localhost:`+port(f.old2.Addr)+` has no cert block: the old bladectl reached it without TLS`) {
		t.Fatalf("import: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if after, _ := os.ReadFile(f.cfg); !bytes.Equal(before, after) {
		t.Errorf("the config changed:\n%s", after)
	}
	// Truncated: the YAML error with its line, nothing written.
	raw, _ := os.ReadFile(bad)
	if err := os.WriteFile(bad, raw[:len(raw)/3], 0o600); err != nil {
		t.Fatal(err)
	}
	if r := f.run(t, "config", "import", bad); r.code != ExitFailed || !strings.Contains(r.stderr, bad+":") {
		t.Fatalf("truncated import: %+v", r)
	}
	if after, _ := os.ReadFile(f.cfg); !bytes.Equal(before, after) {
		t.Errorf("the config changed:\n%s", after)
	}

	// A blade whose certificate files are gone cannot be exported.
	cfg, _, _ := clientconfig.Load(f.cfg)
	b, _ := cfg.Lookup("new2")
	b.ClientKey = filepath.Join(f.dir, "gone.key")
	cfg.Set("new2", b)
	if err := clientconfig.Save(f.cfg, cfg); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(f.dir, "export.yaml")
	r = f.run(t, "config", "export", "--format", "compute-blade-agent", "--file", out)
	if r.code != ExitFailed || !strings.Contains(r.stderr, `blade "new2": cannot export its mutual-TLS credentials`) {
		t.Fatalf("export: %+v", r)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("%s written", out)
	}
}

// TestCompatImportOldAgentWithoutTLS: an old agent in unix-socket mode and
// one in plaintext TCP mode each write their bladectl config without a
// cert block (oldagenttest.WriteBladectlConfig, the old agent's writer).
// Both are read as the old format: the socket's bare path becomes a unix://
// URL bladectl reaches the agent at, and the plaintext TCP blade is refused
// with the reason, changing nothing.
func TestCompatImportOldAgentWithoutTLS(t *testing.T) {
	f := newMixedFleet(t)
	unixAgent := oldagenttest.Start(t, oldagenttest.Options{})
	plainAgent := oldagenttest.Start(t, oldagenttest.Options{TCP: true})
	unixFile := filepath.Join(f.dir, "unix", "config.yaml")
	plainFile := filepath.Join(f.dir, "plain", "config.yaml")
	if err := oldagenttest.WriteBladectlConfig(unixFile, "pi-unix", unixAgent.BladectlEntry("pi-unix")); err != nil {
		t.Fatal(err)
	}
	if err := oldagenttest.WriteBladectlConfig(plainFile, "pi-plain", plainAgent.BladectlEntry("pi-plain")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{unixFile, plainFile} {
		if raw, _ := os.ReadFile(p); strings.Contains(string(raw), "cert") {
			t.Fatalf("%s has a cert block; the old agent writes none in this mode:\n%s", p, raw)
		}
	}

	r := f.run(t, "config", "import", unixFile)
	if r.code != ExitOK || r.stdout != "blade \"pi-unix\" imported (from compute-blade-agent's bladectl config)\n" || r.stderr != "" {
		t.Fatalf("import of the unix-mode file: %+v", r)
	}
	cfg, _, err := clientconfig.Load(f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := cfg.Lookup("pi-unix"); b.Server != "unix://"+unixAgent.Socket {
		t.Errorf("pi-unix server %q, want unix://%s", b.Server, unixAgent.Socket)
	}
	if r := f.run(t, "fan", "30", "-b", "pi-unix"); r.code != ExitOK {
		t.Errorf("fan 30 on the imported socket blade: %+v", r)
	}
	if o := unixAgent.State().FanOverride; o == nil || *o != 30 {
		t.Errorf("the old agent's fan override is %v, want 30", o)
	}

	before, err := os.ReadFile(f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	r = f.run(t, "config", "import", plainFile)
	if r.code != ExitFailed || r.stdout != "" ||
		!strings.Contains(r.stderr, "error: nothing imported from compute-blade-agent's bladectl config:\n  "+plainFile+":4: blade \"pi-plain\".blade.server: localhost:"+port(plainAgent.Addr)+" has no cert block: the old bladectl reached it without TLS, and kubeblade's bladectl speaks TCP only with mutual TLS") {
		t.Fatalf("import of the plaintext-TCP file: %+v", r)
	}
	if after, _ := os.ReadFile(f.cfg); !bytes.Equal(before, after) {
		t.Errorf("the refused import changed the config:\n%s", after)
	}
}

// TestCompatImportRefusesNameClash: a standalone agent writes
// bladectl.yaml (operator) and bladectl-viewer.yaml (viewer) naming the
// same blade. Importing the second after the first keeps the operator
// entry and says so; --replace replaces it, saying what it was.
func TestCompatImportRefusesNameClash(t *testing.T) {
	f := newMixedFleet(t)
	admin, viewer := f.new2.Issuer.BladectlConfigPath(), f.new2.Issuer.ViewerConfigPath()
	r := f.run(t, "config", "import", admin)
	if r.code != ExitOK || r.stdout != "blade \"localhost\" imported\nblade \"localhost-local\" imported\n" {
		t.Fatalf("import %s: %+v", admin, r)
	}
	before, err := os.ReadFile(f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	r = f.run(t, "config", "import", viewer)
	if r.code != ExitFailed || r.stdout != "" ||
		!strings.Contains(r.stderr, "error: nothing imported from "+viewer+":\n  blade \"localhost\" is already in "+f.cfg+" (server localhost:"+port(f.new2.TCPAddr)+", client certificate ") ||
		!strings.Contains(r.stderr, "O=kubeblade:operators): kept it; the imported one is server localhost:"+port(f.new2.TCPAddr)+", client certificate ") ||
		!strings.Contains(r.stderr, "O=kubeblade:viewers\npass --replace to replace what was kept\n") ||
		strings.Contains(r.stderr, "localhost-local") {
		t.Fatalf("import %s over the admin's: %+v", viewer, r)
	}
	if after, _ := os.ReadFile(f.cfg); !bytes.Equal(before, after) {
		t.Errorf("the refused import changed the config:\n%s", after)
	}
	// The operator's rights were kept.
	if r := f.run(t, "fan", "30", "-b", "localhost"); r.code != ExitOK {
		t.Fatalf("fan 30 with the kept operator entry: %+v", r)
	}

	r = f.run(t, "config", "import", "--replace", viewer)
	if r.code != ExitOK || !strings.HasPrefix(r.stdout, "blade \"localhost\" replaced (it was server localhost:"+port(f.new2.TCPAddr)+", client certificate ") ||
		!strings.Contains(r.stdout, "O=kubeblade:operators)\nblade \"localhost-local\" unchanged\n") {
		t.Fatalf("import --replace: %+v", r)
	}
	if r := f.run(t, "fan", "40", "-b", "localhost"); r.code != ExitFailed || !strings.Contains(r.stderr, "refused these credentials") {
		t.Errorf("fan 40 with the viewer's entry: %+v", r)
	}
}

// TestCompatExportRefusesToOverwrite: export --file leaves an existing
// file alone unless --force is given.
func TestCompatExportRefusesToOverwrite(t *testing.T) {
	f := imported(t)
	out := filepath.Join(f.dir, "existing.yaml")
	if err := os.WriteFile(out, []byte("mine\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{"kubeblade", "compute-blade-agent"} {
		r := f.run(t, "config", "export", "--format", format, "--file", out)
		if r.code != ExitFailed || r.stderr != "error: nothing exported: "+out+" exists; pass --force to replace it\n" {
			t.Errorf("%s: export over an existing file: %+v", format, r)
		}
		if raw, _ := os.ReadFile(out); string(raw) != "mine\n" {
			t.Fatalf("%s: the existing file was replaced:\n%s", format, raw)
		}
	}
	r := f.run(t, "config", "export", "--format", "compute-blade-agent", "--file", out, "--force")
	if r.code != ExitOK || r.stderr != "wrote "+out+"\n" {
		t.Fatalf("export --force: %+v", r)
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if entries, _ := readOldConfig(t, raw); len(entries) != 4 {
		t.Errorf("export --force wrote %d blades:\n%s", len(entries), raw)
	}
}
