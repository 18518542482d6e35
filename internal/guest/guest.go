// Package guest boots a real Linux kernel in QEMU with a Go test binary as
// its init, so code that talks to kernel interfaces (GPIO character device,
// gpio-sim, sysfs PWM, LED class) is tested against the kernel itself rather
// than against fixtures.
//
// The host side (this package) compiles a package's tests with the `guest`
// build tag, packs the static binary into an initramfs made by the kernel's
// own usr/gen_init_cpio, boots QEMU (TCG; KVM only when asked for, as this
// machine kind's /dev/kvm cannot run a Linux guest), keeps the serial console
// in a log file and reads the result from the console's final
// "N passed, M failed" line. The guest side is package guestinit; the kernel
// comes from hack/kernel/build.sh (make hwtest).
package guest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Environment variables the rig reads.
const (
	// EnvKernel names the directory hack/kernel/build.sh printed: it holds
	// bzImage and build/usr/gen_init_cpio.
	EnvKernel = "KUBEBLADE_GUEST_KERNEL"
	// EnvKVM, set to 1, boots with KVM instead of TCG emulation. Only for
	// machines with real virtualisation (this kind's kvm_pvm is not).
	EnvKVM = "KUBEBLADE_GUEST_KVM"
	// EnvLogDir is where console logs are kept (default: a directory
	// under os.TempDir()).
	EnvLogDir = "KUBEBLADE_GUEST_LOGDIR"
	// EnvWatchdog carries the in-guest watchdog to guestinit.
	EnvWatchdog = "KUBEBLADE_GUEST_WATCHDOG"
	// EnvSuite, set to 1 by make hwtest, marks the suite in-guest tests
	// belong to: elsewhere under make test they skip, as that step runs
	// them.
	EnvSuite = "KUBEBLADE_HWTEST"
)

// Kernel is a built guest kernel.
type Kernel struct {
	// Image is the bootable kernel (bzImage).
	Image string
	// GenInitCPIO is the kernel's initramfs packer.
	GenInitCPIO string
	// BuildDir is the O= tree out-of-tree modules build against.
	BuildDir string
}

// KernelFromDir reads a directory made by hack/kernel/build.sh.
func KernelFromDir(dir string) (Kernel, error) {
	k := Kernel{
		Image:       filepath.Join(dir, "bzImage"),
		GenInitCPIO: filepath.Join(dir, "build", "usr", "gen_init_cpio"),
		BuildDir:    filepath.Join(dir, "build"),
	}
	for _, p := range []string{k.Image, k.GenInitCPIO} {
		if _, err := os.Stat(p); err != nil {
			return Kernel{}, fmt.Errorf("guest kernel in %s: %w", dir, err)
		}
	}
	return k, nil
}

// File is one extra file packed into the initramfs (a kernel module, a
// fixture).
type File struct {
	// Path inside the guest, absolute.
	Path string
	// Source on the host.
	Source string
	Mode   os.FileMode
}

// Options describe one boot.
type Options struct {
	Kernel Kernel
	// Init is the static binary that runs as /init.
	Init string
	// Args are init's arguments (after the kernel's "--").
	Args []string
	// Cmdline are extra kernel parameters, e.g. a built-in driver's
	// gpio_mockup.gpio_mockup_ranges=-1,32.
	Cmdline []string
	// Env is passed to init through the kernel command line (names
	// without dots; the kernel keeps at most 32).
	Env map[string]string
	// Files are extra files for the initramfs.
	Files []File
	// Timeout bounds the whole boot; the in-guest watchdog is set a
	// little shorter so a hung test still reports.
	Timeout time.Duration
	// KVM uses hardware virtualisation instead of TCG.
	KVM bool
	// Console receives the serial console as it arrives (may be nil).
	Console io.Writer
	// MemoryMB is the guest's RAM (default 512).
	MemoryMB int
	// WorkDir holds the initramfs (default a temporary directory that is
	// removed afterwards).
	WorkDir string
}

