package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRunRejectsBadInvocations(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "agent.yaml")
	if err := os.WriteFile(bad, []byte("hysteresisCelsius: 70\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		args []string
		want string
	}{
		"unknown flag":   {[]string{"--fan=100"}, "flag provided but not defined"},
		"stray argument": {[]string{"start"}, `unexpected arguments ["start"]`},
		"bad log level":  {[]string{"--log-level=loud"}, "--log-level"},
		"bad log format": {[]string{"--log-format=xml"}, "--log-format"},
		"invalid config": {[]string{"--config", bad, "--state-dir", t.TempDir()}, "hysteresisCelsius: 70 must be below criticalCelsius 60"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := run(tc.args)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("run(%q) = %v, want an error containing %q", tc.args, err, tc.want)
			}
		})
	}
}

func TestVersionFlag(t *testing.T) {
	if err := run([]string{"--version"}); err != nil {
		t.Fatal(err)
	}
}
