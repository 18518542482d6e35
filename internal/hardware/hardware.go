// Package hardware defines the one interface through which kubeblade reaches
// blade hardware (fan, tachometer, LEDs, button, stealth output, PoE detect and
// SoC temperature), and the small value types shared by every backend.
//
// Nothing outside a backend package touches devices: the agent core sees only
// this interface, which is what lets the same agent run on a real blade, on a
// simulated one, and on a fake in unit tests.
package hardware

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

// ErrNotSupported is returned (wrapped) by a backend operation whose
// capability is missing on this machine. Callers treat it as "skip", never as
// a reason to stop.
var ErrNotSupported = errors.New("not supported by this hardware")

// LED names one of the blade's two WS2812 LEDs.
type LED int

const (
	// LEDTop is the LED on the top of the blade, visible from above.
	LEDTop LED = iota
	// LEDEdge is the LED on the front edge, visible from the rack front.
	LEDEdge
)

func (l LED) String() string {
	switch l {
	case LEDTop:
		return "top"
	case LEDEdge:
		return "edge"
	default:
		return fmt.Sprintf("led(%d)", int(l))
	}
}

// LEDs lists every LED in wire order.
var LEDs = [...]LED{LEDTop, LEDEdge}

// Color is an RGB colour as the WS2812 receives it.
type Color struct {
	R, G, B uint8
}

// Off is the dark colour.
var Off = Color{}

// IsOff reports whether the colour emits no light.
func (c Color) IsOff() bool { return c == Off }

// String formats the colour as #rrggbb, the form configs use.
func (c Color) String() string { return fmt.Sprintf("#%02x%02x%02x", c.R, c.G, c.B) }

// ParseColor parses "#rrggbb" (the leading # is optional).
func ParseColor(s string) (Color, error) {
	h := strings.TrimPrefix(strings.TrimSpace(s), "#")
	if len(h) != 6 {
		return Color{}, fmt.Errorf("colour %q: want #rrggbb", s)
	}
	var v [3]uint8
	for i := range v {
		var b uint8
		for _, ch := range h[2*i : 2*i+2] {
			var d uint8
			switch {
			case ch >= '0' && ch <= '9':
				d = uint8(ch - '0')
			case ch >= 'a' && ch <= 'f':
				d = uint8(ch-'a') + 10
			case ch >= 'A' && ch <= 'F':
				d = uint8(ch-'A') + 10
			default:
				return Color{}, fmt.Errorf("colour %q: want #rrggbb", s)
			}
			b = b<<4 | d
		}
		v[i] = b
	}
	return Color{R: v[0], G: v[1], B: v[2]}, nil
}

// PowerSource is what feeds the blade, as far as the PoE detect line tells.
type PowerSource string

const (
	// PowerPoEPlus means the 802.3at detect line is high.
	PowerPoEPlus PowerSource = "poe-802.3at"
	// PowerPoEOrUSBC means plain 802.3af PoE or USB-C: the line cannot tell them apart.
	PowerPoEOrUSBC PowerSource = "poe-or-usbc"
	// PowerUnknown is reported when the detect line cannot be read.
	PowerUnknown PowerSource = ""
)

// FanUnit is the kind of fan unit fitted to the blade.
type FanUnit string

const (
	FanUnitStandard FanUnit = "standard"
	FanUnitSmart    FanUnit = "smart"
	FanUnitNone     FanUnit = "none"
)

// Capability names one thing a backend can do on this machine.
type Capability string

const (
	CapFan                Capability = "fan"
	CapTach               Capability = "tach"
	CapLEDs               Capability = "leds"
	CapButton             Capability = "button"
	CapStealth            Capability = "stealth"
	CapPoEDetect          Capability = "poe-detect"
	CapTemperature        Capability = "temperature"
	CapAirflowTemperature Capability = "airflow-temperature"
)

// AllCapabilities lists every capability kubeblade knows, in a stable order.
var AllCapabilities = []Capability{
	CapFan, CapTach, CapLEDs, CapButton, CapStealth, CapPoEDetect, CapTemperature, CapAirflowTemperature,
}

