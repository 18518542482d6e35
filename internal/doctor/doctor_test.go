package doctor

import (
	"slices"
	"strings"
	"testing"
)

func socOf(b Board) string {
	return map[Board]string{BoardCM4: "bcm2711", BoardCM5: "bcm2712", BoardRadxaCM5: "rk3588"}[b]
}

func fixFor(r Report, c string) (Fix, bool) {
	for _, f := range r.Fixes {
		if f.Capability == c {
			return f, true
		}
	}
	return Fix{}, false
}

// TestEveryCombination: board × OS × fan unit, with the fan and the LEDs
// missing, says exactly what to change.
func TestEveryCombination(t *testing.T) {
	type want struct {
		schematic  string   // a line the schematic's configTxtAppend must hold ("" = no schematic)
		configTxt  []string // config.txt lines
		patch      string   // the embedded Talos patch expected ("" = none)
		install    string   // a substring of Install ("" = nothing to install)
		verify     string   // a substring of one Verify command
		noFix      bool     // no fix at all for this capability
		noteSubstr string
	}
	cases := []struct {
		board   Board
		os      OS
		unit    string
		fan     want
		leds    want
		ledsWhy string
	}{
		{BoardCM4, OSTalos, "standard",
			want{schematic: "dtoverlay=pwm,pin=12,func=4", patch: "install-image", verify: "talosctl -n blade1 ls /sys/class/pwm"},
			want{patch: "kubeblade-leds", install: "kubeblade-leds system extension", verify: "talosctl -n blade1 ls /sys/class/leds"}, ""},
		{BoardCM4, OSTalos, "smart",
			want{schematic: "dtoverlay=uart5", patch: "install-image", verify: "talosctl -n blade1 ls /dev/ttyAMA5"},
			want{patch: "kubeblade-leds", install: "kubeblade-leds system extension", verify: "bladectl led test"}, ""},
		{BoardCM4, OSRaspiOS, "standard",
			want{configTxt: []string{"dtoverlay=pwm,pin=12,func=4"}, verify: "ls /sys/class/pwm"},
			want{install: "dkms install kubeblade-leds/0.1.0", verify: "dmesg | grep kubeblade-leds"}, ""},
		{BoardCM4, OSRaspiOS, "smart",
			want{configTxt: []string{"dtoverlay=uart5"}, verify: "ls /dev/ttyAMA5"},
			want{install: "DKMS", verify: "ls /sys/class/leds"}, ""},
		{BoardCM5, OSTalos, "standard",
			want{schematic: "dtoverlay=pwm-gpio,gpio=12", patch: "install-image", verify: "talosctl -n blade1 ls /sys/class/pwm", noteSubstr: "software PWM"},
			want{patch: "kubeblade-leds", install: "rpi_5 overlay", verify: "talosctl -n blade1 dmesg"}, ""},
		{BoardCM5, OSTalos, "smart",
			want{schematic: "dtoverlay=uart4-pi5", patch: "install-image", verify: "talosctl -n blade1 ls /dev/ttyAMA4"},
			want{patch: "kubeblade-leds", install: "kubeblade-leds system extension", verify: "bladectl led test"}, ""},
		{BoardCM5, OSRaspiOS, "standard",
			want{configTxt: []string{"dtoverlay=pwm,pin=12,func=4"}, verify: "ls /sys/class/pwm"},
			want{configTxt: []string{"dtoverlay=ws2812-pio,gpio=18,num_leds=2"}, verify: "ls -l /dev/leds0"}, ""},
		{BoardCM5, OSRaspiOS, "smart",
			want{configTxt: []string{"dtoverlay=uart4-pi5"}, verify: "ls /dev/ttyAMA4"},
			want{configTxt: []string{"dtoverlay=ws2812-pio,gpio=18,num_leds=2"}, verify: "ls -l /dev/leds0"}, ""},
		{BoardRadxaCM5, OSTalos, "standard",
			want{verify: "talosctl -n blade1 read /sys/class/hwmon", noteSubstr: "pwmfan"},
			want{noteSubstr: "no LED driver is known"}, ""},
		{BoardRadxaCM5, OSTalos, "smart",
			want{verify: "talosctl -n blade1 read /sys/class/hwmon", noteSubstr: "pwmfan"},
			want{noteSubstr: "no LED driver is known"}, ""},
		{BoardRadxaCM5, OSRaspiOS, "standard",
			want{verify: "cat /sys/class/hwmon/hwmon0/name", noteSubstr: "pwmfan"},
			want{noteSubstr: "no LED driver is known"}, ""},
		{BoardRadxaCM5, OSRaspiOS, "smart",
			want{verify: "cat /sys/class/hwmon/hwmon0/name", noteSubstr: "pwmfan"},
			want{noteSubstr: "no LED driver is known"}, ""},
	}
	seen := map[string]bool{}
	for _, tc := range cases {
		name := string(tc.board) + "/" + string(tc.os) + "/" + tc.unit
		seen[name] = true
		t.Run(name, func(t *testing.T) {
			r := Diagnose(Input{Node: "blade1", Backend: "linux", IsBlade: true, SoC: socOf(tc.board), FanUnit: tc.unit,
				OS: tc.os, Missing: []string{"fan", "leds"},
				Detail: "devicetree; missing fan: no PWM chip drives GPIO12; leds: no LED class device named top or edge"})
			if r.Board != tc.board || r.OS != tc.os {
				t.Fatalf("board %s os %s", r.Board, r.OS)
			}
			for _, c := range []struct {
				capability string
				w          want
			}{{"fan", tc.fan}, {"leds", tc.leds}} {
				f, ok := fixFor(r, c.capability)
				if !ok {
					t.Fatalf("no fix for %s: %+v", c.capability, r)
				}
				if !strings.HasPrefix(f.Why, "missing "+c.capability) {
					t.Errorf("%s: why %q", c.capability, f.Why)
				}
				if c.w.schematic == "" && f.Schematic != "" || c.w.schematic != "" && !strings.Contains(f.Schematic, "      "+c.w.schematic+"\n") {
					t.Errorf("%s: schematic %q, want the line %q", c.capability, f.Schematic, c.w.schematic)
				}
				if c.w.schematic != "" && tc.board == BoardCM5 && !strings.Contains(f.Schematic, "name: rpi_5") ||
					c.w.schematic != "" && tc.board == BoardCM4 && !strings.Contains(f.Schematic, "name: rpi_generic") {
					t.Errorf("%s: schematic for the wrong overlay: %q", c.capability, f.Schematic)
				}
				if !slices.Equal(f.ConfigTxt, c.w.configTxt) {
					t.Errorf("%s: config.txt %q, want %q", c.capability, f.ConfigTxt, c.w.configTxt)
				}
				if (c.w.patch == "") != (f.TalosPatch == "") || c.w.patch != "" && f.TalosPatch != Patch(c.w.patch) {
					t.Errorf("%s: Talos patch %q, want talos/%s.yaml", c.capability, f.TalosPatch, c.w.patch)
				}
				if tc.os == OSRaspiOS && f.TalosPatch != "" || tc.os == OSTalos && len(f.ConfigTxt) > 0 {
					t.Errorf("%s: advice for the other OS: %+v", c.capability, f)
				}
				inst := strings.Join(f.Install, "\n")
				if (c.w.install == "") != (inst == "") || !strings.Contains(inst, c.w.install) {
					t.Errorf("%s: install %q, want %q", c.capability, inst, c.w.install)
				}
				if c.w.verify != "" && !slices.ContainsFunc(f.Verify, func(v string) bool { return strings.Contains(v, c.w.verify) }) {
					t.Errorf("%s: verify %q lacks %q", c.capability, f.Verify, c.w.verify)
				}
				if !strings.Contains(f.Note, c.w.noteSubstr) {
					t.Errorf("%s: note %q lacks %q", c.capability, f.Note, c.w.noteSubstr)
				}
			}
		})
	}
	for _, b := range Boards {
		for _, o := range OSes {
			for _, u := range []string{"standard", "smart"} {
				if !seen[string(b)+"/"+string(o)+"/"+u] {
					t.Errorf("combination %s/%s/%s not covered", b, o, u)
				}
			}
		}
	}
}

