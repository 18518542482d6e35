// Package kubelettest is the real-kubelet end-to-end suite: kubeblade's own
// image, installed with its Helm chart through the Helm SDK, running as pods
// under a real kubelet, containerd and runc on this machine (package
// nodeenv), with the simulated hardware backend. The node's containerd
// pulls the image from a CNCF Distribution registry on the node's bridge
// address (package noderegistry), as a cluster pulls it from GHCR or a
// registry on the LAN. `make e2e-kubelet` builds everything and runs it
// (root needed); docs/testing.md explains how to run and debug it.
//
// The steps of TestRealKubelet share one node and run in order; a step whose
// prerequisite step failed fails at once, naming it. The suite prints
// "N passed, M failed" over its steps and the host cleanup.
package kubelettest

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
	"github.com/kubeblade/kubeblade/test/kubelet/internal/noderegistry"
	"github.com/kubeblade/kubeblade/test/kubelet/internal/steps"
)

// Environment the suite reads (make e2e-kubelet sets all of them).
const (
	// EnvNodeAssets is hack/node-tools.sh's directory.
	EnvNodeAssets = "KUBEBLADE_NODE_ASSETS"
	// EnvK8sAssets is hack/k8s-tools.sh's directory (control plane, kubectl).
	EnvK8sAssets = "KUBEBUILDER_ASSETS"
	// EnvImage is the OCI image layout `make image` writes (dist/image).
	EnvImage = "KUBEBLADE_IMAGE"
	// EnvHelm is the helm CLI the documented commands run with.
	EnvHelm = "KUBEBLADE_HELM"
	// EnvRegistry is the registry binary hack/registry.sh prints: the
	// node pulls kubeblade's image from it.
	EnvRegistry = "KUBEBLADE_REGISTRY"
	// EnvLogs is where a failed run's logs are copied (default
	// nodeenv.DefaultLogCopy).
	EnvLogs = "KUBEBLADE_KUBELET_LOGS"
)

var (
	// node is the running node; nil when unavailable or startErr is set.
	node *nodeenv.Node
	// unavailable says why the suite cannot run here (a prerequisite).
	unavailable string
	// startErr is a node that should have started but did not: a failure.
	startErr error
	// suiteCtx ends on SIGINT/SIGTERM, so waits stop and cleanup runs.
	suiteCtx context.Context
	repoRoot string
	// reg is the registry (on the node's bridge address) the node pulls
	// kubeblade's image from (and, as a mirror, ghcr.io's).
	reg *noderegistry.Registry
	// image is the kubeblade image in reg: repository and tag.
	imageRepo, imageTag string
	helmBin             string
)

func TestMain(m *testing.M) {
	flag.Parse()
	// controller-runtime's client logs through this; the suite has its own output.
	ctrllog.SetLogger(logr.Discard())
	os.Exit(run(m))
}

