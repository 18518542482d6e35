package release

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"context"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/sigstore/sigstore/pkg/signature"
	"helm.sh/helm/v4/pkg/registry"
)

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
	idxDigest, err := LayoutIndex(filepath.Join(o.Dist, ImageDir), o.Version)
	if err != nil {
		return nil, err
	}
	lp, err := layout.FromPath(filepath.Join(o.Dist, ImageDir))
	if err != nil {
		return nil, err
	}
	top, err := lp.ImageIndex()
	if err != nil {
		return nil, err
	}
	idx, err := top.ImageIndex(idxDigest)
	if err != nil {
		return nil, err
	}
	cv := ChartVersion(o.Version)
	chart, err := os.ReadFile(filepath.Join(o.Dist, ChartFile(cv)))
	if err != nil {
		return nil, fmt.Errorf("publish: %w (run make release VERSION=%s first)", err, o.Version)
	}
	read := func(n string) ([]byte, error) {
		b, err := os.ReadFile(filepath.Join(o.Dist, n))
		if err != nil {
			return nil, fmt.Errorf("publish: %w (run make release VERSION=%s first)", err, o.Version)
		}
		return b, nil
	}
	sbomData, err := read(ImageSBOM)
	if err != nil {
		return nil, err
	}
	prov, err := read(Provenance)
	if err != nil {
		return nil, err
	}
	var signer signature.SignerVerifier
	if o.Key != "" {
		if signer, err = LoadSigner(o.Key); err != nil {
			return nil, err
		}
	}
	var nameOpts []name.Option
	if o.PlainHTTP {
		nameOpts = append(nameOpts, name.Insecure)
	}
	base := strings.TrimSuffix(o.Registry, "/")
	tag, err := name.NewTag(base+"/kubeblade:"+o.Version, nameOpts...)
	if err != nil {
		return nil, fmt.Errorf("publish: registry %q: %w", o.Registry, err)
	}
	chartRepo, err := name.NewRepository(base+"/charts/kubeblade", nameOpts...)
	if err != nil {
		return nil, fmt.Errorf("publish: registry %q: %w", o.Registry, err)
	}
	ropts := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)}

	// What is there already: the registry answers, accepts the
	// credentials, and holds nothing else under these tags.
	imageThere, err := existing(tag, idxDigest, ropts)
	if err != nil {
		return nil, err
	}
	chartTag := chartRepo.Tag(cv)
	chartThere := false
	if d, err := remote.Head(chartTag, ropts...); err == nil {
		m, err := remote.Image(chartTag, ropts...)
		if err != nil {
			return nil, registryError(chartTag.Context().RegistryStr(), err)
		}
		layers, err := m.Layers()
		if err != nil || len(layers) == 0 {
			return nil, fmt.Errorf("publish: %s exists (%s) but is not a chart: %v", chartTag, d.Digest, err)
		}
		ld, err := layers[0].Digest()
		if err != nil {
			return nil, err
		}
		if ld.Hex != sha256Hex(chart) {
			return nil, fmt.Errorf("publish: %s is already published with different content (chart layer %s, this release's %s): a published version is never replaced; release a new version", chartTag, ld, "sha256:"+sha256Hex(chart))
		}
		chartThere = true
	} else if !notFound(err) {
		return nil, registryError(chartTag.Context().RegistryStr(), err)
	}

	res := &Published{Image: tag.String(), ImageDigest: idxDigest, Chart: "oci://" + chartRepo.String()}
	if imageThere {
		fmt.Fprintf(o.Log, "publish: %s already holds %s\n", tag, idxDigest)
	} else {
		fmt.Fprintf(o.Log, "publish: pushing %s (%s)\n", tag, idxDigest)
		if err := remote.WriteIndex(tag, idx, ropts...); err != nil {
			return nil, registryError(tag.RegistryStr(), err)
		}
	}
	imgRef := tag.Context().Digest(idxDigest.String())
	if err := attach(imgRef, "sbom", CycloneDXMediaType, sbomData, nil, ropts); err != nil {
		return nil, err
	}
	if signer != nil {
		env, err := SignDSSE(signer, prov)
		if err != nil {
			return nil, err
		}
		if err := attach(imgRef, "att", DSSEMediaType, env, map[string]string{"predicateType": ProvenanceType}, ropts); err != nil {
			return nil, err
		}
		if err := sign(signer, imgRef, ropts); err != nil {
			return nil, err
		}
	}

	if chartThere {
		fmt.Fprintf(o.Log, "publish: %s already holds this chart\n", chartTag)
	} else {
		copts := []registry.ClientOption{
			// Credentials from the Docker config only (Helm falls back to it):
			// the helm-specific file it would look at first does not exist.
			registry.ClientOptCredentialsFile(filepath.Join(os.TempDir(), "kubeblade-publish-no-helm-credentials.json")),
		}
		if o.PlainHTTP || tag.Scheme() == "http" {
			copts = append(copts, registry.ClientOptPlainHTTP())
		}
		rc, err := registry.NewClient(copts...)
		if err != nil {
			return nil, err
		}
		created, err := chartCreated(chart)
		if err != nil {
			return nil, err
		}
		if _, err := rc.Push(chart, strings.TrimPrefix(chartTag.String(), "index.docker.io/"), registry.PushOptCreationTime(created)); err != nil {
			return nil, registryError(chartTag.RegistryStr(), err)
		}
		fmt.Fprintf(o.Log, "publish: pushed %s\n", chartTag)
	}
	cd, err := remote.Head(chartTag, ropts...)
	if err != nil {
		return nil, registryError(chartTag.RegistryStr(), err)
	}
	res.ChartDigest = cd.Digest.String()
	if signer != nil {
		if err := sign(signer, chartRepo.Digest(cd.Digest.String()), ropts); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// existing reports whether tag holds want, failing when it holds anything
// else or the registry cannot be used.
func existing(tag name.Tag, want v1.Hash, ropts []remote.Option) (bool, error) {
	d, err := remote.Head(tag, ropts...)
	if err == nil {
		if d.Digest != want {
			return false, fmt.Errorf("publish: %s is already published with different content (%s, this release's %s): a published version is never replaced; release a new version", tag, d.Digest, want)
		}
		return true, nil
	}
	if notFound(err) {
		return false, nil
	}
	return false, registryError(tag.RegistryStr(), err)
}

func notFound(err error) bool {
	var terr *transport.Error
	return errors.As(err, &terr) && terr.StatusCode == http.StatusNotFound
}

// registryError says in words what went wrong talking to a registry.
func registryError(reg string, err error) error {
	var terr *transport.Error
	if errors.As(err, &terr) && (terr.StatusCode == http.StatusUnauthorized || terr.StatusCode == http.StatusForbidden) {
		return fmt.Errorf("publish: registry %s refused the credentials (%d): log in first (docker login, crane auth login or helm registry login write the Docker config file, $DOCKER_CONFIG/config.json or ~/.docker/config.json): %w", reg, terr.StatusCode, err)
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

// cosignTag is the tag cosign keeps an image's signature ("sig"), SBOM
// ("sbom") or attestations ("att") under: sha256-<hex>.<suffix>.
func cosignTag(ref name.Digest, suffix string) (name.Tag, error) {
	h, err := v1.NewHash(ref.DigestStr())
	if err != nil {
		return name.Tag{}, err
	}
	return ref.Context().Tag(h.Algorithm + "-" + h.Hex + "." + suffix), nil
}

// attach pushes data as the one layer of an image under ref's cosign tag.
func attach(ref name.Digest, suffix string, mediaType types.MediaType, data []byte, annotations map[string]string, ropts []remote.Option) error {
	t, err := cosignTag(ref, suffix)
	if err != nil {
		return err
	}
	img, err := mutate.Append(mutate.MediaType(mutate.ConfigMediaType(empty.Image, types.OCIConfigJSON), types.OCIManifestSchema1),
		mutate.Addendum{Layer: static.NewLayer(data, mediaType), Annotations: annotations})
	if err != nil {
		return err
	}
	if err := remote.Write(t, img, ropts...); err != nil {
		return registryError(t.RegistryStr(), err)
	}
	return nil
}

// sign pushes cosign's signature of ref: its simple signing payload with
// the signature in an annotation.
func sign(s signature.Signer, ref name.Digest, ropts []remote.Option) error {
	payload, err := SimpleSigningPayload(ref.Context().String(), ref.DigestStr())
	if err != nil {
		return err
	}
	sig, err := SignBlob(s, payload)
	if err != nil {
		return err
	}
	return attach(ref, "sig", SimpleSigningMediaType, payload, map[string]string{SignatureAnnotation: string(sig)}, ropts)
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
