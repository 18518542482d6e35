// Package localcluster runs a whole kubeblade cluster on one machine from
// real processes: etcd and kube-apiserver (through envtest),
// kube-controller-manager and kube-scheduler, a fake kubelet for the blade
// Nodes, kubeblade-operator, and one kubeblade-agent per blade on the
// simulated backend. `make demo` and the end-to-end tests use it; nothing
// here is for production. Every server listens on 127.0.0.1 only.
package localcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/kubeblade/kubeblade/internal/fakekubelet"
	"github.com/kubeblade/kubeblade/internal/operator"
	"github.com/kubeblade/kubeblade/internal/testenv"
)

// Namespace is where the operator, its DaemonSets and the agents'
// ServiceAccount live (the chart's default).
const Namespace = "kubeblade-system"

// agentIdentity is the operator's view of who the agents are: its default
// ServiceAccount, in Namespace.
func agentIdentity() operator.Options {
	o := operator.DefaultOptions()
	o.Namespace = Namespace
	return o
}

// AgentAccessManifests grant agents their access and confine them, the
// BladeConfigs and the operator's ServiceAccount: RBAC and the admission
// policies, relative to the repository root. (The operator here runs with
// the cluster's admin kubeconfig, which its policies do not match; they
// are installed so that they are type-checked like the others.)
var AgentAccessManifests = []string{
	"config/rbac/agent/role.yaml",
	"config/rbac/agent/role_binding.yaml",
	"config/admission/agent-own-node.yaml",
	"config/admission/agent-images.yaml",
	"config/admission/operator-daemonsets.yaml",
	"config/admission/operator-nodes.yaml",
}

// FieldManager applies manifests.
const FieldManager = "kubeblade-localcluster"

// DefaultNodes are the blade Nodes when Options.Nodes is empty: make
// demo's three blades.
var DefaultNodes = []string{"blade-1", "blade-2", "blade-3"}

// Options configure Start.
type Options struct {
	// Dir holds the kubeconfig, logs and the blades' state; a new
	// temporary directory, removed by Stop, when empty.
	Dir string
	// BinDir holds kubeblade-agent and kubeblade-operator (default
	// <repo>/bin).
	BinDir string
	// K8sDir holds kube-apiserver, etcd, kube-controller-manager and
	// kube-scheduler (default: where testenv finds kube-apiserver).
	K8sDir string
	// Nodes are the blade Nodes (default blade-1, blade-2, blade-3).
	Nodes []string
	// Heartbeat is the fake kubelet's Node heartbeat (default 10 s).
	Heartbeat time.Duration
	Logger    *slog.Logger
}

// Cluster is a running local cluster.
type Cluster struct {
	Dir        string
	Kubeconfig string
	// K8sDir and BinDir are where the binaries come from.
	K8sDir, BinDir string
	Nodes          []string
	Config         *rest.Config
	Client         kubernetes.Interface
	// Ctrl is a controller-runtime client that knows kubeblade's types.
	Ctrl client.Client

	log         *slog.Logger
	env         *testenv.Env
	removeDir   bool
	stopKubelet context.CancelFunc
	kubeletDone chan error

	mu       sync.Mutex
	system   []*Process // controller-manager, scheduler
	operator []*Process
	agents   map[string]*Agent
}