func run(m *testing.M) (code int) {
	var cancel context.CancelFunc
	suiteCtx, cancel = signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	wd, _ := os.Getwd()
	repoRoot = filepath.Clean(filepath.Join(wd, "..", ".."))
	defer func() { printSummary(&code) }()

	assets := nodeenv.Assets{K8sDir: os.Getenv(EnvK8sAssets), NodeDir: os.Getenv(EnvNodeAssets)}
	helmBin = os.Getenv(EnvHelm)
	var missing []string
	for env, v := range map[string]string{EnvK8sAssets: assets.K8sDir, EnvNodeAssets: assets.NodeDir, EnvImage: os.Getenv(EnvImage), EnvHelm: helmBin, EnvRegistry: os.Getenv(EnvRegistry)} {
		if v == "" {
			missing = append(missing, env+" is not set (make e2e-kubelet sets it)")
		}
	}
	if len(missing) == 0 {
		missing = nodeenv.Preflight(assets)
		if _, err := os.Stat(filepath.Join(os.Getenv(EnvImage), "index.json")); err != nil {
			missing = append(missing, "no OCI image layout at "+os.Getenv(EnvImage)+" (make image)")
		}
		if _, err := os.Stat(os.Getenv(EnvRegistry)); err != nil {
			missing = append(missing, "no registry binary: "+err.Error()+" (hack/registry.sh builds it)")
		}
	}
	if len(missing) > 0 {
		unavailable = strings.Join(missing, "; ")
		return m.Run()
	}

	// A run stopped by go test's -timeout panics past every defer: clean
	// up a minute before that. (The next run would clean up too, from the
	// ledger, but the host should not wait for it.)
	if f := flag.Lookup("test.timeout"); f != nil {
		if d, err := time.ParseDuration(f.Value.String()); err == nil && d > 2*time.Minute {
			t := time.AfterFunc(d-time.Minute, func() {
				fmt.Fprintln(os.Stderr, "kubelet e2e: the test timeout is near; cleaning up the host and exiting")
				if err := nodeenv.Cleanup(); err != nil {
					fmt.Fprintln(os.Stderr, "kubelet e2e: cleanup:", err)
				}
				os.Exit(1)
			})
			defer t.Stop()
		}
	}
	// A second signal while cleaning up exits at once; the ledger lets the
	// next run finish the cleanup.
	go func() {
		<-suiteCtx.Done()
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
		<-sig
		fmt.Fprintln(os.Stderr, "kubelet e2e: interrupted twice; the next run cleans up what is left")
		os.Exit(1)
	}()

	start := time.Now()
	logf := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "kubelet e2e: %s (%s)\n", fmt.Sprintf(format, args...), time.Since(start).Round(100*time.Millisecond))
	}
	node, startErr = nodeenv.Start(suiteCtx, nodeenv.Options{Assets: assets, Logf: logf})
	if startErr != nil {
		node = nil
		return m.Run()
	}
	regDir, err := os.MkdirTemp("", "kubeblade-kubelet-e2e-registry-")
	if err != nil {
		startErr = err
	} else {
		defer os.RemoveAll(regDir)
		if startErr = publishImage(suiteCtx, regDir, os.Getenv(EnvImage)); startErr != nil {
			logf("publishing the image to the registry failed: %v", startErr)
		} else {
			logf("pushed %s:%s to the registry the node pulls from", imageRepo, imageTag)
		}
	}
	code = m.Run()
	if code != 0 {
		dir := os.Getenv(EnvLogs)
		if dir == "" {
			dir = nodeenv.DefaultLogCopy
		}
		if err := node.SaveLogs(dir); err == nil {
			logf("component and pod logs of the failed run: %s", dir)
		}
	}
	if err := node.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "kubelet e2e: host cleanup failed:", err)
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
	if skipped > 0 {
		fmt.Printf("kubelet-e2e: %d passed, %d failed, %d skipped\n", passed, failed, skipped)
		return
	}
	fmt.Printf("kubelet-e2e: %d passed, %d failed\n", passed, failed)
}

// need ends the test when the node is not there: a skip (or, under make
// test, a failure) for a missing prerequisite, a failure for a node that
// did not start.
func need(t *testing.T) {
	t.Helper()
	if unavailable != "" {
		testreq.Unavailable(t, "the real-kubelet suite needs: %s", unavailable)
	}
	if startErr != nil {
		t.Fatalf("the node did not start: %v", startErr)
	}
}

// step runs one step of the suite as a subtest and records its result. A
// step whose prerequisite step did not pass fails at once.
func step(t *testing.T, name string, after []string, fn func(t *testing.T)) {
	t.Helper()
	skipped := true
	ok := t.Run(name, func(t *testing.T) {
		need(t)
		for _, a := range after {
			if failedStep(a) {
				t.Fatalf("not run: it needs %q, which did not pass", a)
			}
		}
		if err := node.Exited(); err != nil {
			t.Fatalf("a node component is down: %v", err)
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
