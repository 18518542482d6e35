package bladectl

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	agentv1 "github.com/kubeblade/kubeblade/api/agent/v1alpha1"
)

// ledTestColours are shown on each LED in turn: one channel at a time, so a
// swapped byte order shows as the wrong colour, then all three.
var ledTestColours = []struct {
	name  string
	color *agentv1.Color
}{
	{"red", &agentv1.Color{Red: 255}},
	{"green", &agentv1.Color{Green: 255}},
	{"blue", &agentv1.Color{Blue: 255}},
	{"white", &agentv1.Color{Red: 255, Green: 255, Blue: 255}},
}

// ledTestOrder is the order the LEDs are tested in.
var ledTestOrder = []string{"top", "edge"}

type ledTest struct {
	o    *options
	yes  bool
	hold time.Duration
	in   *bufio.Reader
	out  io.Writer
}

func newLEDTestCmd(o *options) *cobra.Command {
	t := &ledTest{o: o}
	cmd := &cobra.Command{
		Use:   "test",
		Short: "Show red, green, blue and white on the top LED, then the edge LED, and ask whether each is right",
		Long: `led test is the self-test a person runs at a blade to confirm its LED
driver shows the right colours on the right LED (the kubeblade-leds driver,
the register backends and /dev/ledsN are all new; none has been seen on
every kind of blade). It names the hardware backend and the device driving
the LEDs, then shows red, green, blue and white on the top LED and then on
the edge LED, asking after each one whether that LED shows that colour.
Afterwards it puts back the overrides the LEDs had before (see 'bladectl
led'). A "no" makes the command fail at the end, naming what was wrong.

With --yes nothing is asked (for scripts): each colour is held for --hold
and only what the agent reports is checked. Interactive runs test one blade
at a time (--blade); --yes runs may name several.

The blade must be idle: stealth, identify and critical temperature take
precedence over LED overrides, so the test refuses to run while one is on.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.kubeMode() {
				return usageError{errLEDNoAnnotation}
			}
			if t.hold < 0 {
				return usagef("--hold must not be negative")
			}
			if !t.yes {
				if o.all || len(o.blades) > 1 {
					return usagef("led test asks about one blade at a time: name it with --blade, or use --yes")
				}
				if o.env.Stdin == nil {
					return usagef("led test asks questions and has no input: use --yes")
				}
				t.in = bufio.NewReader(o.env.Stdin)
			}
			out := o.env.Stdout
			if o.output != outTable {
				// The questions and the colours go to stderr, so stdout
				// stays a clean JSON/YAML result.
				out = o.env.Stderr
			}
			// --yes runs blades at once (a rack shows each colour
			// together); their lines must not mix.
			t.out = &lockedWriter{w: out}
			return o.onBlades(cmd.Context(), true, messageTable, t.run)
		},
	}
	cmd.Flags().BoolVarP(&t.yes, "yes", "y", false, "ask nothing: show each colour for --hold and check only what the agent reports")
	cmd.Flags().DurationVar(&t.hold, "hold", 2*time.Second, "with --yes, how long each colour is shown")
	return cmd
}

// rpc bounds one call by --timeout inside the open-ended test.
func (t *ledTest) rpc(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, t.o.timeout)
}

// ledDriver is what the backend says drives the LEDs: the "leds: ..."
// part of the hardware detail.
func ledDriver(hw *agentv1.HardwareInfo) string {
	for _, part := range strings.Split(hw.GetDetail(), "; ") {
		if d, ok := strings.CutPrefix(part, "leds: "); ok {
			return d
		}
	}
	return "not named by the " + hw.GetBackend() + " backend"
}

// missingLEDs is the backend's reason for having no LEDs.
func missingLEDs(hw *agentv1.HardwareInfo) string {
	detail := hw.GetDetail()
	if i := strings.Index(detail, "leds: "); i >= 0 && strings.Contains(detail[:i], "missing ") {
		return strings.TrimSuffix(detail[i+len("leds: "):], ";")
	}
	return "the " + hw.GetBackend() + " backend has no LED driver"
}

func (t *ledTest) run(ctx context.Context, blade string, c bladeClient) (result, error) {
	rctx, cancel := t.rpc(ctx)
	st, err := c.Status(rctx)
	cancel()
	if err != nil {
		return result{}, err
	}
	hw := st.GetHardware()
	if !slices.Contains(hw.GetCapabilities(), "leds") {
		return result{Status: viewStatus(st)}, fmt.Errorf("no LEDs to test: %s", missingLEDs(hw))
	}
	switch {
	case st.GetStealth():
		return result{Status: viewStatus(st)}, errors.New("stealth mode keeps the LEDs dark: run 'bladectl stealth off' first")
	case st.GetIdentify():
		return result{Status: viewStatus(st)}, errors.New("identify is blinking the edge LED: run 'bladectl identify --off' first")
	case st.GetCritical():
		return result{Status: viewStatus(st)}, errors.New("the blade is at critical temperature and its LEDs show that: test when it has cooled down")
	}
	fmt.Fprintf(t.out, "%s: hardware backend %s; LEDs driven by %s\n", blade, hw.GetBackend(), ledDriver(hw))

	// Put back what the LEDs had, whatever happens: even when the person
	// presses ^C (the context is then cancelled, so restore without it).
	before := map[string]*agentv1.Color{}
	for _, l := range st.GetLeds() {
		before[enumName(l.GetLed().String(), "LED_")] = l.Override
	}
	defer func() {
		rctx, cancel := t.rpc(context.WithoutCancel(ctx))
		defer cancel()
		for _, name := range ledTestOrder {
			if _, err := c.SetLEDColor(rctx, ledNames[name], before[name]); err != nil {
				fmt.Fprintf(t.o.env.Stderr, "%s: putting back the %s LED: %v\n", blade, name, err)
			}
		}
	}()

	var wrong []string
	shown := 0
	for _, name := range ledTestOrder {
		for _, col := range ledTestColours {
			rctx, cancel := t.rpc(ctx)
			st, err := c.SetLEDColor(rctx, ledNames[name], col.color)
			cancel()
			if err != nil {
				return result{}, err
			}
			if got := shownColour(st, name); got != hexColor(col.color) {
				return result{Status: viewStatus(st)}, fmt.Errorf("asked for %s on the %s LED, the agent shows %s", col.name, name, got)
			}
			shown++
			fmt.Fprintf(t.out, "%s: %s LED %s (%s)", blade, name, col.name, hexColor(col.color))
			if t.yes {
				fmt.Fprintln(t.out)
				if err := sleepCtx(ctx, t.hold); err != nil {
					return result{}, err
				}
				continue
			}
			ok, err := t.ask(ctx, fmt.Sprintf(" - is the %s LED %s? [y/n] ", name, col.name))
			if err != nil {
				return result{}, err
			}
			if !ok {
				wrong = append(wrong, name+" "+col.name)
			}
		}
	}
	if len(wrong) > 0 {
		return result{}, fmt.Errorf("not seen as asked: %s (a wrong colour is a byte-order problem: kubeblade-leds order=grb; nothing on one LED is wiring or a driver for fewer LEDs)", strings.Join(wrong, ", "))
	}
	msg := fmt.Sprintf("%d colours confirmed on both LEDs", shown)
	if t.yes {
		msg = fmt.Sprintf("%d colours shown on both LEDs (not confirmed: --yes)", shown)
	}
	return result{Message: msg}, nil
}

// shownColour is what the agent reports an LED showing.
func shownColour(st *agentv1.Status, name string) string {
	for _, l := range st.GetLeds() {
		if enumName(l.GetLed().String(), "LED_") == name {
			if l.GetPattern() != agentv1.LEDPattern_LED_PATTERN_STEADY {
				return strings.ToLower(enumName(l.GetPattern().String(), "LED_PATTERN_"))
			}
			return hexColor(l.GetColor())
		}
	}
	return "nothing"
}

// ask reads yes or no; anything else asks again. No input left is an
// error: a script must say --yes.
func (t *ledTest) ask(ctx context.Context, q string) (bool, error) {
	for {
		fmt.Fprint(t.out, q)
		line, err := t.readLine(ctx)
		if ctx.Err() != nil {
			fmt.Fprintln(t.out)
			return false, ctx.Err()
		}
		switch strings.ToLower(strings.TrimSpace(line)) {
		case "y", "yes":
			return true, nil
		case "n", "no":
			return false, nil
		}
		if err != nil {
			fmt.Fprintln(t.out)
			return false, errors.New("no answer (input closed): run with --yes in scripts")
		}
		q = "please answer y or n: "
	}
}

// readLine reads one answer, or gives up when ctx ends: a read from a
// terminal does not return on ^C (the signal only cancels ctx), and the
// person who pressed it expects the LEDs back at once, not after return.
// The read is left behind on its goroutine; only the process's exit ends
// it, and there is no next question to take its line.
func (t *ledTest) readLine(ctx context.Context) (string, error) {
	type answer struct {
		line string
		err  error
	}
	ch := make(chan answer, 1)
	go func() {
		line, err := t.in.ReadString('\n')
		ch <- answer{line, err}
	}()
	select {
	case a := <-ch:
		return a.line, a.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-tm.C:
		return nil
	}
}
