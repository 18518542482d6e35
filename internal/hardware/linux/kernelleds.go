package linux

import (
	"strings"

	agentconfigv1 "github.com/kubeblade/kubeblade/api/agentconfig/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/hardware/linux/devnode"
	"github.com/kubeblade/kubeblade/internal/hardware/linux/sysfs"
)

// KernelLEDs names the kernel LED driver the linux backend would use for
// the blade's LEDs (the multicolor LED class devices of kubeblade-leds, or a
// ws2812-pio-rp1 /dev/ledsN), or returns "" when there is none. It only
// looks: auto uses it to decide whether a register backend is needed.
func KernelLEDs(cfg agentconfigv1.LinuxHardwareConfig, roots Roots) string {
	roots = roots.OrDefault()
	var found []string
	for _, n := range sysfs.MulticolorLEDs(roots.Sys) {
		if n == cfg.LEDs.Top || n == cfg.LEDs.Edge || strings.Contains(n, "top") || strings.Contains(n, "edge") {
			found = append(found, n)
		}
	}
	if len(found) > 0 {
		return "LED class " + strings.Join(found, ", ")
	}
	stream := cfg.LEDs.Stream
	if stream == "" {
		stream = "leds0"
	}
	if n, err := devnode.LEDStream(roots.Dev, stream); err == nil && exists(n.Path) {
		return n.Path
	}
	return ""
}
