//go:build guest

package guest_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kubeblade/kubeblade/internal/guest/gpiosim"
	"github.com/kubeblade/kubeblade/internal/guest/guestinit"
	"github.com/kubeblade/kubeblade/internal/guest/scenario"
	"github.com/kubeblade/kubeblade/internal/hardware/linux/gpio"
	"github.com/kubeblade/kubeblade/internal/hardware/linux/sysfs"
	"github.com/kubeblade/kubeblade/internal/testreq"
)

func TestMain(m *testing.M) { guestinit.Main(m) }

func current(t *testing.T) scenario.Scenario {
	t.Helper()
	sc, err := scenario.Current()
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// TestKernelRig checks the guest kernel has every interface the hardware
// tests and the LED driver's tests rely on.
func TestKernelRig(t *testing.T) {
	testreq.Need(t, os.Getpid() == 1, "not running as a guest's init")
	for _, p := range []string{
		"/sys/kernel/config/gpio-sim", // CONFIG_GPIO_SIM + configfs
		"/sys/class/pwm",              // CONFIG_PWM sysfs
		"/sys/class/leds",             // CONFIG_LEDS_CLASS
		"/sys/bus/platform/drivers/pwm-gpio",
		"/sys/bus/platform/drivers/gpio-aggregator/new_device",
		"/proc/modules",                              // CONFIG_MODULES
		"/sys/module/kunit/parameters/stats_enabled", // CONFIG_KUNIT
		"/sys/kernel/debug/kmemleak",                 // CONFIG_DEBUG_KMEMLEAK
		"/dev/ptmx",
	} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}

// TestKernelDeviceTree: the machine is what its scenario says. With a
// devicetree, the root compatible and model are the board's (QEMU kept
// them), gpio-sim made the board's GPIO controller with its label and line
// names, and pwm-gpio made a PWM chip holding the PL061 line under its
// device's name, as it holds GPIO12 on a CM5 (the holder the linux backend
// asks the kernel for). Without one, nothing names a machine.
func TestKernelDeviceTree(t *testing.T) {
	sc := current(t)
	compat, cerr := os.ReadFile("/proc/device-tree/compatible")
	if sc.DeviceTree == nil {
		if cerr == nil {
			t.Fatalf("scenario %s has no devicetree, but /proc/device-tree/compatible reads %q", sc.Name, compat)
		}
		return
	}
	if cerr != nil {
		t.Fatal(cerr)
	}
	if got := strings.Split(strings.TrimRight(string(compat), "\x00"), "\x00"); !cmp.Equal(got, sc.DeviceTree.Compatible) {
		t.Errorf("compatible %q, want %q", got, sc.DeviceTree.Compatible)
	}
	if model, _ := os.ReadFile("/sys/firmware/devicetree/base/model"); string(bytes.TrimRight(model, "\x00")) != sc.DeviceTree.Model {
		t.Errorf("model %q, want %q", model, sc.DeviceTree.Model)
	}

	chip, err := gpio.FindChip(gpio.CDev{}, "/dev", sc.Board.Label)
	if err != nil {
		t.Fatal(err)
	}
	defer chip.Close()
	if chip.Lines() != sc.Board.Lines {
		t.Errorf("%s has %d lines, want %d", sc.Board.Label, chip.Lines(), sc.Board.Lines)
	}
	dev, _ := filepath.EvalSymlinks(filepath.Join("/sys/bus/gpio/devices", chip.Name()))
	if !strings.Contains(dev, "/platform/"+gpiosim.DeviceTreeDevice+"/") {
		t.Errorf("%s (%s) is not the devicetree's gpio-sim chip", chip.Name(), dev)
	}
	for off, name := range sc.Board.NameMap() {
		if name == "-" {
			continue // the CM5 names unused lines "-", many times
		}
		if got, err := chip.FindLine(name); err != nil || got != off {
			t.Errorf("line %s at %d, %v; want %d", name, got, err, off)
		}
	}

	var pwm sysfs.PWMChip
	for _, c := range sysfs.ListPWMChips("/sys") {
		if c.Device.Name == scenario.PWMGPIODevice {
			pwm = c
		}
	}
	if pwm.Name == "" || pwm.Device.Driver != "pwm-gpio" || pwm.NPWM != 1 {
		t.Fatalf("no pwm-gpio chip %s: %+v", scenario.PWMGPIODevice, sysfs.ListPWMChips("/sys"))
	}
	pl061, err := gpio.FindChip(gpio.CDev{}, "/dev", "9030000.pl061")
	if err != nil {
		t.Fatal(err)
	}
	defer pl061.Close()
	if li, err := pl061.LineInfo(scenario.PWMGPIOLine); err != nil || !li.Used || li.Consumer != scenario.PWMGPIODevice {
		t.Errorf("PL061 line %d: %+v, %v; want held by %s", scenario.PWMGPIOLine, li, err, scenario.PWMGPIODevice)
	}
	if sc.FanHwmon != "" {
		found := false
		for _, h := range sysfs.ListHwmon("/sys") {
			found = found || (h.Name == sc.FanHwmon && h.HasPWM)
		}
		if !found {
			t.Errorf("no hwmon %s with pwm1: %+v", sc.FanHwmon, sysfs.ListHwmon("/sys"))
		}
	}
	t.Logf("%s (%s): %s with %d named lines, %s = %s on PL061 line %d", sc.DeviceTree.Model, strings.Join(sc.DeviceTree.Compatible, ", "),
		sc.Board.Label, len(sc.Board.NameMap()), pwm.Name, scenario.PWMGPIODevice, scenario.PWMGPIOLine)
}

// TestKernelGPIOSim makes a chip labelled like a CM4's and finds it and its
// named lines through the character device.
func TestKernelGPIOSim(t *testing.T) {
	testreq.Need(t, gpiosim.Available() == nil, "%v", gpiosim.Available())
	sim := gpiosim.New(t, "rig", gpiosim.Bank{Label: "rig-bcm2711", Lines: 58, Names: map[int]string{20: "GPIO20"}})
	chip, err := gpio.FindChip(gpio.CDev{}, "/dev", "rig-bcm2711")
	if err != nil {
		t.Fatal(err)
	}
	defer chip.Close()
	if chip.Name() != sim.Name || chip.Lines() != 58 {
		t.Fatalf("found %s with %d lines, want %s with 58", chip.Name(), chip.Lines(), sim.Name)
	}
	if off, err := chip.FindLine("GPIO20"); err != nil || off != 20 {
		t.Fatalf("FindLine(GPIO20) = %d, %v", off, err)
	}
}
