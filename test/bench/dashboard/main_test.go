package main

import (
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/kubeblade/kubeblade/internal/testbrowser"
	"github.com/kubeblade/kubeblade/internal/testenv"
	"github.com/kubeblade/kubeblade/internal/testreq"
	"github.com/kubeblade/kubeblade/test/bench/internal/smoke"
)

// TestDashboardSmoke runs the harness once at a small size with a short
// window: not a measurement (make bench-dashboard and docs/performance.md
// are), a check that it still runs to its result line against the rack
// view as it is, so it cannot rot between benchmark runs.
func TestDashboardSmoke(t *testing.T) {
	if _, err := testenv.AssetsDir(); err != nil {
		testreq.Unavailable(t, "kube-apiserver and etcd: %v", err)
	}
	if _, err := testbrowser.Path(); err != nil {
		testreq.Unavailable(t, "%v", err)
	}
	bladectl := filepath.Join(t.TempDir(), "bladectl")
	build := exec.Command("go", "build", "-o", bladectl, "./cmd/bladectl")
	build.Dir = testenv.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/bladectl: %v\n%s", err, out)
	}
	out := smoke.Stdout(t, func() error {
		return run(options{bladectl: bladectl, blades: 60, period: 5 * time.Second, window: 3 * time.Second, probes: 2, writers: 4})
	})
	smoke.ResultLine(t, out, "dashboard-result ", "blades=60 ", "fcp_ms=", "usable_ms=", "heap_mib=", "scroll_ms=", "server_cpu_s_per_min=", "sent_mib_per_min=", "led_p50_ms=")
}
