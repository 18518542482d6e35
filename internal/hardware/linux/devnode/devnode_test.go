//go:build linux

package devnode_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/kubeblade/kubeblade/internal/hardware/linux/devnode"
	"github.com/kubeblade/kubeblade/internal/smartfan/smartfantest"
	"github.com/kubeblade/kubeblade/internal/testreq"
)

// TestOnlyDeviceNames: what a BladeConfig or config file could name
// instead of a blade's device is refused before anything is opened.
func TestOnlyDeviceNames(t *testing.T) {
	for _, v := range []string{
		"/proc/sysrq-trigger", "/dev/mmcblk0", "/var/lib/kubeblade/ca.key", "../../etc/shadow", "/dev/../proc/sysrq-trigger",
		"/dev/mem", "mem", "null", "/tmp/leds0", "leds0/../../x", "/dev/pts/0", "leds", "ttyAMA", "leds1234", "tty1", "ttyUSB0", " leds0",
	} {
		if n, err := devnode.LEDStream("/dev", v); !errors.Is(err, devnode.ErrRefused) {
			t.Errorf("LEDStream(%q) = %+v, %v; want refused", v, n, err)
		}
		if n, err := devnode.UART("/dev", v); !errors.Is(err, devnode.ErrRefused) {
			t.Errorf("UART(%q) = %+v, %v; want refused", v, n, err)
		}
	}
	for v, want := range map[string]string{"leds0": "/dev/leds0", "/dev/leds3": "/dev/leds3"} {
		if n, err := devnode.LEDStream("/dev", v); err != nil || n.Path != want {
			t.Errorf("LEDStream(%q) = %+v, %v", v, n, err)
		}
	}
	for v, want := range map[string]string{"ttyAMA5": "/dev/ttyAMA5", "/dev/ttyAMA4": "/dev/ttyAMA4", "ttyS0": "/dev/ttyS0"} {
		if n, err := devnode.UART("/dev", v); err != nil || n.Path != want {
			t.Errorf("UART(%q) = %+v, %v", v, n, err)
		}
	}
}

// ws2812Major stands for the dynamic major ws2812-pio-rp1 got: a number
// from the kernel's range for local and experimental use
// (Documentation/admin-guide/devices.txt), which no driver here has.
const ws2812Major = 240

