//go:build guest

// The linux backend against a real kernel: these tests run as the init of
// a QEMU guest booting the rig's 6.12 kernel (TestGuestKernel on the host
// starts it, once per scenario: make hwtest, make hwtest-arm64). The GPIO
// chips are gpio-sim chips labelled and named like a CM4's and a CM5's —
// made through configfs in the x86_64 guest, made by the blade's devicetree
// in the arm64 guests — so everything below the backend (the character
// device, biases, debounce, edge timestamps, what a release leaves behind,
// the devicetree the platform is detected from) is the kernel's own
// behaviour. The checks are the same on every scenario; what differs is
// what the scenario says the machine is.

package linux_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	agentconfigv1 "github.com/kubeblade/kubeblade/api/agentconfig/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/guest/gpiosim"
	"github.com/kubeblade/kubeblade/internal/guest/guestinit"
	"github.com/kubeblade/kubeblade/internal/guest/scenario"
	"github.com/kubeblade/kubeblade/internal/hardware"
	"github.com/kubeblade/kubeblade/internal/hardware/linux"
	"github.com/kubeblade/kubeblade/internal/hardware/linux/gpio"
	"github.com/kubeblade/kubeblade/internal/hardware/linux/sysfs"
	"github.com/kubeblade/kubeblade/internal/testreq"
	"github.com/kubeblade/kubeblade/internal/testwait"
)

func TestMain(m *testing.M) { guestinit.Main(m) }

// bladeNames are the blade's lines, named as the Raspberry Pi devicetrees
// name them (gpio-line-names), at their offsets.
var bladeNames = map[int]string{12: "GPIO12", 13: "GPIO13", 18: "GPIO18", 20: "GPIO20", 21: "GPIO21", 23: "GPIO23"}

func needSim(t *testing.T) {
	t.Helper()
	testreq.Need(t, gpiosim.Available() == nil, "%v", gpiosim.Available())
}

