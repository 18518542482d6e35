//go:build !guest

package kmod_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubeblade/kubeblade/internal/guest"
	"github.com/kubeblade/kubeblade/internal/testreq"
)

// TestGuestKmod builds the module against the guest kernel (modpost checks
// every symbol against that kernel's Module.symvers) and boots the guest
// with the in-guest tests (kmod_guest_test.go) as init.
func TestGuestKmod(t *testing.T) {
	k := guest.RequireKernel(t)
	out := t.TempDir()
	build := exec.CommandContext(t.Context(), "../../hack/kernel/kmod.sh", k.BuildDir, out)
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the module against %s: %v\n%s", k.BuildDir, err, b)
	}
	checkModinfo(t, filepath.Join(out, "kubeblade-leds.ko"))
	var files []guest.File
	for _, ko := range []string{
		filepath.Join(out, "kubeblade-leds.ko"),
		filepath.Join(out, "kubeblade-leds-test.ko"),
		// Present when the guest kernel builds the LED class as a module.
		filepath.Join(k.BuildDir, "drivers/leds/led-class-multicolor.ko"),
	} {
		if _, err := os.Stat(ko); err == nil {
			files = append(files, guest.File{Path: "/lib/modules/kubeblade/" + filepath.Base(ko), Source: ko})
		}
	}
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
