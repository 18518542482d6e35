// Package testenv starts a real kube-apiserver and etcd for tests, through
// controller-runtime's envtest, using the binaries `make test` builds from
// source (hack/k8s-tools.sh). A test package either calls Main from
// TestMain, which starts one control plane before the tests, or holds a
// Suite, which starts it when the first test needs it; every test gets its
// own objects. Every test that uses the control plane calls Need (or
// Suite.Need) first: without the binaries it skips with the reason, or
// fails under KUBEBLADE_TEST_REQUIRED=1 (see package testreq), so no
// package reports ok having silently run nothing.
package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/kubeblade/kubeblade/internal/testreq"
)

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
	// FreshEachRun gives each run of `go test -count=N` a fresh control
	// plane (and a fresh setup), for suites whose tests use fixed object
	// names: a second run would find them there already. A run is new when
	// a test that already finished calls Suite.Need again.
	FreshEachRun bool
}

// RepoRoot returns the repository root, found from this source file; in a
// -trimpath build (make demo's local cluster), whose file names are
// module-relative, from the working directory instead.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	wd, _ := os.Getwd()
	return repoRoot(file, wd)
}

// modulePath is the main module's path, as go.mod declares it.
const modulePath = "github.com/kubeblade/kubeblade"

// repoRoot is RepoRoot's logic: two levels above file when that is a real
// path; else the nearest directory at or above wd whose go.mod declares
// modulePath; else wd.
func repoRoot(file, wd string) string {
	if filepath.IsAbs(file) {
		return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil {
			for _, line := range strings.Split(string(b), "\n") {
				if strings.TrimSpace(line) == "module "+modulePath {
					return dir
				}
			}
		}
		if filepath.Dir(dir) == dir {
			return wd
		}
	}
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
	var certs string
	if o.Restartable {
		// envtest regenerates certificates for a randomly allocated
		// directory on every start; a fixed one keeps them.
		if certs, err = os.MkdirTemp("", "kubeblade-apiserver-"); err != nil {
			return nil, err
		}
	}
	var (
		e   *envtest.Environment
		cfg *rest.Config
	)
	for attempt := 1; ; attempt++ {
		e = &envtest.Environment{
			BinaryAssetsDirectory: dir,
			CRDDirectoryPaths:     crds,
			ErrorIfCRDPathMissing: len(crds) > 0,
		}
		if os.Getenv("KUBEBUILDER_CONTROLPLANE_START_TIMEOUT") == "" {
			// envtest gives each component 20 s; a 2-core machine
			// running builds beside the tests needs more.
			e.ControlPlaneStartTimeout = 2 * time.Minute
		}
		if o.Restartable {
			e.ControlPlane.APIServer = &envtest.APIServer{CertDir: certs}
			// StopAPIServer models a crash: a short grace, then SIGKILL.
			// Environment.Start gives every component the control plane's
			// stop timeout (20 s by default), whatever the component's own
			// says (controller-runtime v0.25.2, pkg/envtest/server.go), and
			// kube-apiserver's graceful shutdown takes all of it. etcd,
			// stopped only with the suite, gets the same grace.
			if os.Getenv("KUBEBUILDER_CONTROLPLANE_STOP_TIMEOUT") == "" {
				e.ControlPlaneStopTimeout = 2 * time.Second
			}
		}
		cfg, err = e.Start()
		// envtest waits a fixed 5 s for the default namespace once
		// kube-apiserver is up, which a loaded machine can miss with
		// nothing wrong, and leaves the control plane running; a fresh
		// one gets another try.
		if err == nil || attempt == 3 || !strings.Contains(err.Error(), "default namespace didn't register") {
			break
		}
		if stopErr := e.Stop(); stopErr != nil {
			return nil, fmt.Errorf("stopping envtest to retry after %v: %w", err, stopErr)
		}
	}
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

// Suite is one test package's control plane: started by the first test
// that needs it, shared by the package's tests, stopped by Run after them.
// Tests that need no control plane never start it.
type Suite struct {
	opts  Options
	setup func(context.Context, *Env) error

	// mu guards everything below; Need holds it while it starts the
	// control plane, so concurrent tests wait for one start.
	mu      sync.Mutex
	started bool
	env     *Env
	err     error
	ctx     context.Context
	cancel  context.CancelFunc
	skipped int
	// finished are the tests (by full name) that called Need and ended,
	// in this run of the tests (Options.FreshEachRun).
	finished map[string]bool
}

// NewSuite returns a Suite that starts a control plane with o and then
// calls setup (if not nil) once, for example to create namespaces or start
// a manager. setup's context ends when Run stops the control plane.
func NewSuite(o Options, setup func(ctx context.Context, e *Env) error) *Suite {
	return &Suite{opts: o, setup: setup}
}

// Need returns the running control plane, starting it on first use.
// Without kube-apiserver and etcd it ends the test through
// testreq.Unavailable: a visible skip in a plain `go test`, a failure under
// KUBEBLADE_TEST_REQUIRED=1. A control plane that fails to start, or a
// failing setup, fails every test that needs it.
func (s *Suite) Need(t testing.TB) *Env {
	t.Helper()
	s.mu.Lock()
	if s.opts.FreshEachRun {
		name := t.Name()
		if s.finished[name] {
			// This test ran before: go test -count runs them all again.
			s.stopLocked()
			s.started, s.env, s.err, s.finished = false, nil, nil, nil
		}
		if s.finished == nil {
			s.finished = map[string]bool{}
		}
		t.Cleanup(func() {
			s.mu.Lock()
			s.finished[name] = true
			s.mu.Unlock()
		})
	}
	if !s.started {
		s.started = true
		s.start()
	}
	env, err := s.env, s.err
	if errors.Is(err, ErrNoAssets) && !testreq.Required() {
		s.skipped++
	}
	s.mu.Unlock()
	if errors.Is(err, ErrNoAssets) {
		testreq.Unavailable(t, "envtest: %v", err)
		return nil // Unavailable ended the test
	}
	if err != nil {
		t.Fatalf("envtest: %v", err)
	}
	return env
}

func (s *Suite) start() {
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.env, s.err = Start(s.opts)
	if s.err != nil || s.setup == nil {
		return
	}
	if err := s.setup(s.ctx, s.env); err != nil {
		s.err = fmt.Errorf("setting up the suite: %w", err)
	}
}

// Run is a TestMain body: it runs the tests, then ends setup's context
// and stops the control plane if a test started it.
func (s *Suite) Run(m interface{ Run() int }) int {
	code := m.Run()
	s.Stop()
	return code
}

// Stop ends setup's context and stops the control plane, if a test started
// it, and says how many tests skipped for want of one. Run calls it; a
// package with more than one Suite runs m.Run itself and calls Stop on each.
func (s *Suite) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.skipped > 0 {
		fmt.Fprintf(os.Stderr, "testenv: %d test(s) skipped: %v\n", s.skipped, ErrNoAssets)
	}
	s.stopLocked()
}

