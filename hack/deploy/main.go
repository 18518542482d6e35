// Command deploytool keeps kubeblade's deployment artefacts in step: it
// syncs the Helm chart from config/ (CRDs, RBAC, admission policy) and
// values.yaml (README), renders the plain manifests from the chart, and
// builds the multi-arch container image without a Docker engine.
//
//	deploytool sync-chart [-check]
//	deploytool manifests [-check]
//	deploytool image -out dist/image -version v1.2.3 -ldflags '...'
//	deploytool image-file -layout dist/image -platform linux/arm64 -path usr/local/bin/kubeblade-agent -out bin/x
//	deploytool publish -dist dist -version v1.2.3 -registry host:port/path [-key cosign.key]
//	deploytool release -out dist -image dist/image -version v1.2.3 -commit ... -created ... [-key cosign.key]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/kubeblade/kubeblade/hack/deploy/chartsync"
	"github.com/kubeblade/kubeblade/hack/deploy/image"
	"github.com/kubeblade/kubeblade/hack/deploy/manifests"
	"github.com/kubeblade/kubeblade/hack/deploy/release"
	"github.com/kubeblade/kubeblade/hack/deploy/render"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "deploytool:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: deploytool sync-chart|manifests|image|image-file|release|publish [flags]")
	}
	root, err := render.RepoRoot()
	if err != nil {
		return err
	}
	fs := flag.NewFlagSet("deploytool "+args[0], flag.ContinueOnError)
	switch args[0] {
	case "sync-chart":
		check := fs.Bool("check", false, "only report stale files")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if *check {
			return chartsync.Check(root)
		}
		return chartsync.Sync(root)
	case "manifests":
		check := fs.Bool("check", false, "only report stale files")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if *check {
			return manifests.Check(ctx, root)
		}
		return manifests.Write(ctx, root)
	case "image":
		out := fs.String("out", filepath.Join(root, "dist", "image"), "OCI layout directory to write")
		version := fs.String("version", "v0.0.0-dev", "version for the image labels and ref name")
		ldflags := fs.String("ldflags", "", "go build -ldflags (version stamping)")
		tags := fs.String("tags", "", "go build -tags, comma-separated")
		created := fs.Int64("created", 0, "creation time, Unix seconds (default: now)")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		t := time.Now().UTC().Truncate(time.Second)
		if *created > 0 {
			t = time.Unix(*created, 0).UTC()
		}
		start := time.Now()
		idx, err := image.Build(ctx, image.Options{Root: root, Out: *out, Version: *version, LDFlags: *ldflags, Tags: *tags, Created: t, Log: os.Stderr})
		if err != nil {
			return err
		}
		d, err := idx.Digest()
		if err != nil {
			return err
		}
		fmt.Printf("wrote %s (index %s, version %s) in %s\n", *out, d, *version, time.Since(start).Round(time.Millisecond))
		return nil
	case "release":
		out := fs.String("out", filepath.Join(root, "dist"), "directory to write the release to")
		img := fs.String("image", "", "OCI layout of the image (make image's); empty: build it")
		version := fs.String("version", "", "release version, vX.Y.Z (required)")
		commit := fs.String("commit", "", "git commit released")
		ldflags := fs.String("ldflags", "", "go build -ldflags (version stamping)")
		tags := fs.String("tags", "", "go build -tags, comma-separated")
		created := fs.Int64("created", 0, "release time, Unix seconds (required: the commit's time)")
		repo := fs.String("image-repository", release.DefaultImageRepository, "image repository the signature and SBOM name")
		key := fs.String("key", "", "PEM private key to sign with (optional)")
		builder := fs.String("builder", "", "provenance builder id (the CI run's URL)")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if *version == "" {
			return fmt.Errorf("release: -version is required (make release VERSION=vX.Y.Z)")
		}
		if *created <= 0 {
			return fmt.Errorf("release: -created is required")
		}
		start := time.Now()
		res, err := release.Make(ctx, release.Options{
			Root: root, Out: *out, Version: *version, Commit: *commit, Created: time.Unix(*created, 0).UTC(),
			LDFlags: *ldflags, Tags: *tags, ImageLayout: *img, ImageRepository: *repo, Key: *key, Builder: *builder, Log: os.Stderr,
		})
		if err != nil {
			return err
		}
		fmt.Printf("release %s: %d files in %s (image %s) in %s\n", *version, len(res.Files), *out, res.ImageDigest, time.Since(start).Round(time.Millisecond))
		return nil
	case "publish":
		dist := fs.String("dist", filepath.Join(root, "dist"), "the release make release wrote")
		version := fs.String("version", "", "the release's version (required)")
		reg := fs.String("registry", "", "host[:port][/path] to publish to (required)")
		key := fs.String("key", "", "PEM private key to sign the image and chart with (optional)")
		plain := fs.Bool("plain-http", false, "talk HTTP to a registry that is not on loopback")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		res, err := release.Publish(ctx, release.PublishOptions{Root: root, Dist: *dist, Version: *version, Registry: *reg, Key: *key, PlainHTTP: *plain, Log: os.Stderr})
		if err != nil {
			return err
		}
		fmt.Printf("published %s@%s\n          %s:%s@%s\n", res.Image, res.ImageDigest, res.Chart, release.ChartVersion(*version), res.ChartDigest)
		return nil
	case "image-file":
		dir := fs.String("layout", filepath.Join(root, "dist", "image"), "OCI image layout to read (make image's, or a release's)")
		plat := fs.String("platform", "linux/arm64", "the image's platform, os/arch[/variant]")
		name := fs.String("path", "usr/local/bin/kubeblade-agent", "file in the image")
		out := fs.String("out", "", "where to write it (required)")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if *out == "" {
			return fmt.Errorf("image-file: -out is required")
		}
		p, err := v1.ParsePlatform(*plat)
		if err != nil {
			return fmt.Errorf("image-file: -platform: %w", err)
		}
		b, mode, err := image.File(*dir, *p, *name)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
			return err
		}
		tmp := *out + ".tmp"
		if err := os.WriteFile(tmp, b, os.FileMode(mode).Perm()); err != nil {
			return err
		}
		if err := os.Rename(tmp, *out); err != nil {
			return err
		}
		fmt.Printf("%s: /%s of the %s image in %s (%d bytes)\n", *out, strings.TrimPrefix(*name, "/"), p, *dir, len(b))
		return nil
	}
	return fmt.Errorf("unknown command %q", args[0])
}
