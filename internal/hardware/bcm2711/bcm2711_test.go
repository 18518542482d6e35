package bcm2711

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kubeblade/kubeblade/internal/hardware"
	"github.com/kubeblade/kubeblade/internal/hardware/regs"
	"github.com/kubeblade/kubeblade/internal/hardware/regs/regstest"
	"github.com/kubeblade/kubeblade/internal/hardware/ws2812"
)

// sent is one FIFO word as it left the serializer, with the state of the
// pins and the channel at that moment.
type sent struct {
	word         uint32
	rng          uint32
	ledFsel      uint32
	fanFsel      uint32
	serializing  bool
	clockRunning bool
}

// model makes the register file behave like the BCM2711 blocks the driver
// touches, with the quirks that matter (BCM2711 ARM Peripherals §5.4, §8):
//   - the clock manager ignores writes without the 0x5A password, the
//     password does not read back, BUSY follows ENAB and clears a few cycles
//     after ENAB is cleared, and source or divisor must not change while
//     BUSY (the datasheet warns of glitches);
//   - the PWM FIFO holds depth words, a write to a full FIFO sets WERR1 and
//     is lost, CLRF1 empties it and reads back as 0;
//   - a running serializer shifts one FIFO word out per STA poll (time
//     passes while the driver polls) and repeats the last word when empty.
type model struct {
	t      *testing.T
	f      *regstest.File
	depth  int
	stuck  bool // the serializer never drains
	queue  []uint32
	wire   []sent
	busy   int // reads of CM_PWMCTL until BUSY clears after a disable
	errors []string
}

func newModel(t *testing.T, depth int) *model {
	m := &model{t: t, f: regstest.New(), depth: depth}
	m.f.SetModel(BlockClock, regstest.Model{
		OnWrite: func(off, v uint32) (uint32, bool) {
			if v>>24 != 0x5A {
				m.errors = append(m.errors, fmt.Sprintf("clock write %#x without password", v))
				return 0, false
			}
			cur := m.f.Peek(BlockClock, RegPWMCTL)
			busy := cur&ClockBusy != 0
			if off == RegPWMDIV && busy {
				m.errors = append(m.errors, "divisor changed while the clock was busy")
			}
			if off == RegPWMCTL {
				if busy && v&ClockSrcMask != cur&ClockSrcMask {
					m.errors = append(m.errors, "source changed while the clock was busy")
				}
				v &= 0xffffff
				switch {
				case v&ClockEnab != 0:
					v |= ClockBusy
				case busy:
					m.busy = 3
					v |= ClockBusy
				}
				return v, true
			}
			return v & 0xffffff, true
		},
		OnRead: func(off, stored uint32) uint32 {
			if off == RegPWMCTL && stored&ClockEnab == 0 && stored&ClockBusy != 0 {
				if m.busy--; m.busy <= 0 {
					stored &^= ClockBusy
					m.f.Poke(BlockClock, RegPWMCTL, stored)
				}
			}
			return stored
		},
	})
	m.f.SetModel(BlockPWM, regstest.Model{
		OnWrite: func(off, v uint32) (uint32, bool) {
			switch off {
			case RegCTL:
				if v&CtlCLRF1 != 0 {
					m.queue = nil
				}
				return v &^ CtlCLRF1, true
			case RegFIF1:
				if len(m.queue) >= m.depth {
					m.f.Poke(BlockPWM, RegSTA, m.f.Peek(BlockPWM, RegSTA)|StaWERR1)
					m.errors = append(m.errors, fmt.Sprintf("FIFO write %#x lost: FIFO full", v))
					return 0, false
				}
				m.queue = append(m.queue, v)
				return 0, false
			case RegSTA:
				return m.f.Peek(BlockPWM, RegSTA) &^ v, true // write 1 to clear
			}
			return v, true
		},
		OnRead: func(off, stored uint32) uint32 {
			if off != RegSTA {
				return stored
			}
			ctl := m.f.Peek(BlockPWM, RegCTL)
			running := ctl&(CtlPWEN1|CtlMODE1|CtlUSEF1) == CtlPWEN1|CtlMODE1|CtlUSEF1
			if running && len(m.queue) > 0 && !m.stuck {
				m.send(m.queue[0])
				m.queue = m.queue[1:]
			}
			sta := stored &^ (StaFULL1 | StaEMPT1)
			if len(m.queue) >= m.depth {
				sta |= StaFULL1
			}
			if len(m.queue) == 0 {
				sta |= StaEMPT1
			}
			return sta
		},
	})
	return m
}

