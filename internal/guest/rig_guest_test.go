//go:build guest

package guest_test

import (
	"os"
	"testing"

	"github.com/kubeblade/kubeblade/internal/guest/gpiosim"
	"github.com/kubeblade/kubeblade/internal/guest/guestinit"
	"github.com/kubeblade/kubeblade/internal/hardware/linux/gpio"
	"github.com/kubeblade/kubeblade/internal/testreq"
)

func TestMain(m *testing.M) { guestinit.Main(m) }

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
		"/dev/ptmx",
	} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}

// TestKernelGPIOSim makes a chip labelled like a CM4's and finds it and its
// named lines through the character device.
func TestKernelGPIOSim(t *testing.T) {
	testreq.Need(t, gpiosim.Available() == nil, "%v", gpiosim.Available())
	sim := gpiosim.New(t, "rig", gpiosim.Bank{Label: "pinctrl-bcm2711", Lines: 58, Names: map[int]string{20: "GPIO20"}})
	chip, err := gpio.FindChip(gpio.CDev{}, "/dev", "pinctrl-bcm2711")
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
