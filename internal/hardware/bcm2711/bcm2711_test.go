package bcm2711_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kubeblade/kubeblade/internal/hardware"
	"github.com/kubeblade/kubeblade/internal/hardware/bcm2711"
	"github.com/kubeblade/kubeblade/internal/hardware/bcm2711/bcm2711test"
	"github.com/kubeblade/kubeblade/internal/hardware/regs"
	"github.com/kubeblade/kubeblade/internal/hardware/regs/regstest"
	"github.com/kubeblade/kubeblade/internal/hardware/ws2812"
)

type model struct{ *bcm2711test.Model }

func newModel(_ *testing.T, depth int) *model { return &model{bcm2711test.New(depth)} }

func (m *model) open(t *testing.T) *bcm2711.Driver {
	t.Helper()
	d, err := bcm2711.Open(bcm2711.Options{Mapper: m.File, Sleep: m.File.Sleep})
	if err != nil {
		t.Fatalf("Open: %v\n%s", err, regstest.Dump(m.File.Log()))
	}
	return d
}

func (m *model) clean(t *testing.T) {
	t.Helper()
	if len(m.Errors) > 0 {
		t.Fatalf("the hardware saw misuse: %q\n%s", m.Errors, regstest.Dump(m.File.Log()))
	}
}

func (m *model) ledWords(t *testing.T) []uint32 {
	t.Helper()
	w, err := m.LEDWords(bcm2711.LEDWordBits)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

var fsel = bcm2711test.Fsel

func TestOpenSetsClock(t *testing.T) {
	m := newModel(t, 16)
	// The firmware left the PWM clock running from PLLD at another rate.
	m.File.Map(bcm2711.BlockClock, bcm2711.ClockBase, regs.PageSize)
	m.File.Poke(bcm2711.BlockClock, bcm2711.RegPWMCTL, 6|bcm2711.ClockEnab|bcm2711.ClockBusy)
	m.File.Poke(bcm2711.BlockClock, bcm2711.RegPWMDIV, 5<<12)
	m.open(t)
	m.clean(t)

	want := []uint32{
		bcm2711.ClockPassword | 6, // disable, source kept
		bcm2711.ClockPassword | bcm2711.ClockDivisor<<12,
		bcm2711.ClockPassword | bcm2711.ClockSrcOsc,
		bcm2711.ClockPassword | bcm2711.ClockSrcOsc | bcm2711.ClockEnab,
	}
	var got []uint32
	for _, a := range m.File.Log() {
		if a.Kind == regstest.Write && a.Block == bcm2711.BlockClock {
			got = append(got, a.Val)
		}
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("clock manager writes (-want +got):\n%s", d)
	}
	if got := m.File.Peek(bcm2711.BlockClock, bcm2711.RegPWMDIV) >> 12; got != 22 {
		t.Errorf("divisor %d, want 22 (54 MHz / 22 = 2.45 MHz)", got)
	}
	if w := m.File.Writes(bcm2711.BlockPWM, bcm2711.RegCTL); len(w) == 0 || w[0] != 0 {
		t.Errorf("PWM not stopped before re-clocking: CTL writes %#x", w)
	}
}

func TestOpenKeepsRunningClock(t *testing.T) {
	m := newModel(t, 16)
	m.File.Map(bcm2711.BlockClock, bcm2711.ClockBase, regs.PageSize)
	m.File.Poke(bcm2711.BlockClock, bcm2711.RegPWMCTL, bcm2711.ClockSrcOsc|bcm2711.ClockEnab|bcm2711.ClockBusy)
	m.File.Poke(bcm2711.BlockClock, bcm2711.RegPWMDIV, bcm2711.ClockDivisor<<12)
	m.open(t)
	for _, a := range m.File.Log() {
		if a.Kind == regstest.Write {
			t.Fatalf("a restart wrote %s: the running fan would glitch", a)
		}
	}
}

func TestFan(t *testing.T) {
	m := newModel(t, 16)
	m.File.Map(bcm2711.BlockGPIO, bcm2711.GPIOBase, regs.PageSize)
	// GPIO14/15 are UART0 (ALT0) and GPIO13 an input: StartFan must keep them.
	other := uint32(bcm2711.FselAlt0<<12 | bcm2711.FselAlt0<<15)
	m.File.Poke(bcm2711.BlockGPIO, bcm2711.RegGPFSEL1, other)
	d := m.open(t)
	if err := d.SetFanPercent(50); !errors.Is(err, hardware.ErrNotSupported) {
		t.Fatalf("fan set before StartFan: %v, want ErrNotSupported", err)
	}
	if err := d.StartFan(); err != nil {
		t.Fatal(err)
	}
	gp := m.File.Peek(bcm2711.BlockGPIO, bcm2711.RegGPFSEL1)
	if fsel(gp, bcm2711.PinFan) != bcm2711.FselAlt0 || gp&^(7<<6) != other {
		t.Errorf("GPFSEL1 %#x: want GPIO12 ALT0 and the other pins untouched (%#x)", gp, other)
	}
	if ctl := m.File.Peek(bcm2711.BlockPWM, bcm2711.RegCTL); ctl != bcm2711.CtlMSEN1|bcm2711.CtlPWEN1 {
		t.Errorf("CTL %#x, want mark-space enabled", ctl)
	}
	if rng, dat := m.File.Peek(bcm2711.BlockPWM, bcm2711.RegRNG1), m.File.Peek(bcm2711.BlockPWM, bcm2711.RegDAT1); rng != bcm2711.FanRange || dat != bcm2711.FanRange {
		t.Errorf("RNG1 %d DAT1 %d: want %d/%d (100 %% until told otherwise)", rng, dat, bcm2711.FanRange, bcm2711.FanRange)
	}
	if hz := float64(bcm2711.ClockHz) / bcm2711.FanRange; hz < 21000 || hz > 28000 {
		t.Errorf("fan PWM at %.0f Hz, outside 21–28 kHz", hz)
	}
	for p, want := range map[uint8]uint32{0: 0, 40: 39, 100: 98} {
		if err := d.SetFanPercent(p); err != nil {
			t.Fatal(err)
		}
		if got := m.File.Peek(bcm2711.BlockPWM, bcm2711.RegDAT1); got != want {
			t.Errorf("%d %%: DAT1 %d, want %d", p, got, want)
		}
	}
	m.File.Reset()
	if err := d.SetFanPercent(101); err == nil {
		t.Error("101 % accepted")
	}
	if len(m.File.Log()) != 0 {
		t.Errorf("a refused duty touched registers:\n%s", regstest.Dump(m.File.Log()))
	}
	m.clean(t)
}

func TestLEDFrame(t *testing.T) {
	for _, depth := range []int{16, 8, 4} {
		t.Run(fmt.Sprintf("FIFO of %d words", depth), func(t *testing.T) {
			m := newModel(t, depth)
			d := m.open(t)
			if err := d.StartFan(); err != nil {
				t.Fatal(err)
			}
			if err := d.SetFanPercent(40); err != nil {
				t.Fatal(err)
			}
			m.File.Reset()
			top, edge := hardware.Color{R: 0xff, G: 0x80}, hardware.Color{G: 0x10, B: 0xfe}
			if err := d.SetLEDs(top, edge); err != nil {
				t.Fatalf("%v\n%s", err, regstest.Dump(m.File.Log()))
			}
			m.clean(t)

			// The FIFO words for this pair, R, G, B per LED, top first:
			// 0 = 100, 1 = 110, one byte per word, MSB-aligned.
			wantFIFO := []uint32{0xdb6db600, 0xd2492400, 0x92492400, 0x92492400, 0x92692400, 0xdb6db400, 0}
			if d := cmp.Diff(wantFIFO, m.File.Writes(bcm2711.BlockPWM, bcm2711.RegFIF1)); d != "" {
				t.Errorf("FIFO words (-want +got):\n%s", d)
			}
			if rng := m.File.Writes(bcm2711.BlockPWM, bcm2711.RegRNG1); len(rng) == 0 || rng[0] != bcm2711.LEDWordBits {
				t.Errorf("RNG1 writes %v: want 24 for the frame", rng)
			}
			// What the LEDs saw decodes to the colours, in R, G, B order.
			got, err := ws2812.Decode(bcm2711.Serializer, m.ledWords(t))
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff([]byte{0xff, 0x80, 0, 0, 0x10, 0xfe}, got); d != "" {
				t.Errorf("LEDs read (-want +got):\n%s", d)
			}
			if last := m.Wire[len(m.Wire)-1]; last.Word != 0 {
				t.Errorf("last word %#x: the repeated word must hold the line low", last.Word)
			}

			// The pin switches: ALT5 only around the frame, then a driven low.
			var switches []uint32
			prev := uint32(99)
			for _, a := range m.File.Log() {
				if a.Kind == regstest.Write && a.Block == bcm2711.BlockGPIO && a.Off == bcm2711.RegGPFSEL1 {
					if f := fsel(a.Val, bcm2711.PinLED); f != prev {
						switches = append(switches, f)
						prev = f
					}
					if fsel(a.Val, bcm2711.PinFan) != bcm2711.FselAlt0 {
						t.Errorf("GPIO12 lost ALT0 during the frame: %#x", a.Val)
					}
				}
			}
			if d := cmp.Diff([]uint32{bcm2711.FselAlt5, bcm2711.FselOutput}, switches); d != "" {
				t.Errorf("GPIO18 functions (-want +got):\n%s", d)
			}
			if w := m.File.Writes(bcm2711.BlockGPIO, bcm2711.RegGPCLR0); len(w) != 1 || w[0] != 1<<bcm2711.PinLED {
				t.Errorf("GPCLR0 writes %#x: GPIO18 must be driven low", w)
			}
			// The line stays low for the reset time before GPIO18 is released.
			latched := false
			for _, a := range m.File.Log() {
				if a.Kind == regstest.Pause && a.Pause >= ws2812.Reset {
					latched = true
				}
				if a.Kind == regstest.Write && a.Block == bcm2711.BlockGPIO && a.Off == bcm2711.RegGPFSEL1 && fsel(a.Val, bcm2711.PinLED) == bcm2711.FselOutput && !latched {
					t.Error("GPIO18 released before the frame latched (≥ 280 µs low)")
				}
			}

			// The fan's duty is restored afterwards.
			if ctl, rng, dat := m.File.Peek(bcm2711.BlockPWM, bcm2711.RegCTL), m.File.Peek(bcm2711.BlockPWM, bcm2711.RegRNG1), m.File.Peek(bcm2711.BlockPWM, bcm2711.RegDAT1); ctl != bcm2711.CtlMSEN1|bcm2711.CtlPWEN1 || rng != bcm2711.FanRange || dat != 39 {
				t.Errorf("after the frame CTL %#x RNG1 %d DAT1 %d: want the fan back at 40 %% (mark-space, 98, 39)", ctl, rng, dat)
			}
		})
	}
}

// TestLEDsWithSmartFanUnit: GPIO12 is UART5 then (ALT4); a frame must not
// touch it, and the channel stays off afterwards.
func TestLEDsWithSmartFanUnit(t *testing.T) {
	m := newModel(t, 16)
	m.File.Map(bcm2711.BlockGPIO, bcm2711.GPIOBase, regs.PageSize)
	const alt4 = 0b011
	m.File.Poke(bcm2711.BlockGPIO, bcm2711.RegGPFSEL1, alt4<<6|alt4<<9)
	d := m.open(t)
	if err := d.SetLEDs(hardware.Color{B: 1}, hardware.Color{}); err != nil {
		t.Fatal(err)
	}
	gp := m.File.Peek(bcm2711.BlockGPIO, bcm2711.RegGPFSEL1)
	if fsel(gp, bcm2711.PinFan) != alt4 || fsel(gp, 13) != alt4 {
		t.Errorf("GPFSEL1 %#x: the UART pins were touched", gp)
	}
	if ctl := m.File.Peek(bcm2711.BlockPWM, bcm2711.RegCTL); ctl != 0 {
		t.Errorf("CTL %#x after the frame, want the channel off", ctl)
	}
	m.clean(t)
}

// TestStuckSerializer: a PWM that never drains gives an error, and still
// GPIO18 is released and the fan restored.
func TestStuckSerializer(t *testing.T) {
	m := newModel(t, 16)
	d := m.open(t)
	if err := d.StartFan(); err != nil {
		t.Fatal(err)
	}
	m.Stuck = true
	err := d.SetLEDs(hardware.Color{R: 1}, hardware.Color{R: 1})
	if err == nil {
		t.Fatal("a stuck serializer reported success")
	}
	if fsel(m.File.Peek(bcm2711.BlockGPIO, bcm2711.RegGPFSEL1), bcm2711.PinLED) != bcm2711.FselOutput {
		t.Error("GPIO18 left on the PWM after an error")
	}
	if m.File.Peek(bcm2711.BlockPWM, bcm2711.RegCTL) != bcm2711.CtlMSEN1|bcm2711.CtlPWEN1 {
		t.Error("fan not restored after an error")
	}
}

func TestDevMemRefused(t *testing.T) {
	f := regstest.New()
	f.MapErr = fmt.Errorf("%w: open /dev/mem: permission denied", regs.ErrUnavailable)
	_, err := bcm2711.Open(bcm2711.Options{Mapper: f, Sleep: func(time.Duration) {}})
	if !errors.Is(err, regs.ErrUnavailable) {
		t.Fatalf("err = %v, want regs.ErrUnavailable", err)
	}
}

func TestSerializerTiming(t *testing.T) {
	p, err := bcm2711.Serializer.Pattern()
	if err != nil {
		t.Fatal(err)
	}
	if p.SubBits*8 != bcm2711.LEDWordBits {
		t.Fatalf("%d sub-bits per bit: a byte no longer fills one %d-bit word", p.SubBits, bcm2711.LEDWordBits)
	}
}
