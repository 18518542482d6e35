package release

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/kubeblade/kubeblade/internal/testenv"
)

// versionRefs are the places in the repository that name the current
// release, each with a pattern whose first group is the version as that
// place writes it, and whether that place drops the "v" (chart versions,
// DKMS package versions).
var versionRefs = []struct {
	glob    string
	pattern *regexp.Regexp
	noV     bool
}{
	{"deploy/helm/kubeblade/Chart.yaml", regexp.MustCompile(`(?m)^version: (\S+)$`), true},
	{"deploy/helm/kubeblade/Chart.yaml", regexp.MustCompile(`(?m)^appVersion: "(\S+)"$`), false},
	{"deploy/flux/sources.yaml", regexp.MustCompile(`(?m)^\s+tag: (\S+)$`), false},
	{"deploy/flux/kubeblade-vars.yaml", regexp.MustCompile(`KUBEBLADE_VERSION: "(\S+)"`), true},
	{"deploy/flux/*.yaml", regexp.MustCompile(`\(chart (\S+) runs image`), true},
	{"deploy/flux/*/*.yaml", regexp.MustCompile(`\(chart (\S+) runs image`), true},
	{"deploy/flux/*/*.yaml", regexp.MustCompile(`runs image (v\S+)\)`), false},
	{"deploy/manifests/*.yaml", regexp.MustCompile(`app\.kubernetes\.io/version: (\S+)`), false},
	{"deploy/manifests/*.yaml", regexp.MustCompile(`ghcr\.io/kubeblade/kubeblade:(\S+)`), false},
	{"kernel/kubeblade-leds/dkms.conf", regexp.MustCompile(`PACKAGE_VERSION="(\S+)"`), true},
	{"kernel/kubeblade-leds/dkms.conf", regexp.MustCompile(`kubeblade-leds[-/]([0-9]\S*)`), true},
	{"docs/*.md", regexp.MustCompile(`ghcr\.io/[a-z<>]+/kubeblade:(v[0-9]\S*?)[\s\x60]`), false},
	{"docs/*.md", regexp.MustCompile(`kubeblade-leds[-/]([0-9][0-9.]*[0-9])`), true},
	{"docs/*.md", regexp.MustCompile(`kubeblade-leds:([0-9][0-9.]*[0-9])-<talos`), true},
	// The docs' release commands read $VERSION (install.md's
	// `export VERSION=...`; the chart version is "${VERSION#v}" there).
	{"docs/*.md", regexp.MustCompile(`VERSION=(v[0-9]\S*)`), false},
	{"README.md", regexp.MustCompile(`ghcr\.io/[a-z<>]+/kubeblade:(v[0-9]\S*?)[\s\x60]`), false},
}

// TestOneVersionEverywhere: the chart's appVersion is the current release,
// and every other place that names it (the chart version, the Flux
// example's tag and variables, the rendered manifests, the DKMS package,
// the docs' commands) names the same one, with or without the "v" as
// that place requires, so that v0.1.0 against 0.1.0 mistakes fail here.
func TestOneVersionEverywhere(t *testing.T) {
	root := testenv.RepoRoot()
	chart, err := os.ReadFile(filepath.Join(root, "deploy/helm/kubeblade/Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^appVersion: "(\S+)"$`).FindSubmatch(chart)
	if m == nil {
		t.Fatal("Chart.yaml has no quoted appVersion")
	}
	version := string(m[1])
	if err := CheckVersion(version); err != nil {
		t.Fatalf("Chart.yaml appVersion: %v", err)
	}
	found := map[string]int{}
	for _, ref := range versionRefs {
		files, err := filepath.Glob(filepath.Join(root, ref.glob))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			rel, _ := filepath.Rel(root, f)
			want := version
			if ref.noV {
				want = ChartVersion(version)
			}
			for _, m := range ref.pattern.FindAllSubmatch(b, -1) {
				found[ref.pattern.String()]++
				if got := strings.Trim(string(m[1]), `"'`); got != want {
					t.Errorf("%s: %q names version %q, want %q (the chart's appVersion %s)", rel, m[0], got, want, version)
				}
			}
		}
	}
	// Each pattern must still find something, or it checks nothing.
	for _, ref := range versionRefs {
		if found[ref.pattern.String()] == 0 {
			t.Errorf("%s: no match for %s (the file changed; update versionRefs)", ref.glob, ref.pattern)
		}
	}
}
