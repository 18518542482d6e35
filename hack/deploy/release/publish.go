package release

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/sigstore/sigstore/pkg/signature"
	"helm.sh/helm/v4/pkg/registry"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/content/oci"
	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/credentials"
	"oras.land/oras-go/v2/registry/remote/errcode"
	"oras.land/oras-go/v2/registry/remote/retry"
)

// Publishing uses oras-go (the OCI client Helm's registry client is built
// on) for the image and its attachments, and Helm's registry client for
// the chart.

// The media types and annotation of cosign's signature, SBOM and
// attestation images (sigstore/cosign specs/SIGNATURE_SPEC.md,
// specs/ATTESTATION_SPEC.md), so that `cosign verify --key`,
// `cosign verify-attestation` and `cosign download sbom` read what publish
// pushes.
const (
	SimpleSigningMediaType = "application/vnd.dev.cosign.simplesigning.v1+json"
	DSSEMediaType          = "application/vnd.dsse.envelope.v1+json"
	CycloneDXMediaType     = "application/vnd.cyclonedx+json"
	SignatureAnnotation    = "dev.cosignproject.cosign/signature"
)

// PublishOptions say where to publish a release.
type PublishOptions struct {
	// Root is the repository (its git state decides whether a release
	// version may be published); Dist the release make release wrote.
	Root, Dist string
	// Version is the release's version; dist must hold it.
	Version string
	// Registry is host[:port][/path]: the image goes to Registry/kubeblade,
	// the chart to oci://Registry/charts/kubeblade.
	Registry string
	// Key signs the image and the chart for their place in Registry
	// (a signature names the repository); empty: unsigned.
	Key string
	// PlainHTTP talks HTTP to a registry that is not on loopback (on
	// loopback go-containerregistry and Helm use HTTP anyway).
	PlainHTTP bool
	// Log receives progress lines; nil discards them.
	Log io.Writer
}

// Published says where things went.
type Published struct {
	Image       string // repository:tag
	ImageDigest v1.Hash
	Chart       string // oci://... without the tag
	ChartDigest string
}

// IsDevVersion reports whether a version is a development build (a
// prerelease containing "dev"), which may be published from a dirty tree.
func IsDevVersion(version string) bool {
	_, pre, _ := strings.Cut(strings.TrimPrefix(version, "v"), "-")
	return strings.Contains(pre, "dev")
}

