// Package noderegistry runs the CNCF Distribution registry over HTTPS, on
// loopback or on the node's bridge address, as a component of the real-kubelet rig (package nodeenv), for
// the suites that install kubeblade from a registry: its configuration,
// environment and readiness check are internal/testregistry's, its
// certificate is signed by a test CA that every client trusts, and the
// node's containerd pulls from it through a hosts.toml under
// nodeenv.RegistryHostsDir (containerd's docs/hosts.md). It also pushes
// images (an OCI layout, with oras-go) and charts (the Helm SDK) into it.
package noderegistry

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"helm.sh/helm/v4/pkg/registry"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/content/oci"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"

	"github.com/kubeblade/kubeblade/internal/testregistry"
	"github.com/kubeblade/kubeblade/test/kubelet/internal/nodeenv"
)

// Registry is a running registry.
type Registry struct {
	// Host is ip:port (HTTPS).
	Host string
	// CAFile is the test CA (PEM) that signed the registry's certificate:
	// every client trusts it (Go programs through SSL_CERT_FILE, which
	// crypto/x509 reads on Linux; containerd through hosts.toml).
	CAFile string
	// ServerCert is the registry's certificate and key (for its IP,
	// 127.0.0.1 and localhost), for other servers of the suite.
	ServerCert tls.Certificate

	dir string
}

// Start writes the test CA and the registry's certificate into dir, runs
// the registry binary bin as the node component "registry" on a free port
// of ip (127.0.0.1, or an address of the node such as nodeenv.Gateway, which
// is not loopback: there clients use HTTPS as they do with a registry on
// the LAN) with its storage under dir, tells containerd to trust it, and
// returns once it answers /v2/.
func Start(ctx context.Context, node *nodeenv.Node, bin, dir, ip string) (*Registry, error) {
	r := &Registry{dir: dir}
	addr := net.ParseIP(ip)
	if addr == nil {
		return nil, fmt.Errorf("registry address %q is not an IP address", ip)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := r.writePKI(addr); err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return nil, err
	}
	host := l.Addr().String()
	l.Close()
	r.Host = host
	cfg := testregistry.Config{Root: r.path("registry"), Addr: host, TLSCert: r.path("tls.crt"), TLSKey: r.path("tls.key")}
	if err := os.WriteFile(r.path("registry.yaml"), []byte(cfg.YAML()), 0o600); err != nil {
		return nil, err
	}
	if err := r.Mirror(host); err != nil {
		return nil, err
	}
	hc := r.HTTPClient()
	err = node.StartComponent(ctx, "registry", bin, []string{"serve", r.path("registry.yaml")}, testregistry.ProcessEnv, time.Minute,
		func(ctx context.Context) (bool, string) { return testregistry.Answers(ctx, hc, "https://"+host) })
	if err != nil {
		return nil, err
	}
	return r, nil
}

func (r *Registry) path(name string) string { return filepath.Join(r.dir, name) }

// Mirror makes containerd pull images named registry (a host such as
// ghcr.io, or this registry's own host:port) from this registry, with the
// same repository paths, trusting the test CA: a hosts.toml whose server
// is this registry, so the named registry itself is never asked
// (containerd's docs/hosts.md, "server" and "ca").
func (r *Registry) Mirror(registry string) error {
	dir := filepath.Join(nodeenv.RegistryHostsDir, registry)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	hosts := fmt.Sprintf("server = \"https://%[1]s\"\n\n[host.\"https://%[1]s\"]\n  capabilities = [\"pull\", \"resolve\"]\n  ca = %[2]q\n", r.Host, r.CAFile)
	return os.WriteFile(filepath.Join(dir, "hosts.toml"), []byte(hosts), 0o644)
}

// writePKI writes a CA and a serving certificate for ip, 127.0.0.1 and
// localhost signed by it.
func (r *Registry) writePKI(ip net.IP) error {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kubeblade e2e registry CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: ip.String()},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IPAddresses: []net.IP{ip, net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	r.CAFile = r.path("ca.crt")
	for f, b := range map[string][]byte{r.CAFile: caPEM, r.path("tls.crt"): certPEM, r.path("tls.key"): keyPEM} {
		if err := os.WriteFile(f, b, 0o600); err != nil {
			return err
		}
	}
	r.ServerCert, err = tls.X509KeyPair(certPEM, keyPEM)
	return err
}

