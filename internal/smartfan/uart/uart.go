// Package uart is the agent's link to the smart fan unit: it opens the UART
// (115200 8N1), decodes the unit's reports with the smartfan codec, keeps the
// latest airflow temperature and fan RPM, forwards button presses, sends fan
// and LED commands, and reconnects after errors, replaying the last commands
// so a unit that rebooted comes back to the state the agent wants.
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
	// RetryInterval is the pause between reconnect attempts.
	RetryInterval time.Duration
	// StaleAfter is how long a reading stays valid.
	StaleAfter time.Duration
}

// Stats describe the link.
type Stats struct {
	smartfan.Stats
	Connects       uint64
	UnknownFrames  uint64
	DroppedButtons uint64
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

	mu       sync.Mutex
	port     *port
	seenOnce bool
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
	for ctx.Err() == nil {
		rw, err := c.o.Dial()
		if err != nil {
			if !failing {
				c.o.Logger.Warn("smart fan unit: cannot open UART; retrying", "err", err, "every", c.o.RetryInterval)
				failing = true
			}
			c.wait(ctx)
			continue
		}
		if failing {
			c.o.Logger.Info("smart fan unit: UART open again")
			failing = false
		}
		err = c.serve(ctx, &port{rw: rw})
		if ctx.Err() != nil {
			return
		}
		c.o.Logger.Warn("smart fan unit: UART failed; reconnecting", "err", err)
		c.wait(ctx)
	}
}

func (c *Client) wait(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-c.o.Clock.After(c.o.RetryInterval):
	}
}

// serve reads one connection until it fails.
func (c *Client) serve(ctx context.Context, p *port) error {
	stop := context.AfterFunc(ctx, p.close) // unblocks Read on shutdown
	defer stop()
	defer p.close()

	dec := &smartfan.Decoder{}
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
	// agent last asked for.
	if fan != nil {
		if err := c.write(p, smartfan.SetFanPercent(*fan)); err != nil {
			return err
		}
	}
	if led != nil {
		if err := c.write(p, smartfan.SetLED(led[0], led[1], led[2])); err != nil {
			return err
		}
	}

	var buf [256]byte
	for {
		n, err := p.rw.Read(buf[:])
		if n > 0 {
			c.mu.Lock()
			dec.Feed(buf[:n], c.handleLocked)
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

// handleLocked applies one frame; the caller holds mu.
func (c *Client) handleLocked(f smartfan.Frame) {
	now := c.o.Clock.Now()
	if !c.seenOnce {
		c.seenOnce = true
		close(c.seen)
	}
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
func (c *Client) SetLED(r, g, b uint8) error {
	c.mu.Lock()
	c.lastLED = &[3]uint8{r, g, b}
	p := c.port
	c.mu.Unlock()
	return c.send(p, smartfan.SetLED(r, g, b))
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
