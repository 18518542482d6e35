// Package bcm2711 drives a Compute Module 4's fan PWM and WS2812 LEDs
// through the SoC's registers (/dev/mem), the way the old compute-blade-agent
// did on Raspberry Pi OS: the kernel there has no driver for the LEDs.
//
// The fan (GPIO12, ALT0) and the LEDs (GPIO18, ALT5) are both PWM0 channel
// 0 (Linux's numbering: bcm2711.dtsi's pin groups pwm0_0_gpio12 and
// pwm0_0_gpio18; the datasheet's PWM chapter calls it channel 1, hence
// RNG1, DAT1, PWEN1), so the two cannot run at once. The PWM clock is set once to 54 MHz / 22
// (≈ 2.45 MHz): the fan runs in mark-space mode at RNG 98 (25.0 kHz) and an
// LED frame switches the channel to serializer mode, three sub-bits per
// WS2812 bit, muxes GPIO18 to the PWM only while the frame is sent, and
// restores the fan afterwards. The old agent re-clocked the PWM to 800 kHz
// for the fan and to 2.4 MHz for every frame; one clock for both does the
// same without stopping the clock manager twice per frame.
//
// Register facts: docs/hardware.md. Each constant below is pinned to the
// literal in bcm2711test, which names the upstream source it was read from
// (Linux's pwm-bcm2835.c, pinctrl-bcm2835.c, clk-bcm2835.c and bcm2711.dtsi,
// rpi_ws281x for the serializer's bits), by TestRegisterFacts. The old
// agent's pkg/hal/hal_bcm2711.go (compute-blade-community/compute-blade-agent
// at 422cf18) is what this driver reproduces.
package bcm2711

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/kubeblade/kubeblade/internal/hardware"
	"github.com/kubeblade/kubeblade/internal/hardware/regs"
	"github.com/kubeblade/kubeblade/internal/hardware/ws2812"
)

// Physical addresses in the low-peripheral mode Raspberry Pi OS boots.
const (
	PeriBase  = 0xFE000000
	GPIOBase  = PeriBase + 0x200000
	PWM0Base  = PeriBase + 0x20C000
	ClockBase = PeriBase + 0x101000
)

// Block names as the register file knows them.
const (
	BlockGPIO  = "gpio"
	BlockPWM   = "pwm0"
	BlockClock = "cm"
)

// GPIO registers and function codes.
const (
	RegGPFSEL1 = 0x04 // GPIO10–19, three bits each
	RegGPCLR0  = 0x28

	FselInput  = 0b000
	FselOutput = 0b001
	FselAlt0   = 0b100
	FselAlt5   = 0b010

	PinFan = 12
	PinLED = 18
)

// PWM registers and CTL/STA bits (the datasheet's channel 1, Linux's PWM0
// channel 0: the one on GPIO12/18).
const (
	RegCTL  = 0x00
	RegSTA  = 0x04
	RegRNG1 = 0x10
	RegDAT1 = 0x14
	RegFIF1 = 0x18

	CtlPWEN1 = 1 << 0
	CtlMODE1 = 1 << 1 // serializer
	CtlRPTL1 = 1 << 2 // repeat the last word when the FIFO runs empty
	CtlSBIT1 = 1 << 3
	CtlUSEF1 = 1 << 5
	CtlCLRF1 = 1 << 6
	CtlMSEN1 = 1 << 7 // mark-space instead of the PWM algorithm

	StaFULL1 = 1 << 0
	StaEMPT1 = 1 << 1
	StaWERR1 = 1 << 2
	StaBERR  = 1 << 8
)

// Clock manager registers.
const (
	RegPWMCTL = 0xa0
	RegPWMDIV = 0xa4

	ClockPassword = 0x5A << 24
	ClockSrcOsc   = 1 // the 54 MHz crystal oscillator
	ClockEnab     = 1 << 4
	ClockBusy     = 1 << 7
	ClockSrcMask  = 0xf
	clockKeep     = 0x70f // SRC, FLIP, MASH

	OscillatorHz = 54_000_000
	// ClockDivisor gives 2.4545 MHz: 407 ns sub-bits.
	ClockDivisor = 22
	ClockHz      = OscillatorHz / ClockDivisor
)

// Fan and frame constants.
const (
	// FanRange is the mark-space period in clock ticks: 25.0 kHz, what
	// 4-wire PC fans expect (21–28 kHz).
	FanRange = 98
	// LEDWordBits: one WS2812 byte, 8 × 3 sub-bits, per FIFO word.
	LEDWordBits = 24
	// RegisterPause separates PWM register writes: the PWM block sits in
	// another clock domain and back-to-back writes can be lost (BERR), which
	// is why the old agent paused 10 µs between them.
	RegisterPause = 10 * time.Microsecond
)

