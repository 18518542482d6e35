// Package uart is the agent's link to the smart fan unit: it opens the UART
// (115200 8N1), decodes the unit's reports with the smartfan codec, keeps the
// latest airflow temperature and fan RPM, forwards button presses, sends fan
// and LED commands, and reconnects after errors.
//
// The unit's firmware is fixed and has two habits the client must cover
// (compute-blade-agent cmd/fanunit, the firmware every unit runs):
//   - it resets its CPU on an I2C error and comes back at 40 % with both
//     blades' requests at 0, telling nobody; and
//   - its fan handler sees every frame and keeps one request variable for
//     both blades, so any other frame (a SetLED) sets this blade's request
//     to the last percent the unit decoded, from either blade.
//
// So the client re-sends its fan request every ResendInterval (the old agent
// did so every 5 s), at once when the unit shows signs of a restart (reports
// resume after a gap longer than RestartGap, or a frame was cut short), and
// around every LED frame: just before it, so the shared variable holds this
// blade's percent when the LED frame copies it into this blade's request,
// and just after it, in case the other blade's fan frame came in between.
// The facts, with their sources, are in docs/hardware.md ("The smart fan
// unit's firmware"); smartfantest models them.
package uart

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"go.bug.st/serial"
	"k8s.io/utils/clock"

	"github.com/kubeblade/kubeblade/internal/smartfan"
)

// Baud is the unit's fixed line speed.
const Baud = 115200

// Defaults for Options.
const (
	DefaultRetryInterval = 2 * time.Second
	// DefaultMaxRetryInterval caps the backoff between attempts to open
	// a UART that keeps failing.
	DefaultMaxRetryInterval = 30 * time.Second
	// DefaultResendInterval is how often the fan request is re-sent. A
	// silent reset of the unit leaves the fan at its 40 % default (or,
	// after any frame, at the other blade's request) for at most this
	// long.
	DefaultResendInterval = 2 * time.Second
	// DefaultRestartGap is the silence after which the next report is
	// taken as a restarted unit: it reports every 2 s, and its reset
	// path skips the report it failed to read, so a restart shows as a
	// gap of at least 4 s.
	DefaultRestartGap = 3 * time.Second
	// DefaultStaleAfter is how old a report may be before it is no longer
	// believed. The unit reports every couple of seconds.
	DefaultStaleAfter = 10 * time.Second
	// ButtonBuffer bounds unread button presses; more are dropped and
	// counted, as a flood of presses carries no more meaning than a few.
	ButtonBuffer = 16
)

// ErrNotConnected is returned by commands while the UART is down.
var ErrNotConnected = errors.New("smart fan unit: not connected")

// Dialer opens the UART.
type Dialer func() (io.ReadWriteCloser, error)

// Serial dials a serial device at 115200 8N1 with go.bug.st/serial.
func Serial(path string) Dialer {
	return func() (io.ReadWriteCloser, error) {
		p, err := serial.Open(path, &serial.Mode{
			BaudRate: Baud,
			DataBits: 8,
			Parity:   serial.NoParity,
			StopBits: serial.OneStopBit,
		})
		if err != nil {
			return nil, fmt.Errorf("opening %s: %w", path, err)
		}
		return p, nil
	}
}

// Options configure a Client.
type Options struct {
	Dial Dialer
	// Clock timestamps reports and paces reconnects (default real).
	Clock clock.WithTicker
	// Logger receives connection changes (default discard).
	Logger *slog.Logger
	// RetryInterval is the first pause between reconnect attempts; it
	// doubles while opening the UART keeps failing, up to
	// MaxRetryInterval.
	RetryInterval    time.Duration
	MaxRetryInterval time.Duration
	// ResendInterval is how often the fan request is re-sent.
	ResendInterval time.Duration
	// RestartGap is the silence after which the unit is assumed to have
	// restarted.
	RestartGap time.Duration
	// StaleAfter is how long a reading stays valid.
	StaleAfter time.Duration
}

