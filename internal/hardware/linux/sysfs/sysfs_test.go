package sysfs_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kubeblade/kubeblade/internal/hardware/linux/sysfs"
)

// tree writes files (path → content) under a temporary root.
func tree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
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

// snapshot reads every file under root, so a test can assert the exact
// set of files written and their content.
func snapshot(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(root, p)
		out[rel] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// changed returns the files whose content differs from before.
func changed(before, after map[string]string) map[string]string {
	out := map[string]string{}
	for p, c := range after {
		if b, ok := before[p]; !ok || b != c {
			out[p] = c
		}
	}
	return out
}

func TestPWMExportsAndDrives(t *testing.T) {
	root := tree(t, map[string]string{
		"class/pwm/pwmchip0/npwm":   "2\n",
		"class/pwm/pwmchip0/export": "",
	})
	before := snapshot(t, root)
	chanDir := filepath.Join(root, "class/pwm/pwmchip0/pwm0")
	exported := 0
	// The kernel creates pwm0/ on export; here the await hook plays it.
	await := func(attempt int) bool {
		if attempt > 0 {
			return false
		}
		exported++
		os.MkdirAll(chanDir, 0o755)
		for f, c := range map[string]string{"period": "0\n", "duty_cycle": "0\n", "enable": "0\n", "polarity": "normal\n"} {
			os.WriteFile(filepath.Join(chanDir, f), []byte(c), 0o644)
		}
		return true
	}
	p, err := sysfs.OpenPWM(sysfs.PWMOptions{SysfsRoot: root, Chip: "pwmchip0", AwaitExport: await})
	if err != nil {
		t.Fatal(err)
	}
	if exported != 1 {
		t.Fatalf("export awaited %d times", exported)
	}
	if err := p.SetPercent(35); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"class/pwm/pwmchip0/export":          "0",
		"class/pwm/pwmchip0/pwm0/period":     "40000",
		"class/pwm/pwmchip0/pwm0/duty_cycle": "14000",
		"class/pwm/pwmchip0/pwm0/enable":     "1",
		"class/pwm/pwmchip0/pwm0/polarity":   "normal\n",
	}
	if diff := cmp.Diff(want, changed(before, snapshot(t, root))); diff != "" {
		t.Fatalf("files written (-want +got):\n%s", diff)
	}
	for pct, duty := range map[uint8]string{0: "0", 100: "40000", 1: "400"} {
		if err := p.SetPercent(pct); err != nil {
			t.Fatal(err)
		}
		if got := snapshot(t, root)["class/pwm/pwmchip0/pwm0/duty_cycle"]; got != duty {
			t.Errorf("%d %%: duty_cycle %q, want %q", pct, got, duty)
		}
	}
	if err := p.SetPercent(101); err == nil {
		t.Error("101 % accepted")
	}
}

func TestPWMAlreadyConfiguredIsLeftAlone(t *testing.T) {
	root := tree(t, map[string]string{
		"class/pwm/pwmchip0/npwm":            "1\n",
		"class/pwm/pwmchip2/npwm":            "4\n",
		"class/pwm/pwmchip2/export":          "",
		"class/pwm/pwmchip2/pwm3/period":     "40000\n",
		"class/pwm/pwmchip2/pwm3/duty_cycle": "20000\n",
		"class/pwm/pwmchip2/pwm3/enable":     "1\n",
	})
	before := snapshot(t, root)
	if _, err := sysfs.OpenPWM(sysfs.PWMOptions{SysfsRoot: root, Chip: "pwmchip2", Channel: 3, AwaitExport: func(int) bool { return false }}); err != nil {
		t.Fatal(err)
	}
	// pwmchip0 has one channel: channel 3 is refused, nothing written.
	if _, err := sysfs.OpenPWM(sysfs.PWMOptions{SysfsRoot: root, Chip: "pwmchip0", Channel: 3}); err == nil {
		t.Fatal("channel 3 of a one-channel chip accepted")
	}
	if diff := cmp.Diff(map[string]string{}, changed(before, snapshot(t, root))); diff != "" {
		t.Fatalf("an enabled channel with the right period was rewritten:\n%s", diff)
	}
}

