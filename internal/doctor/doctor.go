// Package doctor turns an agent's capability report into what a user has to
// change on their blade: for the board (CM4, CM5, Radxa CM5), the OS (Talos,
// Raspberry Pi OS) and the fan unit (standard, smart) it names the Talos
// machine-config patch or the config.txt lines, the module or system
// extension to install, and the command that proves it worked. The advice
// restates docs/talos.md, docs/install.md and docs/leds.md; `bladectl
// doctor` prints it. The Talos patches it prints are the files in talos/,
// which test/talos validates with Talos's own machinery.
package doctor

import (
	"bufio"
	"embed"
	"fmt"
	"slices"
	"strings"
)

//go:embed talos/*.yaml
var talosPatches embed.FS

// Patch returns the embedded Talos machine-config patch talos/<name>.yaml.
func Patch(name string) string {
	b, err := talosPatches.ReadFile("talos/" + name + ".yaml")
	if err != nil {
		panic(err) // embedded at build time: a missing one is a programming error
	}
	return string(b)
}

// Board is the Compute Module on the blade.
type Board string

const (
	BoardCM4      Board = "cm4"       // Raspberry Pi CM4, BCM2711
	BoardCM5      Board = "cm5"       // Raspberry Pi CM5, BCM2712 + RP1
	BoardRadxaCM5 Board = "radxa-cm5" // Radxa CM5, RK3588
	BoardUnknown  Board = "unknown"
)

// Boards are the boards kubeblade supports, in a stable order.
var Boards = []Board{BoardCM4, BoardCM5, BoardRadxaCM5}

// BoardFromSoC maps the agent's SoC (HardwareInfo.soc, Blade status.soc)
// to the board: the agent detects bcm2711 on a CM4, bcm2712 on a CM5 and
// rk3588 on a Radxa CM5 (docs/talos.md, "Radxa CM5").
func BoardFromSoC(soc string) Board {
	switch soc {
	case "bcm2711":
		return BoardCM4
	case "bcm2712":
		return BoardCM5
	case "rk3588":
		return BoardRadxaCM5
	}
	return BoardUnknown
}

func (b Board) title() string {
	switch b {
	case BoardCM4:
		return "Raspberry Pi CM4 (bcm2711)"
	case BoardCM5:
		return "Raspberry Pi CM5 (bcm2712)"
	case BoardRadxaCM5:
		return "Radxa CM5 (rk3588)"
	}
	return "unknown board"
}

// OS is the operating system on the blade.
type OS string

const (
	OSTalos   OS = "talos"
	OSRaspiOS OS = "raspios"
	OSUnknown OS = "unknown"
)

// OSes are the operating systems kubeblade supports, in a stable order.
var OSes = []OS{OSTalos, OSRaspiOS}

func (o OS) title() string {
	switch o {
	case OSTalos:
		return "Talos Linux"
	case OSRaspiOS:
		return "Raspberry Pi OS"
	}
	return "unknown OS"
}

// ParseOS accepts the --os flag's values.
func ParseOS(s string) (OS, error) {
	switch OS(s) {
	case OSTalos, OSRaspiOS:
		return OS(s), nil
	}
	return "", fmt.Errorf("--os %q: want talos or raspios", s)
}

// OSFromRelease classifies an os-release(5) file and the kernel release.
// Talos's os-release has ID=talos, and its kernel release ends in "-talos"
// (what a container on Talos, without the host's os-release, still sees).
// Raspberry Pi OS's says ID=debian (or
// raspbian on 32-bit and older images), so its kernel tells it apart:
// Raspberry Pi's kernel packages carry "+rpt-rpi-" (6.6 on) or end in
// "-v8+" / "-2712" (older images).
func OSFromRelease(osRelease, kernelRelease string) OS {
	id := ""
	sc := bufio.NewScanner(strings.NewReader(osRelease))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "ID="); ok {
			id = strings.Trim(v, `"'`)
		}
	}
	switch {
	case id == "talos" || strings.HasSuffix(kernelRelease, "-talos"):
		return OSTalos
	case id == "raspbian" || isRaspberryPiKernel(kernelRelease):
		return OSRaspiOS
	}
	return OSUnknown
}

