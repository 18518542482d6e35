package fancurve

import (
	"math"
	"strings"
	"testing"
)

func TestPercent(t *testing.T) {
	def, err := New([]Step{{45, 40}, {55, 80}})
	if err != nil {
		t.Fatal(err)
	}
	desc, err := New([]Step{{30, 100}, {50, 20}})
	if err != nil {
		t.Fatal(err)
	}
	three, err := New([]Step{{40, 0}, {50, 50}, {70, 100}})
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		curve Curve
		temp  float64
		want  uint8
	}{
		"below first step":         {def, 20, 40},
		"at first step":            {def, 45, 40},
		"midway":                   {def, 50, 60},
		"quarter way rounds":       {def, 47.5, 50},
		"just below last":          {def, 54.99, 80},
		"at last step":             {def, 55, 80},
		"above last":               {def, 90, 80},
		"NaN reading is full fan":  {def, math.NaN(), 100},
		"zero curve is full fan":   {Curve{}, 50, 100},
		"falling percents allowed": {desc, 40, 60},
		"second segment":           {three, 60, 75},
		"first segment":            {three, 45, 25},
		"at middle step":           {three, 50, 50},
		"negative temperature":     {three, -10, 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := tc.curve.Percent(tc.temp); got != tc.want {
				t.Errorf("Percent(%v) = %d, want %d", tc.temp, got, tc.want)
			}
		})
	}
}

func TestNewRejects(t *testing.T) {
	cases := map[string]struct {
		steps []Step
		want  string
	}{
		"empty":            {nil, "at least one step"},
		"percent over 100": {[]Step{{40, 120}}, "percent 120 is outside 0–100"},
		"descending":       {[]Step{{55, 40}, {45, 80}}, "step 1: temperature 45 is not above"},
		"duplicate":        {[]Step{{45, 40}, {45, 80}}, "step 1: temperature 45 is not above"},
		"NaN":              {[]Step{{math.NaN(), 40}}, "not a number"},
		"Inf":              {[]Step{{math.Inf(1), 40}}, "not a number"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := New(tc.steps)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New() error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestStepsIsACopy(t *testing.T) {
	in := []Step{{45, 40}, {55, 80}}
	c, err := New(in)
	if err != nil {
		t.Fatal(err)
	}
	in[0].Percent = 99
	got := c.Steps()
	got[1].Percent = 1
	if c.Percent(0) != 40 || c.Percent(100) != 80 {
		t.Fatalf("curve changed through a shared slice: %+v", c.Steps())
	}
}