// Serializer is the PWM serializer as an LED frame uses it.
var Serializer = ws2812.Serializer{ClockHz: ClockHz, WordBits: LEDWordBits}

// Options configure Open.
type Options struct {
	// Mapper maps the register blocks: /dev/mem in production.
	Mapper regs.Mapper
	// Sleep pauses between register accesses (default time.Sleep).
	Sleep func(time.Duration)
	// Order is the LEDs' byte order (default RGB, the blade's).
	Order ws2812.Order
}

// Driver owns PWM0 channel 0 (RNG1/DAT1), its clock, and the function of GPIO12 (once
// StartFan is called) and GPIO18.
type Driver struct {
	m     regs.Mapper
	gpio  regs.Block
	pwm   regs.Block
	cm    regs.Block
	sleep func(time.Duration)
	order ws2812.Order

	mu     sync.Mutex
	fan    bool // StartFan was called: GPIO12 is the fan's
	duty   uint32
	closed bool
}

// Open maps the blocks and sets the PWM clock (unless it already runs at
// the rate this driver uses, so a restart does not glitch the fan).
func Open(o Options) (*Driver, error) {
	if o.Sleep == nil {
		o.Sleep = time.Sleep
	}
	if o.Order == "" {
		o.Order = ws2812.RGB
	}
	d := &Driver{m: o.Mapper, sleep: o.Sleep, order: o.Order, duty: FanRange}
	var err error
	if d.gpio, err = o.Mapper.Map(BlockGPIO, GPIOBase, regs.PageSize); err != nil {
		return nil, err
	}
	if d.pwm, err = o.Mapper.Map(BlockPWM, PWM0Base, regs.PageSize); err != nil {
		return nil, err
	}
	if d.cm, err = o.Mapper.Map(BlockClock, ClockBase, regs.PageSize); err != nil {
		return nil, err
	}
	if err := d.setClock(); err != nil {
		return nil, err
	}
	return d, nil
}

// Describe names what drives the LEDs, for status and bladectl led test.
func (d *Driver) Describe() string {
	return fmt.Sprintf("BCM2711 PWM0 serializer on GPIO18 via /dev/mem (%#x)", PWM0Base)
}

func (d *Driver) pwmWrite(off, v uint32) {
	d.pwm.Write(off, v)
	d.sleep(RegisterPause)
}

// setClock programs CM_PWMCTL/CM_PWMDIV following the clock manager's
// rules: every write carries the password, and source and divisor change
// only while the clock is disabled and no longer busy.
func (d *Driver) setClock() error {
	ctl := d.cm.Read(RegPWMCTL)
	if ctl&ClockEnab != 0 && ctl&ClockSrcMask == ClockSrcOsc && d.cm.Read(RegPWMDIV)>>12&0xfff == ClockDivisor {
		return nil
	}
	// Stop both channels first; the old agent does the same.
	d.pwmWrite(RegCTL, 0)
	// Keep source, FLIP and MASH; ENAB off; BUSY is read-only.
	d.cm.Write(RegPWMCTL, ClockPassword|ctl&clockKeep)
	if err := d.poll("clock manager busy", func() bool { return d.cm.Read(RegPWMCTL)&ClockBusy == 0 }); err != nil {
		return err
	}
	d.cm.Write(RegPWMDIV, ClockPassword|ClockDivisor<<12)
	d.cm.Write(RegPWMCTL, ClockPassword|ClockSrcOsc)
	d.cm.Write(RegPWMCTL, ClockPassword|ClockSrcOsc|ClockEnab)
	return d.poll("clock manager start", func() bool { return d.cm.Read(RegPWMCTL)&ClockBusy != 0 })
}

func (d *Driver) poll(what string, done func() bool) error {
	return regs.Poll(d.sleep, "bcm2711: "+what, done)
}

// setFsel sets the function of a pin in GPFSEL1 (GPIO10–19).
func (d *Driver) setFsel(pin int, fsel uint32) {
	shift := uint((pin - 10) * 3)
	v := d.gpio.Read(RegGPFSEL1)
	d.gpio.Write(RegGPFSEL1, v&^(0b111<<shift)|fsel<<shift)
}

