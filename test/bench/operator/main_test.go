package main

import (
	"strings"
	"testing"
	"time"

	"github.com/kubeblade/kubeblade/internal/testenv"
	"github.com/kubeblade/kubeblade/internal/testreq"
	"github.com/kubeblade/kubeblade/test/bench/internal/smoke"
)

// TestOperatorSmoke runs the harness once at a small size with a short
// steady window: not a measurement (make bench-operator and
// docs/performance.md are), a check that it still runs to its figures, so
// it cannot rot between benchmark runs.
func TestOperatorSmoke(t *testing.T) {
	if _, err := testenv.AssetsDir(); err != nil {
		testreq.Unavailable(t, "kube-apiserver and etcd: %v", err)
	}
	out := smoke.Stdout(t, func() error { return run(20, 2*time.Second, 200, 400, 3*time.Minute) })
	// The lines hack/bench-operator.sh and hack/bench.sh read.
	for _, want := range []string{"fixture: 20 nodes created", "all 20 nodes assigned after ", "steady state: ", "memory: operator heap"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
