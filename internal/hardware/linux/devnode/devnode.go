// Package devnode opens the device nodes the linux backend writes to — the
// ws2812-pio-rp1 LED stream (/dev/ledsN) and the smart fan unit's UART
// (/dev/ttyAMAN, /dev/ttySN) — only when the node is the character device
// that driver creates. The agent runs as root: a config naming another file
// (/proc/sysrq-trigger, a disk, a private key, a symbolic link to one) must
// get an error before a single byte is written, not an LED frame at offset
// 0 of the victim.
//
// A name is checked first (leds0, /dev/ttyAMA5: nothing else, see
// LEDStream and UART). The node is then opened with O_PATH|O_NOFOLLOW,
// which runs no driver code and refuses to follow a symbolic link, and
// fstat must show a character device with the driver's major and the minor
// the name implies:
//
//   - ttyAMAN: major 204, minor 64+N (SERIAL_AMBA_MAJOR and
//     SERIAL_AMBA_MINOR of drivers/tty/serial/amba-pl011.c, Linux 6.12);
//   - ttySN: major 4, minor 64+N (TTY_MAJOR and minor 64 of
//     drivers/tty/serial/8250/8250_core.c; minors below 64 of major 4 are
//     virtual consoles);
//   - ledsN: the major the kernel gave ws2812-pio-rp1, read from
//     /proc/devices, and minor N. The driver takes a dynamic major
//     (alloc_chrdev_region(..., MAX_INSTANCES, "ws2812-pio-rp1") in
//     raspberrypi/linux drivers/misc/ws2812-pio-rp1.c) and names each
//     device after its minor with the devicetree's "leds%d", so there is no
//     fixed number to compare with: "expected" is the major registered
//     under the driver's name, and without that driver no node is
//     accepted. In particular major 1 (/dev/mem, /dev/null,
//     /dev/kmsg, ...) and every block device are refused.
//
// Only then is the node opened for I/O, through /proc/self/fd of the
// checked descriptor, so the file written is the file checked even if the
// path changed in between.
package devnode

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrRefused is wrapped by every refusal of a node that exists but is not
// the expected device (as opposed to one that is missing).
var ErrRefused = errors.New("not the expected device")

// Majors and first minors of the UART drivers (see the package comment).
const (
	AMBAMajor     = 204 // SERIAL_AMBA_MAJOR
	AMBAMinorBase = 64  // SERIAL_AMBA_MINOR
	TTYMajor      = 4   // TTY_MAJOR
	TTYSMinorBase = 64
	// WS2812Driver is the name ws2812-pio-rp1 registers its character
	// device region under, as /proc/devices lists it.
	WS2812Driver = "ws2812-pio-rp1"
)

// The only names the backend opens, with or without the /dev/ prefix;
// N has at most three digits.
var (
	ledStreamName = regexp.MustCompile(`^(?:/dev/)?(leds)([0-9]{1,3})$`)
	uartName      = regexp.MustCompile(`^(?:/dev/)?(ttyAMA|ttyS)([0-9]{1,3})$`)
)

// LEDStreamPattern and UARTPattern are the shapes the config admits
// (api/agentconfig/v1alpha1 has the same as kubebuilder patterns).
const (
	LEDStreamPattern = `^(/dev/)?leds[0-9]{1,3}$`
	UARTPattern      = `^(/dev/)?tty(AMA|S)[0-9]{1,3}$`
)

// Node is a device node the backend may open: its name and what it must be.
type Node struct {
	// Path is the node under the device root (/dev/leds0).
	Path string
	// Name is its base name (leds0).
	Name   string
	prefix string
	n      uint32
}

// LEDStream resolves a ws2812-pio-rp1 stream name (leds0 or /dev/leds0)
// under devRoot (/dev; tests use a temporary tree).
func LEDStream(devRoot, name string) (Node, error) {
	return parse(devRoot, name, ledStreamName, "an LED stream is /dev/ledsN")
}

