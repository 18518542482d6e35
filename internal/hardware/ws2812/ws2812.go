// Package ws2812 turns LED colours into the bit stream a PWM serializer
// shifts out to WS2812 LEDs, and models how an LED reads such a stream back.
// The register backends send what Encode makes; their tests, and the test of
// the kubeblade-leds kernel driver, check what they sent with Decode.
//
// A WS2812 bit is a high pulse followed by a low one, about 1.25 µs in all:
// short high (T0H ≈ 0.4 µs) is 0, long high (T1H ≈ 0.8 µs) is 1, each
// ± 0.15 µs; a low line for at least the reset time latches the colours
// (≥ 50 µs on the original part, ≥ 280 µs on WS2812B-V5). A serializer clocked
// at a few MHz draws each bit as a few sub-bits, which is how the old
// compute-blade-agent drove them (docs/hardware.md) and how the kernel
// driver does.
package ws2812

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Timing of a WS2812B bit (datasheet values).
const (
	T0H       = 400 * time.Nanosecond
	T1H       = 800 * time.Nanosecond
	Bit       = 1250 * time.Nanosecond
	Tolerance = 150 * time.Nanosecond
	// BitTolerance is the allowed deviation of a whole bit.
	BitTolerance = 600 * time.Nanosecond
	// Reset is the low time that latches a frame on every WS2812 variant.
	Reset = 280 * time.Microsecond
	// MaxBitLow is the longest low gap inside a frame the model accepts
	// (well below the 50 µs at which the oldest parts latch).
	MaxBitLow = 5 * time.Microsecond
)

// Order is the byte order the LEDs expect on the wire.
type Order string

const (
	// RGB is the order of the Compute Blade's LEDs (docs/hardware.md; the old agent
	// sends red, green, blue).
	RGB Order = "rgb"
	// GRB is the order of a stock WS2812B.
	GRB Order = "grb"
)

// Bytes lays out colours in wire order, first LED first.
func (o Order) Bytes(colors [][3]uint8) []byte {
	out := make([]byte, 0, 3*len(colors))
	for _, c := range colors {
		if o == GRB {
			out = append(out, c[1], c[0], c[2])
		} else {
			out = append(out, c[0], c[1], c[2])
		}
	}
	return out
}

// Serializer describes a PWM serializer: the clock it shifts sub-bits at
// and how many bits of each FIFO word it sends (MSB first).
type Serializer struct {
	ClockHz  uint64
	WordBits int
	// SubBits, when set, fixes the sub-bits per WS2812 bit instead of
	// deriving it from the clock (the RP1 backend uses 64: two whole words).
	SubBits int
}

// Pattern is how one WS2812 bit is drawn in sub-bits.
type Pattern struct {
	SubBits       int // per bit
	High0, High1  int // high sub-bits of a 0 and of a 1
	SubBitNS      float64
	T0H, T1H, Bit time.Duration
}

// ErrTiming is returned when a serializer clock cannot meet WS2812 timing.
var ErrTiming = errors.New("serializer clock cannot meet WS2812 timing")

// Pattern derives the sub-bit pattern and checks it against the WS2812
// tolerances.
func (s Serializer) Pattern() (Pattern, error) {
	if s.ClockHz == 0 || s.WordBits <= 0 || s.WordBits > 32 {
		return Pattern{}, fmt.Errorf("serializer %d Hz, %d-bit words: %w", s.ClockHz, s.WordBits, ErrTiming)
	}
	ns := 1e9 / float64(s.ClockHz)
	round := func(d time.Duration) int { return int(math.Round(float64(d.Nanoseconds()) / ns)) }
	p := Pattern{SubBits: s.SubBits, High0: round(T0H), High1: round(T1H), SubBitNS: ns}
	if p.SubBits == 0 {
		p.SubBits = round(Bit)
	}
	dur := func(n int) time.Duration { return time.Duration(math.Round(float64(n) * ns)) }
	p.T0H, p.T1H, p.Bit = dur(p.High0), dur(p.High1), dur(p.SubBits)
	within := func(got, want, tol time.Duration) bool { return got >= want-tol && got <= want+tol }
	if p.High0 < 1 || p.High1 <= p.High0 || p.SubBits <= p.High1 ||
		!within(p.T0H, T0H, Tolerance) || !within(p.T1H, T1H, Tolerance) || !within(p.Bit, Bit, BitTolerance) {
		return p, fmt.Errorf("serializer at %d Hz gives T0H %v, T1H %v, bit %v: %w", s.ClockHz, p.T0H, p.T1H, p.Bit, ErrTiming)
	}
	return p, nil
}

