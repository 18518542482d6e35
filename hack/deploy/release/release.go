// Package release makes a kubeblade release in one directory (make
// release's dist/): the multi-arch image as an OCI layout, the Helm chart,
// bladectl and kubeblade-agent archives with a krew manifest, the
// kubeblade-leds DKMS and Talos sources, CycloneDX SBOMs, SHA256SUMS, an
// in-toto SLSA provenance statement and, given a key, sigstore signatures.
// Everything but the signatures depends only on the commit, the version
// and the time given, so two releases of one commit are byte-identical.
package release

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	cdx "github.com/CycloneDX/cyclonedx-go"
	"github.com/Masterminds/semver/v3"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/sigstore/sigstore/pkg/signature"
	"golang.org/x/sync/errgroup"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"sigs.k8s.io/yaml"

	"github.com/kubeblade/kubeblade/hack/deploy/image"
	"github.com/kubeblade/kubeblade/hack/deploy/render"
)

// DefaultImageRepository is where the public releases' image lives; the
// chart's values.yaml names it.
const DefaultImageRepository = "ghcr.io/kubeblade/kubeblade"

// DefaultDownloadURL is where the public releases' archives are attached
// (GitHub release assets); the krew manifest points there.
const DefaultDownloadURL = "https://github.com/kubeblade/kubeblade/releases/download"

// Archive is one released binary archive.
type Archive struct {
	Binary   string
	OS, Arch string
	// Tags are extra go build tags (the standalone agent is built nokube).
	Tags string
}

// Archives are the binaries a release ships outside the image: bladectl
// (also the kubectl plugin "kubectl blade") for Linux and macOS, and the
// standalone agent (no Kubernetes client, docs/install.md's systemd
// install) for the blades.
var Archives = []Archive{
	{Binary: "bladectl", OS: "linux", Arch: "amd64"},
	{Binary: "bladectl", OS: "linux", Arch: "arm64"},
	{Binary: "bladectl", OS: "darwin", Arch: "amd64"},
	{Binary: "bladectl", OS: "darwin", Arch: "arm64"},
	{Binary: "kubeblade-agent", OS: "linux", Arch: "amd64", Tags: "nokube"},
	{Binary: "kubeblade-agent", OS: "linux", Arch: "arm64", Tags: "nokube"},
}

// FileName is the archive's name in a release of version.
func (a Archive) FileName(version string) string {
	return fmt.Sprintf("%s_%s_%s_%s.tar.gz", a.Binary, version, a.OS, a.Arch)
}

// Options say what to release.
type Options struct {
	// Root is the repository root; Out the directory to write (dist/).
	Root, Out string
	// Version is the release's version, vMAJOR.MINOR.PATCH[-pre][+build].
	Version string
	// Commit is the git commit released (for the provenance).
	Commit string
	// Created is the release's time: every mtime and timestamp.
	Created time.Time
	// LDFlags and Tags are the go build flags of every binary (the
	// Makefile's version stamping and TAGS).
	LDFlags, Tags string
	// ImageLayout is an OCI layout make image wrote for this version; it is
	// copied to Out/image unless it is there already. Empty: build it.
	ImageLayout string
	// ImageRepository is the image's repository for the signature and the
	// SBOM (default DefaultImageRepository).
	ImageRepository string
	// DownloadURL is the krew manifest's base URL (default DefaultDownloadURL).
	DownloadURL string
	// Builder is the provenance's builder id (the workflow run's URL in CI).
	Builder string
	// Key is a PEM private key file to sign with; empty: no signatures.
	Key string
	// Log receives progress lines; nil discards them.
	Log io.Writer
}

// Files in a release besides the archives.
const (
	ImageDir        = "image"
	Checksums       = "SHA256SUMS"
	KrewManifest    = "blade.yaml"
	ImageSBOM       = "image.cdx.json"
	Provenance      = "provenance.intoto.json"
	ProvenanceDSSE  = "provenance.intoto.jsonl"
	ImagePayload    = "image.payload.json"
	PublicKey       = "cosign.pub"
	SignatureSuffix = ".sig"
)

