// Package bladectl is the bladectl command line: status, control and live
// monitoring of one or many blades over the agent's gRPC API, with a
// kubeconfig-style file of named blades, or through the Kubernetes API
// (Node annotations and Blade objects). cmd/bladectl only calls Main.
package bladectl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/utils/clock"

	"github.com/kubeblade/kubeblade/internal/clientconfig"
	"github.com/kubeblade/kubeblade/internal/migrate"
)

// Exit codes.
const (
	ExitOK = 0
	// ExitFailed: a blade failed or the command could not run.
	ExitFailed = 1
	// ExitUsage: the command line itself was wrong.
	ExitUsage = 2
	// ExitUnsupported: a blade runs the old compute-blade-agent, whose API
	// cannot do what was asked, and no blade failed otherwise.
	ExitUnsupported = 3
)

// DefaultTimeout bounds each call unless --timeout says otherwise.
const DefaultTimeout = 10 * time.Second

// Env is the process environment Main runs in.
type Env struct {
	Stdout, Stderr io.Writer
	// Stdin answers questions (led test); nil means there is nobody to ask.
	Stdin  io.Reader
	Getenv func(string) string
	// Argv0 is the program name; "kubectl-blade" selects the kubectl
	// plugin's naming.
	Argv0 string
	// Now is the wall clock for monitor lines without a timestamp.
	Now func() time.Time
	// Clock paces monitor's polling of old agents (default the real clock).
	Clock clock.WithTicker
}

// options are the global flags.
type options struct {
	env        Env
	configPath string
	blades     []string
	all        bool
	output     string
	timeout    time.Duration
	kube       kubeOptions
	// timeoutSet is true when --timeout was given: open-ended commands
	// (monitor, identify --wait) then end after it too.
	timeoutSet bool
	// pollInterval paces monitor against old agents.
	pollInterval time.Duration
	// legacyNote, when a command sets it, is said once after the results
	// if some blades answered through the old API: what they lack.
	legacyNote string
}

// usageError marks errors in the command line, which exit with ExitUsage.
type usageError struct{ error }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// failedError reports that some blades failed; details are already printed.
type failedError struct {
	failed, total int
	// code is the exit code: ExitUnsupported when every failure was a
	// request the old API cannot carry.
	code int
}

func (e failedError) Error() string {
	return fmt.Sprintf("%d of %d blades failed", e.failed, e.total)
}

