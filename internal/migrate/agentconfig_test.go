package migrate

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	agentconfigv1 "github.com/kubeblade/kubeblade/api/agentconfig/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/config"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// golden compares got with testdata/name; -update rewrites it.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s (-want +got):\n%s", name, diff)
	}
}

func warningText(ws []Finding) string {
	var b strings.Builder
	for _, w := range ws {
		b.WriteString(w.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// samples are old agents' config files (testdata/agent/*.yaml).
func samples(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "agent", "*.yaml"))
	if err != nil || len(files) < 4 {
		t.Fatalf("samples: %v %v", files, err)
	}
	var out []string
	for _, f := range files {
		if !strings.Contains(f, ".out.") {
			out = append(out, f)
		}
	}
	return out
}

// TestTranslateSamples translates every sample both ways; the files and
// warnings are golden, and each result passes the agent's own loading.
func TestTranslateSamples(t *testing.T) {
	for _, path := range samples(t) {
		base := strings.TrimSuffix(filepath.Base(path), ".yaml")
		t.Run(base, func(t *testing.T) {
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			for _, tc := range []struct {
				target Target
				suffix string
				render func(*AgentConfig) ([]byte, error)
			}{
				{TargetAgentFile, "agent", func(a *AgentConfig) ([]byte, error) { return a.AgentYAML(path) }},
				{TargetBladeConfig, "bladeconfig", func(a *AgentConfig) ([]byte, error) { return a.BladeConfigYAML(path, BladeConfigName) }},
			} {
				res, err := TranslateAgentConfig(raw, path, tc.target, TranslateOptions{})
				if err != nil {
					t.Fatalf("%s: %v", tc.suffix, err)
				}
				out, err := tc.render(res)
				if err != nil {
					t.Fatal(err)
				}
				golden(t, filepath.Join("agent", base+".out."+tc.suffix+".yaml"), string(out))
				golden(t, filepath.Join("agent", base+".out."+tc.suffix+".warnings"), warningText(res.Warnings))
				if tc.target == TargetAgentFile {
					// The agent reads the file it will be given.
					file := filepath.Join(t.TempDir(), "agent.yaml")
					if err := os.WriteFile(file, out, 0o644); err != nil {
						t.Fatal(err)
					}
					loaded, _, err := config.Load(file, nil)
					if err != nil {
						t.Fatalf("the agent refuses the translation: %v", err)
					}
					if diff := cmp.Diff(res.Config, loaded); diff != "" {
						t.Errorf("loaded config differs from the translation (-translated +loaded):\n%s", diff)
					}
				}
			}
		})
	}
}

// TestTranslateMeaning spells out what the shipped default config and the
// viper-style sample mean in kubeblade terms.
func TestTranslateMeaning(t *testing.T) {
	cases := map[string]struct {
		file   string
		target Target
		want   func() agentconfigv1.AgentConfig
	}{
		"shipped default is kubeblade's default": {"shipped-default.yaml", TargetAgentFile, config.Default},
		"viper spellings, bound plaintext TCP": {"plaintext-tcp-bound.yaml", TargetAgentFile, func() agentconfigv1.AgentConfig {
			c := config.Default()
			c.Stealth = true
			c.CriticalCelsius = 65
			c.LEDs.CriticalColor = "#c80000"
			c.FanCurve = []agentconfigv1.FanCurveStep{{TemperatureCelsius: 48, Percent: 35}, {TemperatureCelsius: 58, Percent: 90}}
			c.Metrics.BindAddress = "192.168.1.21:9666"
			c.GRPC.Remote = agentconfigv1.RemoteGRPCConfig{Enabled: true, Port: 9090, BindAddress: "192.168.1.21"}
			return c
		}},
		"the same for a BladeConfig drops the host": {"plaintext-tcp-bound.yaml", TargetBladeConfig, func() agentconfigv1.AgentConfig {
			c := config.Default()
			c.Stealth = true
			c.CriticalCelsius = 65
			c.LEDs.CriticalColor = "#c80000"
			c.FanCurve = []agentconfigv1.FanCurveStep{{TemperatureCelsius: 48, Percent: 35}, {TemperatureCelsius: 58, Percent: 90}}
			c.Metrics.BindAddress = ":9666"
			c.GRPC.Remote = agentconfigv1.RemoteGRPCConfig{Enabled: true, Port: 9090}
			return c
		}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("testdata", "agent", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			res, err := TranslateAgentConfig(raw, tc.file, tc.target, TranslateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want(), res.Config); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestTranslateRefuses: input the translation must not guess at. Every
// error names the file, line and key; the commands write nothing then.
func TestTranslateRefuses(t *testing.T) {
	base := "listen:\n  grpc: /tmp/compute-blade-agent.sock\n  mode: unix\n"
	cases := map[string]struct {
		in   string
		want []string // each must appear in the error
	}{
		"truncated in a flow mapping": {
			in:   base + "idle_led_color: {red: 0, green: 16\n",
			want: []string{"cfg.yaml:4: not valid YAML: did not find expected ',' or '}'"},
		},
		"truncated mid-list": {
			in:   base + "fan_controller:\n  steps:\n    - temperature: 45\n      percent: 40\n    - temperature: 55\n   percent",
			want: []string{"cfg.yaml:", "not valid YAML"},
		},
		"empty file": {in: "", want: []string{"cfg.yaml: the file is empty"}},
		"a list, not a mapping": {
			in: "- listen\n- hal\n", want: []string{"cfg.yaml:1: the file is a YAML list, not a mapping of keys"},
		},
		"a Kubernetes manifest": {
			in:   "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n",
			want: []string{"cfg.yaml:1: not a compute-blade-agent config: it has apiVersion/kind"},
		},
		"a kubeblade agent.yaml": {
			in:   "fanCurve:\n- temperatureCelsius: 40\n  percent: 30\ncriticalCelsius: 70\n",
			want: []string{"cfg.yaml:1: not a compute-blade-agent config: it looks like a kubeblade agent.yaml already"},
		},
		"another program's config": {
			in:   "server:\n  port: 80\n",
			want: []string{"cfg.yaml:1: not a compute-blade-agent config: none of its keys (server)"},
		},
		"descending curve the old agent sorted": {
			in: base + "fan_controller:\n  steps:\n    - temperature: 55\n      percent: 80\n    - temperature: 45\n      percent: 40\n",
			want: []string{"cfg.yaml:8: fan_controller.steps[1].temperature: 45 °C is below the previous step's 55 °C (line 6): " +
				"the old agent sorted the steps silently, kubeblade wants them written in ascending order; reorder them"},
		},
		"equal temperatures": {
			in:   base + "fan_controller:\n  steps:\n    - {temperature: 50, percent: 40}\n    - {temperature: 50, percent: 60}\n",
			want: []string{"cfg.yaml:7: fan_controller.steps[1].temperature: 50 °C again (line 6)"},
		},
		"percent above 100": {
			in:   base + "fan_controller:\n  steps:\n    - temperature: 45\n      percent: 120\n",
			want: []string{"cfg.yaml:7: fan_controller.steps[0].percent: 120 is outside 0–100"},
		},
		"colour component above 255": {
			in:   base + "idle_led_color:\n  red: 300\n",
			want: []string{"cfg.yaml:5: idle_led_color.red: 300 is outside 0–255"},
		},
		"critical threshold kubeblade refuses": {
			in:   base + "critical_temperature_threshold: 20\n",
			want: []string{"cfg.yaml:4: critical_temperature_threshold: 20 is outside 30–110 (kubeblade's criticalCelsius range)"},
		},
		"unknown listen mode": {
			in:   "listen:\n  grpc: :8081\n  mode: udp\n",
			want: []string{`cfg.yaml:3: listen.mode: "udp" is not tcp or unix`},
		},
		"tcp without a port": {
			in:   "listen:\n  grpc: blade1\n  mode: tcp\n",
			want: []string{`cfg.yaml:2: listen.grpc: "blade1" is not host:port (tcp mode)`},
		},
		"not a boolean": {
			in:   base + "stealth_mode: sometimes\n",
			want: []string{`cfg.yaml:4: stealth_mode: want true or false, got "sometimes"`},
		},
		"a key twice in different case": {
			in:   base + "stealth_mode: true\nStealth_Mode: false\n",
			want: []string{"cfg.yaml:5: Stealth_Mode: also set on line 4 (keys are not case-sensitive)"},
		},
		"relative socket": {
			in:   "listen:\n  grpc: agent.sock\n",
			want: []string{`cfg.yaml:2: listen.grpc: "agent.sock" is relative`},
		},
		"every problem at once": {
			in: base + "idle_led_color: {red: -1}\ncritical_temperature_threshold: hot\n",
			want: []string{"cfg.yaml:4: idle_led_color.red: -1 is outside 0–255",
				`cfg.yaml:5: critical_temperature_threshold: want a number, got "hot"`},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			for _, target := range []Target{TargetAgentFile, TargetBladeConfig} {
				res, err := TranslateAgentConfig([]byte(tc.in), "cfg.yaml", target, TranslateOptions{})
				if err == nil {
					t.Fatalf("translated: %+v", res.Config)
				}
				if _, ok := AsError(err); !ok {
					t.Errorf("not a *Error: %T %v", err, err)
				}
				for _, w := range tc.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error does not say %q:\n%v", w, err)
					}
				}
			}
		})
	}
}

// TestTranslateWarnings: keys without an equivalent are named, each once,
// with their line.
func TestTranslateWarnings(t *testing.T) {
	in := "log:\n  mode: development\nlisten:\n  grpc: /run/kubeblade/agent.sock\n  mode: unix\n  authenticated: true\n" +
		"hal:\n  rpm_reporting_standard_fan_unit: true\n  fancy: 1\nfan_speed:\n  speed: 80\nfan_controller:\n  kind: linear\n  steps:\n    - {temperature: 40, percent: 30, curve: x}\nextra: 1\n"
	res, err := TranslateAgentConfig([]byte(in), "cfg.yaml", TargetAgentFile, TranslateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"cfg.yaml: idle_led_color: not set: the old agent left that LED dark; kubeblade's default #001000 applies",
		"cfg.yaml: identify_led_color: not set: the old agent left that LED dark; kubeblade's default #100010 applies",
		"cfg.yaml: critical_led_color: not set: the old agent left that LED dark; kubeblade's default #400000 applies",
		"cfg.yaml:1: log: no equivalent in the config file: kubeblade-agent takes --log-level and --log-format flags",
		"cfg.yaml:6: listen.authenticated: has no effect on a unix socket (the old agent ignored it too)",
		"cfg.yaml:9: hal.fancy: no equivalent in kubeblade; ignored (the old agent ignored it too)",
		"cfg.yaml:10: fan_speed: no equivalent: the old agent never applied it, and kubeblade takes a fixed fan speed at run time ('bladectl fan PERCENT' or the kubeblade.io/fan-speed annotation), not from its config",
		"cfg.yaml:13: fan_controller.kind: no equivalent in kubeblade; ignored (the old agent ignored it too)",
		"cfg.yaml:15: fan_controller.steps[0].curve: not part of a fan step (temperature, percent); ignored",
		"cfg.yaml:16: extra: no equivalent in kubeblade; ignored (the old agent ignored it too)",
	}
	var got []string
	for _, w := range res.Warnings {
		got = append(got, w.String())
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
	// The socket is already kubeblade's default: no warning, no key.
	if res.Config.GRPC.SocketPath != config.DefaultSocketPath {
		t.Errorf("socket %q", res.Config.GRPC.SocketPath)
	}
}
