package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	agentconfigv1 "github.com/kubeblade/kubeblade/api/agentconfig/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/hardware"
)

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "agent.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestMissingFileMeansDefaults(t *testing.T) {
	cfg, _, err := Load(filepath.Join(t.TempDir(), "nope.yaml"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Default(), cfg); diff != "" {
		t.Fatalf("(-default +loaded):\n%s", diff)
	}
}

func TestDefaultsMatchSpec(t *testing.T) {
	s, err := Settings(Default())
	if err != nil {
		t.Fatal(err)
	}
	if s.CriticalCelsius != 60 || s.HysteresisCelsius != 5 || !s.TachEnabled || s.Stealth {
		t.Errorf("settings = %+v", s)
	}
	want := map[float64]uint8{30: 40, 45: 40, 50: 60, 55: 80, 70: 80}
	for temp, pct := range want {
		if got := s.Curve.Percent(temp); got != pct {
			t.Errorf("default curve at %g °C = %d, want %d", temp, got, pct)
		}
	}
	if s.IdleColor != (hardware.Color{G: 0x10}) {
		t.Errorf("idle colour = %v", s.IdleColor)
	}
}

func TestLoadFileAndEnv(t *testing.T) {
	cases := map[string]struct {
		file string
		env  []string
		want func(c *agentconfigv1.AgentConfig)
	}{
		"empty file": {"", nil, func(c *agentconfigv1.AgentConfig) {}},
		"file sets keys": {`
criticalCelsius: 70
hysteresisCelsius: 3
stealth: true
leds:
  idleColor: "#000000"
fanCurve:
  - {temperatureCelsius: 40, percent: 20}
  - {temperatureCelsius: 50, percent: 50}
  - {temperatureCelsius: 65, percent: 100}
`, nil, func(c *agentconfigv1.AgentConfig) {
			c.CriticalCelsius, c.HysteresisCelsius, c.Stealth = 70, 3, true
			c.LEDs.IdleColor = "#000000"
			c.FanCurve = []agentconfigv1.FanCurveStep{{TemperatureCelsius: 40, Percent: 20}, {TemperatureCelsius: 50, Percent: 50}, {TemperatureCelsius: 65, Percent: 100}}
		}},
		"env overrides file": {"criticalCelsius: 70\n", []string{"KUBEBLADE_CRITICAL_CELSIUS=75", "PATH=/bin"}, func(c *agentconfigv1.AgentConfig) {
			c.CriticalCelsius = 75
		}},
		"env nested keys": {"", []string{
			"KUBEBLADE_LEDS_IDENTIFY_COLOR=#0000ff",
			"KUBEBLADE_HARDWARE_BACKEND=simulated",
			"KUBEBLADE_HARDWARE_LINUX_GPIO_CHIP=gpiochip4",
			"KUBEBLADE_GRPC_REMOTE_ENABLED=true",
			"KUBEBLADE_GRPC_REMOTE_EXTRA_SANS=[blade1.lan, 10.0.0.5]",
			"KUBEBLADE_TACH_ENABLED=false",
			"KUBEBLADE_METRICS_BIND_ADDRESS=127.0.0.1:9100",
		}, func(c *agentconfigv1.AgentConfig) {
			f := false
			c.LEDs.IdentifyColor = "#0000ff"
			c.Hardware.Backend = agentconfigv1.BackendSimulated
			c.Hardware.Linux.GPIOChip = "gpiochip4"
			c.GRPC.Remote.Enabled = true
			c.GRPC.Remote.ExtraSANs = []string{"blade1.lan", "10.0.0.5"}
			c.TachEnabled = &f
			c.Metrics.BindAddress = "127.0.0.1:9100"
		}},
		"env list as JSON": {"", []string{`KUBEBLADE_FAN_CURVE=[{"temperatureCelsius":30,"percent":10}]`}, func(c *agentconfigv1.AgentConfig) {
			c.FanCurve = []agentconfigv1.FanCurveStep{{TemperatureCelsius: 30, Percent: 10}}
		}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, ignored, err := Load(writeFile(t, tc.file), tc.env)
			if err != nil {
				t.Fatal(err)
			}
			if len(ignored) != 0 {
				t.Errorf("ignored %v", ignored)
			}
			want := Default()
			tc.want(&want)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoadRejects(t *testing.T) {
	cases := map[string]struct {
		file string
		env  []string
		want string
	}{
		"percent 120": {"fanCurve: [{temperatureCelsius: 40, percent: 120}]", nil,
			"fanCurve[0].percent: 120 is outside 0–100"},
		"descending curve": {"fanCurve: [{temperatureCelsius: 55, percent: 40}, {temperatureCelsius: 45, percent: 80}]", nil,
			"fanCurve[1].temperatureCelsius: 45 must be above the previous step's 55"},
		"equal temperatures": {"fanCurve: [{temperatureCelsius: 55, percent: 40}, {temperatureCelsius: 55, percent: 80}]", nil,
			"fanCurve[1].temperatureCelsius: 55 must be above"},
		"empty curve": {"fanCurve: []", nil, "fanCurve: needs at least one step"},
		"hysteresis equal to critical": {"criticalCelsius: 40\nhysteresisCelsius: 40", nil,
			"hysteresisCelsius: 40 must be below criticalCelsius 40"},
		"hysteresis above critical": {"criticalCelsius: 30\nhysteresisCelsius: 45", nil,
			"hysteresisCelsius: 45 must be below criticalCelsius 30"},
		"no hysteresis": {"hysteresisCelsius: 0", nil,
			"hysteresisCelsius: 0 is outside 1–50 (below 1 critical mode could flap)"},
		"critical out of range": {"criticalCelsius: 150", nil, "criticalCelsius: 150 is outside 30–110"},
		"unknown top-level key": {"criticalCelsus: 60", nil, `unknown field "criticalCelsus"`},
		"unknown nested key":    {"leds:\n  idle: \"#000000\"", nil, `unknown field "idle"`},
		"bad colour":            {"leds:\n  idleColor: green", nil, `leds.idleColor: "green" is not a colour`},
		"short colour":          {"leds:\n  criticalColor: \"#f00\"", nil, `leds.criticalColor: "#f00" is not a colour`},
		"colour without hash":   {"leds:\n  criticalColor: \"ff0000\"", nil, `leds.criticalColor: "ff0000" is not a colour`},
		"wrong type":            {"criticalCelsius: hot", nil, "criticalCelsius: want a int32, got string"},
		"bad backend":           {"hardware:\n  backend: bcm9999", nil, `hardware.backend: "bcm9999" is not one of`},
		"not yaml":              {"criticalCelsius: [", nil, "config "},
		"env bad value":         {"", []string{"KUBEBLADE_FAN_CURVE=[{temperatureCelsius: 30, percent: 101}]"}, "fanCurve[0].percent: 101"},
		"env wrong type":        {"", []string{"KUBEBLADE_GRPC_REMOTE_PORT=http"}, "grpc.remote.port: want a int32"},
		"port out of range":     {"grpc:\n  remote:\n    port: 70000", nil, "grpc.remote.port: 70000 is outside 1–65535"},
		"bind address a host name": {"grpc:\n  remote:\n    bindAddress: blade1.local", nil,
			`grpc.remote.bindAddress: "blade1.local" is not an IP address`},
		"bind address with a port": {"", []string{"KUBEBLADE_GRPC_REMOTE_BIND_ADDRESS=10.0.0.5:8081"},
			`grpc.remote.bindAddress: "10.0.0.5:8081" is not an IP address`},
		"bind address with a zone":      {"grpc:\n  remote:\n    bindAddress: fe80::1%eth0", nil, "is not an IP address"},
		"bind address IPv4-mapped IPv6": {"grpc:\n  remote:\n    bindAddress: \"::ffff:10.0.0.5\"", nil, "is not an IP address"},
		"metrics address without a port": {"metrics:\n  bindAddress: 127.0.0.1", nil,
			`metrics.bindAddress: "127.0.0.1" is not host:port`},
		"metrics address port too high":  {"metrics:\n  bindAddress: \":96660\"", nil, `metrics.bindAddress: ":96660" is not host:port`},
		"metrics address a URL":          {"", []string{"KUBEBLADE_METRICS_BIND_ADDRESS=http://0.0.0.0:9666"}, `metrics.bindAddress: "http://0.0.0.0:9666" is not host:port`},
		"metrics address v6 unbracketed": {"metrics:\n  bindAddress: \"::1:9666\"", nil, `metrics.bindAddress: "::1:9666" is not host:port`},
		"peer lost percent":              {"fanPeerLostPercent: 120", nil, "fanPeerLostPercent: 120 is outside 0–100"},
		"bad maintenance colour":         {"leds:\n  maintenanceColor: amber", nil, `leds.maintenanceColor: "amber" is not a colour`},
		"env bad attention colour":       {"", []string{"KUBEBLADE_LEDS_NODE_ATTENTION_COLOR=yellow"}, `leds.nodeAttentionColor: "yellow" is not a colour`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, _, err := Load(writeFile(t, tc.file), tc.env)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Load() error = %v\nwant it to contain %q", err, tc.want)
			}
		})
	}
}

func TestUnreadableFileIsAnError(t *testing.T) {
	dir := t.TempDir() // a directory cannot be read as a file
	if _, _, err := Load(dir, nil); err == nil || !strings.Contains(err.Error(), "reading config") {
		t.Fatalf("Load(dir) error = %v", err)
	}
}

func TestUnknownEnvIsIgnoredAndReported(t *testing.T) {
	env := []string{"KUBEBLADE_SERVICE_HOST=10.0.0.1", "KUBEBLADE_CRITICAL=70", "KUBEBLADE_STEALTH=true"}
	cfg, ignored, err := Load("", env)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"KUBEBLADE_CRITICAL", "KUBEBLADE_SERVICE_HOST"}, ignored); diff != "" {
		t.Errorf("ignored (-want +got):\n%s", diff)
	}
	if !cfg.Stealth || cfg.CriticalCelsius != DefaultCriticalCelsius {
		t.Errorf("known keys must still apply and unknown ones change nothing: %+v", cfg)
	}
}

