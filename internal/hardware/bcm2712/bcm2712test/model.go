// Package bcm2712test models the RP1 register blocks the bcm2712 register
// driver uses, on a regstest register file.
//
// The model knows RP1 from its sources, not from the driver: every offset,
// bit, code and address below is a literal with the source it was read from
// beside it, and the driver's tests pin each driver constant to these
// (TestRegisterFacts). The sources:
//
//   - [pwm-rp1]: the RP1 PWM driver as posted for mainline,
//     intel-lab-lkp/linux drivers/pwm/pwm-rp1.c at
//     390a752308e502d408b0d66b1955cf3b69c44d89 (RP1_PWM_GLB_CTRL,
//     CHANNEL_ENABLE, SET_UPDATE, RP1_PWM_CHAN_CTRL/RANGE/PHASE/DUTY,
//     FIFO_POP_MASK, the MODE field and its modes), agreeing with
//     raspberrypi/linux drivers/pwm/pwm-rp1.c at
//     8cdadfafb1e060ddf58fca1d5478b2154e90613e;
//   - [circle]: rsta2/circle lib/sound/pwmsoundbasedevice-rp1.cpp at
//     6500228119edcfbaa13486dcc762a12aee1b6936 (PWM_FIFO_CTRL and its
//     LEVEL, FLUSH, FLUSH_DONE; PWM_DUTY_FIFO; PWM_CHAN_CTRL_USEFIFO;
//     GPIO12 alternate function 0 on channel 0, GPIO18 alternate function
//     3 on channel 2), which Linux's PWM driver does not use;
//   - [pinctrl-rp1.c]: torvalds/linux drivers/pinctrl/pinctrl-rp1.c at
//     2ace52718376fdb56aca863da2eebe70d7e2ddb1 (per pin 8 bytes, CTRL at
//     +4 with FUNCSEL bits 4:0, RP1_FSEL_NONE_HW, the pin function table);
//   - [clk-rp1.c]: torvalds/linux drivers/clk/clk-rp1.c at
//     cb9f145f638d7afa633632a9290d6ad06caeb8ee (CLK_PWM0_CTRL, _DIV_INT,
//     _DIV_FRAC, CLK_CTRL_ENABLE, CLK_CTRL_AUXSRC_MASK, clk_pwm0_parents
//     with xosc third, rp1_clock_recalc_rate);
//   - [rp1.dtsi]: raspberrypi/linux arch/arm64/boot/dts/broadcom/rp1.dtsi
//     at a2cec388d47b3955b750c8e46e160fb5974c1b99 (clocks@18000,
//     pwm@98000 asking for 50000000, gpio@d0000, the crystal "Must match
//     the XOSC frequency" 50000000);
//   - [old agent]: compute-blade-community/compute-blade-agent
//     pkg/hal/hal_bcm2712.go at 422cf18 (the RP1 BAR at 0x1f00000000, where
//     the Raspberry Pi firmware places it);
//   - the blade's wiring: docs/hardware.md (GPIO12 fan, GPIO18 LEDs).
package bcm2712test

import (
	"fmt"
	"time"

	"github.com/kubeblade/kubeblade/internal/hardware/regs"
	"github.com/kubeblade/kubeblade/internal/hardware/regs/regstest"
)

// Register blocks: the names the register file knows them by and their
// physical addresses, the RP1 BAR plus RP1's own offsets.
const (
	BlockClocks = "rp1-clocks"
	BlockGPIO   = "rp1-gpio"
	BlockPWM    = "rp1-pwm0"

	RP1Base    = 0x1F00000000           // [old agent] rp1BarBase
	ClocksBase = 0x1F00000000 + 0x18000 // [rp1.dtsi] clocks@18000
	GPIOBase   = 0x1F00000000 + 0xD0000 // [rp1.dtsi] gpio@d0000 (IO_BANK0)
	PWM0Base   = 0x1F00000000 + 0x98000 // [rp1.dtsi] pwm@98000
)

