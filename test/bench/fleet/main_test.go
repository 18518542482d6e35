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
		return run(params{n: 6, window: 3 * time.Second, timeout: 3 * time.Minute, rate: 20})
	})
	smoke.ResultLine(t, out, "fleet-result ", "agents=6 ", "rate=20 ", "reached_s=", "reached_p90_s=", "delivered_s=", "apiserver_start_cpu_s=", "etcd_db_kib_per_blade=", "writes_per_blade_5min=")
	// The trace found kube-apiserver's watch-event counter: had the
	// metric's name or labels changed, it would never see them all sent.
	if strings.Contains(out, "events by -1s") {
		t.Errorf("the reach trace never saw kube-apiserver send the 6 BladeConfig watch events:\n%s", out)
	}
}

// The reach trace reads kube-apiserver's counters in both label styles
// (kind, as in older versions, and resource) and ignores other kinds.
func TestParseAPICounters(t *testing.T) {
	body := []byte(`# HELP apiserver_watch_events_total [ALPHA] Number of events sent in watch clients
# TYPE apiserver_watch_events_total counter
apiserver_watch_events_total{group="kubeblade.io",kind="BladeConfig",version="v1alpha1"} 12
apiserver_watch_events_total{group="",resource="nodes",version="v1"} 99
apiserver_watch_events_total{group="kubeblade.io",resource="bladeconfigs",version="v1alpha1"} 3
apiserver_terminated_watchers_total{group="kubeblade.io",resource="bladeconfigs.kubeblade.io"} 2
apiserver_terminated_watchers_total{group="kubeblade.io",resource="bladeconfigs"} 1
apiserver_longrunning_requests{component="apiserver",group="kubeblade.io",resource="bladeconfigs",scope="resource",subresource="",verb="WATCH",version="v1alpha1"} 6
`)
	c := parseAPICounters(body)
	if c.sent != 15 || c.terminated != 3 || c.watchers != 6 {
		t.Errorf("parseAPICounters = %+v, want sent 15, terminated 3, watchers 6", c)
	}
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
