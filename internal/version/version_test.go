package version

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kubeblade/kubeblade/internal/testreq"
)

func TestFromBuild(t *testing.T) {
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	rev := "0123456789abcdef0123456789abcdef01234567"
	vcs := func(mv string, settings ...string) *debug.BuildInfo {
		bi := &debug.BuildInfo{Main: debug.Module{Path: "github.com/kubeblade/kubeblade", Version: mv}}
		for i := 0; i+1 < len(settings); i += 2 {
			bi.Settings = append(bi.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
		}
		return bi
	}
	cases := map[string]struct {
		version, commit, date string
		bi                    *debug.BuildInfo
		want                  Info
	}{
		"ldflags win over build info": {"v1.2.3", "feedface", "1767225600",
			vcs("v0.0.0-20260304050607-0123456789ab", "vcs.revision", rev, "vcs.time", at.Format(time.RFC3339)),
			Info{Version: "v1.2.3", Commit: "feedface", Date: time.Unix(1767225600, 0).UTC()}},
		"go build in a checkout": {"", "", "",
			vcs("v0.0.0-20260304050607-0123456789ab+dirty", "vcs.revision", rev, "vcs.time", at.Format(time.RFC3339), "vcs.modified", "true"),
			Info{Version: "v0.0.0-20260304050607-0123456789ab+dirty", Commit: rev, Date: at}},
		"go build on a tag": {"", "", "",
			vcs("v1.4.0", "vcs.revision", rev, "vcs.time", at.Format(time.RFC3339)),
			Info{Version: "v1.4.0", Commit: rev, Date: at}},
		"go install of a pseudo-version": {"", "", "", vcs("v0.0.0-20260304050607-0123456789ab"),
			Info{Version: "v0.0.0-20260304050607-0123456789ab", Commit: "0123456789ab", Date: at}},
		"go install of a pre-release pseudo-version": {"", "", "", vcs("v1.5.0-rc.1.0.20260304050607-0123456789ab"),
			Info{Version: "v1.5.0-rc.1.0.20260304050607-0123456789ab", Commit: "0123456789ab", Date: at}},
		"go install of a release": {"", "", "", vcs("v1.4.0"), Info{Version: "v1.4.0"}},
		"nothing known":           {"", "", "", vcs("(devel)"), Info{Version: Dev}},
		"no build info":           {"", "", "", nil, Info{Version: Dev}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, fromBuild(tc.version, tc.commit, tc.date, tc.bi)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestString(t *testing.T) {
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	for want, i := range map[string]Info{
		"v1.2.3":                {Version: "v1.2.3"},
		"v1.2.3 (0123456789ab)": {Version: "v1.2.3", Commit: "0123456789abcdef"},
		"v1.2.3 (0123456789ab, 2026-03-04T05:06:07Z)": {Version: "v1.2.3", Commit: "0123456789abcdef", Date: at},
		"v1.2.3 (2026-03-04T05:06:07Z)":               {Version: "v1.2.3", Date: at},
	} {
		if got := i.String(); got != want {
			t.Errorf("%+v.String() = %q, want %q", i, got, want)
		}
	}
}

// TestPlainGoBuildReportsTheCheckout builds a program that prints
// Get() with plain `go build` in a throwaway git repository holding this
// package: no ldflags, just what the toolchain records. (A git worktree,
// where .git is a file, gets no VCS stamp from Go; a clone does.)
func TestPlainGoBuildReportsTheCheckout(t *testing.T) {
	if testing.Short() {
		t.Skip("builds binaries")
	}
	git, err := exec.LookPath("git")
	testreq.Need(t, err == nil, "git is not installed")
	goBin := filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		goBin = "go"
	}
	repo := t.TempDir()
	files := map[string]string{
		"go.mod":                      "module github.com/kubeblade/kubeblade\n\ngo 1.26.0\n",
		"internal/version/version.go": "",
		"internal/version/testdata/printversion/main.go": "",
	}
	for name := range files {
		src := name
		if name != "go.mod" {
			src = strings.TrimPrefix(name, "internal/version/")
		}
		body := []byte(files[name])
		if files[name] == "" {
			if body, err = os.ReadFile(src); err != nil {
				t.Fatal(err)
			}
		}
		dst := filepath.Join(repo, name)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	when := "2026-03-04T05:06:07Z"
	env := append(os.Environ(), "GIT_AUTHOR_DATE="+when, "GIT_COMMITTER_DATE="+when,
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.org", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.org",
		"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	sh := func(name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir, cmd.Env = repo, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	sh(git, "init", "-q")
	sh(git, "add", ".")
	sh(git, "commit", "-q", "-m", "test")
	rev := sh(git, "rev-parse", "HEAD")

	// This machine's GOFLAGS may say -buildvcs=false; a plain build by a
	// user does not.
	build := func(extra ...string) []string {
		t.Helper()
		bin := filepath.Join(t.TempDir(), "printversion")
		cmd := exec.Command(goBin, append(append([]string{"build", "-buildvcs=true", "-o", bin}, extra...), "./internal/version/testdata/printversion")...)
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), "GOFLAGS=", "GOWORK=off", "GOPROXY=off", "GOTOOLCHAIN=local")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
		out, err := exec.Command(bin).Output()
		if err != nil {
			t.Fatal(err)
		}
		return strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	}

	got := build()
	pseudoWant := regexp.MustCompile(`^v0\.0\.0-20260304050607-` + rev[:12] + `$`)
	if !pseudoWant.MatchString(got[0]) || got[1] != rev || got[2] != when {
		t.Errorf("plain go build reports %q; want a pseudo-version of %s, that commit and %s", got, rev[:12], when)
	}

	// The toolchain caches what it learnt about a revision, so the tag
	// goes on a new commit.
	if err := os.WriteFile(filepath.Join(repo, "README"), []byte("v1.4.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sh(git, "add", "README")
	sh(git, "commit", "-q", "-m", "release")
	sh(git, "tag", "v1.4.0")
	rev = sh(git, "rev-parse", "HEAD")
	if got := build(); got[0] != "v1.4.0" || got[1] != rev {
		t.Errorf("on tag v1.4.0: %q", got)
	}
	if err := os.WriteFile(filepath.Join(repo, "README"), []byte("changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := build(); got[0] != "v1.4.0+dirty" {
		t.Errorf("with uncommitted changes: %q", got)
	}

	// Release builds stamp with -X, as the Makefile does; that wins.
	ld := "-X github.com/kubeblade/kubeblade/internal/version.version=v9.9.9 -X github.com/kubeblade/kubeblade/internal/version.commit=abc -X github.com/kubeblade/kubeblade/internal/version.date=1767225600"
	if got := build("-ldflags", ld); !cmp.Equal(got, []string{"v9.9.9", "abc", "2026-01-01T00:00:00Z"}) {
		t.Errorf("stamped build: %q", got)
	}
}
