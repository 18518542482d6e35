// Package smartfantest simulates the smart fan unit for tests: a
// pseudo-terminal pair gives the code under test a real tty, and Unit plays
// the unit's firmware on the other end.
package smartfantest

import (
	"io"
	"testing"
	"time"

	"github.com/kubeblade/kubeblade/internal/smartfan"
)

// Timeout bounds every wait so a broken client fails a test instead of
// hanging it; it never decides whether a test passes.
const Timeout = 10 * time.Second

// Unit is a simulated fan unit on rw: it decodes the blade's commands onto
// a channel and sends reports.
type Unit struct {
	t    testing.TB
	rw   io.ReadWriter
	cmds chan smartfan.Frame
}

// NewUnit starts reading commands from rw.
func NewUnit(t testing.TB, rw io.ReadWriter) *Unit {
	u := &Unit{t: t, rw: rw, cmds: make(chan smartfan.Frame, 64)}
	go func() {
		var d smartfan.Decoder
		buf := make([]byte, 64)
		for {
			n, err := rw.Read(buf)
			d.Feed(buf[:n], func(f smartfan.Frame) { u.cmds <- f })
			if err != nil {
				return
			}
		}
	}()
	return u
}

// Send writes raw bytes, garbage included.
func (u *Unit) Send(p []byte) {
	u.t.Helper()
	if _, err := u.rw.Write(p); err != nil {
		u.t.Fatalf("unit write: %v", err)
	}
}

// Report sends a report frame carrying tenths (value × 10).
func (u *Unit) Report(cmd byte, tenths uint32) {
	u.t.Helper()
	u.Send(smartfan.Encode(smartfan.ValueFrame(cmd, tenths)))
}

// Expect waits for the next command and checks it.
func (u *Unit) Expect(want smartfan.Frame) {
	u.t.Helper()
	select {
	case got := <-u.cmds:
		if got != want {
			u.t.Fatalf("unit received %v, want %v", got, want)
		}
	case <-time.After(Timeout):
		u.t.Fatalf("unit never received %v", want)
	}
}
