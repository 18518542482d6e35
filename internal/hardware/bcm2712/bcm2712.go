// Package bcm2712 drives a Compute Module 5's fan PWM and WS2812 LEDs
// through the registers of its RP1 I/O chip (/dev/mem), for Raspberry Pi OS
// without the ws2812-pio overlay. Unlike the CM4, the fan (GPIO12, RP1 PWM0
// channel 0) and the LEDs (GPIO18, PWM0 channel 2) are separate channels.
//
// What the old compute-blade-agent does (pkg/hal/hal_bcm2712.go, commit
// 422cf18) is kept: PWM0 clocked at 50 MHz, fan in trailing-edge mark-space
// mode at 25 kHz, LEDs through channel 2 as a serializer fed from the FIFO
// with two 32-bit words per WS2812 bit, GPIO18 muxed to the PWM only for the
// frame. Its register values are not: it selects mode 3 (pulse-density, not
// the serializer), sets bit 4 (BIND) for USEFIFO, pushes to +0x08 (the
// common range register) and reads the level from +0x0c (the common duty).
// The RP1 layout used here is that of the PWM driver Raspberry Pi submitted
// upstream (pwm-rp1: modes 0–7 with 4 = MSB serializer, INVERT bit 3,
// FIFO_POP_MASK bit 8, CHAN_CTRL/RANGE/PHASE/DUTY at 0x14/0x18/0x1c/0x20 +
// 16 × channel, "period = RANGE + 1") and of Circle's RP1 PWM sound driver
// (rsta2/circle lib/sound/pwmsoundbasedevice-rp1.cpp: FIFO_CTRL at 0x04 with
// LEVEL 4:0, FLUSH bit 5, FLUSH_DONE bit 6; DUTY_FIFO at 0x10; BIND bit 4,
// USEFIFO bit 5). None of it has been run on a CM5 by this project.
//
// The 50 MHz is checked, not assumed: Open reads PWM0's clock from RP1's
// clock controller and refuses unless it runs from the 50 MHz crystal
// undivided (the agent then runs the linux backend, whose status names the
// reason the LEDs are missing). See the clock constants for the sources.
package bcm2712

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/kubeblade/kubeblade/internal/hardware"
	"github.com/kubeblade/kubeblade/internal/hardware/regs"
	"github.com/kubeblade/kubeblade/internal/hardware/ws2812"
)

// Physical addresses: the RP1 BAR as the firmware places it. RP1's own
// addresses are 0x40000000 + the same offsets (rp1.dtsi: gpio@d0000,
// pwm@98000, clocks@18000).
const (
	RP1Base    = 0x1F00000000
	ClocksBase = RP1Base + 0x18000 // the clock controller
	GPIOBase   = RP1Base + 0xD0000 // IO_BANK0: GPIO0–27
	PWM0Base   = RP1Base + 0x98000
)

// Block names as the register file knows them.
const (
	BlockClocks = "rp1-clocks"
	BlockGPIO   = "rp1-gpio"
	BlockPWM    = "rp1-pwm0"
)

// PWM0's clock (CLK_PWM0) in the clock controller, as both RP1 clock
// drivers define it: Raspberry Pi's drivers/clk/clk-rp1.c (raspberrypi/linux)
// and mainline's (CLK_PWM0_OFFSET 0x74: CTRL, DIV_INT, DIV_FRAC, SEL at
// +0, +4, +8, +0xc; CLK_CTRL_ENABLE BIT(11); CLK_CTRL_AUXSRC_MASK
// GENMASK(9, 5); no standard parents, aux parents pll_audio_pri_ph,
// pll_video_sec, xosc). Its rate is parent × 2^16 / (DIV_INT << 16 |
// DIV_FRAC >> 16), a DIV_INT of 0 counting as 2^16 (rp1_clock_recalc_rate).
// The crystal is 50 MHz (rp1.dtsi: "Must match the XOSC frequency" for
// clk_slow_sys's 50000000), and rp1.dtsi's pwm@98000 asks for 50000000
// (assigned-clock-rates), which only the crystal divided by 1 gives
// exactly. But that node is disabled by default, so nothing may have
// started the clock.
const (
	RegClkPWM0Ctrl    = 0x74
	RegClkPWM0DivInt  = 0x78
	RegClkPWM0DivFrac = 0x7c

	ClkCtrlEnable      = 1 << 11
	ClkCtrlAuxsrcShift = 5
	ClkCtrlAuxsrcMask  = 0x1f << ClkCtrlAuxsrcShift
	// ClkAuxsrcXOSC is the crystal's index among CLK_PWM0's aux sources.
	ClkAuxsrcXOSC = 2
	XOSCHz        = 50_000_000
)

