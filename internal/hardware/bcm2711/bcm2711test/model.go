// Package bcm2711test models the BCM2711 register blocks the bcm2711
// register driver uses, on a regstest register file, so tests of the driver
// and of whatever opens it see the peripheral's behaviour and quirks rather
// than plain memory.
package bcm2711test

import (
	"fmt"

	"github.com/kubeblade/kubeblade/internal/hardware/bcm2711"
	"github.com/kubeblade/kubeblade/internal/hardware/regs/regstest"
)

// Sent is one FIFO word as it left the serializer, with the state of the
// pins and the channel at that moment.
type Sent struct {
	Word         uint32
	Range        uint32
	LEDFsel      uint32
	FanFsel      uint32
	Serializing  bool
	ClockRunning bool
}

// Model makes a register file behave like the blocks the driver touches,
// with the quirks that matter (BCM2711 ARM Peripherals §5.4, §8):
//   - the clock manager ignores writes without the 0x5A password, the
//     password does not read back, BUSY follows ENAB and clears a few reads
//     after ENAB is cleared, and source or divisor must not change while
//     BUSY (the datasheet warns of glitches);
//   - the PWM FIFO holds Depth words, a write to a full FIFO sets WERR1 and
//     is lost, CLRF1 empties it and reads back as 0;
//   - a running serializer shifts one FIFO word out per STA poll (time
//     passes while the driver polls) and repeats the last word when empty.
type Model struct {
	File  *regstest.File
	Depth int
	// Stuck stops the serializer from draining.
	Stuck bool
	// Wire is every word shifted out, in order.
	Wire []Sent
	// Errors lists misuse the hardware would punish.
	Errors []string

	queue []uint32
	busy  int
}

// New returns a model with a FIFO of depth words.
func New(depth int) *Model {
	m := &Model{File: regstest.New(), Depth: depth}
	f := m.File
	f.SetModel(bcm2711.BlockClock, regstest.Model{
		OnWrite: func(off, v uint32) (uint32, bool) {
			if v>>24 != 0x5A {
				m.Errors = append(m.Errors, fmt.Sprintf("clock write %#x without password", v))
				return 0, false
			}
			cur := f.Peek(bcm2711.BlockClock, bcm2711.RegPWMCTL)
			busy := cur&bcm2711.ClockBusy != 0
			if off == bcm2711.RegPWMDIV && busy {
				m.Errors = append(m.Errors, "divisor changed while the clock was busy")
			}
			if off != bcm2711.RegPWMCTL {
				return v & 0xffffff, true
			}
			if busy && v&bcm2711.ClockSrcMask != cur&bcm2711.ClockSrcMask {
				m.Errors = append(m.Errors, "source changed while the clock was busy")
			}
			v &= 0xffffff
			switch {
			case v&bcm2711.ClockEnab != 0:
				v |= bcm2711.ClockBusy
			case busy:
				m.busy = 3
				v |= bcm2711.ClockBusy
			}
			return v, true
		},
		OnRead: func(off, stored uint32) uint32 {
			if off == bcm2711.RegPWMCTL && stored&bcm2711.ClockEnab == 0 && stored&bcm2711.ClockBusy != 0 {
				if m.busy--; m.busy <= 0 {
					stored &^= bcm2711.ClockBusy
					f.Poke(bcm2711.BlockClock, bcm2711.RegPWMCTL, stored)
				}
			}
			return stored
		},
	})
	f.SetModel(bcm2711.BlockPWM, regstest.Model{
		OnWrite: func(off, v uint32) (uint32, bool) {
			switch off {
			case bcm2711.RegCTL:
				if v&bcm2711.CtlCLRF1 != 0 {
					m.queue = nil
				}
				return v &^ bcm2711.CtlCLRF1, true
			case bcm2711.RegFIF1:
				if len(m.queue) >= m.Depth {
					f.Poke(bcm2711.BlockPWM, bcm2711.RegSTA, f.Peek(bcm2711.BlockPWM, bcm2711.RegSTA)|bcm2711.StaWERR1)
					m.Errors = append(m.Errors, fmt.Sprintf("FIFO write %#x lost: FIFO full", v))
					return 0, false
				}
				m.queue = append(m.queue, v)
				return 0, false
			case bcm2711.RegSTA:
				return f.Peek(bcm2711.BlockPWM, bcm2711.RegSTA) &^ v, true // write 1 to clear
			}
			return v, true
		},
		OnRead: func(off, stored uint32) uint32 {
			if off != bcm2711.RegSTA {
				return stored
			}
			const run = bcm2711.CtlPWEN1 | bcm2711.CtlMODE1 | bcm2711.CtlUSEF1
			if f.Peek(bcm2711.BlockPWM, bcm2711.RegCTL)&run == run && len(m.queue) > 0 && !m.Stuck {
				m.send(m.queue[0])
				m.queue = m.queue[1:]
			}
			sta := stored &^ (bcm2711.StaFULL1 | bcm2711.StaEMPT1)
			if len(m.queue) >= m.Depth {
				sta |= bcm2711.StaFULL1
			}
			if len(m.queue) == 0 {
				sta |= bcm2711.StaEMPT1
			}
			return sta
		},
	})
	return m
}

// Fsel is a pin's function in a GPFSEL1 value.
func Fsel(gpfsel1 uint32, pin int) uint32 { return gpfsel1 >> ((pin - 10) * 3) & 7 }

func (m *Model) send(w uint32) {
	f := m.File
	fsel := f.Peek(bcm2711.BlockGPIO, bcm2711.RegGPFSEL1)
	ctl := f.Peek(bcm2711.BlockPWM, bcm2711.RegCTL)
	m.Wire = append(m.Wire, Sent{
		Word:         w,
		Range:        f.Peek(bcm2711.BlockPWM, bcm2711.RegRNG1),
		LEDFsel:      Fsel(fsel, bcm2711.PinLED),
		FanFsel:      Fsel(fsel, bcm2711.PinFan),
		Serializing:  ctl&bcm2711.CtlMODE1 != 0,
		ClockRunning: f.Peek(bcm2711.BlockClock, bcm2711.RegPWMCTL)&bcm2711.ClockEnab != 0,
	})
}

// LEDWords are the words the LEDs on GPIO18 received; a word that reached
// them with the channel set up otherwise than for a frame is an error.
func (m *Model) LEDWords() ([]uint32, error) {
	var out []uint32
	for _, s := range m.Wire {
		if s.LEDFsel != bcm2711.FselAlt5 {
			continue
		}
		if !s.Serializing || s.Range != bcm2711.LEDWordBits || !s.ClockRunning {
			return nil, fmt.Errorf("word %#x reached the LEDs with RNG %d, serializer %v, clock %v", s.Word, s.Range, s.Serializing, s.ClockRunning)
		}
		out = append(out, s.Word)
	}
	return out, nil
}
