package linux_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"

	agentconfigv1 "github.com/kubeblade/kubeblade/api/agentconfig/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/hardware"
	"github.com/kubeblade/kubeblade/internal/hardware/linux"
	"github.com/kubeblade/kubeblade/internal/hardware/linux/gpio"
	"github.com/kubeblade/kubeblade/internal/hardware/linux/gpio/gpiotest"
	"github.com/kubeblade/kubeblade/internal/hardware/linux/sysfs"
	"github.com/kubeblade/kubeblade/internal/smartfan"
	"github.com/kubeblade/kubeblade/internal/smartfan/smartfantest"
	"github.com/kubeblade/kubeblade/internal/smartfan/uart"
	"github.com/kubeblade/kubeblade/internal/testwait"
)

var epoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// machine copies a testdata fixture to a writable root and adds files
// (path relative to the root → content).
func machine(t *testing.T, fixture string, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	if fixture != "" {
		src := filepath.Join("testdata", fixture)
		err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(src, p)
			if d.IsDir() {
				return os.MkdirAll(filepath.Join(root, rel), 0o755)
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(root, rel), b, 0o644)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	files["dev/.keep"] = ""
	for p, c := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if target, ok := strings.CutPrefix(c, "->"); ok {
			// A symlink, as sysfs has them (class entry → device).
			if err := os.Symlink(target, full); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// pwmChip returns the sysfs files of /sys/class/pwm/<name> whose device is
// the platform device dev with driver and devicetree compatible (nothing
// when empty), phandle ph (0: none), as the kernel lays them out.
func pwmChip(name, dev, driver, compatible string, ph uint32, npwm int) map[string]string {
	return pwmChipAt(name, "platform/soc/"+dev, driver, compatible, ph, npwm)
}

// pwmChipAt is pwmChip for a device at devPath under /sys/devices (a
// platform device a module creates itself sits at platform/<name>, not
// under the SoC's bus).
func pwmChipAt(name, devPath, driver, compatible string, ph uint32, npwm int) map[string]string {
	d := "sys/devices/" + devPath
	f := map[string]string{
		"sys/class/pwm/" + name + "/npwm":   fmt.Sprintf("%d\n", npwm),
		"sys/class/pwm/" + name + "/export": "",
		"sys/class/pwm/" + name + "/device": "->../../../devices/" + devPath,
		d + "/uevent":                       "",
	}
	if driver != "" {
		f["sys/bus/platform/drivers/"+driver+"/.keep"] = ""
		// From sys/devices/<devPath> back up to sys.
		f[d+"/driver"] = "->" + strings.Repeat("../", strings.Count(devPath, "/")+2) + "bus/platform/drivers/" + driver
	}
	if compatible != "" {
		f[d+"/of_node/compatible"] = compatible + "\x00"
		if ph != 0 {
			f[d+"/of_node/phandle"] = string(be32(ph))
		}
	}
	return f
}

// pwmFan returns the files of a pwm-fan hwmon device named dev whose pwms
// property points at phandle ph, channel ch.
func pwmFan(hwmon, dev string, ph, ch uint32) map[string]string {
	d := "sys/devices/platform/" + dev
	return map[string]string{
		"sys/class/hwmon/" + hwmon + "/name":        "pwmfan\n",
		"sys/class/hwmon/" + hwmon + "/pwm1":        "0\n",
		"sys/class/hwmon/" + hwmon + "/pwm1_enable": "1\n",
		"sys/class/hwmon/" + hwmon + "/device":      "->../../../devices/platform/" + dev,
		d + "/of_node/compatible":                   "pwm-fan\x00",
		d + "/of_node/pwms":                         string(append(append(be32(ph), be32(ch)...), be32(40000)...)),
	}
}

func be32(v uint32) []byte { return []byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)} }

func merge(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

func read(t *testing.T, root, p string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, p))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// config is the linux backend's config for a tree: the defaults.
func config(string) agentconfigv1.LinuxHardwareConfig { return agentconfigv1.LinuxHardwareConfig{} }

// plainFile opens a file of the test tree as the LED stream, where the
// real backend accepts only the ws2812-pio-rp1 character device.
func plainFile(p string) (io.WriteCloser, error) { return os.OpenFile(p, os.O_WRONLY, 0) }

// roots puts sysfs, the device nodes and procfs in root's tree.
func roots(root string) linux.Roots {
	return linux.Roots{Sys: filepath.Join(root, "sys"), Dev: filepath.Join(root, "dev"), Proc: filepath.Join(root, "proc")}
}

// withChip registers a fake GPIO chip at root/dev/gpiochipN and creates
// its device file so enumeration finds it.
func withChip(t *testing.T, d *gpiotest.Driver, root string, n int, label string, lines int) *gpiotest.Chip {
	t.Helper()
	name := "gpiochip" + string(rune('0'+n))
	path := filepath.Join(root, "dev", name)
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return d.AddChip(path, name, label, lines)
}

func bladeLines(c *gpiotest.Chip) *gpiotest.Chip {
	for _, n := range []int{12, 13, 20, 21, 23} {
		c.NameLine(n, "GPIO"+itoa(n))
	}
	return c
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}

func TestDetect(t *testing.T) {
	cases := map[string]struct {
		fixture string
		chips   []string
		want    linux.Platform
	}{
		"CM4": {fixture: "cm4", want: linux.Platform{SoC: "bcm2711", IsBlade: true, Model: "Raspberry Pi Compute Module 4 Rev 1.1"}},
		"CM5": {fixture: "cm5", want: linux.Platform{SoC: "bcm2712", IsBlade: true, Model: "Raspberry Pi Compute Module 5 Rev 1.0"}},
		"Raspberry Pi 4 board is not a blade": {fixture: "pi4b",
			want: linux.Platform{SoC: "bcm2711", IsBlade: false, Model: "Raspberry Pi 4 Model B Rev 1.5"}},
		"non-blade arm64": {fixture: "arm64", chips: []string{"gpio0"},
			want: linux.Platform{SoC: "rk3588", IsBlade: false, Model: "Radxa ROCK 5 Model B"}},
		"masked /sys/firmware, CM4 GPIO chip": {fixture: "masked", chips: []string{"raspberrypi-exp-gpio", "pinctrl-bcm2711"},
			want: linux.Platform{SoC: "bcm2711", IsBlade: true}},
		"masked /sys/firmware, CM5 RP1 chip": {fixture: "masked", chips: []string{"gpio-brcmstb@107d508500", "pinctrl-rp1"},
			want: linux.Platform{SoC: "bcm2712", IsBlade: true}},
		"masked, foreign chips only": {fixture: "masked", chips: []string{"gpio0"},
			want: linux.Platform{IsBlade: false}},
		"masked, nothing at all": {fixture: "masked", want: linux.Platform{IsBlade: false}},
		"Radxa CM5, mainline devicetree": {fixture: "radxa-cm5",
			want: linux.Platform{SoC: "rk3588", IsBlade: true, Model: "Radxa Compute Module 5 (CM5) IO Board"}},
		"Radxa CM5, Radxa's kernel": {fixture: "radxa-cm5-bsp",
			want: linux.Platform{SoC: "rk3588", IsBlade: true, Model: "Radxa CM5 IO"}},
		"devicetree from /proc": {fixture: "proc-only",
			want: linux.Platform{SoC: "bcm2711", IsBlade: true, Model: "Raspberry Pi Compute Module 4 Rev 1.1"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			root := machine(t, tc.fixture, map[string]string{})
			d := gpiotest.NewDriver()
			for i, l := range tc.chips {
				withChip(t, d, root, i, l, 54)
			}
			r := roots(root)
			got := linux.Detect(r.Sys, r.Proc, r.Dev, d)
			if diff := cmp.Diff(tc.want, got, cmpIgnoreText); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
			if got.Detail == "" {
				t.Fatal("no detail")
			}
		})
	}
}

var cmpIgnoreText = cmp.FilterPath(func(p cmp.Path) bool {
	f := p.Last().String()
	return f == ".Detail" || f == ".Source"
}, cmp.Ignore())

// cm4Blade is a CM4 blade as the kernel shows it with dtoverlay=pwm: the
// BCM2711's PWM0 (fe20c000.pwm) as pwmchip0, channel 0 not yet exported,
// cpu-thermal as zone 1, no LED driver.
func cm4Blade(t *testing.T, extra map[string]string) (string, *gpiotest.Driver, *gpiotest.Chip) {
	files := merge(pwmChip("pwmchip0", "fe20c000.pwm", "bcm2835-pwm", "brcm,bcm2835-pwm", 0x2a, 2), map[string]string{
		"sys/class/thermal/thermal_zone0/type": "gpu-thermal\n",
		"sys/class/thermal/thermal_zone0/temp": "99000\n",
		"sys/class/thermal/thermal_zone1/type": "cpu-thermal\n",
		"sys/class/thermal/thermal_zone1/temp": "48312\n",
		"sys/class/leds/ACT/brightness":        "0\n",
		"sys/class/leds/ACT/max_brightness":    "1\n",
	})
	for k, v := range extra {
		files[k] = v
	}
	root := machine(t, "cm4", files)
	d := gpiotest.NewDriver()
	withChip(t, d, root, 0, "raspberrypi-exp-gpio", 8)
	chip := bladeLines(withChip(t, d, root, 1, "pinctrl-bcm2711", 58))
	return root, d, chip
}

// kernelExport plays the kernel creating pwmN/ after "N" was written to a
// chip's export file.
func kernelExport(root string) func(int) bool {
	return func(attempt int) bool {
		if attempt > 0 {
			return false
		}
		chips, _ := filepath.Glob(filepath.Join(root, "sys/class/pwm/pwmchip*"))
		for _, chip := range chips {
			n, err := os.ReadFile(filepath.Join(chip, "export"))
			if err != nil || len(n) == 0 {
				continue
			}
			dir := filepath.Join(chip, "pwm"+string(n))
			os.MkdirAll(dir, 0o755)
			for f, c := range map[string]string{"period": "0\n", "duty_cycle": "0\n", "enable": "0\n"} {
				os.WriteFile(filepath.Join(dir, f), []byte(c), 0o644)
			}
		}
		return true
	}
}

func open(t *testing.T, o linux.Options) *linux.Backend {
	t.Helper()
	b, err := linux.Open(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func TestCM4StandardFanUnit(t *testing.T) {
	root, drv, chip := cm4Blade(t, nil)
	fc := clocktesting.NewFakeClock(epoch)
	b := open(t, linux.Options{Config: config(root), Roots: roots(root), GPIO: drv, Clock: fc, AwaitPWMExport: kernelExport(root)})

	info := b.Info()
	if !info.IsBlade || info.SoC != "bcm2711" || info.FanUnit != hardware.FanUnitStandard || info.Backend != "linux" {
		t.Fatalf("info %+v", info)
	}
	if !strings.Contains(info.Detail, "leds") || !strings.Contains(info.Detail, "fan: sysfs-pwm") {
		t.Errorf("detail does not explain the setup: %q", info.Detail)
	}
	wantCaps := []string{"button", "fan", "poe-detect", "stealth", "tach", "temperature"}
	if diff := cmp.Diff(wantCaps, b.Capabilities().List()); diff != "" {
		t.Fatalf("capabilities (-want +got):\n%s", diff)
	}

	// Fan: 25 kHz sysfs PWM.
	if err := b.SetFanPercent(60); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{
		"sys/class/pwm/pwmchip0/export":          "0",
		"sys/class/pwm/pwmchip0/pwm0/period":     "40000",
		"sys/class/pwm/pwmchip0/pwm0/enable":     "1",
		"sys/class/pwm/pwmchip0/pwm0/duty_cycle": "24000",
	} {
		if got := read(t, root, p); got != want {
			t.Errorf("%s = %q, want %q", p, got, want)
		}
	}
	if err := b.SetFanPercent(101); err == nil {
		t.Error("101 % accepted")
	}

	// Temperature from cpu-thermal, not zone 0.
	if c, err := b.SoCTemperature(); err != nil || c != 48.312 {
		t.Fatalf("SoCTemperature = %v, %v", c, err)
	}

	// Stealth output.
	if err := b.SetStealth(true); err != nil {
		t.Fatal(err)
	}
	if err := b.SetStealth(false); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int{1, 0}, chip.Line(21).Sets()); diff != "" {
		t.Fatalf("stealth writes (-want +got):\n%s", diff)
	}

	// PoE detect: high is 802.3at.
	chip.Line(23).SetLevel(1)
	if p, err := b.PowerSource(); err != nil || p != hardware.PowerPoEPlus {
		t.Fatalf("PowerSource high = %v, %v", p, err)
	}
	chip.Line(23).SetLevel(0)
	if p, err := b.PowerSource(); err != nil || p != hardware.PowerPoEOrUSBC {
		t.Fatalf("PowerSource low = %v, %v", p, err)
	}

	// PoE detect pulled down, the BCM2711's reset default on GPIO23: an
	// undriven line reads "not PoE+" (the old agent's pull-up would
	// report PoE+; docs/hardware.md#pins).
	if r := chip.Line(23).Request(); r.Bias != gpio.BiasPullDown || r.Output {
		t.Fatalf("PoE detect request %+v: want an input with a pull-down", r)
	}

	// Button: both edges (active low: falling is down, rising is up, so
	// the agent can time a long press), pulled up, kernel-debounced; each
	// event carries when the kernel saw the edge, 40 ms before the agent's
	// clock reads.
	btn := chip.Line(20)
	if r := btn.Request(); r.Edge != gpio.EdgeBoth || r.Bias != gpio.BiasPullUp || r.Debounce != linux.ButtonDebounce {
		t.Fatalf("button request %+v", r)
	}
	drv.SetNow(500 * time.Second)
	for _, e := range []struct {
		rising bool
		want   hardware.ButtonEdge
	}{{false, hardware.ButtonDown}, {true, hardware.ButtonUp}} {
		btn.Edge(500*time.Second-40*time.Millisecond, e.rising)
		select {
		case ev := <-b.ButtonEvents():
			if want := epoch.Add(-40 * time.Millisecond); !ev.Time.Equal(want) || ev.Edge != e.want {
				t.Fatalf("button event %+v, want %v at %v", ev, e.want, want)
			}
		default:
			t.Fatalf("no button event for rising=%t", e.rising)
		}
	}

	// Tach: 2 pulses per revolution, falling edges at 2400 RPM.
	tachLine := chip.Line(13)
	period := time.Minute / (2400 * 2)
	ts := 600 * time.Second
	for i := 0; i < 100; i++ {
		ts += period
		tachLine.Edge(ts, false)
	}
	drv.SetNow(ts + time.Millisecond)
	if rpm, err := b.FanRPM(); err != nil || math.Abs(rpm-2400) > 1 {
		t.Fatalf("FanRPM = %v, %v; want 2400", rpm, err)
	}
	drv.SetNow(ts + 5*time.Second)
	if rpm, err := b.FanRPM(); err != nil || rpm != 0 {
		t.Fatalf("FanRPM of a stopped fan = %v, %v; want 0", rpm, err)
	}

	// No LED driver: missing, and calls say so instead of failing hard.
	if err := b.SetLED(hardware.LEDEdge, hardware.Color{R: 1}); !errors.Is(err, hardware.ErrNotSupported) {
		t.Fatalf("SetLED err = %v, want ErrNotSupported", err)
	}
	if _, err := b.AirflowTemperature(); !errors.Is(err, hardware.ErrNotSupported) {
		t.Fatalf("AirflowTemperature err = %v", err)
	}

	// Close releases lines and ends the button stream.
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	for _, off := range []int{13, 20, 21, 23} {
		if !chip.Line(off).Closed() {
			t.Errorf("line %d not released", off)
		}
	}
	if _, ok := <-b.ButtonEvents(); ok {
		t.Fatal("ButtonEvents not closed")
	}
	if btn.Edge(time.Hour, false) {
		// The handler ran after Close; it must not panic on the closed channel.
		t.Log("edge after close delivered to handler (ignored by backend)")
	}
}

func TestFanDriverFallbacks(t *testing.T) {
	t.Run("CM5 pwm-fan on RP1 PWM0 owns the PWM; its tach when GPIO13 is taken", func(t *testing.T) {
		root := machine(t, "cm5", merge(
			pwmChip("pwmchip0", "1f0009c000.pwm", "pwm-rp1", "raspberrypi,rp1-pwm", 0x10, 4),
			pwmChip("pwmchip1", "1f00098000.pwm", "pwm-rp1", "raspberrypi,rp1-pwm", 0x11, 4),
			// The IO board's own fan header: a pwm-fan too, on PWM1.
			pwmFan("hwmon2", "cooling_fan", 0x10, 3),
			pwmFan("hwmon3", "blade_fan", 0x11, 0),
			map[string]string{
				"sys/class/hwmon/hwmon3/fan1_input":    "1800\n",
				"sys/class/thermal/thermal_zone0/type": "cpu-thermal\n",
				"sys/class/thermal/thermal_zone0/temp": "40000\n",
			}))
		drv := gpiotest.NewDriver()
		chip := bladeLines(withChip(t, drv, root, 0, "pinctrl-rp1", 54))
		chip.FailRequest(13, errors.New("device or resource busy"))
		b := open(t, linux.Options{Config: config(root), Roots: roots(root), GPIO: drv})
		if b.Info().SoC != "bcm2712" {
			t.Fatalf("SoC %s", b.Info().SoC)
		}
		if err := b.SetFanPercent(40); err != nil {
			t.Fatal(err)
		}
		if got := read(t, root, "sys/class/hwmon/hwmon3/pwm1"); got != "102" {
			t.Fatalf("pwm1 = %q, want 102; detail %s", got, b.Info().Detail)
		}
		if got := read(t, root, "sys/class/hwmon/hwmon2/pwm1"); got != "0\n" {
			t.Fatalf("the IO board's cooling_fan was driven: %q", got)
		}
		if rpm, err := b.FanRPM(); err != nil || rpm != 1800 {
			t.Fatalf("FanRPM = %v, %v", rpm, err)
		}
	})
	t.Run("GPIO on/off as last resort", func(t *testing.T) {
		root := machine(t, "cm5", map[string]string{})
		drv := gpiotest.NewDriver()
		chip := bladeLines(withChip(t, drv, root, 0, "pinctrl-rp1", 54))
		b := open(t, linux.Options{Config: config(root), Roots: roots(root), GPIO: drv})
		fan := chip.Line(12)
		if r := fan.Request(); !r.Output || r.Initial != 1 {
			t.Fatalf("fan line %+v: want an output starting on", r)
		}
		for _, p := range []uint8{0, 30, 100} {
			if err := b.SetFanPercent(p); err != nil {
				t.Fatal(err)
			}
		}
		if diff := cmp.Diff([]int{0, 1, 1}, fan.Sets()); diff != "" {
			t.Fatalf("fan writes (-want +got):\n%s", diff)
		}
		if b.Capabilities().Has(hardware.CapTemperature) {
			t.Fatal("temperature capability without a cpu-thermal zone")
		}
	})
	t.Run("nothing to drive the fan with", func(t *testing.T) {
		root := machine(t, "cm5", map[string]string{})
		drv := gpiotest.NewDriver()
		chip := bladeLines(withChip(t, drv, root, 0, "pinctrl-rp1", 54))
		chip.FailRequest(12, errors.New("busy"))
		b := open(t, linux.Options{Config: config(root), Roots: roots(root), GPIO: drv})
		if b.Capabilities().Has(hardware.CapFan) {
			t.Fatal("fan capability with no driver")
		}
		if err := b.SetFanPercent(50); !errors.Is(err, hardware.ErrNotSupported) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("forced hwmon by name", func(t *testing.T) {
		root, drv, _ := cm4Blade(t, map[string]string{
			"sys/class/hwmon/hwmon0/name": "other\n",
			"sys/class/hwmon/hwmon0/pwm1": "0\n",
			"sys/class/hwmon/hwmon1/name": "cooling_fan\n",
			"sys/class/hwmon/hwmon1/pwm1": "0\n",
		})
		cfg := config(root)
		cfg.FanDriver, cfg.HwmonName = "hwmon", "cooling_fan"
		b := open(t, linux.Options{Config: cfg, Roots: roots(root), GPIO: drv})
		if err := b.SetFanPercent(100); err != nil {
			t.Fatal(err)
		}
		if read(t, root, "sys/class/hwmon/hwmon1/pwm1") != "255" || read(t, root, "sys/class/hwmon/hwmon0/pwm1") != "0\n" {
			t.Fatal("wrong hwmon device driven")
		}
	})
}

func TestNoGPIOChipKeepsTheRest(t *testing.T) {
	root, _, _ := cm4Blade(t, nil)
	b := open(t, linux.Options{Config: config(root), Roots: roots(root), GPIO: gpiotest.NewDriver(), AwaitPWMExport: kernelExport(root)})
	if diff := cmp.Diff([]string{"fan", "temperature"}, b.Capabilities().List()); diff != "" {
		t.Fatalf("capabilities (-want +got):\n%s", diff)
	}
	if err := b.SetStealth(true); !errors.Is(err, hardware.ErrNotSupported) {
		t.Fatalf("SetStealth err = %v", err)
	}
}

func TestLEDDrivers(t *testing.T) {
	t.Run("multicolor LED class", func(t *testing.T) {
		root, drv, _ := cm4Blade(t, map[string]string{
			"sys/class/leds/blade:rgb:top/multi_index":      "red green blue\n",
			"sys/class/leds/blade:rgb:top/multi_intensity":  "0 0 0\n",
			"sys/class/leds/blade:rgb:top/max_brightness":   "255\n",
			"sys/class/leds/blade:rgb:top/brightness":       "0\n",
			"sys/class/leds/blade:rgb:edge/multi_index":     "red green blue\n",
			"sys/class/leds/blade:rgb:edge/multi_intensity": "0 0 0\n",
			"sys/class/leds/blade:rgb:edge/max_brightness":  "255\n",
			"sys/class/leds/blade:rgb:edge/brightness":      "0\n",
		})
		b := open(t, linux.Options{Config: config(root), Roots: roots(root), GPIO: drv, AwaitPWMExport: kernelExport(root)})
		if !b.Capabilities().Has(hardware.CapLEDs) {
			t.Fatal("no LED capability")
		}
		if err := b.SetLED(hardware.LEDEdge, hardware.Color{R: 0, G: 16, B: 0}); err != nil {
			t.Fatal(err)
		}
		if got := read(t, root, "sys/class/leds/blade:rgb:edge/multi_intensity"); got != "0 16 0" {
			t.Fatalf("edge intensity %q", got)
		}
		if got := read(t, root, "sys/class/leds/blade:rgb:top/multi_intensity"); got != "0 0 0\n" {
			t.Fatalf("top LED touched: %q", got)
		}
	})
	t.Run("/dev/leds0 stream", func(t *testing.T) {
		root, drv, _ := cm4Blade(t, map[string]string{"dev/leds0": ""})
		// A plain file stands for the driver's node here; the checks on
		// a real node are TestLEDStreamMustBeTheDriversDevice's.
		b := open(t, linux.Options{Config: config(root), Roots: roots(root), GPIO: drv, AwaitPWMExport: kernelExport(root), LEDStream: plainFile})
		if err := b.SetLED(hardware.LEDEdge, hardware.Color{R: 1, G: 2, B: 3}); err != nil {
			t.Fatal(err)
		}
		if err := b.SetLED(hardware.LEDTop, hardware.Color{R: 0x40}); err != nil {
			t.Fatal(err)
		}
		// Green and red swapped and through the inverse of the driver's
		// gamma (sysfs/ws2812pio_test.go models the driver): 0x89 → 0x40,
		// 0x1d → 2, 0x16 → 1, 0x23 → 3.
		if got := read(t, root, "dev/leds0"); got != "\x00\x89\x00\x00\x1d\x16\x23\x00" {
			t.Fatalf("stream % x", got)
		}
	})
}

func TestNonBlade(t *testing.T) {
	for _, fixture := range []string{"arm64", "pi4b"} {
		t.Run(fixture, func(t *testing.T) {
			root := machine(t, fixture, map[string]string{"sys/class/thermal/thermal_zone0/type": "cpu-thermal\n"})
			drv := gpiotest.NewDriver()
			chip := withChip(t, drv, root, 0, "pinctrl-bcm2711", 58)
			b := open(t, linux.Options{Config: config(root), Roots: roots(root), GPIO: drv})
			if b.Info().IsBlade || len(b.Capabilities().List()) != 0 {
				t.Fatalf("info %+v caps %v", b.Info(), b.Capabilities().List())
			}
			if chip.Line(21) != nil {
				t.Fatal("a GPIO line was claimed on a machine that is not a blade")
			}
			if err := b.SetFanPercent(100); !errors.Is(err, hardware.ErrNotSupported) {
				t.Fatalf("err = %v", err)
			}
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			if _, ok := <-b.ButtonEvents(); ok {
				t.Fatal("ButtonEvents not closed")
			}
		})
	}
}

func TestSmartFanUnit(t *testing.T) {
	master, tty := smartfantest.OpenPTY(t)
	unit := smartfantest.NewUnit(t, smartfantest.Options{})
	unit.Attach(smartfantest.Left, master)
	// Masked devicetree: the CM5 is recognised by its RP1 GPIO chip, and
	// the unit is looked for on ttyAMA4 (here: the pty).
	root := machine(t, "masked", map[string]string{"dev/ttyAMA4": ""})
	drv := gpiotest.NewDriver()
	chip := bladeLines(withChip(t, drv, root, 0, "pinctrl-rp1", 54))
	var dialled string
	serialDial := func(path string) uart.Dialer {
		dialled = path
		return uart.Serial(tty)
	}
	// The unit reports before the agent listens; the tty queues it.
	unit.Report(smartfantest.Left, smartfan.ReportAirflowTemperature, 281)
	b := open(t, linux.Options{Config: config(root), Roots: roots(root), GPIO: drv, Serial: serialDial, Clock: unit.Clock()})

	if dialled != filepath.Join(root, "dev", "ttyAMA4") {
		t.Fatalf("dialled %s", dialled)
	}
	info := b.Info()
	if info.FanUnit != hardware.FanUnitSmart || info.SoC != "bcm2712" {
		t.Fatalf("info %+v", info)
	}
	// The queued report is read on the link's goroutine.
	testwait.Eventually(t, smartfantest.Timeout, "the unit to be heard", func(context.Context) (bool, string) {
		return b.Capabilities().Has(hardware.CapFan), fmt.Sprint(b.Capabilities().List())
	})
	for _, c := range []hardware.Capability{hardware.CapFan, hardware.CapTach, hardware.CapAirflowTemperature, hardware.CapLEDs, hardware.CapButton} {
		if !b.Capabilities().Has(c) {
			t.Errorf("missing %s", c)
		}
	}
	// GPIO12/13 carry the UART: never requested.
	if chip.Line(12) != nil || chip.Line(13) != nil {
		t.Fatal("the UART's pins were claimed as GPIO lines")
	}

	// Commands go to the unit; the edge LED is mirrored there (between
	// two fan requests, since the firmware's LED frame overwrites it), the
	// top LED has nowhere to go and is accepted without effect.
	testwait.Eventually(t, smartfantest.Timeout, "the unit to be heard", func(context.Context) (bool, string) {
		err := b.SetFanPercent(45)
		return err == nil, fmt.Sprint(err)
	})
	if err := b.SetLED(hardware.LEDTop, hardware.Color{R: 9}); err != nil {
		t.Fatal(err)
	}
	if err := b.SetLED(hardware.LEDEdge, hardware.Color{R: 0x10, G: 0x20, B: 0x30}); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, smartfantest.Timeout, "the unit to show the edge LED at 45 %", func(context.Context) (bool, string) {
		st := unit.State()
		return st.Fan == 45 && st.LEDs[smartfantest.Left] == (smartfantest.Color{R: 0x10, G: 0x20, B: 0x30}), fmt.Sprintf("%+v", st)
	})

	// Reports come back: RPM, then the unit's button, in order.
	unit.Report(smartfantest.Left, smartfan.ReportFanRPM, 45000)
	unit.Press(1)
	unit.Advance(smartfantest.ButtonWindow)
	select {
	case <-b.ButtonEvents():
	case <-time.After(smartfantest.Timeout):
		t.Fatal("the unit's button press did not arrive")
	}
	if rpm, err := b.FanRPM(); err != nil || rpm != 4500 {
		t.Fatalf("FanRPM = %v, %v", rpm, err)
	}
	if c, err := b.AirflowTemperature(); err != nil || c != 28.1 {
		t.Fatalf("AirflowTemperature = %v, %v", c, err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := <-b.ButtonEvents(); ok {
		t.Fatal("ButtonEvents not closed")
	}
}

// TestSilentUARTNeverClaimsItsPins: with the UART overlay on, GPIO12/13
// are the UART's (UART5 on a CM4, RP1 UART4 on a CM5; the UART and PWM
// overlays are mutually exclusive, docs/hardware.md#pins). A unit that stays
// silent (powered later, say) must not make the agent take them as GPIO
// for the standard unit. Until it speaks, what it provides (fan, RPM,
// airflow, and here the only LED) is missing with the reason, and a fan
// command is reported failing; then it is all there and works.
func TestSilentUARTNeverClaimsItsPins(t *testing.T) {
	master, tty := smartfantest.OpenPTY(t)
	unit := smartfantest.NewUnit(t, smartfantest.Options{})
	root, drv, chip := cm4Blade(t, map[string]string{"dev/ttyAMA5": ""})
	b := open(t, linux.Options{Config: config(root), Roots: roots(root), GPIO: drv, Clock: unit.Clock(), AwaitPWMExport: kernelExport(root),
		Serial: func(string) uart.Dialer { return uart.Serial(tty) }})
	if b.Info().FanUnit != hardware.FanUnitSmart {
		t.Fatalf("fan unit %s, want smart: the UART is configured", b.Info().FanUnit)
	}
	if chip.Line(12) != nil || chip.Line(13) != nil {
		t.Fatal("GPIO12/13 claimed although they are muxed to the UART")
	}
	if got := read(t, root, "sys/class/pwm/pwmchip0/export"); got != "" {
		t.Fatalf("the PWM on the UART's pins was exported: %q", got)
	}
	testwait.Eventually(t, smartfantest.Timeout, "the UART to open", func(context.Context) (bool, string) {
		err := b.SetFanPercent(70)
		return err != nil && strings.Contains(err.Error(), "no report yet"), fmt.Sprint(err)
	})
	unitCaps := []hardware.Capability{hardware.CapFan, hardware.CapTach, hardware.CapAirflowTemperature, hardware.CapLEDs}
	why := "smart fan unit on " + filepath.Join(root, "dev", "ttyAMA5") + ": no frame yet"
	for _, c := range unitCaps {
		if b.Capabilities().Has(c) {
			t.Errorf("%s reported although the unit never spoke", c)
		}
		if d := b.Info().Detail; !strings.Contains(d, string(c)+": "+why) {
			t.Errorf("detail %q does not say why %s is missing", d, c)
		}
	}
	if !b.Capabilities().Has(hardware.CapButton) || b.Info().FanUnit != hardware.FanUnitSmart {
		t.Fatalf("the silent unit took more than its own capabilities: %v, %+v", b.Capabilities().List(), b.Info())
	}

	// The unit comes up: its first report, and the fan works.
	unit.Attach(smartfantest.Left, master)
	unit.Advance(smartfantest.TelemetryInterval)
	testwait.Eventually(t, smartfantest.Timeout, "the unit's capabilities to appear", func(context.Context) (bool, string) {
		return b.Capabilities().Has(hardware.CapFan), fmt.Sprint(b.Capabilities().List())
	})
	for _, c := range unitCaps {
		if !b.Capabilities().Has(c) {
			t.Errorf("%s still missing after the unit spoke", c)
		}
	}
	if d := b.Info().Detail; strings.Contains(d, "no frame yet") {
		t.Errorf("detail %q still says the unit is silent", d)
	}
	if chip.Line(12) != nil || chip.Line(13) != nil {
		t.Fatal("GPIO12/13 claimed once the unit spoke")
	}
	testwait.Eventually(t, smartfantest.Timeout, "the fan to work", func(context.Context) (bool, string) {
		err := b.SetFanPercent(70)
		return err == nil, fmt.Sprint(err)
	})
	testwait.Eventually(t, smartfantest.Timeout, "the unit to run at 70 %", func(context.Context) (bool, string) {
		st := unit.State()
		return st.Fan == 70, fmt.Sprintf("%+v", st)
	})
}

// TestSilentUnitIsAskedForFullSpeed: a unit that hears the blade but is
// not heard (it never reports: a broken TX wire, say) gets full speed
// from the moment its UART opens, not its 40 % default, although the
// agent drives no fan it cannot see.
func TestSilentUnitIsAskedForFullSpeed(t *testing.T) {
	master, tty := smartfantest.OpenPTY(t)
	unit := smartfantest.NewUnit(t, smartfantest.Options{})
	unit.Attach(smartfantest.Left, master)
	root, drv, _ := cm4Blade(t, map[string]string{"dev/ttyAMA5": ""})
	b := open(t, linux.Options{Config: config(root), Roots: roots(root), GPIO: drv, Clock: unit.Clock(),
		Serial: func(string) uart.Dialer { return uart.Serial(tty) }})
	testwait.Eventually(t, smartfantest.Timeout, "the unit to run at 100 %", func(context.Context) (bool, string) {
		st := unit.State()
		return st.Fan == 100, fmt.Sprintf("%+v", st)
	})
	if b.Capabilities().Has(hardware.CapFan) {
		t.Fatal("fan reported although the unit never spoke")
	}
}

// TestTwoBladesShareOneSmartUnit runs two linux backends, the left and the
// right blade, on one unit over real ptys: each gets its own reports and
// button presses, and the unit runs at the higher request, including after
// LED updates and a silent reset.
func TestTwoBladesShareOneSmartUnit(t *testing.T) {
	unit := smartfantest.NewUnit(t, smartfantest.Options{Internal: 27.5, External: 31})
	var blades [2]*linux.Backend
	for i := range blades {
		side := smartfantest.Side(i)
		master, tty := smartfantest.OpenPTY(t)
		unit.Attach(side, master)
		root, drv, _ := cm4Blade(t, map[string]string{"dev/ttyAMA5": ""})
		blades[i] = open(t, linux.Options{Config: config(root), Roots: roots(root), GPIO: drv, Clock: unit.Clock(),
			Serial: func(string) uart.Dialer { return uart.Serial(tty) }})
	}
	left, right := blades[0], blades[1]
	unit.Advance(smartfantest.TelemetryInterval)
	set := func(b *linux.Backend, p uint8) {
		t.Helper()
		testwait.Eventually(t, smartfantest.Timeout, "the fan request to be accepted", func(context.Context) (bool, string) {
			err := b.SetFanPercent(p)
			return err == nil, fmt.Sprint(err)
		})
	}
	fanIs := func(want uint8) {
		t.Helper()
		testwait.Eventually(t, smartfantest.Timeout, fmt.Sprintf("the unit to run at %d %%", want), func(context.Context) (bool, string) {
			st := unit.State()
			return st.Fan == want, fmt.Sprintf("%+v", st)
		})
	}
	set(left, 35)
	set(right, 80)
	fanIs(80)
	if c, err := left.AirflowTemperature(); err != nil || c != 27.5 {
		t.Fatalf("left airflow = %v, %v; want the internal sensor's 27.5", c, err)
	}
	if c, err := right.AirflowTemperature(); err != nil || c != 31 {
		t.Fatalf("right airflow = %v, %v; want the external sensor's 31", c, err)
	}

	// An LED frame sets the sender's request to the last percent the
	// unit decoded, from either blade; each blade's fan request just
	// before its LED frame makes that its own (35, then 80).
	if err := left.SetLED(hardware.LEDEdge, hardware.Color{G: 255}); err != nil {
		t.Fatal(err)
	}
	if err := right.SetLED(hardware.LEDEdge, hardware.Color{B: 255}); err != nil {
		t.Fatal(err)
	}
	fanIs(80)
	set(right, 20)
	fanIs(35)

	// A silent reset: 40 %, both requests forgotten; the re-sends bring
	// back the higher request (35 < 40, so the unit first drops to 35
	// once both have re-sent).
	set(right, 90)
	fanIs(90)
	unit.Reset()
	unit.Advance(uart.DefaultResendInterval)
	fanIs(90)

	// The button: once is the left blade's, twice the right's.
	unit.Press(2)
	unit.Advance(smartfantest.ButtonWindow)
	select {
	case <-right.ButtonEvents():
	case <-time.After(smartfantest.Timeout):
		t.Fatal("a double press did not reach the right blade")
	}
	select {
	case <-left.ButtonEvents():
		t.Fatal("a double press reached the left blade")
	default:
	}
}

func TestConfigOverrides(t *testing.T) {
	root, drv, chip := cm4Blade(t, map[string]string{
		"sys/class/thermal/thermal_zone2/type": "soc-thermal\n",
		"sys/class/thermal/thermal_zone2/temp": "61000\n",
	})
	chip.NameLine(5, "BLADE_BTN")
	cfg := config(root)
	cfg.GPIOChip = "gpiochip1"
	cfg.ThermalZoneType = "soc-thermal"
	cfg.FanUnit = "none"
	cfg.Lines = agentconfigv1.GPIOLines{Button: "BLADE_BTN", Stealth: "6"}
	b := open(t, linux.Options{Config: cfg, Roots: roots(root), GPIO: drv})
	if c, _ := b.SoCTemperature(); c != 61 {
		t.Fatalf("temperature %v from the wrong zone", c)
	}
	if chip.Line(5) == nil || chip.Line(6) == nil || chip.Line(20) != nil || chip.Line(21) != nil {
		t.Fatal("line overrides not applied")
	}
	if b.Capabilities().Has(hardware.CapFan) || b.Capabilities().Has(hardware.CapTach) || b.Info().FanUnit != hardware.FanUnitNone {
		t.Fatalf("fanUnit none still drives a fan: %v", b.Capabilities().List())
	}
}

// kubebladeLEDsPWM is the PWM chip of kernel/kubeblade-leds as the kernel
// lays it out: device and driver both "kubeblade-leds", one channel.
func kubebladeLEDsPWM(name string) map[string]string {
	return pwmChipAt(name, "platform/kubeblade-leds", "kubeblade-leds", "", 0, 1)
}

// TestFanPWMChosenByIdentity: the PWM chip for GPIO12 is found by what it
// is, never by being pwmchip0.
func TestFanPWMChosenByIdentity(t *testing.T) {
	rp1PWM1 := pwmChip("pwmchip0", "1f0009c000.pwm", "pwm-rp1", "raspberrypi,rp1-pwm", 0x10, 4)
	rp1PWM0 := pwmChip("pwmchip1", "1f00098000.pwm", "pwm-rp1", "raspberrypi,rp1-pwm", 0x11, 4)
	for name, tc := range map[string]struct {
		fixture  string
		files    map[string]string
		hold     string // consumer holding GPIO12, as a kernel driver would
		pwmChip  string // linux.pwmChip
		exported string // the chip whose export was written, "" for none
		fan      string // the fan kind in Info.Detail
		errLike  string // part of the missing-fan reason
	}{
		"Pi 5 kernel: pwmchip0 is the IO board's fan, RP1 PWM0 is pwmchip1": {
			fixture: "cm5", files: merge(rp1PWM1, rp1PWM0), exported: "pwmchip1", fan: "sysfs-pwm (RP1 PWM0 1f00098000.pwm",
		},
		"pwm-gpio holding GPIO12 (Talos CM5 with the pwm-gpio overlay)": {
			fixture: "cm5", files: merge(rp1PWM1, pwmChip("pwmchip2", "pwm_gpio", "pwm-gpio", "pwm-gpio", 0x12, 1)),
			hold: "pwm_gpio", exported: "pwmchip2", fan: "sysfs-pwm (pwm-gpio on GPIO12",
		},
		// On/off keeps the reason it is not proportional, as
		// docs/fan-units.md promises ("says why").
		"pwm-gpio on another line is not the fan": {
			fixture: "cm5", files: pwmChip("pwmchip0", "pwm_gpio", "pwm-gpio", "pwm-gpio", 0x12, 1),
			fan: "gpio-on-off (no PWM chip drives GPIO12 (found pwmchip0 = pwm_gpio driver pwm-gpio; set linux.pwmChip to choose one)",
		},
		"no PWM chip at all: on/off, and why": {
			fixture: "cm5", files: map[string]string{}, fan: "gpio-on-off (no PWM chip drives GPIO12 (found none; set linux.pwmChip to choose one)",
		},
		// kernel/kubeblade-leds/core.c: platform_create_bundle makes a
		// platform device named after the driver, KBL_DRIVER_NAME, with
		// no devicetree node, and its PWM chip hangs off that device.
		"kubeblade's LED driver exposes the fan channel": {
			fixture: "cm4", files: kubebladeLEDsPWM("pwmchip0"), exported: "pwmchip0", fan: "sysfs-pwm (kubeblade LED driver kubeblade-leds, pwmchip0 channel 0",
		},
		"kubeblade's LED driver wins over a BCM2711 PWM0 probed before it": {
			fixture: "cm4", files: merge(pwmChip("pwmchip0", "fe20c000.pwm", "pwm-bcm2835", "brcm,bcm2835-pwm", 0x3, 2), kubebladeLEDsPWM("pwmchip1")),
			exported: "pwmchip1", fan: "sysfs-pwm (kubeblade LED driver kubeblade-leds, pwmchip1 channel 0",
		},
		"kubeblade's LED driver on a CM5 wins over RP1 PWM0": {
			fixture: "cm5", files: merge(rp1PWM0, kubebladeLEDsPWM("pwmchip2")),
			exported: "pwmchip2", fan: "sysfs-pwm (kubeblade LED driver kubeblade-leds, pwmchip2 channel 0",
		},
		"an unknown chip is left alone; GPIO on/off is the last resort": {
			fixture: "cm4", files: pwmChip("pwmchip0", "3-0040", "pca9685-pwm", "nxp,pca9685-pwm", 0x5, 16),
			fan: "gpio-on-off (no PWM chip drives GPIO12 (found pwmchip0 = 3-0040 driver pca9685-pwm; set linux.pwmChip to choose one)",
		},
		"linux.pwmChip by device name": {
			fixture: "cm5", files: merge(rp1PWM1, rp1PWM0), pwmChip: "1f0009c000.pwm", exported: "pwmchip0", fan: "sysfs-pwm (linux.pwmChip 1f0009c000.pwm",
		},
		"linux.pwmChip naming nothing": {
			fixture: "cm5", files: rp1PWM0, pwmChip: "pwmchip7", errLike: `linux.pwmChip "pwmchip7": no such PWM chip (found pwmchip1 = 1f00098000.pwm driver pwm-rp1)`,
		},
	} {
		t.Run(name, func(t *testing.T) {
			root := machine(t, tc.fixture, tc.files)
			drv := gpiotest.NewDriver()
			label := "pinctrl-bcm2711"
			if tc.fixture == "cm5" {
				label = "pinctrl-rp1"
			}
			chip := bladeLines(withChip(t, drv, root, 0, label, 54))
			if tc.hold != "" {
				chip.Hold(12, tc.hold)
			}
			cfg := config(root)
			cfg.PWMChip = tc.pwmChip
			if tc.errLike != "" {
				cfg.FanDriver = "pwm"
			}
			b := open(t, linux.Options{Config: cfg, Roots: roots(root), GPIO: drv, AwaitPWMExport: kernelExport(root)})
			for _, c := range sysfs.PWMChips(filepath.Join(root, "sys")) {
				got := read(t, root, "sys/class/pwm/"+c+"/export")
				if want := map[bool]string{true: "0", false: ""}[c == tc.exported]; got != want {
					t.Errorf("%s export = %q, want %q", c, got, want)
				}
			}
			if tc.fan != "" && !strings.Contains(b.Info().Detail, "fan: "+tc.fan) {
				t.Errorf("detail %q does not say fan: %s", b.Info().Detail, tc.fan)
			}
			if tc.errLike != "" && (b.Capabilities().Has(hardware.CapFan) || !strings.Contains(b.Info().Detail, tc.errLike)) {
				t.Errorf("detail %q lacks the reason %q", b.Info().Detail, tc.errLike)
			}
		})
	}
}

// TestTachOffLeavesGPIO13Alone: tachEnabled false means the line is not
// requested at all (a fan without a tach wire may share the pin).
func TestTachOffLeavesGPIO13Alone(t *testing.T) {
	root, drv, chip := cm4Blade(t, nil)
	b := open(t, linux.Options{Config: config(root), Roots: roots(root), GPIO: drv, NoTach: true, AwaitPWMExport: kernelExport(root)})
	if chip.Line(13) != nil {
		t.Fatal("GPIO13 requested with the tach turned off")
	}
	if b.Capabilities().Has(hardware.CapTach) || strings.Contains(b.Info().Detail, "tach:") {
		t.Fatalf("caps %v, detail %q", b.Capabilities().List(), b.Info().Detail)
	}
}

// TestCloseLeavesTheFanSafe: what the agent's safe exit set survives it
// where the kernel allows. Sysfs PWM keeps its state after the process;
// mainline pinctrl-bcm2835 turns a released output into an input but does
// not touch its pull (bcm2835_pmx_free, unless persist_gpio_outputs).
func TestCloseLeavesTheFanSafe(t *testing.T) {
	t.Run("sysfs PWM stays enabled at 100 %", func(t *testing.T) {
		root, drv, _ := cm4Blade(t, nil)
		b := open(t, linux.Options{Config: config(root), Roots: roots(root), GPIO: drv, AwaitPWMExport: kernelExport(root)})
		if err := b.SetFanPercent(100); err != nil {
			t.Fatal(err)
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		for p, want := range map[string]string{
			"sys/class/pwm/pwmchip0/pwm0/enable":     "1",
			"sys/class/pwm/pwmchip0/pwm0/duty_cycle": "40000",
			"sys/class/pwm/pwmchip0/unexport":        "",
		} {
			if got, _ := os.ReadFile(filepath.Join(root, p)); string(got) != want {
				t.Errorf("%s = %q, want %q", p, got, want)
			}
		}
	})
	t.Run("GPIO fan line becomes a pulled-up input before release", func(t *testing.T) {
		root := machine(t, "cm5", map[string]string{})
		drv := gpiotest.NewDriver()
		chip := bladeLines(withChip(t, drv, root, 0, "pinctrl-rp1", 54))
		b := open(t, linux.Options{Config: config(root), Roots: roots(root), GPIO: drv})
		if err := b.SetFanPercent(100); err != nil {
			t.Fatal(err)
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		fan := chip.Line(12)
		if r := fan.Request(); r.Output || r.Bias != gpio.BiasPullUp || !fan.Closed() {
			t.Fatalf("fan line at release: %+v closed %v; want an input with a pull-up", r, fan.Closed())
		}
		if v := chip.Level(12); v != 1 {
			t.Fatalf("GPIO12 reads %d after the agent, want 1 (fan on)", v)
		}
	})
}

// TestKilledAgentLeavesTheFanOn: an agent that dies without Close (SIGKILL,
// the OOM killer, the kubelet after the grace period) has its lines
// released by the kernel as they are. The on/off fan line was requested
// with a pull-up, so the released pin reads high — the fan runs — even when
// the agent had switched it off. (The old request had no bias on outputs:
// the pin fell back to its pull-down and the fan stopped.)
func TestKilledAgentLeavesTheFanOn(t *testing.T) {
	for _, pct := range []uint8{100, 0} {
		t.Run(fmt.Sprintf("fan at %d %%", pct), func(t *testing.T) {
			root := machine(t, "cm5", map[string]string{})
			drv := gpiotest.NewDriver()
			chip := bladeLines(withChip(t, drv, root, 0, "pinctrl-rp1", 54))
			b := open(t, linux.Options{Config: config(root), Roots: roots(root), GPIO: drv})
			if !strings.Contains(b.Info().Detail, "fan: gpio-on-off") {
				t.Fatalf("detail %s", b.Info().Detail)
			}
			if err := b.SetFanPercent(pct); err != nil {
				t.Fatal(err)
			}
			fan := chip.Line(12)
			if r := fan.Request(); !r.Output || r.Bias != gpio.BiasPullUp {
				t.Fatalf("fan line requested as %+v, want an output with a pull-up", r)
			}
			// The process dies: the kernel releases the line, no Close.
			fan.Close()
			if v := chip.Level(12); v != 1 {
				t.Fatalf("GPIO12 reads %d once the dead agent's line is released, want 1 (fan on)", v)
			}
		})
	}
}

// TestRadxaCM5 follows docs/hardware.md#pins: the fan through the pwm-fan hwmon device
// (pwm1 0–255, drivers/hwmon/pwm-fan.c MAX_PWM), the SoC temperature from
// the thermal zone the kernel in use names (mainline rk3588-base.dtsi:
// package-thermal; Rockchip's BSP: soc-thermal), the rest missing.
func TestRadxaCM5(t *testing.T) {
	for _, tc := range []struct{ fixture, zone string }{
		{"radxa-cm5", "package-thermal"},
		{"radxa-cm5-bsp", "soc-thermal"},
	} {
		t.Run(tc.fixture, func(t *testing.T) {
			root := machine(t, tc.fixture, merge(pwmFan("hwmon7", "pwm-fan", 0x77, 0), map[string]string{
				"sys/class/hwmon/hwmon0/name":          "soc_thermal\n",
				"sys/class/thermal/thermal_zone0/type": tc.zone + "\n",
				"sys/class/thermal/thermal_zone0/temp": "51230\n",
				"sys/class/thermal/thermal_zone1/type": "bigcore0-thermal\n",
				"sys/class/thermal/thermal_zone1/temp": "60000\n",
			}))
			drv := gpiotest.NewDriver()
			gpio0 := withChip(t, drv, root, 0, "gpio0", 32)
			b := open(t, linux.Options{Config: config(root), Roots: roots(root), GPIO: drv})
			info := b.Info()
			if !info.IsBlade || info.SoC != "rk3588" || info.FanUnit != hardware.FanUnitStandard {
				t.Fatalf("info %+v", info)
			}
			if diff := cmp.Diff([]string{"fan", "temperature"}, b.Capabilities().List()); diff != "" {
				t.Fatalf("capabilities (-want +got):\n%s\ndetail %s", diff, info.Detail)
			}
			if !strings.Contains(info.Detail, "GPIO mapping") {
				t.Errorf("detail does not say why GPIO is missing: %s", info.Detail)
			}
			for off := 0; off < 32; off++ {
				if gpio0.Line(off) != nil {
					t.Fatalf("line %d of an RK3588 GPIO chip claimed", off)
				}
			}
			for pct, want := range map[uint8]string{60: "153", 0: "0", 100: "255"} {
				if err := b.SetFanPercent(pct); err != nil {
					t.Fatal(err)
				}
				if got := read(t, root, "sys/class/hwmon/hwmon7/pwm1"); got != want {
					t.Errorf("%d %%: pwm1 = %q, want %q", pct, got, want)
				}
			}
			if c, err := b.SoCTemperature(); err != nil || c != 51.23 {
				t.Fatalf("SoCTemperature = %v, %v", c, err)
			}
		})
	}
}

// TestHwmonFanKeptAgainstTheGovernor: a pwm-fan that is also a cooling
// device gets set by the kernel's thermal governor; the backend puts back
// what the agent asked for when the governor went lower, and leaves a
// higher setting alone.
func TestHwmonFanKeptAgainstTheGovernor(t *testing.T) {
	root := machine(t, "radxa-cm5-bsp", merge(pwmFan("hwmon1", "pwm-fan", 0x77, 0), map[string]string{
		"sys/class/thermal/thermal_zone0/type": "soc-thermal\n",
		"sys/class/thermal/thermal_zone0/temp": "70000\n",
	}))
	b := open(t, linux.Options{Config: config(root), Roots: roots(root), GPIO: gpiotest.NewDriver()})
	if err := b.SetFanPercent(60); err != nil {
		t.Fatal(err)
	}
	pwm1 := filepath.Join(root, "sys/class/hwmon/hwmon1/pwm1")
	for _, tc := range []struct{ governor, want string }{
		{"64", "153"},  // lower: restored
		{"255", "255"}, // higher: kept
	} {
		os.WriteFile(pwm1, []byte(tc.governor), 0o644)
		if _, err := b.SoCTemperature(); err != nil {
			t.Fatal(err)
		}
		if got := read(t, root, "sys/class/hwmon/hwmon1/pwm1"); got != tc.want {
			t.Errorf("governor wrote %s: pwm1 = %s, want %s", tc.governor, got, tc.want)
		}
	}
}
