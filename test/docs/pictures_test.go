package docs

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/kubeblade/kubeblade/internal/docpics"
	"github.com/kubeblade/kubeblade/internal/testenv"
)

// TestPicturesAreCurrent: every picture in docs/img is what internal/docpics
// draws, byte for byte, and every picture it draws is committed: a picture
// is changed in code and rendered with `make docs`, never edited by hand.
func TestPicturesAreCurrent(t *testing.T) {
	dir := filepath.Join(testenv.RepoRoot(), "docs", "img")
	for _, name := range docpics.Names() {
		want := docpics.Pictures[name]()
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Errorf("docs/img/%s: %v: run `make docs` and commit the result", name, err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("docs/img/%s differs from what internal/docpics draws: run `make docs` and commit the result", name)
		}
	}
	committed, err := filepath.Glob(filepath.Join(dir, "*.svg"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range committed {
		if _, ok := docpics.Pictures[filepath.Base(p)]; !ok {
			t.Errorf("docs/img/%s is not drawn by internal/docpics: draw it there or delete it", filepath.Base(p))
		}
	}
}

// TestPicturesAreShown: every picture is shown by at least one document.
func TestPicturesAreShown(t *testing.T) {
	root := testenv.RepoRoot()
	files, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	files = append(files, filepath.Join(root, "README.md"))
	var all []byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	for _, name := range docpics.Names() {
		if !bytes.Contains(all, []byte("img/"+name+")")) {
			t.Errorf("no document shows img/%s", name)
		}
	}
}
