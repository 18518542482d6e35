// Package atomicfile writes a file so that readers and crashes see either
// the old content or the new, never a half-written file: the data goes to
// a temporary file beside the target, which is then renamed over it.
// The agent's keys and certificates and bladectl's config are written so.
package atomicfile

import (
	"io/fs"
	"os"
	"path/filepath"
)

// Write writes data to path with mode, atomically. The directory must exist.
func Write(path string, data []byte, mode fs.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // after a successful rename there is nothing to remove
	// The mode is set before any data is written: a key must never sit in
	// a file others can read, not even for a moment.
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
