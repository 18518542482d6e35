package main

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kubeblade/kubeblade/internal/testenv"
	"github.com/kubeblade/kubeblade/internal/testreq"
	"github.com/kubeblade/kubeblade/test/bench/internal/smoke"
)

// TestFleetSmoke runs the harness once at a small size, started at a rate,
// with a short steady window: not a measurement (make bench and the scale
// runs in docs/performance.md are), a check that the harness still runs to
// its result line, so it cannot rot between benchmark runs.
func TestFleetSmoke(t *testing.T) {
	if _, err := testenv.AssetsDir(); err != nil {
		testreq.Unavailable(t, "kube-apiserver and etcd: %v", err)
	}
	out := smoke.Stdout(t, func() error {
		return run(6, 0, 0, 3*time.Second, 3*time.Minute, false, 0, 0, 20)
	})
	smoke.ResultLine(t, out, "fleet-result ", "agents=6 ", "rate=20 ", "reached_s=", "apiserver_start_cpu_s=", "etcd_db_kib_per_blade=", "writes_per_blade_5min=")
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
