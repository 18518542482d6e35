//go:build guest

// The linux backend against a real kernel: these tests run as the init of
// a QEMU guest booting the rig's 6.12 kernel (TestGuestKernel on the host
// starts it; make hwtest). GPIO chips are gpio-sim chips labelled and named
// like a CM4's and a CM5's, so everything below the backend (the character
// device, biases, debounce, edge timestamps, what a release leaves behind)
// is the kernel's own behaviour.

package linux_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	agentconfigv1 "github.com/kubeblade/kubeblade/api/agentconfig/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/guest/gpiosim"
	"github.com/kubeblade/kubeblade/internal/guest/guestinit"
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

// TestKernelDetection: with no devicetree (an x86 guest, like a container
// that masks /sys/firmware), the SoC comes from the GPIO chip's label.
func TestKernelDetection(t *testing.T) {
	needSim(t)
	// A kernel with CONFIG_OF on x86 may show an empty devicetree root;
	// what matters is that it names no machine.
	if _, err := os.Stat("/sys/firmware/devicetree/base/compatible"); err == nil {
		t.Fatal("this guest's devicetree names a machine; the test assumes none")
	}
	for _, tc := range []struct{ label, soc string }{
		{linux.LabelBCM2711, linux.SoCBCM2711},
		{linux.LabelRP1, linux.SoCBCM2712},
		{"gpio-mockup-Z", ""},
	} {
		t.Run(tc.label, func(t *testing.T) {
			gpiosim.New(t, "detect", gpiosim.Bank{Label: tc.label, Lines: 54, Names: bladeNames})
			p := linux.Detect("/sys", "/proc", "/dev", gpio.CDev{})
			if p.SoC != tc.soc || p.IsBlade != (tc.soc != "") {
				t.Fatalf("Detect = %+v, want SoC %q", p, tc.soc)
			}
		})
	}
}

// TestKernelLinesByName: the backend finds its lines by name, not by
// offset: here the names sit at other offsets than their numbers.
func TestKernelLinesByName(t *testing.T) {
	needSim(t)
	shifted := map[int]string{}
	for off, name := range bladeNames {
		shifted[off+30] = name
	}
	sim := gpiosim.New(t, "shifted", gpiosim.Bank{Label: linux.LabelRP1, Lines: 64, Names: shifted})
	openReal(t, linux.Options{Config: realConfig()})
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

// TestKernelCM4Blade drives every GPIO function of a CM4 blade through the
// kernel: PoE bias and level, stealth output, button edges with debounce,
// tach from edges at known rates, the on/off fan, and what stays on each
// line after the backend is closed.
func TestKernelCM4Blade(t *testing.T) {
	needSim(t)
	sim := gpiosim.New(t, "cm4", gpiosim.Bank{Label: linux.LabelBCM2711, Lines: 58, Names: bladeNames})
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
	if info := b.Info(); !info.IsBlade || info.SoC != linux.SoCBCM2711 {
		t.Fatalf("info %+v", info)
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
		for i, ev := range got {
			want := []hardware.ButtonEdge{hardware.ButtonDown, hardware.ButtonUp}[i%2]
			if ev.Edge != want {
				t.Fatalf("edge %d is %v, want %v (active low: falling is down): %+v", i, ev.Edge, want, got)
			}
			if d := ev.Time.Sub(start); d < 0 || d > 5*time.Second {
				t.Fatalf("event time %s is %s from the presses: kernel timestamps not converted", ev.Time, d)
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

	t.Run("fan on/off without a PWM chip", func(t *testing.T) {
		if !strings.Contains(b.Info().Detail, "fan: gpio-on-off") {
			t.Fatalf("detail %s", b.Info().Detail)
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
	sim := gpiosim.New(t, "notach", gpiosim.Bank{Label: linux.LabelRP1, Lines: 54, Names: bladeNames})
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
// controllers take spinlocks there.
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

// TestKernelPWMGPIOFan: a CM5 on Talos drives its fan through a pwm-gpio
// chip on GPIO12. The backend must recognise that chip as the one holding
// GPIO12 among others, drive it through sysfs at 25 kHz, and leave it
// enabled at 100 % when it exits (sysfs PWM keeps its state).
func TestKernelPWMGPIOFan(t *testing.T) {
	needSim(t)
	const mockup = "gpio-mockup-A"
	_, err := os.Stat("/sys/bus/platform/drivers/gpio-aggregator/new_device")
	testreq.Need(t, err == nil, "gpio-aggregator: %v", err)
	// The CM5 is detected by its RP1 chip; the fan line is the mockup's
	// line 12 (its lines are named gpio-mockup-A-N, so the backend falls
	// back to the offset).
	gpiosim.New(t, "cm5", gpiosim.Bank{Label: linux.LabelRP1, Lines: 54, Names: bladeNames})
	dev := pwmGPIO(t, mockup)
	var chip sysfs.PWMChip
	for _, c := range sysfs.ListPWMChips("/sys") {
		if c.Device.Name == dev {
			chip = c
		}
	}
	if chip.Name == "" || chip.Device.Driver != "pwm-gpio" || chip.NPWM != 1 {
		t.Fatalf("no pwm-gpio chip for %s: %+v", dev, sysfs.ListPWMChips("/sys"))
	}

	cfg := realConfig()
	cfg.GPIOChip = mockup
	b, err := linux.Open(context.Background(), linux.Options{Config: cfg, NoTach: true})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.Info().Detail, "pwm-gpio on GPIO12 ("+dev+")") {
		b.Close()
		t.Fatalf("detail %s", b.Info().Detail)
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
	// The pin itself: pwm-gpio holds a 100 % line high.
	level, err := os.ReadFile(mockupLineFile(t, mockup, 12))
	if err != nil || strings.TrimSpace(string(level)) != "1" {
		t.Fatalf("GPIO12 level after exit: %q, %v", level, err)
	}
}

// mockupLineFile is gpio-mockup's debugfs file for a line's level.
func mockupLineFile(t *testing.T, label string, offset int) string {
	t.Helper()
	// gpio-mockup names its debugfs directory after the chip device.
	dirs, _ := filepath.Glob("/sys/kernel/debug/gpio-mockup/gpiochip*")
	for _, d := range dirs {
		c, err := gpio.CDev{}.Open("/dev/" + filepath.Base(d))
		if err != nil {
			continue
		}
		match := c.Label() == label
		c.Close()
		if match {
			return filepath.Join(d, fmt.Sprint(offset))
		}
	}
	t.Fatalf("no gpio-mockup debugfs directory for %s (have %v)", label, dirs)
	return ""
}
