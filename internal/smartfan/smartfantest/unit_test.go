package smartfantest_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kubeblade/kubeblade/internal/smartfan"
	"github.com/kubeblade/kubeblade/internal/smartfan/smartfantest"
	"github.com/kubeblade/kubeblade/internal/testwait"
)

// blade is the raw blade end of one of the unit's UARTs: it writes frames
// and collects what the unit sends.
type blade struct {
	t   *testing.T
	tty *os.File
	mu  sync.Mutex
	got []smartfan.Frame
}

func attach(t *testing.T, u *smartfantest.Unit, s smartfantest.Side) *blade {
	master, path := smartfantest.OpenPTY(t)
	u.Attach(s, master)
	tty, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tty.Close() })
	b := &blade{t: t, tty: tty}
	go func() {
		var d smartfan.Decoder
		buf := make([]byte, 64)
		for {
			n, err := tty.Read(buf)
			b.mu.Lock()
			d.Feed(buf[:n], func(f smartfan.Frame) { b.got = append(b.got, f) })
			b.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return b
}

func (b *blade) send(u *smartfantest.Unit, s smartfantest.Side, fs ...smartfan.Frame) {
	b.t.Helper()
	before := u.Frames(s)
	for _, f := range fs {
		if _, err := b.tty.Write(smartfan.Encode(f)); err != nil {
			b.t.Fatal(err)
		}
	}
	testwait.Eventually(b.t, smartfantest.Timeout, "the unit to handle the frames", func(context.Context) (bool, string) {
		n := u.Frames(s)
		return n == before+uint64(len(fs)), fmt.Sprintf("%d of %d handled", n-before, len(fs))
	})
}

// received waits until the blade has n frames and returns them.
func (b *blade) received(n int) []smartfan.Frame {
	b.t.Helper()
	testwait.Eventually(b.t, smartfantest.Timeout, fmt.Sprintf("%d frames at the blade", n), func(context.Context) (bool, string) {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.got) >= n, fmt.Sprintf("%d so far", len(b.got))
	})
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]smartfan.Frame(nil), b.got...)
}

func (b *blade) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.got)
}

var (
	L = smartfantest.Left
	R = smartfantest.Right
)

// TestFirmwareFanRequests checks the model against the firmware's fan
// handler (cmd/fanunit/controller.go updateFanSpeed), frame by frame.
func TestFirmwareFanRequests(t *testing.T) {
	type step struct {
		side  smartfantest.Side
		frame smartfan.Frame
		// want after the frame
		fan      uint8
		requests [2]uint8
	}
	led := smartfan.SetLED(1, 2, 3)
	for name, steps := range map[string][]step{
		"the larger request wins": {
			{L, smartfan.SetFanPercent(30), 30, [2]uint8{30, 0}},
			{R, smartfan.SetFanPercent(70), 70, [2]uint8{30, 70}},
			{R, smartfan.SetFanPercent(20), 30, [2]uint8{30, 20}},
		},
		"an LED frame first after boot takes the fan from 40 % to 0": {
			{L, led, 0, [2]uint8{0, 0}},
		},
		"an LED frame sets the sender's request to the last percent of either blade": {
			{L, smartfan.SetFanPercent(80), 80, [2]uint8{80, 0}},
			{R, smartfan.SetFanPercent(25), 80, [2]uint8{80, 25}},
			{L, led, 25, [2]uint8{25, 25}},
			{R, smartfan.SetFanPercent(10), 25, [2]uint8{25, 10}},
			{R, led, 25, [2]uint8{25, 10}},
		},
		"a report-type frame from a blade counts too": {
			{L, smartfan.SetFanPercent(60), 60, [2]uint8{60, 0}},
			{R, smartfan.ValueFrame(smartfan.ReportFanRPM, 5), 60, [2]uint8{60, 60}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			u := smartfantest.NewUnit(t, smartfantest.Options{})
			blades := [2]*blade{attach(t, u, L), attach(t, u, R)}
			if st := u.State(); st.Fan != smartfantest.DefaultPercent || st.Requests != [2]uint8{} {
				t.Fatalf("at boot: %+v", st)
			}
			for i, s := range steps {
				blades[s.side].send(u, s.side, s.frame)
				if st := u.State(); st.Fan != s.fan || st.Requests != s.requests {
					t.Fatalf("step %d (%s %v): fan %d requests %v, want %d %v", i, s.side, s.frame, st.Fan, st.Requests, s.fan, s.requests)
				}
			}
		})
	}
}

func TestFirmwareLEDs(t *testing.T) {
	u := smartfantest.NewUnit(t, smartfantest.Options{})
	l, r := attach(t, u, L), attach(t, u, R)
	l.send(u, L, smartfan.SetLED(0x10, 0x20, 0x30))
	r.send(u, R, smartfan.SetLED(0xff, 0, 0x7e))
	want := [2]smartfantest.Color{{R: 0x10, G: 0x20, B: 0x30}, {R: 0xff, B: 0x7e}}
	if got := u.State().LEDs; got != want {
		t.Fatalf("LEDs %v, want %v", got, want)
	}
}

