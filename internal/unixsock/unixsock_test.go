package unixsock

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestListenSetsMode(t *testing.T) {
	p := filepath.Join(t.TempDir(), "sub", "a.sock")
	ln, err := Listen(p, 0o660)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != 0o660 {
		t.Fatalf("mode = %o, want 660", got)
	}
}

func TestStaleSocketIsReplaced(t *testing.T) {
	p := filepath.Join(t.TempDir(), "a.sock")
	// A socket file nobody serves, as a crashed process leaves it.
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Bind(fd, &syscall.SockaddrUnix{Name: p}); err != nil {
		t.Fatal(err)
	}
	syscall.Close(fd)
	ln, err := Listen(p, 0o660)
	if err != nil {
		t.Fatalf("stale socket not replaced: %v", err)
	}
	ln.Close()
}

func TestLiveSocketIsRefused(t *testing.T) {
	p := filepath.Join(t.TempDir(), "a.sock")
	live, err := net.Listen("unix", p)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	if _, err := Listen(p, 0o660); err == nil || !strings.Contains(err.Error(), "in use by another process") {
		t.Fatalf("err = %v", err)
	}
}

func TestRegularFileIsNotReplaced(t *testing.T) {
	p := filepath.Join(t.TempDir(), "a.sock")
	if err := os.WriteFile(p, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(p, 0o660); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Fatalf("err = %v", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "precious" {
		t.Fatal("file changed")
	}
}