// OSFromNodeInfo classifies a Node's status.nodeInfo: the kubelet reports
// os-release's PRETTY_NAME as osImage ("Talos (v1.12.6)" on Talos) and the
// kernel release as kernelVersion.
func OSFromNodeInfo(osImage, kernelVersion string) OS {
	switch {
	case strings.HasPrefix(osImage, "Talos"):
		return OSTalos
	case strings.Contains(osImage, "Raspbian") || isRaspberryPiKernel(kernelVersion):
		return OSRaspiOS
	}
	return OSUnknown
}

func isRaspberryPiKernel(r string) bool {
	return strings.Contains(r, "+rpt-rpi-") || strings.HasSuffix(r, "-v8+") || strings.HasSuffix(r, "-v8-16k+") ||
		strings.HasSuffix(r, "-2712") || strings.HasSuffix(r, "-2712+")
}

// Input is what the agent reported, and where it runs.
type Input struct {
	Node string // node or blade name, for the commands printed; "" = this one
	// From the agent (HardwareInfo / Blade status).
	Backend      string
	IsBlade      bool
	SoC          string
	FanUnit      string // standard, smart, none
	Detail       string
	Capabilities []string
	Missing      []string
	// From the host.
	OS            OS
	OSName        string // os-release PRETTY_NAME or the Node's osImage
	KernelRelease string
}

// Fix is one thing to change.
type Fix struct {
	// Capability is the agent capability this brings back.
	Capability string `json:"capability"`
	// Why says what is missing and why.
	Why string `json:"why"`
	// Schematic is an Image Factory schematic (Talos): the board overlay
	// with its configTxtAppend lines, or kernel arguments.
	Schematic string `json:"schematic,omitempty"`
	// TalosPatch is a Talos machine-config patch.
	TalosPatch string `json:"talosPatch,omitempty"`
	// ConfigTxt are lines for /boot/firmware/config.txt (Raspberry Pi OS).
	ConfigTxt []string `json:"configTxt,omitempty"`
	// RemoveConfigTxt are config.txt lines (or configTxtAppend lines) to remove.
	RemoveConfigTxt []string `json:"removeConfigTxt,omitempty"`
	// Install is the module or extension to install, and how.
	Install []string `json:"install,omitempty"`
	// Apply are the commands that apply the change.
	Apply []string `json:"apply,omitempty"`
	// Verify are the commands that prove it worked.
	Verify []string `json:"verify,omitempty"`
	// Note is anything else the user must know (untested paths, limits).
	Note string `json:"note,omitempty"`
}

// Report is doctor's answer for one blade.
type Report struct {
	Node          string   `json:"node,omitempty"`
	Board         Board    `json:"board"`
	OS            OS       `json:"os"`
	OSName        string   `json:"osName,omitempty"`
	KernelRelease string   `json:"kernelRelease,omitempty"`
	FanUnit       string   `json:"fanUnit,omitempty"`
	Backend       string   `json:"backend,omitempty"`
	IsBlade       bool     `json:"isBlade"`
	Capabilities  []string `json:"capabilities,omitempty"`
	Missing       []string `json:"missing,omitempty"`
	Detail        string   `json:"detail,omitempty"`
	// Summary is one sentence: all well, or what follows.
	Summary string `json:"summary"`
	Fixes   []Fix  `json:"fixes,omitempty"`
}

