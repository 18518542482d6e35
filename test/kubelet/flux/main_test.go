// Package fluxtest is the Flux end-to-end suite (`make e2e-flux`): Flux's own
// source-controller, kustomize-controller and helm-controller (built by
// hack/flux.sh from their Go modules) run as processes against the API
// server of the real-kubelet rig (package nodeenv) and reconcile kubeblade
// from a cluster repository laid out as docs/install.md's Flux section says,
// served by git http-backend over HTTPS, with the chart and the image
// pushed to a CNCF Distribution registry on loopback that the node's
// containerd pulls from.
//
// The steps of TestFlux share one node and run in order; a step whose
// prerequisite step failed fails at once, naming it.
package fluxtest

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kubeblade/kubeblade/internal/testreq"
	"github.com/kubeblade/kubeblade/test/kubelet/internal/nodeenv"
	"github.com/kubeblade/kubeblade/test/kubelet/internal/steps"
)

// Environment the suite reads (make e2e-flux sets all of them).
const (
	// EnvNodeAssets is hack/node-tools.sh's directory.
	EnvNodeAssets = "KUBEBLADE_NODE_ASSETS"
	// EnvK8sAssets is hack/k8s-tools.sh's directory.
	EnvK8sAssets = "KUBEBUILDER_ASSETS"
	// EnvImage is the OCI image layout `make image` writes (dist/image).
	EnvImage = "KUBEBLADE_IMAGE"
	// EnvFlux is hack/flux.sh's directory: the controllers and crds/.
	EnvFlux = "KUBEBLADE_FLUX"
	// EnvRegistry is the registry binary hack/registry.sh prints.
	EnvRegistry = "KUBEBLADE_REGISTRY"
	// EnvLogs is where a failed run's logs are copied (default
	// nodeenv.DefaultLogCopy).
	EnvLogs = "KUBEBLADE_KUBELET_LOGS"
)

var (
	node        *nodeenv.Node
	unavailable string
	startErr    error
	suiteCtx    context.Context
	repoRoot    string
	env         *fluxEnv
)

func TestMain(m *testing.M) {
	flag.Parse()
	ctrllog.SetLogger(logr.Discard())
	os.Exit(run(m))
}

func run(m *testing.M) (code int) {
	var cancel context.CancelFunc
	suiteCtx, cancel = signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	wd, _ := os.Getwd()
	repoRoot = filepath.Clean(filepath.Join(wd, "..", "..", ".."))
	defer func() { printSummary(&code) }()

	assets := nodeenv.Assets{K8sDir: os.Getenv(EnvK8sAssets), NodeDir: os.Getenv(EnvNodeAssets)}
	var missing []string
	for _, e := range []string{EnvK8sAssets, EnvNodeAssets, EnvImage, EnvFlux, EnvRegistry} {
		if os.Getenv(e) == "" {
			missing = append(missing, e+" is not set (make e2e-flux sets it)")
		}
	}
	if len(missing) == 0 {
		missing = nodeenv.Preflight(assets)
		for _, f := range []string{
			filepath.Join(os.Getenv(EnvImage), "index.json"),
			filepath.Join(os.Getenv(EnvFlux), "source-controller"),
			filepath.Join(os.Getenv(EnvFlux), "kustomize-controller"),
			filepath.Join(os.Getenv(EnvFlux), "helm-controller"),
			filepath.Join(os.Getenv(EnvFlux), "crds"),
			os.Getenv(EnvRegistry),
		} {
			if _, err := os.Stat(f); err != nil {
				missing = append(missing, "no "+f+" (make e2e-flux builds it)")
			}
		}
		if _, err := os.Stat(gitHTTPBackend); err != nil {
			missing = append(missing, "no "+gitHTTPBackend+" (apt-get install git)")
		}
	}
	if len(missing) > 0 {
		unavailable = strings.Join(missing, "; ")
		return m.Run()
	}

	if f := flag.Lookup("test.timeout"); f != nil {
		if d, err := time.ParseDuration(f.Value.String()); err == nil && d > 2*time.Minute {
			t := time.AfterFunc(d-time.Minute, func() {
				fmt.Fprintln(os.Stderr, "flux e2e: the test timeout is near; cleaning up the host and exiting")
				env.stop()
				if err := nodeenv.Cleanup(); err != nil {
					fmt.Fprintln(os.Stderr, "flux e2e: cleanup:", err)
				}
				os.Exit(1)
			})
			defer t.Stop()
		}
	}

	start := time.Now()
	logf := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "flux e2e: %s (%s)\n", fmt.Sprintf(format, args...), time.Since(start).Round(100*time.Millisecond))
	}
	node, startErr = nodeenv.Start(suiteCtx, nodeenv.Options{Assets: assets, Logf: logf})
	if startErr != nil {
		node = nil
		return m.Run()
	}
	env, startErr = startFlux(suiteCtx, logf)
	code = m.Run()
	if code != 0 {
		dir := os.Getenv(EnvLogs)
		if dir == "" {
			dir = nodeenv.DefaultLogCopy
		}
		if err := node.SaveLogs(dir); err == nil {
			logf("component, controller and pod logs of the failed run: %s", dir)
		}
	}
	env.stop()
	if err := node.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "flux e2e: host cleanup failed:", err)
		record("host cleanup", steps.Failed)
		return 1
	}
	record("host cleanup", steps.Passed)
	logf("host cleaned up")
	return code
}

var tally steps.Tally

func record(name string, r steps.Result) { tally.Record(name, r) }

func failedStep(name string) bool { return tally.NotPassed(name) }

func printSummary(code *int) {
	passed, failed, skipped := tally.Count(*code)
	fmt.Printf("flux-e2e: %d passed, %d failed, %d skipped\n", passed, failed, skipped)
}

// step runs one step as a subtest and records its result; a step whose
// prerequisite did not pass fails at once.
func step(t *testing.T, name string, after []string, fn func(t *testing.T)) {
	t.Helper()
	skipped := true
	ok := t.Run(name, func(t *testing.T) {
		if unavailable != "" {
			testreq.Unavailable(t, "the Flux suite needs: %s", unavailable)
		}
		if startErr != nil {
			t.Fatalf("the node or Flux did not start: %v", startErr)
		}
		for _, a := range after {
			if failedStep(a) {
				t.Fatalf("not run: it needs %q, which did not pass", a)
			}
		}
		if err := node.Exited(); err != nil {
			t.Fatalf("a node component is down: %v", err)
		}
		if err := env.exited(); err != nil {
			t.Fatalf("a Flux controller is down: %v", err)
		}
		fn(t)
		skipped = false
	})
	switch {
	case !ok:
		record(name, steps.Failed)
	case skipped:
		record(name, steps.Skipped)
	default:
		record(name, steps.Passed)
	}
}

// ctx is the test's context, ended early by an interrupt.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithCancel(t.Context())
	stop := context.AfterFunc(suiteCtx, cancel)
	t.Cleanup(func() { stop(); cancel() })
	return c
}
