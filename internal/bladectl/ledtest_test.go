package bladectl

import (
	"bytes"
	"context"
	"io"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kubeblade/kubeblade/internal/clientconfig"
	"github.com/kubeblade/kubeblade/internal/grpcapi/grpcapitest"
	"github.com/kubeblade/kubeblade/internal/hardware"
)

// person answers led test's questions by looking at the simulated blade:
// "y" when the LED asked about shows the colour asked about, else "n"
// (or what lie says for that LED and colour). The question is the last
// line on stdout; the command prints it and then reads (on a goroutine of
// its own, which it waits for).
type person struct {
	t       *testing.T
	out     *syncBuffer
	blade   *grpcapitest.Blade
	lie     map[string]string // "edge green" → the answer given instead
	asked   []string
	pending []byte
	// At the question interrupt names, the person presses ^C: cancel is
	// called and the read, like a terminal's, does not return (until
	// release is closed, or a bound that only a hanging command reaches).
	interrupt string
	cancel    context.CancelFunc
	release   chan struct{}
}

var question = regexp.MustCompile(`(top|edge) LED (red|green|blue|white) \((#[0-9a-f]{6})\) - is the (top|edge) LED (\w+)\? \[y/n\] $`)

func (p *person) Read(b []byte) (int, error) {
	if len(p.pending) == 0 {
		m := question.FindStringSubmatch(p.out.String())
		if m == nil {
			return 0, io.EOF
		}
		p.out.Write([]byte("\n")) // the person presses return
		s := p.blade.Sim.State()
		shown := map[string]string{"top": s.TopLED, "edge": s.EdgeLED}[m[1]]
		key := m[1] + " " + m[2]
		p.asked = append(p.asked, key)
		if key == p.interrupt {
			p.cancel()
			select {
			case <-p.release:
			case <-time.After(20 * time.Second):
			}
			return 0, io.EOF
		}
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

func (f *fleet) runIn(t *testing.T, stdin func(out *syncBuffer) io.Reader, args ...string) run {
	t.Helper()
	return f.runInCtx(t, context.Background(), &syncBuffer{}, stdin, args...)
}

// runInCtx is runIn under ctx, with stdout written to out.
func (f *fleet) runInCtx(t *testing.T, ctx context.Context, out *syncBuffer, stdin func(out *syncBuffer) io.Reader, args ...string) run {
	t.Helper()
	var errb bytes.Buffer
	env := Env{Stdout: out, Stderr: &errb, Argv0: "bladectl",
		Getenv: func(k string) string {
			if k == clientconfig.EnvVar {
				return f.cfg
			}
			return ""
		}}
	if stdin != nil {
		env.Stdin = stdin(out)
	}
	code := Main(ctx, args, env)
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
		r := f.runIn(t, func(out *syncBuffer) io.Reader {
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
		r := f.runIn(t, func(out *syncBuffer) io.Reader {
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

	t.Run("a person over mutual TLS", func(t *testing.T) {
		reset(t)
		setOverride(t, f.two, hardware.LEDTop, "#102030")
		var p *person
		r := f.runIn(t, func(out *syncBuffer) io.Reader {
			p = &person{t: t, out: out, blade: f.two}
			return p
		}, "led", "test", "-b", "blade2")
		if r.code != ExitOK {
			t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
		}
		if d := cmp.Diff(allSteps, p.asked); d != "" {
			t.Errorf("questions (-want +got):\n%s", d)
		}
		for _, want := range []string{
			"blade2: hardware backend simulated; LEDs driven by simulated WS2812 pair\n",
			"blade2: edge LED blue (#0000ff) - is the edge LED blue? [y/n] \n",
			"blade2   8 colours confirmed on both LEDs\n",
		} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
			}
		}
		want := fleetLEDs{Blade1: start.Blade1, Blade2: leds{Top: "#102030"}}
		if d := cmp.Diff(want, f.overrides()); d != "" {
			t.Errorf("overrides not put back (-want +got):\n%s", d)
		}
	})

	// ^C cancels the command's context (cmd/bladectl: signal.NotifyContext)
	// while a question waits for an answer, or while --yes holds a colour:
	// the test stops there and the overrides from before are put back.
	for name, tc := range map[string]struct {
		args      []string
		interrupt string // the question ^C is pressed at
		at        string // or: what stdout shows when it is pressed
		asked     []string
	}{
		"at a question":           {args: []string{"led", "test"}, interrupt: "top blue", asked: []string{"top red", "top green", "top blue"}},
		"at a question, over TLS": {args: []string{"led", "test", "-b", "blade2"}, interrupt: "edge red", asked: allSteps[:5]},
		"while --yes holds":       {args: []string{"led", "test", "--yes", "--hold", "1h"}, at: "blade1: top LED red (#ff0000)\n"},
		"between --yes colours":   {args: []string{"led", "test", "--yes", "--hold", "0"}, at: "blade1: edge LED green (#00ff00)\n"},
		"while --yes holds, two blades": {args: []string{"led", "test", "--yes", "--hold", "1h", "-b", "blade1", "-b", "blade2"},
			at: "blade2: top LED red (#ff0000)\n"},
	} {
		t.Run("interrupted "+name, func(t *testing.T) {
			reset(t)
			setOverride(t, f.two, hardware.LEDTop, "#102030")
			want := fleetLEDs{Blade1: start.Blade1, Blade2: leds{Top: "#102030"}}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			out := &syncBuffer{}
			if tc.at != "" {
				out.onWrite = func(all string) {
					if strings.Contains(all, tc.at) {
						cancel()
					}
				}
			}
			var p *person
			var stdin func(*syncBuffer) io.Reader
			if tc.interrupt != "" {
				release := make(chan struct{})
				defer close(release)
				blade := f.one
				if slices.Contains(tc.args, "blade2") {
					blade = f.two
				}
				stdin = func(out *syncBuffer) io.Reader {
					p = &person{t: t, out: out, blade: blade, interrupt: tc.interrupt, cancel: cancel, release: release}
					return p
				}
			}
			r := f.runInCtx(t, ctx, out, stdin, tc.args...)
			if r.code != ExitFailed || !strings.Contains(r.stderr, ": interrupted\n") {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
			}
			if strings.Contains(r.stderr, "putting back") {
				t.Errorf("restoring failed:\n%s", r.stderr)
			}
			if p != nil {
				if d := cmp.Diff(tc.asked, p.asked); d != "" {
					t.Errorf("questions (-want +got):\n%s", d)
				}
			}
			if d := cmp.Diff(want, f.overrides()); d != "" {
				t.Errorf("overrides not put back (-want +got):\n%s", d)
			}
		})
	}

	t.Run("input ends", func(t *testing.T) {
		reset(t)
		r := f.runIn(t, func(*syncBuffer) io.Reader { return strings.NewReader("y\n") }, "led", "test")
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
			var in func(*syncBuffer) io.Reader
			if tc.stdin {
				in = func(*syncBuffer) io.Reader { return strings.NewReader("y\n") }
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
