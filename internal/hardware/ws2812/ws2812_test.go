package ws2812

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The serializers of the two SoCs as the register backends and the kernel
// driver run them.
var (
	bcm2711 = Serializer{ClockHz: 54_000_000 / 22, WordBits: 24}
	rp1     = Serializer{ClockHz: 50_000_000, WordBits: 32, SubBits: 64}
)

func TestPattern(t *testing.T) {
	for name, tc := range map[string]struct {
		s    Serializer
		want Pattern
		err  error
	}{
		"bcm2711 at 54 MHz / 22": {s: bcm2711, want: Pattern{SubBits: 3, High0: 1, High1: 2}},
		"rp1 at 50 MHz":          {s: rp1, want: Pattern{SubBits: 64, High0: 20, High1: 40}},
		"2.4 MHz":                {s: Serializer{ClockHz: 2_400_000, WordBits: 24}, want: Pattern{SubBits: 3, High0: 1, High1: 2}},
		"too slow":               {s: Serializer{ClockHz: 1_000_000, WordBits: 24}, err: ErrTiming},
		"1.5 MHz: T0H 667 ns":    {s: Serializer{ClockHz: 1_500_000, WordBits: 32}, err: ErrTiming},
		"no clock":               {s: Serializer{WordBits: 24}, err: ErrTiming},
	} {
		t.Run(name, func(t *testing.T) {
			p, err := tc.s.Pattern()
			if !errors.Is(err, tc.err) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
			if err != nil {
				return
			}
			got := Pattern{SubBits: p.SubBits, High0: p.High0, High1: p.High1}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("pattern (-want +got):\n%s", d)
			}
		})
	}
}

// TestEncodeBCM2711 pins the exact words of the old agent's scheme: one
// byte per 24-bit word, 100 for a 0 and 110 for a 1, MSB-aligned.
func TestEncodeBCM2711(t *testing.T) {
	words, err := bcm2711.Encode([]byte{0x00, 0xff, 0x80})
	if err != nil {
		t.Fatal(err)
	}
	want := []uint32{0x92492400, 0xdb6db600, 0xd2492400}
	if d := cmp.Diff(want, words); d != "" {
		t.Errorf("words (-want +got):\n%s", d)
	}
}

// TestEncodeRP1 pins the old agent's CM5 words: two per bit.
func TestEncodeRP1(t *testing.T) {
	words, err := rp1.Encode([]byte{0x80})
	if err != nil {
		t.Fatal(err)
	}
	want := []uint32{0xffffffff, 0xff000000}
	for i := 0; i < 7; i++ {
		want = append(want, 0xfffff000, 0)
	}
	if d := cmp.Diff(want, words); d != "" {
		t.Errorf("words (-want +got):\n%s", d)
	}
}

func TestRoundTrip(t *testing.T) {
	data := RGB.Bytes([][3]uint8{{0xff, 0x80, 0x01}, {0x00, 0x10, 0xfe}})
	for name, s := range map[string]Serializer{"bcm2711": bcm2711, "rp1": rp1, "2.4MHz 32-bit words": {ClockHz: 2_400_000, WordBits: 32}} {
		t.Run(name, func(t *testing.T) {
			words, err := s.Encode(data)
			if err != nil {
				t.Fatal(err)
			}
			// Idle low before and after, as on the wire.
			words = append([]uint32{0, 0}, append(words, 0, 0)...)
			got, err := Decode(s, words)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(data, got); d != "" {
				t.Errorf("decoded (-want +got):\n%s", d)
			}
		})
	}
}

func TestDecodeRejects(t *testing.T) {
	for name, words := range map[string][]uint32{
		"pulse too long":   {0xfff00000}, // 12 sub-bits of 407 ns
		"gap inside frame": {0x92492400, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xdb6db600},
		"half a byte":      {0x92400000},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := Decode(bcm2711, words); err == nil {
				t.Fatal("decoded a stream an LED would misread")
			}
		})
	}
}

func TestOrder(t *testing.T) {
	c := [][3]uint8{{1, 2, 3}, {4, 5, 6}}
	if d := cmp.Diff([]byte{1, 2, 3, 4, 5, 6}, RGB.Bytes(c)); d != "" {
		t.Error(d)
	}
	if d := cmp.Diff([]byte{2, 1, 3, 5, 4, 6}, GRB.Bytes(c)); d != "" {
		t.Error(d)
	}
}

func TestTimingConstants(t *testing.T) {
	if Reset < 280*time.Microsecond || MaxBitLow >= 50*time.Microsecond {
		t.Fatal("reset must cover WS2812B-V5 and in-frame gaps must stay below the oldest latch time")
	}
}
