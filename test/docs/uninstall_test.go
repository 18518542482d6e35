package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/kubeblade/kubeblade/internal/testenv"
)

// deleteManifests is a removal of the plain manifests as a whole: it stops
// the operator while BladeConfigs still hold its finalizer, which then
// nothing releases.
var deleteManifests = regexp.MustCompile("kubectl delete[^`\n]*-(k|f) +deploy/manifests/?( |`|$)")

// TestOneUninstallRecipeForManifests: docs/install.md's manifests-uninstall
// block (run as written by the real-kubelet suite) deletes the BladeConfigs
// before anything else, and no document tells a reader to delete the whole
// bundle at once, which can hang on the BladeConfigs' finalizer.
func TestOneUninstallRecipeForManifests(t *testing.T) {
	root := testenv.RepoRoot()
	block := markedBlock(t, filepath.Join(root, installDoc), "<!-- e2e: manifests-uninstall -->")
	lines := strings.Split(strings.TrimSpace(block), "\n")
	if !strings.HasPrefix(lines[0], "kubectl delete bladeconfigs --all") {
		t.Errorf("%s manifests-uninstall starts with %q; it must delete the BladeConfigs first, while the operator runs", installDoc, lines[0])
	}
	files, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	files = append(files, filepath.Join(root, "README.md"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if m := deleteManifests.FindString(line); m != "" && !strings.Contains(line, "stops the operator first") {
				rel, _ := filepath.Rel(root, f)
				t.Errorf("%s:%d tells a reader to %q: that deletes the operator while BladeConfigs wait on its finalizer; point to %s's manifests-uninstall instead", rel, i+1, m, installDoc)
			}
		}
	}
}

func TestDeleteManifestsPattern(t *testing.T) {
	for line, want := range map[string]bool{
		"`kubectl delete -k deploy/manifests` removes":             true,
		"kubectl delete -f deploy/manifests/":                      true,
		"kubectl delete -f deploy/manifests/kubeblade.yaml --wait": false,
		"kubectl delete bladeconfigs --all --wait":                 false,
	} {
		if got := deleteManifests.MatchString(line); got != want {
			t.Errorf("%q: match %v, want %v", line, got, want)
		}
	}
}
