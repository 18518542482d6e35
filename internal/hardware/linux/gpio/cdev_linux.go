//go:build linux

package gpio

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/warthog618/go-gpiocdev"
	"golang.org/x/sys/unix"
)

// CDev is the Driver on the GPIO character device, v2 uAPI.
type CDev struct{}

var _ Driver = CDev{}

// Open implements Driver. go-gpiocdev insists on chips living under /dev
// (it also checks /sys/bus/gpio), so a devRoot elsewhere cannot be used for
// real chips; containers mount the host's /dev there anyway.
func (CDev) Open(path string) (Chip, error) {
	if err := statChip(path); err != nil {
		return nil, err
	}
	if !strings.HasPrefix(path, "/dev/") {
		return nil, fmt.Errorf("%s: the GPIO character device must be under /dev", path)
	}
	c, err := gpiocdev.NewChip(path, gpiocdev.WithConsumer("kubeblade"), gpiocdev.WithABIVersion(2))
	if err != nil {
		return nil, err
	}
	return &cdevChip{c: c}, nil
}

// Now implements Driver.
func (CDev) Now() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

type cdevChip struct{ c *gpiocdev.Chip }

func (c *cdevChip) Name() string  { return c.c.Name }
func (c *cdevChip) Label() string { return c.c.Label }
func (c *cdevChip) Lines() int    { return c.c.Lines() }
func (c *cdevChip) Close() error  { return c.c.Close() }

func (c *cdevChip) FindLine(name string) (int, error) {
	off, err := c.c.FindLine(name)
	if errors.Is(err, gpiocdev.ErrNotFound) {
		return 0, fmt.Errorf("no line named %q", name)
	}
	return off, err
}

func (c *cdevChip) LineInfo(offset int) (LineInfo, error) {
	li, err := c.c.LineInfo(offset)
	if err != nil {
		return LineInfo{}, err
	}
	return LineInfo{Name: li.Name, Used: li.Used, Consumer: li.Consumer}, nil
}

func (c *cdevChip) Request(r Request) (Line, error) {
	opts := []gpiocdev.LineReqOption{}
	if r.Consumer != "" {
		opts = append(opts, gpiocdev.WithConsumer(r.Consumer))
	}
	// The bias goes with outputs too (the v2 uAPI allows it with either
	// direction, gpiolib-cdev's gpio_v2_line_flags_validate): it is what
	// the pin reads once the line is released, which the kernel does
	// when the process dies however it dies.
	opts = append(opts, biasOption(r.Bias))
	if r.Output {
		opts = append(opts, gpiocdev.AsOutput(r.Initial))
	} else {
		opts = append(opts, gpiocdev.AsInput)
		if r.Debounce > 0 {
			opts = append(opts, gpiocdev.WithDebounce(r.Debounce))
		}
		if r.Edge != EdgeNone && r.Handler != nil {
			switch r.Edge {
			case EdgeRising:
				opts = append(opts, gpiocdev.WithRisingEdge)
			case EdgeFalling:
				opts = append(opts, gpiocdev.WithFallingEdge)
			case EdgeBoth:
				opts = append(opts, gpiocdev.WithBothEdges)
			}
			h := r.Handler
			opts = append(opts,
				// Monotonic timestamps, so intervals survive NTP steps
				// and match Driver.Now.
				gpiocdev.WithMonotonicEventClock,
				gpiocdev.WithEventHandler(func(ev gpiocdev.LineEvent) {
					h(Event{Offset: ev.Offset, Time: ev.Timestamp, Rising: ev.Type == gpiocdev.LineEventRisingEdge})
				}))
		}
	}
	l, err := c.c.RequestLine(r.Offset, opts...)
	if err != nil {
		return nil, err
	}
	return &cdevLine{Line: l}, nil
}

type cdevLine struct{ *gpiocdev.Line }

func (l *cdevLine) SetInput(b Bias) error {
	return l.Reconfigure(gpiocdev.AsInput, biasOption(b))
}

// biasOption is go-gpiocdev's option for b, which serves line requests
// and reconfiguration alike; BiasAsIs leaves the pin's pull alone.
func biasOption(b Bias) gpiocdev.LineBias {
	switch b {
	case BiasPullUp:
		return gpiocdev.WithPullUp
	case BiasPullDown:
		return gpiocdev.WithPullDown
	case BiasDisabled:
		return gpiocdev.WithBiasDisabled
	}
	return gpiocdev.WithBiasAsIs
}
