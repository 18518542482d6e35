package sysfs

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Device is what sysfs says about the device behind a class entry
// (/sys/class/<class>/<entry>/device): what it is, not where it was
// numbered, since numbers follow probe order.
type Device struct {
	// Name is the device's name, e.g. fe20c000.pwm, 1f00098000.pwm,
	// cooling_fan, pwm-gpio.0.
	Name string
	// Driver is the bound driver's name, e.g. pwm-gpio, pwm-fan.
	Driver string
	// Compatible is the devicetree node's compatible list, if any.
	Compatible []string
	// OF is the devicetree node's directory, if any.
	OF string
}

// HasCompatible reports whether the node lists c.
func (d Device) HasCompatible(c string) bool {
	for _, x := range d.Compatible {
		if x == c {
			return true
		}
	}
	return false
}

func deviceOf(entry string) Device {
	dev := filepath.Join(entry, "device")
	var d Device
	if target, err := filepath.EvalSymlinks(dev); err == nil {
		d.Name = filepath.Base(target)
	}
	if drv, err := filepath.EvalSymlinks(filepath.Join(dev, "driver")); err == nil {
		d.Driver = filepath.Base(drv)
	}
	of := filepath.Join(dev, "of_node")
	if raw, err := os.ReadFile(filepath.Join(of, "compatible")); err == nil {
		d.OF = of
		for _, c := range bytes.Split(raw, []byte{0}) {
			if s := strings.TrimSpace(string(c)); s != "" {
				d.Compatible = append(d.Compatible, s)
			}
		}
	}
	return d
}

// cells reads a devicetree property of big-endian 32-bit cells.
func cells(path string) []uint32 {
	raw, err := os.ReadFile(path)
	if err != nil || len(raw)%4 != 0 {
		return nil
	}
	out := make([]uint32, len(raw)/4)
	for i := range out {
		out[i] = binary.BigEndian.Uint32(raw[4*i:])
	}
	return out
}

// Phandle is the devicetree node's phandle, or 0.
func (d Device) Phandle() uint32 {
	if d.OF == "" {
		return 0
	}
	if c := cells(filepath.Join(d.OF, "phandle")); len(c) == 1 {
		return c[0]
	}
	return 0
}

// PWMRef is the first entry of the node's pwms property: the PWM chip's
// phandle and the channel (pwm-fan nodes have one).
func (d Device) PWMRef() (phandle, channel uint32, ok bool) {
	if d.OF == "" {
		return 0, 0, false
	}
	c := cells(filepath.Join(d.OF, "pwms"))
	if len(c) < 2 {
		return 0, 0, false
	}
	return c[0], c[1], true
}

// PWMChip is one entry of /sys/class/pwm.
type PWMChip struct {
	// Name is pwmchipN.
	Name   string
	NPWM   int
	Device Device
}

// ListPWMChips lists the PWM chips in numeric order with what they are.
func ListPWMChips(sysfsRoot string) []PWMChip {
	var out []PWMChip
	for _, name := range PWMChips(sysfsRoot) {
		dir := filepath.Join(sysfsRoot, "class", "pwm", name)
		n, _ := readInt(filepath.Join(dir, "npwm"))
		out = append(out, PWMChip{Name: name, NPWM: int(n), Device: deviceOf(dir)})
	}
	return out
}

// HwmonDevice is one entry of /sys/class/hwmon.
type HwmonDevice struct {
	// Dir is /sys/class/hwmon/hwmonN.
	Dir string
	// Name is the name attribute (pwm-fan's is pwmfan).
	Name   string
	HasPWM bool
	Device Device
}

// ListHwmon lists hwmon devices in numeric order.
func ListHwmon(sysfsRoot string) []HwmonDevice {
	matches, _ := filepath.Glob(filepath.Join(sysfsRoot, "class", "hwmon", "hwmon*"))
	num := func(p string) int {
		n, _ := strconv.Atoi(strings.TrimPrefix(filepath.Base(p), "hwmon"))
		return n
	}
	sort.Slice(matches, func(i, j int) bool { return num(matches[i]) < num(matches[j]) })
	var out []HwmonDevice
	for _, dir := range matches {
		n, _ := readAttr(filepath.Join(dir, "name"))
		out = append(out, HwmonDevice{Dir: dir, Name: n, HasPWM: exists(filepath.Join(dir, "pwm1")), Device: deviceOf(dir)})
	}
	return out
}
