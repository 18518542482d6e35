package config

import (
	"slices"
	"strings"
	"testing"

	agentconfigv1 "github.com/kubeblade/kubeblade/api/agentconfig/v1alpha1"
)

// hostFiles are what an attacker would name instead of a blade's device:
// a reboot from an LED colour, the boot disk, the CA key, a path that
// climbs out of /dev, and the shapes' near misses.
var hostFiles = []string{
	"/proc/sysrq-trigger", "/dev/mmcblk0", "/var/lib/kubeblade/ca.key", "../../etc/shadow",
	"/dev/../proc/sysrq-trigger", "/dev/mem", "/dev/null", "mem", "/tmp/leds0", "leds0/../../etc/shadow",
	"/dev/pts/0", "ttyAMA", "leds", "/dev/leds0 ", "leds1234", "/sys/class/leds/x",
}

// TestDevicePathsConfinedEverywhere: leds.stream, serialDevice and pwmChip
// admit only the shapes the hardware has, whether they come from the
// standalone agent's file, its KUBEBLADE_* environment or a BladeConfig
// (FromSpec) — the same refusal as the CRD's, before anything is opened.
func TestDevicePathsConfinedEverywhere(t *testing.T) {
	fields := map[string]struct {
		yamlKey, env string
		set          func(*agentconfigv1.AgentConfig, string)
		valid        []string
		say          string
	}{
		"leds.stream": {"hardware:\n  linux:\n    leds:\n      stream: ", "KUBEBLADE_HARDWARE_LINUX_LEDS_STREAM",
			func(c *agentconfigv1.AgentConfig, v string) { c.Hardware.Linux.LEDs.Stream = v },
			[]string{"leds0", "/dev/leds0", "leds3", "/dev/leds123"}, "is not a ws2812-pio-rp1 LED stream"},
		"serialDevice": {"hardware:\n  linux:\n    serialDevice: ", "KUBEBLADE_HARDWARE_LINUX_SERIAL_DEVICE",
			func(c *agentconfigv1.AgentConfig, v string) { c.Hardware.Linux.SerialDevice = v },
			[]string{"ttyAMA5", "/dev/ttyAMA4", "ttyS0", "/dev/ttyS1"}, "is not a UART"},
		"pwmChip": {"hardware:\n  linux:\n    pwmChip: ", "KUBEBLADE_HARDWARE_LINUX_PWM_CHIP",
			func(c *agentconfigv1.AgentConfig, v string) { c.Hardware.Linux.PWMChip = v },
			[]string{"pwmchip0", "1f00098000.pwm", "fe20c000.pwm"}, "is not a PWM chip or device name"},
	}
	for name, f := range fields {
		t.Run(name, func(t *testing.T) {
			for _, v := range hostFiles {
				if slices.Contains(f.valid, v) {
					continue
				}
				if name == "pwmChip" && pwmChip.MatchString(v) {
					continue // "leds1234", "ttyAMA", "mem": names, never paths
				}
				quoted := `"` + strings.ReplaceAll(v, `"`, `\"`) + `"`
				_, _, err := Load(writeFile(t, f.yamlKey+quoted+"\n"), nil)
				refusedSaying(t, "file "+v, err, f.say)
				_, _, err = Load("", []string{f.env + "=" + v})
				refusedSaying(t, "environment "+v, err, f.say)
				spec := agentconfigv1.AgentConfig{}
				f.set(&spec, v)
				_, err = FromSpec(spec, nil)
				refusedSaying(t, "BladeConfig "+v, err, f.say)
			}
			for _, v := range f.valid {
				if _, _, err := Load(writeFile(t, f.yamlKey+v+"\n"), nil); err != nil {
					t.Errorf("file %s: %v", v, err)
				}
				spec := agentconfigv1.AgentConfig{}
				f.set(&spec, v)
				if _, err := FromSpec(spec, nil); err != nil {
					t.Errorf("BladeConfig %s: %v", v, err)
				}
			}
		})
	}
}

func refusedSaying(t *testing.T, what string, err error, say string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), say) {
		t.Errorf("%s: err = %v, want a refusal saying %q", what, err, say)
	}
}