// ChartFile is the packaged chart's name for a chart version.
func ChartFile(chartVersion string) string { return "kubeblade-" + chartVersion + ".tgz" }

// ChartVersion is the chart's version for a release version: the same
// SemVer without the "v" (Helm chart versions are SemVer 2 strings; the
// image tag and git tag keep the "v").
func ChartVersion(version string) string { return strings.TrimPrefix(version, "v") }

// CheckVersion accepts v-prefixed SemVer 2 versions only.
func CheckVersion(version string) error {
	if !strings.HasPrefix(version, "v") {
		return fmt.Errorf("version %q: must start with v (the git tag, e.g. v0.2.0)", version)
	}
	if strings.Contains(version, "+") {
		return fmt.Errorf("version %q: no build metadata (+...): the version is also the image tag, where + is not allowed", version)
	}
	if _, err := semver.StrictNewVersion(strings.TrimPrefix(version, "v")); err != nil {
		return fmt.Errorf("version %q is not SemVer (vMAJOR.MINOR.PATCH[-PRERELEASE][+BUILD]): %w", version, err)
	}
	return nil
}

// Result lists what Make wrote.
type Result struct {
	// ImageDigest is the image index's digest.
	ImageDigest v1.Hash
	// Files are the released files, relative to Out, sorted (the image
	// layout counts as ImageDir).
	Files []string
}