func TestEnvKeysAreUniqueAndCoverLeaves(t *testing.T) {
	keys := EnvKeys()
	seen := map[string]string{}
	for env, path := range keys {
		p := strings.Join(path, ".")
		if other, dup := seen[p]; dup {
			t.Errorf("%s and %s both set %s", env, other, p)
		}
		seen[p] = env
	}
	for _, want := range []string{
		"KUBEBLADE_FAN_CURVE", "KUBEBLADE_CRITICAL_CELSIUS", "KUBEBLADE_HYSTERESIS_CELSIUS",
		"KUBEBLADE_TAINT_ON_CRITICAL", "KUBEBLADE_STEALTH", "KUBEBLADE_TACH_ENABLED",
		"KUBEBLADE_LEDS_IDLE_COLOR", "KUBEBLADE_HARDWARE_LINUX_PWM_CHANNEL",
		"KUBEBLADE_HARDWARE_SIMULATED_LOAD_PERCENT", "KUBEBLADE_GRPC_SOCKET_PATH",
		"KUBEBLADE_GRPC_REMOTE_EXTRA_SANS",
	} {
		if _, ok := keys[want]; !ok {
			t.Errorf("no environment variable %s", want)
		}
	}
}

func TestParse(t *testing.T) {
	cfg, err := Parse([]byte(`{"criticalCelsius": 65}`))
	if err != nil || cfg.CriticalCelsius != 65 || cfg.HysteresisCelsius != 5 {
		t.Fatalf("Parse = %+v, %v", cfg, err)
	}
	if _, err := Parse([]byte(`{"hysteresisCelsius": 90}`)); err == nil {
		t.Fatal("Parse accepted hysteresis above critical")
	}
}