func current(t *testing.T) scenario.Scenario {
	t.Helper()
	sc, err := scenario.Current()
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// board is the blade's GPIO chip for a Raspberry Pi blade test: the
// scenario's own (its devicetree's) when it has one, else a configfs chip
// labelled label, as a CM4's or a CM5's.
func board(t *testing.T, sc scenario.Scenario, id, label string) *gpiosim.Chip {
	t.Helper()
	if sc.Board != nil {
		label = sc.Board.Label
	}
	return gpiosim.Board(t, id, gpiosim.Bank{Label: label, Lines: 58, Names: bladeNames})
}

// realConfig is the backend's config on the guest's real /sys and /dev.
func realConfig() agentconfigv1.LinuxHardwareConfig {
	return agentconfigv1.LinuxHardwareConfig{FanUnit: "standard"}
}

func openReal(t *testing.T, o linux.Options) *linux.Backend {
	t.Helper()
	b, err := linux.Open(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// lineInfo reads the kernel's view of a line through the character device.
func lineInfo(t *testing.T, sim *gpiosim.Chip, offset int) gpio.LineInfo {
	t.Helper()
	c, err := gpio.CDev{}.Open(sim.DevPath())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	li, err := c.LineInfo(offset)
	if err != nil {
		t.Fatal(err)
	}
	return li
}

// maskFirmware hides /sys/firmware (and with it /proc/device-tree, a link
// into it) under an empty read-only tmpfs, as container runtimes mask it
// (runc's maskedPaths), until the test ends.
func maskFirmware(t *testing.T) {
	t.Helper()
	if err := unix.Mount("tmpfs", "/sys/firmware", "tmpfs", unix.MS_RDONLY, ""); err != nil {
		t.Fatalf("masking /sys/firmware: %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount("/sys/firmware", 0); err != nil {
			t.Errorf("unmasking /sys/firmware: %v", err)
		}
	})
}

// TestKernelDetection: the platform comes from the devicetree the machine
// booted with — /sys/firmware/devicetree/base first, /proc/device-tree
// second — and, with /sys/firmware masked as in a container (or no
// devicetree, the x86 guest), from the GPIO chip's label.
func TestKernelDetection(t *testing.T) {
	needSim(t)
	sc := current(t)
	if sc.DeviceTree == nil {
		// No devicetree: what the labels say, and nothing for others.
		if _, err := os.Stat("/sys/firmware/devicetree/base/compatible"); err == nil {
			t.Fatal("this guest's devicetree names a machine; the scenario has none")
		}
		for _, tc := range []struct{ label, soc string }{
			{linux.LabelBCM2711, linux.SoCBCM2711},
			{linux.LabelRP1, linux.SoCBCM2712},
			{"gpio-mockup-Z", ""},
		} {
			t.Run(tc.label, func(t *testing.T) {
				gpiosim.New(t, "detect", gpiosim.Bank{Label: tc.label, Lines: 54, Names: bladeNames})
				p := linux.Detect("/sys", "/proc", "/dev", gpio.CDev{})
				if p.SoC != tc.soc || p.IsBlade != (tc.soc != "") || p.Source != "gpio chip label" {
					t.Fatalf("Detect = %+v, want SoC %q from the chip label", p, tc.soc)
				}
			})
		}
		return
	}
	for _, tc := range []struct{ name, sysfs, source string }{
		{"sysfs", "/sys", "/sys/firmware/devicetree/base/compatible"},
		// A sysfs root without firmware: the /proc link is read.
		{"proc", "/nonexistent", "/proc/device-tree/compatible"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := linux.Detect(tc.sysfs, "/proc", "/dev", gpio.CDev{})
			if p.SoC != sc.SoC || p.IsBlade != sc.IsBlade || p.Source != tc.source || p.Model != sc.DeviceTree.Model {
				t.Fatalf("Detect = %+v, want SoC %s, blade %v, model %q from %s", p, sc.SoC, sc.IsBlade, sc.DeviceTree.Model, tc.source)
			}
			t.Logf("%s: %s", p.Source, p.Detail)
		})
	}
	t.Run("firmware masked", func(t *testing.T) {
		maskFirmware(t)
		if _, err := os.Stat("/proc/device-tree/compatible"); err == nil {
			t.Fatal("/proc/device-tree still readable under the mask")
		}
		p := linux.Detect("/sys", "/proc", "/dev", gpio.CDev{})
		if p.Source != "gpio chip label" {
			t.Fatalf("Detect = %+v, want the answer from the GPIO chip labels", p)
		}
		if sc.LabelDetectable {
			if p.SoC != sc.SoC || !p.IsBlade {
				t.Fatalf("Detect = %+v, want SoC %s from the label %s", p, sc.SoC, sc.Board.Label)
			}
		} else if p.IsBlade || !strings.Contains(p.Detail, sc.Board.Label) {
			// Rockchip's labels are every Rockchip board's: no blade
			// can be told from them, and the agent says what it saw.
			t.Fatalf("Detect = %+v, want not a blade, naming the label %s", p, sc.Board.Label)
		}
		t.Logf("masked: %s", p.Detail)
	})
}

// TestKernelLinesByName: the backend finds its lines by name, not by
// offset: here the names sit at other offsets than their numbers, on a chip
// chosen by name (linux.gpioChip). The Radxa CM5's lines are not claimed
// at all: how its pins reach the blade is not known.
func TestKernelLinesByName(t *testing.T) {
	needSim(t)
	sc := current(t)
	label := linux.LabelRP1
	if sc.Board != nil {
		label = sc.Board.Label
	}
	shifted := map[int]string{}
	for off, name := range bladeNames {
		shifted[off+30] = name
	}
	sim := gpiosim.New(t, "shifted", gpiosim.Bank{Label: label, Lines: 64, Names: shifted})
	cfg := realConfig()
	cfg.GPIOChip = sim.Name
	b := openReal(t, linux.Options{Config: cfg})
	if sc.SoC == linux.SoCRK3588 {
		for off := 0; off < 64; off++ {
			if li := lineInfo(t, sim, off); li.Used {
				t.Errorf("line %d claimed on a Radxa CM5: %+v", off, li)
			}
		}
		for _, c := range []hardware.Capability{hardware.CapButton, hardware.CapStealth, hardware.CapPoEDetect, hardware.CapTach} {
			if b.Capabilities().Has(c) {
				t.Errorf("capability %s on a Radxa CM5", c)
			}
		}
		if !strings.Contains(b.Info().Detail, "the Radxa CM5's GPIO mapping to the blade's connector is not known") {
			t.Errorf("detail %s", b.Info().Detail)
		}
		return
	}
	want := map[int]string{50: "kubeblade-button", 51: "kubeblade-stealth", 53: "kubeblade-poe", 43: "kubeblade-tach", 42: "kubeblade-fan"}
	for off, consumer := range want {
		if li := lineInfo(t, sim, off); !li.Used || li.Consumer != consumer {
			t.Errorf("line %d (%s): %+v, want used by %s", off, shifted[off], li, consumer)
		}
		if li := lineInfo(t, sim, off-30); li.Used {
			t.Errorf("offset %d claimed: %+v", off-30, li)
		}
	}
}

// TestKernelBlade drives every GPIO function of a Raspberry Pi blade
// through the kernel: PoE bias and level, stealth output, button edges with
// debounce, tach from edges at known rates, the on/off fan, and what stays
// on each line after the backend is closed. On a Radxa CM5 the backend
// drives the fan only (TestKernelPWMGPIOFan) and says why the rest is
// missing.
func TestKernelBlade(t *testing.T) {
	needSim(t)
	sc := current(t)
	if sc.SoC == linux.SoCRK3588 {
		b := openReal(t, linux.Options{Config: realConfig()})
		if info := b.Info(); !info.IsBlade || info.SoC != linux.SoCRK3588 {
			t.Fatalf("info %+v", info)
		}
		if diff := cmp.Diff([]string{"fan"}, b.Capabilities().List()); diff != "" {
			t.Fatalf("capabilities (-want +got):\n%s\ndetail: %s", diff, b.Info().Detail)
		}
		for _, want := range []string{"button: the Radxa CM5's GPIO mapping", "temperature: "} {
			if !strings.Contains(b.Info().Detail, want) {
				t.Errorf("detail %q lacks %q", b.Info().Detail, want)
			}
		}
		return
	}
	sim := board(t, sc, "blade", linux.LabelBCM2711)
	b, err := linux.Open(context.Background(), linux.Options{Config: realConfig()})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			b.Close()
		}
	}()
	wantSoC := map[string]string{linux.LabelBCM2711: linux.SoCBCM2711, linux.LabelRP1: linux.SoCBCM2712}[sim.Label]
	if info := b.Info(); !info.IsBlade || info.SoC != wantSoC {
		t.Fatalf("info %+v, want SoC %s", info, wantSoC)
	}
	if diff := cmp.Diff([]string{"button", "fan", "poe-detect", "stealth", "tach"}, b.Capabilities().List()); diff != "" {
		t.Fatalf("capabilities (-want +got):\n%s\ndetail: %s", diff, b.Info().Detail)
	}

	t.Run("PoE detect is pulled down and follows the level", func(t *testing.T) {
		if pull, _ := sim.Pull(23); pull != "pull-down" {
			t.Fatalf("GPIO23 pull %q, want pull-down (the request's bias)", pull)
		}
		for _, tc := range []struct {
			up   bool
			want hardware.PowerSource
		}{{true, hardware.PowerPoEPlus}, {false, hardware.PowerPoEOrUSBC}} {
			if err := sim.SetPull(23, tc.up); err != nil {
				t.Fatal(err)
			}
			if got, err := b.PowerSource(); err != nil || got != tc.want {
				t.Fatalf("pull-up=%v: PowerSource = %v, %v; want %v", tc.up, got, err, tc.want)
			}
		}
	})

	t.Run("stealth output", func(t *testing.T) {
		for _, on := range []bool{true, false, true} {
			if err := b.SetStealth(on); err != nil {
				t.Fatal(err)
			}
			want := map[bool]int{true: 1, false: 0}[on]
			if v, err := sim.Value(21); err != nil || v != want {
				t.Fatalf("stealth %v: GPIO21 = %d, %v", on, v, err)
			}
		}
	})

	t.Run("button edges, a bounce burst counts once", func(t *testing.T) {
		if pull, _ := sim.Pull(20); pull != "pull-up" {
			t.Fatalf("GPIO20 pull %q, want pull-up (the request's bias)", pull)
		}
		// Holding a level longer than the kernel debounce is how a
		// person presses; the sleeps make the stimulus, they wait for
		// nothing.
		hold := 5 * linux.ButtonDebounce
		press := func(bounces int) {
			for i := 0; i < bounces; i++ {
				sim.SetPull(20, false)
				sim.SetPull(20, true)
			}
			sim.SetPull(20, false)
			time.Sleep(hold)
			sim.SetPull(20, true)
			time.Sleep(hold)
		}
		start := time.Now()
		press(3) // a press with three bounces well inside the debounce
		press(0) // a clean press
		// Both edges are reported (the agent times a press: 3 s is a long
		// press), so two presses are four events: down, up, down, up.
		var got []hardware.ButtonEvent
		testwait.Eventually(t, 10*time.Second, "four button edges", func(context.Context) (bool, string) {
			select {
			case ev := <-b.ButtonEvents():
				got = append(got, ev)
			default:
			}
			return len(got) >= 4, fmt.Sprintf("%d so far", len(got))
		})
		select {
		case ev := <-b.ButtonEvents():
			t.Fatalf("a fifth edge %+v: the bounces were not debounced", ev)
		default:
		}
		// Every edge happened between the first press and now: a kernel
		// timestamp used unconverted (CLOCK_MONOTONIC, time since boot)
		// lands decades before, a bad conversion in the future.
		read := time.Now()
		for i, ev := range got {
			want := []hardware.ButtonEdge{hardware.ButtonDown, hardware.ButtonUp}[i%2]
			if ev.Edge != want {
				t.Fatalf("edge %d is %v, want %v (active low: falling is down): %+v", i, ev.Edge, want, got)
			}
			if ev.Time.Before(start) || ev.Time.After(read) {
				t.Fatalf("event time %s is outside the presses (%s to %s): kernel timestamps not converted", ev.Time, start, read)
			}
			if i > 0 && !ev.Time.After(got[i-1].Time) {
				t.Fatalf("events out of order: %+v", got)
			}
		}
	})

	t.Run("tach from edges at known rates", func(t *testing.T) {
		for _, rpm := range []float64{1200, 2400} {
			// 2 pulses per revolution, falling edges counted. The
			// generator records when it made each falling edge; under
			// emulation on a busy host it falls behind the nominal rate
			// (seen: 961 of 1200, 1961 of 3000, 1096 of 2400 RPM), so
			// the meter is held to the rate actually generated (within
			// 5 %), and that to the nominal one only loosely. Each rate
			// starts from a stopped fan, so the meter's 2 s window holds
			// only its edges.
			period := time.Duration(float64(time.Minute) / (rpm * 2))
			var mu sync.Mutex
			var falls []time.Time
			stop := make(chan struct{})
			done := make(chan struct{})
			go func() {
				defer close(done)
				tick := time.NewTicker(period / 2)
				defer tick.Stop()
				level := true
				for {
					select {
					case <-stop:
						sim.SetPull(13, true)
						return
					case <-tick.C:
						level = !level
						now := time.Now()
						sim.SetPull(13, level)
						if !level {
							mu.Lock()
							falls = append(falls, now)
							mu.Unlock()
						}
					}
				}
			}()
			generated := func() (float64, int) {
				mu.Lock()
				defer mu.Unlock()
				// The meter's window: the last 2 s.
				var in []time.Time
				for _, f := range falls {
					if time.Since(f) <= 2*time.Second {
						in = append(in, f)
					}
				}
				if len(in) < 2 {
					return 0, len(in)
				}
				span := in[len(in)-1].Sub(in[0])
				return float64(len(in)-1) / span.Minutes() / 2, len(in)
			}
			var seen string
			began := time.Now()
			testwait.Eventually(t, 20*time.Second, fmt.Sprintf("the meter to read the generated ~%.0f RPM", rpm), func(context.Context) (bool, string) {
				got, _ := b.FanRPM()
				want, n := generated()
				ok := n >= 30 && math.Abs(got-want) < want*0.05 && want > rpm*0.25 && want < rpm*1.1
				seen = fmt.Sprintf("meter %.0f RPM, generated %.0f RPM from %d edges (nominal %.0f)", got, want, n, rpm)
				return ok, seen
			})
			t.Logf("after %s: %s", time.Since(began).Round(time.Millisecond), seen)
			close(stop)
			<-done
			stopped := time.Now()
			testwait.Eventually(t, 10*time.Second, "the stopped fan to read 0", func(context.Context) (bool, string) {
				got, _ := b.FanRPM()
				return got == 0, fmt.Sprintf("%.0f RPM", got)
			})
			t.Logf("stopped fan read 0 after %s", time.Since(stopped).Round(time.Millisecond))
		}
	})

	t.Run("fan on/off without a PWM chip on GPIO12", func(t *testing.T) {
		// The arm64 machines have a pwm-gpio chip, but on the PL061,
		// not on GPIO12: the backend must not take it for the fan's.
		if !strings.Contains(b.Info().Detail, "fan: gpio-on-off") {
			t.Fatalf("detail %s", b.Info().Detail)
		}
		if pull, _ := sim.Pull(12); pull != "pull-up" {
			t.Fatalf("GPIO12 pull %q while driven, want pull-up (the request's bias)", pull)
		}
		for _, tc := range []struct {
			pct  uint8
			want int
		}{{0, 0}, {30, 1}, {0, 0}, {100, 1}} {
			if err := b.SetFanPercent(tc.pct); err != nil {
				t.Fatal(err)
			}
			if v, _ := sim.Value(12); v != tc.want {
				t.Fatalf("%d %%: GPIO12 = %d, want %d", tc.pct, v, tc.want)
			}
		}
	})

	t.Run("what stays on each line after the backend exits", func(t *testing.T) {
		// The agent's safe exit: fan 100 %; stealth left on to show
		// what a released output does.
		b.SetFanPercent(100)
		b.SetStealth(true)
		closed = true
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		want := map[int]struct {
			pull  string
			value int
		}{
			12: {"pull-up", 1},   // the fan line, made a pulled-up input: fan flat out
			13: {"pull-up", 1},   // tach: its bias stays
			20: {"pull-up", 1},   // button: its bias stays
			21: {"pull-down", 0}, // stealth: the released output falls back to the pull
			23: {"pull-down", 0}, // PoE detect: its bias stays
		}
		for off, w := range want {
			if li := lineInfo(t, sim, off); li.Used {
				t.Errorf("line %d still held: %+v", off, li)
			}
			pull, _ := sim.Pull(off)
			v, _ := sim.Value(off)
			if pull != w.pull || v != w.value {
				t.Errorf("line %d after exit: %s, %d; want %s, %d", off, pull, v, w.pull, w.value)
			}
		}
	})
}

