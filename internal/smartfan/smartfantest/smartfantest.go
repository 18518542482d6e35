// Package smartfantest plays the smart fan unit for tests: a pseudo-terminal
// pair (OpenPTY) gives the code under test a real tty per blade, and Unit
// runs a model of the unit's firmware on the other ends.
//
// The model follows the firmware every unit runs (compute-blade-agent,
// cmd/fanunit/controller.go and main.go at commit 422cf18), quirks included:
//   - the fan runs at the larger of the two blades' requests; at boot it is
//     set to 40 % while both requests start at 0 (Controller.Run,
//     DefaultFanSpeed);
//   - its fan handler subscribes to every frame of both blades
//     (events.MatchAll) and decodes them into one SetFanSpeedPercentPacket
//     shared by both; FromPacket fails for anything but 0x01 and leaves the
//     percent as it was, and the error is ignored, so any frame sets the
//     sending blade's request to the last percent decoded from either blade
//     (updateFanSpeed);
//   - every 2 s it reads the EMC2101 and sends the internal temperature to
//     the left blade, the external one to the right and the RPM to both; if
//     the last read (the RPM) fails it resets the CPU 100 ms later instead
//     of sending (metricReporter; the model resets at once and boots
//     instantly);
//   - the button counts falling edges; 600 ms after the first one, one
//     press is reported to the left blade, two to the right, more to nobody;
//   - a reset forgets everything: requests, the shared percent, LEDs, half
//     received frames, the button count, and the report timer restarts.
//
// What the model leaves out is scheduling: the firmware hands each frame to
// its handlers through one-slot queues that drop when full. At 115200 baud a
// frame's bytes arrive slower than the firmware handles them, so the model
// handles every frame before the next; DropFanFrames injects the drop.
//
// Time is a fake clock the test moves with Advance, which runs the unit's
// timed work (reports, the button window) at the instants it falls due, so
// a test knows exactly what the unit sent by when.
package smartfantest

import (
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubeblade/kubeblade/internal/smartfan"
)

// Timeout bounds every wait so a broken client fails a test instead of
// hanging it; it never decides whether a test passes.
const Timeout = 10 * time.Second

// Firmware constants (cmd/fanunit).
const (
	DefaultPercent    = 40
	TelemetryInterval = 2 * time.Second
	ButtonWindow      = 600 * time.Millisecond
)

// Side is the blade a UART of the unit faces.
type Side int

const (
	Left Side = iota
	Right
)

func (s Side) String() string {
	if s == Left {
		return "left"
	}
	return "right"
}

// Color is an LED colour as the unit stores it.
type Color struct{ R, G, B uint8 }

// FanChange is one change of the fan duty the EMC2101 was given.
type FanChange struct {
	At      time.Time
	Percent uint8
	Why     string
}

// Options shape a Unit.
type Options struct {
	// Clock is the fake clock Advance moves (default: a new one); the
	// code under test should share it.
	Clock *clocktesting.FakeClock
	// MaxRPM is the fan's speed at 100 % (default 5000, a Noctua
	// NF-A4x20 5V PWM).
	MaxRPM float64
	// Internal and External are the EMC2101's temperatures in °C
	// (defaults 30 and 35).
	Internal, External float64
}

// State is a snapshot of the model.
type State struct {
	Fan      uint8
	Requests [2]uint8
	// Shared is the percent in the fan handler's shared packet.
	Shared uint8
	LEDs   [2]Color
	Resets int
}

// Unit is the simulated fan unit.
type Unit struct {
	t   testing.TB
	o   Options
	clk *clocktesting.FakeClock

	mu      sync.Mutex
	ports   [2]io.ReadWriter
	wmu     [2]sync.Mutex
	st      State
	gen     int // bumped by every reset
	frames  [2]uint64
	history []FanChange
	dropFan [2]map[byte]int
	failI2C bool
	presses int
	// nextReport and pressDue are when the report timer and the
	// button window fire next.
	nextReport time.Time
	pressDue   time.Time
	sent       [2]uint64
	taps       [2]chan smartfan.Frame
}