// Make writes the release to o.Out, replacing what was there (except an
// image layout o.ImageLayout names there).
func Make(ctx context.Context, o Options) (*Result, error) {
	if err := CheckVersion(o.Version); err != nil {
		return nil, err
	}
	if o.Created.IsZero() {
		return nil, fmt.Errorf("release: no creation time (the Makefile passes the commit's)")
	}
	if o.ImageRepository == "" {
		o.ImageRepository = DefaultImageRepository
	}
	if o.DownloadURL == "" {
		o.DownloadURL = DefaultDownloadURL
	}
	if o.Builder == "" {
		o.Builder = "https://github.com/kubeblade/kubeblade/blob/main/Makefile#release"
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	// A bad key fails before anything is written.
	var signer signature.SignerVerifier
	if o.Key != "" {
		var err error
		if signer, err = LoadSigner(o.Key); err != nil {
			return nil, err
		}
	}
	tracked, err := gitFiles(o.Root)
	if err != nil {
		return nil, err
	}

	// Out: emptied, except for the image layout if it is the one to use.
	imgDir := filepath.Join(o.Out, ImageDir)
	keepImage := o.ImageLayout != "" && sameDir(o.ImageLayout, imgDir)
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, err
	}
	old, err := os.ReadDir(o.Out)
	if err != nil {
		return nil, err
	}
	for _, e := range old {
		if keepImage && e.Name() == ImageDir {
			continue
		}
		if err := os.RemoveAll(filepath.Join(o.Out, e.Name())); err != nil {
			return nil, err
		}
	}
	switch {
	case keepImage:
	case o.ImageLayout != "":
		if err := os.CopyFS(imgDir, os.DirFS(o.ImageLayout)); err != nil {
			return nil, fmt.Errorf("copy image layout: %w", err)
		}
	default:
		fmt.Fprintf(o.Log, "release: building the image\n")
		if _, err := image.Build(ctx, image.Options{Root: o.Root, Out: imgDir, Version: o.Version, LDFlags: o.LDFlags, Tags: o.Tags, Created: o.Created, Log: o.Log}); err != nil {
			return nil, err
		}
	}
	idxDigest, err := LayoutIndex(imgDir, o.Version)
	if err != nil {
		return nil, err
	}
	res := &Result{ImageDigest: idxDigest}
	write := func(name string, data []byte) error {
		res.Files = append(res.Files, name)
		return os.WriteFile(filepath.Join(o.Out, name), data, 0o644)
	}

	// The chart: version and appVersion from the release.
	cv := ChartVersion(o.Version)
	ch, err := loader.Load(filepath.Join(o.Root, render.ChartDir))
	if err != nil {
		return nil, err
	}
	ch.Metadata.Version = cv
	ch.Metadata.AppVersion = o.Version
	ch.StampModTimes(o.Created)
	chartPath, err := chartutil.Save(ch, o.Out)
	if err != nil {
		return nil, fmt.Errorf("package chart: %w", err)
	}
	if filepath.Base(chartPath) != ChartFile(cv) {
		return nil, fmt.Errorf("helm wrote %s, want %s", chartPath, ChartFile(cv))
	}
	res.Files = append(res.Files, ChartFile(cv))
	fmt.Fprintf(o.Log, "release: chart %s\n", ChartFile(cv))

	// The binaries, two builds at a time (the machine's cores are shared
	// with the rest of make test).
	bins := make([][]byte, len(Archives))
	work, err := os.MkdirTemp("", "kubeblade-release-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(2)
	for i, a := range Archives {
		g.Go(func() error {
			out := filepath.Join(work, fmt.Sprintf("%d", i), a.Binary)
			tags := strings.Trim(strings.Join([]string{o.Tags, a.Tags}, ","), ",")
			cmd := exec.CommandContext(gctx, "go", "build", "-trimpath", "-tags", tags,
				"-ldflags", strings.TrimSpace(o.LDFlags+" -s -w"), "-o", out, "./cmd/"+a.Binary)
			cmd.Dir = o.Root
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+a.OS, "GOARCH="+a.Arch, "GOFLAGS=")
			if b, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("go build %s for %s/%s: %w\n%s", a.Binary, a.OS, a.Arch, err, b)
			}
			b, err := os.ReadFile(out)
			bins[i] = b
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	license, err := os.ReadFile(filepath.Join(o.Root, "LICENSE"))
	if err != nil {
		return nil, err
	}
	sums := map[string]string{}
	for i, a := range Archives {
		tgz, err := tarGz([]entry{{name: a.Binary, data: bins[i], mode: 0o755}, {name: "LICENSE", data: license, mode: 0o644}}, o.Created)
		if err != nil {
			return nil, err
		}
		if err := write(a.FileName(o.Version), tgz); err != nil {
			return nil, err
		}
		sums[a.FileName(o.Version)] = sha256Hex(tgz)
		s, err := binarySBOM(a.Binary, a.OS+"/"+a.Arch, bins[i], o.Created)
		if err != nil {
			return nil, err
		}
		if err := write(sbomName(a.FileName(o.Version)), s); err != nil {
			return nil, err
		}
	}
	fmt.Fprintf(o.Log, "release: %d archives\n", len(Archives))

	krew, err := krewManifest(o.Version, o.DownloadURL, sums)
	if err != nil {
		return nil, err
	}
	if err := write(KrewManifest, krew); err != nil {
		return nil, err
	}

	// kubeblade-leds: the DKMS source (unpacked into /usr/src it is
	// kubeblade-leds-<version>, dkms.conf's PACKAGE_VERSION) and the Talos
	// extension's build context (the pkgs/extensions trees and the source).
	leds, err := treeEntries(o.Root, "kernel/kubeblade-leds", "")
	if err != nil {
		return nil, err
	}
	leds = trackedOnly(leds, "", "kernel/kubeblade-leds", tracked)
	dkmsPrefix := "kubeblade-leds-" + cv + "/"
	var dkms []entry
	for _, e := range leds {
		if e.name == "dkms.conf" {
			e.data = dkmsVersion.ReplaceAll(e.data, []byte(`PACKAGE_VERSION="`+cv+`"`))
		}
		e.name = dkmsPrefix + e.name
		dkms = append(dkms, e)
	}
	tgz, err := tarGz(dkms, o.Created)
	if err != nil {
		return nil, err
	}
	if err := write("kubeblade-leds-dkms-"+cv+".tar.gz", tgz); err != nil {
		return nil, err
	}
	talosPrefix := "kubeblade-leds-talos-" + cv + "/"
	talos, err := treeEntries(o.Root, "deploy/talos/kubeblade-leds", "")
	if err != nil {
		return nil, err
	}
	talos = trackedOnly(talos, "", "deploy/talos/kubeblade-leds", tracked)
	for i := range talos {
		talos[i].name = talosPrefix + "deploy/talos/kubeblade-leds/" + talos[i].name
	}
	for _, e := range leds {
		e.name = talosPrefix + "kernel/kubeblade-leds/" + e.name
		talos = append(talos, e)
	}
	if tgz, err = tarGz(talos, o.Created); err != nil {
		return nil, err
	}
	if err := write("kubeblade-leds-talos-"+cv+".tar.gz", tgz); err != nil {
		return nil, err
	}

	// The image's SBOM: each platform's binaries, read out of the layout.
	imgSBOM, err := imageSBOM(imgDir, o.ImageRepository, o.Version, idxDigest, o.Created)
	if err != nil {
		return nil, err
	}
	if err := write(ImageSBOM, imgSBOM); err != nil {
		return nil, err
	}

	// Checksums of every file so far, and the provenance of them and the image.
	sort.Strings(res.Files)
	var sumsFile bytes.Buffer
	subjects := []Subject{{Name: o.ImageRepository, Digest: map[string]string{idxDigest.Algorithm: idxDigest.Hex}}}
	for _, f := range res.Files {
		b, err := os.ReadFile(filepath.Join(o.Out, f))
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&sumsFile, "%s  %s\n", sha256Hex(b), f)
		subjects = append(subjects, Subject{Name: f, Digest: map[string]string{"sha256": sha256Hex(b)}})
	}
	if err := write(Checksums, sumsFile.Bytes()); err != nil {
		return nil, err
	}
	prov, err := provenance(subjects, o.Version, o.Commit, o.Builder, o.Created)
	if err != nil {
		return nil, err
	}
	if err := write(Provenance, prov); err != nil {
		return nil, err
	}

	if signer != nil {
		pub, err := PublicKeyPEM(signer)
		if err != nil {
			return nil, err
		}
		if err := write(PublicKey, pub); err != nil {
			return nil, err
		}
		payload, err := SimpleSigningPayload(o.ImageRepository, idxDigest.String())
		if err != nil {
			return nil, err
		}
		if err := write(ImagePayload, payload); err != nil {
			return nil, err
		}
		for name, data := range map[string][]byte{ImagePayload: payload, ChartFile(cv): nil, Checksums: sumsFile.Bytes()} {
			if data == nil {
				if data, err = os.ReadFile(filepath.Join(o.Out, name)); err != nil {
					return nil, err
				}
			}
			sig, err := SignBlob(signer, data)
			if err != nil {
				return nil, err
			}
			if err := write(name+SignatureSuffix, sig); err != nil {
				return nil, err
			}
		}
		env, err := SignDSSE(signer, prov)
		if err != nil {
			return nil, err
		}
		if err := write(ProvenanceDSSE, env); err != nil {
			return nil, err
		}
	}
	res.Files = append(res.Files, ImageDir)
	sort.Strings(res.Files)
	fmt.Fprintf(o.Log, "release: %s in %s (image %s)\n", o.Version, o.Out, idxDigest)
	return res, nil
}

var dkmsVersion = regexp.MustCompile(`PACKAGE_VERSION="[^"]*"`)

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func sameDir(a, b string) bool {
	aa, err1 := filepath.Abs(a)
	bb, err2 := filepath.Abs(b)
	return err1 == nil && err2 == nil && filepath.Clean(aa) == filepath.Clean(bb)
}

// gitFiles lists the files git tracks in root, as slash paths.
func gitFiles(root string) (map[string]bool, error) {
	cmd := exec.Command("git", "ls-files", "-z")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git ls-files: %w", err)
	}
	m := map[string]bool{}
	for _, f := range strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		m[f] = true
	}
	return m, nil
}

