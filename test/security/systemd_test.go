package security

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kubeblade/kubeblade/internal/testenv"
)

// TestSystemdUnitDevices: the systemd unit opens only the device classes
// the agent uses (GPIO character devices, the smart fan unit's UART, the
// ws2812-pio-rp1 LED stream) and never char-misc, which would hand it the
// watchdog, uinput and every other misc device.
func TestSystemdUnitDevices(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "deploy/systemd/kubeblade-agent.service"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"char-gpiochip rw", "char-ttyAMA rw", "char-ws2812-pio-rp1 w"}
	var got []string
	policy := ""
	for _, line := range strings.Split(string(raw), "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		switch {
		case !ok || strings.HasPrefix(k, "#"):
		case k == "DeviceAllow":
			got = append(got, v)
		case k == "DevicePolicy":
			policy = v
		case k == "PrivateDevices" && v != "no":
			t.Errorf("PrivateDevices=%s would hide /dev/gpiochip*", v)
		}
	}
	if policy != "closed" {
		t.Errorf("DevicePolicy=%q, want closed", policy)
	}
	if !slices.Equal(got, want) {
		t.Errorf("DeviceAllow = %q, want exactly %q", got, want)
	}
}
