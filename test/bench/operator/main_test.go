package main

import (
	"bytes"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kubeblade/kubeblade/internal/testenv"
	"github.com/kubeblade/kubeblade/internal/testreq"
)

// TestOperatorSmoke runs the harness once at a small size with a short
// steady window: not a measurement (make bench-operator and
// docs/performance.md are), a check that it still runs to its figures, so
// it cannot rot between benchmark runs.
func TestOperatorSmoke(t *testing.T) {
	if _, err := testenv.AssetsDir(); err != nil {
		testreq.Unavailable(t, "kube-apiserver and etcd: %v", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stdout
	os.Stdout = w
	var buf bytes.Buffer
	done := make(chan struct{})
	go func() { _, _ = io.Copy(&buf, r); close(done) }()
	err = run(20, 2*time.Second, 200, 400, 3*time.Minute)
	os.Stdout = old
	w.Close()
	<-done
	out := buf.String()
	if err != nil {
		t.Fatalf("%v; output:\n%s", err, out)
	}
	// The lines hack/bench-operator.sh and hack/bench.sh read.
	for _, want := range []string{"fixture: 20 nodes created", "all 20 nodes assigned after ", "steady state: ", "memory: operator heap"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