// TestFirmwareReports: every 2 s from boot, the internal temperature to
// the left blade, the external one to the right, the RPM to both
// (metricReporter); nothing before the first 2 s.
func TestFirmwareReports(t *testing.T) {
	u := smartfantest.NewUnit(t, smartfantest.Options{Internal: 28.5, External: 41, MaxRPM: 5000})
	l, r := attach(t, u, L), attach(t, u, R)
	u.Advance(1999 * time.Millisecond)
	if u.Sent(L)+u.Sent(R) != 0 {
		t.Fatal("reports before 2 s")
	}
	u.Advance(time.Millisecond)
	wantL := []smartfan.Frame{
		smartfan.ValueFrame(smartfan.ReportAirflowTemperature, 285),
		smartfan.ValueFrame(smartfan.ReportFanRPM, 20000), // 40 % of 5000 RPM, ×10
	}
	wantR := []smartfan.Frame{
		smartfan.ValueFrame(smartfan.ReportAirflowTemperature, 410),
		smartfan.ValueFrame(smartfan.ReportFanRPM, 20000),
	}
	if diff := cmp.Diff(wantL, l.received(2)); diff != "" {
		t.Fatalf("left (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantR, r.received(2)); diff != "" {
		t.Fatalf("right (-want +got):\n%s", diff)
	}
	u.Advance(10 * time.Second)
	if got := l.received(12); len(got) != 12 {
		t.Fatalf("after 12 s: %d frames at the left blade, want 12", len(got))
	}
}

// TestFirmwareButton: presses are counted for 600 ms from the first; one
// is the left blade's, two the right's, more nobody's.
func TestFirmwareButton(t *testing.T) {
	press := smartfan.Frame{Cmd: smartfan.ReportButton}
	for name, tc := range map[string]struct {
		presses     []int // press bursts 100 ms apart
		left, right int
	}{
		"once is left":             {presses: []int{1}, left: 1},
		"twice is right":           {presses: []int{1, 1}, right: 1},
		"three times is nobody's":  {presses: []int{1, 1, 1}},
		"twice at once is right":   {presses: []int{2}, right: 1},
		"bounce makes it nobody's": {presses: []int{4}},
	} {
		t.Run(name, func(t *testing.T) {
			u := smartfantest.NewUnit(t, smartfantest.Options{})
			l, r := attach(t, u, L), attach(t, u, R)
			for _, n := range tc.presses {
				u.Press(n)
				u.Advance(100 * time.Millisecond)
			}
			u.Advance(smartfantest.ButtonWindow) // well before the first report
			if u.Sent(L) != uint64(tc.left) || u.Sent(R) != uint64(tc.right) {
				t.Fatalf("reported %d left, %d right; want %d, %d", u.Sent(L), u.Sent(R), tc.left, tc.right)
			}
			if tc.left > 0 && l.received(1)[0] != press || tc.right > 0 && r.received(1)[0] != press {
				t.Fatal("the report is not a button frame")
			}
		})
	}
}

// TestFirmwareReset: a reset forgets both requests and the LEDs, runs the
// fan at 40 % and restarts the report timer; a failed EMC2101 read at a
// report is such a reset, with no report.
func TestFirmwareReset(t *testing.T) {
	u := smartfantest.NewUnit(t, smartfantest.Options{})
	l := attach(t, u, L)
	l.send(u, L, smartfan.SetFanPercent(90), smartfan.SetLED(9, 9, 9))
	u.Advance(1500 * time.Millisecond)
	u.Reset()
	st := u.State()
	if st.Fan != 40 || st.Requests != [2]uint8{} || st.Shared != 0 || st.LEDs != [2]smartfantest.Color{} || st.Resets != 1 {
		t.Fatalf("after a reset: %+v", st)
	}
	u.Advance(1999 * time.Millisecond) // the old timer would have fired at 2 s
	if u.Sent(L) != 0 {
		t.Fatal("the report timer did not restart with the reset")
	}
	u.Advance(time.Millisecond)
	l.received(2)

	l.send(u, L, smartfan.SetFanPercent(75))
	u.FailI2C()
	u.Advance(2 * time.Second)
	if st := u.State(); st.Resets != 2 || st.Fan != 40 || u.Sent(L) != 2 {
		t.Fatalf("a failed read must reset instead of reporting: %+v, %d frames sent", st, u.Sent(L))
	}
	var why []string
	for _, c := range u.History() {
		why = append(why, fmt.Sprintf("%d %s", c.Percent, c.Why))
	}
	want := []string{"40 boot", "90 left frame 0x01", "40 reset", "75 left frame 0x01", "40 reset after an I2C error"}
	if diff := cmp.Diff(want, why); diff != "" {
		t.Fatalf("fan history (-want +got):\n%s", diff)
	}
	if l.count() != 2 {
		t.Fatalf("%d frames at the blade, want 2", l.count())
	}
}

func TestDropNextFanFrames(t *testing.T) {
	u := smartfantest.NewUnit(t, smartfantest.Options{})
	l := attach(t, u, L)
	u.DropFanFrames(L, smartfan.CmdSetFanPercent, 1)
	l.send(u, L, smartfan.SetFanPercent(90), smartfan.SetFanPercent(20))
	if st := u.State(); st.Fan != 20 {
		t.Fatalf("fan %d: the first frame should have been lost, the second applied", st.Fan)
	}
}
