package docs

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/kubeblade/kubeblade/internal/testenv"
	"github.com/kubeblade/kubeblade/internal/testreq"
)

// unreadable are citations a reader of the repository cannot follow: the
// product specification's sections and the research notes the project was
// built from live outside it. Facts are cited from the repository's own
// docs (docs/hardware.md for the hardware) or from upstream sources by
// repository, file and commit. (The words are split so this file does not
// match itself.)
var unreadable = regexp.MustCompile(`(^|[^A-Za-z_])` + `SP` + `EC([^A-Za-z_]|$)` +
	`|shared/` + `notes|\.\./` + `shared|(hardware-facts|kernel-test-rig|real-kubelet|flux-talos-modules)` + `\.md`)

// TestNoCitationsOutsideTheRepository: no tracked file (code, comments,
// scripts, C, Markdown) cites the specification or notes that are not in
// the repository.
func TestNoCitationsOutsideTheRepository(t *testing.T) {
	root := testenv.RepoRoot()
	out, err := exec.Command("git", "-C", root, "ls-files", "-z").Output()
	testreq.Need(t, err == nil, "git ls-files in %s: %v (the tracked files are what is checked)", root, err)
	files := strings.Split(strings.TrimRight(string(out), "\x00"), "\x00")
	if len(files) < 100 {
		t.Fatalf("git ls-files lists %d files; the repository has hundreds", len(files))
	}
	self := filepath.Join("test", "docs", "citations_test.go")
	for _, f := range files {
		if f == self {
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			if os.IsNotExist(err) {
				continue // deleted in the work tree, not yet committed
			}
			t.Fatal(err)
		}
		if bytes.IndexByte(b, 0) >= 0 {
			continue // binary
		}
		for i, line := range strings.Split(string(b), "\n") {
			if m := unreadable.FindString(line); m != "" {
				t.Errorf("%s:%d cites %q, which a reader of the repository cannot check: cite docs/ or an upstream source (repository, file, commit)\n\t%s",
					f, i+1, strings.TrimSpace(m), strings.TrimSpace(line))
			}
		}
	}
}

// TestTheCitationCheckCatches: the pattern catches what it is for and not
// the words that merely contain it.
func TestTheCitationCheckCatches(t *testing.T) {
	for line, want := range map[string]bool{
		"// the rack view (" + "SP" + "EC §9)":            true,
		"// " + "SP" + "EC's and Linux's numbering":       true,
		" * PWM0 channel 0 (" + "SP" + "EC's numbering":   true,
		"// see shared/" + "notes/hardware-facts.md":      true,
		"// (hardware-facts" + ".md, Pins)":               true,
		"see ../" + "shared/SPEC.md":                      true,
		"FAN_MODE_UN" + "SPECIFIED = 0;":                  false,
		"INCLUDING ANY GENERAL, " + "SPECIAL, INCIDENTAL": false,
		"// docs/hardware.md#pins":                        false,
		"podSpec := corev1.PodSpec{}":                     false,
	} {
		if got := unreadable.MatchString(line); got != want {
			t.Errorf("%q: caught %v, want %v", line, got, want)
		}
	}
}