// Main runs bladectl with args (without the program name) and returns the
// exit code. Errors are printed as one plain sentence, never a stack trace.
func Main(ctx context.Context, args []string, env Env) int {
	if env.Getenv == nil {
		env.Getenv = func(string) string { return "" }
	}
	if env.Now == nil {
		env.Now = time.Now
	}
	if env.Clock == nil {
		env.Clock = clock.RealClock{}
	}
	o := &options{env: env, pollInterval: DefaultPollInterval}
	root := newRoot(o)
	root.SetArgs(args)
	root.SetOut(env.Stdout)
	root.SetErr(env.Stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	var fe failedError
	if errors.As(err, &fe) {
		if fe.total > 1 {
			fmt.Fprintf(env.Stderr, "error: %s\n", fe)
		}
		return fe.code
	}
	fmt.Fprintf(env.Stderr, "error: %s\n", err)
	var ue usageError
	if errors.As(err, &ue) || isCobraUsageError(err) {
		fmt.Fprintf(env.Stderr, "Run '%s --help' for usage.\n", root.CommandPath())
		return ExitUsage
	}
	return ExitFailed
}

// isCobraUsageError recognises cobra's and pflag's own argument errors.
func isCobraUsageError(err error) bool {
	msg := err.Error()
	for _, s := range []string{"unknown command", "unknown flag", "unknown shorthand flag", "flag needs an argument",
		"invalid argument", "accepts ", "requires at least", "requires at most", "if any flags in the group"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

func newRoot(o *options) *cobra.Command {
	name := "bladectl"
	root := &cobra.Command{
		Use:   name,
		Short: "Control and watch Compute Blades running kubeblade",
		Long: `bladectl talks to kubeblade agents over gRPC: on this blade through the
agent's unix socket (the default, no setup needed), or to other blades over
mutual TLS with the blades named in ~/.config/kubeblade/bladectl.yaml
($BLADECTL_CONFIG). An agent with remote access enabled writes a ready
config to /var/lib/kubeblade/bladectl.yaml; add its blades with
'bladectl config import'.

Agents that run the older compute-blade-agent are spoken to through its
API, which cannot do everything: bladectl says so, and exits 3 when that is
the only reason a command failed.

With --node NAME (or --all-nodes, or --selector), and by default as
'kubectl blade', it works through the Kubernetes API instead: control by
Node annotations, status from Blade objects ('bladectl get blades').`,
		SilenceErrors: true,
		SilenceUsage:  true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			o.timeoutSet = cmd.Flags().Changed("timeout")
			if !slices.Contains(outputs, o.output) && !wideAllowed(cmd, o.output) {
				return usagef("--output %q: want one of %s", o.output, strings.Join(outputs, ", "))
			}
			if o.timeout <= 0 {
				return usagef("--timeout must be positive")
			}
			if o.all && len(o.blades) > 0 {
				return usagef("use either --blade or --all")
			}
			return nil
		},
	}
	if o.kubectlPlugin() {
		// As a kubectl plugin: help and completion show "kubectl blade".
		root.Use = "kubectl-blade"
		root.Annotations = map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl blade"}
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })

	f := root.PersistentFlags()
	f.StringVar(&o.configPath, "config", "", "bladectl config file (default $"+clientconfig.EnvVar+" or ~/.config/kubeblade/bladectl.yaml)")
	f.StringArrayVarP(&o.blades, "blade", "b", nil, "blade to act on, from the config file (repeatable; default: the current blade)")
	f.BoolVarP(&o.all, "all", "A", false, "act on every blade in the config file")
	f.StringVarP(&o.output, "output", "o", outTable, "output format: "+strings.Join(outputs, "|"))
	f.DurationVar(&o.timeout, "timeout", DefaultTimeout, "how long to wait for each blade (monitor and identify --wait: total run time, unlimited by default)")
	_ = root.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(outputs, cobra.ShellCompDirectiveNoFileComp))
	_ = root.RegisterFlagCompletionFunc("blade", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		cfg, _, err := clientconfig.Load(o.resolvedConfigPath())
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		return cfg.Names(), cobra.ShellCompDirectiveNoFileComp
	})

	root.AddCommand(newStatusCmd(o), newMonitorCmd(o), newIdentifyCmd(o), newStealthCmd(o), newFanCmd(o), newLEDCmd(o),
		newVersionCmd(o), newConfigCmd(o), newGetCmd(o), newDoctorCmd(o))
	root.AddCommand(newDashboardCmd(o))
	o.addKubeFlags(root)
	o.acceptNodeArgs(root)
	return root
}

func (o *options) resolvedConfigPath() string {
	if o.configPath != "" {
		return o.configPath
	}
	return clientconfig.DefaultPath(o.env.Getenv)
}

func (o *options) kubectlPlugin() bool { return filepath.Base(o.env.Argv0) == "kubectl-blade" }

func (o *options) printer() printer { return printer{format: o.output, out: o.env.Stdout} }

// target is one blade a command runs against.
type target struct {
	name string
	conn connector
}

