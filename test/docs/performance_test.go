package docs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubeblade/kubeblade/internal/testenv"
)

// tableRows returns the cells of every row of every Markdown table in text
// whose header is header (the separator row left out), each row trimmed.
func tableRows(text, header string) [][]string {
	var rows [][]string
	in := false
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == header:
			in = true
		case in && strings.HasPrefix(line, "|---"):
		case in && strings.HasPrefix(line, "|"):
			cells := strings.Split(strings.Trim(line, "|"), "|")
			for i := range cells {
				cells[i] = strings.TrimSpace(cells[i])
			}
			rows = append(rows, cells)
		default:
			in = false
		}
	}
	return rows
}

// goals reads the "Goals" table of docs/performance.md: measurement → goal.
func goals(t *testing.T, page string) map[string]string {
	t.Helper()
	_, after, ok := strings.Cut(page, "\n## Goals\n")
	if !ok {
		t.Fatal(`docs/performance.md has no "## Goals" section`)
	}
	after, _, _ = strings.Cut(after, "\n## ")
	g := map[string]string{}
	for _, r := range tableRows(after, "| measurement | goal |") {
		if len(r) != 2 || r[1] == "" {
			t.Fatalf("Goals row %q: want a measurement and a goal", r)
		}
		if _, dup := g[r[0]]; dup {
			t.Fatalf("Goals names %q twice", r[0])
		}
		g[r[0]] = r[1]
	}
	if len(g) == 0 {
		t.Fatal("the Goals table of docs/performance.md is empty")
	}
	return g
}

// TestGoalsAreOnThePage checks that every target in a results table of
// docs/performance.md, and in the table hack/bench.sh writes there, is the
// goal the page's "Goals" table states for that measurement, word for word:
// a table cannot quietly aim lower than the page's goals.
func TestGoalsAreOnThePage(t *testing.T) {
	root := testenv.RepoRoot()
	read := func(rel string) string {
		b, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	page := read("docs/performance.md")
	g := goals(t, page)
	// hack/bench.sh's template escapes backquotes inside its here-document.
	bench := strings.ReplaceAll(read("hack/bench.sh"), "\\`", "`")
	for _, src := range []struct{ name, text string }{{"docs/performance.md", page}, {"hack/bench.sh", bench}} {
		rows := tableRows(src.text, "| measurement | result | target |")
		if len(rows) == 0 {
			t.Errorf("%s: no table with the header | measurement | result | target |", src.name)
		}
		for _, r := range rows {
			if len(r) != 3 {
				t.Errorf("%s: row %q has %d cells, want 3", src.name, r, len(r))
				continue
			}
			if r[2] == "" {
				continue
			}
			goal, ok := g[r[0]]
			switch {
			case !ok:
				t.Errorf("%s: %q has the target %q, but the Goals table has no goal for it", src.name, r[0], r[2])
			case goal != r[2]:
				t.Errorf("%s: %q has the target %q, the Goals table says %q", src.name, r[0], r[2], goal)
			}
		}
	}
}

// TestGeneratedBlocksAreMarked checks that the blocks the benchmarks rewrite
// are on the page, each once, so a run replaces its table and nothing else.
func TestGeneratedBlocksAreMarked(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "docs", "performance.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"latest-run", "apicost", "fleet-scale", "rack-view"} {
		for _, m := range []string{"<!-- BEGIN GENERATED " + name + " -->", "<!-- END GENERATED " + name + " -->"} {
			if n := strings.Count(string(b), m); n != 1 {
				t.Errorf("docs/performance.md has %q %d times, want once", m, n)
			}
		}
	}
}
