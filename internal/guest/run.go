package guest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kubeblade/kubeblade/internal/guest/scenario"
	"github.com/kubeblade/kubeblade/internal/testreq"
)

// Tag is the build tag of in-guest test files. A plain `go test` does not
// compile them; Package compiles them with it.
const Tag = "guest"

// Package describes the in-guest tests of one Go package.
type Package struct {
	// Dir is the package directory ("." for the calling test's package).
	Dir string
	// Run selects the in-guest tests (-test.run), e.g. "^TestKernel".
	Run string
	// Files are extra files for the initramfs.
	Files []File
	// Cmdline are extra kernel parameters.
	Cmdline []string
	// Timeout bounds the boot (default 4 minutes).
	Timeout time.Duration
}

// RequireKernel returns the kernel named by KUBEBLADE_GUEST_KERNEL, or
// ends the test through testreq (a visible skip in a plain `go test`, a
// failure in make hwtest). Under make test's other steps, which require
// their prerequisites but leave the guest to the hwtest steps, it skips.
func RequireKernel(t testing.TB) Kernel {
	t.Helper()
	dir := os.Getenv(EnvKernel)
	if dir == "" && testreq.Required() && os.Getenv(EnvSuite) != "1" {
		t.Skip("in-guest tests run in make hwtest's and hwtest-arm64's steps, which set " + EnvKernel)
	}
	testreq.Need(t, dir != "", "%v", ErrNoKernel)
	k, err := KernelFromDir(dir)
	testreq.Need(t, err == nil, "%v", err)
	m := k.Machine
	_, err = exec.LookPath(m.QEMU)
	testreq.Need(t, err == nil, "%s not installed (Debian package %s; hack/kernel/deps.sh installs it)", m.QEMU, m.QEMUPackage)
	if needsDTC(m.Arch) {
		_, err = exec.LookPath("dtc")
		testreq.Need(t, err == nil, "dtc not installed (Debian package device-tree-compiler; hack/kernel/deps.sh installs it)")
	}
	return k
}

func needsDTC(arch string) bool {
	for _, sc := range scenario.ForArch(arch, "") {
		if sc.DeviceTree != nil {
			return true
		}
	}
	return false
}

// Scenarios are the machines a kernel boots as: every scenario of its
// architecture, or those KUBEBLADE_GUEST_SCENARIOS names.
func Scenarios(t testing.TB, k Kernel) []scenario.Scenario {
	t.Helper()
	only := os.Getenv(EnvScenarios)
	sc := scenario.ForArch(k.Machine.Arch, only)
	if len(sc) == 0 {
		t.Fatalf("no %s scenario (%s=%q)", k.Machine.Arch, EnvScenarios, only)
	}
	return sc
}

// BuildTests compiles the tests of the package in dir with the guest tag
// as a static binary for the kernel's architecture.
func BuildTests(t testing.TB, k Kernel, dir string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "init")
	gotool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build the guest's init: %v", err)
	}
	build := exec.CommandContext(t.Context(), gotool, "test", "-c", "-tags", Tag, "-trimpath", "-o", bin, ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+k.Machine.GOARCH)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the in-guest tests of %s for %s: %v\n%s", dir, k.Machine.GOARCH, err, out)
	}
	return bin
}

// RunPackage compiles p's tests with the guest tag as a static binary for
// the kernel's architecture and boots it as the guest's init once per
// scenario (a subtest each, named after the scenario), reporting every test
// and subtest the guest ran as a subtest of that (Mirror), so the host's go
// test, and the report make test prints, list them, skips included. The
// consoles are kept in log files whose paths are logged.
func RunPackage(t *testing.T, p Package) {
	t.Helper()
	k := RequireKernel(t)
	bin := BuildTests(t, k, p.Dir)
	for _, sc := range Scenarios(t, k) {
		t.Run(sc.Name, func(t *testing.T) {
			t.Logf("scenario %s: %s", sc.Name, sc.Doc)
			RunScenario(t, k, sc, bin, p)
		})
	}
}