// LayoutIndex returns the digest of the image index in an OCI layout make
// image wrote, checking that it is tagged version.
func LayoutIndex(dir, version string) (v1.Hash, error) {
	lp, err := layout.FromPath(dir)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("image layout %s: %w", dir, err)
	}
	top, err := lp.ImageIndex()
	if err != nil {
		return v1.Hash{}, err
	}
	m, err := top.IndexManifest()
	if err != nil {
		return v1.Hash{}, err
	}
	if len(m.Manifests) != 1 {
		return v1.Hash{}, fmt.Errorf("image layout %s holds %d images, want 1", dir, len(m.Manifests))
	}
	if got := m.Manifests[0].Annotations["org.opencontainers.image.ref.name"]; got != version {
		return v1.Hash{}, fmt.Errorf("image layout %s is version %q, not %q: run make image with the same VERSION", dir, got, version)
	}
	return m.Manifests[0].Digest, nil
}

func imageSBOM(dir, repo, version string, digest v1.Hash, created time.Time) ([]byte, error) {
	var comps []cdx.Component
	for _, p := range image.Platforms {
		for _, b := range image.Binaries {
			data, _, err := image.File(dir, p, image.BinDir+"/"+b)
			if err != nil {
				return nil, err
			}
			c, err := binaryComponent(b, p.OS+"/"+p.Architecture, data)
			if err != nil {
				return nil, err
			}
			comps = append(comps, c)
		}
	}
	main := cdx.Component{
		BOMRef:     repo + "@" + digest.String(),
		Type:       cdx.ComponentTypeContainer,
		Name:       repo,
		Version:    version,
		PackageURL: "pkg:oci/" + repo[strings.LastIndex(repo, "/")+1:] + "@" + strings.Replace(digest.String(), ":", "%3A", 1) + "?repository_url=" + repo + "&tag=" + version,
		Hashes:     &[]cdx.Hash{{Algorithm: cdx.HashAlgoSHA256, Value: digest.Hex}},
	}
	return sbom(main, comps, created)
}

