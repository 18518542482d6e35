package image_test

import (
	"archive/tar"
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/kubeblade/kubeblade/hack/deploy/image"
)

// layer is a tar layer holding files (name → content).
func layer(t *testing.T, files map[string]string) v1.Layer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for name, content := range files {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o755, Size: int64(len(content))}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(content))
	}
	tw.Close()
	return static.NewLayer(buf.Bytes(), types.OCILayer)
}

// TestFile reads one file of one platform's image out of an OCI layout
// laid out as Build writes it (an index inside the layout's index), with a
// later layer replacing an earlier layer's file, as a runtime sees it.
func TestFile(t *testing.T) {
	img := func(arch string) v1.Image {
		i, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1),
			layer(t, map[string]string{"usr/local/bin/kubeblade-agent": "old " + arch}),
			layer(t, map[string]string{"usr/local/bin/kubeblade-agent": "agent for " + arch, "etc/passwd": "root"}))
		if err != nil {
			t.Fatal(err)
		}
		return i
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, arch := range []string{"arm64", "amd64"} {
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img(arch), Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: arch}}})
	}
	dir := filepath.Join(t.TempDir(), "image")
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := lp.AppendIndex(idx); err != nil {
		t.Fatal(err)
	}

	for _, arch := range []string{"arm64", "amd64"} {
		b, mode, err := image.File(dir, v1.Platform{OS: "linux", Architecture: arch}, "/usr/local/bin/kubeblade-agent")
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != "agent for "+arch || mode != 0o755 {
			t.Errorf("%s: %q mode %o", arch, b, mode)
		}
	}
	for _, tc := range []struct {
		arch, name, want string
	}{
		{"riscv64", "usr/local/bin/kubeblade-agent", "no linux/riscv64 image (platforms: linux/arm64, linux/amd64)"},
		{"arm64", "usr/local/bin/bladectl", "has no usr/local/bin/bladectl"},
	} {
		if _, _, err := image.File(dir, v1.Platform{OS: "linux", Architecture: tc.arch}, tc.name); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %s: %v, want %q", tc.arch, tc.name, err, tc.want)
		}
	}
	if _, _, err := image.File(t.TempDir(), v1.Platform{OS: "linux", Architecture: "arm64"}, "x"); err == nil {
		t.Error("an empty directory read as a layout")
	}
}
