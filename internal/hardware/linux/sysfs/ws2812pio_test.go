package sysfs_test

import (
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kubeblade/kubeblade/internal/hardware/linux/sysfs"
)

// pioDriver models Raspberry Pi's ws2812-pio-rp1 driver
// (raspberrypi/linux drivers/misc/ws2812-pio-rp1.c) from write() to the
// wire: the one-byte brightness write, EFBIG past num_leds × 4 bytes, the
// pixel read as a little-endian R, G, B, W word, the gamma table (with its
// quirk of passing 0 through), the 4-byte buffer W, B, R, G sent as one
// little-endian word that the PIO shifts out MSB first, 24 bits: G, R, B.
type pioDriver struct {
	numLEDs    int
	brightness uint8
	pixbuf     []byte
	wire       []byte // the last frame on GPIO18
	opens      int
}

func newPIODriver(numLEDs int, dtBrightness uint8) *pioDriver {
	return &pioDriver{numLEDs: numLEDs, brightness: dtBrightness, pixbuf: make([]byte, 4*numLEDs)}
}

func (d *pioDriver) open(string) (io.WriteCloser, error) {
	d.opens++
	return &pioFile{d: d}, nil
}

type pioFile struct {
	d   *pioDriver
	pos int
}

func (f *pioFile) Close() error { return nil }

func (f *pioFile) Write(b []byte) (int, error) {
	d := f.d
	size, count := len(d.pixbuf), len(b)
	var err error
	if f.pos > size {
		return 0, syscall.EFBIG
	}
	if count > size {
		err, count = syscall.EFBIG, size
	}
	if f.pos+count > size {
		if err == nil {
			err = syscall.ENOSPC
		}
		count = size - f.pos
	}
	if f.pos == 0 && count == 1 {
		d.brightness = b[0]
	} else {
		copy(d.pixbuf[f.pos:], b[:count])
		f.pos += count
		// The deferred work blanks what was not written and sends.
		for i := f.pos; i < size; i++ {
			d.pixbuf[i] = 0
		}
	}
	d.send()
	if err != nil {
		return 0, err // the syscall returns the error, not the count
	}
	return count, nil
}

func (d *pioDriver) gamma(v uint8) uint8 {
	if v == 0 || d.brightness == 0 {
		return v
	}
	return sysfs.WS2812PIOGamma[int(v)*int(d.brightness)/255]
}

func (d *pioDriver) send() {
	d.wire = d.wire[:0]
	for i := 0; i < d.numLEDs; i++ {
		px := binary.LittleEndian.Uint32(d.pixbuf[4*i:])
		r, g, b, w := uint8(px), uint8(px>>8), uint8(px>>16), uint8(px>>24)
		buf := []byte{d.gamma(w), d.gamma(b), d.gamma(r), d.gamma(g)}
		word := binary.LittleEndian.Uint32(buf)
		d.wire = append(d.wire, byte(word>>24), byte(word>>16), byte(word>>8))
	}
}

// seen is what the blade's LEDs show: they read R, G, B off the wire.
func (d *pioDriver) seen() [][3]uint8 {
	var out [][3]uint8
	for i := 0; i+3 <= len(d.wire); i += 3 {
		out = append(out, [3]uint8{d.wire[i], d.wire[i+1], d.wire[i+2]})
	}
	return out
}

// nearest is the closest value the gamma table can put on the wire.
func nearest(v uint8) uint8 {
	best := 0
	for _, g := range sysfs.WS2812PIOGamma {
		if absDiff(int(g), int(v)) < absDiff(best, int(v)) || (v > 0 && best == 0 && g > 0) {
			best = int(g)
		}
	}
	return uint8(best)
}

func absDiff(a, b int) int {
	if a > b {
		return a - b
	}
	return b - a
}

