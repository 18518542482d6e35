// Package bcm2711test models the BCM2711 register blocks the bcm2711
// register driver uses, on a regstest register file, so tests of the driver
// and of whatever opens it see the peripheral's behaviour and quirks rather
// than plain memory.
//
// The model knows the hardware from its sources, not from the driver: every
// offset, bit and address below is a literal with the source it was read
// from beside it, and the driver's tests pin each driver constant to these
// (TestRegisterFacts), so a wrong offset in the driver fails rather than
// being modelled at the same wrong place. The sources:
//
//   - [pwm-bcm2835.c]: torvalds/linux drivers/pwm/pwm-bcm2835.c at
//     327ef99473999967101c6ce9f4797d3ebd63fcb9 (PWM_CONTROL, PERIOD(x),
//     DUTY(x), PWM_ENABLE, PWM_MODE, PWM_POLARITY);
//   - [pinctrl-bcm2835.c]: torvalds/linux drivers/pinctrl/bcm/pinctrl-bcm2835.c
//     at d5984d29afdb201ecc0500a2bb3b61d7fc6b7c03 (GPFSEL0, GPCLR0,
//     FSEL_REG, FSEL_SHIFT) and include/dt-bindings/pinctrl/bcm2835.h at
//     bb986384d1d63a60c682b8bfe35fc1119be5f141 (BCM2835_FSEL_*);
//   - [clk-bcm2835.c]: torvalds/linux drivers/clk/bcm/clk-bcm2835.c at
//     ff18ffb1f81db091e916bb3afc4a264219f840ea (CM_PASSWORD, CM_PWMCTL,
//     CM_PWMDIV, CM_ENABLE, CM_BUSY, CM_SRC_MASK, CM_SRC_OSC,
//     CM_DIV_FRAC_BITS);
//   - [bcm2711.dtsi]: torvalds/linux arch/arm/boot/dts/broadcom/bcm2711.dtsi
//     at d5984d29afdb201ecc0500a2bb3b61d7fc6b7c03 (soc ranges 0x7e000000 ->
//     0xfe000000, clk_osc 54000000, pwm0_0_gpio12 alt0, pwm0_0_gpio18
//     alt5) and bcm283x.dtsi at 7051309819b29c8aa2d4f4dddcbe57025a2f861f
//     (cprman@7e101000, gpio@7e200000, pwm@7e20c000);
//   - [rpi_ws281x]: jgarff/rpi_ws281x pwm.h at
//     ef563cbcf7c00579caec5c3f7975982ab5704351 (the serializer's CTL bits,
//     STA, FIF1) and clk.h at 0e05a56b964962216b626598b1b80dfa0d76919f
//     (CM_PWM_CTL_FLIP, CM_PWM_CTL_MASH), which Linux's PWM driver does not
//     use;
//   - the blade's wiring: docs/hardware.md (GPIO12 fan, GPIO18 LEDs).
package bcm2711test

import (
	"fmt"

	"github.com/kubeblade/kubeblade/internal/hardware/regs/regstest"
)

// Register blocks: the names the register file knows them by and the ARM
// physical addresses in the low-peripheral mode Raspberry Pi OS boots.
const (
	BlockGPIO  = "gpio"
	BlockPWM   = "pwm0"
	BlockClock = "cm"

	PeriBase  = 0xFE000000 // [bcm2711.dtsi] soc ranges: bus 0x7e000000 at 0xfe000000
	GPIOBase  = 0xFE200000 // [bcm283x.dtsi] gpio@7e200000
	PWM0Base  = 0xFE20C000 // [bcm283x.dtsi] pwm@7e20c000
	ClockBase = 0xFE101000 // [bcm283x.dtsi] cprman@7e101000
)

