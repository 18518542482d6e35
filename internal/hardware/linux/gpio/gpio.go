// Package gpio is the small port through which the linux backend uses GPIO
// lines: open a chip, resolve a line by name, request it as an input (with
// edge events and kernel debounce) or as an output. The real implementation
// speaks the character device v2 uAPI through go-gpiocdev; tests use the fake
// in gpiotest, so nothing here needs /dev/gpiochip* to be tested.
package gpio

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Edge selects which transitions raise events.
type Edge uint8

const (
	EdgeNone Edge = iota
	EdgeRising
	EdgeFalling
	EdgeBoth
)

// Bias selects the line's internal pull.
type Bias uint8

const (
	BiasAsIs Bias = iota
	BiasPullUp
	BiasPullDown
	BiasDisabled
)

// Event is one edge as the kernel saw it.
type Event struct {
	Offset int
	// Time is the kernel's CLOCK_MONOTONIC timestamp of the edge; compare
	// it with Driver.Now, not with wall time.
	Time time.Duration
	// Rising is true for a low→high transition of the physical level.
	Rising bool
}

// Request describes how to claim one line.
type Request struct {
	Offset int
	// Consumer names the claimant in the kernel's line info.
	Consumer string
	// Output requests the line as an output driven to Initial (0 or 1).
	Output  bool
	Initial int
	// Bias is the line's pull, for outputs as well as inputs: pin
	// controllers keep it when they release a line (pinctrl-bcm2835's
	// bcm2835_pmx_free turns a released output into an input and leaves
	// its pull), and the kernel releases a process's lines when it dies,
	// however it dies. So it says what a released output reads.
	Bias Bias
	// Edge and Handler request edge events; Handler runs on the port's
	// event goroutine and must not block.
	Edge    Edge
	Handler func(Event)
	// Debounce asks the kernel to debounce the input (it falls back to
	// software debounce in gpiolib-cdev where the pin controller has none).
	Debounce time.Duration
}

// Line is a claimed line.
type Line interface {
	// Value reads the physical level, 0 or 1.
	Value() (int, error)
	// SetValue drives an output line.
	SetValue(v int) error
	// SetInput turns the line into an input with bias. Before a release
	// it chooses what the pin does afterwards: mainline pin controllers
	// return a released output to an input but keep its pull.
	SetInput(bias Bias) error
	Close() error
}

// LineInfo is what the kernel says about a line, claimed or not.
type LineInfo struct {
	Name string
	// Used is true when anyone holds the line: a process, a kernel
	// driver, or the pin controller (a pin muxed to a peripheral).
	Used bool
	// Consumer names the holder: a process's consumer label, or the
	// device name of a kernel driver such as pwm-gpio.
	Consumer string
}

// Chip is an opened GPIO chip.
type Chip interface {
	// Name is the kernel name, e.g. gpiochip0.
	Name() string
	// Label is the driver's label, e.g. pinctrl-bcm2711.
	Label() string
	// Lines is the number of lines on the chip.
	Lines() int
	// FindLine returns the offset of the line with this devicetree name.
	FindLine(name string) (int, error)
	// LineInfo describes the line at offset.
	LineInfo(offset int) (LineInfo, error)
	Request(r Request) (Line, error)
	Close() error
}

// Driver opens chips and tells the time in the clock event timestamps use.
type Driver interface {
	Open(path string) (Chip, error)
	// Now is CLOCK_MONOTONIC, the clock of Event.Time.
	Now() time.Duration
}

// ErrNoChip is returned when no chip matches.
var ErrNoChip = errors.New("no matching GPIO chip")

// ChipPaths lists devRoot/gpiochipN in numeric order.
func ChipPaths(devRoot string) ([]string, error) {
	matches, err := filepath.Glob(filepath.Join(devRoot, "gpiochip*"))
	if err != nil {
		return nil, err
	}
	num := func(p string) int {
		n, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(p), "gpiochip"))
		if err != nil {
			return 1 << 30
		}
		return n
	}
	sort.Slice(matches, func(i, j int) bool { return num(matches[i]) < num(matches[j]) })
	return matches, nil
}

// FindChip opens the first chip under devRoot whose name or label equals one
// of want, in the order of want (so a preferred label wins over a fallback).
// Chips that do not match are closed.
func FindChip(d Driver, devRoot string, want ...string) (Chip, error) {
	paths, err := ChipPaths(devRoot)
	if err != nil {
		return nil, err
	}
	var chips []Chip
	var errs []error
	for _, p := range paths {
		c, err := d.Open(p)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p, err))
			continue
		}
		chips = append(chips, c)
	}
	var found Chip
	for _, w := range want {
		for _, c := range chips {
			if c.Label() == w || c.Name() == w || filepath.Base(w) == c.Name() {
				found = c
				break
			}
		}
		if found != nil {
			break
		}
	}
	for _, c := range chips {
		if c != found {
			c.Close()
		}
	}
	if found == nil {
		errs = append([]error{fmt.Errorf("%w under %s (wanted %s)", ErrNoChip, devRoot, strings.Join(want, " or "))}, errs...)
		return nil, errors.Join(errs...)
	}
	return found, nil
}

// Labels returns the labels of every chip under devRoot that opens, for
// detection when the devicetree is hidden.
func Labels(d Driver, devRoot string) []string {
	paths, _ := ChipPaths(devRoot)
	var out []string
	for _, p := range paths {
		c, err := d.Open(p)
		if err != nil {
			continue
		}
		out = append(out, c.Label())
		c.Close()
	}
	return out
}

// LineSpec names a line: a devicetree line name (GPIO20), a bare offset
// ("20"), or both — the name is tried first and the offset is the fallback
// for boards whose devicetree leaves lines unnamed.
type LineSpec struct {
	Name   string
	Offset int
}

// ParseLineSpec reads a config value: digits are an offset, anything else a
// name. An empty value gives def.
func ParseLineSpec(s string, def LineSpec) LineSpec {
	s = strings.TrimSpace(s)
	if s == "" {
		return def
	}
	if n, err := strconv.Atoi(s); err == nil && n >= 0 {
		return LineSpec{Offset: n}
	}
	return LineSpec{Name: s, Offset: -1}
}

func (s LineSpec) String() string {
	switch {
	case s.Name != "" && s.Offset >= 0:
		return fmt.Sprintf("%s (offset %d)", s.Name, s.Offset)
	case s.Name != "":
		return s.Name
	default:
		return strconv.Itoa(s.Offset)
	}
}

// Resolve finds the offset of s on c.
func Resolve(c Chip, s LineSpec) (int, error) {
	if s.Name != "" {
		off, err := c.FindLine(s.Name)
		if err == nil {
			return off, nil
		}
		if s.Offset < 0 {
			return 0, fmt.Errorf("line %q on %s: %w", s.Name, c.Name(), err)
		}
	}
	if s.Offset < 0 || s.Offset >= c.Lines() {
		return 0, fmt.Errorf("line %s: offset outside %s's %d lines", s, c.Name(), c.Lines())
	}
	return s.Offset, nil
}

// statChip reports whether path looks like a character device; the
// gpiocdev adapter uses it to give a clear error before the ioctl does.
func statChip(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if fi.Mode()&os.ModeCharDevice == 0 {
		return fmt.Errorf("%s is not a character device", path)
	}
	return nil
}
