package regs_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubeblade/kubeblade/internal/hardware/regs"
)

func TestOpenDevMemMissing(t *testing.T) {
	_, err := regs.OpenDevMem(filepath.Join(t.TempDir(), "mem"))
	if !errors.Is(err, regs.ErrUnavailable) || !strings.Contains(err.Error(), "Talos") {
		t.Fatalf("err = %v: want ErrUnavailable with a hint", err)
	}
	if err := regs.Usable(filepath.Join(t.TempDir(), "mem"), 0); !errors.Is(err, regs.ErrUnavailable) {
		t.Fatalf("Usable: %v", err)
	}
}

// TestMapFile maps a regular file the way /dev/mem is mapped: a write
// through the block reaches the file, 32 bits at a time.
func TestMapFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mem")
	if err := os.WriteFile(path, make([]byte, 2*regs.PageSize), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := regs.Usable(path, regs.PageSize); err != nil {
		t.Fatal(err)
	}
	d, err := regs.OpenDevMem(path)
	if err != nil {
		t.Fatal(err)
	}
	b, err := d.Map("test", regs.PageSize, regs.PageSize)
	if err != nil {
		t.Fatal(err)
	}
	b.Write(8, 0x11223344)
	if got := b.Read(8); got != 0x11223344 {
		t.Fatalf("read %#x", got)
	}
	if _, err := d.Map("unaligned", 12, regs.PageSize); err == nil {
		t.Fatal("unaligned map accepted")
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(path)
	if got := raw[regs.PageSize+8 : regs.PageSize+12]; string(got) != "\x44\x33\x22\x11" {
		t.Fatalf("file holds % x", got)
	}
}

func TestIsTalos(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "cmdline"), []byte("console=ttyAMA0 talos.platform=metal init_on_alloc=1\n"), 0o644)
	if !regs.IsTalos(dir) {
		t.Error("Talos command line not recognised")
	}
	os.WriteFile(filepath.Join(dir, "cmdline"), []byte("coherent_pool=1M 8250.nr_uarts=1 console=tty1 root=PARTUUID=1 rootwait\n"), 0o644)
	if regs.IsTalos(dir) || regs.IsTalos(filepath.Join(dir, "none")) {
		t.Error("Raspberry Pi OS taken for Talos")
	}
}
