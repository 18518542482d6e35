// Package guest boots a real Linux kernel in QEMU with a Go test binary as
// its init, so code that talks to kernel interfaces (GPIO character device,
// gpio-sim, sysfs PWM, LED class, the devicetree) is tested against the
// kernel itself rather than against fixtures.
//
// The host side (this package) compiles a package's tests with the `guest`
// build tag for the kernel's architecture, packs the static binary into an
// initramfs made by the kernel's own usr/gen_init_cpio, boots QEMU (TCG; KVM
// only when asked for, as this machine kind's /dev/kvm cannot run a Linux
// guest) once per scenario of that architecture (package scenario: the x86_64
// guest without a devicetree, or QEMU's arm64 virt board with a Compute
// Blade's devicetree made from virt's own with dtc), keeps the serial console
// in a log file and reads the result from the console's final
// "N passed, M failed" line. The guest side is package guestinit; the kernel
// comes from hack/kernel/build.sh (make hwtest, make hwtest-arm64).
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

	"github.com/kubeblade/kubeblade/internal/guest/scenario"
)

// Environment variables the rig reads.
const (
	// EnvKernel names the directory hack/kernel/build.sh printed: it holds
	// the kernel (bzImage or Image), build/usr/gen_init_cpio and the
	// inputs file naming its architecture.
	EnvKernel = "KUBEBLADE_GUEST_KERNEL"
	// EnvScenarios, when set, keeps only the scenarios it names
	// (comma-separated, e.g. cm5), to debug one machine.
	EnvScenarios = "KUBEBLADE_GUEST_SCENARIOS"
	// EnvKVM, set to 1, boots with KVM instead of TCG emulation. Only for
	// machines with real virtualisation (this kind's kvm_pvm is not).
	EnvKVM = "KUBEBLADE_GUEST_KVM"
	// EnvLogDir is where console logs are kept (default: a directory
	// under os.TempDir()).
	EnvLogDir = "KUBEBLADE_GUEST_LOGDIR"
	// EnvWatchdog carries the in-guest watchdog to guestinit.
	EnvWatchdog = "KUBEBLADE_GUEST_WATCHDOG"
	// EnvAgent names the kubeblade-agent binary for the guest's
	// architecture, read out of the image's manifest for that platform
	// (make hwtest and hwtest-arm64 extract it with deploytool image-file).
	EnvAgent = "KUBEBLADE_GUEST_AGENT"
	// EnvSuite, set to 1 by make hwtest, marks the suite in-guest tests
	// belong to: elsewhere under make test they skip, as that step runs
	// them.
	EnvSuite = "KUBEBLADE_HWTEST"
)

// Kernel is a built guest kernel.
type Kernel struct {
	// Machine is how QEMU runs the kernel's architecture.
	Machine Machine
	// Image is the bootable kernel (bzImage, Image).
	Image string
	// GenInitCPIO is the kernel's initramfs packer.
	GenInitCPIO string
	// BuildDir is the O= tree out-of-tree modules build against.
	BuildDir string
}

// Machine is how one architecture's guest is emulated and built for.
type Machine struct {
	// Arch is the kernel's (and scenario's) architecture name.
	Arch string
	// GOARCH builds the guest's init and test binaries.
	GOARCH string
	// QEMU is the emulator binary; QEMUPackage the Debian package that
	// has it.
	QEMU, QEMUPackage string
	// Args select the emulated machine and CPU.
	Args []string
	// Image is the kernel file hack/kernel/build.sh leaves.
	Image string
	// Cmdline are the architecture's own kernel parameters: the serial
	// console, and how power-off ends QEMU.
	Cmdline []string
	// KernelMake are the make variables out-of-tree modules build with.
	KernelMake []string
}

// Machines are the guests' architectures.
var Machines = map[string]Machine{
	scenario.ArchX86: {
		Arch: scenario.ArchX86, GOARCH: "amd64",
		QEMU: "qemu-system-x86_64", QEMUPackage: "qemu-system-x86",
		Image: "bzImage",
		// ACPI reboot, which -no-reboot turns into QEMU's exit.
		Cmdline: []string{"console=ttyS0", "reboot=acpi"},
	},
	scenario.ArchARM: {
		Arch: scenario.ArchARM, GOARCH: "arm64",
		QEMU: "qemu-system-aarch64", QEMUPackage: "qemu-system-arm",
		// The CM4's own core; it also spares TCG the pointer
		// authentication of -cpu max, which it emulates slowly.
		Args:  []string{"-machine", "virt", "-cpu", "cortex-a72"},
		Image: "Image",
		// PSCI power-off ends QEMU.
		Cmdline:    []string{"console=ttyAMA0"},
		KernelMake: []string{"ARCH=arm64", "CROSS_COMPILE=aarch64-linux-gnu-"},
	},
}

