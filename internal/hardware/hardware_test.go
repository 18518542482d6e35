package hardware

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseColor(t *testing.T) {
	cases := map[string]struct {
		in      string
		want    Color
		wantErr bool
	}{
		"lower":   {"#ff8000", Color{255, 128, 0}, false},
		"upper":   {"#0A0B0C", Color{10, 11, 12}, false},
		"no hash": {"001000", Color{0, 16, 0}, false},
		"spaces":  {"  #000001 ", Color{0, 0, 1}, false},
		"short":   {"#f00", Color{}, true},
		"long":    {"#ff00000", Color{}, true},
		"not hex": {"#gg0000", Color{}, true},
		"empty":   {"", Color{}, true},
		"name":    {"red", Color{}, true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParseColor(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("ParseColor(%q) = %v, want %v", tc.in, got, tc.want)
			}
			if !tc.wantErr {
				if back, _ := ParseColor(got.String()); back != got {
					t.Errorf("round trip through %q gave %v", got.String(), back)
				}
			}
		})
	}
}

func TestCapabilities(t *testing.T) {
	cs := Capabilities{CapFan: true, CapTemperature: true, CapLEDs: false}
	if !cs.Has(CapFan) || cs.Has(CapLEDs) || cs.Has(CapTach) {
		t.Fatal("Has is wrong")
	}
	if diff := cmp.Diff([]string{"fan", "temperature"}, cs.List()); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}
	want := []string{"airflow-temperature", "button", "leds", "poe-detect", "stealth", "tach"}
	if diff := cmp.Diff(want, cs.Missing()); diff != "" {
		t.Errorf("Missing (-want +got):\n%s", diff)
	}
}

func TestLEDString(t *testing.T) {
	if LEDTop.String() != "top" || LEDEdge.String() != "edge" || LED(9).String() != "led(9)" {
		t.Fatal("LED names")
	}
}
