package sysfs

import (
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// FanPWMPeriod is 25 kHz, the frequency 4-wire PC fans expect.
const FanPWMPeriod = 40 * time.Microsecond

// PWMOptions select a PWM channel.
type PWMOptions struct {
	SysfsRoot string
	// Chip is pwmchipN. The caller decides which chip drives the fan
	// (see ListPWMChips): the lowest-numbered one is often another
	// device.
	Chip    string
	Channel int
	// Period defaults to FanPWMPeriod.
	Period time.Duration
	// AwaitExport is called while waiting for an exported channel's
	// directory to appear (default: sleep 20 ms, 25 attempts). udev may
	// still be fixing its permissions when the directory shows up.
	AwaitExport func(attempt int) bool
}

// PWM is one exported, enabled sysfs PWM channel.
type PWM struct {
	dir      string
	periodNS int64
}

// PWMChips lists pwmchipN under the class directory in numeric order.
func PWMChips(sysfsRoot string) []string {
	matches, _ := filepath.Glob(filepath.Join(sysfsRoot, "class", "pwm", "pwmchip*"))
	num := func(p string) int {
		n, _ := strconv.Atoi(strings.TrimPrefix(filepath.Base(p), "pwmchip"))
		return n
	}
	sort.Slice(matches, func(i, j int) bool { return num(matches[i]) < num(matches[j]) })
	out := make([]string, len(matches))
	for i, m := range matches {
		out[i] = filepath.Base(m)
	}
	return out
}

func defaultAwait(attempt int) bool {
	if attempt >= 25 {
		return false
	}
	time.Sleep(20 * time.Millisecond)
	return true
}

// OpenPWM exports the channel when needed, sets the period and enables it
// at 0 % duty. The caller sets the duty next.
func OpenPWM(o PWMOptions) (*PWM, error) {
	if o.Period <= 0 {
		o.Period = FanPWMPeriod
	}
	if o.AwaitExport == nil {
		o.AwaitExport = defaultAwait
	}
	class := filepath.Join(o.SysfsRoot, "class", "pwm")
	chip := o.Chip
	chipDir := filepath.Join(class, chip)
	if chip == "" || !exists(chipDir) {
		return nil, fmt.Errorf("PWM: chip %q under %s: %w", chip, class, ErrNotFound)
	}
	if n, err := readInt(filepath.Join(chipDir, "npwm")); err == nil && int64(o.Channel) >= n {
		return nil, fmt.Errorf("PWM: %s has %d channels, no channel %d", chip, n, o.Channel)
	}
	dir := filepath.Join(chipDir, fmt.Sprintf("pwm%d", o.Channel))
	if !exists(dir) {
		if err := writeAttr(filepath.Join(chipDir, "export"), strconv.Itoa(o.Channel)); err != nil {
			return nil, fmt.Errorf("PWM: exporting channel %d: %w", o.Channel, err)
		}
		for attempt := 0; !exists(filepath.Join(dir, "enable")); attempt++ {
			if !o.AwaitExport(attempt) {
				return nil, fmt.Errorf("PWM: %s did not appear after export", dir)
			}
		}
	}
	p := &PWM{dir: dir, periodNS: o.Period.Nanoseconds()}
	if cur, err := readInt(filepath.Join(dir, "period")); err != nil || cur != p.periodNS {
		// The kernel refuses a period below the current duty, so clear
		// the duty first.
		if err := writeAttr(filepath.Join(dir, "duty_cycle"), "0"); err != nil {
			return nil, fmt.Errorf("PWM: %w", err)
		}
		if err := writeAttr(filepath.Join(dir, "period"), strconv.FormatInt(p.periodNS, 10)); err != nil {
			return nil, fmt.Errorf("PWM: %w", err)
		}
	}
	if en, err := readAttr(filepath.Join(dir, "enable")); err != nil || en != "1" {
		if err := writeAttr(filepath.Join(dir, "enable"), "1"); err != nil {
			return nil, fmt.Errorf("PWM: %w", err)
		}
	}
	return p, nil
}

// SetPercent sets the duty cycle.
func (p *PWM) SetPercent(percent uint8) error {
	if percent > 100 {
		return fmt.Errorf("PWM: duty %d %% is outside 0–100", percent)
	}
	return writeAttr(filepath.Join(p.dir, "duty_cycle"), strconv.FormatInt(p.periodNS*int64(percent)/100, 10))
}

// Read returns the channel's period, duty cycle (ns) and enable state as
// the kernel holds them.
func (p *PWM) Read() (period, duty int64, enabled bool, err error) {
	if period, err = readInt(filepath.Join(p.dir, "period")); err != nil {
		return
	}
	if duty, err = readInt(filepath.Join(p.dir, "duty_cycle")); err != nil {
		return
	}
	en, err := readAttr(filepath.Join(p.dir, "enable"))
	return period, duty, en == "1", err
}

// Dir is the channel's sysfs directory.
func (p *PWM) Dir() string { return p.dir }
