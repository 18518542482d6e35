//go:build !linux

package smartfantest

import (
	"os"
	"testing"
)

// OpenPTY skips: the pseudo-terminal helper is Linux-only.
func OpenPTY(t testing.TB) (*os.File, string) {
	t.Skip("pseudo-terminal tests run on Linux only")
	return nil, ""
}