// Result is what a boot reported.
type Result struct {
	// Passed and Failed come from the console's final "N passed, M
	// failed" line; Reported is false when that line never came (a
	// crash, a panic in init, a timeout).
	Passed, Failed int
	Reported       bool
	// Console is the whole serial console.
	Console string
	// Elapsed is qemu's wall time, start to exit.
	Elapsed time.Duration
}

var summaryRE = regexp.MustCompile(`(?m)^(\d+) passed, (\d+) failed\r?$`)

// ParseSummary finds the last "N passed, M failed" line of a console.
func ParseSummary(console string) (passed, failed int, ok bool) {
	m := summaryRE.FindAllStringSubmatch(console, -1)
	if len(m) == 0 {
		return 0, 0, false
	}
	last := m[len(m)-1]
	passed, _ = strconv.Atoi(last[1])
	failed, _ = strconv.Atoi(last[2])
	return passed, failed, true
}

// InitramfsSpec is the gen_init_cpio description of the guest's root: the
// directories init mounts on, /dev/console (an initramfs root gets no
// devtmpfs before init runs, and the kernel opens the console for init
// before that), /init and the extra files.
func InitramfsSpec(init string, files []File) string {
	var b strings.Builder
	dirs := map[string]bool{}
	dir := func(d string) {
		for _, p := range parents(d) {
			if !dirs[p] {
				dirs[p] = true
				fmt.Fprintf(&b, "dir %s 0755 0 0\n", p)
			}
		}
	}
	for _, d := range []string{"/dev", "/proc", "/sys", "/tmp", "/run"} {
		dir(d)
	}
	b.WriteString("nod /dev/console 0600 0 0 c 5 1\n")
	fmt.Fprintf(&b, "file /init %s 0755 0 0\n", init)
	for _, f := range files {
		dir(filepath.Dir(f.Path))
		mode := f.Mode
		if mode == 0 {
			mode = 0o644
		}
		fmt.Fprintf(&b, "file %s %s %04o 0 0\n", f.Path, f.Source, mode.Perm())
	}
	return b.String()
}

func parents(d string) []string {
	d = filepath.Clean(d)
	if d == "/" || d == "." {
		return nil
	}
	return append(parents(filepath.Dir(d)), d)
}