// HTTPClient trusts the test CA.
func (r *Registry) HTTPClient() *http.Client {
	pool := x509.NewCertPool()
	b, _ := os.ReadFile(r.CAFile)
	pool.AppendCertsFromPEM(b)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool}
	return &http.Client{Transport: tr, Timeout: 2 * time.Minute}
}

// PushChart packages ch (the Helm SDK, as `helm package`) and pushes it to
// oci://<registry>/<repo>:<version> (as `helm push`).
func (r *Registry) PushChart(ch *chartv2.Chart, repo string) error {
	out, err := os.MkdirTemp(r.dir, "chart-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(out)
	tgz, err := chartutil.Save(ch, out)
	if err != nil {
		return err
	}
	data, err := os.ReadFile(tgz)
	if err != nil {
		return err
	}
	rc, err := registry.NewClient(registry.ClientOptHTTPClient(r.HTTPClient()), registry.ClientOptWriter(io.Discard))
	if err != nil {
		return err
	}
	_, err = rc.Push(data, fmt.Sprintf("%s/%s:%s", r.Host, repo, ch.Metadata.Version))
	return err
}

// PushImage pushes the OCI layout's multi-arch index as
// <registry>/<repo>:<tag> for each tag (as `crane push dist/image` or `oras
// cp` does), with an annotation naming the tag, so that each tag is an
// index of its own. It uses oras-go, which the Helm SDK's registry client
// is built on.
func (r *Registry) PushImage(ctx context.Context, layoutDir, repo string, tags ...string) error {
	src, err := oci.NewFromFS(ctx, os.DirFS(layoutDir))
	if err != nil {
		return err
	}
	b, err := os.ReadFile(filepath.Join(layoutDir, "index.json"))
	if err != nil {
		return err
	}
	var idx ocispec.Index
	if err := json.Unmarshal(b, &idx); err != nil {
		return err
	}
	// `make image` writes an index.json whose one entry is the multi-arch
	// index; an index.json listing the platforms' manifests is one too.
	if len(idx.Manifests) == 1 && idx.Manifests[0].MediaType == ocispec.MediaTypeImageIndex {
		if b, err = content.FetchAll(ctx, src, idx.Manifests[0]); err != nil {
			return err
		}
		if err := json.Unmarshal(b, &idx); err != nil {
			return err
		}
	}
	dst, err := remote.NewRepository(r.Host + "/" + repo)
	if err != nil {
		return err
	}
	dst.Client = &auth.Client{Client: r.HTTPClient()}
	for _, m := range idx.Manifests {
		if err := oras.CopyGraph(ctx, src, dst, m, oras.DefaultCopyGraphOptions); err != nil {
			return fmt.Errorf("copying %s: %w", m.Digest, err)
		}
	}
	idx.SchemaVersion, idx.MediaType = 2, ocispec.MediaTypeImageIndex
	for _, tag := range tags {
		idx.Annotations = map[string]string{ocispec.AnnotationVersion: tag}
		if b, err = json.Marshal(idx); err != nil {
			return err
		}
		if err := dst.PushReference(ctx, content.NewDescriptorFromBytes(ocispec.MediaTypeImageIndex, b), bytes.NewReader(b), tag); err != nil {
			return err
		}
	}
	return nil
}

// LayoutTag is the tag `make image` gave the layout's image (its
// org.opencontainers.image.ref.name annotation in index.json).
func LayoutTag(layoutDir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(layoutDir, "index.json"))
	if err != nil {
		return "", err
	}
	var idx ocispec.Index
	if err := json.Unmarshal(b, &idx); err != nil {
		return "", err
	}
	for _, m := range idx.Manifests {
		if tag := m.Annotations[ocispec.AnnotationRefName]; tag != "" {
			return tag, nil
		}
	}
	return "", fmt.Errorf("%s/index.json names no tag (%s)", layoutDir, ocispec.AnnotationRefName)
}