// ErrClock is PWM0's clock not running at ClockHz: every fan period and
// LED bit would come out at the wrong length.
var ErrClock = errors.New("RP1 PWM0 clock unusable")

// GPIO: each pin has STATUS at 8n and CTRL at 8n+4; FUNCSEL is CTRL 4:0.
const (
	FuncselMask = 0x1f
	FuncselNull = 0x1f // no function: the pad's output driver off
	FuncselFan  = 0    // a0: PWM0 channel 0 on GPIO12
	FuncselLED  = 3    // a3: PWM0 channel 2 on GPIO18

	PinFan = 12
	PinLED = 18
)

// GPIOCtrl is the CTRL register offset of a pin.
func GPIOCtrl(pin int) uint32 { return uint32(pin*8 + 4) }

// PWM registers and bits.
const (
	RegGlobal   = 0x00
	RegFIFOCtrl = 0x04
	RegDutyFIFO = 0x10

	GlobalSetUpdate = 1 << 31

	FIFOLevelMask = 0x1f
	FIFOFlush     = 1 << 5
	FIFOFlushDone = 1 << 6

	ModeTrailingEdge = 1
	ModeSerializer   = 4 // MSB first
	CtrlUseFIFO      = 1 << 5
	CtrlFIFOPopMask  = 1 << 8

	ChanFan = 0
	ChanLED = 2
)

// Per-channel registers.
func RegChanCtrl(c int) uint32 { return uint32(0x14 + 16*c) }
func RegRange(c int) uint32    { return uint32(0x18 + 16*c) }
func RegPhase(c int) uint32    { return uint32(0x1c + 16*c) }
func RegDuty(c int) uint32     { return uint32(0x20 + 16*c) }

// ChanEnable is a channel's bit in the global control register.
func ChanEnable(c int) uint32 { return 1 << c }

// Clock and frame constants.
const (
	ClockHz = 50_000_000
	// FanPeriodTicks gives 25 kHz; RANGE is one less (the counter runs
	// from 0 to RANGE inclusive).
	FanPeriodTicks = ClockHz / 25_000
	// LEDRange makes every FIFO word 32 sub-bits under the same rule. Were
	// RANGE the bit count instead, each word would lose its last sub-bit,
	// which the frame tolerates (see the tests).
	LEDRange = 31
	// FIFOFeedLevel is the level below which the FIFO takes another word:
	// the old agent's conservative depth.
	FIFOFeedLevel = 8
	// FeedTimeout bounds feeding one frame (it takes 62 µs on the wire).
	FeedTimeout = 5 * time.Millisecond
	// TrailingWords of low end every frame.
	TrailingWords = 2
)

// Serializer is channel 2 as an LED frame uses it: 64 sub-bits (two words)
// per WS2812 bit, 20 high for a 0 and 40 for a 1.
var Serializer = ws2812.Serializer{ClockHz: ClockHz, WordBits: 32, SubBits: 64}

// Options configure Open.
type Options struct {
	Mapper regs.Mapper
	// Sleep pauses (default time.Sleep).
	Sleep func(time.Duration)
	// Now bounds feeding the FIFO (default time.Now).
	Now func() time.Time
	// Order is the LEDs' byte order (default RGB, the blade's).
	Order ws2812.Order
}

// Driver owns RP1 PWM0 channels 0 (once StartFan is called) and 2, and the
// functions of GPIO12 and GPIO18.
type Driver struct {
	m     regs.Mapper
	gpio  regs.Block
	pwm   regs.Block
	sleep func(time.Duration)
	now   func() time.Time
	order ws2812.Order

	mu     sync.Mutex
	fan    bool
	closed bool
}

