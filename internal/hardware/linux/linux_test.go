package linux_test

import (
	"context"
	"errors"
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
	"github.com/kubeblade/kubeblade/internal/smartfan"
	"github.com/kubeblade/kubeblade/internal/smartfan/smartfantest"
	"github.com/kubeblade/kubeblade/internal/smartfan/uart"
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
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func read(t *testing.T, root, p string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, p))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func config(root string) agentconfigv1.LinuxHardwareConfig {
	return agentconfigv1.LinuxHardwareConfig{
		SysfsRoot: filepath.Join(root, "sys"),
		DevRoot:   filepath.Join(root, "dev"),
		ProcRoot:  filepath.Join(root, "proc"),
	}
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
			cfg := config(root)
			got := linux.Detect(cfg.SysfsRoot, cfg.ProcRoot, cfg.DevRoot, d)
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

// cm4Blade is a CM4 blade as the kernel shows it with dtoverlay=pwm: PWM
// channel 0 not yet exported, cpu-thermal as zone 1, no LED driver.
func cm4Blade(t *testing.T, extra map[string]string) (string, *gpiotest.Driver, *gpiotest.Chip) {
	files := map[string]string{
		"sys/class/pwm/pwmchip0/npwm":          "2\n",
		"sys/class/pwm/pwmchip0/export":        "",
		"sys/class/thermal/thermal_zone0/type": "gpu-thermal\n",
		"sys/class/thermal/thermal_zone0/temp": "99000\n",
		"sys/class/thermal/thermal_zone1/type": "cpu-thermal\n",
		"sys/class/thermal/thermal_zone1/temp": "48312\n",
		"sys/class/leds/ACT/brightness":        "0\n",
		"sys/class/leds/ACT/max_brightness":    "1\n",
	}
	for k, v := range extra {
		files[k] = v
	}
	root := machine(t, "cm4", files)
	d := gpiotest.NewDriver()
	withChip(t, d, root, 0, "raspberrypi-exp-gpio", 8)
	chip := bladeLines(withChip(t, d, root, 1, "pinctrl-bcm2711", 58))
	return root, d, chip
}

// kernelExport plays the kernel creating pwm0/ after an export.
func kernelExport(root string) func(int) bool {
	return func(attempt int) bool {
		if attempt > 0 {
			return false
		}
		dir := filepath.Join(root, "sys/class/pwm/pwmchip0/pwm0")
		os.MkdirAll(dir, 0o755)
		for f, c := range map[string]string{"period": "0\n", "duty_cycle": "0\n", "enable": "0\n"} {
			os.WriteFile(filepath.Join(dir, f), []byte(c), 0o644)
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
	b := open(t, linux.Options{Config: config(root), GPIO: drv, Clock: fc, AwaitPWMExport: kernelExport(root)})

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
	t.Run("CM5 hwmon pwm1 with its tach when GPIO13 is taken", func(t *testing.T) {
		root := machine(t, "cm5", map[string]string{
			"sys/class/hwmon/hwmon3/name":          "pwmfan\n",
			"sys/class/hwmon/hwmon3/pwm1":          "0\n",
			"sys/class/hwmon/hwmon3/fan1_input":    "1800\n",
			"sys/class/thermal/thermal_zone0/type": "cpu-thermal\n",
			"sys/class/thermal/thermal_zone0/temp": "40000\n",
		})
		drv := gpiotest.NewDriver()
		chip := bladeLines(withChip(t, drv, root, 0, "pinctrl-rp1", 54))
		chip.FailRequest(13, errors.New("device or resource busy"))
		b := open(t, linux.Options{Config: config(root), GPIO: drv})
		if b.Info().SoC != "bcm2712" {
			t.Fatalf("SoC %s", b.Info().SoC)
		}
		if err := b.SetFanPercent(40); err != nil {
			t.Fatal(err)
		}
		if got := read(t, root, "sys/class/hwmon/hwmon3/pwm1"); got != "102" {
			t.Fatalf("pwm1 = %q, want 102", got)
		}
		if rpm, err := b.FanRPM(); err != nil || rpm != 1800 {
			t.Fatalf("FanRPM = %v, %v", rpm, err)
		}
	})
	t.Run("GPIO on/off as last resort", func(t *testing.T) {
		root := machine(t, "cm5", map[string]string{})
		drv := gpiotest.NewDriver()
		chip := bladeLines(withChip(t, drv, root, 0, "pinctrl-rp1", 54))
		b := open(t, linux.Options{Config: config(root), GPIO: drv})
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
		b := open(t, linux.Options{Config: config(root), GPIO: drv})
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
		b := open(t, linux.Options{Config: cfg, GPIO: drv})
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
	b := open(t, linux.Options{Config: config(root), GPIO: gpiotest.NewDriver(), AwaitPWMExport: kernelExport(root)})
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
		b := open(t, linux.Options{Config: config(root), GPIO: drv, AwaitPWMExport: kernelExport(root)})
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
		b := open(t, linux.Options{Config: config(root), GPIO: drv, AwaitPWMExport: kernelExport(root)})
		if err := b.SetLED(hardware.LEDEdge, hardware.Color{R: 1, G: 2, B: 3}); err != nil {
			t.Fatal(err)
		}
		if err := b.SetLED(hardware.LEDTop, hardware.Color{R: 0x40}); err != nil {
			t.Fatal(err)
		}
		if got := read(t, root, "dev/leds0"); got != "\x40\x00\x00\x00\x01\x02\x03\x00" {
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
			b := open(t, linux.Options{Config: config(root), GPIO: drv})
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
	unit := smartfantest.NewUnit(t, master)
	// Masked devicetree: the CM5 is recognised by its RP1 GPIO chip, and
	// the unit is looked for on ttyAMA4 (here: the pty).
	root := machine(t, "masked", map[string]string{"dev/ttyAMA4": ""})
	drv := gpiotest.NewDriver()
	bladeLines(withChip(t, drv, root, 0, "pinctrl-rp1", 54))
	var dialled string
	serialDial := func(path string) uart.Dialer {
		dialled = path
		return uart.Serial(tty)
	}
	// The unit reports before the agent listens; the tty queues it.
	unit.Report(smartfan.ReportAirflowTemperature, 281)
	b := open(t, linux.Options{Config: config(root), GPIO: drv, Serial: serialDial, SmartFanDetect: smartfantest.Timeout})

	if dialled != filepath.Join(root, "dev", "ttyAMA4") {
		t.Fatalf("dialled %s", dialled)
	}
	info := b.Info()
	if info.FanUnit != hardware.FanUnitSmart || info.SoC != "bcm2712" {
		t.Fatalf("info %+v", info)
	}
	for _, c := range []hardware.Capability{hardware.CapFan, hardware.CapTach, hardware.CapAirflowTemperature, hardware.CapLEDs, hardware.CapButton} {
		if !b.Capabilities().Has(c) {
			t.Errorf("missing %s", c)
		}
	}

	// Commands go to the unit; the edge LED is mirrored there, the top
	// LED has nowhere to go and is accepted without effect.
	if err := b.SetFanPercent(45); err != nil {
		t.Fatal(err)
	}
	unit.Expect(smartfan.SetFanPercent(45))
	if err := b.SetLED(hardware.LEDTop, hardware.Color{R: 9}); err != nil {
		t.Fatal(err)
	}
	if err := b.SetLED(hardware.LEDEdge, hardware.Color{R: 0x10, G: 0x20, B: 0x30}); err != nil {
		t.Fatal(err)
	}
	unit.Expect(smartfan.SetLED(0x10, 0x20, 0x30))

	// Reports come back: RPM, then the unit's button, in order.
	unit.Report(smartfan.ReportFanRPM, 45000)
	unit.Report(smartfan.ReportButton, 0)
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

// silent is a UART on which nothing ever arrives.
type silent struct{ done chan struct{} }

func (s silent) Read([]byte) (int, error)    { <-s.done; return 0, io.EOF }
func (s silent) Write(p []byte) (int, error) { return len(p), nil }
func (s silent) Close() error                { close(s.done); return nil }

func TestSilentUARTMeansStandardUnit(t *testing.T) {
	root, drv, _ := cm4Blade(t, map[string]string{"dev/ttyAMA5": ""})
	fc := clocktesting.NewFakeClock(epoch)
	dial := func(string) uart.Dialer {
		return func() (io.ReadWriteCloser, error) { return silent{done: make(chan struct{})}, nil }
	}
	opened := make(chan *linux.Backend)
	go func() {
		b, err := linux.Open(context.Background(), linux.Options{Config: config(root), GPIO: drv, Clock: fc, Serial: dial, AwaitPWMExport: kernelExport(root)})
		if err != nil {
			t.Error(err)
		}
		opened <- b
	}()
	// Open waits DefaultSmartFanDetect on the fake clock for a frame.
	deadline := time.Now().Add(smartfantest.Timeout)
	for !fc.HasWaiters() {
		if time.Now().After(deadline) {
			t.Fatal("Open does not wait for the smart fan unit")
		}
		time.Sleep(time.Millisecond)
	}
	fc.Step(linux.DefaultSmartFanDetect)
	b := <-opened
	defer b.Close()
	if b.Info().FanUnit != hardware.FanUnitStandard || b.Capabilities().Has(hardware.CapAirflowTemperature) {
		t.Fatalf("info %+v caps %v", b.Info(), b.Capabilities().List())
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
	b := open(t, linux.Options{Config: cfg, GPIO: drv})
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
