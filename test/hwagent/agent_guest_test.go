//go:build guest

// These tests run as the init of the QEMU guest TestGuestAgent boots: the
// shipped agent is /bin/kubeblade-agent, the kubeblade-leds modules are in
// guest.ModuleDir, and the scenario says what machine this is.

package hwagent_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kubeblade/kubeblade/internal/guest"
	"github.com/kubeblade/kubeblade/internal/guest/gpiosim"
	"github.com/kubeblade/kubeblade/internal/guest/guestinit"
	"github.com/kubeblade/kubeblade/internal/guest/scenario"
	"github.com/kubeblade/kubeblade/internal/hardware/linux/gpio"
	"github.com/kubeblade/kubeblade/internal/hardware/linux/sysfs"
	"github.com/kubeblade/kubeblade/internal/testwait"
)

func TestMain(m *testing.M) { guestinit.Main(m) }

// How long the agent gets to do what a test waits for: it samples once a
// second, and TCG on a busy host is slow.
const patience = 30 * time.Second

func current(t *testing.T) scenario.Scenario {
	t.Helper()
	sc, err := scenario.Current()
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// bladeNames are the blade's lines at their offsets, for the x86 guest's
// configfs chips (the arm64 machines' devicetrees name all of theirs).
var bladeNames = map[int]string{12: "GPIO12", 13: "GPIO13", 18: "GPIO18", 20: "GPIO20", 21: "GPIO21", 23: "GPIO23"}

// raspberryPi says whether the scenario's blade is a CM4 or CM5 (the x86
// guest plays a CM4 with a configfs chip).
func raspberryPi(sc scenario.Scenario) bool { return sc.SoC != "rk3588" }

// board is the blade's GPIO chip: the devicetree's, or in the x86 guest a
// configfs chip labelled like a CM4's, which makes that guest a blade.
func board(t *testing.T, sc scenario.Scenario) *gpiosim.Chip {
	t.Helper()
	label := "pinctrl-bcm2711"
	if sc.Board != nil {
		label = sc.Board.Label
	}
	return gpiosim.Board(t, "blade", gpiosim.Bank{Label: label, Lines: 58, Names: bladeNames})
}

// record is one line of the agent's JSON log.
type record map[string]any

func (r record) str(k string) string { s, _ := r[k].(string); return s }

// agent is a running kubeblade-agent.
type agent struct {
	t    *testing.T
	cmd  *exec.Cmd
	dir  string
	mu   sync.Mutex
	recs []record
	text []string
	done chan struct{}
	err  error
}

// config is the agent's config file: the real defaults (backend auto,
// which is linux on a blade) with the standard fan unit (no UART here),
// the gRPC socket in its directory and no metrics listener (the guest has
// no network interface up). extra is appended under hardware.linux.
func config(dir string, extra ...string) string {
	c := fmt.Sprintf("hardware:\n  backend: auto\n  linux:\n    fanUnit: standard\n")
	for _, e := range extra {
		c += "    " + e + "\n"
	}
	return c + fmt.Sprintf("grpc:\n  socketPath: %s/agent.sock\nmetrics:\n  bindAddress: \"0\"\n", dir)
}

// start runs the agent with cfg and waits for its "hardware opened" record.
func start(t *testing.T, extra ...string) (*agent, record) {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "agent-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "agent.yaml"), []byte(config(dir, extra...)), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(agentPath, "--config", filepath.Join(dir, "agent.yaml"), "--state-dir", filepath.Join(dir, "state"), "--log-format", "json")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = os.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	a := &agent{t: t, cmd: cmd, dir: dir, done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var r record
			a.mu.Lock()
			a.text = append(a.text, sc.Text())
			if json.Unmarshal(sc.Bytes(), &r) == nil {
				a.recs = append(a.recs, r)
			}
			a.mu.Unlock()
		}
		a.err = cmd.Wait()
		close(a.done)
	}()
	t.Cleanup(func() {
		if !a.exited() {
			a.cmd.Process.Kill()
			<-a.done
		}
		if t.Failed() {
			a.mu.Lock()
			t.Logf("agent log:\n%s", strings.Join(a.text, "\n"))
			a.mu.Unlock()
		}
	})
	opened := a.wait("the agent to open the hardware", func(r record) bool { return r.str("msg") == "hardware opened" })
	t.Logf("agent: backend %s, soc %s, blade %v, capabilities %v; %s", opened.str("backend"), opened.str("soc"), opened["blade"], opened["capabilities"], opened.str("detail"))
	return a, opened
}

