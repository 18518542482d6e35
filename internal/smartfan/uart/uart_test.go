package uart_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubeblade/kubeblade/internal/smartfan"
	"github.com/kubeblade/kubeblade/internal/smartfan/smartfantest"
	"github.com/kubeblade/kubeblade/internal/smartfan/uart"
	"github.com/kubeblade/kubeblade/internal/testwait"
)

// waitTimeout bounds every wait so a broken client fails the test instead
// of hanging it; it is never what makes a test pass.
const waitTimeout = 10 * time.Second

func start(t *testing.T, o uart.Options) (*uart.Client, <-chan smartfan.Frame) {
	t.Helper()
	c := uart.New(o)
	applied := frames(c)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(waitTimeout):
			t.Error("Run did not return after cancel")
		}
	})
	return c, applied
}

// frames returns a channel of every frame c applied, in order, so a test
// can wait for the reader goroutine to have handled a report.
func frames(c *uart.Client) <-chan smartfan.Frame {
	ch := make(chan smartfan.Frame, 1024)
	uart.Observe(c, func(f smartfan.Frame) {
		select {
		case ch <- f:
		default:
		}
	})
	return ch
}

// waitApplied waits until the client applied want.
func waitApplied(t *testing.T, ch <-chan smartfan.Frame, want smartfan.Frame) {
	t.Helper()
	for {
		select {
		case f := <-ch:
			if f == want {
				return
			}
		case <-time.After(waitTimeout):
			t.Fatalf("client never applied %v", want)
		}
	}
}

func expectReading(t *testing.T, what string, read func() (float64, error), want float64) {
	t.Helper()
	if got, err := read(); err != nil || got != want {
		t.Fatalf("%s = %v, %v; want %v", what, got, err, want)
	}
}

// connected waits until c has a port, by sending the fan request until it
// is accepted: from then on the client's re-send timer runs.
func connected(t *testing.T, c *uart.Client, percent uint8) {
	t.Helper()
	testwait.Eventually(t, waitTimeout, "the client to open its UART", func(context.Context) (bool, string) {
		err := c.SetFanPercent(percent)
		return err == nil, fmt.Sprint(err)
	})
}

func TestOverPTY(t *testing.T) {
	master, path := smartfantest.OpenPTY(t)
	unit := smartfantest.NewUnit(t, smartfantest.Options{})
	unit.Attach(smartfantest.Left, master)
	c, _ := start(t, uart.Options{Dial: uart.Serial(path), Clock: unit.Clock()})

	// Written before or after the client opens the tty, the report waits
	// in the tty's input queue.
	unit.Report(smartfantest.Left, smartfan.ReportAirflowTemperature, 234)
	select {
	case <-c.Seen():
	case <-time.After(waitTimeout):
		t.Fatal("unit not detected")
	}
	if !c.Detect(context.Background(), time.Second) {
		t.Fatal("Detect after Seen = false")
	}

	// Garbage, a half frame and a bad checksum before good frames: the
	// good frames must all arrive.
	bad := smartfan.Encode(smartfan.ValueFrame(smartfan.ReportFanRPM, 1))
	bad[len(bad)-2] ^= 0xFF
	unit.Send(smartfantest.Left, []byte{0x00, 0x13, 0x7F, 0x7E, 0xA3, 0x01})
	unit.Send(smartfantest.Left, bad)
	unit.Report(smartfantest.Left, smartfan.ReportFanRPM, 31250)              // 3125.0 RPM
	unit.Report(smartfantest.Left, smartfan.ReportAirflowTemperature, 0x7E7F) // escapes inside
	unit.Report(smartfantest.Left, smartfan.ReportButton, 0)

	select {
	case <-c.Buttons():
	case <-time.After(waitTimeout):
		t.Fatal("button press not delivered")
	}
	// Frames are applied in order: the readings before the button are in.
	expectReading(t, "FanRPM", c.FanRPM, 3125)
	expectReading(t, "AirflowTemperature", c.AirflowTemperature, float64(0x7E7F)/10)
	st := c.Stats()
	if st.ChecksumErrors != 1 || st.Malformed != 1 || st.Frames < 4 {
		t.Fatalf("stats %+v: want 1 checksum error, 1 malformed, ≥4 frames", st)
	}

	// The cut frame above looked like a restart, but with nothing asked
	// for yet there was nothing to re-send. The reader re-sends after it
	// lets go of the frames: wait until it is done, or it would find the
	// request below and send it a second time.
	testwait.Eventually(t, waitTimeout, "the reader done with the frames above", func(context.Context) (bool, string) {
		st := c.Stats()
		return st.Handled == st.Frames, fmt.Sprintf("%+v", st)
	})
	if err := c.SetFanPercent(56); err != nil {
		t.Fatal(err)
	}
	unit.Expect(smartfantest.Left, smartfan.SetFanPercent(56))
	// An LED frame always sits between two fan requests (the firmware
	// takes the LED frame as a fan request too).
	if err := c.SetLED(0x7E, 0x7D, 0x01); err != nil {
		t.Fatal(err)
	}
	unit.Expect(smartfantest.Left, smartfan.SetFanPercent(56))
	unit.Expect(smartfantest.Left, smartfan.Frame{Cmd: smartfan.CmdSetLED, Data: [3]byte{0x01, 0x7D, 0x7E}})
	unit.Expect(smartfantest.Left, smartfan.SetFanPercent(56))
	if err := c.SetFanPercent(101); err == nil {
		t.Fatal("SetFanPercent(101) accepted")
	}
}

