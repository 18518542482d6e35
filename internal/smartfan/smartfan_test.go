package smartfan

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"testing/quick"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func decodeAll(t testing.TB, d *Decoder, p []byte) []Frame {
	t.Helper()
	var out []Frame
	d.Feed(p, func(f Frame) { out = append(out, f) })
	return out
}

func TestEncodeKnownFrames(t *testing.T) {
	cases := map[string]struct {
		frame Frame
		want  []byte
	}{
		"fan 50 %": {
			frame: SetFanPercent(50),
			want:  []byte{0x7E, 0x01, 0x32, 0x00, 0x00, 0x33, 0x7F},
		},
		"fan above 100 % clamps": {
			frame: SetFanPercent(250),
			want:  []byte{0x7E, 0x01, 0x64, 0x00, 0x00, 0x65, 0x7F},
		},
		"LED is sent blue, green, red": {
			frame: SetLED(0x10, 0x20, 0x30),
			want:  []byte{0x7E, 0x02, 0x30, 0x20, 0x10, 0x02 ^ 0x30 ^ 0x20 ^ 0x10, 0x7F},
		},
		"airflow 23.4 °C": {
			frame: ValueFrame(ReportAirflowTemperature, 234),
			want:  []byte{0x7E, 0xA2, 0x00, 0x00, 0xEA, 0xA2 ^ 0xEA, 0x7F},
		},
		"every special byte escaped": {
			// checksum 0x7D^0x7E^0x7F^0x01 = 0x7D: escaped too.
			frame: Frame{Cmd: 0x01, Data: [3]byte{0x7D, 0x7E, 0x7F}},
			want:  []byte{0x7E, 0x01, 0x7D, 0x5D, 0x7D, 0x5E, 0x7D, 0x5F, 0x7D, 0x5D, 0x7F},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Encode(tc.frame)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("Encode(%v) (-want +got):\n%s", tc.frame, diff)
			}
			if len(got) > MaxEncodedLen {
				t.Fatalf("encoded length %d > MaxEncodedLen %d", len(got), MaxEncodedLen)
			}
			var d Decoder
			if diff := cmp.Diff([]Frame{tc.frame}, decodeAll(t, &d, got)); diff != "" {
				t.Fatalf("decode (-want +got):\n%s", diff)
			}
		})
	}
}

// TestEveryEscapePosition puts each special byte at each of the five
// payload positions, so an encoder or decoder that forgets one position or
// one byte fails here.
func TestEveryEscapePosition(t *testing.T) {
	for _, special := range []byte{Start, End, Escape} {
		for pos := 0; pos < 4; pos++ {
			var f Frame
			p := []*byte{&f.Cmd, &f.Data[0], &f.Data[1], &f.Data[2]}
			*p[pos] = special
			// Make the checksum special too on one variant.
			enc := Encode(f)
			if n := bytes.Count(enc, []byte{Escape, special ^ 0x20}); n < 1 {
				t.Errorf("byte %#x at %d: not escaped in % x", special, pos, enc)
			}
			if bytes.IndexByte(enc[1:len(enc)-1], Start) >= 0 || bytes.IndexByte(enc[1:len(enc)-1], End) >= 0 {
				t.Errorf("byte %#x at %d: raw framing byte inside % x", special, pos, enc)
			}
			var d Decoder
			if diff := cmp.Diff([]Frame{f}, decodeAll(t, &d, enc)); diff != "" {
				t.Errorf("byte %#x at %d (-want +got):\n%s", special, pos, diff)
			}
		}
		// The checksum position: cmd chosen so the XOR equals special.
		f := Frame{Cmd: special ^ 0x11, Data: [3]byte{0x11, 0, 0}}
		if f.Checksum() != special {
			t.Fatalf("test setup: checksum %#x", f.Checksum())
		}
		enc := Encode(f)
		if !bytes.HasSuffix(enc, []byte{Escape, special ^ 0x20, End}) {
			t.Errorf("checksum %#x not escaped: % x", special, enc)
		}
		var d Decoder
		if diff := cmp.Diff([]Frame{f}, decodeAll(t, &d, enc)); diff != "" {
			t.Errorf("checksum %#x (-want +got):\n%s", special, diff)
		}
	}
}