// TestGPIOOnOff: a standard unit the agent can only switch on and off is
// not "missing", but doctor still says how to get proportional speed.
func TestGPIOOnOff(t *testing.T) {
	r := Diagnose(Input{Backend: "linux", IsBlade: true, SoC: "bcm2712", FanUnit: "standard", OS: OSTalos,
		Detail: "devicetree compatible raspberrypi,5-compute-module; fan: gpio-on-off (no PWM chip drives GPIO12 (found pwmchip0 = 1f0009c000.pwm; set linux.pwmChip to choose one): not found)"})
	f, ok := fixFor(r, "fan")
	if !ok || !strings.Contains(f.Schematic, "dtoverlay=pwm-gpio,gpio=12") {
		t.Fatalf("fixes %+v", r.Fixes)
	}
	if !strings.HasPrefix(f.Why, "the fan is only switched on or off: fan: gpio-on-off (no PWM chip drives GPIO12 (found pwmchip0") {
		t.Errorf("why %q", f.Why)
	}
	if f.Verify[0] != "talosctl -n <node> ls /sys/class/pwm" {
		t.Errorf("verify %q", f.Verify)
	}
}

func TestNothingToChange(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   Input
		want string
	}{
		{"healthy", Input{Backend: "linux", IsBlade: true, SoC: "bcm2711", FanUnit: "standard", OS: OSTalos}, "every capability is available"},
		{"simulated", Input{Backend: "simulated", IsBlade: true, SoC: "simulated", Missing: []string{"leds"}}, "simulated backend"},
		{"not a blade", Input{Backend: "linux", Detail: "devicetree compatible raspberrypi,4-model-b: a Raspberry Pi but not a Compute Module, so not a Compute Blade"}, "no Compute Blade here (devicetree compatible raspberrypi,4-model-b"},
		{"unknown SoC", Input{Backend: "linux", IsBlade: true, SoC: "bcm9999"}, `SoC "bcm9999"`},
		{"radxa pins", Input{Backend: "linux", IsBlade: true, SoC: "rk3588", FanUnit: "standard", OS: OSTalos, Missing: []string{"button", "poe-detect", "stealth", "tach"}}, "which this board does not provide"},
		{"airflow on a standard unit", Input{Backend: "linux", IsBlade: true, SoC: "bcm2711", FanUnit: "standard", OS: OSRaspiOS, Missing: []string{"airflow-temperature"}}, "nothing to change"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Diagnose(tc.in)
			if len(r.Fixes) != 0 || !strings.Contains(r.Summary, tc.want) {
				t.Fatalf("summary %q fixes %+v, want none and %q", r.Summary, r.Fixes, tc.want)
			}
		})
	}
}

