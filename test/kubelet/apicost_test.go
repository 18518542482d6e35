package kubelettest

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kubeblade/kubeblade/test/kubelet/internal/apicost"
)

// What the API cost step measures, from the environment (make
// bench-apicost sets a 10-minute window; make test's run keeps the
// defaults, a smoke run of the measurement).
const (
	// EnvAPICostWindow is the steady-state window (default 1m).
	EnvAPICostWindow = "KUBEBLADE_APICOST_WINDOW"
	// EnvAPICostStartup is how long after its first request an agent's
	// requests count as its start-up (default 30s).
	EnvAPICostStartup = "KUBEBLADE_APICOST_STARTUP"
	// EnvAPICostTable, when set, is a file the step writes its table to as
	// Markdown (make bench-apicost puts it into docs/performance.md).
	EnvAPICostTable = "KUBEBLADE_APICOST_TABLE"
)

// The goals of docs/performance.md for one agent's cost.
const (
	goalSteadyPercent = 5.0 // of the kubelet's requests on the same Node
	goalWatches       = 3
	goalStartRequests = 10 // certificate issuance apart
	// The agent writes once per heartbeat period (5 min) at steady state:
	// a shorter window says little about its rate, so its share is only
	// held to the goal over at least one period.
	heartbeatPeriod = 5 * time.Minute
)

func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q: want a positive duration such as 10m", name, v)
	}
	return d
}

// testAPICost reads kube-apiserver's audit log (nodeenv.AuditPolicy) and
// puts the agent's requests beside the kubelet's and the operator's: over
// the agent's start-up and over a steady window after it.
func testAPICost(t *testing.T) {
	window := envDuration(t, EnvAPICostWindow, time.Minute)
	startup := envDuration(t, EnvAPICostStartup, 30*time.Second)
	reqs, err := apicost.Read(node.AuditLog)
	if err != nil {
		t.Fatal(err)
	}
	t0 := apicost.First(reqs, namespace, "agent")
	if t0.IsZero() {
		t.Fatalf("no request of the agent's service account in %s", node.AuditLog)
	}
	// Settle a minute past the start-up: the one temperature-drift write
	// a start causes comes at most a minute after the first status.
	from := t0.Add(startup + time.Minute)
	to := from.Add(window)
	t.Logf("start-up window %s from the agent's first request (%s); steady window %s from %s",
		startup, t0.Format(time.TimeOnly), window, from.Format(time.TimeOnly))
	select {
	case <-time.After(time.Until(to) + 2*time.Second): // the measurement window itself, not a wait for a condition
	case <-ctx(t).Done():
		t.Fatal("interrupted during the measurement window")
	}
	if err := node.Exited(); err != nil {
		t.Fatalf("a node component died during the window: %v", err)
	}
	if reqs, err = apicost.Read(node.AuditLog); err != nil {
		t.Fatal(err)
	}
	start := apicost.Measure(reqs, namespace, "agent", t0, t0.Add(startup))
	steady := map[string]apicost.Cost{}
	for _, who := range []string{"kubelet", "agent", "operator"} {
		steady[who] = apicost.Measure(reqs, namespace, who, from, to)
	}
	share := 0.0
	if k := steady["kubelet"].PerMinute(); k > 0 {
		share = 100 * steady["agent"].PerMinute() / k
	}
	table := apiCostTable(window, startup, start, steady, share)
	fmt.Println(table)
	if f := os.Getenv(EnvAPICostTable); f != "" {
		if err := os.WriteFile(f, []byte(table), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// A smoke run of the measurement: it fails when the measurement is
	// broken (no requests of the agent or the kubelet in the log) and when
	// the agent's start or its watches exceed their goals, which do not
	// depend on the window; the share of the kubelet's requests is only
	// printed, and only over a window of a heartbeat period or more.
	if start.Total() == 0 {
		t.Errorf("no request of the agent in its start-up window: the audit log misses it")
	}
	if steady["kubelet"].Total() == 0 {
		t.Errorf("the kubelet made no request in %s: the audit log misses it", window)
	}
	if n := start.Total() - start.Certificate; n > goalStartRequests {
		t.Errorf("goal missed: the agent's start took %d requests besides its certificate (%s), goal ≤ %d", n, start.Breakdown(), goalStartRequests)
	}
	if w := steady["agent"].OpenWatches; w > goalWatches {
		t.Errorf("goal missed: the agent held %d watches open, goal ≤ %d", w, goalWatches)
	}
	if window >= heartbeatPeriod && share > goalSteadyPercent {
		t.Logf("goal missed: the agent's steady-state requests are %.1f %% of the kubelet's (%s against %s), goal ≤ %.0f %%",
			share, steady["agent"].Breakdown(), steady["kubelet"].Breakdown(), goalSteadyPercent)
	}
}

func apiCostTable(window, startup time.Duration, start apicost.Cost, steady map[string]apicost.Cost, share float64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Steady window %s, start-up window %s; JSON bytes of the request and response objects as the audit log holds them (watch streams not counted).\n\n", window, startup)
	b.WriteString("| client | requests/min | by verb and resource | bytes in / out per min | watches open at the end |\n|---|---|---|---|---|\n")
	for _, who := range []string{"kubelet", "agent", "operator"} {
		c := steady[who]
		m := c.Window.Minutes()
		fmt.Fprintf(&b, "| %s, steady | %.2f | %s | %.0f / %.0f | %d |\n", who, c.PerMinute(), c.Breakdown(),
			float64(c.BytesIn)/m, float64(c.BytesOut)/m, c.OpenWatches)
	}
	fmt.Fprintf(&b, "| agent, start-up | %d requests (%d for its certificate) | %s | %d / %d in all | %d |\n\n",
		start.Total(), start.Certificate, start.Breakdown(), start.BytesIn, start.BytesOut, start.OpenWatches)
	b.WriteString("| measurement | result | target |\n|---|---|---|\n")
	fmt.Fprintf(&b, "| agent's steady-state requests beside the kubelet's | %.1f %% (%.2f against %.2f per min, %s window) | ≤ 5 %% |\n",
		share, steady["agent"].PerMinute(), steady["kubelet"].PerMinute(), window)
	fmt.Fprintf(&b, "| agent's long-lived watches | %d | ≤ 3 |\n", steady["agent"].OpenWatches)
	fmt.Fprintf(&b, "| agent's requests to start (certificate issuance apart) | %d | ≤ 10 |\n", start.Total()-start.Certificate)
	return b.String()
}
