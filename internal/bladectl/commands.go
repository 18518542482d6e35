package bladectl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	agentv1 "github.com/kubeblade/kubeblade/api/agent/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/version"
)

func newStatusCmd(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Show temperature, fan, power, state and LEDs",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.legacyNote = "their status has no LED colours, hardware facts or capabilities"
			return o.onBlades(cmd.Context(), false, printer.statusTable, func(ctx context.Context, blade string, c bladeClient) (result, error) {
				st, err := c.Status(ctx)
				return result{Status: viewStatus(st)}, err
			})
		},
	}
}

// onBlades is the whole of a command that asks every selected blade once:
// it runs call on each of them concurrently (forEach), prints the results
// as a table (with the given renderer) or as a JSON/YAML list, and turns
// the blades that failed into the exit status.
func (o *options) onBlades(ctx context.Context, openEnded bool, table func(printer, []result) error, call bladeCall) error {
	results, err := o.forEach(ctx, openEnded, call)
	if err != nil {
		return err
	}
	if err := o.printResults(results, table); err != nil {
		return err
	}
	return o.finish(results)
}

// printResults prints results as a table (with the given renderer) or as
// a JSON/YAML list.
func (o *options) printResults(results []result, table func(printer, []result) error) error {
	p := o.printer()
	if p.format == outTable {
		return table(p, results)
	}
	return p.encode(results)
}

// messageTable prints "BLADE RESULT" for commands that change something.
func messageTable(p printer, results []result) error {
	var rows [][]string
	for _, r := range results {
		if r.Error == "" {
			rows = append(rows, []string{r.Blade, r.Message})
		}
	}
	if len(rows) == 0 {
		return nil
	}
	return p.table("BLADE\tRESULT", rows)
}

func newMonitorCmd(o *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "monitor",
		Short: "Follow blades live: one line per change, as it happens",
		Long: `monitor prints the blades' status at once and then a line for every change
the agents report (button presses, identify, critical temperature, fan and
stealth changes, new readings) until interrupted, or until --timeout if given.
With -o json every line is a JSON object; with -o yaml a YAML document.

An agent that serves only compute-blade-agent's API sends no events: monitor
asks it for its status every --poll-interval and prints what changed.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.pollInterval < 100*time.Millisecond {
				return usagef("--poll-interval must be at least 100ms")
			}
			var mu sync.Mutex
			p := o.printer()
			if p.format == outTable {
				fmt.Fprintln(o.env.Stdout, monitorRow(monitorHeader))
			}
			results, err := o.forEach(cmd.Context(), true, func(ctx context.Context, blade string, c bladeClient) (result, error) {
				received := false
				err := c.Watch(ctx, func(m *agentv1.WatchStatusResponse) error {
					mu.Lock()
					defer mu.Unlock()
					if l, ok := c.(legacyReporter); ok && !received && l.LegacyAPI() {
						fmt.Fprintf(o.env.Stderr, "note: %s serves compute-blade-agent's API only: no live events; its status is polled every %s\n", blade, o.pollInterval)
					}
					received = true
					return o.printMonitor(p, blade, m)
				})
				// Interrupted, or --timeout ran out after the blade answered:
				// the run ended because the user asked it to. A blade that
				// never answered within --timeout is still a failure.
				if cmd.Context().Err() != nil || (received && o.timeoutSet && ended(ctx, err)) {
					err = nil
				}
				return result{}, err
			})
			if err != nil {
				return err
			}
			return o.finish(results)
		},
	}
	cmd.Flags().DurationVar(&o.pollInterval, "poll-interval", DefaultPollInterval, "how often to poll agents that serve only compute-blade-agent's API (no live events)")
	return cmd
}

func (o *options) printMonitor(p printer, name string, m *agentv1.WatchStatusResponse) error {
	at := o.env.Now()
	if t := m.GetEvent().GetTime(); t != nil {
		at = t.AsTime()
	} else if t := m.GetStatus().GetUpdatedAt(); t != nil {
		at = t.AsTime()
	}
	if p.format == outTable {
		_, err := fmt.Fprintln(o.env.Stdout, monitorRow(monitorLine(name, at, m)))
		return err
	}
	line := monitorEvent{Blade: name, Time: at.UTC().Format("2006-01-02T15:04:05Z07:00"), Status: viewStatus(m.GetStatus())}
	if ev := m.GetEvent(); ev != nil {
		line.Event = &eventView{Reason: ev.GetReason(), Message: ev.GetMessage(), Warning: ev.GetWarning(), Source: ev.GetSource()}
	}
	if p.format == outJSON {
		return jsonLine(o.env.Stdout, line)
	}
	fmt.Fprintln(o.env.Stdout, "---")
	return p.encode(line)
}

type monitorEvent struct {
	Blade  string      `json:"blade"`
	Time   string      `json:"time"`
	Event  *eventView  `json:"event,omitempty"`
	Status *statusView `json:"status"`
}

type eventView struct {
	Reason  string `json:"reason"`
	Message string `json:"message,omitempty"`
	Warning bool   `json:"warning,omitempty"`
	Source  string `json:"source,omitempty"`
}

func newIdentifyCmd(o *options) *cobra.Command {
	var wait, off bool
	cmd := &cobra.Command{
		Use:   "identify [--wait|--off]",
		Short: "Blink the edge LED so someone can find the blade",
		Long: `identify makes the blade's edge LED blink until someone presses its button.
--wait blocks until that confirmation; --off stops identify.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.onBlades(cmd.Context(), wait, messageTable, func(ctx context.Context, blade string, c bladeClient) (result, error) {
				st, err := c.SetIdentify(ctx, !off, wait)
				msg := "identify started"
				switch {
				case off:
					msg = "identify stopped"
				case wait:
					msg = "identify confirmed"
				}
				return result{Message: msg, Status: viewStatus(st)}, err
			})
		},
	}
	cmd.Flags().BoolVar(&wait, "wait", false, "wait until the button confirms")
	cmd.Flags().BoolVar(&off, "off", false, "stop identify")
	cmd.MarkFlagsMutuallyExclusive("wait", "off")
	return cmd
}

