package sysfs

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// ThermalZone is a thermal zone's temperature attribute.
type ThermalZone struct {
	path string
	typ  string
}

// FindThermalZone returns the zone whose type is the first of types that
// exists. Zone numbers depend on probe order (on a CM5 zone 0 is not always
// the CPU), hence the search by type.
func FindThermalZone(sysfsRoot string, types ...string) (*ThermalZone, error) {
	matches, _ := filepath.Glob(filepath.Join(sysfsRoot, "class", "thermal", "thermal_zone*"))
	byType := map[string]string{}
	var seen []string
	for _, dir := range matches {
		t, err := readAttr(filepath.Join(dir, "type"))
		if err != nil {
			continue
		}
		seen = append(seen, t)
		if _, dup := byType[t]; !dup {
			byType[t] = dir
		}
	}
	for _, typ := range types {
		if dir, ok := byType[typ]; ok {
			return &ThermalZone{path: filepath.Join(dir, "temp"), typ: typ}, nil
		}
	}
	return nil, fmt.Errorf("thermal zone of type %s (found: %s): %w", strings.Join(types, " or "), strings.Join(seen, ", "), ErrNotFound)
}

// Type is the zone's type.
func (z *ThermalZone) Type() string { return z.typ }

// Path is the temp attribute read.
func (z *ThermalZone) Path() string { return z.path }

// Celsius reads the temperature; the kernel reports millidegrees.
func (z *ThermalZone) Celsius() (float64, error) {
	v, err := readInt(z.path)
	if err != nil {
		var ne *strconv.NumError
		if errors.As(err, &ne) {
			return 0, fmt.Errorf("thermal zone %s: %w", z.typ, err)
		}
		return 0, err
	}
	return float64(v) / 1000, nil
}
