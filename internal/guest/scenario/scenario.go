// Package scenario lists the machines the hardware tests boot, one list for
// both guests: the x86_64 guest (no devicetree; tests make gpio-sim chips
// through configfs) and the arm64 guests, QEMU's virt board booted with a
// Compute Blade's devicetree. The host side (package guest) builds each arm64
// scenario's devicetree from virt's own; the in-guest tests read Current to
// know which machine they run on and what it must show.
package scenario

import (
	"fmt"
	"os"
	"strings"
)

// Architectures of the guests.
const (
	ArchX86 = "x86_64"
	ArchARM = "arm64"
)

// Env carries the scenario's name to the guest (package guest sets it on
// the kernel command line).
const Env = "KUBEBLADE_GUEST_SCENARIO"

// PL061Node is virt's own PL061 GPIO controller in the devicetree QEMU 7.2
// generates (hw/arm/virt.c create_gpio_devices, VIRT_GPIO at 0x09030000):
// the non-sleeping line the scenarios' pwm-gpio node toggles, as pwm-gpio
// refuses gpio-sim's sleeping lines.
const PL061Node = "/pl061@9030000"

// PWMGPIODevice is the platform device of the pwm-gpio node the arm64
// scenarios add (a root node without a unit address is named after itself).
const PWMGPIODevice = "pwm-gpio-fan"

// PWMGPIOLine is the PL061 line it drives. Line 3 is virt's power key
// (gpio-keys), which the guest kernel has no driver for.
const PWMGPIOLine = 0

// Scenario is one machine.
type Scenario struct {
	// Name identifies it in test names and on the guest's command line.
	Name string
	Arch string
	// Doc says in a few words what the machine is.
	Doc string
	// DeviceTree is nil for a machine without one.
	DeviceTree *DeviceTree
	// SoC and IsBlade are what detection must report from the
	// devicetree ("" and false: no devicetree, detection is by the GPIO
	// chips the tests make).
	SoC     string
	IsBlade bool
	// Board is the blade's GPIO controller as the devicetree makes it (a
	// gpio-sim bank with the board's real label and line names); nil
	// without a devicetree.
	Board *Bank
	// LabelDetectable says whether the SoC can be recognised from
	// Board's label when /sys/firmware is masked (a container): the
	// Raspberry Pi pin controllers' labels are their own, Rockchip's
	// (gpio0 … gpio4) are every Rockchip board's.
	LabelDetectable bool
	// FanHwmon is the hwmon name of a pwm-fan node on the pwm-gpio chip
	// ("" none): the Radxa CM5's fan.
	FanHwmon string
	// Module says what kubeblade-leds does here: ModuleSims are the
	// simulated backends to drive, AutoRefusal the kernel log line that
	// backend=auto must refuse to load with ("" when auto is not tried).
	ModuleSims  []string
	AutoRefusal string
}

// DeviceTree is what a scenario changes in virt's devicetree.
type DeviceTree struct {
	// Compatible and Model replace the root node's.
	Compatible []string
	Model      string
}

// Bank is one GPIO controller.
type Bank struct {
	Label string
	// Names are the gpio-line-names, by offset ("" unnamed); Lines is
	// the bank's size (at least len(Names)).
	Names []string
	Lines int
}

// Offset is the offset of the line named name, or -1.
func (b *Bank) Offset(name string) int {
	for i, n := range b.Names {
		if n == name {
			return i
		}
	}
	return -1
}

// NameMap is Names as offset → name, without unnamed lines.
func (b *Bank) NameMap() map[int]string {
	m := map[int]string{}
	for i, n := range b.Names {
		if n != "" {
			m[i] = n
		}
	}
	return m
}

// gpioNames are GPIO0…GPIO(n-1) with the first two named as the Raspberry
// Pi devicetrees name the ID EEPROM's I2C pins.
func gpioNames(n int) []string {
	names := []string{"ID_SDA", "ID_SCL"}
	for i := 2; i < n; i++ {
		names = append(names, fmt.Sprintf("GPIO%d", i))
	}
	return names
}