// CLK_PWM0 in the clock controller.
const (
	RegClkPWM0Ctrl    = 0x74 // [clk-rp1.c] CLK_PWM0_CTRL (CLK_PWM0_OFFSET 0x00074)
	RegClkPWM0DivInt  = 0x78 // [clk-rp1.c] CLK_PWM0_DIV_INT
	RegClkPWM0DivFrac = 0x7c // [clk-rp1.c] CLK_PWM0_DIV_FRAC

	ClkCtrlEnable      = 1 << 11    // [clk-rp1.c] CLK_CTRL_ENABLE BIT(11)
	ClkCtrlAuxsrcShift = 5          // [clk-rp1.c] CLK_CTRL_AUXSRC_MASK GENMASK(9, 5)
	ClkCtrlAuxsrcMask  = 0x3e0      // GENMASK(9, 5)
	ClkAuxsrcXOSC      = 2          // [clk-rp1.c] clk_pwm0_parents: { -1, pll_video_sec, xosc (index 0) }
	XOSCHz             = 50_000_000 // [rp1.dtsi] "Must match the XOSC frequency"
	PWM0Hz             = 50_000_000 // [rp1.dtsi] pwm@98000 assigned-clock-rates
)

// GPIO: each pin has 8 bytes, STATUS then CTRL ([pinctrl-rp1.c]
// reg_off = bank->gpio_offset + offset * sizeof(u32) * 2, the CTRL fields
// at 0x0004).
const (
	FuncselMask = 0x1f // [pinctrl-rp1.c] RP1_GPIO_CTRL_FUNCSEL REG_FIELD(0x0004, 0, 4)
	FuncselNull = 0x1f // [pinctrl-rp1.c] RP1_FSEL_NONE_HW
	FuncselFan  = 0    // [pinctrl-rp1.c] PIN(12, pwm0, ...): function 0
	FuncselLED  = 3    // [pinctrl-rp1.c] PIN(18, spi1, dpi, i2s0, pwm0, ...): function 3

	PinFan = 12 // docs/hardware.md
	PinLED = 18 // docs/hardware.md
)

// GPIOCtrl is a pin's CTRL register.
func GPIOCtrl(pin int) uint32 { return uint32(pin*8 + 4) }

// PWM0.
const (
	RegGlobal   = 0x00 // [pwm-rp1] RP1_PWM_GLB_CTRL
	RegFIFOCtrl = 0x04 // [circle] PWM_FIFO_CTRL
	RegDutyFIFO = 0x10 // [circle] PWM_DUTY_FIFO

	GlobalSetUpdate = 1 << 31 // [pwm-rp1] RP1_PWM_GLB_CTRL_SET_UPDATE

	FIFOLevelMask = 0x1f   // [circle] PWM_FIFO_CTRL_LEVEL__MASK
	FIFOFlush     = 1 << 5 // [circle] PWM_FIFO_CTRL_FLUSH
	FIFOFlushDone = 1 << 6 // [circle] PWM_FIFO_CTRL_FLUSH_DONE

	CtrlModeMask     = 7      // [pwm-rp1] RP1_PWM_CHAN_CTRL_MODE GENMASK(2, 0)
	ModeTrailingEdge = 1      // [pwm-rp1] RP1_PWM_CHAN_CTRL_MODE_TE_MS
	ModeSerializer   = 4      // [pwm-rp1] RP1_PWM_CHAN_CTRL_MODE_MSB_SER
	CtrlUseFIFO      = 1 << 5 // [circle] PWM_CHAN_CTRL_USEFIFO
	CtrlFIFOPopMask  = 1 << 8 // [pwm-rp1] RP1_PWM_CHAN_CTRL_FIFO_POP_MASK

	ChanFan = 0 // [circle] GPIO12 alternate function 0: channel 0
	ChanLED = 2 // [circle] GPIO18 alternate function 3: channel 2
)

