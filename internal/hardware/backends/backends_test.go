package backends

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	agentconfigv1 "github.com/kubeblade/kubeblade/api/agentconfig/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/hardware"
	"github.com/kubeblade/kubeblade/internal/hardware/bcm2711"
	"github.com/kubeblade/kubeblade/internal/hardware/bcm2711/bcm2711test"
	"github.com/kubeblade/kubeblade/internal/hardware/bcm2712"
	"github.com/kubeblade/kubeblade/internal/hardware/bcm2712/bcm2712test"
	"github.com/kubeblade/kubeblade/internal/hardware/linux"
	"github.com/kubeblade/kubeblade/internal/hardware/linux/gpio/gpiotest"
	"github.com/kubeblade/kubeblade/internal/hardware/regs"
	"github.com/kubeblade/kubeblade/internal/hardware/regs/regstest"
	"github.com/kubeblade/kubeblade/internal/hardware/ws2812"
)

// TestAutoIsLinuxEvenOffBlade: auto never silently simulates; a machine
// that is not a blade gets the linux backend saying so.
func TestAutoIsLinuxEvenOffBlade(t *testing.T) {
	root := t.TempDir()
	for _, backend := range []agentconfigv1.HardwareBackend{agentconfigv1.BackendAuto, "", agentconfigv1.BackendLinux} {
		o, err := Open(context.Background(), agentconfigv1.HardwareConfig{Backend: backend},
			Deps{Roots: linux.Roots{Sys: root, Dev: root, Proc: root}})
		if err != nil {
			t.Fatalf("%q: %v", backend, err)
		}
		info := o.Backend.Info()
		if o.Simulated != nil || info.Backend != "linux" || info.IsBlade {
			t.Fatalf("%q: got %+v (simulated %v)", backend, info, o.Simulated != nil)
		}
		if err := o.Backend.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// blade writes a Compute Module's devicetree and whatever else is given,
// and returns the roots of its tree.
func blade(t *testing.T, soc string, files map[string]string) linux.Roots {
	t.Helper()
	root := t.TempDir()
	compat := map[string]string{
		"bcm2711": "raspberrypi,4-compute-module\x00brcm,bcm2711\x00",
		"bcm2712": "raspberrypi,5-compute-module\x00brcm,bcm2712\x00",
	}[soc]
	all := map[string]string{
		"sys/firmware/devicetree/base/compatible": compat,
		"proc/cmdline": "console=tty1 root=PARTUUID=abc rootwait\n",
		"dev/.keep":    "",
	}
	for k, v := range files {
		all[k] = v
	}
	for p, c := range all {
		full := filepath.Join(root, p)
		os.MkdirAll(filepath.Dir(full), 0o755)
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return linux.Roots{Sys: filepath.Join(root, "sys"), Dev: filepath.Join(root, "dev"), Proc: filepath.Join(root, "proc")}
}

func plainFile(p string) (io.WriteCloser, error) { return os.OpenFile(p, os.O_WRONLY, 0) }

var kernelLEDs = map[string]string{
	"sys/class/leds/kubeblade:rgb:top/multi_index":      "red green blue\n",
	"sys/class/leds/kubeblade:rgb:top/multi_intensity":  "0 0 0\n",
	"sys/class/leds/kubeblade:rgb:top/max_brightness":   "255\n",
	"sys/class/leds/kubeblade:rgb:top/brightness":       "0\n",
	"sys/class/leds/kubeblade:rgb:edge/multi_index":     "red green blue\n",
	"sys/class/leds/kubeblade:rgb:edge/multi_intensity": "0 0 0\n",
	"sys/class/leds/kubeblade:rgb:edge/max_brightness":  "255\n",
	"sys/class/leds/kubeblade:rgb:edge/brightness":      "0\n",
}

func TestBackendChoice(t *testing.T) {
	refused := func(string) (regs.Mapper, error) {
		return nil, fmt.Errorf("%w: open /dev/mem: permission denied", regs.ErrUnavailable)
	}
	for name, tc := range map[string]struct {
		backend  agentconfigv1.HardwareBackend
		soc      string
		files    map[string]string
		refuse   bool
		clockOff bool   // RP1's PWM0 clock not started
		want     string // Info.Backend
		leds     bool
		inDetail string
	}{
		"auto, CM4 without LED driver: registers": {backend: "auto", soc: "bcm2711", want: "bcm2711", leds: true, inDetail: "chosen by auto"},
		"auto, CM5 without LED driver: registers": {backend: "auto", soc: "bcm2712", want: "bcm2712", leds: true, inDetail: "RP1 PWM0 channel 2"},
		"auto, CM4 with kubeblade-leds: linux":    {backend: "auto", soc: "bcm2711", files: kernelLEDs, want: "linux", leds: true, inDetail: "LED class kubeblade:rgb:top"},
		"auto, CM5 with /dev/leds0: linux": {backend: "auto", soc: "bcm2712", files: map[string]string{"dev/leds0": ""}, want: "linux", leds: true,
			inDetail: "ws2812-pio-rp1"},
		"auto, Talos: linux even with /dev/mem":  {backend: "auto", soc: "bcm2711", files: map[string]string{"proc/cmdline": "talos.platform=metal\n"}, want: "linux"},
		"auto, /dev/mem refused: linux says why": {backend: "auto", soc: "bcm2711", refuse: true, want: "linux", inDetail: "register backend bcm2711 not used: /dev/mem unavailable"},
		"bcm2711 asked, /dev/mem refused":        {backend: "bcm2711", soc: "bcm2711", refuse: true, want: "linux", inDetail: "hardware.backend bcm2711 unavailable: /dev/mem unavailable"},
		"bcm2712 asked on a CM4":                 {backend: "bcm2712", soc: "bcm2711", want: "linux", inDetail: "hardware.backend bcm2712 unavailable: this blade's SoC is bcm2711"},
		"bcm2711 asked on Talos": {backend: "bcm2711", soc: "bcm2711", files: map[string]string{"proc/cmdline": "talos.platform=metal\n"}, want: "linux",
			inDetail: "Talos has no /dev/mem"},
		"bcm2711 asked, with kubeblade-leds too": {backend: "bcm2711", soc: "bcm2711", files: kernelLEDs, want: "bcm2711", leds: true},
		"auto, CM5 with PWM0's clock off: linux says why": {backend: "auto", soc: "bcm2712", clockOff: true, want: "linux",
			inDetail: "register backend bcm2712 not used: RP1 PWM0 clock unusable: it is not running"},
		"bcm2712 asked, PWM0's clock off": {backend: "bcm2712", soc: "bcm2712", clockOff: true, want: "linux",
			inDetail: "hardware.backend bcm2712 unavailable: RP1 PWM0 clock unusable"},
	} {
		t.Run(name, func(t *testing.T) {
			r := blade(t, tc.soc, tc.files)
			m11, m12 := bcm2711test.New(16), bcm2712test.New(16)
			// A plain file stands for /dev/leds0 (the backend's own opener
			// takes only the ws2812-pio-rp1 character device).
			deps := Deps{GPIO: gpiotest.NewDriver(), RegisterSleep: m11.File.Sleep, Roots: r, LEDStream: plainFile}
			deps.DevMem = func(path string) (regs.Mapper, error) {
				if path != filepath.Join(r.Dev, "mem") {
					t.Errorf("opened %s, want <devRoot>/mem", path)
				}
				if tc.soc == "bcm2712" {
					return m12.File, nil
				}
				return m11.File, nil
			}
			if tc.refuse {
				deps.DevMem = refused
			}
			if tc.clockOff {
				m12.SetPWMClock(0, 1, 0)
			}
			o, err := Open(t.Context(), agentconfigv1.HardwareConfig{Backend: tc.backend}, deps)
			if err != nil {
				t.Fatal(err)
			}
			defer o.Backend.Close()
			info := o.Backend.Info()
			if info.Backend != tc.want {
				t.Fatalf("backend %q, want %q (detail %q)", info.Backend, tc.want, info.Detail)
			}
			if got := o.Backend.Capabilities().Has(hardware.CapLEDs); got != tc.leds {
				t.Errorf("LED capability %v, want %v (detail %q)", got, tc.leds, info.Detail)
			}
			if !strings.Contains(info.Detail, tc.inDetail) {
				t.Errorf("detail %q does not say %q", info.Detail, tc.inDetail)
			}
			if tc.want == "linux" {
				// Only reading the clock that ruled the registers out.
				for _, a := range append(m11.File.Log(), m12.File.Log()...) {
					if !tc.clockOff || a.Kind != regstest.Read || a.Block != bcm2712.BlockClocks {
						t.Errorf("registers touched although the linux backend was chosen: %v", a)
					}
				}
			}
		})
	}
}

// TestRegisterBackendDrivesTheBlade: the agent-facing interface reaches
// the registers — a colour set becomes a frame the LEDs decode, the fan
// gets its duty back.
func TestRegisterBackendDrivesTheBlade(t *testing.T) {
	r := blade(t, "bcm2711", nil)
	m := bcm2711test.New(16)
	o, err := Open(t.Context(), agentconfigv1.HardwareConfig{Backend: "auto"},
		Deps{Roots: r, GPIO: gpiotest.NewDriver(), RegisterSleep: m.File.Sleep, DevMem: func(string) (regs.Mapper, error) { return m.File, nil }})
	if err != nil {
		t.Fatal(err)
	}
	b := o.Backend
	if err := b.SetFanPercent(50); err != nil {
		t.Fatal(err)
	}
	if err := b.SetLED(hardware.LEDEdge, hardware.Color{R: 0x12, G: 0x34, B: 0x56}); err != nil {
		t.Fatal(err)
	}
	words, err := m.LEDWords(bcm2711.LEDWordBits)
	if err != nil {
		t.Fatal(err)
	}
	if len(words) == 0 {
		t.Fatal("no frame reached the LEDs")
	}
	if got := m.File.Peek(bcm2711.BlockPWM, bcm2711.RegDAT1); got != 49 {
		t.Errorf("fan duty %d after the frame, want 49 (50 %% of 98)", got)
	}
	if err := b.Close(); err != nil || !m.File.Closed() {
		t.Fatalf("Close: %v, /dev/mem closed %v", err, m.File.Closed())
	}
	if len(m.Errors) > 0 {
		t.Fatal(m.Errors)
	}
}

// TestRP1RegisterBackendDrivesTheBlade: on a CM5 the agent-facing
// interface reaches RP1's registers — a colour pair set becomes the FIFO
// words a WS2812 decodes back to that pair, top first, and the fan gets its
// own channel, which the LED frames leave alone.
func TestRP1RegisterBackendDrivesTheBlade(t *testing.T) {
	r := blade(t, "bcm2712", nil)
	m := bcm2712test.New(16)
	o, err := Open(t.Context(), agentconfigv1.HardwareConfig{Backend: "auto"},
		Deps{Roots: r, GPIO: gpiotest.NewDriver(), RegisterSleep: m.File.Sleep, RegisterNow: m.Now,
			DevMem: func(string) (regs.Mapper, error) { return m.File, nil }})
	if err != nil {
		t.Fatal(err)
	}
	b := o.Backend
	if info := b.Info(); info.Backend != "bcm2712" {
		t.Fatalf("backend %q (detail %q), want bcm2712", info.Backend, info.Detail)
	}
	for _, c := range []hardware.Capability{hardware.CapLEDs, hardware.CapFan} {
		if !b.Capabilities().Has(c) {
			t.Errorf("no %s capability (detail %q)", c, b.Info().Detail)
		}
	}
	if err := b.SetFanPercent(50); err != nil {
		t.Fatal(err)
	}
	fan := m.Active
	top, edge := hardware.Color{R: 0xff, G: 0x80, B: 0x01}, hardware.Color{R: 0x12, G: 0x34, B: 0x56}
	if err := b.SetLED(hardware.LEDTop, top); err != nil {
		t.Fatal(err)
	}
	m.Wire = nil // the frame that carries both colours is the next one
	if err := b.SetLED(hardware.LEDEdge, edge); err != nil {
		t.Fatal(err)
	}
	if len(m.Errors) > 0 {
		t.Fatal(m.Errors)
	}
	var words []uint32
	for _, s := range m.Wire {
		if s.LEDFunc != bcm2712.FuncselLED || s.Ctrl&7 != bcm2712.ModeSerializer {
			t.Fatalf("word %#x shifted out with GPIO18 on function %d, mode %d", s.Word, s.LEDFunc, s.Ctrl&7)
		}
		words = append(words, s.Word)
	}
	got, err := ws2812.Decode(bcm2712.Serializer, words)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]byte{top.R, top.G, top.B, edge.R, edge.G, edge.B}, got); d != "" {
		t.Errorf("the LEDs read (-want +got):\n%s", d)
	}

	// The fan: channel 0 at 50 % of its 25 kHz period on GPIO12, before
	// and after the frames.
	if fan.Global&bcm2712.ChanEnable(bcm2712.ChanFan) == 0 || fan.Ctrl[bcm2712.ChanFan]&7 != bcm2712.ModeTrailingEdge ||
		fan.Range[bcm2712.ChanFan] != bcm2712.FanPeriodTicks-1 || fan.Duty[bcm2712.ChanFan] != bcm2712.FanPeriodTicks/2 {
		t.Errorf("fan channel after SetFanPercent(50): %+v", fan)
	}
	if f := m.File.Peek(bcm2712.BlockGPIO, bcm2712.GPIOCtrl(bcm2712.PinFan)) & bcm2712.FuncselMask; f != bcm2712.FuncselFan {
		t.Errorf("GPIO12 on function %d, want the PWM's (%d)", f, bcm2712.FuncselFan)
	}
	if m.Active.Global&bcm2712.ChanEnable(bcm2712.ChanFan) == 0 || m.Active.Ctrl[bcm2712.ChanFan] != fan.Ctrl[bcm2712.ChanFan] ||
		m.Active.Range[bcm2712.ChanFan] != fan.Range[bcm2712.ChanFan] || m.Active.Duty[bcm2712.ChanFan] != fan.Duty[bcm2712.ChanFan] {
		t.Errorf("fan channel changed by the LED frames: %+v, was %+v", m.Active, fan)
	}
	if err := b.Close(); err != nil || !m.File.Closed() {
		t.Fatalf("Close: %v, /dev/mem closed %v", err, m.File.Closed())
	}
}