// runFan puts the channel in mark-space mode with the current duty.
func (d *Driver) runFan() {
	d.pwmWrite(RegCTL, 0)
	d.pwmWrite(RegRNG1, FanRange)
	d.pwmWrite(RegDAT1, d.duty)
	d.pwmWrite(RegCTL, CtlMSEN1|CtlPWEN1)
}

// StartFan takes GPIO12 for the fan (a standard fan unit; with the smart
// fan unit GPIO12 is UART5 and must be left alone) and runs it at 100 %
// until told otherwise.
func (d *Driver) StartFan() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return errors.New("bcm2711: closed")
	}
	d.fan = true
	d.duty = FanRange
	d.runFan()
	d.setFsel(PinFan, FselAlt0)
	return nil
}

// SetFanPercent sets the fan duty.
func (d *Driver) SetFanPercent(p uint8) error {
	if p > 100 {
		return fmt.Errorf("bcm2711 fan: duty %d %% is outside 0–100", p)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.fan || d.closed {
		return fmt.Errorf("bcm2711 fan: %w", hardware.ErrNotSupported)
	}
	d.duty = (uint32(p)*FanRange + 50) / 100
	d.pwmWrite(RegDAT1, d.duty)
	return nil
}

// SetLEDs sends one frame to both LEDs, top first, then gives the channel
// back to the fan.
func (d *Driver) SetLEDs(top, edge hardware.Color) error {
	words, err := Serializer.Encode(d.order.Bytes([][3]uint8{{top.R, top.G, top.B}, {edge.R, edge.G, edge.B}}))
	if err != nil {
		return err
	}
	// A low word last: with RPTL1 the serializer repeats it, holding the
	// line low while the frame latches.
	words = append(words, 0)

	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return errors.New("bcm2711: closed")
	}
	// Stop the channel (the fan sees low for the frame, ~0.4 ms), switch
	// it to serializer mode with an empty FIFO.
	d.pwmWrite(RegCTL, 0)
	d.pwmWrite(RegCTL, CtlCLRF1)
	d.pwmWrite(RegRNG1, LEDWordBits)
	// The disabled channel outputs SBIT1 = low, so muxing GPIO18 now sends
	// nothing; GPIO18 has been low since the last frame.
	d.setFsel(PinLED, FselAlt5)
	sendErr := d.send(words)
	// Whatever happened, GPIO18 goes back to a driven low output, so the
	// fan's PWM never reaches the LEDs, and the fan gets its duty back.
	d.gpio.Write(RegGPCLR0, 1<<PinLED)
	d.setFsel(PinLED, FselOutput)
	if d.fan {
		d.runFan()
	} else {
		d.pwmWrite(RegCTL, 0)
	}
	return sendErr
}

// send fills the FIFO, starts the serializer and waits until the last word
// has gone out and the line has been low long enough to latch. The frame
// (7 words) fits the FIFO (8 words by the datasheet, 16 measured), but
// FULL1 is honoured anyway.
func (d *Driver) send(words []uint32) error {
	started := false
	start := func() {
		d.pwmWrite(RegCTL, CtlPWEN1|CtlMODE1|CtlRPTL1|CtlUSEF1)
		started = true
	}
	for _, w := range words {
		if d.pwm.Read(RegSTA)&StaFULL1 != 0 {
			if !started {
				start()
			}
			if err := d.poll("PWM FIFO full", func() bool { return d.pwm.Read(RegSTA)&StaFULL1 == 0 }); err != nil {
				return err
			}
		}
		d.pwm.Write(RegFIF1, w)
	}
	if !started {
		start()
	}
	if err := d.poll("PWM FIFO drain", func() bool { return d.pwm.Read(RegSTA)&StaEMPT1 != 0 }); err != nil {
		return err
	}
	// The last word is still shifting out when EMPT1 sets; then the
	// repeated zero word must hold the line low for the reset time.
	d.sleep(time.Duration(LEDWordBits)*time.Second/ClockHz + ws2812.Reset)
	if sta := d.pwm.Read(RegSTA); sta&(StaWERR1|StaBERR) != 0 {
		d.pwm.Write(RegSTA, sta&(StaWERR1|StaBERR)) // write 1 to clear
		return fmt.Errorf("bcm2711: PWM reported a FIFO write or bus error (STA %#x)", sta)
	}
	return nil
}

// Close unmaps the registers. The fan keeps its last duty (the agent's safe
// exit has set 100 %) and the clock keeps running, so the fan survives the
// process.
func (d *Driver) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	return d.m.Close()
}

// Name is the backend name the linux backend reports with this driver.
func (d *Driver) Name() string { return "bcm2711" }