// Stats describe the link.
type Stats struct {
	smartfan.Stats
	Connects       uint64
	UnknownFrames  uint64
	DroppedButtons uint64
	// Sent counts frames written to the unit.
	Sent uint64
	// Resends counts periodic re-sends of the fan request.
	Resends uint64
	// Restarts counts suspected restarts of the unit (a report after a
	// long gap, a frame cut short), each answered by a re-send.
	Restarts uint64
	// Handled counts received frames whose handling, including any
	// re-send they caused, is complete (Frames counts them decoded).
	Handled uint64
}

type reading struct {
	value float64
	at    time.Time
	ok    bool
}

// Client talks to one smart fan unit. Commands, readings and Stats are safe
// for concurrent use with Run.
type Client struct {
	o       Options
	buttons chan time.Time
	seen    chan struct{}

	mu        sync.Mutex
	port      *port
	seenOnce  bool
	lastHeard time.Time
	// restart is set by the reader when the unit looks restarted.
	restart  bool
	rpm      reading
	airflow  reading
	lastFan  *uint8
	lastLED  *[3]uint8
	stats    Stats
	decStats smartfan.Stats // of finished connections
	dec      *smartfan.Decoder
	// observe, when set (by tests), sees every applied frame.
	observe func(smartfan.Frame)
}

// New returns a Client; call Run to connect.
func New(o Options) *Client {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.RetryInterval <= 0 {
		o.RetryInterval = DefaultRetryInterval
	}
	if o.StaleAfter <= 0 {
		o.StaleAfter = DefaultStaleAfter
	}
	if o.MaxRetryInterval < o.RetryInterval {
		o.MaxRetryInterval = max(DefaultMaxRetryInterval, o.RetryInterval)
	}
	if o.ResendInterval <= 0 {
		o.ResendInterval = DefaultResendInterval
	}
	if o.RestartGap <= 0 {
		o.RestartGap = DefaultRestartGap
	}
	return &Client{o: o, buttons: make(chan time.Time, ButtonBuffer), seen: make(chan struct{})}
}

// port closes its connection once, whoever notices the failure first.
type port struct {
	rw   io.ReadWriteCloser
	once sync.Once
	// wmu keeps frames whole when a replay and a command race.
	wmu sync.Mutex
}

func (p *port) close() { p.once.Do(func() { p.rw.Close() }) }

// Run connects and reads until ctx ends, reconnecting after any error. It
// closes Buttons when it returns.
func (c *Client) Run(ctx context.Context) {
	defer close(c.buttons)
	failing := false
	backoff := c.o.RetryInterval
	for ctx.Err() == nil {
		rw, err := c.o.Dial()
		if err != nil {
			if !failing {
				c.o.Logger.Warn("smart fan unit: cannot open UART; retrying with backoff", "err", err, "first", c.o.RetryInterval, "max", c.o.MaxRetryInterval)
				failing = true
			}
			c.wait(ctx, backoff)
			backoff = min(2*backoff, c.o.MaxRetryInterval)
			continue
		}
		if failing {
			c.o.Logger.Info("smart fan unit: UART open again")
			failing = false
		}
		backoff = c.o.RetryInterval
		err = c.serve(ctx, &port{rw: rw})
		if ctx.Err() != nil {
			return
		}
		c.o.Logger.Warn("smart fan unit: UART failed; reconnecting", "err", err)
		c.wait(ctx, backoff)
	}
}

func (c *Client) wait(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-c.o.Clock.After(d):
	}
}

