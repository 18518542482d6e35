// Command image packs the pause binary into a one-layer image and writes it
// as a docker-archive tarball that `ctr images import` reads: the sandbox
// image of the real-kubelet suite, made offline.
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Ref is the sandbox image's name; containerd's config pins it, so the
// kubelet never garbage-collects or pulls it.
const Ref = "registry.k8s.io/pause:kubeblade"

func main() {
	bin := flag.String("bin", "", "static pause binary")
	out := flag.String("out", "pause.tar", "tarball to write")
	refFile := flag.String("ref-file", "", "also write the image reference to this file")
	flag.Parse()
	if err := run(*bin, *out, *refFile); err != nil {
		fmt.Fprintln(os.Stderr, "pause image:", err)
		os.Exit(1)
	}
}

func run(bin, out, refFile string) error {
	data, err := os.ReadFile(bin)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0)
	if err := tw.WriteHeader(&tar.Header{Name: "pause", Mode: 0o755, Size: int64(len(data)), ModTime: epoch, Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	if _, err := tw.Write(data); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil })
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS, cf.Created = runtime.GOARCH, "linux", v1.Time{Time: epoch}
	cf.Config.Entrypoint = []string{"/pause"}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return err
	}
	ref, err := name.ParseReference(Ref)
	if err != nil {
		return err
	}
	if err := tarball.WriteToFile(out, ref, img); err != nil {
		return err
	}
	if refFile != "" {
		return os.WriteFile(refFile, []byte(Ref+"\n"), 0o644)
	}
	return nil
}