// Encode draws data (bytes in wire order) as sub-bits packed MSB first
// into words of WordBits, the last one padded with low sub-bits. Words are
// MSB-aligned in 32 bits, the way the serializers take a range below 32.
func (s Serializer) Encode(data []byte) ([]uint32, error) {
	p, err := s.Pattern()
	if err != nil {
		return nil, err
	}
	var words []uint32
	var cur uint32
	n := 0
	push := func(bit uint32) {
		cur |= bit << (31 - n)
		n++
		if n == s.WordBits {
			words = append(words, cur)
			cur, n = 0, 0
		}
	}
	for _, b := range data {
		for i := 7; i >= 0; i-- {
			high := p.High0
			if b>>i&1 == 1 {
				high = p.High1
			}
			for j := 0; j < p.SubBits; j++ {
				if j < high {
					push(1)
				} else {
					push(0)
				}
			}
		}
	}
	if n > 0 {
		words = append(words, cur)
	}
	return words, nil
}

// Decode models a chain of WS2812 LEDs reading the line that words draw
// (WordBits sub-bits of each, MSB first, at ClockHz): each high pulse is a
// bit, 0 or 1 by its length within the datasheet tolerances, and the bytes
// are returned in the order they arrived. Idle low time before the first
// pulse and after the last is ignored; a pulse of another length, or a low
// gap inside the frame long enough to latch it, is an error, because an LED
// would show something else than what was meant.
func Decode(s Serializer, words []uint32) ([]byte, error) {
	if s.ClockHz == 0 || s.WordBits <= 0 || s.WordBits > 32 {
		return nil, fmt.Errorf("decode: bad serializer %+v", s)
	}
	ns := 1e9 / float64(s.ClockHz)
	var levels []bool
	for _, w := range words {
		for i := 0; i < s.WordBits; i++ {
			levels = append(levels, w>>(31-i)&1 == 1)
		}
	}
	var bits []byte
	lowRun := 0
	started := false
	for i := 0; i < len(levels); {
		if !levels[i] {
			lowRun++
			i++
			continue
		}
		if started && time.Duration(float64(lowRun)*ns) > MaxBitLow {
			return nil, fmt.Errorf("decode: %v low after bit %d would latch the frame early", time.Duration(float64(lowRun)*ns), len(bits))
		}
		started = true
		lowRun = 0
		high := 0
		for i < len(levels) && levels[i] {
			high++
			i++
		}
		d := time.Duration(math.Round(float64(high) * ns))
		switch {
		case d >= T0H-Tolerance && d <= T0H+Tolerance:
			bits = append(bits, 0)
		case d >= T1H-Tolerance && d <= T1H+Tolerance:
			bits = append(bits, 1)
		default:
			return nil, fmt.Errorf("decode: bit %d is a %v high pulse, neither a 0 nor a 1", len(bits), d)
		}
	}
	if len(bits)%8 != 0 {
		return nil, fmt.Errorf("decode: %d bits is not whole bytes", len(bits))
	}
	out := make([]byte, len(bits)/8)
	for i, b := range bits {
		out[i/8] |= b << (7 - i%8)
	}
	return out, nil
}
