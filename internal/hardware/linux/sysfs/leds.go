package sysfs

import (
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// MulticolorLED is an LED class device with the multicolor extension:
// multi_index names the channels, multi_intensity sets them, brightness
// scales them all.
type MulticolorLED struct {
	dir   string
	index []string // channel colours in the kernel's order
	max   int64
}

// MulticolorLEDs lists LED class devices that have multi_index.
func MulticolorLEDs(sysfsRoot string) []string {
	matches, _ := filepath.Glob(filepath.Join(sysfsRoot, "class", "leds", "*", "multi_index"))
	out := make([]string, 0, len(matches))
	for _, m := range matches {
		out = append(out, filepath.Base(filepath.Dir(m)))
	}
	return out
}

// OpenMulticolorLED opens /sys/class/leds/<name>.
func OpenMulticolorLED(sysfsRoot, name string) (*MulticolorLED, error) {
	dir := filepath.Join(sysfsRoot, "class", "leds", name)
	idx, err := readAttr(filepath.Join(dir, "multi_index"))
	if err != nil {
		return nil, fmt.Errorf("LED %s: not a multicolor LED: %w", name, err)
	}
	max, err := readInt(filepath.Join(dir, "max_brightness"))
	if err != nil || max <= 0 {
		max = 255
	}
	l := &MulticolorLED{dir: dir, index: strings.Fields(idx), max: max}
	// Without all three channels a colour would show wrong, not dim.
	for _, ch := range []string{"red", "green", "blue"} {
		if !slices.Contains(l.index, ch) {
			return nil, fmt.Errorf("LED %s: multi_index %q has no %s channel", name, idx, ch)
		}
	}
	return l, nil
}

// Name is the LED's class name.
func (l *MulticolorLED) Name() string { return filepath.Base(l.dir) }

// Set shows an RGB colour: intensities in multi_index order (scaled to
// max_brightness), then brightness, which is what makes the kernel apply
// them. Channels other than red, green and blue (a white one) stay dark.
func (l *MulticolorLED) Set(r, g, b uint8) error {
	parts := make([]string, len(l.index))
	for i, ch := range l.index {
		var v uint8
		switch ch {
		case "red":
			v = r
		case "green":
			v = g
		case "blue":
			v = b
		}
		parts[i] = strconv.FormatInt(int64(v)*l.max/255, 10)
	}
	if err := writeAttr(filepath.Join(l.dir, "multi_intensity"), strings.Join(parts, " ")); err != nil {
		return err
	}
	bright := l.max
	if r == 0 && g == 0 && b == 0 {
		bright = 0
	}
	return writeAttr(filepath.Join(l.dir, "brightness"), strconv.FormatInt(bright, 10))
}

// LEDStream is a /dev/ledsN character device of Raspberry Pi's downstream
// ws2812-pio-rp1 driver (drivers/misc/ws2812-pio-rp1.c in
// raspberrypi/linux; dtoverlay=ws2812-pio,gpio=18,num_leds=2 on a CM5). That
// driver does not pass bytes through:
//   - a write at offset 0 of exactly one byte sets its brightness, which
//     scales every value (default 255 from the devicetree);
//   - otherwise it takes 4 bytes per LED, read as a little-endian word R, G,
//     B, W, and longer than num_leds × 4 bytes fails with EFBIG;
//   - each value goes through its gamma table, which maps 0–21 to 0, so a
//     dim colour would come out black;
//   - the PIO program shifts each pixel out as G, R, B (W only for RGBW).
//
// The blade's LEDs take R, G, B on the wire (docs/hardware.md; the old agent sends
// that order on a CM4), so the stream puts the wanted red where the driver
// reads green and vice versa, and sends each value through the inverse of
// the gamma table, so the LEDs receive the configured values (or the nearest
// the table can produce, never 0 for a lit channel).
type LEDStream struct {
	path string
	open LEDStreamOpener
}

// LEDStreamOpener opens the device for one write; tests pass a model of
// the driver.
type LEDStreamOpener func(path string) (io.WriteCloser, error)

// StreamLEDs is how many LEDs the blade chains: top, then edge.
const StreamLEDs = 2

// OpenLEDStreamWith opens the stream at path with open, sets the driver's
// brightness to full (so the inverse gamma holds) and sends a dark frame,
// which fails when the driver drives fewer than two LEDs. The linux backend
// passes an opener that accepts only the ws2812-pio-rp1 character device
// (package devnode); tests pass a model of the driver.
func OpenLEDStreamWith(path string, open LEDStreamOpener) (*LEDStream, error) {
	s := &LEDStream{path: path, open: open}
	if err := s.write([]byte{0xff}); err != nil {
		return nil, fmt.Errorf("LED stream: setting brightness: %w", err)
	}
	if err := s.Write(make([][3]uint8, StreamLEDs)); err != nil {
		return nil, err
	}
	return s, nil
}

// Path is the device written.
func (s *LEDStream) Path() string { return s.path }

// Write sends the colours of the whole chain, first LED first. Each write
// opens the device anew, so it starts at offset 0 (the driver keeps the
// file position) and survives a driver reload.
func (s *LEDStream) Write(rgb [][3]uint8) error {
	buf := make([]byte, 0, 4*len(rgb))
	for _, c := range rgb {
		buf = append(buf, ws2812PIOInverse[c[1]], ws2812PIOInverse[c[0]], ws2812PIOInverse[c[2]], 0)
	}
	err := s.write(buf)
	if errors.Is(err, syscall.EFBIG) {
		return fmt.Errorf("LED stream %s drives fewer than %d LEDs (set num_leds=%d in the ws2812-pio overlay): %w", s.path, len(rgb), len(rgb), err)
	}
	return err
}

func (s *LEDStream) write(b []byte) error {
	f, err := s.open(s.path)
	if err != nil {
		return fmt.Errorf("LED stream: %w", err)
	}
	n, err := f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && n != len(b) {
		err = io.ErrShortWrite
	}
	if err != nil {
		return fmt.Errorf("LED stream: writing %d bytes to %s: %w", len(b), s.path, err)
	}
	return nil
}

// WS2812PIOGamma is the ws2812-pio-rp1 driver's gamma table. The driver
// documents it as GammaE = 255·(i/255)^(1/0.45), and its values are that
// formula rounded down (for example 21 → 0, 22 → 1, 128 → 55, 200 → 148).
var WS2812PIOGamma = func() (g [256]uint8) {
	for i := range g {
		g[i] = uint8(math.Floor(255 * math.Pow(float64(i)/255, 1/0.45)))
	}
	return g
}()

// ws2812PIOInverse[v] is the smallest input whose gamma output is nearest
// to v, and never one that outputs 0 for v > 0.
var ws2812PIOInverse = func() (inv [256]uint8) {
	for v := range inv {
		best := 0
		for x := range WS2812PIOGamma {
			d, bd := absDiff(int(WS2812PIOGamma[x]), v), absDiff(int(WS2812PIOGamma[best]), v)
			if d < bd || (v > 0 && WS2812PIOGamma[best] == 0 && WS2812PIOGamma[x] > 0) {
				best = x
			}
		}
		inv[v] = uint8(best)
	}
	return inv
}()

func absDiff(a, b int) int {
	if a > b {
		return a - b
	}
	return b - a
}