func TestEnvStringFieldsAreVerbatim(t *testing.T) {
	cfg, _, err := Load("", []string{"KUBEBLADE_HARDWARE_LINUX_LINES_FAN_PWM=12", "KUBEBLADE_HARDWARE_LINUX_GPIO_CHIP=0", "KUBEBLADE_LEDS_IDLE_COLOR=#000001"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Hardware.Linux.Lines.FanPWM != "12" || cfg.Hardware.Linux.GPIOChip != "0" || cfg.LEDs.IdleColor != "#000001" {
		t.Fatalf("string fields: %+v %q %q", cfg.Hardware.Linux.Lines, cfg.Hardware.Linux.GPIOChip, cfg.LEDs.IdleColor)
	}
}

func TestParseEnvOverridesTheDocument(t *testing.T) {
	cfg, err := ParseEnv([]byte(`{"criticalCelsius": 65, "grpc": {"socketPath": "/shared.sock"}}`),
		[]string{"KUBEBLADE_GRPC_SOCKET_PATH=/run/blade-2/agent.sock", "KUBEBLADE_SERVICE_HOST=10.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.CriticalCelsius != 65 || cfg.GRPC.SocketPath != "/run/blade-2/agent.sock" {
		t.Fatalf("critical %d socket %q", cfg.CriticalCelsius, cfg.GRPC.SocketPath)
	}
	if _, err := ParseEnv([]byte(`{}`), []string{"KUBEBLADE_CRITICAL_CELSIUS=500"}); err == nil {
		t.Fatal("an invalid override was accepted")
	}
}

func TestBindAddress(t *testing.T) {
	for _, addr := range []string{"", "10.0.0.5", "0.0.0.0", "::", "fd00::5"} {
		cfg, _, err := Load(writeFile(t, ""), []string{"KUBEBLADE_GRPC_REMOTE_BIND_ADDRESS=" + addr})
		if err != nil {
			t.Errorf("%q: %v", addr, err)
			continue
		}
		if cfg.GRPC.Remote.BindAddress != addr {
			t.Errorf("%q: loaded %q", addr, cfg.GRPC.Remote.BindAddress)
		}
	}
}
