//go:build !guest

package guest_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kubeblade/kubeblade/internal/guest"
	"github.com/kubeblade/kubeblade/internal/guest/scenario"
)

func TestParseSummary(t *testing.T) {
	for name, tc := range map[string]struct {
		console        string
		passed, failed int
		ok             bool
	}{
		"clean":             {console: "=== RUN TestA\n--- PASS: TestA (0.00s)\n\n3 passed, 0 failed\n", passed: 3, ok: true},
		"serial CRLF":       {console: "x\r\n12 passed, 1 failed\r\n", passed: 12, failed: 1, ok: true},
		"last line wins":    {console: "1 passed, 0 failed\n[ 1.2] reboot\n2 passed, 5 failed\n", passed: 2, failed: 5, ok: true},
		"never reported":    {console: "Kernel panic - not syncing: Attempted to kill init!\n"},
		"inside other text": {console: "said 3 passed, 0 failed earlier\n"},
	} {
		t.Run(name, func(t *testing.T) {
			p, f, ok := guest.ParseSummary(tc.console)
			if p != tc.passed || f != tc.failed || ok != tc.ok {
				t.Fatalf("ParseSummary = %d, %d, %v; want %d, %d, %v", p, f, ok, tc.passed, tc.failed, tc.ok)
			}
		})
	}
}

func TestInitramfsSpec(t *testing.T) {
	got := guest.InitramfsSpec("/tmp/x/init", []guest.File{
		{Path: "/lib/modules/leds.ko", Source: "/b/leds.ko"},
		{Path: "/bin/helper", Source: "/b/h", Mode: 0o755},
	})
	want := `dir /dev 0755 0 0
dir /proc 0755 0 0
dir /sys 0755 0 0
dir /tmp 0755 0 0
dir /run 0755 0 0
nod /dev/console 0600 0 0 c 5 1
file /init /tmp/x/init 0755 0 0
dir /lib 0755 0 0
dir /lib/modules 0755 0 0
file /lib/modules/leds.ko /b/leds.ko 0644 0 0
dir /bin 0755 0 0
file /bin/helper /b/h 0755 0 0
`
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
}

func TestCommandLine(t *testing.T) {
	for arch, want := range map[string]string{
		scenario.ArchX86: "console=ttyS0 reboot=acpi loglevel=4 panic=-1 x.y=1 A=1 B=2 -- -test.v -test.run=^TestKernel",
		scenario.ArchARM: "console=ttyAMA0 loglevel=4 panic=-1 x.y=1 A=1 B=2 -- -test.v -test.run=^TestKernel",
	} {
		got := guest.CommandLine(guest.Machines[arch], []string{"x.y=1"}, map[string]string{"B": "2", "A": "1"}, []string{"-test.v", "-test.run=^TestKernel"})
		if got != want {
			t.Errorf("%s:\ngot  %q\nwant %q", arch, got, want)
		}
	}
}

// TestKernelFromDir: the architecture comes from build.sh's inputs file,
// and with it the kernel file and the machine.
func TestKernelFromDir(t *testing.T) {
	for arch, image := range map[string]string{"": "bzImage", "x86_64": "bzImage", "arm64": "Image"} {
		dir := t.TempDir()
		for _, p := range []string{image, "build/usr/gen_init_cpio"} {
			if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, p), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if arch != "" {
			if err := os.WriteFile(filepath.Join(dir, "inputs"), []byte("script x\narch "+arch+"\ncompiler y\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		k, err := guest.KernelFromDir(dir)
		if err != nil {
			t.Fatalf("%q: %v", arch, err)
		}
		want := arch
		if want == "" {
			want = "x86_64"
		}
		if k.Machine.Arch != want || k.Image != filepath.Join(dir, image) {
			t.Errorf("%q: machine %s, image %s", arch, k.Machine.Arch, k.Image)
		}
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "inputs"), []byte("arch riscv64\n"), 0o644)
	if _, err := guest.KernelFromDir(dir); err == nil || !strings.Contains(err.Error(), "riscv64") {
		t.Fatalf("an unknown architecture: %v", err)
	}
}

func TestTopLevelResults(t *testing.T) {
	console := `[    0.9] random kernel line
=== RUN   TestKernelA
--- PASS: TestKernelA (0.01s)
=== RUN   TestKernelB
=== RUN   TestKernelB/sub
    b_test.go:12: boom
    --- FAIL: TestKernelB/sub (0.00s)
--- FAIL: TestKernelB (0.00s)
=== RUN   TestKernelC
    c_test.go:3: SKIP (prerequisite missing): no pwm
--- SKIP: TestKernelC (0.00s)
FAIL

1 passed, 2 failed
`
	got := guest.TopLevelResults(console)
	var names []string
	for _, r := range got {
		names = append(names, r.Name+"="+r.Status)
	}
	if diff := cmp.Diff([]string{"TestKernelA=PASS", "TestKernelB=FAIL", "TestKernelC=SKIP"}, names); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	if want := "=== RUN   TestKernelB\n=== RUN   TestKernelB/sub\n    b_test.go:12: boom\n    --- FAIL: TestKernelB/sub (0.00s)\n--- FAIL: TestKernelB (0.00s)"; got[1].Output != want {
		t.Fatalf("output of the failed test:\n%s\nwant:\n%s", got[1].Output, want)
	}
}

// TestGuestRig boots the guest kernel with this package's in-guest tests
// (rig_guest_test.go): the rig's own check that the kernel has what the
// hardware tests need.
func TestGuestRig(t *testing.T) {
	guest.RunPackage(t, guest.Package{Dir: ".", Run: "^TestKernel"})
}