var stealthModes = map[string]agentv1.StealthMode{
	"on":    agentv1.StealthMode_STEALTH_MODE_ON,
	"off":   agentv1.StealthMode_STEALTH_MODE_OFF,
	"clear": agentv1.StealthMode_STEALTH_MODE_CONFIGURED,
}

func newStealthCmd(o *options) *cobra.Command {
	return &cobra.Command{
		Use:       "stealth on|off|clear",
		Short:     "Turn all LEDs dark (on), back on (off), or return to the configured mode (clear)",
		ValidArgs: []string{"on", "off", "clear"},
		Args:      exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			mode, ok := stealthModes[args[0]]
			if !ok {
				return usagef("stealth %q: want on, off or clear", args[0])
			}
			return o.onBlades(cmd.Context(), false, messageTable, func(ctx context.Context, blade string, c bladeClient) (result, error) {
				st, err := c.SetStealth(ctx, mode)
				msg := "stealth " + args[0]
				if args[0] == "clear" {
					msg = "stealth back to the configured mode"
				}
				return result{Message: msg, Status: viewStatus(st)}, err
			})
		},
	}
}

func newFanCmd(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "fan auto|PERCENT",
		Short: "Set a manual fan speed (0–100 %) or return the fan to its curve",
		Long: `fan PERCENT holds the fan at a fixed duty; fan auto returns it to the fan
curve. While the blade is in critical mode the fan stays at 100 % and a
manual speed is refused.`,
		ValidArgs: []string{"auto"},
		Args:      exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var percent *uint32
			msg := "fan follows the curve"
			if args[0] != "auto" {
				p, err := strconv.ParseUint(strings.TrimSuffix(args[0], "%"), 10, 32)
				if err != nil || p > 100 {
					return usagef("fan %q: want auto or a percent from 0 to 100", args[0])
				}
				v := uint32(p)
				percent = &v
				msg = fmt.Sprintf("fan at %d %%", v)
			}
			return o.onBlades(cmd.Context(), false, messageTable, func(ctx context.Context, blade string, c bladeClient) (result, error) {
				st, err := c.SetFan(ctx, percent)
				return result{Message: msg, Status: viewStatus(st)}, err
			})
		},
	}
}

// ledNames are the LEDs SetLEDColor can address.
var ledNames = map[string]agentv1.LED{
	"top":  agentv1.LED_LED_TOP,
	"edge": agentv1.LED_LED_EDGE,
}