func (m *model) send(w uint32) {
	fsel := m.f.Peek(BlockGPIO, RegGPFSEL1)
	ctl := m.f.Peek(BlockPWM, RegCTL)
	m.wire = append(m.wire, sent{
		word:         w,
		rng:          m.f.Peek(BlockPWM, RegRNG1),
		ledFsel:      fsel >> ((PinLED - 10) * 3) & 7,
		fanFsel:      fsel >> ((PinFan - 10) * 3) & 7,
		serializing:  ctl&CtlMODE1 != 0,
		clockRunning: m.f.Peek(BlockClock, RegPWMCTL)&ClockEnab != 0,
	})
}

// ledWords are the words an LED on GPIO18 received.
func (m *model) ledWords(t *testing.T) []uint32 {
	t.Helper()
	var out []uint32
	for _, s := range m.wire {
		if s.ledFsel != FselAlt5 {
			continue
		}
		if !s.serializing || s.rng != LEDWordBits || !s.clockRunning {
			t.Fatalf("word %#x reached the LEDs with RNG %d, serializer %v, clock %v", s.word, s.rng, s.serializing, s.clockRunning)
		}
		out = append(out, s.word)
	}
	return out
}

func (m *model) open(t *testing.T) *Driver {
	t.Helper()
	d, err := Open(Options{Mapper: m.f, Sleep: m.f.Sleep})
	if err != nil {
		t.Fatalf("Open: %v\n%s", err, regstest.Dump(m.f.Log()))
	}
	return d
}

func (m *model) clean(t *testing.T) {
	t.Helper()
	if len(m.errors) > 0 {
		t.Fatalf("the hardware saw misuse: %q\n%s", m.errors, regstest.Dump(m.f.Log()))
	}
}

func fsel(v uint32, pin int) uint32 { return v >> ((pin - 10) * 3) & 7 }

func TestOpenSetsClock(t *testing.T) {
	m := newModel(t, 16)
	// The firmware left the PWM clock running from PLLD at another rate.
	m.f.Map(BlockClock, ClockBase, regs.PageSize)
	m.f.Poke(BlockClock, RegPWMCTL, 6|ClockEnab|ClockBusy)
	m.f.Poke(BlockClock, RegPWMDIV, 5<<12)
	m.open(t)
	m.clean(t)

	want := []uint32{
		ClockPassword | 6, // disable, source kept
		ClockPassword | ClockDivisor<<12,
		ClockPassword | ClockSrcOsc,
		ClockPassword | ClockSrcOsc | ClockEnab,
	}
	var got []uint32
	for _, a := range m.f.Log() {
		if a.Kind == regstest.Write && a.Block == BlockClock {
			got = append(got, a.Val)
		}
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("clock manager writes (-want +got):\n%s", d)
	}
	if got := m.f.Peek(BlockClock, RegPWMDIV) >> 12; got != 22 {
		t.Errorf("divisor %d, want 22 (54 MHz / 22 = 2.45 MHz)", got)
	}
	if w := m.f.Writes(BlockPWM, RegCTL); len(w) == 0 || w[0] != 0 {
		t.Errorf("PWM not stopped before re-clocking: CTL writes %#x", w)
	}
}

func TestOpenKeepsRunningClock(t *testing.T) {
	m := newModel(t, 16)
	m.f.Map(BlockClock, ClockBase, regs.PageSize)
	m.f.Poke(BlockClock, RegPWMCTL, ClockSrcOsc|ClockEnab|ClockBusy)
	m.f.Poke(BlockClock, RegPWMDIV, ClockDivisor<<12)
	m.open(t)
	for _, a := range m.f.Log() {
		if a.Kind == regstest.Write {
			t.Fatalf("a restart wrote %s: the running fan would glitch", a)
		}
	}
}

