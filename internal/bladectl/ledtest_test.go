package bladectl

import (
	"bytes"
	"context"
	"io"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kubeblade/kubeblade/internal/clientconfig"
	"github.com/kubeblade/kubeblade/internal/grpcapi/grpcapitest"
	"github.com/kubeblade/kubeblade/internal/hardware"
)

// person answers led test's questions by looking at the simulated blade:
// "y" when the LED asked about shows the colour asked about, else "n"
// (or what lie says for that LED and colour). The question is the last
// line on stdout; the command prints it and then reads, on one goroutine.
type person struct {
	t       *testing.T
	out     *bytes.Buffer
	blade   *grpcapitest.Blade
	lie     map[string]string // "edge green" → the answer given instead
	asked   []string
	pending []byte
}

var question = regexp.MustCompile(`(top|edge) LED (red|green|blue|white) \((#[0-9a-f]{6})\) - is the (top|edge) LED (\w+)\? \[y/n\] $`)

func (p *person) Read(b []byte) (int, error) {
	if len(p.pending) == 0 {
		m := question.FindStringSubmatch(p.out.String())
		if m == nil {
			return 0, io.EOF
		}
		p.out.WriteString("\n") // the person presses return
		s := p.blade.Sim.State()
		shown := map[string]string{"top": s.TopLED, "edge": s.EdgeLED}[m[1]]
		key := m[1] + " " + m[2]
		p.asked = append(p.asked, key)
		answer := "n"
		if shown == m[3] && m[1] == m[4] && m[2] == m[5] {
			answer = "y"
		}
		if a, ok := p.lie[key]; ok {
			answer = a
		}
		p.pending = []byte(answer + "\n")
	}
	n := copy(b, p.pending)
	p.pending = p.pending[n:]
	return n, nil
}

func (f *fleet) runIn(t *testing.T, stdin func(out *bytes.Buffer) io.Reader, args ...string) run {
	t.Helper()
	var out, errb bytes.Buffer
	env := Env{Stdout: &out, Stderr: &errb, Argv0: "bladectl",
		Getenv: func(k string) string {
			if k == clientconfig.EnvVar {
				return f.cfg
			}
			return ""
		}}
	if stdin != nil {
		env.Stdin = stdin(&out)
	}
	code := Main(context.Background(), args, env)
	return run{code, out.String(), errb.String()}
}

var allSteps = []string{"top red", "top green", "top blue", "top white", "edge red", "edge green", "edge blue", "edge white"}

