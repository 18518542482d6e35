package build

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/kubeblade/kubeblade/internal/testenv"
	"github.com/kubeblade/kubeblade/internal/testreq"
)

// maxTrackedSize is the largest file the repository may track: anything
// bigger is a build output or a data set that belongs elsewhere.
const maxTrackedSize = 1 << 20

// executableMagic are the first bytes of the executable formats Go and C
// compilers write: ELF (the System V ABI's e_ident), Mach-O thin 32/64-bit in
// either byte order and universal ("fat") files (<mach-o/loader.h>,
// <mach-o/fat.h>), and PE/COFF's MS-DOS stub.
var executableMagic = []struct {
	format string
	magic  []byte
}{
	{"ELF", []byte{0x7f, 'E', 'L', 'F'}},
	{"Mach-O", []byte{0xfe, 0xed, 0xfa, 0xce}},
	{"Mach-O", []byte{0xce, 0xfa, 0xed, 0xfe}},
	{"Mach-O", []byte{0xfe, 0xed, 0xfa, 0xcf}},
	{"Mach-O", []byte{0xcf, 0xfa, 0xed, 0xfe}},
	{"Mach-O universal", []byte{0xca, 0xfe, 0xba, 0xbe}},
	{"PE", []byte{'M', 'Z'}},
}

// TestNoBuildOutputsTracked fails on a tracked file over 1 MiB or a tracked
// executable: build outputs are ignored (.gitignore), never committed.
func TestNoBuildOutputsTracked(t *testing.T) {
	root := testenv.RepoRoot()
	cmd := exec.Command("git", "ls-files", "-z")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		testreq.Unavailable(t, "git ls-files in %s: %v (not a git checkout?)", root, err)
	}
	n := 0
	for _, name := range bytes.Split(bytes.TrimSuffix(out, []byte{0}), []byte{0}) {
		path := filepath.Join(root, string(name))
		fi, err := os.Lstat(path)
		if os.IsNotExist(err) {
			continue // deleted in the work tree, not yet committed
		}
		if err != nil {
			t.Fatal(err)
		}
		if !fi.Mode().IsRegular() {
			continue
		}
		n++
		if fi.Size() > maxTrackedSize {
			t.Errorf("%s: %d bytes tracked; no tracked file may exceed %d bytes", name, fi.Size(), maxTrackedSize)
		}
		if format := executable(t, path); format != "" {
			t.Errorf("%s: a tracked %s executable; build outputs belong in .gitignore, not in git", name, format)
		}
	}
	if n == 0 {
		t.Fatalf("git ls-files in %s listed no files", root)
	}
}

func executable(t *testing.T, path string) string {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	head := make([]byte, 4)
	k, err := io.ReadFull(f, head)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		t.Fatal(err)
	}
	for _, m := range executableMagic {
		if bytes.HasPrefix(head[:k], m.magic) {
			return m.format
		}
	}
	return ""
}

// TestExecutableMagic checks the detector on a real executable, this test's
// own binary (ELF: the suite runs on Linux), and on a text file.
func TestExecutableMagic(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if got := executable(t, self); got != "ELF" {
		t.Errorf("the running test binary %s: detected %q, want ELF", self, got)
	}
	text := filepath.Join(t.TempDir(), "a.txt")
	if err := os.WriteFile(text, []byte("Mz not an executable\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := executable(t, text); got != "" {
		t.Errorf("a text file: detected %q, want nothing", got)
	}
}