// KernelFromDir reads a directory made by hack/kernel/build.sh: its inputs
// file names the architecture (x86_64 when it does not).
func KernelFromDir(dir string) (Kernel, error) {
	arch := scenario.ArchX86
	if in, err := os.ReadFile(filepath.Join(dir, "inputs")); err == nil {
		for _, line := range strings.Split(string(in), "\n") {
			if a, ok := strings.CutPrefix(line, "arch "); ok {
				arch = strings.TrimSpace(a)
			}
		}
	}
	m, ok := Machines[arch]
	if !ok {
		return Kernel{}, fmt.Errorf("guest kernel in %s: unknown architecture %q", dir, arch)
	}
	k := Kernel{
		Machine:     m,
		Image:       filepath.Join(dir, m.Image),
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
	// DeviceTree, when not empty, is devicetree source added to the
	// machine's own devicetree (scenario.Source); the guest boots with
	// the result. Only machines that have one (arm64 virt).
	DeviceTree string
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

// CommandLine is the kernel command line for a boot: the machine's own
// parameters (serial console, power-off), quiet enough that kernel messages
// rarely split init's lines, an immediate reboot (which -no-reboot turns
// into qemu's exit) on panic, the environment, then init's arguments.
func CommandLine(m Machine, extra []string, env map[string]string, args []string) string {
	parts := append(append([]string(nil), m.Cmdline...), "loglevel=4", "panic=-1")
	parts = append(parts, extra...)
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

// machineArgs are QEMU's arguments for the emulated machine alone: the
// ones a devicetree dumped with -machine dumpdtb must be made with too, as
// QEMU builds it from them (CPU, memory, core count).
func machineArgs(o Options) []string {
	mem := o.MemoryMB
	if mem <= 0 {
		mem = 512
	}
	m := o.Kernel.Machine
	args := append([]string(nil), m.Args...)
	switch {
	case o.KVM:
		args = append(args, "-accel", "kvm", "-cpu", "host")
	case len(m.Args) == 0:
		args = append(args, "-accel", "tcg", "-cpu", "max")
	default:
		args = append(args, "-accel", "tcg")
	}
	return append(args,
		"-m", strconv.Itoa(mem),
		"-smp", "1",
		"-nodefaults", "-no-user-config",
		"-display", "none",
	)
}

// QEMUArgs are the emulator's arguments for a boot; dtb is the devicetree
// blob to boot with ("" for the machine's own).
func QEMUArgs(o Options, initramfs, dtb string) []string {
	args := append(machineArgs(o),
		"-monitor", "none",
		"-serial", "stdio",
		"-no-reboot",
		"-kernel", o.Kernel.Image,
		"-initrd", initramfs,
		"-append", CommandLine(o.Kernel.Machine, o.Cmdline, o.Env, o.Args),
	)
	if dtb != "" {
		args = append(args, "-dtb", dtb)
	}
	return args
}

// DeviceTreeBlob makes the devicetree a boot with o uses: QEMU dumps the
// machine's own (-machine dumpdtb, with the very arguments of the boot),
// dtc decompiles it, o.DeviceTree is appended (a later definition of a
// node or property overrides an earlier one) and dtc compiles the result
// into work/guest.dtb. QEMU keeps such a blob's root compatible and model;
// it only fills in /chosen and /memory.
func DeviceTreeBlob(ctx context.Context, o Options, work string) (string, error) {
	qemu, err := exec.LookPath(o.Kernel.Machine.QEMU)
	if err != nil {
		return "", fmt.Errorf("%s (Debian package %s): %w", o.Kernel.Machine.QEMU, o.Kernel.Machine.QEMUPackage, err)
	}
	dtc, err := exec.LookPath("dtc")
	if err != nil {
		return "", fmt.Errorf("dtc (Debian package device-tree-compiler): %w", err)
	}
	base := filepath.Join(work, "machine.dtb")
	run := func(name string, args ...string) error {
		out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
		}
		return nil
	}
	if err := run(qemu, append(machineArgs(o), "-machine", "dumpdtb="+base)...); err != nil {
		return "", err
	}
	src := filepath.Join(work, "guest.dts")
	if err := run(dtc, "-q", "-I", "dtb", "-O", "dts", "-o", src, base); err != nil {
		return "", err
	}
	f, err := os.OpenFile(src, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return "", err
	}
	_, err = f.WriteString(o.DeviceTree)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", err
	}
	dtb := filepath.Join(work, "guest.dtb")
	if err := run(dtc, "-q", "-I", "dts", "-O", "dtb", "-o", dtb, src); err != nil {
		return "", err
	}
	return dtb, nil
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

	m := o.Kernel.Machine
	qemu, err := exec.LookPath(m.QEMU)
	if err != nil {
		return Result{}, fmt.Errorf("%s (Debian package %s): %w", m.QEMU, m.QEMUPackage, err)
	}
	dtb := ""
	if o.DeviceTree != "" {
		if dtb, err = DeviceTreeBlob(ctx, o, work); err != nil {
			return Result{}, fmt.Errorf("devicetree: %w", err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, qemu, QEMUArgs(o, cpio, dtb)...)
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