// serve reads one connection until it fails.
func (c *Client) serve(ctx context.Context, p *port) error {
	stop := context.AfterFunc(ctx, p.close) // unblocks Read on shutdown
	defer stop()
	defer p.close()

	dec := &smartfan.Decoder{}
	// The re-send timer exists before commands can reach this port, so
	// its period counts from the connection.
	tick := c.o.Clock.NewTicker(c.o.ResendInterval)
	c.mu.Lock()
	c.port, c.dec = p, dec
	c.stats.Connects++
	fan, led := c.lastFan, c.lastLED
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		if c.port == p {
			c.port, c.dec = nil, nil
		}
		s := dec.Stats()
		c.decStats.Frames += s.Frames
		c.decStats.ChecksumErrors += s.ChecksumErrors
		c.decStats.Malformed += s.Malformed
		c.decStats.Skipped += s.Skipped
		c.mu.Unlock()
	}()

	// The unit may have restarted with its own defaults: replay what the
	// agent last asked for, the fan request last, since the unit's fan
	// handler takes any frame as a fan request.
	if led != nil {
		if err := c.writeLED(p, *led, fan); err != nil {
			return err
		}
	} else if fan != nil {
		if err := c.write(p, smartfan.SetFanPercent(*fan)); err != nil {
			return err
		}
	}

	resendDone := make(chan struct{})
	defer close(resendDone)
	go c.resendLoop(p, tick, resendDone)

	var buf [256]byte
	for {
		n, err := p.rw.Read(buf[:])
		if n > 0 {
			c.mu.Lock()
			cut, before := dec.Stats().Malformed, dec.Stats().Frames
			dec.Feed(buf[:n], c.handleLocked)
			decoded := dec.Stats().Frames - before
			if dec.Stats().Malformed > cut && c.seenOnce {
				// A frame cut short by a new start byte: the unit
				// restarted mid-report.
				c.restart = true
			}
			restart := c.restart
			c.restart = false
			if restart {
				c.stats.Restarts++
			}
			c.mu.Unlock()
			if restart {
				c.o.Logger.Info("smart fan unit: looks restarted; re-sending the fan request")
				if err := c.resend(p, true); err != nil {
					return err
				}
			}
			c.mu.Lock()
			c.stats.Handled += decoded
			c.mu.Unlock()
		}
		if err != nil {
			return err
		}
		if n == 0 {
			// A read with neither data nor error is the port's way of
			// saying it went away (a pty whose other side closed, say).
			return io.ErrUnexpectedEOF
		}
	}
}

// resendLoop re-sends the fan request on every tick until done.
func (c *Client) resendLoop(p *port, t clock.Ticker, done <-chan struct{}) {
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C():
			err := c.resend(p, false)
			c.mu.Lock()
			c.stats.Resends++
			c.mu.Unlock()
			if err != nil {
				return // the write closed the port; serve reconnects
			}
		}
	}
}

// resend writes the last fan request (and, after a restart, the LED too).
func (c *Client) resend(p *port, withLED bool) error {
	c.mu.Lock()
	fan, led := c.lastFan, c.lastLED
	c.mu.Unlock()
	if withLED && led != nil {
		return c.writeLED(p, *led, fan)
	}
	if fan == nil {
		return nil
	}
	return c.write(p, smartfan.SetFanPercent(*fan))
}

// writeLED sends an LED frame between two copies of the fan request (when
// there is one). The firmware's fan handler sees the LED frame too and
// sets this blade's request to the percent it decoded last, from either
// blade (docs/hardware.md: one request variable shared by both blades):
// the request just before makes that this blade's own percent, so the
// fan does not dip even for the time of a frame; the one after repairs a
// fan frame of the other blade's that arrived in between.
func (c *Client) writeLED(p *port, led [3]uint8, fan *uint8) error {
	if fan != nil {
		if err := c.write(p, smartfan.SetFanPercent(*fan)); err != nil {
			return err
		}
	}
	if err := c.write(p, smartfan.SetLED(led[0], led[1], led[2])); err != nil {
		return err
	}
	if fan == nil {
		return nil
	}
	return c.write(p, smartfan.SetFanPercent(*fan))
}

// handleLocked applies one frame; the caller holds mu.
func (c *Client) handleLocked(f smartfan.Frame) {
	now := c.o.Clock.Now()
	if !c.seenOnce {
		c.seenOnce = true
		close(c.seen)
	} else if now.Sub(c.lastHeard) > c.o.RestartGap {
		c.restart = true
	}
	c.lastHeard = now
	switch f.Cmd {
	case smartfan.ReportButton:
		select {
		case c.buttons <- now:
		default:
			c.stats.DroppedButtons++
		}
	case smartfan.ReportAirflowTemperature:
		c.airflow = reading{value: f.Tenths(), at: now, ok: true}
	case smartfan.ReportFanRPM:
		c.rpm = reading{value: f.Tenths(), at: now, ok: true}
	default:
		c.stats.UnknownFrames++
	}
	if c.observe != nil {
		c.observe(f)
	}
}