func TestPWMMissing(t *testing.T) {
	root := tree(t, map[string]string{"class/thermal/.keep": ""})
	if _, err := sysfs.OpenPWM(sysfs.PWMOptions{SysfsRoot: root}); !errors.Is(err, sysfs.ErrNotFound) {
		t.Fatalf("err = %v, want ErrNotFound", err)
	}
	if _, err := sysfs.OpenPWM(sysfs.PWMOptions{SysfsRoot: root, Chip: "pwmchip7"}); !errors.Is(err, sysfs.ErrNotFound) {
		t.Fatalf("err = %v, want ErrNotFound", err)
	}
	// Export that never materialises is an error, not a hang.
	root = tree(t, map[string]string{"class/pwm/pwmchip0/npwm": "1", "class/pwm/pwmchip0/export": ""})
	calls := 0
	_, err := sysfs.OpenPWM(sysfs.PWMOptions{SysfsRoot: root, Chip: "pwmchip0", AwaitExport: func(int) bool { calls++; return calls < 3 }})
	if err == nil || calls != 3 {
		t.Fatalf("err = %v after %d waits", err, calls)
	}
}

func TestHwmon(t *testing.T) {
	root := tree(t, map[string]string{
		"class/hwmon/hwmon0/name":        "cpu_thermal\n",
		"class/hwmon/hwmon0/temp1_input": "45000\n",
		"class/hwmon/hwmon1/name":        "rpi_volt\n",
		"class/hwmon/hwmon2/name":        "pwmfan\n",
		"class/hwmon/hwmon2/pwm1":        "0\n",
		"class/hwmon/hwmon2/pwm1_enable": "2\n",
		"class/hwmon/hwmon2/fan1_input":  "2480\n",
	})
	before := snapshot(t, root)
	h, err := sysfs.FindHwmon(root, "")
	if err != nil {
		t.Fatal(err)
	}
	if h.Name() != "pwmfan" || !h.HasTach() {
		t.Fatalf("found %s (tach %v)", h.Name(), h.HasTach())
	}
	if err := h.SetPercent(50); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"class/hwmon/hwmon2/pwm1_enable": "1",
		"class/hwmon/hwmon2/pwm1":        "128",
	}
	if diff := cmp.Diff(want, changed(before, snapshot(t, root))); diff != "" {
		t.Fatalf("files written (-want +got):\n%s", diff)
	}
	for pct, v := range map[uint8]string{0: "0", 100: "255", 1: "3"} {
		h.SetPercent(pct)
		if got := snapshot(t, root)["class/hwmon/hwmon2/pwm1"]; got != v {
			t.Errorf("%d %%: pwm1 = %q, want %q", pct, got, v)
		}
	}
	if rpm, err := h.FanRPM(); err != nil || rpm != 2480 {
		t.Fatalf("FanRPM = %v, %v", rpm, err)
	}
	if _, err := sysfs.FindHwmon(root, "cooling_fan"); !errors.Is(err, sysfs.ErrNotFound) {
		t.Fatalf("by wrong name: %v", err)
	}
}

func TestThermalZoneByType(t *testing.T) {
	root := tree(t, map[string]string{
		"class/thermal/thermal_zone0/type": "rp1_adc\n",
		"class/thermal/thermal_zone0/temp": "31000\n",
		"class/thermal/thermal_zone1/type": "cpu-thermal\n",
		"class/thermal/thermal_zone1/temp": "52375\n",
		"class/thermal/thermal_zone2/type": "broken\n",
		"class/thermal/thermal_zone2/temp": "n/a\n",
		"class/thermal/thermal_zone3/type": "cold\n",
		"class/thermal/thermal_zone3/temp": "-5500\n",
	})
	cases := map[string]struct {
		typ     string
		want    float64
		wantErr bool
	}{
		"cpu-thermal, not zone 0": {typ: "cpu-thermal", want: 52.375},
		"negative":                {typ: "cold", want: -5.5},
		"garbage":                 {typ: "broken", wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			z, err := sysfs.FindThermalZone(root, tc.typ)
			if err != nil {
				t.Fatal(err)
			}
			got, err := z.Celsius()
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Fatalf("Celsius = %v, %v; want %v (err %v)", got, err, tc.want, tc.wantErr)
			}
		})
	}
	if _, err := sysfs.FindThermalZone(root, "soc-thermal"); !errors.Is(err, sysfs.ErrNotFound) {
		t.Fatalf("missing type: %v", err)
	}
}

