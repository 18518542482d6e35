package fluxtest

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
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"helm.sh/helm/v4/pkg/registry"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/content/oci"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeblade/kubeblade/internal/testwait"
	"github.com/kubeblade/kubeblade/test/kubelet/internal/nodeenv"
)

// gitHTTPBackend is Debian's git smart-HTTP server (package git).
const gitHTTPBackend = "/usr/lib/git-core/git-http-backend"

// fluxNamespace is where Flux runs (RUNTIME_NAMESPACE), as `flux install`
// puts it.
const fluxNamespace = "flux-system"

// fluxEnv is what the suite adds to the node: a test CA, a registry and a
// git server on loopback, and the three Flux controllers.
type fluxEnv struct {
	dir string
	// caFile is the test CA every client here trusts (PEM).
	caFile string
	// registryHost is host:port of the registry (HTTPS).
	registryHost string
	git          *httptest.Server
	// gitRoot holds the bare repositories git http-backend serves.
	gitRoot string
	client  client.Client
}

// startFlux starts the registry, the git server and the controllers, with
// Flux's CRDs applied first.
func startFlux(ctx context.Context, logf func(string, ...any)) (*fluxEnv, error) {
	dir, err := os.MkdirTemp("", "kubeblade-flux-e2e-")
	if err != nil {
		return nil, err
	}
	e := &fluxEnv{dir: dir, gitRoot: filepath.Join(dir, "git")}
	serverCert, err := e.writePKI()
	if err != nil {
		return e, err
	}
	e.client, err = client.New(node.Config, client.Options{})
	if err != nil {
		return e, err
	}
	if err := e.startRegistry(ctx); err != nil {
		return e, err
	}
	logf("registry on %s", e.registryHost)
	if err := e.startGit(serverCert); err != nil {
		return e, err
	}
	logf("git http-backend on %s", e.git.URL)
	if err := e.applyCRDs(ctx); err != nil {
		return e, err
	}
	if err := e.startControllers(ctx); err != nil {
		return e, err
	}
	logf("Flux controllers running")
	return e, nil
}

func (e *fluxEnv) stop() {
	if e == nil {
		return
	}
	if e.git != nil {
		e.git.Close()
	}
	_ = os.RemoveAll(e.dir)
}

// exited is node.Exited: the registry and the controllers are node
// components.
func (e *fluxEnv) exited() error { return node.Exited() }

// writePKI writes a CA and a serving certificate for 127.0.0.1 signed by
// it; the CA goes to every client (the controllers through SSL_CERT_FILE,
// which Go's crypto/x509 reads on Linux; containerd through hosts.toml).
func (e *fluxEnv) writePKI() (tls.Certificate, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kubeblade flux e2e CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, err
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return tls.Certificate{}, err
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	e.caFile = filepath.Join(e.dir, "ca.crt")
	for f, b := range map[string][]byte{e.caFile: caPEM, e.path("tls.crt"): certPEM, e.path("tls.key"): keyPEM} {
		if err := os.WriteFile(f, b, 0o600); err != nil {
			return tls.Certificate{}, err
		}
	}
	return tls.X509KeyPair(certPEM, keyPEM)
}

func (e *fluxEnv) path(name string) string { return filepath.Join(e.dir, name) }

// httpClient trusts the test CA.
func (e *fluxEnv) httpClient() *http.Client {
	pool := x509.NewCertPool()
	b, _ := os.ReadFile(e.caFile)
	pool.AppendCertsFromPEM(b)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool}
	return &http.Client{Transport: tr, Timeout: 2 * time.Minute}
}

// freePort returns a loopback port nothing listens on now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startRegistry runs the Distribution registry over HTTPS and tells the
// node's containerd to trust it (containerd's docs/hosts.md).
func (e *fluxEnv) startRegistry(ctx context.Context) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	e.registryHost = fmt.Sprintf("127.0.0.1:%d", port)
	cfg := fmt.Sprintf(`version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: %s
http:
  addr: %s
  tls:
    certificate: %s
    key: %s
`, e.path("registry"), e.registryHost, e.path("tls.crt"), e.path("tls.key"))
	if err := os.WriteFile(e.path("registry.yaml"), []byte(cfg), 0o600); err != nil {
		return err
	}
	hostsDir := filepath.Join(nodeenv.RegistryHostsDir, e.registryHost)
	if err := os.MkdirAll(hostsDir, 0o755); err != nil {
		return err
	}
	hosts := fmt.Sprintf("server = \"https://%[1]s\"\n\n[host.\"https://%[1]s\"]\n  capabilities = [\"pull\", \"resolve\"]\n  ca = %[2]q\n", e.registryHost, e.caFile)
	if err := os.WriteFile(filepath.Join(hostsDir, "hosts.toml"), []byte(hosts), 0o644); err != nil {
		return err
	}
	hc := e.httpClient()
	return node.StartComponent(ctx, "registry", os.Getenv(EnvRegistry), []string{"serve", e.path("registry.yaml")}, nil, time.Minute,
		func(ctx context.Context) (bool, string) {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+e.registryHost+"/v2/", nil)
			resp, err := hc.Do(req)
			if err != nil {
				return false, err.Error()
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK, resp.Status
		})
}