// Start brings up the control plane, the controllers and the fake kubelet,
// creates the Nodes, the kubeblade-system namespace and the agents'
// ServiceAccount, and installs the CRDs. The operator and agents are
// started separately (StartOperator, StartAgent).
func Start(ctx context.Context, o Options) (c *Cluster, err error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if len(o.Nodes) == 0 {
		o.Nodes = slices.Clone(DefaultNodes)
	}
	if o.BinDir == "" {
		o.BinDir = filepath.Join(testenv.RepoRoot(), "bin")
	}
	if o.K8sDir == "" {
		if o.K8sDir, err = testenv.AssetsDir(); err != nil {
			return nil, err
		}
	}
	for _, b := range []string{"kube-controller-manager", "kube-scheduler"} {
		if _, err := os.Stat(filepath.Join(o.K8sDir, b)); err != nil {
			return nil, fmt.Errorf("%s not in %s: build it with hack/k8s-tools.sh kube-controller-manager kube-scheduler", b, o.K8sDir)
		}
	}
	c = &Cluster{Dir: o.Dir, K8sDir: o.K8sDir, BinDir: o.BinDir, Nodes: o.Nodes, log: o.Logger, agents: map[string]*Agent{}}
	if c.Dir == "" {
		// Short: unix socket paths under it must stay below 108 bytes.
		if c.Dir, err = os.MkdirTemp("", "kubeblade-"); err != nil {
			return nil, err
		}
		c.removeDir = true
	} else if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()

	start := time.Now()
	c.env, err = testenv.Start(testenv.Options{CRDDirs: []string{"config/crd/bases"}})
	if err != nil {
		return c, err
	}
	admin, err := c.env.Environment().AddUser(envtest.User{Name: "kubeblade-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return c, err
	}
	kc, err := admin.KubeConfig()
	if err != nil {
		return c, err
	}
	c.Kubeconfig = filepath.Join(c.Dir, "kubeconfig")
	if err := os.WriteFile(c.Kubeconfig, kc, 0o600); err != nil {
		return c, err
	}
	c.Config = rest.CopyConfig(admin.Config())
	c.Config.QPS, c.Config.Burst = 50, 100
	if c.Client, err = kubernetes.NewForConfig(c.Config); err != nil {
		return c, err
	}
	if c.Ctrl, err = client.New(c.Config, client.Options{Scheme: operator.Scheme()}); err != nil {
		return c, err
	}
	c.log.Info("control plane up", "apiserver", c.Config.Host, "took", time.Since(start).Round(time.Millisecond))

	if err := c.startControllers(); err != nil {
		return c, err
	}
	kctx, cancel := context.WithCancel(context.Background())
	c.stopKubelet, c.kubeletDone = cancel, make(chan error, 1)
	ready := make(chan struct{})
	go func() {
		c.kubeletDone <- fakekubelet.Run(kctx, fakekubelet.Options{
			Client: c.Client, Nodes: c.Nodes, Heartbeat: o.Heartbeat, Logger: c.log.With("component", "fakekubelet"),
		}, ready)
	}()
	select {
	case <-ready:
	case err := <-c.kubeletDone:
		c.kubeletDone <- err
		return c, fmt.Errorf("fake kubelet: %w", err)
	case <-ctx.Done():
		return c, ctx.Err()
	}
	if err := c.createNamespace(ctx); err != nil {
		return c, err
	}
	// The agents' ClusterRole and the admission policy that narrows it to
	// their own Node, exactly as installed in a cluster: agents here run
	// under them (see StartAgent), so a missing permission fails the demo
	// and the end-to-end tests, not a user's first install.
	for _, f := range AgentAccessManifests {
		if err := c.ApplyFile(ctx, filepath.Join(testenv.RepoRoot(), f)); err != nil {
			return c, err
		}
	}
	c.log.Info("cluster up", "nodes", c.Nodes, "took", time.Since(start).Round(time.Millisecond))
	return c, nil
}

// startControllers runs kube-controller-manager (DaemonSets, garbage
// collection, node lifecycle, service accounts) and kube-scheduler (which
// places DaemonSet pods). Neither serves anything: --secure-port=0.
func (c *Cluster) startControllers() error {
	api := c.env.Environment().ControlPlane.APIServer
	caFile := filepath.Join(c.Dir, "ca.crt")
	if err := os.WriteFile(caFile, c.Config.CAData, 0o644); err != nil {
		return err
	}
	logs := filepath.Join(c.Dir, "logs")
	kcm, err := startProcess("kube-controller-manager", logs, "", filepath.Join(c.K8sDir, "kube-controller-manager"), []string{
		"--kubeconfig=" + c.Kubeconfig,
		"--secure-port=0",
		"--leader-elect=false",
		"--cluster-name=kubeblade-local",
		// The service-account token controller signs with the API
		// server's key and publishes its CA (envtest generates both).
		"--service-account-private-key-file=" + filepath.Join(api.CertDir, "sa-signer.key"),
		"--root-ca-file=" + caFile,
		"--use-service-account-credentials=false",
		"--controllers=*",
		"--v=1",
	}, nil)
	if err != nil {
		return err
	}
	kcm.anyExit = true
	c.system = append(c.system, kcm)
	sched, err := startProcess("kube-scheduler", logs, "", filepath.Join(c.K8sDir, "kube-scheduler"), []string{
		"--kubeconfig=" + c.Kubeconfig,
		"--secure-port=0",
		"--leader-elect=false",
		"--v=1",
	}, nil)
	if err != nil {
		return err
	}
	sched.anyExit = true
	c.system = append(c.system, sched)
	return nil
}

func (c *Cluster) createNamespace(ctx context.Context) error {
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace, Labels: map[string]string{
			"pod-security.kubernetes.io/enforce": "privileged",
		}}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: agentIdentity().AgentServiceAccount, Namespace: Namespace}},
	}
	for _, o := range objs {
		if err := c.Ctrl.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}

// ApplyFile server-side applies every object in a YAML file.
func (c *Cluster) ApplyFile(ctx context.Context, path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return c.Apply(ctx, raw)
}

// Apply server-side applies every object in a multi-document YAML stream.
func (c *Cluster) Apply(ctx context.Context, manifests []byte) error {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifests), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return err
		}
		if len(u.Object) == 0 {
			continue
		}
		if err := c.Ctrl.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
}

// Stop stops the agents, the operator, the controllers, the fake kubelet
// and the control plane, in that order, and removes a temporary Dir.
func (c *Cluster) Stop() error {
	var errs []error
	c.mu.Lock()
	agents := make([]*Agent, 0, len(c.agents))
	for _, a := range c.agents {
		agents = append(agents, a)
	}
	ops := c.operator
	c.mu.Unlock()
	// Agents stop in parallel: each leaves its blade safe first.
	agentErrs := make(chan error, len(agents))
	for _, a := range agents {
		go func() { agentErrs <- a.Stop(10 * time.Second) }()
	}
	for range agents {
		if err := <-agentErrs; err != nil {
			errs = append(errs, err)
		}
	}
	for _, p := range ops {
		if err := p.Stop(10 * time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	for i := len(c.system) - 1; i >= 0; i-- {
		if err := c.system[i].Stop(10 * time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	if c.stopKubelet != nil {
		c.stopKubelet()
		if err := <-c.kubeletDone; err != nil {
			errs = append(errs, fmt.Errorf("fake kubelet: %w", err))
		}
	}
	if c.env != nil {
		if err := c.env.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("control plane: %w", err))
		}
	}
	if c.removeDir {
		if err := os.RemoveAll(c.Dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Logs returns the tail of every process log, for a failing test.
func (c *Cluster) Logs(lines int) string {
	var b strings.Builder
	entries, _ := filepath.Glob(filepath.Join(c.Dir, "logs", "*.log"))
	for _, e := range entries {
		raw, err := os.ReadFile(e)
		if err != nil {
			continue
		}
		ls := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
		if len(ls) > lines {
			ls = ls[len(ls)-lines:]
		}
		fmt.Fprintf(&b, "==> %s <==\n%s\n", e, strings.Join(ls, "\n"))
	}
	return b.String()
}