func TestRoundTripProperty(t *testing.T) {
	prop := func(frames []Frame, garbage []byte, cuts []uint16) bool {
		var wire []byte
		for _, f := range frames {
			wire = Append(wire, f)
		}
		// Feeding the stream in arbitrary pieces changes nothing.
		var d Decoder
		var got []Frame
		rest := wire
		for _, c := range cuts {
			if len(rest) == 0 {
				break
			}
			n := int(c) % (len(rest) + 1)
			d.Feed(rest[:n], func(f Frame) { got = append(got, f) })
			rest = rest[n:]
		}
		d.Feed(rest, func(f Frame) { got = append(got, f) })
		if !cmp.Equal(frames, got, cmpopts.EquateEmpty()) {
			t.Logf("frames %v got %v", frames, got)
			return false
		}
		// Any garbage before a frame never hides that frame.
		if len(frames) > 0 {
			var d2 Decoder
			var last *Frame
			d2.Feed(garbage, func(Frame) {})
			d2.Feed(Encode(frames[0]), func(f Frame) { last = &f })
			if last == nil || *last != frames[0] {
				t.Logf("garbage % x hid %v", garbage, frames[0])
				return false
			}
		}
		return d.Pending() == 0
	}
	cfg := &quick.Config{MaxCount: 2000}
	if err := quick.Check(prop, cfg); err != nil {
		t.Fatal(err)
	}
}

func TestDecoderRecovers(t *testing.T) {
	good := ValueFrame(ReportFanRPM, 31415)
	enc := Encode(good)
	badSum := append([]byte(nil), enc...)
	badSum[len(badSum)-2] ^= 0x01 // corrupt the (unescaped) checksum
	cases := map[string]struct {
		in       []byte
		want     []Frame
		wantStat Stats
	}{
		"garbage then frame": {
			in:       append([]byte{0x00, 0xFF, 0x7F, 0x7D, 0x13}, enc...),
			want:     []Frame{good},
			wantStat: Stats{Frames: 1, Skipped: 5},
		},
		"half frame then frame": {
			in:       append([]byte{0x7E, 0xA3, 0x01}, enc...),
			want:     []Frame{good},
			wantStat: Stats{Frames: 1, Malformed: 1},
		},
		"escape cut by start": {
			in:       append([]byte{0x7E, 0xA3, 0x7D}, enc...),
			want:     []Frame{good},
			wantStat: Stats{Frames: 1, Malformed: 1},
		},
		"checksum error then frame": {
			in:       append(badSum, enc...),
			want:     []Frame{good},
			wantStat: Stats{Frames: 1, ChecksumErrors: 1},
		},
		"short frame": {
			in:       append([]byte{0x7E, 0x01, 0x02, 0x7F}, enc...),
			want:     []Frame{good},
			wantStat: Stats{Frames: 1, Malformed: 1},
		},
		"long frame skipped to next start": {
			in:       append([]byte{0x7E, 1, 2, 3, 4, 5, 6, 7, 8, 0x7F}, enc...),
			want:     []Frame{good},
			wantStat: Stats{Frames: 1, Malformed: 1, Skipped: 3},
		},
		"double escape": {
			in:       append([]byte{0x7E, 0x7D, 0x7D, 0x01, 0x7F}, enc...),
			want:     []Frame{good},
			wantStat: Stats{Frames: 1, Malformed: 1, Skipped: 2},
		},
		"escape before end": {
			in:       append([]byte{0x7E, 1, 2, 3, 4, 0x7D, 0x7F}, enc...),
			want:     []Frame{good},
			wantStat: Stats{Frames: 1, Malformed: 1},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var d Decoder
			if diff := cmp.Diff(tc.want, decodeAll(t, &d, tc.in)); diff != "" {
				t.Errorf("frames (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantStat, d.Stats()); diff != "" {
				t.Errorf("stats (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValues(t *testing.T) {
	for _, v := range []uint32{0, 1, 0x7D, 0x7E7F7D, 100000, MaxValue} {
		f := ValueFrame(ReportFanRPM, v)
		var d Decoder
		got := decodeAll(t, &d, Encode(f))
		if len(got) != 1 || got[0].Value() != v {
			t.Fatalf("value %d: got %v", v, got)
		}
		if want := float64(v) / 10; got[0].Tenths() != want {
			t.Fatalf("tenths %d: got %v want %v", v, got[0].Tenths(), want)
		}
	}
	if got := ValueFrame(ReportFanRPM, MaxValue+5).Value(); got != MaxValue {
		t.Fatalf("ValueFrame does not clamp: %d", got)
	}
}

// randomStream mixes valid frames and garbage for the benchmarks.
func randomStream(n int) []byte {
	r := rand.New(rand.NewPCG(1, 2))
	var out []byte
	for len(out) < n {
		f := Frame{Cmd: byte(r.IntN(256)), Data: [3]byte{byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(256))}}
		out = Append(out, f)
	}
	return out[:n]
}

func BenchmarkDecoder(b *testing.B) {
	stream := randomStream(64 << 10)
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	var d Decoder
	var frames uint64
	emit := func(Frame) { frames++ }
	for b.Loop() {
		d.Feed(stream, emit)
	}
	if frames == 0 {
		b.Fatal("no frames decoded")
	}
}

func BenchmarkEncode(b *testing.B) {
	buf := make([]byte, 0, MaxEncodedLen)
	f := Frame{Cmd: 0x01, Data: [3]byte{0x7D, 0x7E, 0x7F}}
	b.ReportAllocs()
	for b.Loop() {
		buf = Append(buf[:0], f)
	}
}