// startGit serves the bare repositories under gitRoot with git
// http-backend (git's smart HTTP protocol, read-only) over HTTPS.
func (e *fluxEnv) startGit(cert tls.Certificate) error {
	if err := os.MkdirAll(e.gitRoot, 0o755); err != nil {
		return err
	}
	e.git = httptest.NewUnstartedServer(&cgi.Handler{
		Path: gitHTTPBackend,
		Env:  []string{"GIT_PROJECT_ROOT=" + e.gitRoot, "GIT_HTTP_EXPORT_ALL=1"},
	})
	e.git.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	e.git.StartTLS()
	return nil
}

// applyCRDs applies Flux's CRDs (hack/flux.sh's crds/) and waits until
// they are Established.
func (e *fluxEnv) applyCRDs(ctx context.Context) error {
	files, err := filepath.Glob(filepath.Join(os.Getenv(EnvFlux), "crds", "*.yaml"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("no Flux CRDs in %s/crds: %v", os.Getenv(EnvFlux), err)
	}
	var names []string
	for _, f := range files {
		objs, err := decodeFile(f)
		if err != nil {
			return err
		}
		for _, o := range objs {
			if err := apply(ctx, e.client, o); err != nil {
				return fmt.Errorf("%s: %w", f, err)
			}
			names = append(names, o.GetName())
		}
	}
	return waitEstablished(ctx, e.client, names...)
}

// startControllers runs source-, kustomize- and helm-controller as
// processes with the admin kubeconfig, as `flux install` runs them as
// Deployments in flux-system.
func (e *fluxEnv) startControllers(ctx context.Context) error {
	if err := apply(ctx, e.client, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": fluxNamespace},
	}}); err != nil {
		return err
	}
	storagePort, err := freePort()
	if err != nil {
		return err
	}
	storage := fmt.Sprintf("127.0.0.1:%d", storagePort)
	if err := os.MkdirAll(e.path("artifacts"), 0o755); err != nil {
		return err
	}
	envs := []string{"KUBECONFIG=" + node.Kubeconfig, "RUNTIME_NAMESPACE=" + fluxNamespace, "SSL_CERT_FILE=" + e.caFile}
	for _, c := range []struct {
		name string
		args []string
	}{
		{"source-controller", []string{"--storage-path=" + e.path("artifacts"), "--storage-addr=" + storage, "--storage-adv-addr=" + storage}},
		{"kustomize-controller", nil},
		{"helm-controller", nil},
	} {
		metrics, err := freePort()
		if err != nil {
			return err
		}
		health, err := freePort()
		if err != nil {
			return err
		}
		args := append([]string{
			fmt.Sprintf("--metrics-addr=127.0.0.1:%d", metrics), fmt.Sprintf("--health-addr=127.0.0.1:%d", health),
			"--log-level=debug", "--log-encoding=console",
			// Dependencies are retried every 30 s by default; the suite
			// does not need to wait that long.
			"--requeue-dependency=5s",
		}, c.args...)
		readyz := fmt.Sprintf("http://127.0.0.1:%d/readyz", health)
		err = node.StartComponent(ctx, c.name, filepath.Join(os.Getenv(EnvFlux), c.name), args, envs, 2*time.Minute,
			func(ctx context.Context) (bool, string) {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, readyz, nil)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					return false, err.Error()
				}
				resp.Body.Close()
				return resp.StatusCode == http.StatusOK, resp.Status
			})
		if err != nil {
			return err
		}
	}
	return nil
}

// decodeFile reads the objects of a multi-document YAML file.
func decodeFile(path string) ([]*unstructured.Unstructured, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return decode(b)
}

func decode(b []byte) ([]*unstructured.Unstructured, error) {
	d := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	var out []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := d.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, err
		}
		if len(m) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
}

// apply server-side applies o as the suite's field manager.
func apply(ctx context.Context, c client.Client, o *unstructured.Unstructured) error {
	o = o.DeepCopy()
	o.SetResourceVersion("")
	o.SetManagedFields(nil)
	return c.Patch(ctx, o, client.Apply, client.FieldOwner("kubeblade-flux-e2e"), client.ForceOwnership) //nolint:staticcheck // unstructured objects have no apply configuration
}

