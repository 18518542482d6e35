package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubeblade/kubeblade/internal/version"
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
			err := run(tc.args, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("run(%q) = %v, want an error containing %q", tc.args, err, tc.want)
			}
		})
	}
}

// TestVersionFlag: --version prints the build's identity, one line and
// nothing else, and starts nothing.
func TestVersionFlag(t *testing.T) {
	var out bytes.Buffer
	if err := run([]string{"--version"}, &out); err != nil {
		t.Fatal(err)
	}
	want := version.Get().String()
	if want == "" {
		t.Fatal("version.Get() is empty: nothing to compare the flag's output with")
	}
	if got := out.String(); got != want+"\n" {
		t.Fatalf("--version printed %q, want %q", got, want+"\n")
	}
}