// cm4Names: the CM4's pinctrl-bcm2711 line names, raspberrypi/linux
// arch/arm/boot/dts/broadcom/bcm2711-rpi-cm4.dts (commit 0e25510d, its
// downstream &gpio block, which overrides the upstream one).
var cm4Names = append(gpioNames(28),
	"RGMII_MDIO", "RGMIO_MDC", "CTS0", "RTS0", "TXD0", "RXD0",
	"SD1_CLK", "SD1_CMD", "SD1_DATA0", "SD1_DATA1", "SD1_DATA2", "SD1_DATA3",
	"PWM0_MISO", "PWM1_MOSI", "STATUS_LED_G_CLK", "SPIFLASH_CE_N", "SDA0", "SCL0",
	"RGMII_RXCLK", "RGMII_RXCTL", "RGMII_RXD0", "RGMII_RXD1", "RGMII_RXD2", "RGMII_RXD3",
	"RGMII_TXCLK", "RGMII_TXCTL", "RGMII_TXD0", "RGMII_TXD1", "RGMII_TXD2", "RGMII_TXD3")

// cm5Names: the CM5's pinctrl-rp1 line names, raspberrypi/linux
// arch/arm64/boot/dts/broadcom/bcm2712-rpi-cm5.dtsi (commit 02eb0859,
// &rp1_gpio).
var cm5Names = append(gpioNames(28),
	"PCIE_PWR_EN", "FAN_TACH", "HOST_SDA", "HOST_SCL", "ETH_RST_N", "PCIE_DET_WAKE",
	"CD0_IO0_MICCLK", "CD0_IO0_MICDAT0", "RP1_PCIE_CLKREQ_N", "ETH_IRQ_N", "SDA0", "SCL0",
	"-", "-", "USB_VBUS_EN", "-", "RP1_STAT_LED", "FAN_PWM", "-", "2712_WAKE",
	"-", "-", "-", "-", "-", "-")

// All are every scenario, the x86 guest's first.
var All = []Scenario{
	{
		Name: "pc", Arch: ArchX86,
		Doc:        "x86_64 guest without a devicetree, as in a container that masks /sys/firmware; the tests make CM4 and CM5 GPIO chips through configfs",
		ModuleSims: []string{"sim-bcm2711", "sim-bcm2712"},
		// An x86 guest is no Compute Module (kbl_pick_soc).
		AutoRefusal: "kubeblade-leds: not a Compute Module 4 or 5",
	},
	{
		Name: "cm4", Arch: ArchARM,
		Doc: "a CM4 blade: virt with the root compatible and model of raspberrypi/linux bcm2711-rpi-cm4.dts, its pinctrl-bcm2711 line names on gpio-sim, a pwm-gpio chip on virt's PL061",
		DeviceTree: &DeviceTree{
			Compatible: []string{"raspberrypi,4-compute-module", "brcm,bcm2711"},
			Model:      "Raspberry Pi Compute Module 4 Rev 1.1",
		},
		SoC: "bcm2711", IsBlade: true, LabelDetectable: true,
		Board:      &Bank{Label: "pinctrl-bcm2711", Names: cm4Names, Lines: len(cm4Names)},
		ModuleSims: []string{"sim-bcm2711"},
		// backend=auto picks bcm2711 from the compatible, then finds no
		// PWM0 block in virt (hw-bcm2711.c).
		AutoRefusal: "no PWM0 node in the devicetree",
	},
	{
		Name: "cm5", Arch: ArchARM,
		Doc: "a CM5 blade: virt with the root compatible and model of raspberrypi/linux bcm2712-rpi-cm5.dtsi, its pinctrl-rp1 line names on gpio-sim, a pwm-gpio chip on virt's PL061 (the Talos CM5 fan path)",
		DeviceTree: &DeviceTree{
			Compatible: []string{"raspberrypi,5-compute-module", "brcm,bcm2712"},
			Model:      "Raspberry Pi Compute Module 5 Rev 1.0",
		},
		SoC: "bcm2712", IsBlade: true, LabelDetectable: true,
		Board:      &Bank{Label: "pinctrl-rp1", Names: cm5Names, Lines: len(cm5Names)},
		ModuleSims: []string{"sim-bcm2712"},
		// backend=auto picks bcm2712, then finds no RP1 (hw-rp1.c).
		AutoRefusal: "no RP1 GPIO node",
	},
	{
		Name: "radxa-cm5", Arch: ArchARM,
		Doc: "a Radxa CM5 blade: virt with the root compatible of mainline rk3588s-radxa-cm5.dtsi, a Rockchip-labelled gpio-sim bank, and a pwm-fan (hwmon pwmfan) on the pwm-gpio chip",
		DeviceTree: &DeviceTree{
			Compatible: []string{"radxa,cm5", "rockchip,rk3588s"},
			Model:      "Radxa CM5",
		},
		SoC: "rk3588", IsBlade: true,
		// Rockchip's GPIO banks are labelled by their bank name
		// (gpio-rockchip.c: gc->label = bank->name; pinctrl-rockchip.c
		// names them gpio0 … gpio4); mainline gives the CM5 no line
		// names.
		Board:       &Bank{Label: "gpio0", Lines: 32},
		FanHwmon:    "pwmfan",
		AutoRefusal: "kubeblade-leds: not a Compute Module 4 or 5",
	},
}

