package main

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kubeblade/kubeblade/internal/testbrowser"
	"github.com/kubeblade/kubeblade/internal/testenv"
	"github.com/kubeblade/kubeblade/internal/testreq"
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
	out := captureStdout(t, func() error {
		return run(options{bladectl: bladectl, blades: 60, period: 5 * time.Second, window: 3 * time.Second, probes: 2, writers: 4})
	})
	line := ""
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "dashboard-result ") {
			line = l
		}
	}
	if line == "" {
		t.Fatalf("no dashboard-result line in the output:\n%s", out)
	}
	for _, k := range []string{"blades=60 ", "fcp_ms=", "usable_ms=", "heap_mib=", "scroll_ms=", "server_cpu_s_per_min=", "sent_mib_per_min=", "led_p50_ms="} {
		if !strings.Contains(line, k) {
			t.Errorf("dashboard-result lacks %q: %s", k, line)
		}
	}
}

// captureStdout runs fn with os.Stdout sent to a pipe and returns what it
// printed; fn's error fails the test.
func captureStdout(t *testing.T, fn func() error) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stdout
	os.Stdout = w
	var buf bytes.Buffer
	done := make(chan struct{})
	go func() { _, _ = io.Copy(&buf, r); close(done) }()
	err = fn()
	os.Stdout = old
	w.Close()
	<-done
	if err != nil {
		t.Fatalf("%v; output:\n%s", err, buf.String())
	}
	return buf.String()
}