func (a *agent) exited() bool {
	select {
	case <-a.done:
		return true
	default:
		return false
	}
}

// wait waits for a log record matching match, from the start of the log.
func (a *agent) wait(what string, match func(record) bool) record {
	a.t.Helper()
	var found record
	testwait.Eventually(a.t, patience, what, func(context.Context) (bool, string) {
		a.mu.Lock()
		defer a.mu.Unlock()
		for _, r := range a.recs {
			if match(r) {
				found = r
				return true, ""
			}
		}
		if a.exited() {
			return false, fmt.Sprintf("the agent exited (%v)", a.err)
		}
		return false, fmt.Sprintf("%d log lines so far", len(a.text))
	})
	return found
}

// has says whether a log record matches match.
func (a *agent) has(match func(record) bool) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.ContainsFunc(a.recs, match)
}

// signal sends sig and waits for the agent to end.
func (a *agent) signal(sig syscall.Signal) error {
	a.t.Helper()
	if err := a.cmd.Process.Signal(sig); err != nil {
		a.t.Fatal(err)
	}
	select {
	case <-a.done:
	case <-time.After(patience):
		a.t.Fatalf("the agent did not end within %s of %s", patience, sig)
	}
	return a.err
}

func capabilities(r record) []string {
	var out []string
	list, _ := r["capabilities"].([]any)
	for _, c := range list {
		out = append(out, fmt.Sprint(c))
	}
	return out
}

// maskFirmware hides /sys/firmware (and with it /proc/device-tree) under an
// empty read-only tmpfs, as container runtimes mask it.
func maskFirmware(t *testing.T) {
	t.Helper()
	if err := unix.Mount("tmpfs", "/sys/firmware", "tmpfs", unix.MS_RDONLY, ""); err != nil {
		t.Fatalf("masking /sys/firmware: %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount("/sys/firmware", 0); err != nil {
			t.Errorf("unmasking /sys/firmware: %v", err)
		}
	})
}

// TestAgentDetects: the agent reads the machine from the devicetree it
// booted with; with /sys/firmware masked, as in a container, from the GPIO
// chip label, which tells a Raspberry Pi's SoC but not a Rockchip board.
// The x86 guest has no devicetree: the label is all there is.
func TestAgentDetects(t *testing.T) {
	sc := current(t)
	board(t, sc)
	check := func(t *testing.T, opened record, blade bool, soc, detail string) {
		t.Helper()
		if opened["blade"] != blade || opened.str("soc") != soc || !strings.Contains(opened.str("detail"), detail) {
			t.Errorf("hardware opened as blade %v soc %s (%s); want blade %v soc %s, detail with %q",
				opened["blade"], opened.str("soc"), opened.str("detail"), blade, soc, detail)
		}
	}
	if sc.DeviceTree == nil {
		a, opened := start(t)
		check(t, opened, true, "bcm2711", "devicetree hidden; SoC from GPIO chip pinctrl-bcm2711")
		a.signal(syscall.SIGTERM)
		return
	}
	t.Run("devicetree", func(t *testing.T) {
		a, opened := start(t)
		check(t, opened, sc.IsBlade, sc.SoC, sc.DeviceTree.Model)
		if err := a.signal(syscall.SIGTERM); err != nil {
			t.Errorf("the agent's exit after SIGTERM: %v", err)
		}
	})
	t.Run("firmware masked", func(t *testing.T) {
		maskFirmware(t)
		a, opened := start(t)
		if sc.LabelDetectable {
			check(t, opened, true, sc.SoC, "devicetree hidden; SoC from GPIO chip "+sc.Board.Label)
		} else {
			check(t, opened, false, "unknown", "devicetree hidden and no Raspberry Pi GPIO chip (found ")
		}
		a.signal(syscall.SIGTERM)
	})
}

