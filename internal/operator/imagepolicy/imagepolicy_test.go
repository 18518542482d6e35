package imagepolicy

import (
	"strings"
	"testing"
)

// Cases are shared with test/security, which sends the same images through
// the API server's admission policy.
func TestRepository(t *testing.T) {
	for image, want := range Cases {
		if got := Repository(image); got != want {
			t.Errorf("Repository(%q) = %q, want %q", image, got, want)
		}
	}
}

func TestCheck(t *testing.T) {
	l := AllowList{DefaultRepository, "registry.local:5000/mirror/kubeblade"}
	for image, repo := range Cases {
		err := l.Check(image)
		want := repo == DefaultRepository || repo == "registry.local:5000/mirror/kubeblade"
		if (err == nil) != want {
			t.Errorf("Check(%q) = %v, want allowed=%v", image, err, want)
		}
		if err != nil && !strings.Contains(err.Error(), DefaultRepository) {
			t.Errorf("Check(%q): the error does not say what is allowed: %v", image, err)
		}
	}
}

func TestParse(t *testing.T) {
	l, err := Parse(" ghcr.io/kubeblade/kubeblade, ,registry.local:5000/x ")
	if err != nil || l.String() != "ghcr.io/kubeblade/kubeblade,registry.local:5000/x" {
		t.Fatalf("Parse = %v, %v", l, err)
	}
	for _, bad := range []string{"ghcr.io/kubeblade/kubeblade:v1", "x@sha256:00"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted a tag or digest", bad)
		}
	}
}

func TestSetAndAllowed(t *testing.T) {
	var l AllowList
	if err := l.Set(" , "); err == nil {
		t.Error("an empty list was accepted: it would allow nothing but the operator's image, silently")
	}
	if err := l.Set("registry.local:5000/mirror/kubeblade"); err != nil {
		t.Fatal(err)
	}
	const own = "ghcr.io/kubeblade/kubeblade:v1"
	for image, want := range map[string]string{
		"":                                       own,
		"registry.local:5000/mirror/kubeblade:2": "registry.local:5000/mirror/kubeblade:2",
		"evil.example.com/x:1":                   own,
	} {
		got, err := l.Allowed(image, own)
		if got != want || (err != nil) != (image == "evil.example.com/x:1") {
			t.Errorf("Allowed(%q) = %q, %v; want %q", image, got, err, want)
		}
	}
}