// Open maps RP1's GPIO bank 0 and PWM0, after checking (reading only)
// that PWM0's clock runs at ClockHz.
func Open(o Options) (*Driver, error) {
	if o.Sleep == nil {
		o.Sleep = time.Sleep
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Order == "" {
		o.Order = ws2812.RGB
	}
	d := &Driver{m: o.Mapper, sleep: o.Sleep, now: o.Now, order: o.Order}
	clocks, err := o.Mapper.Map(BlockClocks, ClocksBase, regs.PageSize)
	if err != nil {
		return nil, err
	}
	if err := checkClock(clocks); err != nil {
		return nil, err
	}
	if d.gpio, err = o.Mapper.Map(BlockGPIO, GPIOBase, regs.PageSize); err != nil {
		return nil, err
	}
	if d.pwm, err = o.Mapper.Map(BlockPWM, PWM0Base, regs.PageSize); err != nil {
		return nil, err
	}
	return d, nil
}

// checkClock refuses a PWM0 clock that is off, or not the crystal
// undivided. It does not start or set the clock: that is the kernel clock
// driver's, which would not know about a change made behind its back. A
// 50 MHz taken from pll_video_sec is refused too, since its rate depends
// on PLL settings the display drivers own; refusing costs the LEDs, a
// guessed rate would cost their colours and the fan's 25 kHz.
func checkClock(c regs.Block) error {
	ctrl := c.Read(RegClkPWM0Ctrl)
	if ctrl&ClkCtrlEnable == 0 {
		return fmt.Errorf("%w: it is not running (CLK_PWM0_CTRL %#x); Raspberry Pi's devicetree starts it at 50 MHz only for an enabled rp1_pwm0 node", ErrClock, ctrl)
	}
	if src := (ctrl & ClkCtrlAuxsrcMask) >> ClkCtrlAuxsrcShift; src != ClkAuxsrcXOSC {
		return fmt.Errorf("%w: it runs from clock source %d, not the 50 MHz crystal (source %d), so its rate is unknown", ErrClock, src, ClkAuxsrcXOSC)
	}
	div := uint64(c.Read(RegClkPWM0DivInt))
	if div == 0 {
		div = 1 << 16
	}
	div = div<<16 | uint64(c.Read(RegClkPWM0DivFrac)>>16)
	if hz := uint64(XOSCHz) << 16 / div; hz != ClockHz {
		return fmt.Errorf("%w: it runs at %d Hz (the crystal divided by %.4f), not %d Hz", ErrClock, hz, float64(div)/(1<<16), ClockHz)
	}
	return nil
}

// Describe names what drives the LEDs.
func (d *Driver) Describe() string {
	return fmt.Sprintf("RP1 PWM0 channel 2 serializer on GPIO18 via /dev/mem (%#x)", PWM0Base)
}

func (d *Driver) setFuncsel(pin int, f uint32) {
	v := d.gpio.Read(GPIOCtrl(pin))
	d.gpio.Write(GPIOCtrl(pin), v&^FuncselMask|f)
}

// global is the global control register without its SET_UPDATE strobe.
func (d *Driver) global() uint32 { return d.pwm.Read(RegGlobal) &^ GlobalSetUpdate }

// update latches the shadowed channel settings on the next PWM clock edge.
func (d *Driver) update(global uint32) {
	d.pwm.Write(RegGlobal, global|GlobalSetUpdate)
}

// StartFan takes GPIO12 for a standard fan unit and runs it at 100 %.
func (d *Driver) StartFan() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return errors.New("bcm2712: closed")
	}
	g := d.global()
	d.update(g &^ ChanEnable(ChanFan))
	d.pwm.Write(RegChanCtrl(ChanFan), CtrlFIFOPopMask|ModeTrailingEdge)
	d.pwm.Write(RegRange(ChanFan), FanPeriodTicks-1)
	d.pwm.Write(RegPhase(ChanFan), 0)
	d.pwm.Write(RegDuty(ChanFan), FanPeriodTicks)
	d.update(g | ChanEnable(ChanFan))
	d.setFuncsel(PinFan, FuncselFan)
	d.fan = true
	return nil
}