func pwmChipDir(t *testing.T) string {
	t.Helper()
	for _, c := range sysfs.ListPWMChips("/sys") {
		if c.Device.Name == scenario.PWMGPIODevice {
			return filepath.Join("/sys/class/pwm", c.Name)
		}
	}
	t.Fatalf("no pwm-gpio chip %s", scenario.PWMGPIODevice)
	return ""
}

func hwmonDir(t *testing.T, name string) string {
	t.Helper()
	for _, h := range sysfs.ListHwmon("/sys") {
		if h.Name == name {
			return h.Dir
		}
	}
	t.Fatalf("no hwmon %s", name)
	return ""
}

func read(p string) string {
	b, _ := os.ReadFile(p)
	return strings.TrimSpace(string(b))
}

func write(p, v string) error {
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(v)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// pwmState is period, duty_cycle and enable of the chip's channel 0.
func pwmState(chip string) string {
	return strings.Join([]string{read(chip + "/pwm0/period"), read(chip + "/pwm0/duty_cycle"), read(chip + "/pwm0/enable")}, " ")
}

// TestAgentDrivesTheBlade: the agent claims the blade's lines by name with
// their biases, turns a PoE change and a button press into its events, and
// drives the fan — at 100 %, since virt has no thermal sensor and an agent
// that cannot read the temperature errs cool — on the GPIO line, the
// devicetree's pwm-gpio chip (the Talos CM5 path) or the Radxa CM5's
// pwm-fan. SIGTERM is its safe exit: fan at 100 %, exit status 0.
func TestAgentDrivesTheBlade(t *testing.T) {
	sc := current(t)
	if !raspberryPi(sc) {
		a, opened := start(t)
		if got := capabilities(opened); !slices.Equal(got, []string{"fan"}) {
			t.Errorf("capabilities %v, want [fan]", got)
		}
		hw := hwmonDir(t, sc.FanHwmon)
		testwait.Eventually(t, patience, "pwm1 at 255", func(context.Context) (bool, string) {
			v := read(hw + "/pwm1")
			return v == "255", "pwm1 " + v
		})
		if err := a.signal(syscall.SIGTERM); err != nil {
			t.Errorf("exit after SIGTERM: %v", err)
		}
		if v := read(hw + "/pwm1"); v != "255" {
			t.Errorf("pwm1 after the safe exit %s, want 255", v)
		}
		return
	}
	sim := board(t, sc)
	var extra []string
	pwm := ""
	if sc.DeviceTree != nil {
		extra = append(extra, "pwmChip: "+scenario.PWMGPIODevice)
		pwm = pwmChipDir(t)
	}
	a, opened := start(t, extra...)
	if got, want := capabilities(opened), []string{"button", "fan", "poe-detect", "stealth", "tach"}; !slices.Equal(got, want) {
		t.Fatalf("capabilities %v, want %v (%s)", got, want, opened.str("detail"))
	}
	c, err := gpio.CDev{}.Open(sim.DevPath())
	if err != nil {
		t.Fatal(err)
	}
	held := map[int]string{13: "kubeblade-tach", 20: "kubeblade-button", 21: "kubeblade-stealth", 23: "kubeblade-poe"}
	if pwm == "" {
		held[12] = "kubeblade-fan"
	}
	for off, want := range held {
		if li, err := c.LineInfo(off); err != nil || !li.Used || li.Consumer != want {
			t.Errorf("line %d: %+v, %v; want held by %s", off, li, err, want)
		}
	}
	c.Close()
	for off, want := range map[int]string{20: "pull-up", 23: "pull-down", 13: "pull-up"} {
		if got, _ := sim.Pull(off); got != want {
			t.Errorf("line %d pull %s, want %s", off, got, want)
		}
	}

	if pwm != "" {
		testwait.Eventually(t, patience, "the pwm-gpio fan at 100 %", func(context.Context) (bool, string) {
			s := pwmState(pwm)
			return s == "40000 40000 1", s
		})
	} else if v, _ := sim.Value(12); v != 1 {
		t.Errorf("GPIO12 = %d, want 1 (the fan on)", v)
	}

	// The agent reads PoE detect once a second and reports a change from
	// what it read before; its first reading may come after any one
	// change, so the level is turned over, about as often as it reads,
	// until it reports one.
	up := false
	testwait.EventuallyEvery(t, patience, 700*time.Millisecond, "a PowerSourceChanged event", func(context.Context) (bool, string) {
		if a.has(func(r record) bool { return r.str("reason") == "PowerSourceChanged" }) {
			return true, ""
		}
		up = !up
		sim.SetPull(23, up)
		return false, fmt.Sprintf("GPIO23 pulled up: %v", up)
	})
	// A press as a person makes it: down, held 300 ms, up.
	sim.SetPull(20, false)
	time.Sleep(300 * time.Millisecond)
	sim.SetPull(20, true)
	a.wait("an IdentifyStarted event from the button", func(r record) bool { return r.str("reason") == "IdentifyStarted" })

	if err := a.signal(syscall.SIGTERM); err != nil {
		t.Errorf("exit after SIGTERM: %v", err)
	}
	a.wait("the safe exit", func(r record) bool { return strings.HasPrefix(r.str("msg"), "safe exit") })
	if pwm != "" {
		if s := pwmState(pwm); s != "40000 40000 1" {
			t.Errorf("PWM after the safe exit: %s, want 40000 40000 1", s)
		}
		if err := write(pwm+"/unexport", "0"); err != nil {
			t.Error(err)
		}
	} else {
		pull, _ := sim.Pull(12)
		v, _ := sim.Value(12)
		if pull != "pull-up" || v != 1 {
			t.Errorf("GPIO12 after the safe exit: %s, %d; want pull-up, 1", pull, v)
		}
	}
}

// TestAgentKilled: SIGKILL (the OOM killer; the kubelet after the grace
// period) runs nothing of the agent: the kernel releases its lines as they
// are. The fan must stay on: the GPIO line was requested with a pull-up, so
// the released pin reads high; a sysfs PWM channel stays exported and
// running; the Radxa's pwm-fan keeps pwm1.
func TestAgentKilled(t *testing.T) {
	sc := current(t)
	views := []string{"gpio"}
	if sc.DeviceTree != nil {
		views = append(views, "pwm-gpio")
	}
	if !raspberryPi(sc) {
		views = []string{"hwmon"}
	}
	for _, view := range views {
		t.Run(view, func(t *testing.T) {
			var sim *gpiosim.Chip
			if raspberryPi(sc) {
				sim = board(t, sc)
			}
			var extra []string
			pwm, hw := "", ""
			switch view {
			case "pwm-gpio":
				extra = append(extra, "pwmChip: "+scenario.PWMGPIODevice)
				pwm = pwmChipDir(t)
			case "hwmon":
				hw = hwmonDir(t, sc.FanHwmon)
			}
			a, _ := start(t, extra...)
			a.wait("the agent running", func(r record) bool { return r.str("msg") == "kubeblade agent running" })
			switch view {
			case "gpio":
				if v, _ := sim.Value(12); v != 1 {
					t.Fatalf("GPIO12 = %d before the kill", v)
				}
			case "pwm-gpio":
				testwait.Eventually(t, patience, "the PWM at 100 %", func(context.Context) (bool, string) {
					s := pwmState(pwm)
					return s == "40000 40000 1", s
				})
			}
			err := a.signal(syscall.SIGKILL)
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("the agent ended with %v, not by SIGKILL", err)
			}
			switch view {
			case "gpio":
				pull, _ := sim.Pull(12)
				v, _ := sim.Value(12)
				if pull != "pull-up" || v != 1 {
					t.Fatalf("GPIO12 after SIGKILL: %s, %d; want pull-up, 1 (the fan on)", pull, v)
				}
			case "pwm-gpio":
				if s := pwmState(pwm); s != "40000 40000 1" {
					t.Fatalf("PWM after SIGKILL: %s; want still exported, 40000 40000 1", s)
				}
				gpiosim.WaitHeldHigh(t, scenario.PWMGPIODevice, 10*time.Second)
				if err := write(pwm+"/unexport", "0"); err != nil {
					t.Fatal(err)
				}
			case "hwmon":
				if v := read(hw + "/pwm1"); v != "255" {
					t.Fatalf("pwm1 after SIGKILL %s, want 255", v)
				}
			}
		})
	}
}

