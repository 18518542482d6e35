package docs

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/kubeblade/kubeblade/internal/testenv"
)

// installDoc's <!-- e2e: helm-upgrade --> block is what the real-kubelet
// suite (test/kubelet) runs to upgrade the CRDs and the chart.
const (
	installDoc  = "docs/install.md"
	upgradeMark = "<!-- e2e: helm-upgrade -->"
)

// crdApply finds a kubectl apply of the CRD bundle, inline or on a line of
// its own.
var crdApply = regexp.MustCompile("kubectl apply[^`\n]*deploy/manifests/crds/crds\\.yaml[^`\n]*")

// TestCRDUpgradeCommandsMatchTheTestedOne: the other places that tell a
// Helm user how to upgrade the CRDs quote the command of install.md's
// helm-upgrade block, which the real-kubelet suite runs against a real API
// server; a copy that drifts from it (a lost --force-conflicts, say) would
// fail as soon as a CRD changes, with nothing testing it.
func TestCRDUpgradeCommandsMatchTheTestedOne(t *testing.T) {
	root := testenv.RepoRoot()
	block := markedBlock(t, filepath.Join(root, installDoc), upgradeMark)
	tested := crdApply.FindAllString(block, -1)
	if len(tested) != 1 {
		t.Fatalf("%s's %s block has %d CRD apply commands %q, want 1:\n%s", installDoc, upgradeMark, len(tested), tested, block)
	}
	want := strings.TrimSpace(tested[0])
	for _, doc := range []string{"docs/operations.md", "deploy/helm/kubeblade/README.md"} {
		t.Run(doc, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join(root, doc))
			if err != nil {
				t.Fatal(err)
			}
			found := crdApply.FindAllString(string(b), -1)
			if len(found) == 0 {
				t.Fatalf("%s tells no CRD upgrade command; want %q (from %s)", doc, want, installDoc)
			}
			for _, got := range found {
				if got = strings.TrimSpace(got); got != want {
					t.Errorf("%s says %q, but %s's %s block, which the real-kubelet e2e runs, says %q", doc, got, installDoc, upgradeMark, want)
				}
			}
		})
	}
}

// markedBlock returns the ```sh block that follows marker in path, as
// test/kubelet reads it.
func markedBlock(t *testing.T, path, marker string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	in, seen := false, false
	var b strings.Builder
	for sc.Scan() {
		line := sc.Text()
		switch {
		case !seen && strings.TrimSpace(line) == marker:
			seen = true
		case seen && !in && strings.TrimSpace(line) == "```sh":
			in = true
		case in && strings.HasPrefix(line, "```"):
			return b.String()
		case in:
			b.WriteString(line + "\n")
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	t.Fatalf("%s has no ```sh block after %s", path, marker)
	return ""
}