func (s *Suite) stopLocked() {
	if s.cancel != nil {
		s.cancel()
	}
	if s.env != nil {
		if err := s.env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping envtest:", err)
		}
	}
}

// mainSuite is the suite of Main, for Need. A test binary is one package,
// so one per process is one per package.
var mainSuite *Suite

// Main is a TestMain body: it starts the control plane, calls started,
// runs the tests and stops it. Without binaries it still runs the tests:
// those that call Need skip (or fail when required); a test that uses the
// control plane without calling Need fails loudly on the nil it finds.
func Main(m interface{ Run() int }, o Options, started func(*Env)) int {
	mainSuite = NewSuite(o, func(_ context.Context, e *Env) error {
		started(e)
		return nil
	})
	mainSuite.started = true
	mainSuite.start()
	if mainSuite.err != nil && !errors.Is(mainSuite.err, ErrNoAssets) {
		fmt.Fprintln(os.Stderr, "envtest:", mainSuite.err)
		mainSuite.Stop()
		return 1
	}
	return mainSuite.Run(m)
}

// Need is Suite.Need for the control plane of Main.
func Need(t testing.TB) *Env {
	t.Helper()
	if mainSuite == nil {
		t.Fatal("testenv.Need: the package's TestMain does not call testenv.Main")
	}
	return mainSuite.Need(t)
}
