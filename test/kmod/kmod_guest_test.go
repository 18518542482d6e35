//go:build guest

// These tests run as the init of the QEMU guest TestGuestKmod boots: the
// modules are in /lib/modules/kubeblade, debugfs and configfs are mounted.

package kmod_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	agentconfigv1 "github.com/kubeblade/kubeblade/api/agentconfig/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/guest"
	"github.com/kubeblade/kubeblade/internal/guest/gpiosim"
	"github.com/kubeblade/kubeblade/internal/guest/guestinit"
	"github.com/kubeblade/kubeblade/internal/guest/scenario"
	"github.com/kubeblade/kubeblade/internal/hardware"
	"github.com/kubeblade/kubeblade/internal/hardware/linux"
	"github.com/kubeblade/kubeblade/internal/hardware/ws2812"
	"github.com/kubeblade/kubeblade/internal/testreq"
	"github.com/kubeblade/kubeblade/internal/testwait"
)

func TestMain(m *testing.M) { guestinit.Main(m) }

const (
	modDir    = guest.ModuleDir
	events    = "/sys/kernel/debug/kubeblade-leds/events"
	kmemleak  = "/sys/kernel/debug/kmemleak"
	ledTop    = "/sys/class/leds/kubeblade:rgb:top"
	ledEdge   = "/sys/class/leds/kubeblade:rgb:edge"
	waitFrame = 10 * time.Second
)

// insmod loads a module file with parameters, as insmod(8) does.
func insmod(name, params string) error {
	f, err := os.Open(filepath.Join(modDir, name+".ko"))
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.FinitModule(int(f.Fd()), params, 0); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("loading %s %q: %w", name, params, err)
	}
	return nil
}

func rmmod(t *testing.T, name string) {
	t.Helper()
	if err := unix.DeleteModule(name, unix.O_NONBLOCK); err != nil {
		t.Fatalf("unloading %s: %v", name, err)
	}
}

// loadClass loads the multicolor LED class when the kernel has it as a
// module (then modinfo's depends names it; modprobe would load it first).
func loadClass(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(modDir, "led-class-multicolor.ko")); err != nil {
		return
	}
	if err := insmod("led-class-multicolor", ""); err != nil {
		t.Fatal(err)
	}
}

// kmsg returns the kernel log records from /dev/kmsg, messages only. It
// reads the descriptor with plain system calls: through an os.File, Go's
// poller would wait for the next record instead of returning EAGAIN at the
// end of the log.
func kmsg(t *testing.T) []string {
	t.Helper()
	fd, err := unix.Open("/dev/kmsg", unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	var out []string
	buf := make([]byte, 8192)
	for {
		n, err := unix.Read(fd, buf)
		if err != nil {
			if errors.Is(err, unix.EAGAIN) {
				return out
			}
			if errors.Is(err, unix.EPIPE) { // overwritten records: go on
				continue
			}
			t.Fatal(err)
		}
		rec := string(buf[:n])
		if i := strings.IndexByte(rec, ';'); i >= 0 {
			rec = rec[i+1:]
		}
		out = append(out, strings.TrimRight(rec, "\n"))
	}
}

var (
	ktapCase  = regexp.MustCompile(`^\s+(ok|not ok) \d+ (\S+)`)
	ktapTotal = regexp.MustCompile(`# kubeblade-leds: pass:(\d+) fail:(\d+) skip:(\d+) total:(\d+)`)
)

// TestKUnit loads the KUnit module: its suite runs at load and writes
// KTAP to the kernel log.
func TestKUnit(t *testing.T) {
	loadClass(t)
	if err := insmod("kubeblade-leds-test", ""); err != nil {
		t.Fatal(err)
	}
	defer rmmod(t, "kubeblade_leds_test")
	var cases []string
	var total []string
	for _, line := range kmsg(t) {
		if m := ktapCase.FindStringSubmatch(line); m != nil && strings.HasPrefix(m[2], "kbl_test_") {
			cases = append(cases, m[1]+" "+m[2])
			if m[1] != "ok" {
				t.Errorf("KUnit case failed: %s", line)
			}
		}
		if m := ktapTotal.FindStringSubmatch(line); m != nil {
			total = m
		}
	}
	if total == nil {
		t.Fatalf("no KTAP totals for the kubeblade-leds suite in the kernel log (cases seen: %v)", cases)
	}
	pass, _ := strconv.Atoi(total[1])
	t.Logf("KUnit kubeblade-leds: %s (%d cases)", total[0], len(cases))
	if total[2] != "0" || pass == 0 || len(cases) != pass {
		t.Fatalf("KUnit: %s, cases %v", total[0], cases)
	}
}

// frame is one frame the simulated ops received.
type frame struct {
	seq   int
	rate  uint64
	rng   int
	words []uint32
}

type fanEvent struct {
	seq                  int
	period, duty, enable int
}

func readEvents(t *testing.T) ([]frame, []fanEvent) {
	t.Helper()
	b, err := os.ReadFile(events)
	if err != nil {
		t.Fatal(err)
	}
	var frames []frame
	var fans []fanEvent
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		seq, _ := strconv.Atoi(f[1])
		kv := map[string]string{}
		var words []uint32
		for _, x := range f[2:] {
			if k, v, ok := strings.Cut(x, "="); ok {
				kv[k] = v
			} else if w, err := strconv.ParseUint(x, 16, 32); err == nil {
				words = append(words, uint32(w))
			}
		}
		num := func(k string) int { n, _ := strconv.Atoi(kv[k]); return n }
		switch f[0] {
		case "frame":
			rate, _ := strconv.ParseUint(kv["rate"], 10, 64)
			if num("words") != len(words) {
				t.Fatalf("frame line %q: %d words listed, %d given", line, num("words"), len(words))
			}
			frames = append(frames, frame{seq: seq, rate: rate, rng: num("range"), words: words})
		case "fan":
			fans = append(fans, fanEvent{seq: seq, period: num("period"), duty: num("duty"), enable: num("enabled")})
		}
	}
	return frames, fans
}