// TestUnknownOS gives both routes and says to pass --os.
func TestUnknownOS(t *testing.T) {
	r := Diagnose(Input{Backend: "linux", IsBlade: true, SoC: "bcm2711", FanUnit: "smart", Missing: []string{"fan"}})
	f, _ := fixFor(r, "fan")
	if r.OS != OSUnknown || f.Schematic == "" || len(f.ConfigTxt) == 0 || !strings.Contains(r.Summary, "--os") {
		t.Fatalf("%+v", r)
	}
}

func TestOSDetection(t *testing.T) {
	for _, tc := range []struct {
		osRelease, kernel string
		want              OS
	}{
		{"NAME=\"Talos\"\nID=talos\nVERSION_ID=v1.12.6\n", "6.18.1-talos", OSTalos},
		{"PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nID=debian\n", "6.12.25+rpt-rpi-2712", OSRaspiOS},
		{"ID=debian\n", "6.6.51+rpt-rpi-v8", OSRaspiOS},
		{"ID=raspbian\n", "6.1.21-v7l+", OSRaspiOS},
		{"ID=debian\n", "6.1.0-28-arm64", OSUnknown},
		{"ID=ubuntu\n", "6.8.0-1010-raspi", OSUnknown},
	} {
		if got := OSFromRelease(tc.osRelease, tc.kernel); got != tc.want {
			t.Errorf("OSFromRelease(%q, %q) = %s, want %s", tc.osRelease, tc.kernel, got, tc.want)
		}
	}
	for _, tc := range []struct {
		osImage, kernel string
		want            OS
	}{
		{"Talos (v1.12.6)", "6.18.1-talos", OSTalos},
		{"Debian GNU/Linux 12 (bookworm)", "6.12.25+rpt-rpi-2712", OSRaspiOS},
		{"Ubuntu 24.04 LTS", "6.8.0-1010-raspi", OSUnknown},
	} {
		if got := OSFromNodeInfo(tc.osImage, tc.kernel); got != tc.want {
			t.Errorf("OSFromNodeInfo(%q, %q) = %s, want %s", tc.osImage, tc.kernel, got, tc.want)
		}
	}
}