// waitEstablished waits until the named CRDs are Established.
func waitEstablished(ctx context.Context, c client.Client, names ...string) error {
	for _, n := range names {
		err := testwait.Poll(ctx, time.Minute, func(ctx context.Context) (bool, string) {
			crd := &unstructured.Unstructured{}
			crd.SetAPIVersion("apiextensions.k8s.io/v1")
			crd.SetKind("CustomResourceDefinition")
			if err := c.Get(ctx, client.ObjectKey{Name: n}, crd); err != nil {
				return false, err.Error()
			}
			st, _ := condition(crd, "Established")
			return st == "True", "CRD " + n + " not Established"
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// condition returns status, reason and message of a condition.
func condition(o *unstructured.Unstructured, typ string) (status string, rm string) {
	conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == typ {
			return fmt.Sprint(m["status"]), fmt.Sprintf("%v: %v", m["reason"], m["message"])
		}
	}
	return "", "no " + typ + " condition"
}

// git runs git in dir.
func git(dir string, args ...string) error {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=e2e", "GIT_AUTHOR_EMAIL=e2e@example.com",
		"GIT_COMMITTER_NAME=e2e", "GIT_COMMITTER_EMAIL=e2e@example.com", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

// repo is a working copy pushed to a bare repository git http-backend
// serves as <git URL>/<name>.git.
type repo struct {
	work, bare, url string
}

func (e *fluxEnv) newRepo(name string) (*repo, error) {
	r := &repo{work: e.path("work-" + name), bare: filepath.Join(e.gitRoot, name+".git"), url: e.git.URL + "/" + name + ".git"}
	if err := git(e.dir, "init", "-q", "--bare", "-b", "main", r.bare); err != nil {
		return nil, err
	}
	if err := git(e.dir, "init", "-q", "-b", "main", r.work); err != nil {
		return nil, err
	}
	return r, git(r.work, "remote", "add", "origin", r.bare)
}

// commit commits everything in the working copy, tags it when tag is set,
// and pushes.
func (r *repo) commit(msg, tag string) error {
	if err := git(r.work, "add", "-A"); err != nil {
		return err
	}
	if err := git(r.work, "commit", "-q", "-m", msg); err != nil {
		return err
	}
	if tag != "" {
		if err := git(r.work, "tag", tag); err != nil {
			return err
		}
	}
	return git(r.work, "push", "-q", "--tags", "origin", "main")
}

// head is the commit the working copy is at.
func (r *repo) head() (string, error) {
	cmd := exec.Command("git", "rev-parse", "HEAD")
	cmd.Dir = r.work
	out, err := cmd.Output()
	return strings.TrimSpace(string(out)), err
}

// pushChart packages ch (the Helm SDK, as `helm package`) and pushes it to
// oci://<registry>/kubeblade/charts/kubeblade:<version> (as `helm push`).
func (e *fluxEnv) pushChart(ch *chartv2.Chart) error {
	out := e.path("charts")
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	tgz, err := chartutil.Save(ch, out)
	if err != nil {
		return err
	}
	data, err := os.ReadFile(tgz)
	if err != nil {
		return err
	}
	rc, err := registry.NewClient(registry.ClientOptHTTPClient(e.httpClient()), registry.ClientOptWriter(io.Discard))
	if err != nil {
		return err
	}
	_, err = rc.Push(data, fmt.Sprintf("%s/kubeblade/charts/kubeblade:%s", e.registryHost, ch.Metadata.Version))
	return err
}

// loadChart loads deploy/helm/kubeblade.
func loadChart() (*chartv2.Chart, error) {
	return loader.Load(filepath.Join(repoRoot, "deploy", "helm", "kubeblade"))
}

// pushImage pushes the OCI layout's multi-arch index as
// <registry>/kubeblade/kubeblade:<tag> (as `crane push dist/image` or
// `oras cp` does), with an annotation naming the tag, so that each tag is an
// index of its own. It uses oras-go, which the Helm SDK's registry client
// is built on.
func (e *fluxEnv) pushImage(c context.Context, layoutDir, tag string) error {
	src, err := oci.NewFromFS(c, os.DirFS(layoutDir))
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
		if b, err = content.FetchAll(c, src, idx.Manifests[0]); err != nil {
			return err
		}
		if err := json.Unmarshal(b, &idx); err != nil {
			return err
		}
	}
	dst, err := remote.NewRepository(e.registryHost + "/kubeblade/kubeblade")
	if err != nil {
		return err
	}
	dst.Client = &auth.Client{Client: e.httpClient()}
	for _, m := range idx.Manifests {
		if err := oras.CopyGraph(c, src, dst, m, oras.DefaultCopyGraphOptions); err != nil {
			return fmt.Errorf("copying %s: %w", m.Digest, err)
		}
	}
	idx.SchemaVersion, idx.MediaType = 2, ocispec.MediaTypeImageIndex
	idx.Annotations = map[string]string{ocispec.AnnotationVersion: tag}
	if b, err = json.Marshal(idx); err != nil {
		return err
	}
	return dst.PushReference(c, content.NewDescriptorFromBytes(ocispec.MediaTypeImageIndex, b), bytes.NewReader(b), tag)
}