// GPIO function select.
const (
	RegGPFSEL1 = 0x04 // [pinctrl-bcm2835.c] FSEL_REG(p) = GPFSEL0 (0x0) + (p / 10) * 4: GPIO10–19
	RegGPCLR0  = 0x28 // [pinctrl-bcm2835.c] GPCLR0

	FselInput  = 0 // [pinctrl-bcm2835.c] BCM2835_FSEL_GPIO_IN
	FselOutput = 1 // BCM2835_FSEL_GPIO_OUT
	FselAlt5   = 2 // BCM2835_FSEL_ALT5: PWM0 channel 0 on GPIO18 ([bcm2711.dtsi] pwm0_0_gpio18)
	FselAlt0   = 4 // BCM2835_FSEL_ALT0: PWM0 channel 0 on GPIO12 ([bcm2711.dtsi] pwm0_0_gpio12)

	PinFan = 12 // docs/hardware.md
	PinLED = 18 // docs/hardware.md
)

// PWM0: channel 0 (Linux's numbering; the datasheet's channel 1, hence
// the 1 in the bit names).
const (
	RegCTL  = 0x00 // [pwm-bcm2835.c] PWM_CONTROL
	RegSTA  = 0x04 // [rpi_ws281x] pwm_t.sta
	RegRNG1 = 0x10 // [pwm-bcm2835.c] PERIOD(0)
	RegDAT1 = 0x14 // [pwm-bcm2835.c] DUTY(0)
	RegFIF1 = 0x18 // [rpi_ws281x] pwm_t.fif1

	CtlPWEN1 = 1 << 0 // [pwm-bcm2835.c] PWM_ENABLE
	CtlMODE1 = 1 << 1 // [rpi_ws281x] RPI_PWM_CTL_MODE1: serializer
	CtlRPTL1 = 1 << 2 // [rpi_ws281x] RPI_PWM_CTL_RPTL1
	CtlSBIT1 = 1 << 3 // [rpi_ws281x] RPI_PWM_CTL_SBIT1
	CtlPOLA1 = 1 << 4 // [pwm-bcm2835.c] PWM_POLARITY
	CtlUSEF1 = 1 << 5 // [rpi_ws281x] RPI_PWM_CTL_USEF1
	CtlCLRF1 = 1 << 6 // [rpi_ws281x] RPI_PWM_CTL_CLRF1
	CtlMSEN1 = 1 << 7 // [pwm-bcm2835.c] PWM_MODE (0x80): mark-space

	StaFULL1 = 1 << 0 // [rpi_ws281x] RPI_PWM_STA_FULL1
	StaEMPT1 = 1 << 1 // [rpi_ws281x] RPI_PWM_STA_EMPT1
	StaWERR1 = 1 << 2 // [rpi_ws281x] RPI_PWM_STA_WERR1
	StaBERR  = 1 << 8 // [rpi_ws281x] RPI_PWM_STA_BERR
)