// Per-channel registers ([pwm-rp1]: 0x10 apart).
func RegChanCtrl(c int) uint32 { return uint32(0x014 + c*0x10) } // RP1_PWM_CHAN_CTRL(chan)
func RegRange(c int) uint32    { return uint32(0x018 + c*0x10) } // RP1_PWM_RANGE(chan)
func RegPhase(c int) uint32    { return uint32(0x01C + c*0x10) } // RP1_PWM_PHASE(chan)
func RegDuty(c int) uint32     { return uint32(0x020 + c*0x10) } // RP1_PWM_DUTY(chan)

// ChanEnable is a channel's bit in the global control register ([pwm-rp1]
// RP1_PWM_GLB_CTRL_CHANNEL_ENABLE(chan) BIT(chan)).
func ChanEnable(c int) uint32 { return 1 << c }

// Sent is one FIFO word as channel 2 shifted it out.
type Sent struct {
	Word    uint32
	Range   uint32
	LEDFunc uint32
	Ctrl    uint32
}

// Active is what the PWM runs: the shadow registers are latched by
// SET_UPDATE ([pwm-rp1]: "update the changed registers on the next strobe").
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
	m.SetPWMClock(ClkCtrlEnable|ClkAuxsrcXOSC<<ClkCtrlAuxsrcShift, 1, 0)
	f.SetModel(BlockPWM, regstest.Model{
		OnWrite: func(off, v uint32) (uint32, bool) {
			switch off {
			case RegGlobal:
				if v&GlobalSetUpdate != 0 {
					m.Active.Global = v &^ GlobalSetUpdate
					for c := 0; c < 4; c++ {
						m.Active.Ctrl[c] = f.Peek(BlockPWM, RegChanCtrl(c))
						m.Active.Range[c] = f.Peek(BlockPWM, RegRange(c))
						m.Active.Duty[c] = f.Peek(BlockPWM, RegDuty(c))
					}
				}
				return v &^ GlobalSetUpdate, true
			case RegFIFOCtrl:
				if v&FIFOFlush != 0 {
					m.queue = nil
				}
				return v &^ (FIFOLevelMask | FIFOFlushDone), true
			case RegDutyFIFO:
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
			if off != RegFIFOCtrl {
				return stored
			}
			c := m.Active.Ctrl[ChanLED]
			running := m.Active.Global&ChanEnable(ChanLED) != 0 && c&CtrlUseFIFO != 0
			if running && len(m.queue) > 0 && !m.Stuck {
				m.Wire = append(m.Wire, Sent{Word: m.queue[0], Range: m.Active.Range[ChanLED], Ctrl: c,
					LEDFunc: f.Peek(BlockGPIO, GPIOCtrl(PinLED)) & FuncselMask})
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

// Now is a clock that advances 100 ns a call, for the driver's deadline.
func (m *Model) Now() time.Time {
	m.clock = m.clock.Add(100 * time.Nanosecond)
	return m.clock
}

// SetPWMClock sets CLK_PWM0's control, integer and fractional divider
// registers (without recording accesses).
func (m *Model) SetPWMClock(ctrl, divInt, divFrac uint32) {
	if _, err := m.File.Map(BlockClocks, ClocksBase, regs.PageSize); err != nil {
		panic(err)
	}
	m.File.Poke(BlockClocks, RegClkPWM0Ctrl, ctrl)
	m.File.Poke(BlockClocks, RegClkPWM0DivInt, divInt)
	m.File.Poke(BlockClocks, RegClkPWM0DivFrac, divFrac)
}

// PWM0ClockHz is CLK_PWM0's rate from the crystal for the given divider
// registers ([clk-rp1.c] rp1_clock_recalc_rate: a DIV_INT of 0 counts as
// 2^16; rate = parent << 16 / (DIV_INT << 16 | DIV_FRAC >> 16)).
func PWM0ClockHz(divInt, divFrac uint32) uint64 {
	div := uint64(divInt)
	if div == 0 {
		div = 1 << 16
	}
	div = div<<16 | uint64(divFrac>>16)
	return uint64(XOSCHz) << 16 / div
}
