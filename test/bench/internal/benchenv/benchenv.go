// Package benchenv is the set-up the benchmark programs under test/bench
// share: a local API server (envtest) with kubeblade's CRDs, a fast admin
// client for the harness, and Nodes created in parallel as fixtures.
package benchenv

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kubeblade/kubeblade/internal/operator"
	"github.com/kubeblade/kubeblade/internal/testenv"
)

// Options tune Start.
type Options struct {
	// APIServerFlags are set on kube-apiserver, name to value.
	APIServerFlags map[string]string
	// AdminQPS and AdminBurst limit the harness's own client: high, so
	// fixtures and polls are not what a benchmark measures.
	AdminQPS   float32
	AdminBurst int
}

// Env is a running control plane and the harness's client to it.
type Env struct {
	// Config reaches the API server as an admin with client-go's default
	// rate limits; copy it for the clients under test.
	Config *rest.Config
	// AdminConfig is Config with Options.AdminQPS and AdminBurst.
	AdminConfig *rest.Config
	// Admin is a client on AdminConfig with the operator's scheme.
	Admin client.Client
	env   *envtest.Environment
}

// Start silences controller-runtime's logger, starts kube-apiserver and etcd
// on loopback with the CRDs of config/crd/bases, and builds the admin
// client. Stop it when done.
func Start(o Options) (*Env, error) {
	ctrllog.SetLogger(logr.Discard())
	dir, err := testenv.AssetsDir()
	if err != nil {
		return nil, err
	}
	e := &envtest.Environment{
		BinaryAssetsDirectory: dir,
		CRDDirectoryPaths:     []string{filepath.Join(testenv.RepoRoot(), "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	if len(o.APIServerFlags) > 0 {
		args := e.ControlPlane.GetAPIServer().Configure()
		for name, value := range o.APIServerFlags {
			args.Set(name, value)
		}
	}
	cfg, err := e.Start()
	if err != nil {
		return nil, fmt.Errorf("starting envtest with binaries from %s: %w", dir, err)
	}
	adminCfg := rest.CopyConfig(cfg)
	adminCfg.QPS, adminCfg.Burst = o.AdminQPS, o.AdminBurst
	admin, err := client.New(adminCfg, client.Options{Scheme: operator.Scheme()})
	if err != nil {
		_ = e.Stop()
		return nil, err
	}
	return &Env{Config: cfg, AdminConfig: adminCfg, Admin: admin, env: e}, nil
}

// Stop stops the control plane.
func (e *Env) Stop() error { return e.env.Stop() }

// NodeName is the name of fixture Node i.
func NodeName(i int) string { return fmt.Sprintf("blade-%04d", i) }

// CreateNodes creates nodes with workers requests in flight. It tries every
// Node and returns the first error.
func CreateNodes(ctx context.Context, c client.Client, workers int, nodes []*corev1.Node) error {
	ch := make(chan *corev1.Node)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range ch {
				if err := c.Create(ctx, n); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for _, n := range nodes {
		ch <- n
	}
	close(ch)
	wg.Wait()
	return first
}