func TestLEDTest(t *testing.T) {
	f := newFleet(t)
	start := fleetLEDs{Blade1: leds{Edge: "#0000ff"}}
	reset := func(t *testing.T) {
		for _, b := range []*grpcapitest.Blade{f.one, f.two} {
			setOverride(t, b, hardware.LEDTop, "")
			setOverride(t, b, hardware.LEDEdge, "")
		}
		setOverride(t, f.one, hardware.LEDEdge, start.Blade1.Edge)
	}

	t.Run("a person confirms every colour", func(t *testing.T) {
		reset(t)
		var p *person
		r := f.runIn(t, func(out *bytes.Buffer) io.Reader {
			p = &person{t: t, out: out, blade: f.one}
			return p
		}, "led", "test")
		if r.code != ExitOK {
			t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
		}
		if d := cmp.Diff(allSteps, p.asked); d != "" {
			t.Errorf("questions (-want +got):\n%s", d)
		}
		for _, want := range []string{
			"blade1: hardware backend simulated; LEDs driven by simulated WS2812 pair\n",
			"blade1: top LED red (#ff0000) - is the top LED red? [y/n] \n",
			"blade1: edge LED white (#ffffff) - is the edge LED white? [y/n] \n",
			"blade1   8 colours confirmed on both LEDs\n",
		} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
			}
		}
		if d := cmp.Diff(start, f.overrides()); d != "" {
			t.Errorf("overrides not put back (-want +got):\n%s", d)
		}
	})

	t.Run("a colour not seen fails, naming it, and still restores", func(t *testing.T) {
		reset(t)
		r := f.runIn(t, func(out *bytes.Buffer) io.Reader {
			return &person{t: t, out: out, blade: f.one, lie: map[string]string{"edge green": "no"}}
		}, "led", "test")
		if r.code != ExitFailed || !strings.Contains(r.stderr, "blade1: not seen as asked: edge green") {
			t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
		}
		if d := cmp.Diff(start, f.overrides()); d != "" {
			t.Errorf("overrides not put back (-want +got):\n%s", d)
		}
	})

	t.Run("--yes on two blades, one over mutual TLS", func(t *testing.T) {
		reset(t)
		r := f.runIn(t, nil, "led", "test", "--yes", "--hold", "0", "-b", "blade1", "-b", "blade2")
		if r.code != ExitOK {
			t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
		}
		for _, want := range []string{
			"blade2: edge LED blue (#0000ff)\n",
			"blade1   8 colours shown on both LEDs (not confirmed: --yes)\n",
			"blade2   8 colours shown on both LEDs (not confirmed: --yes)\n",
		} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
			}
		}
		if d := cmp.Diff(start, f.overrides()); d != "" {
			t.Errorf("overrides not put back (-want +got):\n%s", d)
		}
	})

	t.Run("input ends", func(t *testing.T) {
		reset(t)
		r := f.runIn(t, func(*bytes.Buffer) io.Reader { return strings.NewReader("y\n") }, "led", "test")
		if r.code != ExitFailed || !strings.Contains(r.stderr, "no answer (input closed): run with --yes in scripts") {
			t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
		}
		if d := cmp.Diff(start, f.overrides()); d != "" {
			t.Errorf("overrides not put back (-want +got):\n%s", d)
		}
	})

	t.Run("stealth on: refused, nothing changed", func(t *testing.T) {
		reset(t)
		if r := f.run(t, "stealth", "on"); r.code != ExitOK {
			t.Fatal(r)
		}
		defer f.run(t, "stealth", "clear")
		r := f.runIn(t, nil, "led", "test", "--yes", "--hold", "0")
		if r.code != ExitFailed || !strings.Contains(r.stderr, "stealth mode keeps the LEDs dark: run 'bladectl stealth off' first") {
			t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
		}
		if d := cmp.Diff(start, f.overrides()); d != "" {
			t.Errorf("overrides changed (-want +got):\n%s", d)
		}
	})

	usage := "\nRun 'bladectl --help' for usage.\n"
	for name, tc := range map[string]struct {
		args   []string
		stdin  bool
		stderr string
	}{
		"interactive on all blades": {args: []string{"led", "test", "--all"}, stdin: true,
			stderr: "error: led test asks about one blade at a time: name it with --blade, or use --yes" + usage},
		"nobody to ask": {args: []string{"led", "test"},
			stderr: "error: led test asks questions and has no input: use --yes" + usage},
		"Kubernetes mode": {args: []string{"led", "test", "--yes", "--node", "blade1"},
			stderr: "error: LED colours cannot be set through the Kubernetes API (there is no Node annotation for them): use --blade or --all" + usage},
		"negative hold": {args: []string{"led", "test", "--yes", "--hold", "-1s"},
			stderr: "error: --hold must not be negative" + usage},
		"extra argument": {args: []string{"led", "test", "top"}, stdin: true,
			stderr: "error: bladectl led test takes no arguments, got [\"top\"]" + usage},
	} {
		t.Run(name, func(t *testing.T) {
			reset(t)
			var in func(*bytes.Buffer) io.Reader
			if tc.stdin {
				in = func(*bytes.Buffer) io.Reader { return strings.NewReader("y\n") }
			}
			r := f.runIn(t, in, tc.args...)
			if r.code != ExitUsage || r.stderr != tc.stderr {
				t.Fatalf("exit %d, stderr %q, want %q", r.code, r.stderr, tc.stderr)
			}
			if d := cmp.Diff(start, f.overrides()); d != "" {
				t.Errorf("overrides changed (-want +got):\n%s", d)
			}
		})
	}
}

// TestLEDTestWithoutLEDs: a backend without an LED driver is told apart
// from a failed test.
func TestLEDTestWithoutLEDs(t *testing.T) {
	f := &fleet{dir: t.TempDir()}
	f.one = grpcapitest.Start(t, grpcapitest.Options{Missing: []hardware.Capability{hardware.CapLEDs}})
	cfg := &clientconfig.Config{CurrentBlade: "blade1"}
	cfg.Set("blade1", f.one.UnixBlade())
	f.cfg = f.dir + "/bladectl.yaml"
	if err := clientconfig.Save(f.cfg, cfg); err != nil {
		t.Fatal(err)
	}
	r := f.runIn(t, nil, "led", "test", "--yes", "--hold", "0")
	if r.code != ExitFailed || !strings.Contains(r.stderr, "blade1: no LEDs to test: the simulated backend has no LED driver") {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
}
