// Package smartfan is the wire codec of the Compute Blade smart fan unit: the
// byte-stuffed frames its fixed firmware sends and accepts on the UART. It
// knows nothing of serial ports or of the agent, so it can be tested and
// fuzzed on byte slices alone.
//
// A frame is 0x7E, then cmd d0 d1 d2 checksum (checksum = cmd^d0^d1^d2) with
// every 0x7E, 0x7F or 0x7D sent as 0x7D followed by the byte XOR 0x20, then
// 0x7F.
package smartfan

import "fmt"

// Framing bytes.
const (
	Start  byte = 0x7E
	End    byte = 0x7F
	Escape byte = 0x7D
	// escapeXOR is what an escaped byte is XORed with.
	escapeXOR byte = 0x20
)

// Commands from the blade to the unit.
const (
	// CmdSetFanPercent sets the fan duty: d0 = percent.
	CmdSetFanPercent byte = 0x01
	// CmdSetLED sets the unit's LED for this blade: d0 = blue, d1 = green,
	// d2 = red (the firmware's order, not RGB).
	CmdSetLED byte = 0x02
)

// Reports from the unit to the blade.
const (
	// ReportButton is a press of the unit's button meant for this blade
	// (the unit decides left or right blade by single or double press).
	ReportButton byte = 0xA1
	// ReportAirflowTemperature carries °C × 10.
	ReportAirflowTemperature byte = 0xA2
	// ReportFanRPM carries RPM × 10.
	ReportFanRPM byte = 0xA3
)

// MaxEncodedLen is the longest a frame can be on the wire: start, five
// payload bytes each possibly escaped, end.
const MaxEncodedLen = 1 + 2*5 + 1

// MaxValue is the largest value a 24-bit report carries.
const MaxValue = 1<<24 - 1

// Frame is one decoded frame without its checksum.
type Frame struct {
	Cmd  byte
	Data [3]byte
}

// Checksum is the XOR of cmd and the three data bytes.
func (f Frame) Checksum() byte { return f.Cmd ^ f.Data[0] ^ f.Data[1] ^ f.Data[2] }

// Value reads d0..d2 as a 24-bit big-endian unsigned integer.
func (f Frame) Value() uint32 {
	return uint32(f.Data[0])<<16 | uint32(f.Data[1])<<8 | uint32(f.Data[2])
}

// Tenths reads the value as the unit sends measurements: × 10.
func (f Frame) Tenths() float64 { return float64(f.Value()) / 10 }

func (f Frame) String() string {
	return fmt.Sprintf("frame{cmd=%#02x data=% x}", f.Cmd, f.Data[:])
}

// SetFanPercent builds the command setting the fan duty. Values above 100
// are clamped: the firmware's behaviour beyond 100 is undefined.
func SetFanPercent(percent uint8) Frame {
	if percent > 100 {
		percent = 100
	}
	return Frame{Cmd: CmdSetFanPercent, Data: [3]byte{percent, 0, 0}}
}

// SetLED builds the command setting the unit's LED.
func SetLED(r, g, b uint8) Frame {
	return Frame{Cmd: CmdSetLED, Data: [3]byte{b, g, r}}
}

// ValueFrame builds a report carrying v as a 24-bit big-endian integer,
// clamped to MaxValue. The agent never sends one; the simulated unit in
// tests does.
func ValueFrame(cmd byte, v uint32) Frame {
	if v > MaxValue {
		v = MaxValue
	}
	return Frame{Cmd: cmd, Data: [3]byte{byte(v >> 16), byte(v >> 8), byte(v)}}
}

// Append appends f's wire form to dst and returns the extended slice.
func Append(dst []byte, f Frame) []byte {
	dst = append(dst, Start)
	for _, b := range [5]byte{f.Cmd, f.Data[0], f.Data[1], f.Data[2], f.Checksum()} {
		if b == Start || b == End || b == Escape {
			dst = append(dst, Escape, b^escapeXOR)
			continue
		}
		dst = append(dst, b)
	}
	return append(dst, End)
}

// Encode returns f's wire form.
func Encode(f Frame) []byte { return Append(make([]byte, 0, MaxEncodedLen), f) }

// Stats count what a Decoder saw. Garbage on a UART is normal right after
// the unit or the blade boots, so it is counted, not treated as an error.
type Stats struct {
	// Frames is the number of valid frames decoded.
	Frames uint64
	// ChecksumErrors counts well-framed frames whose checksum was wrong.
	ChecksumErrors uint64
	// Malformed counts frames abandoned for bad length or bad escapes,
	// including half frames cut short by a new start byte.
	Malformed uint64
	// Skipped counts bytes outside any frame.
	Skipped uint64
}

type decoderState uint8

const (
	stateIdle    decoderState = iota // hunting for a start byte
	stateFrame                       // inside a frame
	stateEscaped                     // inside a frame, after an escape byte
)

// Decoder turns a byte stream into frames. It holds at most one frame's
// five payload bytes whatever it is fed, so a stream of garbage cannot grow
// it, and a start byte always begins a new frame, so a half frame costs only
// itself and never the frame after it. The zero value is ready to use; a
// Decoder is not safe for concurrent use.
type Decoder struct {
	state decoderState
	buf   [5]byte
	n     int
	stats Stats
}

// Feed decodes p, calling emit for every valid frame in order. Partial
// frames carry over to the next call, so p may be split anywhere.
func (d *Decoder) Feed(p []byte, emit func(Frame)) {
	for _, b := range p {
		switch {
		case b == Start:
			if d.state != stateIdle {
				d.stats.Malformed++ // a half frame: the unit (or the line) restarted
			}
			d.state, d.n = stateFrame, 0
		case d.state == stateIdle:
			d.stats.Skipped++
		case b == End:
			if d.state == stateEscaped || d.n != len(d.buf) {
				d.stats.Malformed++
			} else if f := (Frame{Cmd: d.buf[0], Data: [3]byte{d.buf[1], d.buf[2], d.buf[3]}}); f.Checksum() != d.buf[4] {
				d.stats.ChecksumErrors++
			} else {
				d.stats.Frames++
				emit(f)
			}
			d.state = stateIdle
		case b == Escape && d.state == stateEscaped:
			// Two escapes in a row cannot come from a correct encoder.
			d.stats.Malformed++
			d.state = stateIdle
		case b == Escape:
			d.state = stateEscaped
		default:
			if d.state == stateEscaped {
				b ^= escapeXOR
				d.state = stateFrame
			}
			if d.n == len(d.buf) {
				// Too long: drop it and hunt for the next start byte.
				d.stats.Malformed++
				d.state = stateIdle
				continue
			}
			d.buf[d.n] = b
			d.n++
		}
	}
}

// Stats returns the counts so far.
func (d *Decoder) Stats() Stats { return d.stats }

// Pending reports how many payload bytes of an unfinished frame are held.
func (d *Decoder) Pending() int {
	if d.state == stateIdle {
		return 0
	}
	return d.n
}
