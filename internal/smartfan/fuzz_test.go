package smartfan

import (
	"bytes"
	"testing"
)

// FuzzDecoder feeds arbitrary bytes to the decoder. Whatever it is fed it
// must not panic, must hold no more than one frame's payload, must agree with
// itself when the input is split, and must still decode a valid frame that
// follows the garbage.
func FuzzDecoder(f *testing.F) {
	f.Add([]byte{}, uint8(0))
	f.Add(Encode(SetFanPercent(42)), uint8(3))
	f.Add(Encode(Frame{Cmd: 0x7E, Data: [3]byte{0x7F, 0x7D, 0x00}}), uint8(5))
	f.Add([]byte{0x7E, 0x7D, 0x7E, 0x7F, 0x7D, 0x7D}, uint8(1))
	f.Add(bytes.Repeat([]byte{0x7E, 0xA3}, 40), uint8(7))
	f.Fuzz(func(t *testing.T, data []byte, cut uint8) {
		var whole Decoder
		var a []Frame
		whole.Feed(data, func(fr Frame) { a = append(a, fr) })
		if whole.Pending() > 5 {
			t.Fatalf("decoder holds %d bytes", whole.Pending())
		}
		st := whole.Stats()
		if st.Frames != uint64(len(a)) {
			t.Fatalf("stats count %d frames, emitted %d", st.Frames, len(a))
		}
		if int(st.Frames)*7 > len(data) {
			t.Fatalf("%d frames out of %d bytes", st.Frames, len(data))
		}

		var split Decoder
		var b []Frame
		n := 0
		if len(data) > 0 {
			n = int(cut) % (len(data) + 1)
		}
		split.Feed(data[:n], func(fr Frame) { b = append(b, fr) })
		split.Feed(data[n:], func(fr Frame) { b = append(b, fr) })
		if len(a) != len(b) {
			t.Fatalf("split at %d: %d frames, whole: %d", n, len(b), len(a))
		}
		for i := range a {
			if a[i] != b[i] {
				t.Fatalf("split at %d: frame %d %v, whole %v", n, i, b[i], a[i])
			}
		}
		if split.Stats() != whole.Stats() {
			t.Fatalf("split stats %+v, whole %+v", split.Stats(), whole.Stats())
		}

		want := ValueFrame(ReportFanRPM, 12345)
		var got *Frame
		whole.Feed(Encode(want), func(fr Frame) { got = &fr })
		if got == nil || *got != want {
			t.Fatalf("after % x a valid frame was lost: %v", data, got)
		}
		// Encoding what was decoded and decoding it again is stable.
		for _, fr := range a {
			var d Decoder
			var again []Frame
			d.Feed(Encode(fr), func(x Frame) { again = append(again, x) })
			if len(again) != 1 || again[0] != fr {
				t.Fatalf("re-encode of %v decoded as %v", fr, again)
			}
		}
	})
}
