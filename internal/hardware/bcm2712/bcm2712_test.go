package bcm2712

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

type sent struct {
	word    uint32
	rng     uint32
	ledFunc uint32
	ctrl    uint32
}

// active is what the PWM runs: the shadow registers are latched by
// SET_UPDATE (pwm-rp1: "update the changed registers on the next strobe").
type active struct {
	global uint32
	ctrl   [4]uint32
	rng    [4]uint32
	duty   [4]uint32
}

// model makes the register file behave like RP1's PWM0 and GPIO bank 0:
// settings take effect on SET_UPDATE, which reads back as 0; the FIFO takes
// depth words (more are lost), FLUSH empties it and sets FLUSH_DONE; a
// running FIFO channel shifts one word out per FIFO_CTRL poll.
type model struct {
	f      *regstest.File
	depth  int
	stuck  bool
	queue  []uint32
	act    active
	wire   []sent
	errors []string
	clock  time.Time
}

func newModel(depth int) *model {
	m := &model{f: regstest.New(), depth: depth, clock: time.Unix(0, 0)}
	m.f.SetModel(BlockPWM, regstest.Model{
		OnWrite: func(off, v uint32) (uint32, bool) {
			switch off {
			case RegGlobal:
				if v&GlobalSetUpdate != 0 {
					m.act.global = v &^ GlobalSetUpdate
					for c := 0; c < 4; c++ {
						m.act.ctrl[c] = m.f.Peek(BlockPWM, RegChanCtrl(c))
						m.act.rng[c] = m.f.Peek(BlockPWM, RegRange(c))
						m.act.duty[c] = m.f.Peek(BlockPWM, RegDuty(c))
					}
				}
				return v &^ GlobalSetUpdate, true
			case RegFIFOCtrl:
				if v&FIFOFlush != 0 {
					m.queue = nil
				}
				return v &^ (FIFOLevelMask | FIFOFlushDone), true
			case RegDutyFIFO:
				if len(m.queue) >= m.depth {
					m.errors = append(m.errors, fmt.Sprintf("FIFO overflow: %#x lost", v))
				} else {
					m.queue = append(m.queue, v)
				}
				return 0, false
			}
			return v, true
		},
		OnRead: func(off, stored uint32) uint32 {
			if off != RegFIFOCtrl {
				return stored
			}
			c := m.act.ctrl[ChanLED]
			running := m.act.global&ChanEnable(ChanLED) != 0 && c&CtrlUseFIFO != 0
			if running && len(m.queue) > 0 && !m.stuck {
				m.wire = append(m.wire, sent{word: m.queue[0], rng: m.act.rng[ChanLED], ctrl: c,
					ledFunc: m.f.Peek(BlockGPIO, GPIOCtrl(PinLED)) & FuncselMask})
				m.queue = m.queue[1:]
			}
			v := stored&^FIFOLevelMask | uint32(len(m.queue))
			if stored&FIFOFlush != 0 {
				v |= FIFOFlushDone
			}
			return v
		},
	})
	return m
}

func (m *model) now() time.Time {
	m.clock = m.clock.Add(100 * time.Nanosecond)
	return m.clock
}