// Capabilities is the set of capabilities a backend found.
type Capabilities map[Capability]bool

// Has reports whether c is present.
func (cs Capabilities) Has(c Capability) bool { return cs[c] }

// List returns the present capabilities, sorted.
func (cs Capabilities) List() []string {
	out := make([]string, 0, len(cs))
	for c, ok := range cs {
		if ok {
			out = append(out, string(c))
		}
	}
	sort.Strings(out)
	return out
}

// Missing returns the known capabilities that are absent, sorted.
func (cs Capabilities) Missing() []string {
	var out []string
	for _, c := range AllCapabilities {
		if !cs[c] {
			out = append(out, string(c))
		}
	}
	sort.Strings(out)
	return out
}

// Info describes the machine a backend found.
type Info struct {
	// Backend is the backend's name: "linux", "simulated", ...
	Backend string
	// IsBlade is false when the backend found a machine that is not a
	// Compute Blade; the agent then idles instead of driving anything.
	IsBlade bool
	// SoC is "bcm2711", "bcm2712", "simulated", ...
	SoC string
	// FanUnit is the fitted fan unit.
	FanUnit FanUnit
	// Detail is a human-readable note on how the machine was detected.
	Detail string
}

// ButtonEdge says what a ButtonEvent saw.
type ButtonEdge uint8

const (
	// ButtonClick is a whole press whose length the source cannot tell:
	// the smart fan unit's button frame (0xA1) reports a press, no
	// release. It always counts as a short press. It is the zero value,
	// so a backend that sets no Edge reports clicks.
	ButtonClick ButtonEdge = iota
	// ButtonDown: the button went down (the edge button's GPIO20 fell; it
	// is active low).
	ButtonDown
	// ButtonUp: the button was released (GPIO20 rose).
	ButtonUp
)

// ButtonEvent is one raw edge of the edge button (or a press of the smart
// fan unit's button for this blade), timestamped by whoever saw it first
// (the kernel for GPIO edges) so debouncing and the length of a press do
// not depend on scheduling delays.
type ButtonEvent struct {
	Time time.Time
	Edge ButtonEdge
}

// Backend drives one blade. Implementations must be safe for use by one
// caller goroutine at a time plus ButtonEvents' reader; the agent serialises
// all other calls in its loop.
type Backend interface {
	// Info describes the machine. Backend, IsBlade, SoC and FanUnit are
	// fixed once Open has returned; Detail may change with Capabilities.
	Info() Info
	// Capabilities lists what this backend can drive here now. It may
	// grow or shrink after Open when hardware is found late (the linux
	// backend's smart fan unit is missing until its first frame); the
	// agent reads it again on every sample. Safe to call concurrently
	// with the other methods.
	Capabilities() Capabilities

	// SetFanPercent sets the fan duty, 0–100.
	SetFanPercent(percent uint8) error
	// FanRPM returns the measured fan speed.
	FanRPM() (float64, error)
	// SetLED sets one LED's colour.
	SetLED(led LED, c Color) error
	// SetStealth drives (true) or releases the stealth output.
	SetStealth(on bool) error
	// PowerSource reads the PoE detect line.
	PowerSource() (PowerSource, error)
	// SoCTemperature returns the SoC temperature in °C.
	SoCTemperature() (float64, error)
	// AirflowTemperature returns the air temperature the smart fan unit
	// measures, in °C, or ErrNotSupported without one.
	AirflowTemperature() (float64, error)
	// ButtonEvents delivers raw (not yet debounced) button edges, or
	// clicks where the source reports no release. The channel is closed
	// by Close.
	ButtonEvents() <-chan ButtonEvent

	// Close releases devices. It does not change outputs: the agent's
	// safe exit sets them first.
	Close() error
}

// Opener creates a backend; ctx bounds detection and device opening.
type Opener func(ctx context.Context) (Backend, error)