func TestFan(t *testing.T) {
	m := newModel(t, 16)
	m.f.Map(BlockGPIO, GPIOBase, regs.PageSize)
	// GPIO14/15 are UART0 (ALT0) and GPIO13 an input: StartFan must keep them.
	other := uint32(FselAlt0<<12 | FselAlt0<<15)
	m.f.Poke(BlockGPIO, RegGPFSEL1, other)
	d := m.open(t)
	if err := d.SetFanPercent(50); !errors.Is(err, hardware.ErrNotSupported) {
		t.Fatalf("fan set before StartFan: %v, want ErrNotSupported", err)
	}
	if err := d.StartFan(); err != nil {
		t.Fatal(err)
	}
	gp := m.f.Peek(BlockGPIO, RegGPFSEL1)
	if fsel(gp, PinFan) != FselAlt0 || gp&^(7<<6) != other {
		t.Errorf("GPFSEL1 %#x: want GPIO12 ALT0 and the other pins untouched (%#x)", gp, other)
	}
	if ctl := m.f.Peek(BlockPWM, RegCTL); ctl != CtlMSEN1|CtlPWEN1 {
		t.Errorf("CTL %#x, want mark-space enabled", ctl)
	}
	if rng, dat := m.f.Peek(BlockPWM, RegRNG1), m.f.Peek(BlockPWM, RegDAT1); rng != FanRange || dat != FanRange {
		t.Errorf("RNG1 %d DAT1 %d: want %d/%d (100 %% until told otherwise)", rng, dat, FanRange, FanRange)
	}
	if hz := float64(ClockHz) / FanRange; hz < 21000 || hz > 28000 {
		t.Errorf("fan PWM at %.0f Hz, outside 21–28 kHz", hz)
	}
	for p, want := range map[uint8]uint32{0: 0, 40: 39, 100: 98} {
		if err := d.SetFanPercent(p); err != nil {
			t.Fatal(err)
		}
		if got := m.f.Peek(BlockPWM, RegDAT1); got != want {
			t.Errorf("%d %%: DAT1 %d, want %d", p, got, want)
		}
	}
	m.f.Reset()
	if err := d.SetFanPercent(101); err == nil {
		t.Error("101 % accepted")
	}
	if len(m.f.Log()) != 0 {
		t.Errorf("a refused duty touched registers:\n%s", regstest.Dump(m.f.Log()))
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
			m.f.Reset()
			top, edge := hardware.Color{R: 0xff, G: 0x80}, hardware.Color{G: 0x10, B: 0xfe}
			if err := d.SetLEDs(top, edge); err != nil {
				t.Fatalf("%v\n%s", err, regstest.Dump(m.f.Log()))
			}
			m.clean(t)

			// The FIFO words for this pair, R, G, B per LED, top first:
			// 0 = 100, 1 = 110, one byte per word, MSB-aligned.
			wantFIFO := []uint32{0xdb6db600, 0xd2492400, 0x92492400, 0x92492400, 0x92692400, 0xdb6db400, 0}
			if d := cmp.Diff(wantFIFO, m.f.Writes(BlockPWM, RegFIF1)); d != "" {
				t.Errorf("FIFO words (-want +got):\n%s", d)
			}
			if rng := m.f.Writes(BlockPWM, RegRNG1); len(rng) == 0 || rng[0] != LEDWordBits {
				t.Errorf("RNG1 writes %v: want 24 for the frame", rng)
			}
			// What the LEDs saw decodes to the colours, in R, G, B order.
			got, err := ws2812.Decode(Serializer, m.ledWords(t))
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff([]byte{0xff, 0x80, 0, 0, 0x10, 0xfe}, got); d != "" {
				t.Errorf("LEDs read (-want +got):\n%s", d)
			}
			if last := m.wire[len(m.wire)-1]; last.word != 0 {
				t.Errorf("last word %#x: the repeated word must hold the line low", last.word)
			}

			// The pin switches: ALT5 only around the frame, then a driven low.
			var switches []uint32
			prev := uint32(99)
			for _, a := range m.f.Log() {
				if a.Kind == regstest.Write && a.Block == BlockGPIO && a.Off == RegGPFSEL1 {
					if f := fsel(a.Val, PinLED); f != prev {
						switches = append(switches, f)
						prev = f
					}
					if fsel(a.Val, PinFan) != FselAlt0 {
						t.Errorf("GPIO12 lost ALT0 during the frame: %#x", a.Val)
					}
				}
			}
			if d := cmp.Diff([]uint32{FselAlt5, FselOutput}, switches); d != "" {
				t.Errorf("GPIO18 functions (-want +got):\n%s", d)
			}
			if w := m.f.Writes(BlockGPIO, RegGPCLR0); len(w) != 1 || w[0] != 1<<PinLED {
				t.Errorf("GPCLR0 writes %#x: GPIO18 must be driven low", w)
			}
			// The line stays low for the reset time before GPIO18 is released.
			latched := false
			for _, a := range m.f.Log() {
				if a.Kind == regstest.Pause && a.Pause >= ws2812.Reset {
					latched = true
				}
				if a.Kind == regstest.Write && a.Block == BlockGPIO && a.Off == RegGPFSEL1 && fsel(a.Val, PinLED) == FselOutput && !latched {
					t.Error("GPIO18 released before the frame latched (≥ 280 µs low)")
				}
			}

			// The fan's duty is restored afterwards.
			if ctl, rng, dat := m.f.Peek(BlockPWM, RegCTL), m.f.Peek(BlockPWM, RegRNG1), m.f.Peek(BlockPWM, RegDAT1); ctl != CtlMSEN1|CtlPWEN1 || rng != FanRange || dat != 39 {
				t.Errorf("after the frame CTL %#x RNG1 %d DAT1 %d: want the fan back at 40 %% (mark-space, 98, 39)", ctl, rng, dat)
			}
		})
	}
}

