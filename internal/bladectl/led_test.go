package bladectl

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kubeblade/kubeblade/internal/grpcapi/grpcapitest"
	"github.com/kubeblade/kubeblade/internal/hardware"
)

// leds is one blade's top and edge LED, each as "#rrggbb" ("" for no
// override).
type leds struct{ Top, Edge string }

// fleetLEDs is the LED state of the fleet's two live blades.
type fleetLEDs struct{ Blade1, Blade2 leds }

// overrides reads the overrides the agents hold (what GetStatus reports).
func (f *fleet) overrides() fleetLEDs {
	of := func(b *grpcapitest.Blade) leds {
		st := b.Agent.Status()
		hex := func(c *hardware.Color) string {
			if c == nil {
				return ""
			}
			return c.String()
		}
		return leds{hex(st.LEDOverride[hardware.LEDTop]), hex(st.LEDOverride[hardware.LEDEdge])}
	}
	return fleetLEDs{of(f.one), of(f.two)}
}

// lit reads the colours the simulated LEDs show.
func (f *fleet) lit() fleetLEDs {
	of := func(b *grpcapitest.Blade) leds {
		s := b.Sim.State()
		return leds{s.TopLED, s.EdgeLED}
	}
	return fleetLEDs{of(f.one), of(f.two)}
}