// Diagnose says what to change for in.
func Diagnose(in Input) Report {
	r := Report{Node: in.Node, Board: BoardFromSoC(in.SoC), OS: in.OS, OSName: in.OSName, KernelRelease: in.KernelRelease,
		FanUnit: in.FanUnit, Backend: in.Backend, IsBlade: in.IsBlade, Capabilities: in.Capabilities,
		Missing: in.Missing, Detail: in.Detail}
	if in.OS == "" {
		in.OS = OSUnknown
	}
	r.OS = in.OS
	switch {
	case in.Backend == "simulated":
		r.Summary = "the agent runs the simulated backend (a software blade): there is no hardware to change"
		return r
	case !in.IsBlade:
		r.Summary = "the agent found no Compute Blade here (" + nonEmpty(in.Detail, "no detail") +
			"): nothing to change on this machine; a BladeConfig's nodeSelector can keep the agent off it"
		return r
	case r.Board == BoardUnknown:
		r.Summary = fmt.Sprintf("the agent reports SoC %q, which doctor does not know", in.SoC)
		return r
	}
	d := diag{in: in, board: r.Board, node: nonEmpty(in.Node, "<node>")}
	for _, c := range in.Missing {
		if f, ok := d.fix(c); ok {
			r.Fixes = append(r.Fixes, f)
		}
	}
	// A standard fan unit driven on/off is not missing, but not
	// proportional either.
	if in.FanUnit == "standard" && !slices.Contains(in.Missing, "fan") && strings.Contains(in.Detail, "gpio-on-off") {
		f := d.fanPWM()
		note, _ := detailFor(in.Detail, "fan")
		f.Why = "the fan is only switched on or off: " + note
		r.Fixes = append(r.Fixes, f)
	}
	// kubeblade-leds also provides the fan's PWM chip and owns the pins a
	// PWM overlay would take (docs/talos.md §3, docs/leds.md).
	fan, leds := -1, -1
	for i, f := range r.Fixes {
		switch f.Capability {
		case "fan":
			fan = i
		case "leds":
			leds = i
		}
	}
	if fan >= 0 && leds >= 0 && in.FanUnit != "smart" && r.Board != BoardRadxaCM5 {
		r.Fixes[fan].Note = strings.TrimSpace("If you install the LED driver (leds, below), skip this change: the driver also provides the fan's PWM chip, which the agent prefers, and the PWM overlay must then go. " + r.Fixes[fan].Note)
	}
	switch {
	case len(r.Fixes) == 0 && len(in.Missing) == 0:
		r.Summary = "every capability is available: nothing to change"
	case len(r.Fixes) == 0:
		r.Summary = "missing " + strings.Join(in.Missing, ", ") + ", which this board does not provide: nothing to change"
	case r.OS == OSUnknown:
		r.Summary = fmt.Sprintf("%d change(s) below, for both Talos and Raspberry Pi OS: doctor could not tell the OS (pass --os)", len(r.Fixes))
	default:
		r.Summary = fmt.Sprintf("%d change(s) below", len(r.Fixes))
	}
	return r
}

type diag struct {
	in    Input
	board Board
	node  string
}

func (d diag) talos() bool   { return d.in.OS == OSTalos || d.in.OS == OSUnknown }
func (d diag) raspios() bool { return d.in.OS == OSRaspiOS || d.in.OS == OSUnknown }
func (d diag) smart() bool   { return d.in.FanUnit == "smart" }

