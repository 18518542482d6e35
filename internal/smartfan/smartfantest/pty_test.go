//go:build linux

package smartfantest

import (
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/kubeblade/kubeblade/internal/testreq"
)

// endingTB records how a test ended instead of ending the real one. Like
// testing.T, Skip and Fatal stop the goroutine that calls them.
type endingTB struct {
	testing.TB
	skipped, failed string
}

func (r *endingTB) Helper() {}
func (r *endingTB) Skip(args ...any) {
	r.skipped = fmt.Sprint(args...)
	runtime.Goexit()
}
func (r *endingTB) Skipf(format string, args ...any) {
	r.skipped = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
func (r *endingTB) Fatal(args ...any) {
	r.failed = fmt.Sprint(args...)
	runtime.Goexit()
}
func (r *endingTB) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// openMissing runs openPTY on a multiplexer that does not exist, as on a
// machine or container without /dev/ptmx, and returns how it ended.
func openMissing(t *testing.T) *endingTB {
	r := &endingTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		openPTY(r, filepath.Join(t.TempDir(), "ptmx"))
		r.failed = "openPTY returned a pseudo-terminal from a missing multiplexer"
	}()
	<-done
	return r
}

// TestNoPseudoTerminal: without a pseudo-terminal the firmware-model, UART,
// linux-backend and reliability tests of the smart fan unit cannot run, so
// a missing /dev/ptmx is a missing prerequisite: a visible skip in a plain
// go test, a failure under make test.
func TestNoPseudoTerminal(t *testing.T) {
	t.Run("make test fails", func(t *testing.T) {
		t.Setenv(testreq.Env, "1")
		r := openMissing(t)
		if r.failed == "" || r.skipped != "" {
			t.Fatalf("under %s=1 without a pseudo-terminal: failed %q, skipped %q; want a failure", testreq.Env, r.failed, r.skipped)
		}
		if !strings.Contains(r.failed, "pseudo-terminal") {
			t.Errorf("the failure %q does not say a pseudo-terminal is missing", r.failed)
		}
	})
	t.Run("plain go test skips, naming the prerequisite", func(t *testing.T) {
		t.Setenv(testreq.Env, "")
		r := openMissing(t)
		if r.skipped == "" || r.failed != "" {
			t.Fatalf("without a pseudo-terminal: failed %q, skipped %q; want a skip", r.failed, r.skipped)
		}
		if !strings.HasPrefix(r.skipped, "SKIP (prerequisite missing): ") || !strings.Contains(r.skipped, "pseudo-terminal") {
			t.Errorf("the skip %q is not testreq's prerequisite skip naming the pseudo-terminal", r.skipped)
		}
	})
}