// ByName finds a scenario.
func ByName(name string) (Scenario, bool) {
	for _, s := range All {
		if s.Name == name {
			return s, true
		}
	}
	return Scenario{}, false
}

// ForArch lists the scenarios of one architecture, in order; only, when
// not empty, keeps those it names (comma-separated).
func ForArch(arch, only string) []Scenario {
	var out []Scenario
	for _, s := range All {
		if s.Arch != arch {
			continue
		}
		if only != "" && !contains(strings.Split(only, ","), s.Name) {
			continue
		}
		out = append(out, s)
	}
	return out
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if strings.TrimSpace(x) == s {
			return true
		}
	}
	return false
}

// Current is the scenario the guest was booted as (Env), or an error
// outside a guest booted by package guest.
func Current() (Scenario, error) {
	name := os.Getenv(Env)
	s, ok := ByName(name)
	if !ok {
		return Scenario{}, fmt.Errorf("%s=%q names no scenario", Env, name)
	}
	return s, nil
}

// Source is the devicetree source added to virt's own (decompiled with
// dtc) to make this scenario's machine: later nodes and properties of the
// same path override earlier ones in dtc, so the root's compatible and
// model are replaced and the new nodes join. Empty without a devicetree.
func (s Scenario) Source() string {
	if s.DeviceTree == nil {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n/* scenario %s: %s */\n/ {\n", s.Name, s.Doc)
	fmt.Fprintf(&b, "\tcompatible = %s;\n\tmodel = %q;\n", quoteList(s.DeviceTree.Compatible), s.DeviceTree.Model)
	if s.Board != nil {
		// gpio-sim's devicetree binding (drivers/gpio/gpio-sim.c
		// gpio_sim_add_bank): every child is a bank with ngpios; the
		// label and line names are what userspace sees.
		b.WriteString("\n\tgpio-sim {\n\t\tcompatible = \"gpio-simulator\";\n\n\t\tbank0 {\n")
		b.WriteString("\t\t\tgpio-controller;\n\t\t\t#gpio-cells = <2>;\n")
		fmt.Fprintf(&b, "\t\t\tngpios = <%d>;\n\t\t\tgpio-sim,label = %q;\n", s.Board.Lines, s.Board.Label)
		if len(s.Board.Names) > 0 {
			fmt.Fprintf(&b, "\t\t\tgpio-line-names = %s;\n", quoteList(s.Board.Names))
		}
		b.WriteString("\t\t};\n\t};\n")
	}
	// The software PWM Talos ships (CONFIG_PWM_GPIO), on the PL061.
	fmt.Fprintf(&b, "\n\t%s {\n\t\tcompatible = \"pwm-gpio\";\n\t\t#pwm-cells = <3>;\n\t\tgpios = <&{%s} %d 0>;\n\t};\n",
		PWMGPIODevice, PL061Node, PWMGPIOLine)
	if s.FanHwmon != "" {
		// 25 kHz (a 40 µs period), as a 4-wire fan wants.
		fmt.Fprintf(&b, "\n\tpwm-fan {\n\t\tcompatible = \"pwm-fan\";\n\t\tpwms = <&{/%s} 0 40000 0>;\n\t};\n", PWMGPIODevice)
	}
	b.WriteString("};\n")
	return b.String()
}

func quoteList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}
