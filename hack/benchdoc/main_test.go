package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const page = `# Performance

Hand-written introduction.

<!-- BEGIN GENERATED latest -->
| measurement | result | target |
|---|---|---|
| old | 1 | ≤ 2 |
<!-- END GENERATED latest -->

## Analysis

Hand-written analysis that no run may delete.

<!-- BEGIN GENERATED apicost -->
old apicost table
<!-- END GENERATED apicost -->

Closing words.
`

func TestRerunKeepsHandWrittenText(t *testing.T) {
	file := filepath.Join(t.TempDir(), "performance.md")
	if err := os.WriteFile(file, []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	table := "| measurement | result | target |\n|---|---|---|\n| new | 3 | ≤ 2 |\n"
	// Twice, as a second run of the documented command would.
	for range 2 {
		if err := run(file, "latest", strings.NewReader(table)); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(page, "| old | 1 | ≤ 2 |\n", "| new | 3 | ≤ 2 |\n", 1)
	if string(got) != want {
		t.Fatalf("after two runs the page is\n%s\nwant\n%s", got, want)
	}
	for _, kept := range []string{"Hand-written introduction.", "Hand-written analysis that no run may delete.", "old apicost table", "Closing words."} {
		if !strings.Contains(string(got), kept) {
			t.Errorf("lost %q", kept)
		}
	}
}

func TestBodyWithoutFinalNewline(t *testing.T) {
	got, err := Replace(page, "apicost", "new table")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got, Begin("apicost")+"\nnew table\n"+End("apicost")+"\n") {
		t.Fatalf("block not replaced cleanly:\n%s", got)
	}
}

func TestBadMarkersChangeNothing(t *testing.T) {
	for name, doc := range map[string]string{
		"missing":      "# P\n\ntext\n",
		"no end":       "# P\n" + Begin("latest") + "\nx\n",
		"no beginning": "# P\nx\n" + End("latest") + "\n",
		"reversed":     "# P\n" + End("latest") + "\nx\n" + Begin("latest") + "\n",
		"twice":        Begin("latest") + "\n" + End("latest") + "\n" + Begin("latest") + "\n" + End("latest") + "\n",
	} {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "performance.md")
			if err := os.WriteFile(file, []byte(doc), 0o644); err != nil {
				t.Fatal(err)
			}
			err := run(file, "latest", strings.NewReader("new\n"))
			if err == nil || !strings.Contains(err.Error(), "latest") {
				t.Fatalf("err = %v, want an error naming the block", err)
			}
			got, _ := os.ReadFile(file)
			if string(got) != doc {
				t.Fatalf("file changed despite the error:\n%s", got)
			}
		})
	}
}