// TestKernelTachOff: tachEnabled false leaves GPIO13 free.
func TestKernelTachOff(t *testing.T) {
	needSim(t)
	sc := current(t)
	sim := board(t, sc, "notach", linux.LabelRP1)
	b := openReal(t, linux.Options{Config: realConfig(), NoTach: true})
	if li := lineInfo(t, sim, 13); li.Used {
		t.Fatalf("GPIO13 claimed with the tach off: %+v", li)
	}
	if b.Capabilities().Has(hardware.CapTach) {
		t.Fatal("tach capability with the tach off")
	}
}

// pwmGPIO makes a real pwm-gpio PWM chip on line 12 of the gpio-mockup
// chip (booted with gpio_mockup.gpio_mockup_ranges): gpio-aggregator's
// new_device makes a platform device with a GPIO lookup for that line, and
// driver_override rebinds it to pwm-gpio, which then holds the line under
// the device's name, as it does for its devicetree node on a Pi. gpio-sim
// cannot carry it: its chips sleep, and pwm-gpio refuses sleeping GPIOs.
// gpio-mockup says it does not sleep but takes a mutex in .set, which
// pwm-gpio calls under its spinlock: a kernel with lockdep (the LED
// driver's fragment turns it on) prints "BUG: Invalid wait context" for it
// once. That is the mockup's flaw, not the backend's; a Pi's pin
// controllers take spinlocks there. The machines with a devicetree make
// their pwm-gpio chip from it instead (fanPWM).
func pwmGPIO(t *testing.T, chipLabel string) (dev string) {
	t.Helper()
	drivers := "/sys/bus/platform/drivers"
	before, _ := filepath.Glob(filepath.Join(drivers, "gpio-aggregator", "gpio-aggregator.*"))
	if err := os.WriteFile(filepath.Join(drivers, "gpio-aggregator", "new_device"), []byte(chipLabel+" 12"), 0); err != nil {
		t.Fatalf("gpio-aggregator new_device: %v", err)
	}
	after, _ := filepath.Glob(filepath.Join(drivers, "gpio-aggregator", "gpio-aggregator.*"))
	for _, a := range after {
		if !contains(before, a) {
			dev = filepath.Base(a)
		}
	}
	if dev == "" {
		t.Fatal("no new gpio-aggregator device")
	}
	for _, step := range []struct{ path, value string }{
		{filepath.Join(drivers, "gpio-aggregator", "unbind"), dev},
		{filepath.Join("/sys/bus/platform/devices", dev, "driver_override"), "pwm-gpio"},
		{filepath.Join(drivers, "pwm-gpio", "bind"), dev},
	} {
		if err := os.WriteFile(step.path, []byte(step.value), 0); err != nil {
			t.Fatalf("%s <- %s: %v", step.path, step.value, err)
		}
	}
	t.Cleanup(func() {
		os.WriteFile(filepath.Join(drivers, "pwm-gpio", "unbind"), []byte(dev), 0)
		os.WriteFile(filepath.Join(drivers, "gpio-aggregator", "delete_device"), []byte(dev), 0)
	})
	return dev
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// fanPWM sets up the scenario's pwm-gpio fan chip and the backend config
// that drives it: in the x86 guest a chip made at run time on the
// gpio-mockup's line 12, found by the backend as the holder of GPIO12 (the
// CM5 on Talos path: the mockup chip is the GPIO chip); on the arm64
// machines the chip their devicetree made on the PL061, named in
// linux.pwmChip, since it cannot hold the gpio-sim chip's GPIO12 (gpio-sim
// lines sleep). It returns the config, the PWM chip, and the consumer name
// under which pwm-gpio holds its line.
func fanPWM(t *testing.T, sc scenario.Scenario) (agentconfigv1.LinuxHardwareConfig, sysfs.PWMChip, string) {
	t.Helper()
	cfg := realConfig()
	dev := scenario.PWMGPIODevice
	if sc.DeviceTree == nil {
		const mockup = "gpio-mockup-A"
		_, err := os.Stat("/sys/bus/platform/drivers/gpio-aggregator/new_device")
		testreq.Need(t, err == nil, "gpio-aggregator: %v", err)
		// The CM5 is detected by its RP1 chip; the fan line is the
		// mockup's line 12 (its lines are named gpio-mockup-A-N, so the
		// backend falls back to the offset).
		gpiosim.New(t, "cm5", gpiosim.Bank{Label: linux.LabelRP1, Lines: 54, Names: bladeNames})
		dev = pwmGPIO(t, mockup)
		cfg.GPIOChip = mockup
	} else {
		board(t, sc, "blade", "")
		cfg.PWMChip = dev
	}
	var chip sysfs.PWMChip
	for _, c := range sysfs.ListPWMChips("/sys") {
		if c.Device.Name == dev {
			chip = c
		}
	}
	if chip.Name == "" || chip.Device.Driver != "pwm-gpio" || chip.NPWM != 1 {
		t.Fatalf("no pwm-gpio chip for %s: %+v", dev, sysfs.ListPWMChips("/sys"))
	}
	return cfg, chip, dev
}

// TestKernelPWMGPIOFan: a CM5 on Talos drives its fan through a pwm-gpio
// chip. The backend drives it through sysfs at 25 kHz and leaves it
// enabled at 100 % when it exits (sysfs PWM keeps its state). On the Radxa
// CM5 a pwm-fan node owns that chip, and the backend drives the fan through
// its hwmon device instead.
func TestKernelPWMGPIOFan(t *testing.T) {
	needSim(t)
	sc := current(t)
	if sc.FanHwmon != "" {
		b := openReal(t, linux.Options{Config: realConfig()})
		if !strings.Contains(b.Info().Detail, "fan: hwmon (pwm-fan pwm-fan)") {
			t.Fatalf("detail %s", b.Info().Detail)
		}
		var dir string
		for _, h := range sysfs.ListHwmon("/sys") {
			if h.Name == sc.FanHwmon {
				dir = h.Dir
			}
		}
		read := func(name string) string {
			v, _ := os.ReadFile(filepath.Join(dir, name))
			return strings.TrimSpace(string(v))
		}
		if err := b.SetFanPercent(60); err != nil {
			t.Fatal(err)
		}
		if got := read("pwm1"); got != "153" {
			t.Fatalf("60 %%: pwm1 %s, want 153", got)
		}
		if err := b.SetFanPercent(100); err != nil {
			t.Fatal(err)
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		if got := read("pwm1"); got != "255" {
			t.Fatalf("after exit: pwm1 %s, want 255 (the driver holds it)", got)
		}
		gpiosim.WaitHeldHigh(t, scenario.PWMGPIODevice, 10*time.Second)
		return
	}
	cfg, chip, dev := fanPWM(t, sc)
	b, err := linux.Open(context.Background(), linux.Options{Config: cfg, NoTach: true})
	if err != nil {
		t.Fatal(err)
	}
	wantDetail := "pwm-gpio on GPIO12 (" + dev + ")"
	if sc.DeviceTree != nil {
		wantDetail = "linux.pwmChip " + dev + ", " + chip.Name + " channel 0"
	}
	if !strings.Contains(b.Info().Detail, wantDetail) {
		b.Close()
		t.Fatalf("detail %s, want %s", b.Info().Detail, wantDetail)
	}
	t.Logf("%s is %s (driver %s); backend: %s", chip.Name, dev, chip.Device.Driver, b.Info().Detail)
	attr := func(name string) string {
		v, _ := os.ReadFile(filepath.Join("/sys/class/pwm", chip.Name, "pwm0", name))
		return strings.TrimSpace(string(v))
	}
	// Opened at full speed until the agent's first command.
	if got := []string{attr("period"), attr("duty_cycle"), attr("enable")}; !cmp.Equal(got, []string{"40000", "40000", "1"}) {
		t.Fatalf("after open: period, duty, enable = %v", got)
	}
	// A moment at 60 % (the software PWM toggles from hrtimers, which
	// TCG emulates slowly), then the safe exit's 100 %.
	if err := b.SetFanPercent(60); err != nil {
		t.Fatal(err)
	}
	if got := attr("duty_cycle"); got != "24000" {
		t.Fatalf("60 %%: duty_cycle %s", got)
	}
	if err := b.SetFanPercent(100); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if got := []string{attr("period"), attr("duty_cycle"), attr("enable")}; !cmp.Equal(got, []string{"40000", "40000", "1"}) {
		t.Fatalf("after exit: period, duty, enable = %v; want the PWM left at 100 %%", got)
	}
	// The pin itself: pwm-gpio holds a 100 % line high, from the end of
	// the 60 % period that was running when the change came.
	gpiosim.WaitHeldHigh(t, dev, 10*time.Second)
	// Unexported, so the next test finds the chip as a boot leaves it.
	if err := os.WriteFile(filepath.Join("/sys/class/pwm", chip.Name, "unexport"), []byte("0"), 0); err != nil {
		t.Fatal(err)
	}
}

// Env of TestChildHoldsTheFan: the backend options (JSON) and the fan
// percent the child sets before it reports that it holds the fan.
const (
	envChildOptions = "KUBEBLADE_TEST_CHILD_OPTIONS"
	envChildPercent = "KUBEBLADE_TEST_CHILD_PERCENT"
	childHolding    = "child: holding the fan"
)

// TestChildHoldsTheFan is the process TestKernelKilled kills: this test
// binary run again with only this test. It opens the backend, sets the fan
// and waits to be killed. Without the environment it does nothing.
func TestChildHoldsTheFan(t *testing.T) {
	raw := os.Getenv(envChildOptions)
	if raw == "" {
		t.Skip("only run as TestKernelKilled's child")
	}
	var o linux.Options
	if err := json.Unmarshal([]byte(raw), &o.Config); err != nil {
		t.Fatal(err)
	}
	o.NoTach = true
	b, err := linux.Open(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	var pct uint8
	fmt.Sscan(os.Getenv(envChildPercent), &pct)
	if err := b.SetFanPercent(pct); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("%s: %s\n", childHolding, b.Info().Detail)
	select {} // until SIGKILL
}

// killedChild starts TestChildHoldsTheFan with cfg, waits until it holds
// the fan at pct, SIGKILLs it (as the OOM killer or the kubelet after the
// grace period would: no Close, no deferred work) and waits for it to be
// gone, when the kernel has released what it held.
func killedChild(t *testing.T, cfg agentconfigv1.LinuxHardwareConfig, pct uint8, whileHeld func()) {
	t.Helper()
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/proc/self/exe", "-test.run=^TestChildHoldsTheFan$", "-test.v")
	cmd.Env = append(os.Environ(), envChildOptions+"="+string(raw), fmt.Sprintf("%s=%d", envChildPercent, pct))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var said []string
	deadline := time.After(30 * time.Second)
	for held := false; !held; {
		select {
		case l, ok := <-lines:
			if !ok {
				cmd.Wait()
				t.Fatalf("the child ended before holding the fan:\n%s", strings.Join(said, "\n"))
			}
			said = append(said, l)
			held = strings.HasPrefix(l, childHolding)
		case <-deadline:
			cmd.Process.Kill()
			t.Fatalf("the child did not hold the fan within 30 s:\n%s", strings.Join(said, "\n"))
		}
	}
	t.Logf("%s", said[len(said)-1])
	whileHeld()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for range lines {
	}
	if err := cmd.Wait(); err == nil || cmd.ProcessState.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the child ended with %v, not by SIGKILL", err)
	}
}

// TestKernelKilled: what a backend killed with SIGKILL leaves on the fan.
// The kernel releases the dead process's lines as they are; nothing of the
// backend's safe exit runs.
//   - GPIO on/off: the fan line was requested with a pull-up, so the
//     released pin reads high (fan on) even though the backend had switched
//     the fan off. gpio-sim's release sets the value to the pull, as
//     pinctrl-bcm2835's bcm2835_pmx_free turns an output into an input
//     that keeps its pull. (Before the pull-up was requested it read 0.)
//   - sysfs PWM (pwm-gpio): the channel stays exported and enabled at the
//     last duty, and the software PWM goes on toggling its pin.
//   - hwmon (the Radxa CM5's pwm-fan): pwm1 stays; the driver holds it.
func TestKernelKilled(t *testing.T) {
	needSim(t)
	sc := current(t)
	if sc.FanHwmon == "" {
		t.Run("GPIO fan", func(t *testing.T) {
			sim := board(t, sc, "blade", linux.LabelBCM2711)
			killedChild(t, realConfig(), 0, func() {
				if li := lineInfo(t, sim, 12); !li.Used || li.Consumer != "kubeblade-fan" {
					t.Fatalf("GPIO12 %+v, want held by kubeblade-fan", li)
				}
				if v, _ := sim.Value(12); v != 0 {
					t.Fatalf("GPIO12 = %d with the fan off", v)
				}
			})
			if li := lineInfo(t, sim, 12); li.Used {
				t.Fatalf("GPIO12 still held after the child died: %+v", li)
			}
			pull, _ := sim.Pull(12)
			v, _ := sim.Value(12)
			if pull != "pull-up" || v != 1 {
				t.Fatalf("GPIO12 after SIGKILL: %s, %d; want pull-up, 1 (fan on)", pull, v)
			}
		})
		t.Run("pwm-gpio fan", func(t *testing.T) {
			cfg, chip, dev := fanPWM(t, sc)
			attr := func(name string) string {
				v, _ := os.ReadFile(filepath.Join("/sys/class/pwm", chip.Name, "pwm0", name))
				return strings.TrimSpace(string(v))
			}
			killedChild(t, cfg, 60, func() {})
			if got := []string{attr("period"), attr("duty_cycle"), attr("enable")}; !cmp.Equal(got, []string{"40000", "24000", "1"}) {
				t.Fatalf("after SIGKILL: period, duty, enable = %v; want the PWM still running at 60 %%", got)
			}
			// Still toggling: the pin is seen high and low.
			var hi, lo bool
			testwait.EventuallyEvery(t, 10*time.Second, time.Millisecond, "the PWM pin high and low", func(context.Context) (bool, string) {
				_, high, err := gpiosim.Held(dev)
				if err != nil {
					return false, err.Error()
				}
				hi, lo = hi || high, lo || !high
				return hi && lo, fmt.Sprintf("high seen %v, low seen %v", hi, lo)
			})
			if err := os.WriteFile(filepath.Join("/sys/class/pwm", chip.Name, "unexport"), []byte("0"), 0); err != nil {
				t.Fatal(err)
			}
		})
		return
	}
	t.Run("hwmon fan", func(t *testing.T) {
		killedChild(t, realConfig(), 60, func() {})
		for _, h := range sysfs.ListHwmon("/sys") {
			if h.Name != sc.FanHwmon {
				continue
			}
			if v, _ := os.ReadFile(filepath.Join(h.Dir, "pwm1")); strings.TrimSpace(string(v)) != "153" {
				t.Fatalf("pwm1 after SIGKILL %q, want 153 (60 %%)", v)
			}
			return
		}
		t.Fatalf("no hwmon %s", sc.FanHwmon)
	})
}
