package guest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubeblade/kubeblade/internal/testreq"
)

// EnvModules names a directory of kubeblade-leds modules already built for
// the guest kernel (make kmod-arm64 leaves them in bin/kmod/arm64, built
// against that kernel's tree and Module.symvers); without it Modules builds
// them with the same script.
const EnvModules = "KUBEBLADE_GUEST_MODULES"

// ModuleDir is where Modules puts the modules in the guest.
const ModuleDir = "/lib/modules/kubeblade"

// Modules are the initramfs files of the kubeblade-leds modules for kernel
// k: the driver and its KUnit module (from EnvModules, or built with
// root/hack/kernel/kmod.sh against k.BuildDir, where modpost checks every
// symbol against the kernel's Module.symvers), and the kernel's own
// led-class-multicolor module when it has the class as one. A module whose
// vermagic is not the kernel's release fails the test: it would not load.
func Modules(t testing.TB, k Kernel, root string) []File {
	t.Helper()
	dir := os.Getenv(EnvModules)
	if dir == "" {
		dir = t.TempDir()
		args := append([]string{k.BuildDir, dir}, k.Machine.KernelMake...)
		build := exec.CommandContext(t.Context(), filepath.Join(root, "hack", "kernel", "kmod.sh"), args...)
		if b, err := build.CombinedOutput(); err != nil {
			t.Fatalf("building the module against %s: %v\n%s", k.BuildDir, err, b)
		}
	}
	release, err := os.ReadFile(filepath.Join(k.BuildDir, "include", "config", "kernel.release"))
	if err != nil {
		t.Fatal(err)
	}
	modinfo, err := exec.LookPath("modinfo")
	testreq.Need(t, err == nil, "modinfo (Debian package kmod) not installed")
	var files []File
	for _, ko := range []string{
		filepath.Join(dir, "kubeblade-leds.ko"),
		filepath.Join(dir, "kubeblade-leds-test.ko"),
		// Present when the guest kernel builds the LED class as a module.
		filepath.Join(k.BuildDir, "drivers", "leds", "led-class-multicolor.ko"),
	} {
		if _, err := os.Stat(ko); err != nil {
			if strings.HasPrefix(filepath.Base(ko), "kubeblade") {
				t.Fatalf("%s: %v", ko, err)
			}
			continue
		}
		vm, err := exec.Command(modinfo, "-F", "vermagic", ko).Output()
		if err != nil {
			t.Fatalf("modinfo %s: %v", ko, err)
		}
		if got, want := firstField(string(vm)), strings.TrimSpace(string(release)); got != want {
			t.Fatalf("%s was built for %s, the guest kernel is %s (%s=%s?)", ko, got, want, EnvModules, os.Getenv(EnvModules))
		}
		files = append(files, File{Path: ModuleDir + "/" + filepath.Base(ko), Source: ko})
	}
	return files
}

func firstField(s string) string {
	f := strings.Fields(s)
	if len(f) == 0 {
		return ""
	}
	return f[0]
}