// UART resolves a UART name (ttyAMA5, /dev/ttyAMA5, ttyS0) under devRoot.
func UART(devRoot, name string) (Node, error) {
	return parse(devRoot, name, uartName, "a UART is /dev/ttyAMAN or /dev/ttySN")
}

func parse(devRoot, name string, re *regexp.Regexp, want string) (Node, error) {
	m := re.FindStringSubmatch(name)
	if m == nil {
		return Node{}, fmt.Errorf("%q: %w (%s)", name, ErrRefused, want)
	}
	n, err := strconv.ParseUint(m[2], 10, 32)
	if err != nil {
		return Node{}, fmt.Errorf("%q: %w", name, err)
	}
	base := m[1] + m[2]
	return Node{Path: filepath.Join(devRoot, base), Name: base, prefix: m[1], n: uint32(n)}, nil
}

// Pinned is a node that passed the checks, held by an O_PATH descriptor.
type Pinned struct {
	f *os.File
}

// ProcPath is /proc/self/fd/<n> of the pinned node: opening it opens the
// very file that was checked, for libraries that take a path (the serial
// port).
func (p *Pinned) ProcPath() string { return "/proc/self/fd/" + strconv.Itoa(int(p.f.Fd())) }

// Close releases the descriptor.
func (p *Pinned) Close() error { return p.f.Close() }

// check refuses a file of this mode and device number unless it is the
// node's character device.
func (n Node) check(mode, major, minor uint32, procRoot string) error {
	if mode&unix.S_IFMT != unix.S_IFCHR {
		return fmt.Errorf("%s is %s, not a character device: %w", n.Path, fileType(mode), ErrRefused)
	}
	var wantMajor, wantMinor uint32
	var driver string
	switch n.prefix {
	case "ttyAMA":
		wantMajor, wantMinor, driver = AMBAMajor, AMBAMinorBase+n.n, "amba-pl011 (ttyAMA)"
	case "ttyS":
		wantMajor, wantMinor, driver = TTYMajor, TTYSMinorBase+n.n, "8250 (ttyS)"
	case "leds":
		m, err := charMajor(procRoot, WS2812Driver)
		if err != nil {
			return fmt.Errorf("%s (device %d:%d): %w: %w", n.Path, major, minor, ErrRefused, err)
		}
		wantMajor, wantMinor, driver = m, n.n, WS2812Driver
	default:
		return fmt.Errorf("%s: %w", n.Path, ErrRefused)
	}
	if major != wantMajor || minor != wantMinor {
		return fmt.Errorf("%s is character device %d:%d, not %s's %s (%d:%d): %w",
			n.Path, major, minor, driver, n.Name, wantMajor, wantMinor, ErrRefused)
	}
	return nil
}

func fileType(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return "a regular file"
	case unix.S_IFBLK:
		return "a block device"
	case unix.S_IFDIR:
		return "a directory"
	case unix.S_IFLNK:
		return "a symbolic link"
	case unix.S_IFIFO:
		return "a FIFO"
	case unix.S_IFSOCK:
		return "a socket"
	}
	return "another kind of file"
}

// charMajor reads the major the kernel gave driver from the "Character
// devices:" section of procRoot/devices.
func charMajor(procRoot, driver string) (uint32, error) {
	f, err := os.Open(filepath.Join(procRoot, "devices"))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	inChar := false
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "Character devices:":
			inChar = true
			continue
		case strings.HasSuffix(line, ":"):
			inChar = false
			continue
		}
		fields := strings.Fields(line)
		if !inChar || len(fields) != 2 || fields[1] != driver {
			continue
		}
		m, err := strconv.ParseUint(fields[0], 10, 32)
		if err != nil {
			return 0, fmt.Errorf("%s: %q: %w", f.Name(), line, err)
		}
		return uint32(m), nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no %s driver registered (%s lists no character device major for it)", driver, f.Name())
}