func TestLEDStreamShowsTheConfiguredColour(t *testing.T) {
	drv := newPIODriver(2, 128) // an overlay that halved the brightness
	s, err := sysfs.OpenLEDStreamWith("/dev/leds0", drv.open)
	if err != nil {
		t.Fatal(err)
	}
	if drv.brightness != 255 {
		t.Fatalf("brightness %d after open, want 255 so the inverse gamma holds", drv.brightness)
	}
	for name, tc := range map[string]struct{ top, edge [3]uint8 }{
		"red and green":         {top: [3]uint8{255, 0, 0}, edge: [3]uint8{0, 255, 0}},
		"dim #102030 stays lit": {top: [3]uint8{0x10, 0x20, 0x30}, edge: [3]uint8{1, 1, 1}},
		"orange and white":      {top: [3]uint8{0xff, 0x80, 0}, edge: [3]uint8{255, 255, 255}},
		"off":                   {},
	} {
		t.Run(name, func(t *testing.T) {
			if err := s.Write([][3]uint8{tc.top, tc.edge}); err != nil {
				t.Fatal(err)
			}
			want := [][3]uint8{}
			for _, c := range [][3]uint8{tc.top, tc.edge} {
				want = append(want, [3]uint8{nearest(c[0]), nearest(c[1]), nearest(c[2])})
			}
			if d := cmp.Diff(want, drv.seen()); d != "" {
				t.Errorf("LEDs show (-want +got):\n%s", d)
			}
		})
	}
}

// TestEveryChannelValue: each value 0–255 of each channel reaches its
// own channel on the wire as the nearest value the driver can produce,
// and a lit channel is never dark.
func TestEveryChannelValue(t *testing.T) {
	drv := newPIODriver(2, 255)
	s, err := sysfs.OpenLEDStreamWith("/dev/leds0", drv.open)
	if err != nil {
		t.Fatal(err)
	}
	worst := 0
	for ch := 0; ch < 3; ch++ {
		for v := 0; v < 256; v++ {
			var c [3]uint8
			c[ch] = uint8(v)
			if err := s.Write([][3]uint8{c, {}}); err != nil {
				t.Fatal(err)
			}
			got := drv.seen()[0]
			var want [3]uint8
			want[ch] = nearest(uint8(v))
			if got != want {
				t.Fatalf("channel %d value %d: LED shows %v, want %v", ch, v, got, want)
			}
			if v > 0 && got[ch] == 0 {
				t.Fatalf("channel %d value %d shows dark", ch, v)
			}
			worst = max(worst, absDiff(int(got[ch]), v))
		}
	}
	// The table skips some high values (…, 224, 227, …); report the error.
	t.Logf("largest difference between configured and shown value: %d", worst)
	if worst > 2 {
		t.Errorf("a configured value is off by %d", worst)
	}
}

// TestRawBytesWereWrong documents the defect this encoding fixes: raw R,
// G, B, 0 bytes show red and green swapped and dim values dark.
func TestRawBytesWereWrong(t *testing.T) {
	drv := newPIODriver(2, 255)
	f, _ := drv.open("")
	if _, err := f.Write([]byte{0xff, 0, 0, 0, 0x10, 0x10, 0x10, 0}); err != nil {
		t.Fatal(err)
	}
	if got := drv.seen(); got[0] != [3]uint8{0, 255, 0} || got[1] != [3]uint8{0, 0, 0} {
		t.Fatalf("model disagrees with the driver: %v", got)
	}
}

func TestLEDStreamFewerLEDs(t *testing.T) {
	drv := newPIODriver(1, 255)
	_, err := sysfs.OpenLEDStreamWith("/dev/leds0", drv.open)
	if !errors.Is(err, syscall.EFBIG) || !strings.Contains(err.Error(), "fewer than 2 LEDs") {
		t.Fatalf("err = %v, want a clear EFBIG error", err)
	}
}

func TestLEDStreamMissing(t *testing.T) {
	plain := func(p string) (io.WriteCloser, error) { return os.OpenFile(p, os.O_WRONLY, 0) }
	if _, err := sysfs.OpenLEDStreamWith(filepath.Join(t.TempDir(), "leds1"), plain); err == nil {
		t.Fatal("missing stream opened")
	}
}

// TestLEDStreamWritesWholeChain: each write opens the device again, so
// it starts at offset 0 (the driver keeps a position and answers ENOSPC
// past the end).
func TestLEDStreamWritesWholeChain(t *testing.T) {
	drv := newPIODriver(2, 255)
	s, err := sysfs.OpenLEDStreamWith("/dev/leds0", drv.open)
	if err != nil {
		t.Fatal(err)
	}
	before := drv.opens
	for i := 0; i < 3; i++ {
		if err := s.Write([][3]uint8{{255, 0, 0}, {0, 0, 255}}); err != nil {
			t.Fatal(err)
		}
	}
	if drv.opens-before != 3 {
		t.Fatalf("%d opens for 3 writes", drv.opens-before)
	}
}
