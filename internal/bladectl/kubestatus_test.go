package bladectl

import (
	"testing"

	"github.com/kubeblade/kubeblade/api/v1alpha1"
)

// A colour in a Blade status that is not #rrggbb (a broken or newer agent,
// an edit by hand) shows as unknown in every output, never as black or
// any other colour the LED is not showing.
func TestStatusFromBladeColour(t *testing.T) {
	for _, tc := range []struct {
		color string
		want  string
	}{
		{"#ff8000", "#ff8000"},
		{"#FF8000", "#ff8000"},
		{"#000000", "#000000"},
		{"#010101", "#010101"},
		{"", unknownColor},
		{"ff8000", unknownColor},
		{"#ff800", unknownColor},
		{"#ff80000", unknownColor},
		{"#gg8000", unknownColor},
		{"#-12345", unknownColor},
		{"#+12345", unknownColor},
		{"red", unknownColor},
		{"rgb(1,2,3)", unknownColor},
	} {
		name := tc.color
		if name == "" {
			name = "empty"
		}
		t.Run(name, func(t *testing.T) {
			b := &v1alpha1.Blade{Status: v1alpha1.BladeStatus{LEDs: v1alpha1.BladeLEDsStatus{
				Top:  v1alpha1.LEDStatus{Color: tc.color, Pattern: "steady"},
				Edge: v1alpha1.LEDStatus{Color: tc.color, Pattern: "blink"},
			}}}
			v := viewStatus(statusFromBlade(b))
			if got := v.LEDs["top"].Color; got != tc.want {
				t.Errorf("top colour %q, want %q", got, tc.want)
			}
			if got, want := v.leds(), tc.want+" "+tc.want+"(blink)"; got != want {
				t.Errorf("LEDs column %q, want %q", got, want)
			}
			if got := shownColour(statusFromBlade(b), "top"); got != tc.want {
				t.Errorf("led test reads %q, want %q", got, tc.want)
			}
		})
	}
	// An LED that is off is dark whether or not the status names a colour;
	// a colour it names wrongly is still unknown.
	for color, want := range map[string]string{"": "#000000", "#000000": "#000000", "#0000": unknownColor} {
		b := &v1alpha1.Blade{Status: v1alpha1.BladeStatus{LEDs: v1alpha1.BladeLEDsStatus{Top: v1alpha1.LEDStatus{Color: color, Pattern: "off"}}}}
		if got := viewStatus(statusFromBlade(b)).LEDs["top"].Color; got != want {
			t.Errorf("off with colour %q: %q, want %q", color, got, want)
		}
	}
}
