// Package gpiosim creates simulated GPIO chips with the kernel's gpio-sim
// driver (configfs) for tests that run inside a guest kernel: chips with any
// label and line names, whose inputs a test drives by writing the simulated
// pull and whose outputs it reads back. Edges made this way are real kernel
// edge events, with kernel timestamps and kernel debounce.
//
// Layout (Documentation/admin-guide/gpio/gpio-sim.rst, seen in 6.12):
// /sys/kernel/config/gpio-sim/<dev>/{live,dev_name}, a bank <dev>/<bank>/
// with label, num_lines and read-only chip_name, lines <bank>/line<N>/name;
// per line /sys/devices/platform/<dev_name>/<chip_name>/sim_gpio<N>/{pull,value}.
//
// A devicetree can make gpio-sim chips too (a node with compatible
// "gpio-simulator", one child per bank): the arm64 guests' scenarios make
// the blade's GPIO controller so, and Board finds it.
package gpiosim

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kubeblade/kubeblade/internal/testwait"
	"github.com/warthog618/go-gpiocdev"
)

// DeviceTreeDevice is the platform device of the guests' devicetree
// gpio-sim node (package scenario names the node so).
const DeviceTreeDevice = "gpio-sim"

// Board is the blade's GPIO chip labelled b.Label: the chip the machine's
// devicetree made, when it made one with that label, with every line's
// pull put back to pull-down (what a new chip has) since earlier tests
// leave theirs; otherwise a new configfs chip with bank b, removed when the
// test ends.
func Board(t testing.TB, id string, b Bank) *Chip {
	t.Helper()
	if c := probed(b.Label); c != nil {
		lines, _ := filepath.Glob(filepath.Join("/sys/devices/platform", c.DevName, c.Name, "sim_gpio*"))
		for _, l := range lines {
			if err := write(filepath.Join(l, "pull"), "pull-down"); err != nil {
				t.Fatalf("resetting %s: %v", l, err)
			}
		}
		return c
	}
	return New(t, id, b)
}

// probed is the devicetree's gpio-sim chip labelled label, or nil.
func probed(label string) *Chip {
	dirs, _ := filepath.Glob(filepath.Join("/sys/devices/platform", DeviceTreeDevice, "gpiochip*"))
	for _, d := range dirs {
		name := filepath.Base(d)
		gc, err := gpiocdev.NewChip("/dev/" + name)
		if err != nil {
			continue
		}
		l := gc.Label
		gc.Close()
		if l == label {
			return &Chip{DevName: DeviceTreeDevice, Name: name, Label: l}
		}
	}
	return nil
}

// ConfigRoot is gpio-sim's configfs directory.
const ConfigRoot = "/sys/kernel/config/gpio-sim"

// Available reports why gpio-sim cannot be used here, or nil.
func Available() error {
	if _, err := os.Stat(ConfigRoot); err != nil {
		return fmt.Errorf("gpio-sim (CONFIG_GPIO_SIM with configfs mounted): %w", err)
	}
	return nil
}

// Bank describes one simulated chip.
type Bank struct {
	// Label is the chip label userspace sees, e.g. pinctrl-bcm2711.
	Label string
	// Lines is the number of lines.
	Lines int
	// Names gives lines their devicetree-style names, e.g. 20 → GPIO20.
	Names map[int]string
}

// Chip is a live simulated chip.
type Chip struct {
	cfg string
	// DevName is the platform device, e.g. gpio-sim.0.
	DevName string
	// Name is the GPIO chip, e.g. gpiochip2.
	Name  string
	Label string
}

// New creates and enables a chip; it is removed when the test ends.
func New(t testing.TB, id string, b Bank) *Chip {
	t.Helper()
	c, err := Create(id, b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Remove(); err != nil {
			t.Errorf("removing gpio-sim chip %s: %v", id, err)
		}
	})
	return c
}

// Create makes a live chip named id under ConfigRoot.
func Create(id string, b Bank) (*Chip, error) {
	dev := filepath.Join(ConfigRoot, id)
	bank := filepath.Join(dev, "bank0")
	if err := os.Mkdir(dev, 0o755); err != nil {
		return nil, err
	}
	c := &Chip{cfg: dev, Label: b.Label}
	steps := []func() error{
		func() error { return os.Mkdir(bank, 0o755) },
		func() error { return write(filepath.Join(bank, "label"), b.Label) },
		func() error { return write(filepath.Join(bank, "num_lines"), strconv.Itoa(b.Lines)) },
	}
	for off, name := range b.Names {
		line := filepath.Join(bank, fmt.Sprintf("line%d", off))
		steps = append(steps,
			func() error { return os.Mkdir(line, 0o755) },
			func() error { return write(filepath.Join(line, "name"), name) })
	}
	steps = append(steps, func() error { return write(filepath.Join(dev, "live"), "1") })
	for _, s := range steps {
		if err := s(); err != nil {
			c.Remove()
			return nil, fmt.Errorf("gpio-sim %s: %w", id, err)
		}
	}
	var err error
	if c.DevName, err = read(filepath.Join(dev, "dev_name")); err != nil {
		return nil, err
	}
	if c.Name, err = read(filepath.Join(bank, "chip_name")); err != nil {
		return nil, err
	}
	return c, nil
}