// targets resolves --blade / --all / the current blade, or in the
// Kubernetes mode the nodes.
func (o *options) targets(ctx context.Context) ([]target, error) {
	// The Kubernetes mode is chosen by --node and friends, or by running as
	// the kubectl plugin without naming blades; it plugs in as another
	// connector.
	if o.kubeMode() {
		return o.nodeTargets(ctx)
	}
	path := o.resolvedConfigPath()
	cfg, exists, err := clientconfig.Load(path)
	if err != nil {
		if raw, rerr := os.ReadFile(path); rerr == nil && migrate.IsOldBladectlConfig(raw) {
			return nil, fmt.Errorf("%s is compute-blade-agent's bladectl config, not kubeblade's: add its blades to yours with 'bladectl config import %s'", path, path)
		}
		return nil, err
	}
	conn := grpcConnector{cfg: cfg, baseDir: configBaseDir(path), poll: o.pollInterval, clock: o.env.Clock}
	var names []string
	switch {
	case o.all:
		names = cfg.Names()
		if len(names) == 0 {
			return nil, fmt.Errorf("%s lists no blades; add one with 'bladectl config add'", path)
		}
	case len(o.blades) > 0:
		for _, n := range o.blades {
			if _, ok := cfg.Lookup(n); !ok {
				return nil, usagef("no blade named %q in %s (known: %s)", n, describePath(path, exists), strings.Join(cfg.Names(), ", "))
			}
			if !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	default:
		if cfg.CurrentBlade == "" {
			return nil, usagef("no current blade in %s: pick one with 'bladectl config use NAME', or use --blade / --all", path)
		}
		if _, ok := cfg.Lookup(cfg.CurrentBlade); !ok {
			return nil, fmt.Errorf("current blade %q is not listed in %s", cfg.CurrentBlade, path)
		}
		names = []string{cfg.CurrentBlade}
	}
	out := make([]target, len(names))
	for i, n := range names {
		out[i] = target{name: n, conn: conn}
	}
	return out, nil
}

func describePath(path string, exists bool) string {
	if exists {
		return path
	}
	return "the built-in config (" + path + " does not exist)"
}

// callContext bounds one call: --timeout always for ordinary calls; for
// open-ended ones only when --timeout was given.
func (o *options) callContext(ctx context.Context, openEnded bool) (context.Context, context.CancelFunc) {
	if openEnded && !o.timeoutSet {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, o.timeout)
}

// bladeCall is a command's work on one blade: it fills in Message and
// Status; Blade and Error are set by runOne.
type bladeCall func(ctx context.Context, blade string, c bladeClient) (result, error)

// forEach runs fn on every target concurrently and returns the results in
// target order. Failures are explained in plain words.
func (o *options) forEach(ctx context.Context, openEnded bool, fn bladeCall) ([]result, error) {
	ts, err := o.targets(ctx)
	if err != nil {
		return nil, err
	}
	results := make([]result, len(ts))
	var wg sync.WaitGroup
	for i, t := range ts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = o.runOne(ctx, t, openEnded, fn)
		}()
	}
	wg.Wait()
	return results, nil
}

func (o *options) runOne(ctx context.Context, t target, openEnded bool, fn bladeCall) result {
	c, err := t.conn.Connect(t.name)
	if err != nil {
		return result{Blade: t.name, Error: err.Error()}
	}
	defer c.Close()
	cctx, cancel := o.callContext(ctx, openEnded)
	defer cancel()
	r, err := fn(cctx, t.name, c)
	r.Blade = t.name
	if l, ok := c.(legacyReporter); ok && l.LegacyAPI() {
		r.API = apiLegacy
	}
	if err != nil {
		r.Unsupported = errors.As(err, new(unsupportedError))
		r.Error = explain(c.Address(), o.timeout, err).Error()
	}
	return r
}

// finish prints failures to stderr, says once what blades on the old API
// lack, and turns the failures into the exit status.
func (o *options) finish(results []result) error {
	failed, unsupported := 0, 0
	var legacy []string
	for _, r := range results {
		if r.Error != "" {
			failed++
			if r.Unsupported {
				unsupported++
			}
			fmt.Fprintf(o.env.Stderr, "%s: %s\n", r.Blade, r.Error)
		} else if r.API == apiLegacy {
			legacy = append(legacy, r.Blade)
		}
	}
	if len(legacy) > 0 && o.legacyNote != "" {
		fmt.Fprintf(o.env.Stderr, "note: %s %s compute-blade-agent's API only: %s\n", strings.Join(legacy, ", "), serves(len(legacy)), o.legacyNote)
	}
	if failed > 0 {
		code := ExitFailed
		if unsupported == failed {
			code = ExitUnsupported
		}
		return failedError{failed: failed, total: len(results), code: code}
	}
	return nil
}

func serves(n int) string {
	if n == 1 {
		return "serves"
	}
	return "serve"
}
