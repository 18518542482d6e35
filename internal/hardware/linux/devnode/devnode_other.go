//go:build !linux

package devnode

import (
	"errors"
	"fmt"
	"os"
)

// errUnsupported: the nodes this package checks exist on Linux only.
var errUnsupported = errors.New("device nodes are checked on Linux only")

// Pin refuses every node off Linux.
func (n Node) Pin(string) (*Pinned, error) {
	return nil, fmt.Errorf("%s: %w", n.Path, errUnsupported)
}

// Open refuses every node off Linux.
func (n Node) Open(int, string) (*os.File, error) {
	return nil, fmt.Errorf("%s: %w", n.Path, errUnsupported)
}
