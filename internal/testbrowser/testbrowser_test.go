package testbrowser

import (
	"os"
	"path/filepath"
	"testing"
)

func TestPathPrefersTheEnvironment(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "my-chromium")
	if err := os.WriteFile(bin, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvPath, bin)
	if p, err := Path(); err != nil || p != bin {
		t.Errorf("Path() = %q, %v; want %q", p, err, bin)
	}
	t.Setenv(EnvPath, filepath.Join(t.TempDir(), "none"))
	if _, err := Path(); err == nil {
		t.Error("Path() found a browser that is not there")
	}
}
