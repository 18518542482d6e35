// Command localcluster runs a whole kubeblade cluster on this machine and
// keeps it up until interrupted: etcd, kube-apiserver,
// kube-controller-manager and kube-scheduler built from source, three
// fake-kubelet blade Nodes (in the rack view's chassis demo-rack), the CRDs and a BladeConfig, kubeblade-operator,
// and one kubeblade-agent process per blade on the simulated backend.
// hack/demo-cluster.sh (make demo) drives it; see internal/localcluster.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/kubeblade/kubeblade/internal/localcluster"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "localcluster:", err)
		os.Exit(1)
	}
}

func run() error {
	dir := flag.String("dir", "", "directory for the kubeconfig, logs and blade state (default: a new temporary one, removed on exit)")
	nodes := flag.String("nodes", strings.Join(localcluster.DefaultNodes, ","), "comma-separated blade Node names")
	chassis := flag.String("chassis", localcluster.DemoChassis, "chassis the rack view draws the Nodes in, in slots 1, 2, … (kubeblade.io/chassis, kubeblade.io/slot); empty for none")
	bladeConfig := flag.String("bladeconfig", "hack/demo/bladeconfig.yaml", "BladeConfig manifest to apply")
	binDir := flag.String("bin", "bin", "directory with kubeblade-agent and kubeblade-operator")
	envFile := flag.String("env-file", "", "write shell variables (KUBECONFIG, directories) here once the cluster is ready")
	timeout := flag.Duration("timeout", 3*time.Minute, "how long the rollout may take")
	fanPeers := flag.String("fan-peers", "blade-1:blade-2", "comma-separated pairs a:b of Nodes sharing a standard fan unit (kubeblade.io/fan-peer); empty for none")
	heartbeat := flag.Duration("agent-heartbeat", 10*time.Second, "the agents' Blade heartbeat (--blade-heartbeat); a Blade is stale after three: short, so the demo shows it within a minute")
	flag.Parse()

	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	bin, err := filepath.Abs(*binDir)
	if err != nil {
		return err
	}
	start := time.Now()
	c, err := localcluster.Start(ctx, localcluster.Options{
		Dir: *dir, BinDir: bin, Nodes: strings.Split(*nodes, ","), Logger: log,
	})
	if err != nil {
		return err
	}
	defer func() {
		log.Info("stopping: agents, operator, controllers, control plane")
		if err := c.Stop(); err != nil {
			log.Error("stopping", "err", err)
		}
	}()
	if err := c.ApplyFile(ctx, *bladeConfig); err != nil {
		return err
	}
	for _, pair := range strings.Split(*fanPeers, ",") {
		if pair == "" {
			continue
		}
		a, b, ok := strings.Cut(pair, ":")
		if !ok {
			return fmt.Errorf("-fan-peers %q: want a:b pairs", pair)
		}
		if err := c.DeclareFanPeers(ctx, a, b); err != nil {
			return err
		}
	}
	if *chassis != "" {
		if err := c.PlaceInChassis(ctx, *chassis); err != nil {
			return err
		}
	}
	if _, err := c.StartOperator(localcluster.OperatorOptions{}); err != nil {
		return err
	}
	for _, n := range c.Nodes {
		if _, err := c.StartAgent(ctx, n, "--blade-heartbeat="+heartbeat.String()); err != nil {
			return err
		}
	}
	r, err := c.WaitRolledOut(ctx, "default", *timeout)
	if err != nil {
		fmt.Fprintln(os.Stderr, c.Logs(15))
		return err
	}
	log.Info("rolled out", "took", time.Since(start).Round(100*time.Millisecond), "status", r.String())
	if *envFile != "" {
		env := fmt.Sprintf("KUBECONFIG=%q\nDEMO_DIR=%q\nK8S_BIN=%q\nNODES=%q\n",
			c.Kubeconfig, c.Dir, c.K8sDir, strings.Join(c.Nodes, " "))
		if err := os.WriteFile(*envFile, []byte(env), 0o644); err != nil {
			return err
		}
	}
	fmt.Println("ready")
	<-ctx.Done()
	return nil
}
