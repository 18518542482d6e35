//go:build !linux

package gpio

import (
	"errors"
	"time"
)

// CDev is the Driver on the GPIO character device; it exists only on Linux.
type CDev struct{}

// Open implements Driver.
func (CDev) Open(string) (Chip, error) {
	return nil, errors.New("the GPIO character device exists only on Linux")
}

// Now implements Driver.
func (CDev) Now() time.Duration { return 0 }