// parseLEDColor reads a colour as RRGGBB in hex, with or without a leading
// '#': the form status prints, and without '#' it needs no shell quoting.
func parseLEDColor(s string) (*agentv1.Color, error) {
	h := strings.TrimPrefix(s, "#")
	v, err := strconv.ParseUint(h, 16, 32)
	if len(h) != 6 || err != nil {
		return nil, usagef("led colour %q: want RRGGBB in hex (e.g. ff8000 or '#ff8000'), or clear", s)
	}
	return &agentv1.Color{Red: uint32((v >> 16) & 0xff), Green: uint32((v >> 8) & 0xff), Blue: uint32(v & 0xff)}, nil
}

func newLEDCmd(o *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "led top|edge COLOR|clear",
		Short: "Fix the colour of the top or edge LED (hex RRGGBB), or clear the override",
		Long: `led LED COLOR fixes the colour the top or edge LED shows when the blade is
idle; led LED clear gives the LED back to the agent. COLOR is RRGGBB in hex,
with or without a leading '#' (quote it then: '#' starts a shell comment);
000000 keeps the LED dark. Critical temperature, identify and stealth still
take precedence over an override. The agent keeps the override until it is
cleared or the agent restarts.

led talks to agents over gRPC only (the current blade, --blade, --all): there
is no Node annotation for LED colours.`,
		Args: exactArgs(2),
		ValidArgsFunction: func(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
			switch len(args) {
			case 0:
				return []string{"top", "edge"}, cobra.ShellCompDirectiveNoFileComp
			case 1:
				return []string{"clear"}, cobra.ShellCompDirectiveNoFileComp
			}
			return nil, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			led, ok := ledNames[name]
			if !ok {
				return usagef("led %q: want top or edge", name)
			}
			var color *agentv1.Color // nil clears the override
			msg := name + " LED back to the agent's colours"
			if args[1] != "clear" {
				var err error
				if color, err = parseLEDColor(args[1]); err != nil {
					return err
				}
				msg = name + " LED " + hexColor(color)
			}
			if o.kubeMode() {
				return usageError{errLEDNoAnnotation}
			}
			return o.onBlades(cmd.Context(), false, messageTable, func(ctx context.Context, blade string, c bladeClient) (result, error) {
				st, err := c.SetLEDColor(ctx, led, color)
				return result{Message: msg, Status: viewStatus(st)}, err
			})
		},
	}
	cmd.AddCommand(newLEDTestCmd(o))
	return cmd
}

type versionView struct {
	Client versionInfo `json:"client"`
	Blades []result    `json:"blades,omitempty"`
}

type versionInfo struct {
	Version string `json:"version"`
	Commit  string `json:"commit,omitempty"`
	// Date is the build (or commit) time, RFC 3339.
	Date string `json:"date,omitempty"`
}

func newVersionCmd(o *options) *cobra.Command {
	var clientOnly bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Show bladectl's version and the agents'",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := version.Get()
			out := versionView{Client: versionInfo{Version: v.Version, Commit: v.Commit}}
			if !v.Date.IsZero() {
				out.Client.Date = v.Date.UTC().Format(time.RFC3339)
			}
			var results []result
			if !clientOnly {
				var err error
				results, err = o.forEach(cmd.Context(), false, func(ctx context.Context, blade string, c bladeClient) (result, error) {
					st, err := c.Status(ctx)
					v := st.GetVersion().GetVersion()
					if v == "" && err == nil {
						v = "unknown (the agent does not say)"
					}
					return result{Message: v, Status: viewStatus(st)}, err
				})
				if err != nil {
					return err
				}
				out.Blades = results
			}
			p := o.printer()
			if p.format != outTable {
				if err := p.encode(out); err != nil {
					return err
				}
				return o.finish(results)
			}
			fmt.Fprintf(o.env.Stdout, "bladectl %s\n", v)
			if len(results) > 0 {
				if err := messageTable(printer{format: outTable, out: o.env.Stdout}, results); err != nil {
					return err
				}
			}
			return o.finish(results)
		},
	}
	cmd.Flags().BoolVar(&clientOnly, "client", false, "only bladectl's own version")
	return cmd
}

func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("%s takes no arguments, got %q", cmd.CommandPath(), args)
	}
	return nil
}

func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usagef("usage: %s", cmd.UseLine())
		}
		return nil
	}
}

func jsonLine(w io.Writer, v any) error { return json.NewEncoder(w).Encode(v) }

// ended reports whether a watch stopped because its deadline passed; the
// server may notice the deadline first and say so in a status.
func ended(ctx context.Context, err error) bool {
	return errors.Is(ctx.Err(), context.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded
}
