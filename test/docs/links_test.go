package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/kubeblade/kubeblade/internal/testenv"
)

// mdLink is a Markdown inline link or image: [text](target) or ![alt](target).
var mdLink = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)\)`)

// headingAnchors returns the anchors GitHub makes of a Markdown file's
// headings: lower case, letters, digits, '-' and '_' kept, other punctuation and symbols (≤, —) dropped, spaces
// turned into '-', and "-1", "-2" appended to repeats.
func headingAnchors(text string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	in := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "```") {
			in = !in
			continue
		}
		if in || !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(h) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			anchors[a+"-"+strconv.Itoa(n)] = true
		} else {
			anchors[a] = true
		}
		seen[a]++
	}
	return anchors
}

// TestDocLinksResolve: every relative link in README.md and docs/*.md names
// a file of the repository, and a #fragment names a heading of that file, so
// moving a section to a page of its own cannot leave a reader at a dead end.
func TestDocLinksResolve(t *testing.T) {
	root := testenv.RepoRoot()
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join(root, "README.md"))
	if len(files) < 10 {
		t.Fatalf("found %d documents; docs/ has more", len(files))
	}
	checked := 0
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, f)
		for i, line := range strings.Split(string(raw), "\n") {
			for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				path, frag, _ := strings.Cut(target, "#")
				dest := f
				if path != "" {
					dest = filepath.Join(filepath.Dir(f), path)
				}
				checked++
				body, err := os.ReadFile(dest)
				if err != nil {
					if st, serr := os.Stat(dest); serr == nil && st.IsDir() && frag == "" {
						continue
					}
					t.Errorf("%s:%d links to %q, which does not exist", rel, i+1, target)
					continue
				}
				if frag != "" && strings.HasSuffix(dest, ".md") && !headingAnchors(string(body))[frag] {
					t.Errorf("%s:%d links to %q: %s has no heading with the anchor #%s", rel, i+1, target, filepath.Base(dest), frag)
				}
			}
		}
	}
	if checked < 50 {
		t.Fatalf("checked %d relative links; the docs have far more, so the link pattern is broken", checked)
	}
}

// TestHeadingAnchors: the anchors are GitHub's for the headings the docs use.
func TestHeadingAnchors(t *testing.T) {
	got := headingAnchors("# A `b.c` d\n### `make test` (goals: warm ≤ 15 min) — both met\n## 1. Boot configuration (`config.txt`)\n```\n# not a heading\n```\n## Ports\n## Ports\n")
	for _, want := range []string{"a-bc-d", "make-test-goals-warm--15-min--both-met", "1-boot-configuration-configtxt", "ports", "ports-1"} {
		if !got[want] {
			t.Errorf("no anchor %q in %v", want, got)
		}
	}
	if got["not-a-heading"] {
		t.Errorf("a comment in a code block made an anchor: %v", got)
	}
}
