// Package gpiotest is a fake GPIO port for tests: chips with labels and
// named lines, inputs whose level a test sets, outputs a test reads, and
// edges injected with chosen kernel timestamps.
package gpiotest

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/kubeblade/kubeblade/internal/hardware/linux/gpio"
)

// Driver is a fake gpio.Driver. Chips are keyed by path.
type Driver struct {
	mu    sync.Mutex
	chips map[string]*Chip
	now   time.Duration
}

var _ gpio.Driver = (*Driver)(nil)

// NewDriver returns an empty fake.
func NewDriver() *Driver { return &Driver{chips: map[string]*Chip{}} }

// AddChip registers a chip at path (which must also exist in the test's dev
// tree for gpio.ChipPaths to list it).
func (d *Driver) AddChip(path, name, label string, lines int) *Chip {
	d.mu.Lock()
	defer d.mu.Unlock()
	c := &Chip{name: name, label: label, lines: lines, names: map[string]int{}, reqs: map[int]*Line{}}
	d.chips[path] = c
	return c
}

// Open implements gpio.Driver.
func (d *Driver) Open(path string) (gpio.Chip, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	c, ok := d.chips[path]
	if !ok {
		return nil, fmt.Errorf("fake: no chip at %s", path)
	}
	c.mu.Lock()
	c.opens++
	c.closed = false
	c.mu.Unlock()
	return c, nil
}

// Now implements gpio.Driver.
func (d *Driver) Now() time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.now
}

// SetNow sets the fake monotonic clock.
func (d *Driver) SetNow(t time.Duration) {
	d.mu.Lock()
	d.now = t
	d.mu.Unlock()
}

// Chip is a fake chip.
type Chip struct {
	mu    sync.Mutex
	name  string
	label string
	lines int
	names map[string]int
	reqs  map[int]*Line
	busy  map[int]error
	// holders are lines held by someone else (a kernel driver).
	holders map[int]string
	// pulls are the pins' pulls (1 up, 0 down), kept across requests as
	// a pin controller keeps them; a pin never set is pulled down.
	pulls  map[int]int
	opens  int
	closed bool
}

// NameLine gives a line a devicetree name.
func (c *Chip) NameLine(offset int, name string) *Chip {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.names[name] = offset
	return c
}

// FailRequest makes requests for offset fail with err (a line claimed by
// a kernel driver, say).
func (c *Chip) FailRequest(offset int, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.busy == nil {
		c.busy = map[int]error{}
	}
	c.busy[offset] = err
}

func (c *Chip) Name() string  { return c.name }
func (c *Chip) Label() string { return c.label }
func (c *Chip) Lines() int    { return c.lines }

// Close implements gpio.Chip.
func (c *Chip) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	return nil
}

// Closed reports whether the chip was closed after its last Open.
func (c *Chip) Closed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// FindLine implements gpio.Chip.
func (c *Chip) FindLine(name string) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	off, ok := c.names[name]
	if !ok {
		return 0, fmt.Errorf("fake: no line named %q", name)
	}
	return off, nil
}

// Hold marks offset as held by a kernel driver named consumer (pwm-gpio,
// say): requests fail as busy and LineInfo reports the holder.
func (c *Chip) Hold(offset int, consumer string) *Chip {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.holders == nil {
		c.holders = map[int]string{}
	}
	c.holders[offset] = consumer
	return c
}

// LineInfo implements gpio.Chip.
func (c *Chip) LineInfo(offset int) (gpio.LineInfo, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if offset < 0 || offset >= c.lines {
		return gpio.LineInfo{}, fmt.Errorf("fake: offset %d out of range", offset)
	}
	var li gpio.LineInfo
	for n, o := range c.names {
		if o == offset {
			li.Name = n
		}
	}
	if h, ok := c.holders[offset]; ok {
		li.Used, li.Consumer = true, h
	} else if l, ok := c.reqs[offset]; ok && !l.Closed() {
		li.Used, li.Consumer = true, l.req.Consumer
	}
	return li, nil
}

