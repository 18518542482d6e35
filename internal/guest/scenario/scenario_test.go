package scenario_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/kubeblade/kubeblade/internal/guest/scenario"
)

// TestBoards: every Raspberry Pi scenario names the blade's lines where the
// board's devicetree does, GPIO<n> at offset n.
func TestBoards(t *testing.T) {
	for _, sc := range scenario.All {
		if sc.Board == nil || !strings.HasPrefix(sc.SoC, "bcm") {
			continue
		}
		if len(sc.Board.Names) != sc.Board.Lines {
			t.Errorf("%s: %d names for %d lines", sc.Name, len(sc.Board.Names), sc.Board.Lines)
		}
		for _, n := range []int{12, 13, 18, 20, 21, 23} {
			name := "GPIO" + strconv.Itoa(n)
			if got := sc.Board.Offset(name); got != n {
				t.Errorf("%s: %s at offset %d", sc.Name, name, got)
			}
		}
	}
}

func TestSource(t *testing.T) {
	cm4, ok := scenario.ByName("cm4")
	if !ok {
		t.Fatal("no cm4 scenario")
	}
	src := cm4.Source()
	for _, want := range []string{
		`compatible = "raspberrypi,4-compute-module", "brcm,bcm2711";`,
		`gpio-sim,label = "pinctrl-bcm2711";`,
		`ngpios = <58>;`,
		`"GPIO11", "GPIO12", "GPIO13"`,
		`gpios = <&{/pl061@9030000} 0 0>;`,
	} {
		if !strings.Contains(src, want) {
			t.Errorf("cm4 source lacks %s:\n%s", want, src)
		}
	}
	if strings.Contains(src, "pwm-fan") {
		t.Error("cm4 has a pwm-fan node")
	}
	radxa, _ := scenario.ByName("radxa-cm5")
	if src := radxa.Source(); !strings.Contains(src, "pwms = <&{/pwm-gpio-fan} 0 40000 0>;") || strings.Contains(src, "gpio-line-names") {
		t.Errorf("radxa-cm5 source:\n%s", src)
	}
	pc, _ := scenario.ByName("pc")
	if pc.Source() != "" {
		t.Error("the pc scenario has devicetree source")
	}
}

func TestForArch(t *testing.T) {
	var names []string
	for _, s := range scenario.ForArch(scenario.ArchARM, "") {
		names = append(names, s.Name)
	}
	if got := strings.Join(names, " "); got != "cm4 cm5 radxa-cm5" {
		t.Errorf("arm64 scenarios %q", got)
	}
	if got := scenario.ForArch(scenario.ArchARM, "cm5, radxa-cm5"); len(got) != 2 || got[0].Name != "cm5" {
		t.Errorf("only cm5 and radxa-cm5: %+v", got)
	}
	if got := scenario.ForArch(scenario.ArchX86, ""); len(got) != 1 || got[0].Name != "pc" {
		t.Errorf("x86_64 scenarios %+v", got)
	}
}