// decode reads a frame as the LEDs would. The range is the bits of each
// word sent; on RP1 it counts one more (the driver's range_extra_tick),
// and RANGE 31 of 32-bit words means all 32.
func decode(f frame) ([]byte, error) {
	bits := f.rng
	if bits == 31 {
		bits = 32
	}
	return ws2812.Decode(ws2812.Serializer{ClockHz: f.rate, WordBits: bits}, f.words)
}

func read(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
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

// waitColours waits for the newest frame to show top and edge.
func waitColours(t *testing.T, top, edge hardware.Color) frame {
	t.Helper()
	want := []byte{top.R, top.G, top.B, edge.R, edge.G, edge.B}
	var last frame
	testwait.Eventually(t, waitFrame, fmt.Sprintf("a frame showing %s and %s", top, edge), func(context.Context) (bool, string) {
		frames, _ := readEvents(t)
		if len(frames) == 0 {
			return false, "no frame yet"
		}
		last = frames[len(frames)-1]
		got, err := decode(last)
		if err != nil {
			return false, fmt.Sprintf("frame %d: %v", last.seq, err)
		}
		return cmp.Equal(want, got), fmt.Sprintf("frame %d reads % x", last.seq, got)
	})
	return last
}

var bladeNames = map[int]string{12: "GPIO12", 13: "GPIO13", 18: "GPIO18", 20: "GPIO20", 21: "GPIO21", 23: "GPIO23"}

func current(t *testing.T) scenario.Scenario {
	t.Helper()
	sc, err := scenario.Current()
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// TestModuleBadParameters: a load that cannot work fails with a reason and
// leaves nothing behind. backend=auto picks the SoC from the machine's
// compatible (of_machine_is_compatible): on a CM4 or CM5 devicetree it
// tries that SoC's hardware and, virt having no PWM0 block or RP1, refuses
// with the driver's reason in the kernel log; elsewhere (the x86 guest, a
// Radxa CM5) it is no Compute Module.
func TestModuleBadParameters(t *testing.T) {
	sc := current(t)
	loadClass(t)
	for params, want := range map[string]error{
		"backend=nope":                unix.EINVAL,
		"backend=auto":                unix.ENODEV,
		"backend=sim-bcm2711 order=x": unix.EINVAL,
	} {
		err := insmod("kubeblade-leds", params)
		if !errors.Is(err, want) {
			t.Errorf("%q: %v, want %v", params, err, want)
		}
		if _, err := os.Stat("/sys/module/kubeblade_leds"); err == nil {
			t.Fatalf("%q: the module stayed loaded", params)
		}
	}
	var said []string
	for _, line := range kmsg(t) {
		if strings.Contains(line, "kubeblade-leds") {
			said = append(said, line)
		}
	}
	found := false
	for _, line := range said {
		found = found || strings.Contains(line, sc.AutoRefusal)
	}
	if !found {
		t.Errorf("backend=auto on %s: no kernel log line with %q; the driver said:\n%s", sc.Name, sc.AutoRefusal, strings.Join(said, "\n"))
	}
	if sc.SoC == "bcm2711" || sc.SoC == "bcm2712" {
		// The SoC it picked, named in its refusal.
		soc := false
		for _, line := range said {
			soc = soc || strings.Contains(line, sc.SoC+": hardware not available")
		}
		if !soc {
			t.Errorf("backend=auto did not try %s:\n%s", sc.SoC, strings.Join(said, "\n"))
		}
	}
}

// TestModule loads the module on each simulated SoC and drives it with the
// agent's linux backend.
func TestModule(t *testing.T) {
	testreq.Need(t, gpiosim.Available() == nil, "%v", gpiosim.Available())
	sc := current(t)
	loadClass(t)
	_, leakCheck := os.Stat(kmemleak)
	if leakCheck == nil {
		if err := write(kmemleak, "clear"); err != nil {
			t.Fatal(err)
		}
	}
	sims := map[string]struct {
		label string
		// the fan at 40 %: 16 µs of 40 µs in clock ticks
		period, duty int
		shared       bool
	}{
		"sim-bcm2711": {label: linux.LabelBCM2711, period: 98, duty: 39, shared: true},
		"sim-bcm2712": {label: linux.LabelRP1, period: 2000, duty: 800},
	}
	if len(sc.ModuleSims) == 0 {
		// The Radxa CM5: no SoC of the driver's to simulate.
		t.Logf("scenario %s: the driver has no backend for this SoC", sc.Name)
	}
	for _, backend := range sc.ModuleSims {
		tc := sims[backend]
		t.Run(backend, func(t *testing.T) {
			// A GPIO chip labelled and named like the SoC's makes this
			// guest a blade to the linux backend (on the arm64 machines,
			// the devicetree's).
			gpiosim.Board(t, "blade", gpiosim.Bank{Label: tc.label, Lines: 54, Names: bladeNames})
			if err := insmod("kubeblade-leds", "backend="+backend); err != nil {
				t.Fatal(err)
			}
			loaded := true
			defer func() {
				if loaded {
					rmmod(t, "kubeblade_leds")
				}
			}()
			for _, led := range []string{ledTop, ledEdge} {
				if got := read(t, led+"/multi_index"); got != "red green blue" {
					t.Fatalf("%s/multi_index %q", led, got)
				}
				if got := read(t, led+"/max_brightness"); got != "255" {
					t.Fatalf("%s/max_brightness %q", led, got)
				}
			}
			// The first frame is dark: a known state after power-up.
			waitColours(t, hardware.Color{}, hardware.Color{})

			b, err := linux.Open(t.Context(), linux.Options{Config: agentconfigv1.LinuxHardwareConfig{FanUnit: "standard"}})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			caps, info := b.Capabilities(), b.Info()
			if !caps.Has(hardware.CapLEDs) || !caps.Has(hardware.CapFan) {
				t.Fatalf("capabilities %v; detail %q", caps.List(), info.Detail)
			}
			for _, want := range []string{"leds: LED class kubeblade:rgb:top, kubeblade:rgb:edge", "kubeblade LED driver kubeblade-leds"} {
				if !strings.Contains(info.Detail, want) {
					t.Errorf("detail %q lacks %q", info.Detail, want)
				}
			}

			top, edge := hardware.Color{R: 0xff, G: 0x80}, hardware.Color{G: 0x10, B: 0xfe}
			if err := b.SetLED(hardware.LEDTop, top); err != nil {
				t.Fatal(err)
			}
			if err := b.SetLED(hardware.LEDEdge, edge); err != nil {
				t.Fatal(err)
			}
			f := waitColours(t, top, edge)
			t.Logf("frame %d: %d words of %d bits at %d Hz decode to %s, %s", f.seq, len(f.words), f.rng, f.rate, top, edge)

			// A dim colour reaches the LEDs as it is: no gamma, not dark.
			dim := hardware.Color{R: 1, G: 2, B: 3}
			if err := b.SetLED(hardware.LEDTop, dim); err != nil {
				t.Fatal(err)
			}
			waitColours(t, dim, edge)

			if err := b.SetFanPercent(40); err != nil {
				t.Fatal(err)
			}
			_, fans := readEvents(t)
			if len(fans) == 0 || fans[len(fans)-1] != (fanEvent{seq: fans[len(fans)-1].seq, period: tc.period, duty: tc.duty, enable: 1}) {
				t.Fatalf("fan events %+v, want the last at period %d duty %d enabled", fans, tc.period, tc.duty)
			}

			// BCM2711: the fan shares the LEDs' channel and gets its duty
			// back right after every frame.
			if err := write(events, "clear"); err != nil {
				t.Fatal(err)
			}
			if err := b.SetLED(hardware.LEDEdge, hardware.Color{B: 0x40}); err != nil {
				t.Fatal(err)
			}
			last := waitColours(t, dim, hardware.Color{B: 0x40})
			if tc.shared {
				testwait.Eventually(t, waitFrame, "the fan's duty restored after the frame", func(context.Context) (bool, string) {
					_, fans := readEvents(t)
					for _, e := range fans {
						if e.seq == last.seq+1 && e.period == tc.period && e.duty == tc.duty && e.enable == 1 {
							return true, ""
						}
					}
					return false, fmt.Sprintf("frame %d, fan events %+v", last.seq, fans)
				})
			} else if _, fans := readEvents(t); len(fans) != 0 {
				// RP1: separate channels, frames leave the fan alone.
				t.Errorf("fan set by a frame on separate channels: %+v", fans)
			}

			// Bad input through sysfs: refused by the LED class, the
			// colour stays.
			if err := write(ledTop+"/multi_intensity", "1 2"); err == nil {
				t.Error("two intensities for three channels accepted")
			}
			if err := write(ledTop+"/brightness", "bright"); err == nil {
				t.Error("a non-number brightness accepted")
			}
			if got := read(t, ledTop+"/multi_intensity"); got != "1 2 3" {
				t.Errorf("multi_intensity %q after refused writes, want 1 2 3", got)
			}

			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			// The agent leaves the fan channel exported at 100 % when it
			// stops (the kernel keeps it so); an exported channel holds
			// the module, so it is unexported before unloading.
			chip := ourPWMChip(t)
			if err := write(chip+"/unexport", "0"); err != nil {
				t.Fatal(err)
			}
			rmmod(t, "kubeblade_leds")
			loaded = false
			for _, gone := range []string{ledTop, ledEdge, "/sys/kernel/debug/kubeblade-leds", "/sys/devices/platform/kubeblade-leds", "/sys/module/kubeblade_leds"} {
				if _, err := os.Stat(gone); err == nil {
					t.Errorf("%s still there after unloading", gone)
				}
			}
		})
	}

	for _, line := range kmsg(t) {
		if strings.Contains(line, "WARNING:") || strings.Contains(line, "BUG:") || strings.Contains(line, "possible circular locking") {
			t.Errorf("kernel log: %s", line)
		}
	}
	testreq.Need(t, leakCheck == nil, "kmemleak (CONFIG_DEBUG_KMEMLEAK) not in this kernel: %v", leakCheck)
	// kmemleak reports an object only once it is older than its minimum
	// age (5 s, mm/kmemleak.c MSECS_MIN_AGE): nothing to poll for, so
	// wait that long once, then scan.
	time.Sleep(6 * time.Second)
	for i := 0; i < 2; i++ {
		if err := write(kmemleak, "scan"); err != nil {
			t.Fatal(err)
		}
	}
	if leaks := read(t, kmemleak); leaks != "" {
		t.Errorf("kmemleak after loading and unloading the module twice:\n%s", leaks)
	}
}

// ourPWMChip is the sysfs directory of the module's PWM chip.
func ourPWMChip(t *testing.T) string {
	t.Helper()
	chips, _ := filepath.Glob("/sys/class/pwm/pwmchip*")
	for _, c := range chips {
		if dev, err := filepath.EvalSymlinks(c + "/device"); err == nil && filepath.Base(dev) == "kubeblade-leds" {
			return c
		}
	}
	t.Fatalf("no PWM chip of kubeblade-leds among %v", chips)
	return ""
}