// Clock manager: the PWM clock.
const (
	RegPWMCTL = 0xa0 // [clk-bcm2835.c] CM_PWMCTL
	RegPWMDIV = 0xa4 // [clk-bcm2835.c] CM_PWMDIV

	ClockPassword = 0x5A << 24 // [clk-bcm2835.c] CM_PASSWORD 0x5a000000
	ClockSrcMask  = 0xf        // [clk-bcm2835.c] CM_SRC_MASK
	ClockSrcOsc   = 1          // [clk-bcm2835.c] CM_SRC_OSC
	ClockEnab     = 1 << 4     // [clk-bcm2835.c] CM_ENABLE
	ClockBusy     = 1 << 7     // [clk-bcm2835.c] CM_BUSY
	ClockFlip     = 1 << 8     // [rpi_ws281x] CM_PWM_CTL_FLIP
	ClockMash     = 3 << 9     // [rpi_ws281x] CM_PWM_CTL_MASH(val) = (val & 0x3) << 9
	DivIntShift   = 12         // [clk-bcm2835.c] CM_DIV_FRAC_BITS: the integer divisor above 12 fraction bits

	OscillatorHz = 54_000_000 // [bcm2711.dtsi] &clk_osc clock-frequency
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
// with the quirks that matter:
//   - the clock manager ignores writes without the 0x5A password, the
//     password does not read back, BUSY follows ENAB and clears a few reads
//     after ENAB is cleared, and source or divisor must not change while
//     BUSY (the clock manager glitches; Linux's clk-bcm2835.c waits for
//     !BUSY before changing them);
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
	f.SetModel(BlockClock, regstest.Model{
		OnWrite: func(off, v uint32) (uint32, bool) {
			if v>>24 != ClockPassword>>24 {
				m.Errors = append(m.Errors, fmt.Sprintf("clock write %#x without password", v))
				return 0, false
			}
			cur := f.Peek(BlockClock, RegPWMCTL)
			busy := cur&ClockBusy != 0
			if off == RegPWMDIV && busy {
				m.Errors = append(m.Errors, "divisor changed while the clock was busy")
			}
			if off != RegPWMCTL {
				return v & 0xffffff, true
			}
			if busy && v&ClockSrcMask != cur&ClockSrcMask {
				m.Errors = append(m.Errors, "source changed while the clock was busy")
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
		},
		OnRead: func(off, stored uint32) uint32 {
			if off == RegPWMCTL && stored&ClockEnab == 0 && stored&ClockBusy != 0 {
				if m.busy--; m.busy <= 0 {
					stored &^= ClockBusy
					f.Poke(BlockClock, RegPWMCTL, stored)
				}
			}
			return stored
		},
	})
	f.SetModel(BlockPWM, regstest.Model{
		OnWrite: func(off, v uint32) (uint32, bool) {
			switch off {
			case RegCTL:
				if v&CtlCLRF1 != 0 {
					m.queue = nil
				}
				return v &^ CtlCLRF1, true
			case RegFIF1:
				if len(m.queue) >= m.Depth {
					f.Poke(BlockPWM, RegSTA, f.Peek(BlockPWM, RegSTA)|StaWERR1)
					m.Errors = append(m.Errors, fmt.Sprintf("FIFO write %#x lost: FIFO full", v))
					return 0, false
				}
				m.queue = append(m.queue, v)
				return 0, false
			case RegSTA:
				return f.Peek(BlockPWM, RegSTA) &^ v, true // write 1 to clear
			}
			return v, true
		},
		OnRead: func(off, stored uint32) uint32 {
			if off != RegSTA {
				return stored
			}
			const run = CtlPWEN1 | CtlMODE1 | CtlUSEF1
			if f.Peek(BlockPWM, RegCTL)&run == run && len(m.queue) > 0 && !m.Stuck {
				m.send(m.queue[0])
				m.queue = m.queue[1:]
			}
			sta := stored &^ (StaFULL1 | StaEMPT1)
			if len(m.queue) >= m.Depth {
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

// Fsel is a pin's function in a GPFSEL1 value: three bits per pin
// ([pinctrl-bcm2835.c] FSEL_SHIFT(p) = (p % 10) * 3).
func Fsel(gpfsel1 uint32, pin int) uint32 { return gpfsel1 >> ((pin % 10) * 3) & 7 }

func (m *Model) send(w uint32) {
	f := m.File
	fsel := f.Peek(BlockGPIO, RegGPFSEL1)
	ctl := f.Peek(BlockPWM, RegCTL)
	m.Wire = append(m.Wire, Sent{
		Word:         w,
		Range:        f.Peek(BlockPWM, RegRNG1),
		LEDFsel:      Fsel(fsel, PinLED),
		FanFsel:      Fsel(fsel, PinFan),
		Serializing:  ctl&CtlMODE1 != 0,
		ClockRunning: f.Peek(BlockClock, RegPWMCTL)&ClockEnab != 0,
	})
}

// LEDWords are the words the LEDs on GPIO18 received; a word that reached
// them with the channel set up otherwise than for a frame (wordBits per
// word: the frame's range) is an error.
func (m *Model) LEDWords(wordBits uint32) ([]uint32, error) {
	var out []uint32
	for _, s := range m.Wire {
		if s.LEDFsel != FselAlt5 {
			continue
		}
		if !s.Serializing || s.Range != wordBits || !s.ClockRunning {
			return nil, fmt.Errorf("word %#x reached the LEDs with RNG %d, serializer %v, clock %v", s.Word, s.Range, s.Serializing, s.ClockRunning)
		}
		out = append(out, s.Word)
	}
	return out, nil
}
