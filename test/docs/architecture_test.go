// Package docs checks the documentation against the code: every path the
// package map of docs/architecture.md names exists, and every package under
// cmd/, api/ and internal/ is named there, so the map cannot drift from the
// tree unnoticed.
package docs

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/kubeblade/kubeblade/internal/testenv"
)

// packageMap returns the paths the first code block of docs/architecture.md
// names: the first word of each line that starts in the first column, braces expanded
// ("a/{b,c}" names a/b and a/c).
func packageMap(t *testing.T, root string) []string {
	t.Helper()
	f, err := os.Open(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var paths []string
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "```") {
			if in {
				break
			}
			in = true
			continue
		}
		if !in || line == "" || line[0] == ' ' {
			continue
		}
		paths = append(paths, expand(strings.Fields(line)[0])...)
	}
	if len(paths) == 0 {
		t.Fatal("docs/architecture.md has no package map (a code block of paths)")
	}
	return paths
}

var braces = regexp.MustCompile(`\{([^}]*)\}`)

func expand(p string) []string {
	m := braces.FindStringSubmatchIndex(p)
	if m == nil {
		return []string{p}
	}
	var out []string
	for _, alt := range strings.Split(p[m[2]:m[3]], ",") {
		out = append(out, expand(p[:m[0]]+alt+p[m[1]:])...)
	}
	return out
}

func TestEveryNamedPathExists(t *testing.T) {
	root := testenv.RepoRoot()
	for _, p := range packageMap(t, root) {
		if strings.Contains(p, "...") || strings.ContainsAny(p, " ,") {
			t.Errorf("%q: name one path per line (braces for several), not a pattern or a list", p)
			continue
		}
		if _, err := os.Stat(filepath.Join(root, p)); err != nil {
			t.Errorf("docs/architecture.md names %s, which does not exist", p)
		}
	}
}

func TestEveryPackageIsNamed(t *testing.T) {
	root := testenv.RepoRoot()
	named := map[string]bool{}
	for _, p := range packageMap(t, root) {
		named[strings.TrimSuffix(p, "/")] = true
	}
	var missing []string
	for _, top := range []string{"cmd", "api", "internal"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() {
				return nil
			}
			if d.Name() == "testdata" {
				return filepath.SkipDir
			}
			rel, _ := filepath.Rel(root, path)
			if hasGo(path) && !named[filepath.ToSlash(rel)] {
				missing = append(missing, filepath.ToSlash(rel))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(missing)
	for _, m := range missing {
		t.Errorf("package %s is not in the package map of docs/architecture.md: add a line saying what it is for", m)
	}
}

// hasGo reports whether dir holds a Go package (a non-test .go file).
func hasGo(dir string) bool {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if n := e.Name(); !e.IsDir() && strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go") {
			return true
		}
	}
	return false
}
