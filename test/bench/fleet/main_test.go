package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kubeblade/kubeblade/internal/testenv"
	"github.com/kubeblade/kubeblade/internal/testreq"
)

// TestFleetSmoke runs the harness once at a small size, started at a rate,
// with a short steady window: not a measurement (make bench and the scale
// runs in docs/performance.md are), a check that the harness still runs to
// its result line, so it cannot rot between benchmark runs.
func TestFleetSmoke(t *testing.T) {
	if _, err := testenv.AssetsDir(); err != nil {
		testreq.Unavailable(t, "kube-apiserver and etcd: %v", err)
	}
	out := captureStdout(t, func() error {
		return run(6, 0, 0, 3*time.Second, 3*time.Minute, false, 0, 0, 20)
	})
	line := ""
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "fleet-result ") {
			line = l
		}
	}
	if line == "" {
		t.Fatalf("no fleet-result line in the output:\n%s", out)
	}
	for _, k := range []string{"agents=6 ", "rate=20 ", "apiserver_start_cpu_s=", "etcd_db_kib_per_blade=", "writes_per_blade_5min="} {
		if !strings.Contains(line, k) {
			t.Errorf("fleet-result lacks %q: %s", k, line)
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

// Failures are counted by cause, not by connection: two errors that differ
// only in their addresses are one cause.
func TestFailureKindLeavesOutAddresses(t *testing.T) {
	a := failureKind(errors.New("write tcp 127.0.0.1:57824->127.0.0.1:35665: write: no buffer"))
	b := failureKind(errors.New("write tcp 127.0.0.1:38094->127.0.0.1:35665: write: no buffer"))
	if a != b || strings.Contains(a, "127.0.0.1") {
		t.Errorf("failureKind = %q and %q, want one cause without addresses", a, b)
	}
	if k := failureKind(fmt.Errorf("write: %w", syscall.EPIPE)); k != "broken pipe" {
		t.Errorf("failureKind(EPIPE) = %q, want broken pipe", k)
	}
}
