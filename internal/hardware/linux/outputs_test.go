package linux_test

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kubeblade/kubeblade/internal/hardware"
	"github.com/kubeblade/kubeblade/internal/hardware/linux"
	"github.com/kubeblade/kubeblade/internal/smartfan/uart"
)

// fakeOutputs records what the linux backend asks of a register backend.
type fakeOutputs struct {
	started bool
	duties  []uint8
	frames  [][2]hardware.Color
	closed  bool
}

func (f *fakeOutputs) Name() string     { return "bcm2711" }
func (f *fakeOutputs) Describe() string { return "BCM2711 PWM0 serializer" }
func (f *fakeOutputs) StartFan() error  { f.started = true; return nil }
func (f *fakeOutputs) SetFanPercent(p uint8) error {
	f.duties = append(f.duties, p)
	return nil
}
func (f *fakeOutputs) SetLEDs(top, edge hardware.Color) error {
	f.frames = append(f.frames, [2]hardware.Color{top, edge})
	return nil
}
func (f *fakeOutputs) Close() error { f.closed = true; return nil }

func TestRegisterOutputs(t *testing.T) {
	root, drv, chip := cm4Blade(t, nil)
	out := &fakeOutputs{}
	b, err := linux.Open(t.Context(), linux.Options{Config: config(root), Roots: roots(root), GPIO: drv, AwaitPWMExport: kernelExport(root), Outputs: out})
	if err != nil {
		t.Fatal(err)
	}
	info := b.Info()
	if info.Backend != "bcm2711" || !strings.Contains(info.Detail, "fan: registers") || !strings.Contains(info.Detail, "leds: BCM2711 PWM0 serializer") {
		t.Errorf("info %+v", info)
	}
	if !out.started {
		t.Error("standard fan unit: StartFan not called")
	}
	if chip.Line(12) != nil {
		t.Error("GPIO12 claimed as a GPIO line: it belongs to the register backend's PWM")
	}
	if read(t, root, "sys/class/pwm/pwmchip0/export") != "" {
		t.Error("sysfs PWM exported beside the register backend")
	}
	if err := b.SetFanPercent(60); err != nil {
		t.Fatal(err)
	}
	if err := b.SetLED(hardware.LEDEdge, hardware.Color{B: 9}); err != nil {
		t.Fatal(err)
	}
	if err := b.SetLED(hardware.LEDTop, hardware.Color{R: 7}); err != nil {
		t.Fatal(err)
	}
	want := [][2]hardware.Color{{{}, {B: 9}}, {{R: 7}, {B: 9}}}
	if d := cmp.Diff(want, out.frames); d != "" {
		t.Errorf("frames (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]uint8{60}, out.duties); d != "" {
		t.Errorf("duties (-want +got):\n%s", d)
	}
	if err := b.Close(); err != nil || !out.closed {
		t.Fatalf("Close: %v, outputs closed %v", err, out.closed)
	}
}

// TestRegisterOutputsSmartFanUnit: with the smart unit GPIO12 is UART5,
// so the register backend must not take it; the LEDs still go through it.
func TestRegisterOutputsSmartFanUnit(t *testing.T) {
	root, drv, _ := cm4Blade(t, map[string]string{"dev/ttyAMA5": ""})
	cfg := config(root)
	cfg.FanUnit = "smart"
	dial := func(string) uart.Dialer {
		return func() (io.ReadWriteCloser, error) { return nil, errors.New("no unit yet") }
	}
	out := &fakeOutputs{}
	b := open(t, linux.Options{Config: cfg, Roots: roots(root), GPIO: drv, Serial: dial, Outputs: out})
	if out.started {
		t.Fatal("StartFan called with a smart fan unit")
	}
	if !b.Capabilities().Has(hardware.CapLEDs) {
		t.Fatal("no LEDs")
	}
}

func TestLEDDriverBadInput(t *testing.T) {
	led := func(name, index string) map[string]string {
		return map[string]string{
			"sys/class/leds/" + name + "/multi_index":     index + "\n",
			"sys/class/leds/" + name + "/multi_intensity": "0 0 0\n",
			"sys/class/leds/" + name + "/max_brightness":  "255\n",
			"sys/class/leds/" + name + "/brightness":      "0\n",
		}
	}
	for name, tc := range map[string]struct {
		files map[string]string
		why   string
	}{
		"half-loaded driver: only the top LED": {files: led("kubeblade:rgb:top", "red green blue"), why: "no multicolor LED for the edge LED"},
		"LED without a blue channel": {files: merge(led("kubeblade:rgb:top", "red green"), led("kubeblade:rgb:edge", "red green blue")),
			why: "has no blue channel"},
	} {
		t.Run(name, func(t *testing.T) {
			root, drv, _ := cm4Blade(t, tc.files)
			b := open(t, linux.Options{Config: config(root), Roots: roots(root), GPIO: drv, AwaitPWMExport: kernelExport(root)})
			if b.Capabilities().Has(hardware.CapLEDs) {
				t.Fatal("LEDs reported although a colour would show wrong")
			}
			if !strings.Contains(b.Info().Detail, tc.why) {
				t.Errorf("detail %q does not say %q", b.Info().Detail, tc.why)
			}
			if err := b.SetLED(hardware.LEDTop, hardware.Color{R: 1}); !errors.Is(err, hardware.ErrNotSupported) {
				t.Errorf("SetLED: %v", err)
			}
		})
	}
}
