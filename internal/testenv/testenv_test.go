package testenv

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/kubeblade/kubeblade/internal/testreq"
)

// recorder captures how a test ends without ending the real one.
type recorder struct {
	testing.TB
	skipped, failed bool
}

func (r *recorder) Helper()               {}
func (r *recorder) Skip(...any)           { r.skipped = true }
func (r *recorder) Fatalf(string, ...any) { r.failed = true }
func (r *recorder) Fatal(...any)          { r.failed = true }

func withoutAssets(t *testing.T) {
	t.Setenv("KUBEBUILDER_ASSETS", "")
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	if _, err := AssetsDir(); err != ErrNoAssets {
		t.Fatalf("AssetsDir = %v, want ErrNoAssets", err)
	}
}

// fakeM runs tests the way testing.M does for Main.
type fakeM func() int

func (f fakeM) Run() int { return f() }

// Without binaries, Main still runs the tests, and each one that needs
// the control plane skips (plain go test) or fails (make test): a package
// can no longer pass having run nothing.
func TestMissingBinariesEndEachTest(t *testing.T) {
	for name, tc := range map[string]struct {
		required     string
		skip, failed bool
	}{
		"plain go test skips": {"", true, false},
		"make test fails":     {"1", false, true},
	} {
		t.Run(name, func(t *testing.T) {
			withoutAssets(t)
			t.Setenv(testreq.Env, tc.required)
			ran := false
			r := &recorder{}
			code := Main(fakeM(func() int {
				ran = true
				if env := Need(r); env != nil {
					t.Error("Need returned a control plane that cannot exist")
				}
				return 0
			}), Options{}, func(*Env) { t.Error("started without a control plane") })
			if !ran || code != 0 {
				t.Fatalf("tests ran: %v, exit code %d", ran, code)
			}
			if r.skipped != tc.skip || r.failed != tc.failed {
				t.Errorf("skipped=%v failed=%v, want skipped=%v failed=%v", r.skipped, r.failed, tc.skip, tc.failed)
			}

			// A Suite starts lazily and behaves the same.
			s := NewSuite(Options{}, nil)
			r = &recorder{}
			s.Need(r)
			if r.skipped != tc.skip || r.failed != tc.failed {
				t.Errorf("Suite: skipped=%v failed=%v, want skipped=%v failed=%v", r.skipped, r.failed, tc.skip, tc.failed)
			}
		})
	}
}

// RepoRoot finds the tree from this file's path, and from the working
// directory when a -trimpath build made that path module-relative.
func TestRepoRoot(t *testing.T) {
	root := RepoRoot()
	if _, err := os.Stat(filepath.Join(root, "internal", "testenv", "testenv.go")); err != nil {
		t.Fatalf("RepoRoot() = %s, which lacks internal/testenv: %v", root, err)
	}
	trimmed := modulePath + "/internal/testenv/testenv.go"
	for _, wd := range []string{root, filepath.Join(root, "internal", "testenv"), filepath.Join(root, "hack", "deploy")} {
		if got := repoRoot(trimmed, wd); got != root {
			t.Errorf("repoRoot(%q, %s) = %s, want %s", trimmed, wd, got, root)
		}
	}
	// Outside the tree (another module's go.mod does not count) it falls
	// back to the working directory.
	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, "go.mod"), []byte("module example.org/other\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := repoRoot(trimmed, other); got != other {
		t.Errorf("repoRoot outside the tree = %s, want the working directory %s", got, other)
	}
}