// NewUnit boots a unit; it stops when the test ends.
func NewUnit(t testing.TB, o Options) *Unit {
	if o.Clock == nil {
		o.Clock = clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	}
	if o.MaxRPM == 0 {
		o.MaxRPM = 5000
	}
	if o.Internal == 0 && o.External == 0 {
		o.Internal, o.External = 30, 35
	}
	u := &Unit{t: t, o: o, clk: o.Clock}
	for i := range u.taps {
		u.taps[i] = make(chan smartfan.Frame, 4096)
	}
	u.bootLocked(u.clk.Now(), "boot")
	return u
}

// Clock is the fake clock the unit runs on.
func (u *Unit) Clock() *clocktesting.FakeClock { return u.clk }

// bootLocked is Controller.Run's start: fan at the default, LEDs dark,
// requests and the shared packet zeroed (fresh variables).
func (u *Unit) bootLocked(now time.Time, why string) {
	u.st.Requests = [2]uint8{}
	u.st.Shared = 0
	u.st.LEDs = [2]Color{}
	u.presses = 0
	u.pressDue = time.Time{}
	u.gen++
	u.nextReport = now.Add(TelemetryInterval)
	u.setFanLocked(now, DefaultPercent, why)
}

func (u *Unit) setFanLocked(now time.Time, p uint8, why string) {
	if len(u.history) > 0 && u.st.Fan == p {
		return
	}
	u.st.Fan = p
	u.history = append(u.history, FanChange{At: now, Percent: p, Why: why})
}

// Attach connects the unit's UART for side to rw (a pty master) and starts
// reading the blade's frames from it.
func (u *Unit) Attach(s Side, rw io.ReadWriter) {
	u.mu.Lock()
	u.ports[s] = rw
	u.mu.Unlock()
	go u.listen(s, rw)
}

func (u *Unit) listen(s Side, r io.Reader) {
	var dec smartfan.Decoder
	gen := -1
	buf := make([]byte, 256)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			u.mu.Lock()
			if gen != u.gen {
				// A reset loses whatever half frame the UART held.
				dec, gen = smartfan.Decoder{}, u.gen
			}
			dec.Feed(buf[:n], func(f smartfan.Frame) { u.applyLocked(s, f) })
			u.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

// applyLocked is what one frame from side s does: the fan handler
// (updateFanSpeed) and the LED handler (updateLEDs) both see it.
func (u *Unit) applyLocked(s Side, f smartfan.Frame) {
	now := u.clk.Now()
	u.frames[s]++
	select {
	case u.taps[s] <- f:
	default:
	}
	if u.dropFan[s][f.Cmd] > 0 {
		u.dropFan[s][f.Cmd]--
	} else {
		if f.Cmd == smartfan.CmdSetFanPercent {
			u.st.Shared = f.Data[0]
		}
		u.st.Requests[s] = u.st.Shared
		why := fmt.Sprintf("%s frame %#02x", s, f.Cmd)
		u.setFanLocked(now, max(u.st.Requests[Left], u.st.Requests[Right]), why)
	}
	if f.Cmd == smartfan.CmdSetLED {
		u.st.LEDs[s] = Color{R: f.Data[2], G: f.Data[1], B: f.Data[0]}
	}
}

// Advance moves the clock by d, running the unit's timed work at the
// instants it falls due, in order.
func (u *Unit) Advance(d time.Duration) {
	target := u.clk.Now().Add(d)
	for {
		u.mu.Lock()
		next, what := u.nextReport, "report"
		if !u.pressDue.IsZero() && u.pressDue.Before(next) {
			next, what = u.pressDue, "button"
		}
		u.mu.Unlock()
		if next.After(target) {
			break
		}
		u.clk.SetTime(next)
		if what == "report" {
			u.report(next)
		} else {
			u.decidePresses()
		}
	}
	u.clk.SetTime(target)
}

// report is one round of metricReporter.
func (u *Unit) report(now time.Time) {
	u.mu.Lock()
	if u.failI2C {
		// The read failed: reset instead of reporting.
		u.failI2C = false
		u.st.Resets++
		u.bootLocked(now, "reset after an I2C error")
		u.mu.Unlock()
		return
	}
	u.nextReport = now.Add(TelemetryInterval)
	rpm := uint32(float64(u.st.Fan) * u.o.MaxRPM / 100 * 10)
	internal, external := uint32(u.o.Internal*10), uint32(u.o.External*10)
	u.mu.Unlock()
	u.send(Left, smartfan.Encode(smartfan.ValueFrame(smartfan.ReportAirflowTemperature, internal)))
	u.send(Right, smartfan.Encode(smartfan.ValueFrame(smartfan.ReportAirflowTemperature, external)))
	u.send(Left, smartfan.Encode(smartfan.ValueFrame(smartfan.ReportFanRPM, rpm)))
	u.send(Right, smartfan.Encode(smartfan.ValueFrame(smartfan.ReportFanRPM, rpm)))
}

func (u *Unit) decidePresses() {
	u.mu.Lock()
	n := u.presses
	u.presses, u.pressDue = 0, time.Time{}
	u.mu.Unlock()
	frame := smartfan.Encode(smartfan.Frame{Cmd: smartfan.ReportButton})
	switch n {
	case 1:
		u.send(Left, frame)
	case 2:
		u.send(Right, frame)
	}
}

func (u *Unit) send(s Side, p []byte) {
	u.mu.Lock()
	w := u.ports[s]
	u.mu.Unlock()
	if w == nil {
		return
	}
	u.wmu[s].Lock()
	defer u.wmu[s].Unlock()
	if _, err := w.Write(p); err == nil { // a blade that is not listening loses it, as on the wire
		u.mu.Lock()
		var d smartfan.Decoder
		d.Feed(p, func(smartfan.Frame) { u.sent[s]++ })
		u.mu.Unlock()
	}
}

// Reset restarts the unit now, as machine.CPUReset does.
func (u *Unit) Reset() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.st.Resets++
	u.bootLocked(u.clk.Now(), "reset")
}