func (m *model) open(t *testing.T) *Driver {
	t.Helper()
	d, err := Open(Options{Mapper: m.f, Sleep: m.f.Sleep, Now: m.now})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestFan(t *testing.T) {
	m := newModel(16)
	m.f.Map(BlockGPIO, GPIOBase, regs.PageSize)
	const overrides = 0x3 << 12 // OUTOVER bits someone set: keep them
	m.f.Poke(BlockGPIO, GPIOCtrl(PinFan), overrides|FuncselNull)
	d := m.open(t)
	if err := d.SetFanPercent(10); !errors.Is(err, hardware.ErrNotSupported) {
		t.Fatalf("fan before StartFan: %v", err)
	}
	if err := d.StartFan(); err != nil {
		t.Fatal(err)
	}
	if got := m.f.Peek(BlockGPIO, GPIOCtrl(PinFan)); got != overrides|FuncselFan {
		t.Errorf("GPIO12 CTRL %#x, want funcsel a0 with the other bits kept", got)
	}
	want := active{global: ChanEnable(ChanFan)}
	want.ctrl[ChanFan] = CtrlFIFOPopMask | ModeTrailingEdge
	want.rng[ChanFan] = 1999
	want.duty[ChanFan] = 2000
	if d := cmp.Diff(want, m.act, cmp.AllowUnexported(active{})); d != "" {
		t.Errorf("after StartFan (-want +got):\n%s", d)
	}
	if hz := ClockHz / (m.act.rng[ChanFan] + 1); hz != 25000 {
		t.Errorf("fan at %d Hz, want 25 kHz", hz)
	}
	for p, duty := range map[uint8]uint32{0: 0, 40: 800, 100: 2000} {
		if err := d.SetFanPercent(p); err != nil {
			t.Fatal(err)
		}
		if m.act.duty[ChanFan] != duty {
			t.Errorf("%d %%: latched duty %d, want %d", p, m.act.duty[ChanFan], duty)
		}
	}
	if err := d.SetFanPercent(101); err == nil {
		t.Error("101 % accepted")
	}
}

func TestLEDFrame(t *testing.T) {
	m := newModel(16)
	d := m.open(t)
	if err := d.StartFan(); err != nil {
		t.Fatal(err)
	}
	if err := d.SetFanPercent(40); err != nil {
		t.Fatal(err)
	}
	fan := m.act
	m.f.Reset()
	if err := d.SetLEDs(hardware.Color{R: 0xff, G: 0x80}, hardware.Color{G: 0x10, B: 0xfe}); err != nil {
		t.Fatalf("%v\n%s", err, regstest.Dump(m.f.Log()))
	}
	if len(m.errors) > 0 {
		t.Fatal(m.errors)
	}

	// FIFO words: two per bit, R, G, B per LED, top first, two low words.
	pushed := m.f.Writes(BlockPWM, RegDutyFIFO)
	if len(pushed) != 6*8*2+TrailingWords {
		t.Fatalf("%d words pushed, want %d", len(pushed), 6*8*2+TrailingWords)
	}
	if d := cmp.Diff([]uint32{0xffffffff, 0xff000000, 0xffffffff, 0xff000000}, pushed[:4]); d != "" {
		t.Errorf("first words (a 1 bit each) (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]uint32{0xfffff000, 0, 0, 0}, pushed[len(pushed)-4:]); d != "" {
		t.Errorf("last words (a 0 bit, then low) (-want +got):\n%s", d)
	}
	var onLED []uint32
	for _, s := range m.wire {
		if s.ledFunc != FuncselLED {
			t.Fatalf("word %#x shifted out with GPIO18 on function %d", s.word, s.ledFunc)
		}
		if s.ctrl&7 != ModeSerializer || s.rng != LEDRange {
			t.Fatalf("word %#x shifted out in mode %d range %d", s.word, s.ctrl&7, s.rng)
		}
		onLED = append(onLED, s.word)
	}
	wantBytes := []byte{0xff, 0x80, 0, 0, 0x10, 0xfe}
	// RANGE 31 is 32 sub-bits a word if RANGE counts like the M/S period
	// (pwm-rp1), 31 if it were the bit count: both must read right.
	for _, bits := range []int{32, 31} {
		got, err := ws2812.Decode(ws2812.Serializer{ClockHz: ClockHz, WordBits: bits}, onLED)
		if err != nil {
			t.Fatalf("%d-bit words: %v", bits, err)
		}
		if d := cmp.Diff(wantBytes, got); d != "" {
			t.Errorf("%d-bit words: LEDs read (-want +got):\n%s", bits, d)
		}
	}

	// GPIO18: on the PWM for the frame, then off; the line held low for
	// the reset time before the channel starts.
	var funcs []uint32
	for _, a := range m.f.Log() {
		if a.Kind == regstest.Write && a.Block == BlockGPIO && a.Off == GPIOCtrl(PinLED) {
			funcs = append(funcs, a.Val&FuncselMask)
		}
	}
	if d := cmp.Diff([]uint32{FuncselLED, FuncselNull}, funcs); d != "" {
		t.Errorf("GPIO18 functions (-want +got):\n%s", d)
	}
	muxed, waited := false, false
	for _, a := range m.f.Log() {
		switch {
		case a.Kind == regstest.Write && a.Block == BlockGPIO && a.Off == GPIOCtrl(PinLED) && a.Val&FuncselMask == FuncselLED:
			muxed = true
		case a.Kind == regstest.Pause && muxed && a.Pause >= ws2812.Reset:
			waited = true
		case a.Kind == regstest.Write && a.Block == BlockPWM && a.Off == RegGlobal && a.Val&ChanEnable(ChanLED) != 0 && !waited:
			t.Error("channel 2 enabled before the line was low for the reset time")
		}
	}
	// The fan channel is independent and untouched.
	if m.act.global&ChanEnable(ChanFan) == 0 || m.act.duty[ChanFan] != fan.duty[ChanFan] || m.act.ctrl[ChanFan] != fan.ctrl[ChanFan] {
		t.Errorf("fan channel changed by the frame: %+v, was %+v", m.act, fan)
	}
	if m.act.global&ChanEnable(ChanLED) != 0 {
		t.Error("channel 2 left enabled")
	}
}

func TestFIFONeverDrains(t *testing.T) {
	m := newModel(16)
	d := m.open(t)
	m.stuck = true
	err := d.SetLEDs(hardware.Color{R: 1}, hardware.Color{})
	if err == nil {
		t.Fatal("a stuck FIFO reported success")
	}
	if got := m.f.Peek(BlockGPIO, GPIOCtrl(PinLED)) & FuncselMask; got != FuncselNull {
		t.Errorf("GPIO18 left on function %d after the error", got)
	}
	if m.act.global&ChanEnable(ChanLED) != 0 {
		t.Error("channel 2 left enabled after the error")
	}
	if len(m.errors) > 0 {
		t.Errorf("FIFO overflowed: %v", m.errors)
	}
}

func TestDevMemRefused(t *testing.T) {
	f := regstest.New()
	f.MapErr = fmt.Errorf("%w: mapping: operation not permitted", regs.ErrUnavailable)
	if _, err := Open(Options{Mapper: f}); !errors.Is(err, regs.ErrUnavailable) {
		t.Fatalf("err = %v", err)
	}
}