// Request implements gpio.Chip.
func (c *Chip) Request(r gpio.Request) (gpio.Line, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r.Offset < 0 || r.Offset >= c.lines {
		return nil, fmt.Errorf("fake: offset %d out of range", r.Offset)
	}
	if err := c.busy[r.Offset]; err != nil {
		return nil, err
	}
	if h, ok := c.holders[r.Offset]; ok {
		return nil, fmt.Errorf("fake: line held by %s: device or resource busy", h)
	}
	if l, ok := c.reqs[r.Offset]; ok && !l.closed {
		return nil, errors.New("fake: line busy")
	}
	l := &Line{chip: c, req: r, value: r.Initial}
	// The request's bias sets the pin's pull, outputs included, as
	// gpiolib's gpiod_direction_output does through gpio_set_bias.
	c.setPull(r.Offset, r.Bias)
	if !r.Output {
		l.value = c.pulls[r.Offset]
	}
	c.reqs[r.Offset] = l
	return l, nil
}

// setPull records bias on offset; the caller holds c.mu.
func (c *Chip) setPull(offset int, b gpio.Bias) {
	if c.pulls == nil {
		c.pulls = map[int]int{}
	}
	switch b {
	case gpio.BiasPullUp:
		c.pulls[offset] = 1
	case gpio.BiasPullDown, gpio.BiasDisabled:
		c.pulls[offset] = 0
	}
}

// Level is what the pin reads from outside: a held line's value, or, once
// the line is released, its pull. That models what a real pin controller
// does when it releases a line (the kernel releases a dead process's
// lines): gpio-sim's gpio_sim_free sets the value to the pull, and
// mainline pinctrl-bcm2835's bcm2835_pmx_free turns an output into an
// input that keeps its pull (unless persist_gpio_outputs=1).
func (c *Chip) Level(offset int) int {
	c.mu.Lock()
	l := c.reqs[offset]
	pull := c.pulls[offset]
	c.mu.Unlock()
	if l != nil && !l.Closed() {
		v, _ := l.Value()
		return v
	}
	return pull
}

// Line returns the request on offset, or nil.
func (c *Chip) Line(offset int) *Line {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reqs[offset]
}

// Line is a fake claimed line.
type Line struct {
	mu     sync.Mutex
	chip   *Chip
	req    gpio.Request
	value  int
	closed bool
	sets   []int
}

// Request returns how the line was claimed.
func (l *Line) Request() gpio.Request {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.req
}

// Value implements gpio.Line.
func (l *Line) Value() (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0, errors.New("fake: line closed")
	}
	return l.value, nil
}

// SetValue implements gpio.Line.
func (l *Line) SetValue(v int) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return errors.New("fake: line closed")
	}
	if !l.req.Output {
		return errors.New("fake: line is an input")
	}
	l.value = v
	l.sets = append(l.sets, v)
	return nil
}

// SetInput implements gpio.Line.
func (l *Line) SetInput(b gpio.Bias) error {
	// The chip's lock is taken first, as in Chip.LineInfo.
	l.chip.mu.Lock()
	defer l.chip.mu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return errors.New("fake: line closed")
	}
	l.req.Output, l.req.Bias = false, b
	l.chip.setPull(l.req.Offset, b)
	l.value = l.chip.pulls[l.req.Offset]
	return nil
}

// Close implements gpio.Line.
func (l *Line) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	return nil
}

// Closed reports whether the line was released.
func (l *Line) Closed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closed
}

// SetLevel sets what an input reads, without raising an event.
func (l *Line) SetLevel(v int) {
	l.mu.Lock()
	l.value = v
	l.mu.Unlock()
}

// Sets returns every value written to an output, in order.
func (l *Line) Sets() []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]int(nil), l.sets...)
}

// Edge delivers one edge with kernel timestamp ts to the line's handler,
// synchronously, as the gpiocdev event goroutine would. It reports false
// when the line has no handler, is closed, or the edge does not match the
// requested direction (the kernel would not have reported it).
func (l *Line) Edge(ts time.Duration, rising bool) bool {
	l.mu.Lock()
	r, closed := l.req, l.closed
	l.mu.Unlock()
	if closed || r.Handler == nil {
		return false
	}
	switch {
	case r.Edge == gpio.EdgeBoth:
	case r.Edge == gpio.EdgeRising && rising:
	case r.Edge == gpio.EdgeFalling && !rising:
	default:
		return false
	}
	r.Handler(gpio.Event{Offset: r.Offset, Time: ts, Rising: rising})
	return true
}
