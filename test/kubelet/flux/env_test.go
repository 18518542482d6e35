package fluxtest

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeblade/kubeblade/internal/testwait"
	"github.com/kubeblade/kubeblade/test/kubelet/internal/noderegistry"
)

// gitHTTPBackend is Debian's git smart-HTTP server (package git).
const gitHTTPBackend = "/usr/lib/git-core/git-http-backend"

// fluxNamespace is where Flux runs (RUNTIME_NAMESPACE), as `flux install`
// puts it.
const fluxNamespace = "flux-system"

// fluxEnv is what the suite adds to the node: a test CA, a registry and a
// git server on loopback, and the three Flux controllers.
type fluxEnv struct {
	dir      string
	registry *noderegistry.Registry
	// caFile is the test CA every client here trusts (PEM): the
	// registry's, whose serving certificate the git server uses too.
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
	e.client, err = client.New(node.Config, client.Options{})
	if err != nil {
		return e, err
	}
	e.registry, err = noderegistry.Start(ctx, node, os.Getenv(EnvRegistry), e.path("registry"), "127.0.0.1")
	if err != nil {
		return e, err
	}
	e.caFile, e.registryHost = e.registry.CAFile, e.registry.Host
	logf("registry on %s", e.registryHost)
	if err := e.startGit(e.registry.ServerCert); err != nil {
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

func (e *fluxEnv) path(name string) string { return filepath.Join(e.dir, name) }

// freePort returns a loopback port nothing listens on now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
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

// loadChart loads deploy/helm/kubeblade.
func loadChart() (*chartv2.Chart, error) {
	return loader.Load(filepath.Join(repoRoot, "deploy", "helm", "kubeblade"))
}
