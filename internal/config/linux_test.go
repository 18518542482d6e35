package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	agentconfigv1 "github.com/kubeblade/kubeblade/api/agentconfig/v1alpha1"
)

func TestLinuxBackendKeys(t *testing.T) {
	got, _, err := Load(writeFile(t, `
hardware:
  linux:
    procRoot: /proc
    fanDriver: hwmon
    hwmonName: pwmfan
    lines:
      button: GPIO20
      fanTach: "13"
    leds:
      top: blade:rgb:top
      stream: /dev/leds0
`), []string{"KUBEBLADE_HARDWARE_LINUX_LINES_FAN_PWM=GPIO12", "KUBEBLADE_HARDWARE_LINUX_LEDS_EDGE=blade:rgb:edge"})
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.Hardware.Linux = agentconfigv1.LinuxHardwareConfig{
		FanDriver: "hwmon", HwmonName: "pwmfan",
		Lines: agentconfigv1.GPIOLines{Button: "GPIO20", FanTach: "13", FanPWM: "GPIO12"},
		LEDs:  agentconfigv1.LinuxLEDConfig{Top: "blade:rgb:top", Edge: "blade:rgb:edge", Stream: "/dev/leds0"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
}

func TestLinuxBackendRejects(t *testing.T) {
	cases := map[string]struct{ file, want string }{
		"bad fan driver":      {"hardware:\n  linux:\n    fanDriver: devmem", `hardware.linux.fanDriver: "devmem" is not one of`},
		"bad line":            {"hardware:\n  linux:\n    lines:\n      button: \"GPIO 20\"", `hardware.linux.lines.button: "GPIO 20" is not a GPIO line`},
		"LED name with slash": {"hardware:\n  linux:\n    leds:\n      top: ../../etc", `hardware.linux.leds.top: "../../etc" is not an LED class name`},
		"LED name ..":         {"hardware:\n  linux:\n    leds:\n      edge: ..", `hardware.linux.leds.edge: ".." is not an LED class name`},
		"unknown linux key":   {"hardware:\n  linux:\n    ledz: {}", `unknown field "ledz"`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, _, err := Load(writeFile(t, tc.file), nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Load() error = %v\nwant it to contain %q", err, tc.want)
			}
		})
	}
	keys := EnvKeys()
	for _, k := range []string{"KUBEBLADE_HARDWARE_LINUX_LINES_POE_DETECT", "KUBEBLADE_HARDWARE_LINUX_HWMON_NAME", "KUBEBLADE_HARDWARE_LINUX_FAN_DRIVER"} {
		if _, ok := keys[k]; !ok {
			t.Errorf("no environment variable %s", k)
		}
	}
}
