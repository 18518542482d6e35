// Package statedir prepares the agent's state directory, where it keeps its
// private keys and the CA it trusts for client certificates, and refuses
// one that another user could have written to: a CA or key planted there
// would be adopted on the next start. The rule is OpenSSH's StrictModes:
// the directory and everything in it belong to the user the agent runs as,
// nothing is writable by group or others, and nothing is a symbolic link.
// Nor may group or others read a secret (as OpenSSH refuses an
// unprotected private key): the private keys (*.key) and the bladectl
// client configs that embed one (bladectl*.yaml).
package statedir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ErrUnsafe is wrapped by every refusal.
var ErrUnsafe = errors.New("unsafe state directory")

// Ensure creates dir (mode 0700) if it is missing and checks it and
// everything under it. The error names the first offending path and the
// commands that fix it.
func Ensure(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	return Check(dir, os.Geteuid())
}

// Check walks dir and refuses it unless uid owns dir and everything in
// it, no directory or file is writable by group or others, and no entry is
// a symbolic link. Sockets (the simulator's control socket) must only
// belong to uid: their mode is who may connect, not who may replace them.
func Check(dir string, uid int) error {
	fix := fmt.Sprintf("fix it with: chown -R %d %s && chmod -R go-w %s", uid, dir, dir)
	root, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	if !root.IsDir() {
		return fmt.Errorf("%w: %s is not a directory", ErrUnsafe, dir)
	}
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("state directory: %w", err)
		}
		info := root
		if path != dir {
			if info, err = d.Info(); err != nil {
				return fmt.Errorf("state directory: %w", err)
			}
		}
		switch mode := info.Mode(); {
		case mode&fs.ModeSymlink != 0:
			return fmt.Errorf("%w: %s is a symbolic link; the agent's keys and certificates must be plain files (remove it)", ErrUnsafe, path)
		case owner(info) != uid:
			return fmt.Errorf("%w: %s belongs to uid %d, not to uid %d the agent runs as; %s", ErrUnsafe, path, owner(info), uid, fix)
		case mode&fs.ModeSocket == 0 && mode.Perm()&0o022 != 0:
			return fmt.Errorf("%w: %s is writable by group or others (mode %04o); the agent would trust a CA or key someone planted there; %s",
				ErrUnsafe, path, mode.Perm(), fix)
		case mode.IsRegular() && Secret(d.Name()) && mode.Perm()&0o077 != 0:
			return fmt.Errorf("%w: %s holds a private key and is readable by group or others (mode %04o): whoever read it can act as this blade or its admin; fix it with: chmod 600 %s",
				ErrUnsafe, path, mode.Perm(), path)
		}
		return nil
	})
}

// Secret says whether a state-directory file of this name holds a private
// key: the keys themselves (ca.key, server.key, admin.key, viewer.key,
// cluster-serving.key) and the bladectl client configs the agent writes
// with a key inside (bladectl.yaml, bladectl-viewer.yaml). They are
// written 0600; anything laxer is refused.
func Secret(name string) bool {
	return strings.HasSuffix(name, ".key") || (strings.HasPrefix(name, "bladectl") && strings.HasSuffix(name, ".yaml"))
}