// insmod loads a module of guest.ModuleDir with parameters.
func insmod(t *testing.T, name, params string) {
	t.Helper()
	f, err := os.Open(filepath.Join(guest.ModuleDir, name+".ko"))
	if err != nil {
		if name == "led-class-multicolor" && errors.Is(err, os.ErrNotExist) {
			return // built into the kernel
		}
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.FinitModule(int(f.Fd()), params, 0); err != nil && !errors.Is(err, unix.EEXIST) {
		t.Fatalf("loading %s %q: %v", name, params, err)
	}
}

// TestAgentLEDs: with kubeblade-leds loaded on the scenario's simulated
// SoC, the agent finds the LEDs in the LED class and shows its colours on
// them: the idle colour on the edge LED, identify after a press, dark
// after its safe exit.
func TestAgentLEDs(t *testing.T) {
	sc := current(t)
	if len(sc.ModuleSims) == 0 {
		t.Logf("scenario %s: kubeblade-leds has no backend for this SoC", sc.Name)
		return
	}
	sim := board(t, sc)
	insmod(t, "led-class-multicolor", "")
	insmod(t, "kubeblade-leds", "backend="+sc.ModuleSims[0])
	defer func() {
		// The agent leaves the module's fan channel exported; an
		// exported channel holds the module.
		for _, c := range sysfs.ListPWMChips("/sys") {
			if c.Device.Driver == "kubeblade-leds" {
				write(filepath.Join("/sys/class/pwm", c.Name, "unexport"), "0")
			}
		}
		if err := unix.DeleteModule("kubeblade_leds", unix.O_NONBLOCK); err != nil {
			t.Errorf("unloading kubeblade-leds: %v", err)
		}
	}()
	const edge = "/sys/class/leds/kubeblade:rgb:edge"
	a, opened := start(t)
	if !slices.Contains(capabilities(opened), "leds") || !strings.Contains(opened.str("detail"), "leds: LED class kubeblade:rgb:top, kubeblade:rgb:edge") {
		t.Fatalf("capabilities %v, detail %s", capabilities(opened), opened.str("detail"))
	}
	shows := func(what, intensity string, lit bool) {
		t.Helper()
		testwait.Eventually(t, patience, "the edge LED "+what, func(context.Context) (bool, string) {
			m, b := read(edge+"/multi_intensity"), read(edge+"/brightness")
			return m == intensity && (b != "0") == lit, fmt.Sprintf("multi_intensity %s, brightness %s", m, b)
		})
	}
	shows("idle (#001000)", "0 16 0", true)
	sim.SetPull(20, false)
	time.Sleep(300 * time.Millisecond)
	sim.SetPull(20, true)
	a.wait("an IdentifyStarted event", func(r record) bool { return r.str("reason") == "IdentifyStarted" })
	shows("blinking identify (#100010)", "16 0 16", true)
	if err := a.signal(syscall.SIGTERM); err != nil {
		t.Errorf("exit after SIGTERM: %v", err)
	}
	if b := read(edge + "/brightness"); b != "0" {
		t.Errorf("edge LED brightness %s after the safe exit, want 0 (dark)", b)
	}
}
