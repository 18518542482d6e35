// Command kubeblade-agent drives one Compute Blade: fan, LEDs, button,
// stealth, critical temperature. It runs as a DaemonSet pod or as a systemd
// service; see docs/.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/kubeblade/kubeblade/internal/agentd"
	"github.com/kubeblade/kubeblade/internal/config"
	"github.com/kubeblade/kubeblade/internal/logging"
	"github.com/kubeblade/kubeblade/internal/version"
)

func main() {
	args := os.Args[1:]
	cmd := func(a []string) error { return run(a, os.Stdout) }
	if len(args) > 0 && args[0] == "migrate-config" {
		args = args[1:]
		cmd = func(a []string) error { return migrateConfig(a, os.Stdout, os.Stderr) }
	}
	if err := cmd(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		if !errors.Is(err, errReported) {
			fmt.Fprintln(os.Stderr, "kubeblade-agent:", err)
		} else {
			fmt.Fprintln(os.Stderr, "kubeblade-agent: nothing written")
		}
		os.Exit(1)
	}
}

// run is the agent's command line; --version prints to stdout.
func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("kubeblade-agent", flag.ContinueOnError)
	configPath := fs.String("config", config.DefaultPath, "config file (YAML); a missing file means defaults")
	stateDir := fs.String("state-dir", agentd.DefaultStateDir, "directory for state that survives restarts (keys, certificates)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	logFormat := fs.String("log-format", "text", "text or json")
	showVersion := fs.Bool("version", false, "print the version and exit")
	kube := fs.Bool("kubernetes", false, "report to Kubernetes and take orders from Node annotations (in-cluster config or --kubeconfig)")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig file for --kubernetes outside a cluster (default: in-cluster, then $KUBECONFIG)")
	nodeName := fs.String("node-name", os.Getenv("NODE_NAME"), "this blade's Node name for --kubernetes (default $NODE_NAME)")
	heartbeat := fs.Duration("blade-heartbeat", 0, "longest time between Blade status writes (default 5m)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *showVersion {
		fmt.Fprintln(stdout, version.Get().String())
		return nil
	}
	log, err := logging.New(os.Stderr, *logLevel, *logFormat)
	if err != nil {
		return err
	}
	// The gRPC audit log (who changed what on the blade) is written
	// whatever --log-level says.
	audit, err := logging.New(os.Stderr, "info", *logFormat)
	if err != nil {
		return err
	}

	var kopts *agentd.KubernetesOptions
	if *kube {
		if !agentd.KubernetesSupported {
			return errors.New("this build has no Kubernetes support (built with -tags nokube)")
		}
		if *nodeName == "" {
			return errors.New("--kubernetes needs the node name: set NODE_NAME (the DaemonSet does, from spec.nodeName) or --node-name")
		}
		kopts = &agentd.KubernetesOptions{Kubeconfig: *kubeconfig, NodeName: *nodeName, Heartbeat: *heartbeat}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	reload := make(chan struct{})
	go func() {
		for range hup {
			select {
			case reload <- struct{}{}:
			case <-ctx.Done():
				return
			}
		}
	}()

	return agentd.Run(ctx, agentd.Options{
		ConfigPath: *configPath,
		StateDir:   *stateDir,
		Environ:    os.Environ(),
		Logger:     log,
		Audit:      audit.With("log", "audit"),
		Reload:     reload,
		Kubernetes: kopts,
	})
}
