package linux_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	agentconfigv1 "github.com/kubeblade/kubeblade/api/agentconfig/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/hardware"
	"github.com/kubeblade/kubeblade/internal/hardware/linux"
	"github.com/kubeblade/kubeblade/internal/smartfan/smartfantest"
	"github.com/kubeblade/kubeblade/internal/testwait"
)

// TestLEDStreamOnlyToTheDriversDevice: the backend's own stream opener (no
// test model) writes nothing to a file that stands where /dev/leds0 should
// be — a plain file, or a symbolic link to a key outside the device tree —
// and says why the LEDs are missing. On 8f44781 both got 0xFF and a dark
// frame at offset 0 the moment the backend opened.
func TestLEDStreamOnlyToTheDriversDevice(t *testing.T) {
	key := filepath.Join(t.TempDir(), "ca.key")
	for name, tc := range map[string]struct {
		node   string // the dev/leds0 entry of machine()
		victim string
		say    string
	}{
		"a regular file":           {"precious", "dev/leds0", "is a regular file, not a character device"},
		"a symbolic link to a key": {"->" + key, key, "is a symbolic link, not a character device"},
	} {
		t.Run(name, func(t *testing.T) {
			if err := os.WriteFile(key, []byte("precious"), 0o600); err != nil {
				t.Fatal(err)
			}
			root, drv, _ := cm4Blade(t, map[string]string{"dev/leds0": tc.node})
			b := open(t, linux.Options{Config: agentconfigv1.LinuxHardwareConfig{LEDs: agentconfigv1.LinuxLEDConfig{Stream: "/dev/leds0"}},
				Roots: roots(root), GPIO: drv, AwaitPWMExport: kernelExport(root)})
			if b.Capabilities().Has(hardware.CapLEDs) {
				t.Fatal("LEDs reported on a file that is not the driver's device")
			}
			if d := b.Info().Detail; !strings.Contains(d, tc.say) {
				t.Errorf("detail %q does not say %q", d, tc.say)
			}
			_ = b.SetLED(hardware.LEDTop, hardware.Color{R: 0x10})
			victim := tc.victim
			if !filepath.IsAbs(victim) {
				victim = filepath.Join(root, victim)
			}
			if got, err := os.ReadFile(victim); err != nil || string(got) != "precious" {
				t.Fatalf("%s now holds % x (%v)", victim, got, err)
			}
		})
	}
}

// TestSmartFanUARTOnlyToTheDriversDevice: with the backend's own dialer,
// a /dev/ttyAMA5 that is a symbolic link to a pseudo-terminal (or any
// other file) is never opened: the refusal is logged and retried, and not
// a byte reaches the terminal.
func TestSmartFanUARTOnlyToTheDriversDevice(t *testing.T) {
	master, tty := smartfantest.OpenPTY(t)
	root, drv, _ := cm4Blade(t, map[string]string{"dev/ttyAMA5": "->" + tty})
	var logs syncBuffer
	b := open(t, linux.Options{Config: config(root), Roots: roots(root), GPIO: drv,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if b.Info().FanUnit != hardware.FanUnitSmart {
		t.Fatalf("fan unit %s: the UART's node exists, so the pins are the UART's", b.Info().FanUnit)
	}
	testwait.Eventually(t, smartfantest.Timeout, "the refusal to be logged", func(context.Context) (bool, string) {
		s := logs.String()
		return strings.Contains(s, "cannot open UART") && strings.Contains(s, "ttyAMA5 is a symbolic link, not a character device"), s
	})
	buf := make([]byte, 64)
	if n, err := unix.Read(int(master.Fd()), buf); n > 0 || !errors.Is(err, unix.EAGAIN) {
		t.Fatalf("the terminal received %q (%v)", buf[:max(n, 0)], err)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
