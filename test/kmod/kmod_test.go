//go:build !guest

package kmod_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/kubeblade/kubeblade/internal/guest"
	"github.com/kubeblade/kubeblade/internal/testreq"
)

// TestGuestKmod builds the module against the guest kernel (modpost checks
// every symbol against that kernel's Module.symvers), or takes the one make
// kmod-arm64 built against it, and boots the guest with the in-guest tests
// (kmod_guest_test.go) as init, once per scenario.
func TestGuestKmod(t *testing.T) {
	k := guest.RequireKernel(t)
	files := guest.Modules(t, k, "../..")
	checkModinfo(t, files[0].Source)
	guest.RunPackage(t, guest.Package{Dir: ".", Run: "^Test(KUnit|Module)", Files: files})
}

// checkModinfo reads what modprobe and a person see of the module. The
// guest kernel builds the multicolor LED class as a module, as Raspberry Pi
// OS and Talos do, so the dependency is recorded.
func checkModinfo(t *testing.T, ko string) {
	t.Helper()
	modinfo, err := exec.LookPath("modinfo")
	testreq.Need(t, err == nil, "modinfo (Debian package kmod) not installed")
	for field, want := range map[string]string{
		"license":     "GPL",
		"alias":       "platform:kubeblade-leds",
		"depends":     "led-class-multicolor",
		"description": "Compute Blade WS2812 LEDs (multicolor LED class) and fan PWM (experimental)",
	} {
		got, err := exec.Command(modinfo, "-F", field, ko).Output()
		if err != nil {
			t.Fatalf("modinfo -F %s: %v", field, err)
		}
		if g := strings.TrimSpace(string(got)); g != want {
			t.Errorf("modinfo %s = %q, want %q", field, g, want)
		}
	}
}
