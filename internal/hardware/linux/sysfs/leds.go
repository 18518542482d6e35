package sysfs

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
	if len(l.index) == 0 {
		return nil, fmt.Errorf("LED %s: empty multi_index", name)
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

// LEDStream is a /dev/ledsN character device as Raspberry Pi's
// ws2812-pio-rp1 driver creates it: one write sets the whole chain, four
// bytes per LED in R, G, B, W order (W ignored unless the chain is RGBW).
type LEDStream struct {
	path string
}

// OpenLEDStream checks that path exists and is writable.
func OpenLEDStream(path string) (*LEDStream, error) {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("LED stream: %w", err)
	}
	f.Close()
	return &LEDStream{path: path}, nil
}

// Path is the device written.
func (s *LEDStream) Path() string { return s.path }

// Write sends the colours of the whole chain, first LED first.
func (s *LEDStream) Write(rgb [][3]uint8) error {
	buf := make([]byte, 0, 4*len(rgb))
	for _, c := range rgb {
		buf = append(buf, c[0], c[1], c[2], 0)
	}
	return writeAttr(s.path, string(buf))
}
