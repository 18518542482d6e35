package sysfs

import (
	"fmt"
	"path/filepath"
	"strconv"
)

// Hwmon is a hwmon device with a pwm1 fan control (e.g. the pwm-fan
// driver's "pwmfan", or a Pi 5's cooling_fan).
type Hwmon struct {
	dir  string
	name string
}

// FindHwmon returns the first hwmon device that has pwm1 and, when name is
// set, whose name attribute or device name equals it.
func FindHwmon(sysfsRoot, name string) (*Hwmon, error) {
	for _, d := range ListHwmon(sysfsRoot) {
		if !d.HasPWM || name != "" && d.Name != name && d.Device.Name != name {
			continue
		}
		return OpenHwmon(d)
	}
	what := "with pwm1"
	if name != "" {
		what = fmt.Sprintf("named %q with pwm1", name)
	}
	return nil, fmt.Errorf("hwmon device %s: %w", what, ErrNotFound)
}

// OpenHwmon takes control of a listed device's pwm1. pwm1_enable 1 is
// manual control in the hwmon ABI and, for pwm-fan, "PWM on, off at duty
// 0" (its 0 would switch the fan's supply off altogether).
func OpenHwmon(d HwmonDevice) (*Hwmon, error) {
	h := &Hwmon{dir: d.Dir, name: d.Name}
	enable := filepath.Join(d.Dir, "pwm1_enable")
	if cur, err := readAttr(enable); err == nil && cur != "1" {
		if err := writeAttr(enable, "1"); err != nil {
			return nil, fmt.Errorf("hwmon %s: %w", d.Name, err)
		}
	}
	return h, nil
}

// Raw reads pwm1 (0–255).
func (h *Hwmon) Raw() (int64, error) { return readInt(filepath.Join(h.dir, "pwm1")) }

// Scale converts a percentage to pwm1's 0–255 (hwmon's sysfs ABI, and
// pwm-fan's MAX_PWM).
func Scale(percent uint8) int64 { return (int64(percent)*255 + 50) / 100 }

// Name is the device's name attribute.
func (h *Hwmon) Name() string { return h.name }

// Dir is the device's sysfs directory.
func (h *Hwmon) Dir() string { return h.dir }

// SetPercent writes pwm1, which hwmon scales 0–255.
func (h *Hwmon) SetPercent(percent uint8) error {
	if percent > 100 {
		return fmt.Errorf("hwmon: duty %d %% is outside 0–100", percent)
	}
	return writeAttr(filepath.Join(h.dir, "pwm1"), strconv.FormatInt(Scale(percent), 10))
}

// HasTach reports whether the driver measures the fan (fan1_input).
func (h *Hwmon) HasTach() bool { return exists(filepath.Join(h.dir, "fan1_input")) }

// FanRPM reads fan1_input.
func (h *Hwmon) FanRPM() (float64, error) {
	v, err := readInt(filepath.Join(h.dir, "fan1_input"))
	if err != nil {
		return 0, fmt.Errorf("hwmon %s: %w", h.name, err)
	}
	return float64(v), nil
}
