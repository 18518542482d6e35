package linux

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/kubeblade/kubeblade/internal/hardware/linux/gpio"
)

// SoC names as the kubeblade.io/soc label carries them.
const (
	SoCBCM2711 = "bcm2711" // Compute Module 4
	SoCBCM2712 = "bcm2712" // Compute Module 5
	SoCRK3588  = "rk3588"  // Radxa CM5 (an RK3588S)
)

// GPIO chip labels of the blade's header pins. On a CM5 the pins are on
// the RP1 south bridge, not on the SoC.
const (
	LabelBCM2711 = "pinctrl-bcm2711"
	LabelRP1     = "pinctrl-rp1"
)

// Platform is what detection found.
type Platform struct {
	SoC     string
	Model   string
	IsBlade bool
	// Source says where the answer came from, for Info.Detail.
	Source string
	Detail string
}

// Detect identifies the machine. It reads the devicetree's compatible
// list, from sysfs first and /proc/device-tree second; container runtimes
// mask /sys/firmware (and with it the /proc link), so when neither can be
// read it falls back to the labels of the GPIO chips, which a container
// with /dev mounted still sees.
//
// A readable devicetree must name a Compute Module: a Raspberry Pi 4 or 5
// board has the same SoC but none of the blade's wiring, and driving its
// GPIO21 or GPIO12 could upset whatever HAT is fitted.
func Detect(sysfsRoot, procRoot, devRoot string, d gpio.Driver) Platform {
	for _, dir := range []string{
		filepath.Join(sysfsRoot, "firmware", "devicetree", "base"),
		filepath.Join(procRoot, "device-tree"),
	} {
		raw, err := os.ReadFile(filepath.Join(dir, "compatible"))
		if err != nil {
			continue
		}
		model := ""
		if m, err := os.ReadFile(filepath.Join(dir, "model")); err == nil {
			model = strings.TrimRight(string(m), "\x00\n")
		}
		return fromCompatible(splitNUL(raw), model, filepath.Join(dir, "compatible"))
	}
	if d != nil {
		labels := gpio.Labels(d, devRoot)
		for _, l := range labels {
			switch l {
			case LabelBCM2711:
				return Platform{SoC: SoCBCM2711, IsBlade: true, Source: "gpio chip label",
					Detail: "devicetree hidden; SoC from GPIO chip " + l + ", assumed a Compute Blade"}
			case LabelRP1:
				return Platform{SoC: SoCBCM2712, IsBlade: true, Source: "gpio chip label",
					Detail: "devicetree hidden; SoC from GPIO chip " + l + ", assumed a Compute Blade"}
			}
		}
		if len(labels) > 0 {
			return Platform{Source: "gpio chip label",
				Detail: fmt.Sprintf("devicetree hidden and no Raspberry Pi GPIO chip (found %s): not a Compute Blade", strings.Join(labels, ", "))}
		}
	}
	return Platform{Source: "none", Detail: "no devicetree and no GPIO chips: not a Compute Blade"}
}

func fromCompatible(compat []string, model, path string) Platform {
	p := Platform{Model: model, Source: path}
	cm := false
	for _, c := range compat {
		switch c {
		case "brcm,bcm2711":
			p.SoC = SoCBCM2711
		case "brcm,bcm2712":
			p.SoC = SoCBCM2712
		case "rockchip,rk3588", "rockchip,rk3588s":
			// Mainline's Radxa CM5 says rk3588s (rk3588s-radxa-cm5.dtsi),
			// Radxa's own kernel rk3588.
			p.SoC = SoCRK3588
		case "raspberrypi,4-compute-module", "raspberrypi,5-compute-module", "radxa,cm5":
			cm = true
		}
	}
	desc := model
	if desc == "" {
		desc = strings.Join(compat, ", ")
	}
	switch {
	case p.SoC != "" && cm:
		p.IsBlade = true
		p.Detail = desc
	case p.SoC == SoCRK3588:
		p.Detail = desc + ": an RK3588 board but not a Radxa CM5, so not a Compute Blade"
	case p.SoC != "":
		p.Detail = desc + ": a Raspberry Pi but not a Compute Module, so not a Compute Blade"
	default:
		p.Detail = desc + ": not a Raspberry Pi Compute Module"
		if len(compat) > 0 {
			// Keep the vendor's SoC name for the label, e.g. rockchip,rk3588.
			p.SoC = strings.TrimPrefix(compat[len(compat)-1], strings.SplitN(compat[len(compat)-1], ",", 2)[0]+",")
		}
	}
	return p
}

func splitNUL(b []byte) []string {
	var out []string
	for _, f := range bytes.Split(b, []byte{0}) {
		if s := strings.TrimSpace(string(f)); s != "" {
			out = append(out, s)
		}
	}
	return out
}