// pipeConn is one end of an in-memory link the test can break.
type pipeConn struct {
	io.Reader
	io.Writer
	closeFn func() error
}

func (p pipeConn) Close() error { return p.closeFn() }

func TestReconnectReplaysCommands(t *testing.T) {
	master, path := smartfantest.OpenPTY(t)

	// First connection: an in-memory pipe the test breaks. Second dial
	// fails. Third: the pty.
	unitR, clientW := io.Pipe()
	clientR, unitW := io.Pipe()
	first := pipeConn{Reader: clientR, Writer: clientW, closeFn: func() error {
		clientR.Close()
		return clientW.Close()
	}}
	var mu sync.Mutex
	dials := 0
	dial := func() (io.ReadWriteCloser, error) {
		mu.Lock()
		defer mu.Unlock()
		dials++
		switch dials {
		case 1:
			return first, nil
		case 2:
			return nil, errors.New("device busy")
		default:
			return uart.Serial(path)()
		}
	}
	c, applied := start(t, uart.Options{Dial: dial, RetryInterval: time.Millisecond, ResendInterval: time.Hour})

	oldUnit := smartfantest.NewUnit(t, smartfantest.Options{})
	oldUnit.Attach(smartfantest.Left, struct {
		io.Reader
		io.Writer
	}{unitR, unitW})
	oldUnit.Report(smartfantest.Left, smartfan.ReportFanRPM, 10000)
	<-c.Seen()
	connected(t, c, 70)
	oldUnit.Expect(smartfantest.Left, smartfan.SetFanPercent(70))
	if err := c.SetLED(1, 2, 3); err != nil {
		t.Fatal(err)
	}
	oldUnit.Expect(smartfantest.Left, smartfan.SetFanPercent(70))
	oldUnit.Expect(smartfantest.Left, smartfan.SetLED(1, 2, 3))
	oldUnit.Expect(smartfantest.Left, smartfan.SetFanPercent(70))

	// The link breaks mid-frame.
	oldUnit.Send(smartfantest.Left, []byte{0x7E, 0xA3})
	unitW.CloseWithError(errors.New("cable pulled"))

	// The new link gets the last commands replayed (the LED between two
	// fan requests, so the fan request is what the unit keeps), then
	// works normally.
	newUnit := smartfantest.NewUnit(t, smartfantest.Options{})
	newUnit.Attach(smartfantest.Left, master)
	newUnit.Expect(smartfantest.Left, smartfan.SetFanPercent(70))
	newUnit.Expect(smartfantest.Left, smartfan.SetLED(1, 2, 3))
	newUnit.Expect(smartfantest.Left, smartfan.SetFanPercent(70))
	if st := newUnit.State(); st.Fan != 70 || st.LEDs[smartfantest.Left] != (smartfantest.Color{R: 1, G: 2, B: 3}) {
		t.Fatalf("unit after the replay: %+v", st)
	}
	newUnit.Report(smartfantest.Left, smartfan.ReportFanRPM, 22220)
	waitApplied(t, applied, smartfan.ValueFrame(smartfan.ReportFanRPM, 22220))
	expectReading(t, "FanRPM after reconnect", c.FanRPM, 2222)
	if st := c.Stats(); st.Connects != 2 {
		t.Fatalf("connects = %d, want 2", st.Connects)
	}
}

