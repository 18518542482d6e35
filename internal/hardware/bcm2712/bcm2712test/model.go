// Package bcm2712test models the RP1 register blocks the bcm2712 register
// driver uses, on a regstest register file.
package bcm2712test

import (
	"fmt"
	"time"

	"github.com/kubeblade/kubeblade/internal/hardware/bcm2712"
	"github.com/kubeblade/kubeblade/internal/hardware/regs"
	"github.com/kubeblade/kubeblade/internal/hardware/regs/regstest"
)

// Sent is one FIFO word as channel 2 shifted it out.
type Sent struct {
	Word    uint32
	Range   uint32
	LEDFunc uint32
	Ctrl    uint32
}

// Active is what the PWM runs: the shadow registers are latched by
// SET_UPDATE (pwm-rp1: "update the changed registers on the next strobe").
type Active struct {
	Global uint32
	Ctrl   [4]uint32
	Range  [4]uint32
	Duty   [4]uint32
}

// Model makes a register file behave like RP1's PWM0 and GPIO bank 0:
// settings take effect on SET_UPDATE, which reads back as 0; the FIFO takes
// Depth words (more are lost), FLUSH empties it and sets FLUSH_DONE; a
// running FIFO channel shifts one word out per FIFO_CTRL poll.
type Model struct {
	File   *regstest.File
	Depth  int
	Stuck  bool
	Active Active
	Wire   []Sent
	Errors []string

	queue []uint32
	clock time.Time
}

// New returns a model with a FIFO of depth words and PWM0's clock as
// Raspberry Pi's kernel sets it for an enabled rp1_pwm0 node: on, from the
// crystal, divided by 1 (50 MHz).
func New(depth int) *Model {
	m := &Model{File: regstest.New(), Depth: depth, clock: time.Unix(0, 0)}
	f := m.File
	m.SetPWMClock(bcm2712.ClkCtrlEnable|bcm2712.ClkAuxsrcXOSC<<bcm2712.ClkCtrlAuxsrcShift, 1, 0)
	f.SetModel(bcm2712.BlockPWM, regstest.Model{
		OnWrite: func(off, v uint32) (uint32, bool) {
			switch off {
			case bcm2712.RegGlobal:
				if v&bcm2712.GlobalSetUpdate != 0 {
					m.Active.Global = v &^ bcm2712.GlobalSetUpdate
					for c := 0; c < 4; c++ {
						m.Active.Ctrl[c] = f.Peek(bcm2712.BlockPWM, bcm2712.RegChanCtrl(c))
						m.Active.Range[c] = f.Peek(bcm2712.BlockPWM, bcm2712.RegRange(c))
						m.Active.Duty[c] = f.Peek(bcm2712.BlockPWM, bcm2712.RegDuty(c))
					}
				}
				return v &^ bcm2712.GlobalSetUpdate, true
			case bcm2712.RegFIFOCtrl:
				if v&bcm2712.FIFOFlush != 0 {
					m.queue = nil
				}
				return v &^ (bcm2712.FIFOLevelMask | bcm2712.FIFOFlushDone), true
			case bcm2712.RegDutyFIFO:
				if len(m.queue) >= m.Depth {
					m.Errors = append(m.Errors, fmt.Sprintf("FIFO overflow: %#x lost", v))
				} else {
					m.queue = append(m.queue, v)
				}
				return 0, false
			}
			return v, true
		},
		OnRead: func(off, stored uint32) uint32 {
			if off != bcm2712.RegFIFOCtrl {
				return stored
			}
			c := m.Active.Ctrl[bcm2712.ChanLED]
			running := m.Active.Global&bcm2712.ChanEnable(bcm2712.ChanLED) != 0 && c&bcm2712.CtrlUseFIFO != 0
			if running && len(m.queue) > 0 && !m.Stuck {
				m.Wire = append(m.Wire, Sent{Word: m.queue[0], Range: m.Active.Range[bcm2712.ChanLED], Ctrl: c,
					LEDFunc: f.Peek(bcm2712.BlockGPIO, bcm2712.GPIOCtrl(bcm2712.PinLED)) & bcm2712.FuncselMask})
				m.queue = m.queue[1:]
			}
			v := stored&^bcm2712.FIFOLevelMask | uint32(len(m.queue))
			if stored&bcm2712.FIFOFlush != 0 {
				v |= bcm2712.FIFOFlushDone
			}
			return v
		},
	})
	return m
}

// Now is a clock that advances 100 ns a call, for the driver's deadline.
func (m *Model) Now() time.Time {
	m.clock = m.clock.Add(100 * time.Nanosecond)
	return m.clock
}

// SetPWMClock sets CLK_PWM0's control, integer and fractional divider
// registers (without recording accesses).
func (m *Model) SetPWMClock(ctrl, divInt, divFrac uint32) {
	if _, err := m.File.Map(bcm2712.BlockClocks, bcm2712.ClocksBase, regs.PageSize); err != nil {
		panic(err)
	}
	m.File.Poke(bcm2712.BlockClocks, bcm2712.RegClkPWM0Ctrl, ctrl)
	m.File.Poke(bcm2712.BlockClocks, bcm2712.RegClkPWM0DivInt, divInt)
	m.File.Poke(bcm2712.BlockClocks, bcm2712.RegClkPWM0DivFrac, divFrac)
}