// Seen is closed once the first valid frame arrived: the unit exists.
func (c *Client) Seen() <-chan struct{} { return c.seen }

// Detect waits up to timeout for the first frame and reports whether one
// came. Run must be running.
func (c *Client) Detect(ctx context.Context, timeout time.Duration) bool {
	select {
	case <-c.seen:
		return true
	default:
	}
	select {
	case <-c.seen:
		return true
	case <-ctx.Done():
		return false
	case <-c.o.Clock.After(timeout):
		return false
	}
}

// LastHeard returns when the last valid frame arrived, and false when none
// has yet.
func (c *Client) LastHeard() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastHeard, c.seenOnce
}

// Buttons delivers the time of each button press the unit reports for
// this blade. It is closed when Run returns.
func (c *Client) Buttons() <-chan time.Time { return c.buttons }

// FanRPM returns the unit's last fan speed report.
func (c *Client) FanRPM() (float64, error) { return c.read(&c.rpm, "fan RPM") }

// AirflowTemperature returns the unit's last airflow temperature in °C.
func (c *Client) AirflowTemperature() (float64, error) {
	return c.read(&c.airflow, "airflow temperature")
}

func (c *Client) read(r *reading, what string) (float64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !r.ok {
		return 0, fmt.Errorf("smart fan unit: no %s report yet", what)
	}
	if age := c.o.Clock.Since(r.at); age > c.o.StaleAfter {
		return 0, fmt.Errorf("smart fan unit: last %s report is %s old", what, age.Round(time.Second))
	}
	return r.value, nil
}

// SetFanPercent asks the unit for a fan duty. It is remembered and replayed
// after a reconnect even when sending fails now.
func (c *Client) SetFanPercent(percent uint8) error {
	if percent > 100 {
		return fmt.Errorf("smart fan unit: duty %d %% is outside 0–100", percent)
	}
	c.mu.Lock()
	c.lastFan = &percent
	p := c.port
	c.mu.Unlock()
	return c.send(p, smartfan.SetFanPercent(percent))
}

// SetLED sets the unit's LED for this blade; remembered like the fan duty.
// The fan request goes just before and just after the LED frame
// (writeLED): the unit's fan handler takes the LED frame as a request for
// whatever percent it decoded last, possibly the other blade's, or 0
// after a restart.
func (c *Client) SetLED(r, g, b uint8) error {
	c.mu.Lock()
	led := [3]uint8{r, g, b}
	c.lastLED = &led
	p, fan := c.port, c.lastFan
	c.mu.Unlock()
	if p == nil {
		return ErrNotConnected
	}
	return c.writeLED(p, led, fan)
}

func (c *Client) send(p *port, f smartfan.Frame) error {
	if p == nil {
		return ErrNotConnected
	}
	return c.write(p, f)
}

// write sends one frame; a failed write closes the port so Run reconnects.
func (c *Client) write(p *port, f smartfan.Frame) error {
	var buf [smartfan.MaxEncodedLen]byte
	p.wmu.Lock()
	_, err := p.rw.Write(smartfan.Append(buf[:0], f))
	p.wmu.Unlock()
	if err == nil {
		c.mu.Lock()
		c.stats.Sent++
		c.mu.Unlock()
	}
	if err != nil {
		p.close()
		return fmt.Errorf("smart fan unit: sending %v: %w", f, err)
	}
	return nil
}

// Stats returns link counters.
func (c *Client) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.Stats = c.decStats
	if c.dec != nil {
		d := c.dec.Stats()
		s.Frames += d.Frames
		s.ChecksumErrors += d.ChecksumErrors
		s.Malformed += d.Malformed
		s.Skipped += d.Skipped
	}
	return s
}