// SetFanPercent sets the fan duty.
func (d *Driver) SetFanPercent(p uint8) error {
	if p > 100 {
		return fmt.Errorf("bcm2712 fan: duty %d %% is outside 0–100", p)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.fan || d.closed {
		return fmt.Errorf("bcm2712 fan: %w", hardware.ErrNotSupported)
	}
	d.pwm.Write(RegDuty(ChanFan), FanPeriodTicks*uint32(p)/100)
	d.update(d.global())
	return nil
}

// SetLEDs sends one frame to both LEDs, top first.
func (d *Driver) SetLEDs(top, edge hardware.Color) error {
	words, err := Serializer.Encode(d.order.Bytes([][3]uint8{{top.R, top.G, top.B}, {edge.R, edge.G, edge.B}}))
	if err != nil {
		return err
	}
	words = append(words, make([]uint32, TrailingWords)...)

	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return errors.New("bcm2712: closed")
	}
	g := d.global()
	d.update(g &^ ChanEnable(ChanLED))
	d.pwm.Write(RegChanCtrl(ChanLED), CtrlFIFOPopMask|CtrlUseFIFO|ModeSerializer)
	d.pwm.Write(RegRange(ChanLED), LEDRange)
	d.pwm.Write(RegPhase(ChanLED), 0)
	err = d.flush()
	if err == nil {
		d.update(g &^ ChanEnable(ChanLED))
		// A disabled channel drives its pin low: muxing GPIO18 now holds
		// the line low for the reset time before the frame.
		d.setFuncsel(PinLED, FuncselLED)
		d.sleep(ws2812.Reset)
		err = d.feed(words, g)
	}
	d.update(d.pwm.Read(RegGlobal) &^ GlobalSetUpdate &^ ChanEnable(ChanLED))
	// Off the PWM again, as the old agent leaves it.
	d.setFuncsel(PinLED, FuncselNull)
	return err
}

func (d *Driver) flush() error {
	c := d.pwm.Read(RegFIFOCtrl)
	d.pwm.Write(RegFIFOCtrl, c|FIFOFlush)
	err := d.poll("FIFO flush", func() bool { return d.pwm.Read(RegFIFOCtrl)&FIFOFlushDone != 0 })
	d.pwm.Write(RegFIFOCtrl, d.pwm.Read(RegFIFOCtrl)&^FIFOFlush)
	return err
}

// feed pre-fills the FIFO, enables the channel and keeps the FIFO above
// empty until the last word, then waits for it to drain and the frame to
// latch. From user space this is a race against the wire (640 ns a word);
// losing it shows as a timeout here or a wrong colour on the LEDs.
func (d *Driver) feed(words []uint32, g uint32) error {
	i := 0
	for ; i < len(words) && i < FIFOFeedLevel; i++ {
		d.pwm.Write(RegDutyFIFO, words[i])
	}
	d.update(g | ChanEnable(ChanLED))
	deadline := d.now().Add(FeedTimeout)
	for i < len(words) {
		if d.now().After(deadline) {
			return fmt.Errorf("bcm2712: LED frame: FIFO fed %d of %d words before the %v timeout", i, len(words), FeedTimeout)
		}
		// One level read (slow: it crosses PCIe) buys room for several
		// pushes (posted writes), which keeps ahead of 640 ns a word.
		level := int(d.pwm.Read(RegFIFOCtrl) & FIFOLevelMask)
		for room := FIFOFeedLevel - level; room > 0 && i < len(words); room-- {
			d.pwm.Write(RegDutyFIFO, words[i])
			i++
		}
	}
	for d.pwm.Read(RegFIFOCtrl)&FIFOLevelMask > 0 {
		if d.now().After(deadline) {
			return fmt.Errorf("bcm2712: LED frame: FIFO did not drain within %v", FeedTimeout)
		}
	}
	d.sleep(TrailingWords*32*time.Second/ClockHz + ws2812.Reset)
	return nil
}

func (d *Driver) poll(what string, done func() bool) error {
	return regs.Poll(d.sleep, "bcm2712: "+what, done)
}

// Close unmaps the registers; the fan keeps its last duty.
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
func (d *Driver) Name() string { return "bcm2712" }