// TestLEDsWithSmartFanUnit: GPIO12 is UART5 then (ALT4); a frame must not
// touch it, and the channel stays off afterwards.
func TestLEDsWithSmartFanUnit(t *testing.T) {
	m := newModel(t, 16)
	m.f.Map(BlockGPIO, GPIOBase, regs.PageSize)
	const alt4 = 0b011
	m.f.Poke(BlockGPIO, RegGPFSEL1, alt4<<6|alt4<<9)
	d := m.open(t)
	if err := d.SetLEDs(hardware.Color{B: 1}, hardware.Color{}); err != nil {
		t.Fatal(err)
	}
	gp := m.f.Peek(BlockGPIO, RegGPFSEL1)
	if fsel(gp, PinFan) != alt4 || fsel(gp, 13) != alt4 {
		t.Errorf("GPFSEL1 %#x: the UART pins were touched", gp)
	}
	if ctl := m.f.Peek(BlockPWM, RegCTL); ctl != 0 {
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
	m.stuck = true
	err := d.SetLEDs(hardware.Color{R: 1}, hardware.Color{R: 1})
	if err == nil {
		t.Fatal("a stuck serializer reported success")
	}
	if fsel(m.f.Peek(BlockGPIO, RegGPFSEL1), PinLED) != FselOutput {
		t.Error("GPIO18 left on the PWM after an error")
	}
	if m.f.Peek(BlockPWM, RegCTL) != CtlMSEN1|CtlPWEN1 {
		t.Error("fan not restored after an error")
	}
}

func TestDevMemRefused(t *testing.T) {
	f := regstest.New()
	f.MapErr = fmt.Errorf("%w: open /dev/mem: permission denied", regs.ErrUnavailable)
	_, err := Open(Options{Mapper: f, Sleep: func(time.Duration) {}})
	if !errors.Is(err, regs.ErrUnavailable) {
		t.Fatalf("err = %v, want regs.ErrUnavailable", err)
	}
}

func TestSerializerTiming(t *testing.T) {
	p, err := Serializer.Pattern()
	if err != nil {
		t.Fatal(err)
	}
	if p.SubBits*8 != LEDWordBits {
		t.Fatalf("%d sub-bits per bit: a byte no longer fills one %d-bit word", p.SubBits, LEDWordBits)
	}
}
