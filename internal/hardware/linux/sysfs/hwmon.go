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
// set, whose name attribute equals it.
func FindHwmon(sysfsRoot, name string) (*Hwmon, error) {
	matches, _ := filepath.Glob(filepath.Join(sysfsRoot, "class", "hwmon", "hwmon*"))
	for _, dir := range matches {
		if !exists(filepath.Join(dir, "pwm1")) {
			continue
		}
		n, _ := readAttr(filepath.Join(dir, "name"))
		if name != "" && n != name {
			continue
		}
		h := &Hwmon{dir: dir, name: n}
		// Manual mode, so pwm1 writes stick; drivers without the
		// attribute are always manual.
		enable := filepath.Join(dir, "pwm1_enable")
		if cur, err := readAttr(enable); err == nil && cur != "1" {
			if err := writeAttr(enable, "1"); err != nil {
				return nil, fmt.Errorf("hwmon %s: %w", n, err)
			}
		}
		return h, nil
	}
	what := "with pwm1"
	if name != "" {
		what = fmt.Sprintf("named %q with pwm1", name)
	}
	return nil, fmt.Errorf("hwmon device %s: %w", what, ErrNotFound)
}

// Name is the device's name attribute.
func (h *Hwmon) Name() string { return h.name }

// Dir is the device's sysfs directory.
func (h *Hwmon) Dir() string { return h.dir }

// SetPercent writes pwm1, which hwmon scales 0–255.
func (h *Hwmon) SetPercent(percent uint8) error {
	if percent > 100 {
		return fmt.Errorf("hwmon: duty %d %% is outside 0–100", percent)
	}
	v := (int(percent)*255 + 50) / 100
	return writeAttr(filepath.Join(h.dir, "pwm1"), strconv.Itoa(v))
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