// krewPlugin is krew's plugin manifest (krew.googlecontainertools.github.com/v1alpha2,
// kubernetes-sigs/krew pkg/index/types.go), the fields kubeblade uses.
type krewPlugin struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Version          string         `json:"version"`
		Homepage         string         `json:"homepage"`
		ShortDescription string         `json:"shortDescription"`
		Description      string         `json:"description"`
		Platforms        []krewPlatform `json:"platforms"`
	} `json:"spec"`
}

type krewPlatform struct {
	Selector struct {
		MatchLabels map[string]string `json:"matchLabels"`
	} `json:"selector"`
	URI    string `json:"uri"`
	SHA256 string `json:"sha256"`
	Bin    string `json:"bin"`
	Files  []struct {
		From string `json:"from"`
		To   string `json:"to"`
	} `json:"files"`
}

func krewManifest(version, base string, sums map[string]string) ([]byte, error) {
	var p krewPlugin
	p.APIVersion = "krew.googlecontainertools.github.com/v1alpha2"
	p.Kind = "Plugin"
	p.Metadata.Name = "blade"
	p.Spec.Version = version
	p.Spec.Homepage = "https://github.com/kubeblade/kubeblade"
	p.Spec.ShortDescription = "Operate Compute Blades managed by kubeblade"
	p.Spec.Description = "kubectl blade is bladectl, kubeblade's command line: blade status, fan and LED\ncontrol, BladeConfigs and migration from compute-blade-agent.\n"
	for _, a := range Archives {
		if a.Binary != "bladectl" {
			continue
		}
		var pl krewPlatform
		pl.Selector.MatchLabels = map[string]string{"os": a.OS, "arch": a.Arch}
		pl.URI = base + "/" + version + "/" + a.FileName(version)
		pl.SHA256 = sums[a.FileName(version)]
		pl.Bin = "bladectl"
		pl.Files = append(pl.Files, struct {
			From string `json:"from"`
			To   string `json:"to"`
		}{"bladectl", "."}, struct {
			From string `json:"from"`
			To   string `json:"to"`
		}{"LICENSE", "."})
		p.Spec.Platforms = append(p.Spec.Platforms, pl)
	}
	return yaml.Marshal(p)
}
