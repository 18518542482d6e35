package bcm2711

import (
	"testing"

	"github.com/kubeblade/kubeblade/internal/hardware/bcm2711/bcm2711test"
)

// TestRegisterFacts pins every register offset, bit, code and address the
// driver uses to the model's literal, which carries the source it was
// read from (bcm2711test's package doc): a wrong constant here fails this
// test instead of being modelled at the same wrong place. (The driver's
// own choices, the clock divisor, the fan's range, the LED word, are not
// facts about the chip and are tested by what they produce.)
func TestRegisterFacts(t *testing.T) {
	for name, c := range map[string]struct{ driver, fact uint64 }{
		"PeriBase":      {PeriBase, bcm2711test.PeriBase},
		"GPIOBase":      {GPIOBase, bcm2711test.GPIOBase},
		"PWM0Base":      {PWM0Base, bcm2711test.PWM0Base},
		"ClockBase":     {ClockBase, bcm2711test.ClockBase},
		"RegGPFSEL1":    {RegGPFSEL1, bcm2711test.RegGPFSEL1},
		"RegGPCLR0":     {RegGPCLR0, bcm2711test.RegGPCLR0},
		"FselInput":     {FselInput, bcm2711test.FselInput},
		"FselOutput":    {FselOutput, bcm2711test.FselOutput},
		"FselAlt0":      {FselAlt0, bcm2711test.FselAlt0},
		"FselAlt5":      {FselAlt5, bcm2711test.FselAlt5},
		"PinFan":        {PinFan, bcm2711test.PinFan},
		"PinLED":        {PinLED, bcm2711test.PinLED},
		"RegCTL":        {RegCTL, bcm2711test.RegCTL},
		"RegSTA":        {RegSTA, bcm2711test.RegSTA},
		"RegRNG1":       {RegRNG1, bcm2711test.RegRNG1},
		"RegDAT1":       {RegDAT1, bcm2711test.RegDAT1},
		"RegFIF1":       {RegFIF1, bcm2711test.RegFIF1},
		"CtlPWEN1":      {CtlPWEN1, bcm2711test.CtlPWEN1},
		"CtlMODE1":      {CtlMODE1, bcm2711test.CtlMODE1},
		"CtlRPTL1":      {CtlRPTL1, bcm2711test.CtlRPTL1},
		"CtlSBIT1":      {CtlSBIT1, bcm2711test.CtlSBIT1},
		"CtlUSEF1":      {CtlUSEF1, bcm2711test.CtlUSEF1},
		"CtlCLRF1":      {CtlCLRF1, bcm2711test.CtlCLRF1},
		"CtlMSEN1":      {CtlMSEN1, bcm2711test.CtlMSEN1},
		"StaFULL1":      {StaFULL1, bcm2711test.StaFULL1},
		"StaEMPT1":      {StaEMPT1, bcm2711test.StaEMPT1},
		"StaWERR1":      {StaWERR1, bcm2711test.StaWERR1},
		"StaBERR":       {StaBERR, bcm2711test.StaBERR},
		"RegPWMCTL":     {RegPWMCTL, bcm2711test.RegPWMCTL},
		"RegPWMDIV":     {RegPWMDIV, bcm2711test.RegPWMDIV},
		"ClockPassword": {ClockPassword, bcm2711test.ClockPassword},
		"ClockSrcOsc":   {ClockSrcOsc, bcm2711test.ClockSrcOsc},
		"ClockEnab":     {ClockEnab, bcm2711test.ClockEnab},
		"ClockBusy":     {ClockBusy, bcm2711test.ClockBusy},
		"ClockSrcMask":  {ClockSrcMask, bcm2711test.ClockSrcMask},
		"clockKeep (SRC, FLIP, MASH)": {clockKeep,
			bcm2711test.ClockSrcMask | bcm2711test.ClockFlip | bcm2711test.ClockMash},
		"OscillatorHz": {OscillatorHz, bcm2711test.OscillatorHz},
		// The divisor's integer part sits above 12 fraction bits.
		"ClockDivisor in CM_PWMDIV": {ClockDivisor << 12, ClockDivisor << bcm2711test.DivIntShift},
	} {
		if c.driver != c.fact {
			t.Errorf("%s = %#x in the driver, %#x in its source", name, c.driver, c.fact)
		}
	}
	// The register file knows the blocks by name: the model must sit on
	// the blocks the driver maps.
	if BlockGPIO != bcm2711test.BlockGPIO || BlockPWM != bcm2711test.BlockPWM || BlockClock != bcm2711test.BlockClock {
		t.Errorf("block names %q %q %q, the model's %q %q %q", BlockGPIO, BlockPWM, BlockClock,
			bcm2711test.BlockGPIO, bcm2711test.BlockPWM, bcm2711test.BlockClock)
	}
}