// TestDetailFor reads detail as hardware/linux writes it: notes, then
// "missing " and the missing capabilities, each "capability: why".
func TestDetailFor(t *testing.T) {
	d := "devicetree x; fan: none (a; b); tach: GPIO13 held; missing fan: no PWM chip (found none; set linux.pwmChip); leds: none (x; y)"
	for _, c := range []struct {
		capability, clause string
		missing            bool
	}{
		{"fan", "fan: no PWM chip (found none; set linux.pwmChip)", true},
		{"leds", "leds: none (x; y)", true},
		{"tach", "tach: GPIO13 held", false},
		{"button", "", false},
	} {
		if got, missing := detailFor(d, c.capability); got != c.clause || missing != c.missing {
			t.Errorf("%s: %q, %v; want %q, %v", c.capability, got, missing, c.clause, c.missing)
		}
	}
	r := Diagnose(Input{Backend: "linux", IsBlade: true, SoC: "bcm2711", FanUnit: "standard", OS: OSTalos,
		Missing: []string{"fan", "leds", "button"}, Detail: d})
	for capability, why := range map[string]string{
		"fan":  "missing fan: no PWM chip (found none; set linux.pwmChip)",
		"leds": "missing leds: none (x; y)",
	} {
		if f, ok := fixFor(r, capability); !ok || f.Why != why {
			t.Errorf("%s: why %q, want %q", capability, f.Why, why)
		}
	}
}

// TestFanAndLEDsTogether: the LED driver also drives the fan, so the fan's
// overlay is marked as not needed with it.
func TestFanAndLEDsTogether(t *testing.T) {
	for _, b := range []Board{BoardCM4, BoardCM5} {
		r := Diagnose(Input{Backend: "linux", IsBlade: true, SoC: socOf(b), FanUnit: "standard", OS: OSTalos, Missing: []string{"fan", "leds"}})
		if f, _ := fixFor(r, "fan"); !strings.HasPrefix(f.Note, "If you install the LED driver (leds, below), skip this change") {
			t.Errorf("%s: fan note %q", b, f.Note)
		}
		r = Diagnose(Input{Backend: "linux", IsBlade: true, SoC: socOf(b), FanUnit: "standard", OS: OSTalos, Missing: []string{"fan"}})
		if f, _ := fixFor(r, "fan"); strings.Contains(f.Note, "skip this change") {
			t.Errorf("%s: fan alone: note %q", b, f.Note)
		}
	}
}
