package statedir

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestEnsure(t *testing.T) {
	for name, tc := range map[string]struct {
		prepare func(t *testing.T, dir string)
		// say is in the refusal; "" means the directory is accepted.
		say string
	}{
		"created when missing": {func(t *testing.T, dir string) { must(t, os.Remove(dir)) }, ""},
		"keys and certificates as the agent writes them": {func(t *testing.T, dir string) {
			must(t, os.WriteFile(filepath.Join(dir, "ca.key"), nil, 0o600))
			must(t, os.WriteFile(filepath.Join(dir, "ca.crt"), nil, 0o644))
		}, ""},
		"a hostPath made by the kubelet (0755)": {func(t *testing.T, dir string) { must(t, os.Chmod(dir, 0o755)) }, ""},
		"the simulator's control socket (0660)": {func(t *testing.T, dir string) {
			ln, err := net.Listen("unix", filepath.Join(dir, "simulator.sock"))
			must(t, err)
			t.Cleanup(func() { ln.Close() })
			must(t, os.Chmod(filepath.Join(dir, "simulator.sock"), 0o660))
		}, ""},
		"world-writable directory": {func(t *testing.T, dir string) { must(t, os.Chmod(dir, 0o777)) }, "is writable by group or others (mode 0777)"},
		"group-writable directory": {func(t *testing.T, dir string) { must(t, os.Chmod(dir, 0o770)) }, "mode 0770"},
		"a planted world-writable CA": {func(t *testing.T, dir string) {
			must(t, os.WriteFile(filepath.Join(dir, "ca.crt"), nil, 0o644))
			must(t, os.Chmod(filepath.Join(dir, "ca.crt"), 0o666))
		}, "ca.crt is writable by group or others"},
		"a writable subdirectory": {func(t *testing.T, dir string) {
			must(t, os.Mkdir(filepath.Join(dir, "sub"), 0o700))
			must(t, os.Chmod(filepath.Join(dir, "sub"), 0o757))
		}, "sub is writable"},
		"a symbolic link": {func(t *testing.T, dir string) {
			must(t, os.Symlink("/etc/hostname", filepath.Join(dir, "ca.key")))
		}, "ca.key is a symbolic link"},
		// Issue 31, finding 5: on 8f44781 these were accepted silently.
		"a world-readable private key": {func(t *testing.T, dir string) {
			must(t, os.WriteFile(filepath.Join(dir, "server.key"), nil, 0o600))
			must(t, os.Chmod(filepath.Join(dir, "server.key"), 0o644))
		}, "server.key holds a private key and is readable by group or others (mode 0644)"},
		"a group-readable CA key": {func(t *testing.T, dir string) {
			must(t, os.WriteFile(filepath.Join(dir, "ca.key"), nil, 0o600))
			must(t, os.Chmod(filepath.Join(dir, "ca.key"), 0o640))
		}, "ca.key holds a private key and is readable by group or others (mode 0640)"},
		"the cluster serving key readable by others": {func(t *testing.T, dir string) {
			must(t, os.WriteFile(filepath.Join(dir, "cluster-serving.key"), nil, 0o600))
			must(t, os.Chmod(filepath.Join(dir, "cluster-serving.key"), 0o604))
		}, "cluster-serving.key holds a private key"},
		"the admin's bladectl config readable by others": {func(t *testing.T, dir string) {
			must(t, os.WriteFile(filepath.Join(dir, "bladectl.yaml"), nil, 0o600))
			must(t, os.Chmod(filepath.Join(dir, "bladectl.yaml"), 0o644))
		}, "bladectl.yaml holds a private key"},
		"a key executable by its owner only": {func(t *testing.T, dir string) {
			must(t, os.WriteFile(filepath.Join(dir, "admin.key"), nil, 0o700))
		}, ""},
	} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "state")
			must(t, os.Mkdir(dir, 0o700))
			tc.prepare(t, dir)
			err := Ensure(dir)
			if tc.say == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrUnsafe) || !strings.Contains(err.Error(), tc.say) ||
				!strings.Contains(err.Error(), "chmod -R go-w") && !strings.Contains(err.Error(), "remove it") && !strings.Contains(err.Error(), "chmod 600") {
				t.Fatalf("Ensure = %v, want a refusal saying %q and how to fix it", err, tc.say)
			}
		})
	}
}

// TestOwnedByAnotherUser: files another user owns are refused even when
// their mode is safe. As root the test gives a file to nobody; otherwise
// it checks a directory root owns.
func TestOwnedByAnotherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		err := Check("/", os.Geteuid())
		if !errors.Is(err, ErrUnsafe) || !strings.Contains(err.Error(), "belongs to uid 0") {
			t.Fatalf("Check(/) as uid %d = %v", os.Geteuid(), err)
		}
		return
	}
	dir := t.TempDir()
	f := filepath.Join(dir, "ca.crt")
	must(t, os.WriteFile(f, nil, 0o644))
	must(t, os.Chown(f, 65534, 65534))
	err := Ensure(dir)
	if !errors.Is(err, ErrUnsafe) || !strings.Contains(err.Error(), "ca.crt belongs to uid 65534, not to uid 0") {
		t.Fatalf("Ensure = %v", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
