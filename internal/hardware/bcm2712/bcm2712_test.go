package bcm2712_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kubeblade/kubeblade/internal/hardware"
	"github.com/kubeblade/kubeblade/internal/hardware/bcm2712"
	"github.com/kubeblade/kubeblade/internal/hardware/bcm2712/bcm2712test"
	"github.com/kubeblade/kubeblade/internal/hardware/regs"
	"github.com/kubeblade/kubeblade/internal/hardware/regs/regstest"
	"github.com/kubeblade/kubeblade/internal/hardware/ws2812"
)

type model struct{ *bcm2712test.Model }

func newModel(depth int) *model { return &model{bcm2712test.New(depth)} }

func (m *model) open(t *testing.T) *bcm2712.Driver {
	t.Helper()
	d, err := bcm2712.Open(bcm2712.Options{Mapper: m.File, Sleep: m.File.Sleep, Now: m.Now})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestFan(t *testing.T) {
	m := newModel(16)
	m.File.Map(bcm2712.BlockGPIO, bcm2712.GPIOBase, regs.PageSize)
	const overrides = 0x3 << 12 // OUTOVER bits someone set: keep them
	m.File.Poke(bcm2712.BlockGPIO, bcm2712.GPIOCtrl(bcm2712.PinFan), overrides|bcm2712.FuncselNull)
	d := m.open(t)
	if err := d.SetFanPercent(10); !errors.Is(err, hardware.ErrNotSupported) {
		t.Fatalf("fan before StartFan: %v", err)
	}
	if err := d.StartFan(); err != nil {
		t.Fatal(err)
	}
	if got := m.File.Peek(bcm2712.BlockGPIO, bcm2712.GPIOCtrl(bcm2712.PinFan)); got != overrides|bcm2712.FuncselFan {
		t.Errorf("GPIO12 CTRL %#x, want funcsel a0 with the other bits kept", got)
	}
	want := bcm2712test.Active{Global: bcm2712.ChanEnable(bcm2712.ChanFan)}
	want.Ctrl[bcm2712.ChanFan] = bcm2712.CtrlFIFOPopMask | bcm2712.ModeTrailingEdge
	want.Range[bcm2712.ChanFan] = 1999
	want.Duty[bcm2712.ChanFan] = 2000
	if d := cmp.Diff(want, m.Active); d != "" {
		t.Errorf("after StartFan (-want +got):\n%s", d)
	}
	if hz := bcm2712.ClockHz / (m.Active.Range[bcm2712.ChanFan] + 1); hz != 25000 {
		t.Errorf("fan at %d Hz, want 25 kHz", hz)
	}
	for p, duty := range map[uint8]uint32{0: 0, 40: 800, 100: 2000} {
		if err := d.SetFanPercent(p); err != nil {
			t.Fatal(err)
		}
		if m.Active.Duty[bcm2712.ChanFan] != duty {
			t.Errorf("%d %%: latched duty %d, want %d", p, m.Active.Duty[bcm2712.ChanFan], duty)
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
	fan := m.Active
	m.File.Reset()
	if err := d.SetLEDs(hardware.Color{R: 0xff, G: 0x80}, hardware.Color{G: 0x10, B: 0xfe}); err != nil {
		t.Fatalf("%v\n%s", err, regstest.Dump(m.File.Log()))
	}
	if len(m.Errors) > 0 {
		t.Fatal(m.Errors)
	}

	// FIFO words: two per bit, R, G, B per LED, top first, two low words.
	pushed := m.File.Writes(bcm2712.BlockPWM, bcm2712.RegDutyFIFO)
	if len(pushed) != 6*8*2+bcm2712.TrailingWords {
		t.Fatalf("%d words pushed, want %d", len(pushed), 6*8*2+bcm2712.TrailingWords)
	}
	if d := cmp.Diff([]uint32{0xffffffff, 0xff000000, 0xffffffff, 0xff000000}, pushed[:4]); d != "" {
		t.Errorf("first words (a 1 bit each) (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]uint32{0xfffff000, 0, 0, 0}, pushed[len(pushed)-4:]); d != "" {
		t.Errorf("last words (a 0 bit, then low) (-want +got):\n%s", d)
	}
	var onLED []uint32
	for _, s := range m.Wire {
		if s.LEDFunc != bcm2712.FuncselLED {
			t.Fatalf("word %#x shifted out with GPIO18 on function %d", s.Word, s.LEDFunc)
		}
		if s.Ctrl&7 != bcm2712.ModeSerializer || s.Range != bcm2712.LEDRange {
			t.Fatalf("word %#x shifted out in mode %d range %d", s.Word, s.Ctrl&7, s.Range)
		}
		onLED = append(onLED, s.Word)
	}
	wantBytes := []byte{0xff, 0x80, 0, 0, 0x10, 0xfe}
	// RANGE 31 is 32 sub-bits a word if RANGE counts like the M/S period
	// (pwm-rp1), 31 if it were the bit count: both must read right.
	for _, bits := range []int{32, 31} {
		got, err := ws2812.Decode(ws2812.Serializer{ClockHz: bcm2712.ClockHz, WordBits: bits}, onLED)
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
	for _, a := range m.File.Log() {
		if a.Kind == regstest.Write && a.Block == bcm2712.BlockGPIO && a.Off == bcm2712.GPIOCtrl(bcm2712.PinLED) {
			funcs = append(funcs, a.Val&bcm2712.FuncselMask)
		}
	}
	if d := cmp.Diff([]uint32{bcm2712.FuncselLED, bcm2712.FuncselNull}, funcs); d != "" {
		t.Errorf("GPIO18 functions (-want +got):\n%s", d)
	}
	muxed, waited := false, false
	for _, a := range m.File.Log() {
		switch {
		case a.Kind == regstest.Write && a.Block == bcm2712.BlockGPIO && a.Off == bcm2712.GPIOCtrl(bcm2712.PinLED) && a.Val&bcm2712.FuncselMask == bcm2712.FuncselLED:
			muxed = true
		case a.Kind == regstest.Pause && muxed && a.Pause >= ws2812.Reset:
			waited = true
		case a.Kind == regstest.Write && a.Block == bcm2712.BlockPWM && a.Off == bcm2712.RegGlobal && a.Val&bcm2712.ChanEnable(bcm2712.ChanLED) != 0 && !waited:
			t.Error("channel 2 enabled before the line was low for the reset time")
		}
	}
	// The fan channel is independent and untouched.
	if m.Active.Global&bcm2712.ChanEnable(bcm2712.ChanFan) == 0 || m.Active.Duty[bcm2712.ChanFan] != fan.Duty[bcm2712.ChanFan] || m.Active.Ctrl[bcm2712.ChanFan] != fan.Ctrl[bcm2712.ChanFan] {
		t.Errorf("fan channel changed by the frame: %+v, was %+v", m.Active, fan)
	}
	if m.Active.Global&bcm2712.ChanEnable(bcm2712.ChanLED) != 0 {
		t.Error("channel 2 left enabled")
	}
}

func TestFIFONeverDrains(t *testing.T) {
	m := newModel(16)
	d := m.open(t)
	m.Stuck = true
	err := d.SetLEDs(hardware.Color{R: 1}, hardware.Color{})
	if err == nil {
		t.Fatal("a stuck FIFO reported success")
	}
	if got := m.File.Peek(bcm2712.BlockGPIO, bcm2712.GPIOCtrl(bcm2712.PinLED)) & bcm2712.FuncselMask; got != bcm2712.FuncselNull {
		t.Errorf("GPIO18 left on function %d after the error", got)
	}
	if m.Active.Global&bcm2712.ChanEnable(bcm2712.ChanLED) != 0 {
		t.Error("channel 2 left enabled after the error")
	}
	if len(m.Errors) > 0 {
		t.Errorf("FIFO overflowed: %v", m.Errors)
	}
}

func TestDevMemRefused(t *testing.T) {
	f := regstest.New()
	f.MapErr = fmt.Errorf("%w: mapping: operation not permitted", regs.ErrUnavailable)
	if _, err := bcm2712.Open(bcm2712.Options{Mapper: f}); !errors.Is(err, regs.ErrUnavailable) {
		t.Fatalf("err = %v", err)
	}
}

// TestPWMClock: Open reads CLK_PWM0 and refuses anything but the crystal
// undivided, saying why, before it maps or writes anything else.
func TestPWMClock(t *testing.T) {
	const on, xosc = bcm2712.ClkCtrlEnable, bcm2712.ClkAuxsrcXOSC << bcm2712.ClkCtrlAuxsrcShift
	for name, tc := range map[string]struct {
		ctrl, divInt, divFrac uint32
		want                  string // in the error; "" opens
	}{
		"on, crystal, divided by 1":        {ctrl: on | xosc, divInt: 1},
		"other control bits are kept":      {ctrl: on | xosc | 1<<12, divInt: 1},
		"off (rp1_pwm0 disabled)":          {ctrl: xosc, divInt: 1, want: "not running (CLK_PWM0_CTRL 0x40)"},
		"reset value":                      {want: "not running"},
		"from pll_audio_pri_ph":            {ctrl: on, divInt: 1, want: "clock source 0, not the 50 MHz crystal"},
		"from pll_video_sec":               {ctrl: on | 1<<bcm2712.ClkCtrlAuxsrcShift, divInt: 2, want: "clock source 1"},
		"crystal divided by 2":             {ctrl: on | xosc, divInt: 2, want: "25000000 Hz (the crystal divided by 2.0000), not 50000000 Hz"},
		"crystal divided by 1.5":           {ctrl: on | xosc, divInt: 1, divFrac: 0x8000 << 16, want: "33333333 Hz"},
		"a fraction below DIV_FRAC's 16th": {ctrl: on | xosc, divInt: 1, divFrac: 0xffff},
		"DIV_INT 0 is 2^16":                {ctrl: on | xosc, divInt: 0, want: "762 Hz"},
	} {
		t.Run(name, func(t *testing.T) {
			m := newModel(16)
			m.SetPWMClock(tc.ctrl, tc.divInt, tc.divFrac)
			_, err := bcm2712.Open(bcm2712.Options{Mapper: m.File, Sleep: m.File.Sleep, Now: m.Now})
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, bcm2712.ErrClock) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrClock saying %q", err, tc.want)
			}
			for _, a := range m.File.Log() {
				if a.Kind != regstest.Read || a.Block != bcm2712.BlockClocks {
					t.Errorf("%v with an unusable clock", a)
				}
			}
		})
	}
}