// RunScenario boots bin (BuildTests) as the init of the scenario's machine
// and reports every in-guest test and subtest as a subtest of t.
func RunScenario(t *testing.T, k Kernel, sc scenario.Scenario, bin string, p Package) Result {
	t.Helper()
	if p.Timeout <= 0 {
		p.Timeout = 4 * time.Minute
	}
	work := t.TempDir()

	logPath := consoleLogPath(t, p.Dir)
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	t.Logf("guest console: %s", logPath)

	args := []string{"-test.v", "-test.count=1"}
	if p.Run != "" {
		args = append(args, "-test.run="+p.Run)
	}
	env := map[string]string{
		// The guest's watchdog fires first, so a hung test still
		// prints a result line.
		EnvWatchdog:  (p.Timeout - 20*time.Second).String(),
		scenario.Env: sc.Name,
	}
	if testreq.Required() {
		env[testreq.Env] = "1"
	}
	res, err := Boot(context.WithoutCancel(t.Context()), Options{
		Kernel:     k,
		Init:       bin,
		Args:       args,
		Cmdline:    p.Cmdline,
		Env:        env,
		Files:      p.Files,
		Timeout:    p.Timeout,
		KVM:        os.Getenv(EnvKVM) == "1",
		Console:    logFile,
		WorkDir:    work,
		DeviceTree: sc.Source(),
	})
	Mirror(t, Results(res.Console))
	if err != nil {
		t.Fatalf("guest: %v\nlast console lines:\n%s", err, tail(res.Console, 40))
	}
	if !res.Reported {
		t.Fatalf("the guest never printed its result line (init crashed?); last console lines:\n%s", tail(res.Console, 40))
	}
	t.Logf("guest: %d passed, %d failed in %s", res.Passed, res.Failed, res.Elapsed.Round(10*time.Millisecond))
	if res.Failed > 0 {
		t.Errorf("%d in-guest tests failed (console: %s)", res.Failed, logPath)
	}
	if res.Passed == 0 {
		t.Errorf("no in-guest test ran (console: %s)", logPath)
	}
	return res
}

func consoleLogPath(t testing.TB, dir string) string {
	base := os.Getenv(EnvLogDir)
	if base == "" {
		base = filepath.Join(os.TempDir(), "kubeblade-guest")
	}
	if err := os.MkdirAll(base, 0o755); err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs(dir)
	name := strings.NewReplacer("/", "_", " ", "_").Replace(strings.TrimPrefix(abs, string(filepath.Separator)))
	return filepath.Join(base, fmt.Sprintf("%s.%s.console.log", name, strings.ReplaceAll(t.Name(), "/", "_")))
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Mirror runs every in-guest test as a subtest of t, nested as it ran in
// the guest ("TestGuestRig/TestKernelB/sub"), with its outcome: a failure
// fails it with what the test printed, a skip skips it with its reason, a
// test the guest printed no result for fails. So the host's test2json
// stream, which hack/testreport counts, holds every in-guest test and
// subtest, and a skip inside the guest is a skip on the host.
func Mirror(t *testing.T, results []TestResult) {
	t.Helper()
	known := map[string]bool{}
	for _, r := range results {
		known[r.Name] = true
	}
	// A subtest's parent is the longest name before one of its slashes
	// that the guest ran (a t.Run name may hold a slash of its own).
	children := map[string][]TestResult{}
	for _, r := range results {
		parent := ""
		for i := len(r.Name) - 1; i > 0; i-- {
			if r.Name[i] == '/' && known[r.Name[:i]] {
				parent = r.Name[:i]
				break
			}
		}
		children[parent] = append(children[parent], r)
	}
	var report func(t *testing.T, r TestResult)
	report = func(t *testing.T, r TestResult) {
		for _, c := range children[r.Name] {
			t.Run(strings.TrimPrefix(c.Name, r.Name+"/"), func(t *testing.T) { report(t, c) })
		}
		switch r.Status {
		case "PASS":
		case "FAIL":
			t.Errorf("failed in the guest:\n%s", r.Output)
		case "SKIP":
			t.Skipf("skipped in the guest:\n%s", r.Output)
		default:
			t.Errorf("the guest printed no result for it (a crash, or the watchdog fired during it):\n%s", r.Output)
		}
	}
	for _, r := range children[""] {
		t.Run(r.Name, func(t *testing.T) { report(t, r) })
	}
}
