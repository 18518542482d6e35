// Package image builds kubeblade's multi-arch container image without a
// container engine: it cross-compiles the binaries with the Go toolchain and
// assembles an OCI image index with go-containerregistry, written as an OCI
// image layout directory (push it with `crane push` or `skopeo copy oci:`).
package image

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/sync/errgroup"
)

// Binaries are the commands the image holds, in /usr/local/bin.
var Binaries = []string{"kubeblade-agent", "kubeblade-operator", "bladectl"}

// Platforms the image is built for.
var Platforms = []v1.Platform{{OS: "linux", Architecture: "arm64"}, {OS: "linux", Architecture: "amd64"}}

// BinDir is where the binaries live in the image.
const BinDir = "usr/local/bin"

// NonRootUID is the operator's user. The image's default user is root,
// because the agent needs the host's devices; the operator's pod spec
// chooses this one.
const NonRootUID = 65532

// Options say what to build.
type Options struct {
	// Root is the repository root (the main module).
	Root string
	// Out is the OCI layout directory to write; it is replaced.
	Out string
	// Version is stamped into the image labels and its ref name annotation.
	Version string
	// LDFlags are passed to go build (the Makefile's version stamping).
	LDFlags string
	// Tags are go build tags, comma-separated (the Makefile's TAGS).
	Tags string
	// Created is the image creation time and every file's mtime, for
	// reproducible images (the Makefile passes the last commit's time).
	Created time.Time
	// Binaries and Platforms default to the package variables.
	Binaries  []string
	Platforms []v1.Platform
	// CACertificates is a PEM bundle copied to /etc/ssl/certs; default: the
	// build machine's /etc/ssl/certs/ca-certificates.crt if present.
	CACertificates string
	// Log receives progress lines; nil discards them.
	Log io.Writer
}

// Build builds the binaries and writes the image index to o.Out.
func Build(ctx context.Context, o Options) (v1.ImageIndex, error) {
	if o.Binaries == nil {
		o.Binaries = Binaries
	}
	if o.Platforms == nil {
		o.Platforms = Platforms
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.Version == "" {
		o.Version = "v0.0.0-dev"
	}
	if o.CACertificates == "" {
		if _, err := os.Stat("/etc/ssl/certs/ca-certificates.crt"); err == nil {
			o.CACertificates = "/etc/ssl/certs/ca-certificates.crt"
		}
	}
	var ca []byte
	if o.CACertificates != "" {
		var err error
		if ca, err = os.ReadFile(o.CACertificates); err != nil {
			return nil, err
		}
	}

	work, err := os.MkdirTemp("", "kubeblade-image-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)

	// One go build per platform compiles the shared packages once for all
	// binaries; the platforms build side by side.
	g, gctx := errgroup.WithContext(ctx)
	for _, p := range o.Platforms {
		dir := filepath.Join(work, p.OS+"-"+p.Architecture)
		g.Go(func() error { return goBuild(gctx, o, p, dir) })
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}

	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range o.Platforms {
		img, err := platformImage(o, p, filepath.Join(work, p.OS+"-"+p.Architecture), ca)
		if err != nil {
			return nil, err
		}
		plat := p
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &plat},
		})
	}

	if err := os.RemoveAll(o.Out); err != nil {
		return nil, err
	}
	lp, err := layout.Write(o.Out, empty.Index)
	if err != nil {
		return nil, err
	}
	if err := lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": o.Version,
	})); err != nil {
		return nil, err
	}
	return idx, nil
}

func goBuild(ctx context.Context, o Options, p v1.Platform, dir string) error {
	args := []string{"build", "-trimpath", "-ldflags", strings.TrimSpace(o.LDFlags + " -s -w"), "-o", dir + "/"}
	if o.Tags != "" {
		args = append(args, "-tags", o.Tags)
	}
	for _, b := range o.Binaries {
		args = append(args, "./cmd/"+b)
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = o.Root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Architecture, "GOFLAGS=-buildvcs=false")
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = o.Log, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build for %s/%s: %w\n%s", p.OS, p.Architecture, err, stderr.String())
	}
	fmt.Fprintf(o.Log, "built %s for %s/%s in %s\n", strings.Join(o.Binaries, ", "), p.OS, p.Architecture, time.Since(start).Round(time.Millisecond))
	return nil
}

func platformImage(o Options, p v1.Platform, binDir string, ca []byte) (v1.Image, error) {
	layerTar, err := rootfs(o, binDir, ca)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	if img, err = mutate.Append(img, mutate.Addendum{Layer: layer, History: v1.History{
		Created:   v1.Time{Time: o.Created},
		CreatedBy: "kubeblade hack/deploy image",
		Comment:   "kubeblade binaries, passwd, CA certificates",
	}}); err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = p.OS, p.Architecture, p.Variant
	cf.Created = v1.Time{Time: o.Created}
	cf.Config.Env = []string{"PATH=/" + BinDir, "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"}
	cf.Config.Entrypoint = []string{"/" + BinDir + "/kubeblade-operator"}
	cf.Config.WorkingDir = "/"
	cf.Config.Labels = map[string]string{
		"org.opencontainers.image.title":       "kubeblade",
		"org.opencontainers.image.description": "kubeblade-agent, kubeblade-operator and bladectl for Compute Blades",
		"org.opencontainers.image.source":      "https://github.com/kubeblade/kubeblade",
		"org.opencontainers.image.version":     o.Version,
		"org.opencontainers.image.licenses":    "Apache-2.0",
	}
	return mutate.ConfigFile(img, cf)
}

// rootfs is the image's only layer: FROM scratch plus the binaries, a
// passwd/group naming root and nonroot (65532), CA certificates and /tmp.
func rootfs(o Options, binDir string, ca []byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	mt := o.Created
	dir := func(name string, mode int64) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode, ModTime: mt, Format: tar.FormatPAX})
	}
	file := func(name string, mode int64, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data)), ModTime: mt, Format: tar.FormatPAX}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	for _, d := range []string{"etc", "etc/ssl", "etc/ssl/certs", "usr", "usr/local", BinDir, "var", "var/lib", "run"} {
		if err := dir(d, 0o755); err != nil {
			return nil, err
		}
	}
	if err := dir("tmp", 0o1777); err != nil {
		return nil, err
	}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", NonRootUID, NonRootUID)
	group := fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", NonRootUID)
	if err := file("etc/passwd", 0o644, []byte(passwd)); err != nil {
		return nil, err
	}
	if err := file("etc/group", 0o644, []byte(group)); err != nil {
		return nil, err
	}
	if len(ca) > 0 {
		if err := file("etc/ssl/certs/ca-certificates.crt", 0o644, ca); err != nil {
			return nil, err
		}
	}
	for _, b := range o.Binaries {
		data, err := os.ReadFile(filepath.Join(binDir, b))
		if err != nil {
			return nil, err
		}
		if err := file(BinDir+"/"+b, 0o755, data); err != nil {
			return nil, err
		}
	}
	// bladectl is also the kubectl plugin `kubectl blade`: it checks its name.
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: BinDir + "/kubectl-blade", Linkname: "bladectl", Mode: 0o777, ModTime: mt, Format: tar.FormatPAX}); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
