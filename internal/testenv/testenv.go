// Package testenv starts a real kube-apiserver and etcd for tests, through
// controller-runtime's envtest, using the binaries `make test` builds from
// source (hack/k8s-tools.sh). Suites call Start once in TestMain and give
// each test its own objects.
package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// RequireEnv, when set to 1, turns missing control-plane binaries into a
// failure instead of a skip. `make test` and CI set it, so a broken harness
// can never pass silently.
const RequireEnv = "ENVTEST_REQUIRED"

// ErrNoAssets means the control-plane binaries were not found.
var ErrNoAssets = errors.New("kube-apiserver and etcd not found: run `make test` (or `make envtest-assets`) to build them")

// Env is a running control plane.
type Env struct {
	Config *rest.Config
	env    *envtest.Environment
}

// Options tune Start.
type Options struct {
	// CRDDirs are directories of CRD manifests to install, relative to the
	// repository root.
	CRDDirs []string
	// Restartable keeps the API server's certificates in a fixed directory
	// so StopAPIServer/StartAPIServer bring it back on the same address
	// with the same credentials (outage tests).
	Restartable bool
}

// RepoRoot returns the repository root, found from this source file.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// AssetsDir returns the directory holding kube-apiserver and etcd:
// KUBEBUILDER_ASSETS if set, else the newest build hack/k8s-tools.sh cached
// under $XDG_CACHE_HOME/kubeblade/k8s (default ~/.cache/kubeblade/k8s).
func AssetsDir() (string, error) {
	if d := os.Getenv("KUBEBUILDER_ASSETS"); d != "" {
		return d, nil
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache")
	}
	matches, _ := filepath.Glob(filepath.Join(cache, "kubeblade", "k8s", "*", "kube-apiserver"))
	sort.Strings(matches)
	for i := len(matches) - 1; i >= 0; i-- {
		d := filepath.Dir(matches[i])
		if _, err := os.Stat(filepath.Join(d, "etcd")); err == nil {
			return d, nil
		}
	}
	return "", ErrNoAssets
}

// Start starts kube-apiserver and etcd on loopback.
func Start(o Options) (*Env, error) {
	dir, err := AssetsDir()
	if err != nil {
		return nil, err
	}
	var crds []string
	for _, d := range o.CRDDirs {
		crds = append(crds, filepath.Join(RepoRoot(), d))
	}
	e := &envtest.Environment{
		BinaryAssetsDirectory: dir,
		CRDDirectoryPaths:     crds,
		ErrorIfCRDPathMissing: len(crds) > 0,
	}
	if o.Restartable {
		certs, err := os.MkdirTemp("", "kubeblade-apiserver-")
		if err != nil {
			return nil, err
		}
		// envtest regenerates certificates for a randomly allocated
		// directory on every start; a fixed one keeps them.
		// StopAPIServer models a crash: a short grace, then SIGKILL.
		e.ControlPlane.APIServer = &envtest.APIServer{CertDir: certs, StopTimeout: 2 * time.Second}
	}
	cfg, err := e.Start()
	if err != nil {
		return nil, fmt.Errorf("starting envtest with binaries from %s: %w", dir, err)
	}
	return &Env{Config: cfg, env: e}, nil
}

// StopAPIServer stops kube-apiserver, leaving etcd running. A server that
// does not finish its graceful shutdown in time is killed, which is what
// outage tests want anyway.
func (e *Env) StopAPIServer() error {
	err := e.env.ControlPlane.APIServer.Stop()
	if err != nil && strings.Contains(err.Error(), "timeout waiting for process") {
		return nil
	}
	return err
}

// StartAPIServer starts a stopped kube-apiserver again (Options.Restartable).
func (e *Env) StartAPIServer() error { return e.env.ControlPlane.APIServer.Start() }

// Stop stops the control plane.
func (e *Env) Stop() error { return e.env.Stop() }

// Environment exposes the underlying envtest environment (for users,
// control plane restarts and the like).
func (e *Env) Environment() *envtest.Environment { return e.env }

// Main is a TestMain body: it starts the control plane, runs the tests and
// stops it. Without binaries it skips the package, unless RequireEnv is set.
func Main(m interface{ Run() int }, o Options, started func(*Env)) int {
	env, err := Start(o)
	if errors.Is(err, ErrNoAssets) && os.Getenv(RequireEnv) != "1" {
		fmt.Fprintln(os.Stderr, "SKIP envtest suite:", err)
		return 0
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "envtest:", err)
		return 1
	}
	started(env)
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping envtest:", err)
	}
	return code
}