// TestRemovedRootsAndSocket: the roots and the simulator's socket are no
// settings any more. A file may still spell a root out at its only value
// (older docs did); any other value, or any control socket, is refused
// saying what to do; their variables name no key and are ignored.
func TestRemovedRootsAndSocket(t *testing.T) {
	accepted := "hardware:\n  linux:\n    sysfsRoot: /sys\n    devRoot: /dev/\n    procRoot: /proc\n"
	if _, _, err := Load(writeFile(t, accepted), nil); err != nil {
		t.Fatalf("the fixed roots spelled out: %v", err)
	}
	for file, say := range map[string]string{
		"hardware:\n  linux:\n    devRoot: /tmp/evil\n":                  `hardware.linux.devRoot: /tmp/evil: this setting was removed (the agent opens device nodes under /dev only)`,
		"hardware:\n  linux:\n    sysfsRoot: /host/sys\n":                `hardware.linux.sysfsRoot: /host/sys: this setting was removed`,
		"hardware:\n  linux:\n    procRoot: /var/lib/kubeblade\n":        `hardware.linux.procRoot: /var/lib/kubeblade: this setting was removed`,
		"hardware:\n  simulated:\n    controlSocket: /etc/passwd.sock\n": `hardware.simulated.controlSocket: /etc/passwd.sock: this setting was removed (the simulated blade's controls are served on <state-dir>/simulator.sock)`,
	} {
		_, _, err := Load(writeFile(t, file), nil)
		refusedSaying(t, file, err, say)
	}
	_, ignored, err := Load("", []string{"KUBEBLADE_HARDWARE_LINUX_DEV_ROOT=/tmp/evil", "KUBEBLADE_HARDWARE_SIMULATED_CONTROL_SOCKET=/x.sock"})
	if err != nil || len(ignored) != 2 {
		t.Fatalf("Load = %v, ignored %v: the removed keys' variables name no key", err, ignored)
	}
}

// TestBladeConfigOnlyRules: what the CRD refuses in a BladeConfig beyond a
// config file's rules, the agent refuses in FromSpec too, so a BladeConfig
// stored before the rules (or written past the CRD) cannot set it; the
// host's own environment still may.
func TestBladeConfigOnlyRules(t *testing.T) {
	for name, tc := range map[string]struct {
		set func(*agentconfigv1.AgentConfig)
		say string // "" means accepted
	}{
		"socket in /run/kubeblade": {func(c *agentconfigv1.AgentConfig) { c.GRPC.SocketPath = "/run/kubeblade/agent.sock" }, ""},
		"relative socket name":     {func(c *agentconfigv1.AgentConfig) { c.GRPC.SocketPath = "agent.sock" }, ""},
		"socket in the state directory": {func(c *agentconfigv1.AgentConfig) { c.GRPC.SocketPath = "/var/lib/kubeblade/ca.key" },
			`grpc.socketPath: "/var/lib/kubeblade/ca.key" in a BladeConfig`},
		"socket climbing out": {func(c *agentconfigv1.AgentConfig) { c.GRPC.SocketPath = "/run/kubeblade/../../dev/x.sock" }, "grpc.socketPath"},
		"socket in /dev":      {func(c *agentconfigv1.AgentConfig) { c.GRPC.SocketPath = "/dev/shm/agent.sock" }, "grpc.socketPath"},
		"metrics on loopback": {func(c *agentconfigv1.AgentConfig) { c.Metrics.BindAddress = "127.0.0.1:9666" }, ""},
		"metrics everywhere":  {func(c *agentconfigv1.AgentConfig) { c.Metrics.BindAddress = ":9666" }, ""},
		"metrics on IPv6":     {func(c *agentconfigv1.AgentConfig) { c.Metrics.BindAddress = "[::1]:9666" }, ""},
		"metrics on the metadata address": {func(c *agentconfigv1.AgentConfig) { c.Metrics.BindAddress = "169.254.169.254:80" },
			`metrics.bindAddress: "169.254.169.254:80" in a BladeConfig binds an IP address`},
		"metrics on IPv6 link-local": {func(c *agentconfigv1.AgentConfig) { c.Metrics.BindAddress = "[fe80::1]:9666" }, "metrics.bindAddress"},
		"metrics on a host name":     {func(c *agentconfigv1.AgentConfig) { c.Metrics.BindAddress = "metadata.google.internal:80" }, "not a host name"},
		"metrics disabled":           {func(c *agentconfigv1.AgentConfig) { c.Metrics.BindAddress = "0" }, "probes use that endpoint"},
	} {
		t.Run(name, func(t *testing.T) {
			spec := agentconfigv1.AgentConfig{}
			tc.set(&spec)
			_, err := FromSpec(spec, nil)
			if tc.say == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			refusedSaying(t, name, err, tc.say)
		})
	}
	// A host's own variable is not the BladeConfig's.
	spec := agentconfigv1.AgentConfig{}
	spec.GRPC.SocketPath = "agent.sock"
	c, err := FromSpec(spec, []string{"KUBEBLADE_GRPC_SOCKET_PATH=/srv/blade/agent.sock"})
	if err != nil || c.Config.GRPC.SocketPath != "/srv/blade/agent.sock" {
		t.Fatalf("FromSpec with the host's override = %v, %v", c.Config.GRPC.SocketPath, err)
	}
}