// Remove takes the chip offline and deletes its configuration. A chip the
// devicetree made stays.
func (c *Chip) Remove() error {
	if c.cfg == "" {
		return nil
	}
	var errs []error
	if _, err := os.Stat(filepath.Join(c.cfg, "live")); err == nil {
		if v, _ := read(filepath.Join(c.cfg, "live")); v == "1" {
			errs = append(errs, write(filepath.Join(c.cfg, "live"), "0"))
		}
	}
	// configfs removes directories bottom-up, one by one.
	lines, _ := filepath.Glob(filepath.Join(c.cfg, "bank0", "line*"))
	for _, l := range lines {
		os.Remove(filepath.Join(l, "hog"))
		errs = append(errs, os.Remove(l))
	}
	os.Remove(filepath.Join(c.cfg, "bank0"))
	errs = append(errs, os.Remove(c.cfg))
	return errors.Join(errs...)
}

// DevPath is the chip's character device.
func (c *Chip) DevPath() string { return "/dev/" + c.Name }

func (c *Chip) lineDir(offset int) string {
	return filepath.Join("/sys/devices/platform", c.DevName, c.Name, fmt.Sprintf("sim_gpio%d", offset))
}

// SetPull drives an input from outside: up is a high level, down a low
// one. A line that is requested as an output ignores it.
func (c *Chip) SetPull(offset int, up bool) error {
	v := "pull-down"
	if up {
		v = "pull-up"
	}
	return write(filepath.Join(c.lineDir(offset), "pull"), v)
}

// Pull reads the simulated pull: what the line falls back to when nobody
// drives it, and what an input request's bias set.
func (c *Chip) Pull(offset int) (string, error) {
	return read(filepath.Join(c.lineDir(offset), "pull"))
}

// Value reads the line's level as the simulator sees it: an output's
// driven value, or otherwise the pull.
func (c *Chip) Value(offset int) (int, error) {
	s, err := read(filepath.Join(c.lineDir(offset), "value"))
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(s)
}

func write(path, v string) error {
	return os.WriteFile(path, []byte(v), 0)
}

func read(path string) (string, error) {
	b, err := os.ReadFile(path)
	return strings.TrimSpace(string(b)), err
}

// DebugFile is gpiolib's view of every chip's requested lines (debugfs).
const DebugFile = "/sys/kernel/debug/gpio"

// Held reads, from DebugFile, the line that consumer holds on any chip,
// gpio-sim or not (the PL061 under a pwm-gpio chip, say): whether it is an
// output and whether it reads high at this moment (gpiolib_dbg_show prints
// " gpio-N (name|consumer) out hi"). Consumers longer than 20 characters
// are cut there by the kernel.
func Held(consumer string) (out, high bool, err error) {
	b, err := os.ReadFile(DebugFile)
	if err != nil {
		return false, false, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		open, close := strings.Index(line, "("), strings.Index(line, ")")
		if !strings.HasPrefix(strings.TrimSpace(line), "gpio-") || open < 0 || close < open {
			continue
		}
		_, who, ok := strings.Cut(line[open+1:close], "|")
		if !ok || strings.TrimSpace(who) != consumer {
			continue
		}
		f := strings.Fields(line[close+1:])
		if len(f) < 2 {
			return false, false, fmt.Errorf("%s: cannot read %q", DebugFile, line)
		}
		return f[0] == "out", f[1] == "hi", nil
	}
	return false, false, fmt.Errorf("%s: no line held by %q", DebugFile, consumer)
}

// WaitHeldHigh waits until the line consumer holds is an output reading
// high, and fails t if it is not within timeout. A pwm-gpio chip that is
// running applies a new state only at the end of its current period: its
// apply callback, while the hrtimer runs, stores the state as next_state
// and sets changing, and the timer takes it over after the low phase
// (torvalds/linux drivers/pwm/pwm-gpio.c, pwm_gpio_apply and
// pwm_gpio_timer, v6.12). So right after a change to 100 % the pin may
// still be in the old duty cycle's low phase, for longer under TCG, whose
// hrtimers are slow.
func WaitHeldHigh(t testing.TB, consumer string, timeout time.Duration) {
	t.Helper()
	testwait.EventuallyEvery(t, timeout, time.Millisecond, consumer+"'s line driven high", func(context.Context) (bool, string) {
		out, high, err := Held(consumer)
		if err != nil {
			return false, err.Error()
		}
		return out && high, fmt.Sprintf("out %v high %v", out, high)
	})
}
