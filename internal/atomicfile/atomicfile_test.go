package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "key.pem")
	for _, tc := range []struct {
		data string
		mode os.FileMode
	}{
		{"first", 0o600},
		{"second, replacing the first", 0o644},
	} {
		if err := Write(path, []byte(tc.data), tc.mode); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != tc.data {
			t.Fatalf("content %q (%v), want %q", got, err, tc.data)
		}
		fi, _ := os.Stat(path)
		if fi.Mode().Perm() != tc.mode {
			t.Errorf("mode %v, want %v", fi.Mode().Perm(), tc.mode)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries, want only the file (no temporary left)", len(entries))
	}
}

func TestWriteFailsWithoutDirectory(t *testing.T) {
	if err := Write(filepath.Join(t.TempDir(), "missing", "f"), []byte("x"), 0o600); err == nil {
		t.Fatal("wrote into a directory that does not exist")
	}
}