// FailI2C makes the next EMC2101 read fail, so the next report becomes a
// reset, the way the firmware works around its I2C lock-ups.
func (u *Unit) FailI2C() {
	u.mu.Lock()
	u.failI2C = true
	u.mu.Unlock()
}

// Press presses the unit's button n times within the firmware's window,
// which opens at the first press.
func (u *Unit) Press(n int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.presses == 0 {
		u.pressDue = u.clk.Now().Add(ButtonWindow)
	}
	u.presses += n
}

// Sent counts the valid frames the unit sent to side.
func (u *Unit) Sent(s Side) uint64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.sent[s]
}

// DropFanFrames makes the fan handler miss side's next n frames with
// command cmd, as its one-slot queue does when frames come faster than it
// runs.
func (u *Unit) DropFanFrames(s Side, cmd byte, n int) {
	u.mu.Lock()
	if u.dropFan[s] == nil {
		u.dropFan[s] = map[byte]int{}
	}
	u.dropFan[s][cmd] += n
	u.mu.Unlock()
}

// State returns a snapshot.
func (u *Unit) State() State {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.st
}

// Frames counts the valid frames received from side.
func (u *Unit) Frames(s Side) uint64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.frames[s]
}

// History returns every change of the fan duty, in order.
func (u *Unit) History() []FanChange {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]FanChange(nil), u.history...)
}

// Send writes raw bytes to the blade on side, garbage included.
func (u *Unit) Send(s Side, p []byte) { u.send(s, p) }

// Report sends one report frame carrying tenths (value × 10) to side.
func (u *Unit) Report(s Side, cmd byte, tenths uint32) {
	u.send(s, smartfan.Encode(smartfan.ValueFrame(cmd, tenths)))
}

// Expect waits for the next frame from side and checks it.
func (u *Unit) Expect(s Side, want smartfan.Frame) {
	u.t.Helper()
	select {
	case got := <-u.taps[s]:
		if got != want {
			u.t.Fatalf("unit received %v from the %s blade, want %v", got, s, want)
		}
	case <-time.After(Timeout):
		u.t.Fatalf("unit never received %v from the %s blade", want, s)
	}
}

// Drain forgets the frames received so far, so Expect sees only new ones.
func (u *Unit) Drain(s Side) {
	for {
		select {
		case <-u.taps[s]:
		default:
			return
		}
	}
}
