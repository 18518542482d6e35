package bcm2712

import (
	"fmt"
	"testing"

	"github.com/kubeblade/kubeblade/internal/hardware/bcm2712/bcm2712test"
)

// TestRegisterFacts pins every register offset, bit, code and address the
// driver uses to the model's literal, which carries the source it was read
// from (bcm2712test's package doc): a wrong constant here fails this test
// instead of being modelled at the same wrong place. (The driver's own
// choices, the fan's period, the LED range, the FIFO feed level, are not
// facts about RP1 and are tested by what they produce.)
func TestRegisterFacts(t *testing.T) {
	type fact struct{ driver, source uint64 }
	facts := map[string]fact{
		"RP1Base":            {RP1Base, bcm2712test.RP1Base},
		"ClocksBase":         {ClocksBase, bcm2712test.ClocksBase},
		"GPIOBase":           {GPIOBase, bcm2712test.GPIOBase},
		"PWM0Base":           {PWM0Base, bcm2712test.PWM0Base},
		"RegClkPWM0Ctrl":     {RegClkPWM0Ctrl, bcm2712test.RegClkPWM0Ctrl},
		"RegClkPWM0DivInt":   {RegClkPWM0DivInt, bcm2712test.RegClkPWM0DivInt},
		"RegClkPWM0DivFrac":  {RegClkPWM0DivFrac, bcm2712test.RegClkPWM0DivFrac},
		"ClkCtrlEnable":      {ClkCtrlEnable, bcm2712test.ClkCtrlEnable},
		"ClkCtrlAuxsrcShift": {ClkCtrlAuxsrcShift, bcm2712test.ClkCtrlAuxsrcShift},
		"ClkCtrlAuxsrcMask":  {ClkCtrlAuxsrcMask, bcm2712test.ClkCtrlAuxsrcMask},
		"ClkAuxsrcXOSC":      {ClkAuxsrcXOSC, bcm2712test.ClkAuxsrcXOSC},
		"XOSCHz":             {XOSCHz, bcm2712test.XOSCHz},
		"ClockHz":            {ClockHz, bcm2712test.PWM0Hz},
		"FuncselMask":        {FuncselMask, bcm2712test.FuncselMask},
		"FuncselNull":        {FuncselNull, bcm2712test.FuncselNull},
		"FuncselFan":         {FuncselFan, bcm2712test.FuncselFan},
		"FuncselLED":         {FuncselLED, bcm2712test.FuncselLED},
		"PinFan":             {PinFan, bcm2712test.PinFan},
		"PinLED":             {PinLED, bcm2712test.PinLED},
		"RegGlobal":          {RegGlobal, bcm2712test.RegGlobal},
		"RegFIFOCtrl":        {RegFIFOCtrl, bcm2712test.RegFIFOCtrl},
		"RegDutyFIFO":        {RegDutyFIFO, bcm2712test.RegDutyFIFO},
		"GlobalSetUpdate":    {GlobalSetUpdate, bcm2712test.GlobalSetUpdate},
		"FIFOLevelMask":      {FIFOLevelMask, bcm2712test.FIFOLevelMask},
		"FIFOFlush":          {FIFOFlush, bcm2712test.FIFOFlush},
		"FIFOFlushDone":      {FIFOFlushDone, bcm2712test.FIFOFlushDone},
		"ModeTrailingEdge":   {ModeTrailingEdge, bcm2712test.ModeTrailingEdge},
		"ModeSerializer":     {ModeSerializer, bcm2712test.ModeSerializer},
		"CtrlUseFIFO":        {CtrlUseFIFO, bcm2712test.CtrlUseFIFO},
		"CtrlFIFOPopMask":    {CtrlFIFOPopMask, bcm2712test.CtrlFIFOPopMask},
		"ChanFan":            {ChanFan, bcm2712test.ChanFan},
		"ChanLED":            {ChanLED, bcm2712test.ChanLED},
		// The driver writes its modes into the channel's MODE field.
		"ModeTrailingEdge within MODE": {ModeTrailingEdge &^ bcm2712test.CtrlModeMask, 0},
		"ModeSerializer within MODE":   {ModeSerializer &^ bcm2712test.CtrlModeMask, 0},
	}
	for c := 0; c < 4; c++ {
		for name, f := range map[string]fact{
			"RegChanCtrl": {uint64(RegChanCtrl(c)), uint64(bcm2712test.RegChanCtrl(c))},
			"RegRange":    {uint64(RegRange(c)), uint64(bcm2712test.RegRange(c))},
			"RegPhase":    {uint64(RegPhase(c)), uint64(bcm2712test.RegPhase(c))},
			"RegDuty":     {uint64(RegDuty(c)), uint64(bcm2712test.RegDuty(c))},
			"ChanEnable":  {uint64(ChanEnable(c)), uint64(bcm2712test.ChanEnable(c))},
		} {
			facts[fmt.Sprintf("%s(%d)", name, c)] = f
		}
	}
	for _, pin := range []int{0, PinFan, PinLED, 27} {
		facts[fmt.Sprintf("GPIOCtrl(%d)", pin)] = fact{uint64(GPIOCtrl(pin)), uint64(bcm2712test.GPIOCtrl(pin))}
	}
	for name, f := range facts {
		if f.driver != f.source {
			t.Errorf("%s = %#x in the driver, %#x in its source", name, f.driver, f.source)
		}
	}
	// The register file knows the blocks by name: the model must sit on
	// the blocks the driver maps.
	if BlockClocks != bcm2712test.BlockClocks || BlockGPIO != bcm2712test.BlockGPIO || BlockPWM != bcm2712test.BlockPWM {
		t.Errorf("block names %q %q %q, the model's %q %q %q", BlockClocks, BlockGPIO, BlockPWM,
			bcm2712test.BlockClocks, bcm2712test.BlockGPIO, bcm2712test.BlockPWM)
	}
	// The driver's clock check computes the rate as clk-rp1.c does.
	for _, d := range [][2]uint32{{1, 0}, {2, 0}, {0, 0}, {1, 0x80000000}, {25, 0}} {
		c := &fakeBlock{regs: map[uint32]uint32{
			RegClkPWM0Ctrl:    ClkCtrlEnable | ClkAuxsrcXOSC<<ClkCtrlAuxsrcShift,
			RegClkPWM0DivInt:  d[0],
			RegClkPWM0DivFrac: d[1],
		}}
		want := bcm2712test.PWM0ClockHz(d[0], d[1])
		if err := checkClock(c); (err == nil) != (want == ClockHz) {
			t.Errorf("DIV_INT %d DIV_FRAC %#x: clk-rp1.c's rate %d Hz, the driver's check says %v", d[0], d[1], want, err)
		}
	}
}

// fakeBlock is a register block of plain values for checkClock.
type fakeBlock struct{ regs map[uint32]uint32 }

func (b *fakeBlock) Read(off uint32) uint32     { return b.regs[off] }
func (b *fakeBlock) Write(off uint32, v uint32) { b.regs[off] = v }
