package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubeblade/kubeblade/internal/config"
)

const oldConfig = `listen:
  metrics: ":9666"
  grpc: ":8081"
  authenticated: true
  mode: tcp
stealth_mode: true
fan_controller:
  steps:
    - temperature: 40
      percent: 30
    - temperature: 60
      percent: 100
critical_temperature_threshold: 70
log:
  mode: production
`

func TestMigrateConfigWritesAgentYAML(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(in, []byte(oldConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "etc", "kubeblade", "agent.yaml")
	var stdout, stderr bytes.Buffer
	if err := migrateConfig([]string{"--write", out, in}, &stdout, &stderr); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout with --write: %q", stdout.String())
	}
	for _, w := range []string{"warning: " + in + ":14: log: no equivalent", "wrote " + out} {
		if !strings.Contains(stderr.String(), w) {
			t.Errorf("stderr lacks %q:\n%s", w, stderr.String())
		}
	}
	cfg, _, err := config.Load(out, nil)
	if err != nil {
		t.Fatalf("the agent refuses the written file: %v", err)
	}
	if !cfg.Stealth || cfg.CriticalCelsius != 70 || !cfg.GRPC.Remote.Enabled || cfg.GRPC.Remote.Port != 8081 {
		t.Errorf("written config: %+v", cfg)
	}
	// An existing file is not replaced without --force.
	stderr.Reset()
	err = migrateConfig([]string{"--write", out, in}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "exists; pass --force") {
		t.Fatalf("second write: %v", err)
	}
	if err := migrateConfig([]string{"--write", out, "--force", in}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
}

func TestMigrateConfigBladeConfigToStdout(t *testing.T) {
	in := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(in, []byte(oldConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if err := migrateConfig([]string{"-o", "bladeconfig", "--name", "rack-a", in}, &stdout, &stderr); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	for _, s := range []string{"kind: BladeConfig\n", "  name: rack-a\n", "    criticalCelsius: 70\n"} {
		if !strings.Contains(stdout.String(), s) {
			t.Errorf("stdout lacks %q:\n%s", s, stdout.String())
		}
	}
}

// TestMigrateConfigBadInputWritesNothing: errors name key and line, go to
// stderr, and leave no file behind.
func TestMigrateConfigBadInputWritesNothing(t *testing.T) {
	cases := map[string]struct{ in, want string }{
		"truncated":         {"listen:\n  grpc: \"/tmp/x.sock\n", "not valid YAML"},
		"foreign":           {"apiVersion: v1\nkind: Pod\n", ":1: not a compute-blade-agent config"},
		"descending curve":  {"fan_controller:\n  steps:\n  - {temperature: 60, percent: 90}\n  - {temperature: 40, percent: 30}\n", ":4: fan_controller.steps[1].temperature: 40 °C is below the previous step's 60 °C"},
		"bad listen mode":   {"listen:\n  mode: quic\n", `:2: listen.mode: "quic" is not tcp or unix`},
		"critical too cold": {"critical_temperature_threshold: 25\n", ":1: critical_temperature_threshold: 25 is outside 30–110"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			in := filepath.Join(dir, "config.yaml")
			if err := os.WriteFile(in, []byte(tc.in), 0o600); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(dir, "agent.yaml")
			var stdout, stderr bytes.Buffer
			err := migrateConfig([]string{"--write", out, in}, &stdout, &stderr)
			if !errors.Is(err, errReported) {
				t.Fatalf("err = %v", err)
			}
			if !strings.Contains(stderr.String(), "error: "+in) || !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("stderr does not say %q:\n%s", tc.want, stderr.String())
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Errorf("%s was written", out)
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout: %q", stdout.String())
			}
		})
	}
}

func TestMigrateConfigUsage(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if err := migrateConfig([]string{"-o", "helm"}, &stdout, &stderr); err == nil || !strings.Contains(err.Error(), `-o "helm": want agent or bladeconfig`) {
		t.Errorf("-o helm: %v", err)
	}
	if err := migrateConfig([]string{filepath.Join(t.TempDir(), "missing.yaml")}, &stdout, &stderr); err == nil || !os.IsNotExist(errors.Unwrap(err)) && !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing file: %v", err)
	}
}

// TestMigrateConfigSpeedSteps: testdata/default-config-99920370.yaml is
// compute-blade-agent's cmd/agent/default-config.yaml at
// 99920370fba8176dc34243d28281aa343f437fc5, byte for byte: its fan steps
// say speed, which that agent never read (pkg/fancontroller read percent),
// so it ran them at 0 %. migrate-config says so and writes nothing; with
// --speed-as-percent it takes speed as percent and warns for each step.
func TestMigrateConfigSpeedSteps(t *testing.T) {
	in, err := filepath.Abs(filepath.Join("testdata", "default-config-99920370.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "agent.yaml")
	var stdout, stderr bytes.Buffer
	if err := migrateConfig([]string{"--write", out, in}, &stdout, &stderr); !errors.Is(err, errReported) {
		t.Fatalf("err = %v\n%s", err, stderr.String())
	}
	for _, want := range []string{
		"error: " + in + ":44: fan_controller.steps[0].percent: missing; this step has speed: 40 instead, a key the old agent never read (it reads percent; its own default config said speed by mistake until a8d470d), so that agent ran this step at 0 %. Write percent: 40 if that is what was meant (or pass --speed-as-percent to take every speed as percent), or percent: 0 to keep what the old agent did\n",
		"error: " + in + ":46: fan_controller.steps[1].percent: missing; this step has speed: 80 instead",
	} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("%s was written", out)
	}

	stderr.Reset()
	if err := migrateConfig([]string{"--speed-as-percent", "--write", out, in}, &stdout, &stderr); err != nil {
		t.Fatalf("--speed-as-percent: %v\n%s", err, stderr.String())
	}
	for _, want := range []string{
		"warning: " + in + ":44: fan_controller.steps[0].speed: taken as percent: 40 (--speed-as-percent); the old agent never read speed and ran this step at 0 %, so kubeblade runs the fan faster here than the old agent did\n",
		"warning: " + in + ":46: fan_controller.steps[1].speed: taken as percent: 80 (--speed-as-percent)",
	} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
	cfg, _, err := config.Load(out, nil)
	if err != nil {
		t.Fatalf("the agent refuses the written file: %v", err)
	}
	if c := cfg.FanCurve; len(c) != 2 || c[0].TemperatureCelsius != 45 || c[0].Percent != 40 || c[1].TemperatureCelsius != 55 || c[1].Percent != 80 {
		t.Errorf("fan curve %+v, want 45 °C 40 %%, 55 °C 80 %%", c)
	}
}