// setOverride sets (or with "" clears) an override on the agent directly,
// not through the command under test.
func setOverride(t *testing.T, b *grpcapitest.Blade, led hardware.LED, hex string) {
	t.Helper()
	var c *hardware.Color
	if hex != "" {
		col, err := parseLEDColor(hex)
		if err != nil {
			t.Fatal(err)
		}
		c = &hardware.Color{R: uint8(col.GetRed()), G: uint8(col.GetGreen()), B: uint8(col.GetBlue())}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.Agent.SetLEDOverride(ctx, led, c); err != nil {
		t.Fatal(err)
	}
}

func TestLED(t *testing.T) {
	f := newFleet(t)
	// Every case starts from blade1's edge LED fixed at #0000ff and no other
	// override, so clearing and "nothing changed" are both visible.
	start := fleetLEDs{Blade1: leds{Edge: "#0000ff"}}
	usage := "\nRun 'bladectl --help' for usage.\n"
	cases := []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr string // exact for usage errors, else a substring
		want   fleetLEDs
		check  func(t *testing.T, stdout string)
	}{
		{
			name:   "top on the current blade",
			args:   []string{"led", "top", "ff8000"},
			stdout: "BLADE    RESULT\nblade1   top LED #ff8000\n",
			want:   fleetLEDs{Blade1: leds{Top: "#ff8000", Edge: "#0000ff"}},
		},
		{
			name:   "edge with # and upper case on two blades",
			args:   []string{"led", "edge", "#00FF7f", "-b", "blade1", "-b", "blade2"},
			stdout: "BLADE    RESULT\nblade1   edge LED #00ff7f\nblade2   edge LED #00ff7f\n",
			want:   fleetLEDs{Blade1: leds{Edge: "#00ff7f"}, Blade2: leds{Edge: "#00ff7f"}},
		},
		{
			name:   "black edge on all blades, one down",
			args:   []string{"led", "edge", "000000", "--all"},
			code:   ExitFailed,
			stdout: "BLADE    RESULT\nblade1   edge LED #000000\nblade2   edge LED #000000\n",
			stderr: "down: cannot reach agent",
			want:   fleetLEDs{Blade1: leds{Edge: "#000000"}, Blade2: leds{Edge: "#000000"}},
		},
		{
			name:   "clear",
			args:   []string{"led", "edge", "clear"},
			stdout: "BLADE    RESULT\nblade1   edge LED back to the agent's colours\n",
			want:   fleetLEDs{},
		},
		{
			name:   "clear an LED without an override",
			args:   []string{"led", "top", "clear", "-b", "blade2"},
			stdout: "BLADE    RESULT\nblade2   top LED back to the agent's colours\n",
			want:   start,
		},
		{
			name: "json",
			args: []string{"led", "top", "123456", "-b", "blade2", "-o", "json"},
			want: fleetLEDs{Blade1: leds{Edge: "#0000ff"}, Blade2: leds{Top: "#123456"}},
			check: func(t *testing.T, stdout string) {
				var got []result
				if err := json.Unmarshal([]byte(stdout), &got); err != nil {
					t.Fatalf("%v\n%s", err, stdout)
				}
				if len(got) != 1 || got[0].Blade != "blade2" || got[0].Message != "top LED #123456" ||
					got[0].Status == nil || got[0].Status.LEDs["top"].Override != "#123456" {
					t.Errorf("json output:\n%s", stdout)
				}
			},
		},
		{
			name:   "colour name",
			args:   []string{"led", "top", "orange", "--all"},
			code:   ExitUsage,
			stderr: `error: led colour "orange": want RRGGBB in hex (e.g. ff8000 or '#ff8000'), or clear` + usage,
			want:   start,
		},
		{
			name:   "five digits",
			args:   []string{"led", "edge", "#12345", "--all"},
			code:   ExitUsage,
			stderr: `error: led colour "#12345": want RRGGBB in hex (e.g. ff8000 or '#ff8000'), or clear` + usage,
			want:   start,
		},
		{
			name:   "not hex",
			args:   []string{"led", "edge", "ff00zz"},
			code:   ExitUsage,
			stderr: `error: led colour "ff00zz": want RRGGBB in hex (e.g. ff8000 or '#ff8000'), or clear` + usage,
			want:   start,
		},
		{
			name:   "0x prefix",
			args:   []string{"led", "edge", "0x00ff00"},
			code:   ExitUsage,
			stderr: `error: led colour "0x00ff00": want RRGGBB in hex (e.g. ff8000 or '#ff8000'), or clear` + usage,
			want:   start,
		},
		{
			name:   "unknown LED",
			args:   []string{"led", "side", "ff0000", "--all"},
			code:   ExitUsage,
			stderr: `error: led "side": want top or edge` + usage,
			want:   start,
		},
		{
			name:   "unknown LED with clear",
			args:   []string{"led", "TOP", "clear"},
			code:   ExitUsage,
			stderr: `error: led "TOP": want top or edge` + usage,
			want:   start,
		},
		{
			name:   "missing colour",
			args:   []string{"led", "edge"},
			code:   ExitUsage,
			stderr: "error: usage: bladectl led top|edge COLOR|clear [flags]" + usage,
			want:   start,
		},
		{
			name:   "Kubernetes mode",
			args:   []string{"led", "edge", "clear", "--node", "blade1"},
			code:   ExitUsage,
			stderr: "error: LED colours cannot be set through the Kubernetes API (there is no Node annotation for them): use --blade or --all" + usage,
			want:   start,
		},
	}
	// What the LEDs show without any override.
	for _, b := range []*grpcapitest.Blade{f.one, f.two} {
		setOverride(t, b, hardware.LEDTop, "")
		setOverride(t, b, hardware.LEDEdge, "")
	}
	idle := f.lit()
	if idle.Blade1.Edge == "#000000" || idle.Blade1.Edge == "#0000ff" {
		t.Fatalf("the idle edge colour %s would hide the cases' changes", idle.Blade1.Edge)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, b := range []*grpcapitest.Blade{f.one, f.two} {
				setOverride(t, b, hardware.LEDTop, "")
				setOverride(t, b, hardware.LEDEdge, "")
			}
			setOverride(t, f.one, hardware.LEDEdge, start.Blade1.Edge)

			r := f.run(t, tc.args...)
			if r.code != tc.code || !strings.HasPrefix(r.stdout, tc.stdout) || (tc.stdout == "" && tc.check == nil && r.stdout != "") {
				t.Fatalf("exit %d (want %d)\nstdout:\n%s\nstderr:\n%s", r.code, tc.code, r.stdout, r.stderr)
			}
			if tc.code == ExitUsage {
				if r.stderr != tc.stderr {
					t.Errorf("stderr:\n%q\nwant:\n%q", r.stderr, tc.stderr)
				}
			} else if !strings.Contains(r.stderr, tc.stderr) || (tc.stderr == "" && r.stderr != "") {
				t.Errorf("stderr %q, want it to contain %q", r.stderr, tc.stderr)
			}
			if strings.Contains(r.stderr, "rpc error") {
				t.Errorf("raw error leaked: %s", r.stderr)
			}
			if tc.check != nil {
				tc.check(t, r.stdout)
			}
			if diff := cmp.Diff(tc.want, f.overrides()); diff != "" {
				t.Errorf("agent overrides (-want +got):\n%s", diff)
			}
			// The hardware shows the override, else what it shows idle.
			wantLit := idle
			for _, p := range []struct{ want, lit *string }{
				{&tc.want.Blade1.Top, &wantLit.Blade1.Top}, {&tc.want.Blade1.Edge, &wantLit.Blade1.Edge},
				{&tc.want.Blade2.Top, &wantLit.Blade2.Top}, {&tc.want.Blade2.Edge, &wantLit.Blade2.Edge},
			} {
				if *p.want != "" {
					*p.lit = *p.want
				}
			}
			if diff := cmp.Diff(wantLit, f.lit()); diff != "" {
				t.Errorf("simulated LEDs (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLEDCompletion(t *testing.T) {
	f := newFleet(t)
	// The test subcommand, then the LEDs.
	if r := f.run(t, "__complete", "led", ""); !strings.HasPrefix(r.stdout, "test\t") || !strings.Contains(r.stdout, "\ntop\nedge\n") {
		t.Errorf("LED completion: %+v", r)
	}
	if r := f.run(t, "__complete", "led", "top", ""); !strings.HasPrefix(r.stdout, "clear\n") {
		t.Errorf("colour completion: %+v", r)
	}
}
