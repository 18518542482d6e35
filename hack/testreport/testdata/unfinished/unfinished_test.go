// Package unfinished holds tests that start and never end, each in one of
// the ways a test binary stops under go test: its -timeout, a panic on a
// goroutine of its own, os.Exit, a signal; and benchmarks, which end
// without a result in the stream, and one that crashes. hack/testreport's
// TestUnfinishedTests reads the test2json streams go test -json wrote for
// them (testdata/shapes/unfinished-*.json); go test -run
// TestUnfinishedTests -record in hack/testreport records them again. The
// directory is testdata, so go test ./... never runs these.
package unfinished

import (
	"os"
	"syscall"
	"testing"
)

func TestPasses(t *testing.T) {}

// TestParallelWaits pauses until the top-level tests that do not call
// t.Parallel have ended, so it is still waiting when TestHangs times out.
func TestParallelWaits(t *testing.T) {
	t.Parallel()
}

// TestHangs blocks in a subtest until the -timeout alarm panics.
func TestHangs(t *testing.T) {
	t.Run("blocked", func(t *testing.T) { select {} })
}

// TestExits leaves the binary mid-test, as a test or the code it calls may.
func TestExits(t *testing.T) { os.Exit(1) }

// TestCrashes panics on a goroutine of its own, where the testing package
// cannot recover the panic and report the test as failed.
func TestCrashes(t *testing.T) {
	go func() { panic("boom") }()
	select {}
}

// TestKilled is killed, as by the kernel's OOM killer.
func TestKilled(t *testing.T) {
	if err := syscall.Kill(os.Getpid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {}
}

// BenchmarkPasses ends well, with no result event: test2json finds none in
// a benchmark's result line.
func BenchmarkPasses(b *testing.B) {
	for b.Loop() {
	}
}

// BenchmarkDeadlocks blocks with nothing left to wake it, so the runtime
// ends the binary with a fatal error. (The testing package stops its
// -timeout alarm, whose timer would keep the runtime waiting, before the
// benchmarks run.)
func BenchmarkDeadlocks(b *testing.B) { select {} }