func TestDialBackoff(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	dials := make(chan time.Time, 100)
	c := uart.New(uart.Options{Clock: fc, RetryInterval: time.Second, MaxRetryInterval: 8 * time.Second,
		Dial: func() (io.ReadWriteCloser, error) { dials <- fc.Now(); return nil, os.ErrNotExist }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	var gaps []time.Duration
	last := <-dials
	// Backoff 1+2+4+8+8+8 s needs 31 one-second steps; many more means
	// Run stopped dialling.
	for steps := 0; len(gaps) < 6; steps++ {
		if steps == 100 {
			t.Fatalf("%d retries after %d s of backoff, want 6: %v", len(gaps), steps, gaps)
		}
		testwait.Eventually(t, waitTimeout, "Run to wait on the clock", func(context.Context) (bool, string) { return fc.HasWaiters(), "" })
		fc.Step(time.Second)
		select {
		case at := <-dials:
			gaps = append(gaps, at.Sub(last))
			last = at
		default:
		}
	}
	if diff := cmp.Diff([]time.Duration{1, 2, 4, 8, 8, 8}, scale(gaps, time.Second)); diff != "" {
		t.Fatalf("seconds between attempts (-want +got):\n%s", diff)
	}
}

func scale(ds []time.Duration, unit time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d / unit
	}
	return out
}

func TestNoUnitAndStaleReadings(t *testing.T) {
	master, path := smartfantest.OpenPTY(t)
	unit := smartfantest.NewUnit(t, smartfantest.Options{})
	fc := unit.Clock()
	c, applied := start(t, uart.Options{Dial: uart.Serial(path), Clock: fc, StaleAfter: 10 * time.Second})

	if _, err := c.FanRPM(); err == nil {
		t.Fatal("FanRPM before any report succeeded")
	}
	if _, ok := c.LastHeard(); ok {
		t.Fatal("LastHeard before any frame")
	}
	detected := make(chan bool, 1)
	go func() { detected <- c.Detect(context.Background(), 3*time.Second) }()
	// The client's own timers also wait on the clock, so step until
	// Detect gives up rather than waiting for its waiter.
	var found bool
	testwait.Eventually(t, waitTimeout, "Detect to give up", func(context.Context) (bool, string) {
		select {
		case found = <-detected:
			return true, ""
		default:
			fc.Step(time.Second)
			return false, ""
		}
	})
	if found {
		t.Fatal("silent UART detected as a unit")
	}

	unit.Attach(smartfantest.Left, master)
	unit.Report(smartfantest.Left, smartfan.ReportFanRPM, 12345)
	waitApplied(t, applied, smartfan.ValueFrame(smartfan.ReportFanRPM, 12345))
	expectReading(t, "FanRPM", c.FanRPM, 1234.5)
	fc.Step(10 * time.Second)
	if _, err := c.FanRPM(); err != nil {
		t.Fatalf("reading at exactly StaleAfter: %v", err)
	}
	fc.Step(time.Second)
	if _, err := c.FanRPM(); err == nil {
		t.Fatal("an 11 s old reading is still believed")
	}
}

func TestButtonFloodIsBounded(t *testing.T) {
	master, path := smartfantest.OpenPTY(t)
	unit := smartfantest.NewUnit(t, smartfantest.Options{})
	unit.Attach(smartfantest.Left, master)
	c, applied := start(t, uart.Options{Dial: uart.Serial(path), Clock: unit.Clock()})
	unit.Report(smartfantest.Left, smartfan.ReportAirflowTemperature, 200)
	<-c.Seen()
	var flood []byte
	for i := 0; i < 100; i++ {
		flood = smartfan.Append(flood, smartfan.Frame{Cmd: smartfan.ReportButton})
	}
	unit.Send(smartfantest.Left, flood)
	unit.Report(smartfantest.Left, smartfan.ReportFanRPM, 10) // marks the end of the flood
	waitApplied(t, applied, smartfan.ValueFrame(smartfan.ReportFanRPM, 10))
	st := c.Stats()
	if got := len(c.Buttons()); got != uart.ButtonBuffer {
		t.Fatalf("buffered presses = %d, want %d", got, uart.ButtonBuffer)
	}
	if st.DroppedButtons != 100-uart.ButtonBuffer {
		t.Fatalf("dropped = %d, want %d", st.DroppedButtons, 100-uart.ButtonBuffer)
	}
}

func TestCommandsWhileDisconnected(t *testing.T) {
	c := uart.New(uart.Options{Dial: func() (io.ReadWriteCloser, error) { return nil, os.ErrNotExist }})
	if err := c.SetFanPercent(10); !errors.Is(err, uart.ErrNotConnected) {
		t.Fatalf("err = %v, want ErrNotConnected", err)
	}
	if diff := cmp.Diff(uart.Stats{}, c.Stats()); diff != "" {
		t.Fatalf("stats (-want +got):\n%s", diff)
	}
}