func (d diag) fix(capability string) (Fix, bool) {
	// The agent's reason, as its report words it ("missing fan: no PWM
	// chip drives GPIO12 …"), else what it noted about the capability.
	why := "missing " + capability
	if s, missing := detailFor(d.in.Detail, capability); missing {
		why = "missing " + s
	} else if s != "" {
		why += " (" + s + ")"
	}
	var f Fix
	switch capability {
	case "fan":
		switch {
		case d.board == BoardRadxaCM5:
			f = d.radxaFan()
		case d.smart():
			f = d.uart()
		default:
			f = d.fanPWM()
		}
	case "leds":
		f = d.leds()
	case "tach":
		if d.smart() || d.board == BoardRadxaCM5 {
			return Fix{}, false // the unit reports RPM; Radxa: not wired
		}
		f = Fix{Note: "the fan's tachometer is GPIO13 on the GPIO character device; it is missing when the UART overlay holds GPIO12/13 " +
			"(set fanUnit: smart if a smart fan unit is fitted) or when linux.lines.fanTach names a line that does not exist",
			Verify: d.gpioVerify("GPIO13")}
	case "button", "stealth", "poe-detect":
		if d.board == BoardRadxaCM5 {
			return Fix{}, false // how the Radxa CM5's pins reach these lines is not known
		}
		f = Fix{Note: "the blade's " + capability + " line is on the SoC's GPIO chip (pinctrl-bcm2711 on a CM4, pinctrl-rp1 on a CM5); " +
			"check linux.gpioChip and linux.lines in the BladeConfig or agent.yaml (docs/talos.md §2)",
			Verify: d.gpioVerify("")}
	case "temperature":
		f = Fix{Note: "the SoC temperature comes from the thermal zone of type cpu-thermal (Radxa CM5: package-thermal or soc-thermal); " +
			"set linux.thermalZoneType to the type your kernel names",
			Verify: []string{d.read("/sys/class/thermal/thermal_zone0/type")}}
	case "airflow-temperature":
		if !d.smart() {
			return Fix{}, false // only the smart fan unit measures airflow
		}
		f = d.uart()
	default:
		return Fix{}, false
	}
	f.Capability = capability
	f.Why = why
	return f, true
}

// gpioVerify lists the GPIO chips (and a line) on the node.
func (d diag) gpioVerify(line string) []string {
	var out []string
	if d.talos() {
		out = append(out, fmt.Sprintf("talosctl -n %s ls /dev | grep gpiochip", d.node))
	}
	if d.raspios() {
		c := "gpioinfo"
		if line != "" {
			c += " | grep -w " + line
		}
		out = append(out, c)
	}
	return out
}

func (d diag) read(path string) string {
	if d.talos() && !d.raspios() {
		return fmt.Sprintf("talosctl -n %s read %s", d.node, path)
	}
	if d.raspios() && !d.talos() {
		return "cat " + path
	}
	return fmt.Sprintf("talosctl -n %s read %s   # Raspberry Pi OS: cat %s", d.node, path, path)
}

func (d diag) ls(path string) string {
	if d.talos() && !d.raspios() {
		return fmt.Sprintf("talosctl -n %s ls %s", d.node, path)
	}
	if d.raspios() && !d.talos() {
		return "ls " + path
	}
	return fmt.Sprintf("talosctl -n %s ls %s   # Raspberry Pi OS: ls %s", d.node, path, path)
}

// overlayName is the sbc-raspberrypi overlay for the board
// (docs/talos.md §1: rpi_generic covers the CM4, rpi_5 the CM5).
func (d diag) overlayName() string {
	if d.board == BoardCM5 {
		return "rpi_5"
	}
	return "rpi_generic"
}

func (d diag) schematic(lines ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "overlay:\n  image: siderolabs/sbc-raspberrypi\n  name: %s\n  options:\n    configTxtAppend: |\n", d.overlayName())
	for _, l := range lines {
		fmt.Fprintf(&b, "      %s\n", l)
	}
	return b.String()
}

// talosSchematicSteps fills in the Talos route of a configTxtAppend change.
func (d diag) talosSchematicSteps(f *Fix, lines ...string) {
	f.Schematic = d.schematic(lines...)
	f.TalosPatch = Patch("install-image")
	f.Apply = append(f.Apply,
		"curl -X POST --data-binary @schematic.yaml https://factory.talos.dev/schematics   # gives the <schematic-id>",
		fmt.Sprintf("talosctl -n %s patch machineconfig --patch @install-image.yaml   # the patch above", d.node),
		fmt.Sprintf("talosctl -n %s upgrade --image factory.talos.dev/installer/<schematic-id>:<talos-version>", d.node))
}

