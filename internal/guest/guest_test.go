//go:build !guest

package guest_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kubeblade/kubeblade/internal/guest"
	"github.com/kubeblade/kubeblade/internal/guest/scenario"
	"github.com/kubeblade/kubeblade/internal/testreq"
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

// guestConsole is a guest's serial console (CRLF line ends, kernel lines
// between) around what `go test -v` of Go 1.26 prints for nested, failed,
// skipped and parallel subtests: each test's output follows its === RUN,
// === NAME or === CONT line, and the result lines of subtests come after
// their top-level test's, indented.
const guestConsole = "[    0.91] random: crng init done\r\n" +
	"=== RUN   TestKernelA\r\n" +
	"    a_test.go:6: parent says\r\n" +
	"=== RUN   TestKernelA/sub_one\r\n" +
	"=== RUN   TestKernelA/sub_one/deep\r\n" +
	"    a_test.go:8: SKIP (prerequisite missing): no pwm here\r\n" +
	"=== NAME  TestKernelA/sub_one\r\n" +
	"    a_test.go:9: one says\r\n" +
	"=== RUN   TestKernelA/two\r\n" +
	"    a_test.go:11: boom\r\n" +
	"[    1.52] gpio-sim: a kernel line in the middle\r\n" +
	"=== RUN   TestKernelA/par\r\n" +
	"=== RUN   TestKernelA/par/p1\r\n" +
	"=== PAUSE TestKernelA/par/p1\r\n" +
	"=== RUN   TestKernelA/par/p2\r\n" +
	"=== PAUSE TestKernelA/par/p2\r\n" +
	"=== CONT  TestKernelA/par/p1\r\n" +
	"    a_test.go:13: p1 says\r\n" +
	"=== CONT  TestKernelA/par/p2\r\n" +
	"    a_test.go:14: p2 skip\r\n" +
	"--- FAIL: TestKernelA (0.00s)\r\n" +
	"    --- PASS: TestKernelA/sub_one (0.00s)\r\n" +
	"        --- SKIP: TestKernelA/sub_one/deep (0.00s)\r\n" +
	"    --- FAIL: TestKernelA/two (0.00s)\r\n" +
	"    --- PASS: TestKernelA/par (0.00s)\r\n" +
	"        --- PASS: TestKernelA/par/p1 (0.00s)\r\n" +
	"        --- SKIP: TestKernelA/par/p2 (0.00s)\r\n" +
	"=== RUN   TestKernelB\r\n" +
	"=== RUN   TestKernelB/x\r\n" +
	"    b_test.go:19: nothing to do\r\n" +
	"--- PASS: TestKernelB (0.00s)\r\n" +
	"    --- SKIP: TestKernelB/x (0.00s)\r\n" +
	"=== RUN   TestKernelC\r\n" +
	"    c_test.go:3: hangs\r\n" +
	"FAIL\r\n" +
	"guestinit: watchdog: the tests did not finish within 3m0s\r\n" +
	"guestinit: 3 skipped\r\n" +
	"\r\n" +
	"4 passed, 3 failed\r\n"

func TestResults(t *testing.T) {
	want := []guest.TestResult{
		{Name: "TestKernelA", Status: "FAIL", Output: "    a_test.go:6: parent says"},
		{Name: "TestKernelA/sub_one", Status: "PASS", Output: "    a_test.go:9: one says"},
		{Name: "TestKernelA/sub_one/deep", Status: "SKIP", Output: "    a_test.go:8: SKIP (prerequisite missing): no pwm here"},
		{Name: "TestKernelA/two", Status: "FAIL", Output: "    a_test.go:11: boom\n[    1.52] gpio-sim: a kernel line in the middle"},
		{Name: "TestKernelA/par", Status: "PASS"},
		{Name: "TestKernelA/par/p1", Status: "PASS", Output: "    a_test.go:13: p1 says"},
		{Name: "TestKernelA/par/p2", Status: "SKIP", Output: "    a_test.go:14: p2 skip"},
		{Name: "TestKernelB", Status: "PASS"},
		{Name: "TestKernelB/x", Status: "SKIP", Output: "    b_test.go:19: nothing to do"},
		{Name: "TestKernelC", Output: "    c_test.go:3: hangs\nFAIL\nguestinit: watchdog: the tests did not finish within 3m0s\nguestinit: 3 skipped\n\n4 passed, 3 failed"},
	}
	if diff := cmp.Diff(want, guest.Results(guestConsole)); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
}

// TestMirrorReachesTheReport mirrors guestConsole in a child process of
// this test binary and reads the child's output as go test -json does
// (go tool test2json): what hack/testreport counts. Every in-guest test and
// subtest must be there, nested, with its outcome and a skip's reason.
func TestMirrorReachesTheReport(t *testing.T) {
	const helperEnv = "KUBEBLADE_GUEST_MIRROR_HELPER"
	if os.Getenv(helperEnv) == "1" {
		guest.Mirror(t, guest.Results(guestConsole))
		return
	}
	gotool, err := exec.LookPath("go")
	testreq.Need(t, err == nil, "the go command, for go tool test2json: %v", err)
	child := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestMirrorReachesTheReport$", "-test.v=test2json", "-test.count=1")
	child.Env = append(os.Environ(), helperEnv+"=1")
	conv := exec.CommandContext(t.Context(), gotool, "tool", "test2json", "-p", "guest")
	conv.Stdin, err = child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stream bytes.Buffer
	conv.Stdout = &stream
	if err := conv.Start(); err != nil {
		t.Fatal(err)
	}
	// The child fails: the console holds failures.
	_ = child.Run()
	if err := conv.Wait(); err != nil {
		t.Fatalf("test2json: %v", err)
	}

	type event struct{ Action, Test, Output string }
	got := map[string]string{}
	output := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(stream.String()), "\n") {
		var e event
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("test2json line %q: %v", line, err)
		}
		name, ok := strings.CutPrefix(e.Test, "TestMirrorReachesTheReport/")
		if !ok {
			continue
		}
		switch e.Action {
		case "pass", "fail", "skip":
			got[name] = e.Action
		case "output":
			output[name] += e.Output
		}
	}
	want := map[string]string{
		"TestKernelA":              "fail",
		"TestKernelA/sub_one":      "pass",
		"TestKernelA/sub_one/deep": "skip",
		"TestKernelA/two":          "fail",
		"TestKernelA/par":          "pass",
		"TestKernelA/par/p1":       "pass",
		"TestKernelA/par/p2":       "skip",
		"TestKernelB":              "pass", // hack/testreport counts it skipped: both its subtests skipped
		"TestKernelB/x":            "skip",
		"TestKernelC":              "fail",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("the host's results of the in-guest tests (-want +got):\n%s\n%s", diff, stream.String())
	}
	for name, text := range map[string]string{
		"TestKernelA/sub_one/deep": "SKIP (prerequisite missing): no pwm here",
		"TestKernelA/two":          "a_test.go:11: boom",
		"TestKernelC":              "the guest printed no result for it",
	} {
		if !strings.Contains(output[name], text) {
			t.Errorf("the host's output of %s does not say %q:\n%s", name, text, output[name])
		}
	}
}

// TestGuestRig boots the guest kernel with this package's in-guest tests
// (rig_guest_test.go): the rig's own check that the kernel has what the
// hardware tests need.
func TestGuestRig(t *testing.T) {
	guest.RunPackage(t, guest.Package{Dir: ".", Run: "^TestKernel"})
}
