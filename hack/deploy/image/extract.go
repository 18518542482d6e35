package image

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// File reads one file out of the image for platform in the OCI image
// layout at dir: the artefact users pull, not a separate build. The layout
// may nest indexes (Build writes an index inside the layout's own); the
// first image whose platform is platform's is read, its layers flattened as
// a runtime would (whiteouts applied), and the regular file at name (a path
// in the image, with or without a leading slash) returned with its mode.
func File(dir string, platform v1.Platform, name string) ([]byte, int64, error) {
	lp, err := layout.FromPath(dir)
	if err != nil {
		return nil, 0, fmt.Errorf("OCI layout %s: %w", dir, err)
	}
	idx, err := lp.ImageIndex()
	if err != nil {
		return nil, 0, fmt.Errorf("OCI layout %s: %w", dir, err)
	}
	img, err := findImage(idx, platform)
	if err != nil {
		return nil, 0, fmt.Errorf("OCI layout %s: %w", dir, err)
	}
	rc := mutate.Extract(img)
	defer rc.Close()
	want := strings.TrimPrefix(path.Clean("/"+name), "/")
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, 0, fmt.Errorf("OCI layout %s: the %s image has no %s", dir, platform, want)
		}
		if err != nil {
			return nil, 0, err
		}
		if strings.TrimPrefix(path.Clean("/"+h.Name), "/") != want {
			continue
		}
		if h.Typeflag != tar.TypeReg {
			return nil, 0, fmt.Errorf("OCI layout %s: %s in the %s image is not a regular file", dir, want, platform)
		}
		b, err := io.ReadAll(tr)
		return b, h.Mode, err
	}
}

// findImage walks idx and the indexes it holds, in order, for the first
// image manifest of platform.
func findImage(idx v1.ImageIndex, platform v1.Platform) (v1.Image, error) {
	var seen []string
	img, err := walk(idx, platform, &seen)
	if err == nil && img == nil {
		if len(seen) == 0 {
			seen = []string{"none"}
		}
		err = fmt.Errorf("no %s image (platforms: %s)", platform, strings.Join(seen, ", "))
	}
	return img, err
}

func walk(idx v1.ImageIndex, platform v1.Platform, seen *[]string) (v1.Image, error) {
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, d := range m.Manifests {
		switch {
		case d.MediaType.IsIndex():
			child, err := idx.ImageIndex(d.Digest)
			if err != nil {
				return nil, err
			}
			if img, err := walk(child, platform, seen); img != nil || err != nil {
				return img, err
			}
		case d.MediaType.IsImage() && d.Platform != nil:
			*seen = append(*seen, d.Platform.String())
			if d.Platform.Satisfies(platform) {
				return idx.Image(d.Digest)
			}
		}
	}
	return nil, nil
}