// CommandLine is the kernel command line for a boot: the serial console,
// quiet enough that kernel messages rarely split init's lines, an
// immediate reboot (which -no-reboot turns into qemu's exit) on panic, the
// environment, then init's arguments.
func CommandLine(extra []string, env map[string]string, args []string) string {
	parts := append([]string{"console=ttyS0", "loglevel=4", "panic=-1", "reboot=acpi"}, extra...)
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sortStrings(keys)
	for _, k := range keys {
		parts = append(parts, k+"="+env[k])
	}
	if len(args) > 0 {
		parts = append(parts, "--")
		parts = append(parts, args...)
	}
	return strings.Join(parts, " ")
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// QEMUArgs are qemu-system-x86_64's arguments for a boot.
func QEMUArgs(o Options, initramfs string) []string {
	mem := o.MemoryMB
	if mem <= 0 {
		mem = 512
	}
	accel := []string{"-accel", "tcg", "-cpu", "max"}
	if o.KVM {
		accel = []string{"-accel", "kvm", "-cpu", "host"}
	}
	args := append(accel,
		"-m", strconv.Itoa(mem),
		"-smp", "1",
		"-nodefaults", "-no-user-config",
		"-display", "none",
		"-monitor", "none",
		"-serial", "stdio",
		"-no-reboot",
		"-kernel", o.Kernel.Image,
		"-initrd", initramfs,
		"-append", CommandLine(o.Cmdline, o.Env, o.Args),
	)
	return args
}

// Boot packs the initramfs, boots QEMU and waits for it to exit. The error
// is about the rig (qemu missing, timeout); what the tests did is in the
// Result.
func Boot(ctx context.Context, o Options) (Result, error) {
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Minute
	}
	work := o.WorkDir
	if work == "" {
		d, err := os.MkdirTemp("", "kubeblade-guest-")
		if err != nil {
			return Result{}, err
		}
		defer os.RemoveAll(d)
		work = d
	}
	spec := filepath.Join(work, "initramfs.list")
	if err := os.WriteFile(spec, []byte(InitramfsSpec(o.Init, o.Files)), 0o644); err != nil {
		return Result{}, err
	}
	cpio := filepath.Join(work, "initramfs.cpio")
	out, err := os.Create(cpio)
	if err != nil {
		return Result{}, err
	}
	pack := exec.CommandContext(ctx, o.Kernel.GenInitCPIO, spec)
	pack.Stdout = out
	var packErr bytes.Buffer
	pack.Stderr = &packErr
	err = pack.Run()
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return Result{}, fmt.Errorf("gen_init_cpio: %v: %s", err, packErr.String())
	}

	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		return Result{}, fmt.Errorf("qemu-system-x86_64 (Debian package qemu-system-x86): %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, qemu, QEMUArgs(o, cpio)...)
	var console bytes.Buffer
	w := io.Writer(&console)
	if o.Console != nil {
		w = io.MultiWriter(&console, o.Console)
	}
	cmd.Stdout = w
	cmd.Stderr = w
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	runErr := cmd.Run()
	res := Result{Console: console.String(), Elapsed: time.Since(start)}
	res.Passed, res.Failed, res.Reported = ParseSummary(res.Console)
	if ctx.Err() == context.DeadlineExceeded {
		return res, fmt.Errorf("guest did not power off within %s", o.Timeout)
	}
	if runErr != nil && !res.Reported {
		return res, fmt.Errorf("qemu: %w", runErr)
	}
	return res, nil
}

// TestResult is one test's or subtest's outcome as the guest printed it.
type TestResult struct {
	// Name is the full name, subtests with their parents'
	// ("TestKernelB/sub").
	Name string
	// Status is PASS, FAIL or SKIP, or empty when the guest printed no
	// result for the test (it crashed or the watchdog fired during it).
	Status string
	// Output is what the test itself printed (its subtests' lines are
	// theirs): a failure's messages, a skip's reason.
	Output string
}

var (
	// `go test -v` marks whose output follows: === RUN, === NAME (output
	// switched back to a test), === CONT (a parallel test resumed) and
	// === PAUSE.
	markRE = regexp.MustCompile(`^=== (RUN|NAME|CONT|PAUSE) +(\S+)`)
	// Result lines, indented four spaces per level for subtests, which
	// go test -v prints after their top-level test's.
	resultRE = regexp.MustCompile(`^\s*--- (PASS|FAIL|SKIP): (\S+) \(`)
)

// Results reads `go test -v` output for every test and subtest it ran, in
// the order they started, each with its own output lines (kernel messages
// that landed on the console in between included).
func Results(console string) []TestResult {
	var out []*TestResult
	byName := map[string]*TestResult{}
	get := func(name string) *TestResult {
		r := byName[name]
		if r == nil {
			r = &TestResult{Name: name}
			byName[name] = r
			out = append(out, r)
		}
		return r
	}
	var current *TestResult
	sc := bufio.NewScanner(strings.NewReader(console))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		if m := markRE.FindStringSubmatch(line); m != nil {
			current = get(m[2])
			continue
		}
		if m := resultRE.FindStringSubmatch(line); m != nil {
			get(m[2]).Status = m[1]
			continue
		}
		if current != nil && current.Status == "" {
			if current.Output != "" {
				current.Output += "\n"
			}
			current.Output += line
		}
	}
	res := make([]TestResult, len(out))
	for i, r := range out {
		res[i] = *r
	}
	return res
}

// ErrNoKernel says no guest kernel was given.
var ErrNoKernel = errors.New(EnvKernel + " is not set (make hwtest builds the kernel and sets it)")
