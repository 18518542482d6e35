// Package fancurve maps a temperature to a fan duty by linear interpolation
// over a list of (temperature, percent) steps, the way the blade's fan is
// driven in automatic mode.
package fancurve

import (
	"fmt"
	"math"
)

// Step is one point of a curve.
type Step struct {
	TemperatureCelsius float64
	Percent            uint8
}

// Curve is a validated, ascending list of steps. The zero Curve is invalid;
// build one with New.
type Curve struct {
	steps []Step
}

// New validates steps and returns the curve. Steps must be non-empty, have
// strictly ascending temperatures and percents in 0–100.
func New(steps []Step) (Curve, error) {
	if len(steps) == 0 {
		return Curve{}, fmt.Errorf("fan curve needs at least one step")
	}
	for i, s := range steps {
		if s.Percent > 100 {
			return Curve{}, fmt.Errorf("step %d: percent %d is outside 0–100", i, s.Percent)
		}
		if math.IsNaN(s.TemperatureCelsius) || math.IsInf(s.TemperatureCelsius, 0) {
			return Curve{}, fmt.Errorf("step %d: temperature is not a number", i)
		}
		if i > 0 && s.TemperatureCelsius <= steps[i-1].TemperatureCelsius {
			return Curve{}, fmt.Errorf("step %d: temperature %g is not above the previous step's %g (steps must ascend)",
				i, s.TemperatureCelsius, steps[i-1].TemperatureCelsius)
		}
	}
	return Curve{steps: append([]Step(nil), steps...)}, nil
}

// Steps returns a copy of the curve's steps.
func (c Curve) Steps() []Step { return append([]Step(nil), c.steps...) }

// Percent returns the duty for temperature t: the first step's percent below
// the first step, the last step's above the last, and a straight line between
// neighbouring steps in between, rounded to the nearest percent. A NaN
// temperature (a failed reading) yields 100 so the blade errs on the cool side.
func (c Curve) Percent(t float64) uint8 {
	if len(c.steps) == 0 || math.IsNaN(t) {
		return 100
	}
	first, last := c.steps[0], c.steps[len(c.steps)-1]
	if t <= first.TemperatureCelsius {
		return first.Percent
	}
	if t >= last.TemperatureCelsius {
		return last.Percent
	}
	for i := 1; i < len(c.steps); i++ {
		hi := c.steps[i]
		if t > hi.TemperatureCelsius {
			continue
		}
		lo := c.steps[i-1]
		frac := (t - lo.TemperatureCelsius) / (hi.TemperatureCelsius - lo.TemperatureCelsius)
		p := float64(lo.Percent) + frac*(float64(hi.Percent)-float64(lo.Percent))
		return uint8(math.Round(p))
	}
	return last.Percent
}
