package linux

import (
	"fmt"
	"strings"

	"github.com/kubeblade/kubeblade/internal/hardware/linux/sysfs"
)

// PWM chips that can drive the blade's fan on GPIO12, recognised by what
// they are rather than by their number: pwmchip0 is whatever probed first
// (on a CM5 with a Raspberry Pi kernel, RP1's PWM1 for the IO board's own
// fan connector, which is not the blade's).
const (
	// BCM2711 PWM0 (channel 0 is GPIO12 with dtoverlay=pwm,pin=12,func=4).
	compatBCM2835PWM = "brcm,bcm2835-pwm"
	devBCM2711PWM0   = "fe20c000.pwm"
	// RP1 PWM0 (channel 0 is GPIO12 with funcsel a0); RP1 PWM1 at
	// 1f0009c000.pwm drives the IO board fan header.
	compatRP1PWM = "raspberrypi,rp1-pwm"
	devRP1PWM0   = "1f00098000.pwm"
	// pwm-gpio (Linux 6.11+, in the Talos kernel): a software PWM on
	// whatever GPIO its node names; it holds that line with its device
	// name as the consumer.
	driverPWMGPIO = "pwm-gpio"
	compatPWMGPIO = "pwm-gpio"
	// kubeblade's LED driver (kernel/kubeblade-leds) exposes the fan
	// channel it shares with the LEDs as a PWM chip. Its platform device
	// and driver are both KBL_DRIVER_NAME (core.c); the device is its own
	// (/sys/devices/platform/kubeblade-leds), not the SoC's PWM node,
	// whose registers it maps itself.
	driverKubebladeLEDs = "kubeblade-leds"
)

// pwmPick is the chosen chip and channel, and why.
type pwmPick struct {
	chip    sysfs.PWMChip
	channel int
	why     string
}

// pickFanPWM chooses the PWM chip driving GPIO12. gpio12Consumer is who
// holds the blade chip's GPIO12 line ("" when free or unknown): a pwm-gpio
// chip counts only when it is that holder. override is linux.pwmChip
// (pwmchipN or a device name).
func pickFanPWM(chips []sysfs.PWMChip, soc, gpio12Consumer, override string, channel *int32) (pwmPick, error) {
	ch := func(def int) int {
		if channel != nil {
			return int(*channel)
		}
		return def
	}
	if override != "" {
		for _, c := range chips {
			if c.Name == override || c.Device.Name == override {
				return pwmPick{chip: c, channel: ch(0), why: "linux.pwmChip " + override}, nil
			}
		}
		return pwmPick{}, fmt.Errorf("linux.pwmChip %q: no such PWM chip (found %s)", override, describeChips(chips))
	}
	// The LED driver's chip wins over the SoC's own PWM whatever their
	// numbers: when it is loaded it drives PWM0's registers, so a
	// bcm2835-pwm chip bound as well (dtoverlay=pwm left on) would fight
	// it for the same hardware.
	for _, c := range chips {
		if c.Device.Driver == driverKubebladeLEDs {
			return pwmPick{chip: c, channel: ch(0), why: "kubeblade LED driver " + c.Device.Name}, nil
		}
	}
	for _, c := range chips {
		d := c.Device
		switch {
		case soc == SoCBCM2711 && (d.HasCompatible(compatBCM2835PWM) || d.Name == devBCM2711PWM0):
			return pwmPick{chip: c, channel: ch(0), why: "BCM2711 PWM0 " + d.Name}, nil
		case soc == SoCBCM2712 && d.Name == devRP1PWM0:
			return pwmPick{chip: c, channel: ch(0), why: "RP1 PWM0 " + d.Name}, nil
		case (d.Driver == driverPWMGPIO || d.HasCompatible(compatPWMGPIO)) && gpio12Consumer != "" && gpio12Consumer == d.Name:
			return pwmPick{chip: c, channel: ch(0), why: "pwm-gpio on GPIO12 (" + d.Name + ")"}, nil
		}
	}
	return pwmPick{}, fmt.Errorf("no PWM chip drives GPIO12 (found %s; set linux.pwmChip to choose one): %w", describeChips(chips), sysfs.ErrNotFound)
}

func describeChips(chips []sysfs.PWMChip) string {
	if len(chips) == 0 {
		return "none"
	}
	var parts []string
	for _, c := range chips {
		what := c.Device.Name
		if c.Device.Driver != "" {
			what += " driver " + c.Device.Driver
		}
		if what == "" {
			what = "unknown device"
		}
		parts = append(parts, c.Name+" = "+what)
	}
	return strings.Join(parts, ", ")
}

// Hwmon names.
const (
	// hwmonPWMFan is the pwm-fan driver's hwmon name (drivers/hwmon/pwm-fan.c).
	hwmonPWMFan = "pwmfan"
	// devCoolingFan is the Raspberry Pi 5 / CM5 IO board fan node
	// (bcm2712-rpi-5-b.dts, cooling_fan on RP1 PWM1): a pwm-fan that is
	// not the blade's fan.
	devCoolingFan = "cooling_fan"
)

// pickFanHwmon chooses a hwmon device for the fan. On a Raspberry Pi it
// must be a pwm-fan whose pwms property points at the GPIO12 PWM chip
// (then that driver owns the PWM and sysfs cannot export it); on the Radxa
// CM5 it is the pwm-fan named pwmfan, as the old agent has it (docs/hardware.md).
func pickFanHwmon(devs []sysfs.HwmonDevice, soc, override string, gpio12 *pwmPick) (sysfs.HwmonDevice, string, error) {
	if override != "" {
		for _, d := range devs {
			if d.HasPWM && (d.Name == override || d.Device.Name == override) {
				return d, "linux.hwmonName " + override, nil
			}
		}
		return sysfs.HwmonDevice{}, "", fmt.Errorf("linux.hwmonName %q: no hwmon device with pwm1 by that name: %w", override, sysfs.ErrNotFound)
	}
	var seen []string
	for _, d := range devs {
		if !d.HasPWM {
			continue
		}
		seen = append(seen, fmt.Sprintf("%s (%s)", d.Name, d.Device.Name))
		switch soc {
		case SoCRK3588:
			if d.Name == hwmonPWMFan {
				return d, "pwm-fan " + d.Device.Name, nil
			}
		default:
			if d.Name != hwmonPWMFan || d.Device.Name == devCoolingFan || gpio12 == nil {
				continue
			}
			if ph, ch, ok := d.Device.PWMRef(); ok && ph != 0 && ph == gpio12.chip.Device.Phandle() && int(ch) == gpio12.channel {
				return d, "pwm-fan " + d.Device.Name + " on " + gpio12.why, nil
			}
		}
	}
	if len(seen) == 0 {
		seen = []string{"none"}
	}
	return sysfs.HwmonDevice{}, "", fmt.Errorf("no hwmon fan for the blade (hwmon devices with pwm1: %s; set linux.hwmonName to choose one): %w", strings.Join(seen, ", "), sysfs.ErrNotFound)
}

// Thermal zone types of the SoC temperature, first found wins.
var thermalZoneTypes = map[string][]string{
	SoCBCM2711: {"cpu-thermal"},
	SoCBCM2712: {"cpu-thermal"},
	// rk3588-base.dtsi (mainline) calls TSADC channel 0, the sensor near
	// the centre of the SoC, package-thermal; Rockchip's BSP kernels
	// (Radxa's images) call the same zone soc-thermal.
	SoCRK3588: {"package-thermal", "soc-thermal"},
}