// fanPWM: a PWM chip for GPIO12 (standard fan unit).
func (d diag) fanPWM() Fix {
	f := Fix{Capability: "fan"}
	switch d.board {
	case BoardCM4:
		if d.talos() {
			d.talosSchematicSteps(&f, "dtoverlay=pwm,pin=12,func=4")
		}
		if d.raspios() {
			f.ConfigTxt = []string{"dtoverlay=pwm,pin=12,func=4"}
		}
	case BoardCM5:
		if d.talos() {
			// The Talos kernel has no RP1 PWM driver: the software PWM.
			d.talosSchematicSteps(&f, "dtoverlay=pwm-gpio,gpio=12")
			f.Note = "Talos's kernel has no driver for RP1's PWM, so this is pwm-gpio, a software PWM (about 50 000 timer interrupts a second while the duty is neither 0 nor 100 %); not yet tried on a real CM5. " +
				"The kubeblade-leds extension (leds) also provides a PWM chip for the fan and replaces this overlay."
		}
		if d.raspios() {
			f.ConfigTxt = []string{"dtoverlay=pwm,pin=12,func=4"}
		}
	}
	if d.raspios() {
		f.Apply = append(f.Apply, "sudo reboot   # config.txt is read by the firmware at boot")
	}
	f.Verify = []string{d.ls("/sys/class/pwm"), d.read("/sys/class/pwm/pwmchip0/device/uevent") + "   # which device a chip is",
		"bladectl status   # FAN shows a percent; bladectl fan 60 changes its speed"}
	if d.smart() {
		f.Note = strings.TrimSpace(f.Note + " The PWM overlay and the smart fan unit's UART share GPIO12/13: use one or the other.")
	}
	return f
}

// uart: the smart fan unit's serial port.
func (d diag) uart() Fix {
	f := Fix{Capability: "fan"}
	line, dev := "dtoverlay=uart5", "/dev/ttyAMA5"
	if d.board == BoardCM5 {
		line, dev = "dtoverlay=uart4-pi5", "/dev/ttyAMA4"
	}
	if d.board == BoardRadxaCM5 {
		f.Note = "how the Radxa CM5's UART reaches the smart fan unit is not known; set linux.serialDevice to the port it is wired to"
		f.Verify = []string{d.ls("/dev")}
		return f
	}
	if d.talos() {
		d.talosSchematicSteps(&f, line)
	}
	if d.raspios() {
		f.ConfigTxt = []string{line}
		f.Apply = append(f.Apply, "sudo reboot   # config.txt is read by the firmware at boot")
	}
	f.RemoveConfigTxt = []string{"dtoverlay=pwm,pin=12,func=4", "dtoverlay=pwm-gpio,gpio=12"}
	f.Verify = []string{d.ls(dev),
		"bladectl status   # FAN shows the unit's RPM once its first frame arrives (every 2 s)"}
	f.Note = strings.TrimSpace(f.Note + " With the UART present the agent takes the unit as smart and waits for its frames; a unit that stays silent is unpowered or not cabled.")
	return f
}

func (d diag) radxaFan() Fix {
	return Fix{Capability: "fan",
		Note:   "the Radxa CM5's fan is the pwm-fan hwmon device named pwmfan, from the board's devicetree; no config.txt exists there. Set linux.hwmonName if your kernel names it otherwise",
		Verify: []string{d.read("/sys/class/hwmon/hwmon0/name") + "   # one of the hwmon devices is pwmfan"}}
}

