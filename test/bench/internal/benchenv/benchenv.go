// Package benchenv is the set-up the benchmark programs under test/bench
// share: a local API server (envtest) with kubeblade's CRDs, a fast admin
// client for the harness, and Nodes created in parallel as fixtures.
package benchenv

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
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

// Memory is a process's resident memory, in KiB.
type Memory struct {
	// RSS is resident now; Peak is the most it has been (VmHWM).
	RSS, Peak int64
}

// MiB converts KiB to MiB.
func MiB(kib int64) float64 { return float64(kib) / 1024 }

// SelfMemory is the calling process's Memory.
func SelfMemory() (Memory, error) { return readMemory("/proc/self") }

// ControlPlaneMemory reads the resident memory of this Env's kube-apiserver
// and etcd from /proc: the processes whose command lines name the API
// server's port and etcd's client URL.
func (e *Env) ControlPlaneMemory() (apiserver, etcd Memory, err error) {
	u, err := url.Parse(e.Config.Host)
	if err != nil {
		return Memory{}, Memory{}, err
	}
	apiArg := "--secure-port=" + u.Port()
	var etcdArg string
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	cmdlines := map[string][]string{}
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || len(b) == 0 {
			continue
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		cmdlines[filepath.Dir(p)] = args
		if filepath.Base(args[0]) == "kube-apiserver" && slices.Contains(args, apiArg) {
			if apiserver, err = readMemory(filepath.Dir(p)); err != nil {
				return Memory{}, Memory{}, err
			}
			for _, a := range args {
				if v, ok := strings.CutPrefix(a, "--etcd-servers="); ok {
					etcdArg = "--listen-client-urls=" + v
				}
			}
		}
	}
	if apiserver.RSS == 0 || etcdArg == "" {
		return Memory{}, Memory{}, fmt.Errorf("no kube-apiserver process with %s", apiArg)
	}
	for dir, args := range cmdlines {
		if filepath.Base(args[0]) == "etcd" && slices.Contains(args, etcdArg) {
			etcd, err = readMemory(dir)
			return apiserver, etcd, err
		}
	}
	return apiserver, Memory{}, fmt.Errorf("no etcd process with %s", etcdArg)
}

func readMemory(procDir string) (Memory, error) {
	b, err := os.ReadFile(filepath.Join(procDir, "status"))
	if err != nil {
		return Memory{}, err
	}
	var m Memory
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		v, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			m.RSS = v
		case "VmHWM:":
			m.Peak = v
		}
	}
	return m, nil
}