func TestMulticolorLED(t *testing.T) {
	root := tree(t, map[string]string{
		"class/leds/ACT/brightness":                  "0\n",
		"class/leds/blade:rgb:top/multi_index":       "green red blue\n",
		"class/leds/blade:rgb:top/multi_intensity":   "0 0 0\n",
		"class/leds/blade:rgb:top/max_brightness":    "255\n",
		"class/leds/blade:rgb:top/brightness":        "0\n",
		"class/leds/blade:rgbw:edge/multi_index":     "red green blue white\n",
		"class/leds/blade:rgbw:edge/multi_intensity": "0 0 0 0\n",
		"class/leds/blade:rgbw:edge/max_brightness":  "100\n",
		"class/leds/blade:rgbw:edge/brightness":      "0\n",
	})
	if diff := cmp.Diff([]string{"blade:rgb:top", "blade:rgbw:edge"}, sysfs.MulticolorLEDs(root)); diff != "" {
		t.Fatalf("multicolor LEDs (-want +got):\n%s", diff)
	}
	before := snapshot(t, root)
	top, err := sysfs.OpenMulticolorLED(root, "blade:rgb:top")
	if err != nil {
		t.Fatal(err)
	}
	edge, err := sysfs.OpenMulticolorLED(root, "blade:rgbw:edge")
	if err != nil {
		t.Fatal(err)
	}
	if err := top.Set(0x10, 0x20, 0x30); err != nil {
		t.Fatal(err)
	}
	if err := edge.Set(255, 51, 0); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		// multi_index says green, red, blue.
		"class/leds/blade:rgb:top/multi_intensity": "32 16 48",
		"class/leds/blade:rgb:top/brightness":      "255",
		// Scaled to max_brightness 100; white stays dark.
		"class/leds/blade:rgbw:edge/multi_intensity": "100 20 0 0",
		"class/leds/blade:rgbw:edge/brightness":      "100",
	}
	if diff := cmp.Diff(want, changed(before, snapshot(t, root))); diff != "" {
		t.Fatalf("files written (-want +got):\n%s", diff)
	}
	if err := top.Set(0, 0, 0); err != nil {
		t.Fatal(err)
	}
	s := snapshot(t, root)
	if s["class/leds/blade:rgb:top/multi_intensity"] != "0 0 0" || s["class/leds/blade:rgb:top/brightness"] != "0" {
		t.Fatalf("off: %q / %q", s["class/leds/blade:rgb:top/multi_intensity"], s["class/leds/blade:rgb:top/brightness"])
	}
	if _, err := sysfs.OpenMulticolorLED(root, "ACT"); err == nil {
		t.Fatal("single-colour LED opened as multicolor")
	}
}

func TestDeviceIdentity(t *testing.T) {
	root := tree(t, map[string]string{
		"devices/platform/soc/1f00098000.pwm/of_node/compatible": "raspberrypi,rp1-pwm\x00",
		"devices/platform/soc/1f00098000.pwm/of_node/phandle":    "\x00\x00\x00\x2a",
		"bus/platform/drivers/pwm-rp1/.keep":                     "",
		"class/pwm/pwmchip3/npwm":                                "4\n",
		"devices/platform/cooling_fan/of_node/compatible":        "pwm-fan\x00",
		"devices/platform/cooling_fan/of_node/pwms":              "\x00\x00\x00\x2a\x00\x00\x00\x03\x00\x00\xa2\x5e",
		"class/hwmon/hwmon1/name":                                "pwmfan\n",
		"class/hwmon/hwmon1/pwm1":                                "0\n",
		"class/hwmon/hwmon0/name":                                "cpu_thermal\n",
	})
	for link, target := range map[string]string{
		"class/pwm/pwmchip3/device":                  "../../../devices/platform/soc/1f00098000.pwm",
		"devices/platform/soc/1f00098000.pwm/driver": "../../../../bus/platform/drivers/pwm-rp1",
		"class/hwmon/hwmon1/device":                  "../../../devices/platform/cooling_fan",
	} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	chips := sysfs.ListPWMChips(root)
	if len(chips) != 1 || chips[0].Name != "pwmchip3" || chips[0].NPWM != 4 || chips[0].Device.Name != "1f00098000.pwm" ||
		chips[0].Device.Driver != "pwm-rp1" || !chips[0].Device.HasCompatible("raspberrypi,rp1-pwm") || chips[0].Device.Phandle() != 0x2a {
		t.Fatalf("chips %+v", chips)
	}
	hw := sysfs.ListHwmon(root)
	if len(hw) != 2 || hw[0].HasPWM || hw[1].Name != "pwmfan" || !hw[1].HasPWM || hw[1].Device.Name != "cooling_fan" {
		t.Fatalf("hwmon %+v", hw)
	}
	if ph, ch, ok := hw[1].Device.PWMRef(); !ok || ph != 0x2a || ch != 3 {
		t.Fatalf("PWMRef = %#x, %d, %v", ph, ch, ok)
	}
}