func (d diag) leds() Fix {
	f := Fix{Capability: "leds"}
	if d.board == BoardRadxaCM5 {
		f.Note = "no LED driver is known for the Radxa CM5: the LEDs stay dark; identify, critical and stealth keep working through events, the Node condition and the Blade status"
		return f
	}
	if d.talos() {
		f.TalosPatch = Patch("kubeblade-leds")
		f.Install = append(f.Install,
			"the kubeblade-leds system extension, built for your Talos release in siderolabs/pkgs and siderolabs/extensions from deploy/talos/kubeblade-leds/, "+
				"and an installer image made with the imager from the "+d.overlayName()+" overlay and that extension (docs/talos.md §3)")
		f.Apply = append(f.Apply,
			fmt.Sprintf("talosctl -n %s patch machineconfig --patch @kubeblade-leds.yaml   # the patch above", d.node),
			fmt.Sprintf("talosctl -n %s upgrade --image ghcr.io/<you>/installer:<talos-version>", d.node))
		f.Verify = append(f.Verify,
			fmt.Sprintf("talosctl -n %s dmesg | grep kubeblade-leds", d.node),
			fmt.Sprintf("talosctl -n %s ls /sys/class/leds   # kubeblade:rgb:top, kubeblade:rgb:edge", d.node))
	}
	if d.raspios() {
		if d.board == BoardCM5 {
			f.ConfigTxt = []string{"dtoverlay=ws2812-pio,gpio=18,num_leds=2"}
			f.Apply = append(f.Apply, "sudo reboot   # config.txt is read by the firmware at boot")
			f.Verify = append(f.Verify, "ls -l /dev/leds0   # Raspberry Pi's ws2812-pio-rp1 driver")
			f.Note = "or, instead of the overlay, the kubeblade-leds module through DKMS as for a CM4 (docs/leds.md)"
		} else {
			f.Install = append(f.Install,
				"the kubeblade-leds module through DKMS: sudo apt install dkms raspberrypi-kernel-headers; "+
					"sudo cp -r kernel/kubeblade-leds /usr/src/kubeblade-leds-0.1.0; sudo dkms install kubeblade-leds/0.1.0; "+
					"echo kubeblade-leds | sudo tee /etc/modules-load.d/kubeblade-leds.conf (docs/leds.md)")
			f.Apply = append(f.Apply, "sudo modprobe kubeblade-leds")
			f.Verify = append(f.Verify, "dmesg | grep kubeblade-leds", "ls /sys/class/leds   # kubeblade:rgb:top, kubeblade:rgb:edge")
		}
	}
	f.RemoveConfigTxt = []string{"dtoverlay=pwm,pin=12,func=4", "dtoverlay=pwm-gpio,gpio=12"}
	if d.board == BoardCM5 && d.raspios() && !d.talos() {
		f.RemoveConfigTxt = nil // the ws2812-pio overlay leaves the fan's PWM alone
	}
	f.Verify = append(f.Verify, "bladectl led test   # asks you to confirm each colour on both LEDs")
	f.Note = strings.TrimSpace(f.Note + " The LED drivers are experimental: none has been seen lighting a blade yet.")
	return f
}

// detailFor picks the agent's words about capability from its detail:
// hardware/linux's Info.Detail is its notes ("fan: gpio-on-off (…)"), then
// "missing " and each missing capability's "capability: why", all joined
// by "; ". An entry of the missing list wins over a note; missing says
// which it was.
func detailFor(detail, capability string) (clause string, missing bool) {
	inMissing := false
	note := ""
	for _, part := range splitTop(detail) {
		p := strings.TrimSpace(part)
		if rest, ok := strings.CutPrefix(p, "missing "); ok && !inMissing {
			inMissing, p = true, rest
		}
		if !strings.HasPrefix(p, capability+": ") {
			continue
		}
		if inMissing {
			return p, true
		}
		if note == "" {
			note = p
		}
	}
	return note, false
}

// splitTop splits at "; " outside parentheses.
func splitTop(s string) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(':
			depth++
		case ')':
			if depth > 0 {
				depth--
			}
		case ';':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}

func nonEmpty(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
