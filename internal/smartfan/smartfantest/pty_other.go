//go:build !linux

package smartfantest

import (
	"os"
	"testing"

	"github.com/kubeblade/kubeblade/internal/testreq"
)

// OpenPTY ends the test as a missing prerequisite: the pseudo-terminal
// helper is Linux-only.
func OpenPTY(t testing.TB) (*os.File, string) {
	t.Helper()
	testreq.Unavailable(t, "pseudo-terminal tests run on Linux only")
	return nil, ""
}
