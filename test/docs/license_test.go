package docs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubeblade/kubeblade/internal/testenv"
)

// The repository's licence is the one its chart and image labels declare.
func TestLicenseIsApache2(t *testing.T) {
	root := testenv.RepoRoot()
	b, err := os.ReadFile(filepath.Join(root, "LICENSE"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	for _, want := range []string{"Apache License", "Version 2.0, January 2004", "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION", "END OF TERMS AND CONDITIONS"} {
		if !strings.Contains(text, want) {
			t.Errorf("LICENSE lacks %q: not the full Apache-2.0 text", want)
		}
	}
	chart, err := os.ReadFile(filepath.Join(root, "deploy", "helm", "kubeblade", "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(chart), "artifacthub.io/license: Apache-2.0") {
		t.Error("the chart does not declare Apache-2.0, the LICENSE file's licence")
	}
}
