// Package sysfs drives the kernel class interfaces the linux backend uses
// instead of /dev/mem: PWM (/sys/class/pwm), hwmon (/sys/class/hwmon),
// thermal zones (/sys/class/thermal), multicolor LEDs (/sys/class/leds) and
// /dev/ledsN streams. Every function takes the root it works under, so tests
// run against temporary trees and containers against a host mount.
package sysfs

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// ErrNotFound is returned when no device of a class matches.
var ErrNotFound = errors.New("not found")

// writeAttr writes one attribute. It never creates files: a missing
// attribute means a missing driver, which must not be papered over by
// creating a regular file (on a real sysfs that fails anyway). Nor does it
// follow a symbolic link: a sysfs attribute is never one.
func writeAttr(path, value string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(value)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing %q to %s: %w", value, path, err)
	}
	return nil
}

func readAttr(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

func readInt(path string) (int64, error) {
	s, err := readAttr(path)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
