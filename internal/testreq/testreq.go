// Package testreq decides what a test does when something it needs is not
// here (a control plane, a guest kernel, root, Chromium, a built artefact):
// in a plain `go test` it skips with the reason, visibly; under `make test`,
// which sets KUBEBLADE_TEST_REQUIRED=1, it fails, so a suite can never pass
// having run nothing.
package testreq

import (
	"fmt"
	"os"
	"testing"
)

// Env is the variable `make test` sets to make every suite required.
const Env = "KUBEBLADE_TEST_REQUIRED"

// Required reports whether missing prerequisites must fail tests.
func Required() bool { return os.Getenv(Env) == "1" }

// Unavailable ends the test because a prerequisite is missing: Skip with
// the reason in a plain run, Fatal when Required.
func Unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	reason := fmt.Sprintf(format, args...)
	if Required() {
		t.Fatalf("required by %s=1 but unavailable: %s", Env, reason)
		return
	}
	t.Skip("SKIP (prerequisite missing): " + reason)
}

// Need calls Unavailable unless ok.
func Need(t testing.TB, ok bool, format string, args ...any) {
	t.Helper()
	if !ok {
		Unavailable(t, format, args...)
	}
}
