package image_test

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/buildinfo"
	"debug/elf"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/kubeblade/kubeblade/hack/deploy/image"
	"github.com/kubeblade/kubeblade/hack/deploy/render"
)

// TestBuild reads an image build back: an index with linux/arm64 and
// linux/amd64, each image holding the three binaries for its architecture
// with the version stamped in, plus passwd/group for the non-root
// operator. Under make test it checks the layout make image wrote, the
// bytes every other suite and the release use ($KUBEBLADE_IMAGE_LAYOUT,
// version $KUBEBLADE_RELEASE_VERSION); run alone it builds one into a
// temporary directory first, as `make image` does.
func TestBuild(t *testing.T) {
	out, version := os.Getenv("KUBEBLADE_IMAGE_LAYOUT"), os.Getenv("KUBEBLADE_RELEASE_VERSION")
	if out == "" {
		root, err := render.RepoRoot()
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
		defer cancel()
		out = filepath.Join(t.TempDir(), "image")
		version = "v9.8.7-imagetest"
		start := time.Now()
		_, err = image.Build(ctx, image.Options{
			Root:    root,
			Out:     out,
			Version: version,
			LDFlags: "-X github.com/kubeblade/kubeblade/internal/version.version=" + version,
			Tags:    "grpcnotrace",
			Created: time.Unix(1700000000, 0).UTC(),
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("built in %s", time.Since(start).Round(time.Second))
	} else if version == "" {
		t.Fatal("KUBEBLADE_IMAGE_LAYOUT is set without KUBEBLADE_RELEASE_VERSION, the version make image stamped")
	}

	lp, err := layout.FromPath(out)
	if err != nil {
		t.Fatal(err)
	}
	top, err := lp.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	topManifest, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(topManifest.Manifests) != 1 || topManifest.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != version {
		t.Fatalf("layout index.json: %+v", topManifest.Manifests)
	}
	idx, err := top.ImageIndex(topManifest.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	if mt, _ := idx.MediaType(); mt != types.OCIImageIndex {
		t.Errorf("index media type %s", mt)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	machines := map[string]elf.Machine{"arm64": elf.EM_AARCH64, "amd64": elf.EM_X86_64}
	seen := map[string]bool{}
	for _, d := range im.Manifests {
		if d.Platform == nil || d.Platform.OS != "linux" {
			t.Fatalf("manifest %s has platform %v", d.Digest, d.Platform)
		}
		arch := d.Platform.Architecture
		seen[arch] = true
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.Architecture != arch || cf.OS != "linux" {
			t.Errorf("%s: config says %s/%s", arch, cf.OS, cf.Architecture)
		}
		if cf.Config.Labels["org.opencontainers.image.version"] != version {
			t.Errorf("%s: version label %q", arch, cf.Config.Labels["org.opencontainers.image.version"])
		}
		files := readFiles(t, img)
		size := 0
		for _, b := range image.Binaries {
			data, ok := files[image.BinDir+"/"+b]
			if !ok {
				t.Errorf("%s: no /%s/%s", arch, image.BinDir, b)
				continue
			}
			size += len(data)
			f, err := elf.NewFile(bytes.NewReader(data))
			if err != nil {
				t.Errorf("%s/%s is not ELF: %v", arch, b, err)
				continue
			}
			if f.Machine != machines[arch] {
				t.Errorf("%s/%s built for %s", arch, b, f.Machine)
			}
			if !bytes.Contains(data, []byte(version)) {
				t.Errorf("%s/%s: version %s not stamped", arch, b, version)
			}
			if bi, err := buildinfo.Read(bytes.NewReader(data)); err != nil {
				t.Errorf("%s/%s: build info: %v", arch, b, err)
			} else if tags := buildSetting(bi, "-tags"); tags != "grpcnotrace" {
				t.Errorf("%s/%s built with tags %q, want grpcnotrace", arch, b, tags)
			}
		}
		if !bytes.Contains(files["etc/passwd"], []byte("nonroot:x:65532:65532")) {
			t.Errorf("%s: /etc/passwd lacks the nonroot user: %q", arch, files["etc/passwd"])
		}
		t.Logf("%s: binaries %.1f MiB", arch, float64(size)/(1<<20))
	}
	for arch := range machines {
		if !seen[arch] {
			t.Errorf("no linux/%s image in the index", arch)
		}
	}
}

func buildSetting(bi *buildinfo.BuildInfo, key string) string {
	for _, s := range bi.Settings {
		if s.Key == key {
			return s.Value
		}
	}
	return ""
}

func readFiles(t *testing.T, img v1.Image) map[string][]byte {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if h.Typeflag == tar.TypeReg {
				b, err := io.ReadAll(tr)
				if err != nil {
					t.Fatal(err)
				}
				files[h.Name] = b
			}
		}
		rc.Close()
	}
	return files
}