// fakeProc writes a /proc/devices that lists ws2812-pio-rp1 (or not).
func fakeProc(t *testing.T, withDriver bool) string {
	t.Helper()
	dir := t.TempDir()
	devices := "Character devices:\n  1 mem\n  4 /dev/vc/0\n  4 tty\n136 pts\n204 ttyAMA\n"
	if withDriver {
		devices += fmt.Sprintf("%d %s\n", ws2812Major, devnode.WS2812Driver)
	}
	devices += "\nBlock devices:\n  7 loop\n179 mmc\n"
	if err := os.WriteFile(filepath.Join(dir, "devices"), []byte(devices), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func mknod(t *testing.T, path string, mode uint32, major, minor uint32) {
	t.Helper()
	testreq.Need(t, os.Geteuid() == 0, "making device nodes (mknod) needs root")
	if err := unix.Mknod(path, mode|0o600, int(unix.Mkdev(major, minor))); err != nil {
		t.Fatalf("mknod %s: %v", path, err)
	}
}

// victim is a host file an attacker points the agent at.
func victim(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "ca.key")
	if err := os.WriteFile(p, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func unchanged(t *testing.T, p string) {
	t.Helper()
	if b, err := os.ReadFile(p); err != nil || string(b) != "precious" {
		t.Errorf("%s changed: %q, %v", p, b, err)
	}
}

// TestLEDStreamMustBeTheDriversDevice opens real files where /dev/leds0
// should be: only ws2812-pio-rp1's character device, with the minor its
// name says, passes; a regular file, a symbolic link (to /dev/null or to
// a key), a block device and /dev/null's device are refused, and the
// files named stay as they were.
func TestLEDStreamMustBeTheDriversDevice(t *testing.T) {
	proc := fakeProc(t, true)
	for name, tc := range map[string]struct {
		prepare func(t *testing.T, node string) (victim string)
		say     string // "" means accepted
	}{
		"a regular file": {func(t *testing.T, node string) string {
			if err := os.WriteFile(node, []byte("precious"), 0o600); err != nil {
				t.Fatal(err)
			}
			return node
		}, "is a regular file, not a character device"},
		"a symbolic link to /dev/null": {func(t *testing.T, node string) string {
			if err := os.Symlink("/dev/null", node); err != nil {
				t.Fatal(err)
			}
			return ""
		}, "is a symbolic link, not a character device"},
		"a symbolic link to a key": {func(t *testing.T, node string) string {
			v := victim(t)
			if err := os.Symlink(v, node); err != nil {
				t.Fatal(err)
			}
			return v
		}, "is a symbolic link"},
		"a block device (a disk)": {func(t *testing.T, node string) string {
			mknod(t, node, unix.S_IFBLK, 179, 0) // mmcblk0
			return ""
		}, "is a block device, not a character device"},
		"/dev/null's device (major 1)": {func(t *testing.T, node string) string {
			mknod(t, node, unix.S_IFCHR, 1, 3)
			return ""
		}, fmt.Sprintf("is character device 1:3, not ws2812-pio-rp1's leds0 (%d:0)", ws2812Major)},
		"/dev/mem's device": {func(t *testing.T, node string) string {
			mknod(t, node, unix.S_IFCHR, 1, 1)
			return ""
		}, "is character device 1:1"},
		"the driver's device of another minor": {func(t *testing.T, node string) string {
			mknod(t, node, unix.S_IFCHR, ws2812Major, 2)
			return ""
		}, fmt.Sprintf("is character device %d:2, not ws2812-pio-rp1's leds0 (%d:0)", ws2812Major, ws2812Major)},
		"the driver's device": {func(t *testing.T, node string) string {
			mknod(t, node, unix.S_IFCHR, ws2812Major, 0)
			return ""
		}, ""},
	} {
		t.Run(name, func(t *testing.T) {
			dev := t.TempDir()
			n, err := devnode.LEDStream(dev, "leds0")
			if err != nil {
				t.Fatal(err)
			}
			v := tc.prepare(t, n.Path)
			p, err := n.Pin(proc)
			if tc.say == "" {
				if err != nil {
					t.Fatalf("Pin: %v", err)
				}
				p.Close()
				// No driver has the major here: the open reaches the
				// kernel, which has no device behind it.
				if _, err := n.Open(unix.O_WRONLY, proc); !errors.Is(err, unix.ENXIO) && !errors.Is(err, unix.ENODEV) {
					t.Fatalf("Open = %v, want the kernel's ENXIO for a major without a driver", err)
				}
				return
			}
			if !errors.Is(err, devnode.ErrRefused) || !strings.Contains(err.Error(), tc.say) {
				t.Fatalf("Pin = %v, want refused saying %q", err, tc.say)
			}
			f, err := n.Open(unix.O_WRONLY, proc)
			if !errors.Is(err, devnode.ErrRefused) {
				f.Close()
				t.Fatalf("Open = %v, want refused", err)
			}
			if v != "" {
				unchanged(t, v)
			}
		})
	}
	t.Run("without the driver", func(t *testing.T) {
		dev := t.TempDir()
		n, _ := devnode.LEDStream(dev, "leds0")
		mknod(t, n.Path, unix.S_IFCHR, ws2812Major, 0)
		_, err := n.Pin(fakeProc(t, false))
		if !errors.Is(err, devnode.ErrRefused) || !strings.Contains(err.Error(), "no ws2812-pio-rp1 driver registered") {
			t.Fatalf("Pin = %v, want refused: no driver, no expected major", err)
		}
	})
	t.Run("missing", func(t *testing.T) {
		n, _ := devnode.LEDStream(t.TempDir(), "leds0")
		if _, err := n.Pin(proc); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("Pin = %v, want not-exist", err)
		}
	})
}

// TestUARTMustBeTheDriversDevice: the smart fan unit's UART must be the
// amba-pl011 (204, 64+N) or 8250 (4, 64+N) character device its name says.
// A pseudo-terminal — the test double's own kind of tty — is refused under
// a UART's name, directly or through a symbolic link, and gets no byte;
// so are a virtual console and a regular file.
func TestUARTMustBeTheDriversDevice(t *testing.T) {
	master, slave := smartfantest.OpenPTY(t)
	var st unix.Stat_t
	if err := unix.Stat(slave, &st); err != nil {
		t.Fatal(err)
	}
	ptyMajor, ptyMinor := unix.Major(st.Rdev), unix.Minor(st.Rdev)
	for name, tc := range map[string]struct {
		node    string
		prepare func(t *testing.T, path string) (victim string)
		say     string
	}{
		"a symbolic link to a pty": {"ttyAMA5", func(t *testing.T, p string) string {
			if err := os.Symlink(slave, p); err != nil {
				t.Fatal(err)
			}
			return ""
		}, "is a symbolic link"},
		"a pty's device under a UART's name": {"ttyAMA5", func(t *testing.T, p string) string {
			mknod(t, p, unix.S_IFCHR, ptyMajor, ptyMinor)
			return ""
		}, fmt.Sprintf("is character device %d:%d, not amba-pl011 (ttyAMA)'s ttyAMA5 (204:69)", ptyMajor, ptyMinor)},
		"a virtual console as ttyS1": {"ttyS1", func(t *testing.T, p string) string {
			mknod(t, p, unix.S_IFCHR, 4, 1) // /dev/tty1
			return ""
		}, "is character device 4:1, not 8250 (ttyS)'s ttyS1 (4:65)"},
		"a regular file": {"ttyAMA4", func(t *testing.T, p string) string {
			if err := os.WriteFile(p, []byte("precious"), 0o600); err != nil {
				t.Fatal(err)
			}
			return p
		}, "is a regular file"},
		"a symbolic link to the shadow file": {"ttyAMA4", func(t *testing.T, p string) string {
			v := victim(t)
			if err := os.Symlink(v, p); err != nil {
				t.Fatal(err)
			}
			return v
		}, "is a symbolic link"},
		"amba-pl011's ttyAMA5": {"ttyAMA5", func(t *testing.T, p string) string {
			mknod(t, p, unix.S_IFCHR, devnode.AMBAMajor, devnode.AMBAMinorBase+5)
			return ""
		}, ""},
		"8250's ttyS0": {"ttyS0", func(t *testing.T, p string) string {
			mknod(t, p, unix.S_IFCHR, devnode.TTYMajor, devnode.TTYSMinorBase)
			return ""
		}, ""},
	} {
		t.Run(name, func(t *testing.T) {
			n, err := devnode.UART(t.TempDir(), tc.node)
			if err != nil {
				t.Fatal(err)
			}
			v := tc.prepare(t, n.Path)
			p, err := n.Pin("/proc")
			if tc.say == "" {
				if err != nil {
					t.Fatalf("Pin: %v", err)
				}
				p.Close()
				return
			}
			if !errors.Is(err, devnode.ErrRefused) || !strings.Contains(err.Error(), tc.say) {
				t.Fatalf("Pin = %v, want refused saying %q", err, tc.say)
			}
			if v != "" {
				unchanged(t, v)
			}
		})
	}
	// Nothing reached the pty: its master has no byte to read (it is
	// non-blocking, so an empty read returns at once).
	buf := make([]byte, 64)
	if n, err := unix.Read(int(master.Fd()), buf); n > 0 || !errors.Is(err, unix.EAGAIN) {
		t.Errorf("the pty received %q (%v)", buf[:max(n, 0)], err)
	}
}

// TestRealTTYS0 pins this machine's own first 8250 port when it has one:
// the check agrees with a kernel-made node, not only with mknod's.
func TestRealTTYS0(t *testing.T) {
	var st unix.Stat_t
	if err := unix.Stat("/dev/ttyS0", &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFCHR {
		t.Skip("SKIP: no /dev/ttyS0 character device on this machine")
	}
	n, err := devnode.UART("/dev", "ttyS0")
	if err != nil {
		t.Fatal(err)
	}
	p, err := n.Pin("/proc")
	if err != nil {
		t.Fatalf("Pin(/dev/ttyS0): %v", err)
	}
	if !strings.HasPrefix(p.ProcPath(), "/proc/self/fd/") {
		t.Errorf("ProcPath = %s", p.ProcPath())
	}
	p.Close()
}