// Publish pushes the release in o.Dist. It checks everything it can before
// it pushes anything, pushes the image before what refers to it, and a tag
// that already holds other content than the release's stops it: what a
// failed run pushed is either this release's bytes, which the next run
// finds and keeps, or a signature, SBOM or attestation tag it rewrites.
func Publish(ctx context.Context, o PublishOptions) (*Published, error) {
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.Version == "" {
		return nil, fmt.Errorf("publish: no version (make publish VERSION=vX.Y.Z, the version make release wrote)")
	}
	if err := CheckVersion(o.Version); err != nil {
		return nil, err
	}
	if o.Registry == "" {
		return nil, fmt.Errorf("publish: no registry (make publish REGISTRY=host[:port]/path)")
	}
	if !IsDevVersion(o.Version) {
		dirty, err := gitDirty(o.Root)
		if err != nil {
			return nil, err
		}
		if dirty != "" {
			return nil, fmt.Errorf("publish: %s is a release version but the work tree has uncommitted changes:\n%s\ncommit or stash them (only -dev versions may be published from a dirty tree)", o.Version, dirty)
		}
	}
	imgDir := filepath.Join(o.Dist, ImageDir)
	idxDigest, err := LayoutIndex(imgDir, o.Version)
	if err != nil {
		return nil, err
	}
	src, err := oci.NewFromFS(ctx, os.DirFS(imgDir))
	if err != nil {
		return nil, fmt.Errorf("image layout %s: %w", imgDir, err)
	}
	cv := ChartVersion(o.Version)
	read := func(n string) ([]byte, error) {
		b, err := os.ReadFile(filepath.Join(o.Dist, n))
		if err != nil {
			return nil, fmt.Errorf("publish: %w (run make release VERSION=%s first)", err, o.Version)
		}
		return b, nil
	}
	chart, err := read(ChartFile(cv))
	if err != nil {
		return nil, err
	}
	sbomData, err := read(ImageSBOM)
	if err != nil {
		return nil, err
	}
	prov, err := read(Provenance)
	if err != nil {
		return nil, err
	}
	created, err := chartCreated(chart)
	if err != nil {
		return nil, err
	}
	var signer signature.SignerVerifier
	if o.Key != "" {
		if signer, err = LoadSigner(o.Key); err != nil {
			return nil, err
		}
	}
	base := strings.TrimSuffix(o.Registry, "/")
	img, err := Repository(base+"/kubeblade", o.PlainHTTP)
	if err != nil {
		return nil, err
	}
	charts, err := Repository(base+"/charts/kubeblade", o.PlainHTTP)
	if err != nil {
		return nil, err
	}
	host := img.Reference.Registry

	// What is there already: the registry answers, accepts the
	// credentials, and holds nothing else under these tags.
	imageThere := false
	if d, err := img.Resolve(ctx, o.Version); err == nil {
		if d.Digest.String() != idxDigest.String() {
			return nil, fmt.Errorf("publish: %s:%s is already published with different content (%s, this release's %s): a published version is never replaced; release a new version", img.Reference, o.Version, d.Digest, idxDigest)
		}
		imageThere = true
	} else if !errors.Is(err, errdef.ErrNotFound) {
		return nil, registryError(host, err)
	}
	chartThere := false
	if d, err := charts.Resolve(ctx, cv); err == nil {
		b, err := content.FetchAll(ctx, charts, d)
		if err != nil {
			return nil, registryError(host, err)
		}
		var m ocispec.Manifest
		if err := json.Unmarshal(b, &m); err != nil || len(m.Layers) == 0 {
			return nil, fmt.Errorf("publish: %s:%s exists (%s) but is not a chart", charts.Reference, cv, d.Digest)
		}
		if m.Layers[0].Digest.Encoded() != sha256Hex(chart) {
			return nil, fmt.Errorf("publish: %s:%s is already published with different content (chart %s, this release's sha256:%s): a published version is never replaced; release a new version", charts.Reference, cv, m.Layers[0].Digest, sha256Hex(chart))
		}
		chartThere = true
	} else if !errors.Is(err, errdef.ErrNotFound) {
		return nil, registryError(host, err)
	}

	res := &Published{Image: img.Reference.String() + ":" + o.Version, ImageDigest: idxDigest, Chart: "oci://" + charts.Reference.String()}
	if imageThere {
		fmt.Fprintf(o.Log, "publish: %s already holds %s\n", res.Image, idxDigest)
	} else {
		fmt.Fprintf(o.Log, "publish: pushing %s (%s)\n", res.Image, idxDigest)
		if _, err := oras.Copy(ctx, src, idxDigest.String(), img, o.Version, oras.DefaultCopyOptions); err != nil {
			return nil, registryError(host, err)
		}
	}
	if err := attach(ctx, img, idxDigest.String(), "sbom", CycloneDXMediaType, sbomData, nil, created); err != nil {
		return nil, err
	}
	if signer != nil {
		env, err := SignDSSE(signer, prov)
		if err != nil {
			return nil, err
		}
		if err := attach(ctx, img, idxDigest.String(), "att", DSSEMediaType, env, map[string]string{"predicateType": ProvenanceType}, created); err != nil {
			return nil, err
		}
		if err := sign(ctx, signer, img, idxDigest.String(), created); err != nil {
			return nil, err
		}
	}

	if chartThere {
		fmt.Fprintf(o.Log, "publish: %s:%s already holds this chart\n", res.Chart, cv)
	} else {
		copts := []registry.ClientOption{
			// Credentials from the Docker config only (Helm falls back to it):
			// the helm-specific file it would look at first does not exist.
			registry.ClientOptCredentialsFile(filepath.Join(os.TempDir(), "kubeblade-publish-no-helm-credentials.json")),
		}
		if charts.PlainHTTP {
			copts = append(copts, registry.ClientOptPlainHTTP())
		}
		rc, err := registry.NewClient(copts...)
		if err != nil {
			return nil, err
		}
		if _, err := rc.Push(chart, charts.Reference.String()+":"+cv, registry.PushOptCreationTime(created)); err != nil {
			return nil, registryError(host, err)
		}
		fmt.Fprintf(o.Log, "publish: pushed %s:%s\n", res.Chart, cv)
	}
	cd, err := charts.Resolve(ctx, cv)
	if err != nil {
		return nil, registryError(host, err)
	}
	res.ChartDigest = cd.Digest.String()
	if signer != nil {
		if err := sign(ctx, signer, charts, res.ChartDigest, created); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// Repository is a registry repository (host[:port]/path) to push to with
// the Docker config's credentials; plain HTTP when asked or on loopback.
func Repository(ref string, plainHTTP bool) (*remote.Repository, error) {
	repo, err := remote.NewRepository(ref)
	if err != nil {
		return nil, fmt.Errorf("publish: registry %q: %w", ref, err)
	}
	store, err := credentials.NewStoreFromDocker(credentials.StoreOptions{DetectDefaultNativeStore: true})
	if err != nil {
		return nil, fmt.Errorf("docker config: %w", err)
	}
	repo.Client = &auth.Client{Client: retry.DefaultClient, Cache: auth.NewCache(), Credential: credentials.Credential(store)}
	host := repo.Reference.Host()
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	ip := net.ParseIP(host)
	repo.PlainHTTP = plainHTTP || host == "localhost" || (ip != nil && ip.IsLoopback())
	return repo, nil
}

// registryError says in words what went wrong talking to a registry.
func registryError(reg string, err error) error {
	var resp *errcode.ErrorResponse
	if errors.As(err, &resp) && (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden) {
		return fmt.Errorf("publish: registry %s refused the credentials (%d): log in first (docker login, crane auth login or helm registry login write the Docker config file, $DOCKER_CONFIG/config.json or ~/.docker/config.json): %w", reg, resp.StatusCode, err)
	}
	if strings.Contains(err.Error(), "401") || strings.Contains(strings.ToLower(err.Error()), "unauthorized") {
		return fmt.Errorf("publish: registry %s refused the credentials: log in first (docker login, crane auth login or helm registry login write the Docker config file): %w", reg, err)
	}
	var nerr *net.OpError
	if errors.As(err, &nerr) {
		return fmt.Errorf("publish: registry %s is unreachable: %w", reg, err)
	}
	return fmt.Errorf("publish: registry %s: %w", reg, err)
}

// CosignTag is the tag cosign keeps the signature ("sig"), SBOM ("sbom")
// or attestations ("att") of the manifest with digest under:
// sha256-<hex>.<suffix>.
func CosignTag(digest, suffix string) string {
	return strings.Replace(digest, ":", "-", 1) + "." + suffix
}

// attach pushes data as the one layer of an image manifest under the
// cosign tag of digest. The manifest's creation time is the release's, so
// a second publish pushes the same manifest.
func attach(ctx context.Context, repo *remote.Repository, digest, suffix, mediaType string, data []byte, annotations map[string]string, created string) error {
	host := repo.Reference.Registry
	push := func(d ocispec.Descriptor, b []byte) error {
		ok, err := repo.Exists(ctx, d)
		if err != nil {
			return registryError(host, err)
		}
		if !ok {
			if err := repo.Push(ctx, d, bytes.NewReader(b)); err != nil {
				return registryError(host, err)
			}
		}
		return nil
	}
	layer := content.NewDescriptorFromBytes(mediaType, data)
	if err := push(layer, data); err != nil {
		return err
	}
	layer.Annotations = annotations
	cfgData := []byte("{}")
	cfg := content.NewDescriptorFromBytes(ocispec.MediaTypeImageConfig, cfgData)
	if err := push(cfg, cfgData); err != nil {
		return err
	}
	m, err := oras.PackManifest(ctx, repo, oras.PackManifestVersion1_0, "", oras.PackManifestOptions{
		Layers: []ocispec.Descriptor{layer}, ConfigDescriptor: &cfg,
		ManifestAnnotations: map[string]string{ocispec.AnnotationCreated: created},
	})
	if err != nil {
		return registryError(host, err)
	}
	if err := repo.Tag(ctx, m, CosignTag(digest, suffix)); err != nil {
		return registryError(host, err)
	}
	return nil
}

// sign pushes cosign's signature of digest in repo: its simple signing
// payload with the signature in an annotation.
func sign(ctx context.Context, s signature.Signer, repo *remote.Repository, digest, created string) error {
	payload, err := SimpleSigningPayload(repo.Reference.String(), digest)
	if err != nil {
		return err
	}
	sig, err := SignBlob(s, payload)
	if err != nil {
		return err
	}
	return attach(ctx, repo, digest, "sig", SimpleSigningMediaType, payload, map[string]string{SignatureAnnotation: string(sig)}, created)
}

// gitDirty lists the tracked files with uncommitted changes.
func gitDirty(root string) (string, error) {
	cmd := exec.Command("git", "status", "--porcelain", "--untracked-files=no")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git status: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}
