// Package benchenv is the set-up the benchmark programs under test/bench
// share: a local API server (envtest) with kubeblade's CRDs, a fast admin
// client for the harness, and Nodes created in parallel as fixtures.
package benchenv

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

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
	p, err := e.controlPlane()
	if err != nil {
		return Memory{}, Memory{}, err
	}
	if apiserver, err = readMemory(p.apiserver); err != nil {
		return Memory{}, Memory{}, err
	}
	etcd, err = readMemory(p.etcd)
	return apiserver, etcd, err
}

// ControlPlaneCPU is the CPU time (user and system) kube-apiserver and etcd
// have used since they started, from /proc/<pid>/stat.
func (e *Env) ControlPlaneCPU() (apiserver, etcd time.Duration, err error) {
	p, err := e.controlPlane()
	if err != nil {
		return 0, 0, err
	}
	if apiserver, err = ProcessCPU(p.apiserver); err != nil {
		return 0, 0, err
	}
	etcd, err = ProcessCPU(p.etcd)
	return apiserver, etcd, err
}

// EtcdDBSize reads etcd's database size from its metrics: the file's size
// (etcd_mvcc_db_total_size_in_bytes, which keeps the space of compacted
// revisions until a defragmentation) and the part in use
// (etcd_mvcc_db_total_size_in_use_in_bytes). Metric names:
// go.etcd.io/etcd/server/v3/storage/mvcc/metrics.go, v3.6.
func (e *Env) EtcdDBSize(ctx context.Context) (total, inUse int64, err error) {
	p, err := e.controlPlane()
	if err != nil {
		return 0, 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(p.etcdURL, "/")+"/metrics", nil)
	if err != nil {
		return 0, 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			continue
		}
		v, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "etcd_mvcc_db_total_size_in_bytes":
			total = int64(v)
		case "etcd_mvcc_db_total_size_in_use_in_bytes":
			inUse = int64(v)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, 0, err
	}
	if total == 0 {
		return 0, 0, fmt.Errorf("etcd at %s reports no etcd_mvcc_db_total_size_in_bytes", p.etcdURL)
	}
	return total, inUse, nil
}

type controlPlaneProcs struct {
	apiserver, etcd string // /proc/<pid>
	etcdURL         string
}

func (e *Env) controlPlane() (controlPlaneProcs, error) {
	var p controlPlaneProcs
	u, err := url.Parse(e.Config.Host)
	if err != nil {
		return p, err
	}
	apiArg := "--secure-port=" + u.Port()
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	cmdlines := map[string][]string{}
	for _, c := range procs {
		b, err := os.ReadFile(c)
		if err != nil || len(b) == 0 {
			continue
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		cmdlines[filepath.Dir(c)] = args
		if filepath.Base(args[0]) == "kube-apiserver" && slices.Contains(args, apiArg) {
			p.apiserver = filepath.Dir(c)
			for _, a := range args {
				if v, ok := strings.CutPrefix(a, "--etcd-servers="); ok {
					p.etcdURL = v
				}
			}
		}
	}
	if p.apiserver == "" || p.etcdURL == "" {
		return p, fmt.Errorf("no kube-apiserver process with %s", apiArg)
	}
	for dir, args := range cmdlines {
		if filepath.Base(args[0]) == "etcd" && slices.Contains(args, "--listen-client-urls="+p.etcdURL) {
			p.etcd = dir
			return p, nil
		}
	}
	return p, fmt.Errorf("no etcd process with --listen-client-urls=%s", p.etcdURL)
}

// ProcessCPU reads the user and system CPU time of the process whose /proc
// directory is procDir ("/proc/self" for the caller).
func ProcessCPU(procDir string) (time.Duration, error) {
	b, err := os.ReadFile(filepath.Join(procDir, "stat"))
	if err != nil {
		return 0, err
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / 100, nil // USER_HZ is 100 on Linux
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
