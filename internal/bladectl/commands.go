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
			results, err := o.forEach(cmd.Context(), false, func(ctx context.Context, blade string, c bladeClient) (result, error) {
				st, err := c.Status(ctx)
				return result{Status: viewStatus(st)}, err
			})
			if err != nil {
				return err
			}
			if err := o.printResults(results, func(p printer) error { return p.statusTable(results) }); err != nil {
				return err
			}
			return o.finish(results)
		},
	}
}

// printResults prints results as a table (with the given renderer) or as
// a JSON/YAML list.
func (o *options) printResults(results []result, table func(printer) error) error {
	p := o.printer()
	if p.format == outTable {
		return table(p)
	}
	return p.encode(results)
}

// messageTable prints "BLADE RESULT" for commands that change something.
func messageTable(results []result) func(printer) error {
	return func(p printer) error {
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
}

func newMonitorCmd(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "monitor",
		Short: "Follow blades live: one line per change, as it happens",
		Long: `monitor prints the blades' status at once and then a line for every change
the agents report (button presses, identify, critical temperature, fan and
stealth changes, new readings) until interrupted, or until --timeout if given.
With -o json every line is a JSON object; with -o yaml a YAML document.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
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
			results, err := o.forEach(cmd.Context(), wait, func(ctx context.Context, blade string, c bladeClient) (result, error) {
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
			if err != nil {
				return err
			}
			if err := o.printResults(results, messageTable(results)); err != nil {
				return err
			}
			return o.finish(results)
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
			results, err := o.forEach(cmd.Context(), false, func(ctx context.Context, blade string, c bladeClient) (result, error) {
				st, err := c.SetStealth(ctx, mode)
				msg := "stealth " + args[0]
				if args[0] == "clear" {
					msg = "stealth back to the configured mode"
				}
				return result{Message: msg, Status: viewStatus(st)}, err
			})
			if err != nil {
				return err
			}
			if err := o.printResults(results, messageTable(results)); err != nil {
				return err
			}
			return o.finish(results)
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
			results, err := o.forEach(cmd.Context(), false, func(ctx context.Context, blade string, c bladeClient) (result, error) {
				st, err := c.SetFan(ctx, percent)
				return result{Message: msg, Status: viewStatus(st)}, err
			})
			if err != nil {
				return err
			}
			if err := o.printResults(results, messageTable(results)); err != nil {
				return err
			}
			return o.finish(results)
		},
	}
}

type versionView struct {
	Client versionInfo `json:"client"`
	Blades []result    `json:"blades,omitempty"`
}

type versionInfo struct {
	Version string `json:"version"`
	Commit  string `json:"commit,omitempty"`
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
			var results []result
			if !clientOnly {
				var err error
				results, err = o.forEach(cmd.Context(), false, func(ctx context.Context, blade string, c bladeClient) (result, error) {
					st, err := c.Status(ctx)
					return result{Message: st.GetVersion().GetVersion(), Status: viewStatus(st)}, err
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
				if err := messageTable(results)(printer{format: outTable, out: o.env.Stdout}); err != nil {
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
