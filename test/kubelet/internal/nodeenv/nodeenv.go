// Package nodeenv runs a real single-node Kubernetes cluster on this
// machine for the real-kubelet suite: etcd, kube-apiserver,
// kube-controller-manager and kube-scheduler, containerd with Debian's runc,
// the CNI bridge plugin and a kubelet, all from binaries built from their Go
// modules (hack/k8s-tools.sh, hack/node-tools.sh). It needs root.
//
// Everything the node changes on the host is recorded before it is changed
// (a ledger in StateDir) and undone by Cleanup, which also runs at the start
// of the next run if an earlier one was killed before it could clean up.
// The settings that this machine kind needs (cgroup v1, no
// CAP_SYS_RESOURCE, no kube-proxy, no registry) are the ones
// docs/testing.md describes; each is explained where it is set.
package nodeenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubeblade/kubeblade/internal/testwait"
)

// Assets are the binaries and images the node runs.
type Assets struct {
	// K8sDir holds etcd, kube-apiserver, kube-controller-manager,
	// kube-scheduler and kubectl (hack/k8s-tools.sh).
	K8sDir string
	// NodeDir holds kubelet, containerd, containerd-shim-runc-v2, ctr,
	// cni/ and pause.tar (hack/node-tools.sh).
	NodeDir string
}

func (a Assets) k8s(name string) string  { return filepath.Join(a.K8sDir, name) }
func (a Assets) node(name string) string { return filepath.Join(a.NodeDir, name) }

// controlPlane are the control-plane binaries; envtest runs the same
// cached files elsewhere on the machine.
func (a Assets) controlPlane() []string {
	var out []string
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		out = append(out, a.k8s(b))
	}
	return out
}

// nodeBinaries are the binaries only the node runs.
func (a Assets) nodeBinaries() []string {
	var out []string
	for _, b := range []string{"kubelet", "containerd", "containerd-shim-runc-v2", "ctr"} {
		out = append(out, a.node(b))
	}
	return out
}

// Preflight lists why a node cannot run here: not root, missing binaries,
// missing kernel features, taken ports, an existing Kubernetes node. An
// empty list means it can.
func Preflight(a Assets) []string {
	var out []string
	if os.Geteuid() != 0 {
		out = append(out, "not root: the kubelet, containerd and runc need it")
	}
	for _, b := range append(append(a.controlPlane(), a.nodeBinaries()...), a.k8s("kubectl"), a.node("pause.tar")) {
		if _, err := os.Stat(b); err != nil {
			out = append(out, fmt.Sprintf("%s missing (hack/k8s-tools.sh and hack/node-tools.sh build it)", b))
		}
	}
	for _, b := range []string{"runc", "iptables", "ip"} {
		if _, err := exec.LookPath(b); err != nil {
			out = append(out, b+" not installed (hack/node-tools.sh installs Debian's runc and iptables)")
		}
	}
	if fs, err := os.ReadFile("/proc/filesystems"); err != nil || !strings.Contains(string(fs), "\toverlay\n") {
		out = append(out, "the kernel has no overlay filesystem (containerd's snapshotter)")
	}
	for _, c := range []string{"cpu", "cpuacct", "cpuset", "memory", "pids"} {
		if !exists("/sys/fs/cgroup/"+c) && !exists("/sys/fs/cgroup/cgroup.controllers") {
			out = append(out, "cgroup controller "+c+" is not mounted")
		}
	}
	if os.Geteuid() == 0 {
		if err := run("iptables", "-t", "nat", "-S", "OUTPUT"); err != nil {
			out = append(out, "iptables nat table unusable: "+err.Error())
		}
	}
	out = append(out, PortConflicts()...)
	out = append(out, HostConflicts()...)
	return out
}

// PortConflicts names the fixed ports that are taken, and by whom.
func PortConflicts() []string {
	var out []string
	for _, p := range FixedPorts {
		ln, err := net.Listen("tcp", ":"+strconv.Itoa(p))
		if err != nil {
			out = append(out, fmt.Sprintf("port %d is taken%s: the real node's components need it", p, portOwner(p)))
			continue
		}
		ln.Close()
	}
	return out
}

// Options configure Start.
type Options struct {
	Assets Assets
	// Logf reports progress.
	Logf func(format string, args ...any)
}

// Node is a running single-node cluster.
type Node struct {
	Assets Assets
	// Kubeconfig is an admin kubeconfig (system:masters).
	Kubeconfig string
	Config     *rest.Config
	Client     kubernetes.Interface
	// LogDir holds every component's log; PodLogDir the pods' logs.
	LogDir, PodLogDir string
	// KubeletRoot is the kubelet's root directory (pod volumes).
	KubeletRoot string
	// AuditLog is kube-apiserver's audit log (JSON lines, AuditPolicy):
	// every request of the kubelet and of kubeblade's service accounts.
	AuditLog string

	ledger  *ledger
	procs   []*process
	logf    func(string, ...any)
	ctrSock string
}

// Paths inside StateDir and RunDir.
var (
	pkiDir        = filepath.Join(StateDir, "pki")
	etcdDir       = filepath.Join(StateDir, "etcd")
	kubeletRoot   = filepath.Join(StateDir, "kubelet")
	containerRoot = filepath.Join(StateDir, "containerd")
	cniConfDir    = filepath.Join(StateDir, "cni", "net.d")
	cniDataDir    = filepath.Join(StateDir, "cni", "networks")
	logDir        = filepath.Join(StateDir, "logs")
	auditPolicy   = filepath.Join(StateDir, "audit-policy.yaml")
	podLogDir     = filepath.Join(StateDir, "pod-logs")
	containerRun  = filepath.Join(RunDir, "containerd")
	// RegistryHostsDir is containerd's registry configuration directory
	// (config_path): a test that runs a registry writes
	// <host:port>/hosts.toml here (containerd's docs/hosts.md) before a pod
	// pulls from it. Empty, it changes nothing.
	RegistryHostsDir = filepath.Join(StateDir, "certs.d")
)

// Start cleans up what an earlier run left, records the host's state, and
// brings the node up: network, PKI, etcd, kube-apiserver, the controllers,
// containerd (with the pause image imported) and the kubelet, until the
// Node is Ready. On error everything started is cleaned up again.
func Start(ctx context.Context, o Options) (n *Node, err error) {
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	if LeftOver() {
		o.Logf("an earlier run did not clean up; cleaning up its leftovers first")
		if err := Cleanup(); err != nil {
			return nil, fmt.Errorf("cleaning up an earlier run: %w", err)
		}
	}
	l, err := recordHost(o.Assets.nodeBinaries())
	if err != nil {
		return nil, err
	}
	n = &Node{Assets: o.Assets, ledger: l, logf: o.Logf, LogDir: logDir, PodLogDir: podLogDir, KubeletRoot: kubeletRoot,
		AuditLog: filepath.Join(logDir, "audit.log"),
		ctrSock:  filepath.Join(containerRun, "containerd.sock")}
	defer func() {
		if err != nil {
			n.saveLogs()
			if cerr := n.Stop(); cerr != nil {
				err = errors.Join(err, cerr)
			}
		}
	}()
	for _, d := range []string{logDir, podLogDir, kubeletRoot, containerRoot, cniConfDir, cniDataDir, containerRun, RegistryHostsDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return n, err
		}
	}
	start := time.Now()
	if err := setUpNetwork(); err != nil {
		return n, err
	}
	if err := n.writePKI(); err != nil {
		return n, err
	}
	if err := n.startControlPlane(ctx); err != nil {
		return n, err
	}
	o.Logf("control plane up in %s", time.Since(start).Round(100*time.Millisecond))
	if err := n.startContainerd(ctx); err != nil {
		return n, err
	}
	if _, err := n.Ctr(ctx, "images", "import", o.Assets.node("pause.tar")); err != nil {
		return n, err
	}
	if err := n.startKubelet(ctx); err != nil {
		return n, err
	}
	o.Logf("node %s Ready in %s", NodeName, time.Since(start).Round(100*time.Millisecond))
	return n, nil
}

// Stop stops every component and cleans up the host (Cleanup), then checks
// that the host is as it was before the run.
func (n *Node) Stop() error {
	for i := len(n.procs) - 1; i >= 0; i-- {
		if n.procs[i].name == "kubelet" {
			n.procs[i].stop(10 * time.Second)
		}
	}
	err := Cleanup()
	for i := len(n.procs) - 1; i >= 0; i-- {
		n.procs[i].stop(5 * time.Second)
	}
	if diff := hostDiff(n.ledger); len(diff) > 0 {
		err = errors.Join(err, fmt.Errorf("the host is not as it was before the run:\n  %s", strings.Join(diff, "\n  ")))
	}
	return err
}

// SaveLogs copies the component and pod logs to dir (replacing it), for a
// failed run's post-mortem.
func (n *Node) SaveLogs(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return exec.Command("cp", "-a", logDir, podLogDir, dir).Run()
}

// saveLogs keeps a failed start's logs in DefaultLogCopy.
func (n *Node) saveLogs() {
	if err := n.SaveLogs(DefaultLogCopy); err == nil {
		n.logf("logs of the failed start: %s", DefaultLogCopy)
	}
}

// DefaultLogCopy is where a failed run's logs are copied.
const DefaultLogCopy = "/tmp/kubeblade-kubelet-e2e-logs"

func (n *Node) writePKI() error {
	p, err := newPKI(pkiDir)
	if err != nil {
		return err
	}
	gw := net.ParseIP(Gateway)
	specs := []certSpec{
		{name: "apiserver", cn: "kube-apiserver", server: true,
			dns: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
			ips: []net.IP{net.ParseIP("127.0.0.1"), gw, net.ParseIP(ServiceIP)}},
		{name: "admin", cn: "kubeblade-e2e-admin", orgs: []string{"system:masters"}, client: true},
		{name: "controller-manager", cn: "system:kube-controller-manager", client: true},
		{name: "scheduler", cn: "system:kube-scheduler", client: true},
		{name: "kubelet", cn: "system:node:" + NodeName, orgs: []string{"system:nodes"}, client: true},
		{name: "kubelet-serving", cn: NodeName, server: true, dns: []string{NodeName, "localhost"}, ips: []net.IP{net.ParseIP("127.0.0.1"), gw}},
		{name: "apiserver-kubelet-client", cn: "kube-apiserver-kubelet-client", orgs: []string{"system:masters"}, client: true},
	}
	for i, s := range specs {
		if err := p.issue(s, int64(i+2)); err != nil {
			return err
		}
	}
	if err := p.serviceAccountKey(); err != nil {
		return err
	}
	server := "https://" + net.JoinHostPort(Gateway, "6443")
	for _, u := range []string{"admin", "controller-manager", "scheduler", "kubelet"} {
		if err := p.kubeconfig(filepath.Join(pkiDir, u+".kubeconfig"), server, u); err != nil {
			return err
		}
	}
	n.Kubeconfig = filepath.Join(pkiDir, "admin.kubeconfig")
	return nil
}

func pkiPath(name string) string { return filepath.Join(pkiDir, name) }

func (n *Node) start(name, bin string, args ...string) (*process, error) {
	return n.startEnv(name, bin, args, nil)
}

func (n *Node) startEnv(name, bin string, args, env []string) (*process, error) {
	p, err := startProcess(logDir, name, bin, args, env)
	if err != nil {
		return nil, err
	}
	n.procs = append(n.procs, p)
	if err := n.ledger.addStarted(p.cmd.Process.Pid, name); err != nil {
		return p, err
	}
	return p, nil
}

// waitFor polls cond until it holds, failing early when p exits.
func waitFor(ctx context.Context, p *process, timeout time.Duration, what string, cond func(context.Context) (bool, string)) error {
	err := testwait.Poll(ctx, timeout, func(ctx context.Context) (bool, string) {
		if err := p.exited(); err != nil {
			return true, ""
		}
		return cond(ctx)
	})
	if perr := p.exited(); perr != nil {
		return perr
	}
	if err != nil {
		return fmt.Errorf("waiting for %s: %w; log: %s\n%s", what, err, p.log, tail(p.log, 15))
	}
	return nil
}

// AuditPolicy is the kube-apiserver audit policy of the node: the
// requests of the kubelet (group system:nodes) and of kubeblade's service
// accounts, with their request and response objects (the API cost
// measurement counts their sizes), and nothing else. Policy format:
// k8s.io/apiserver/pkg/apis/audit/v1 (types.go, Policy), v0.37.2. The
// RequestReceived stage is left out: a request is logged once when it
// completes, and a watch also when it starts (ResponseStarted).
const AuditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: RequestResponse
  userGroups: ["system:nodes", "system:serviceaccounts:kubeblade-system"]
- level: None
`

func (n *Node) startControlPlane(ctx context.Context) error {
	a := n.Assets
	if err := os.WriteFile(auditPolicy, []byte(AuditPolicy), 0o644); err != nil {
		return err
	}
	etcd, err := n.start("etcd", a.k8s("etcd"),
		"--name=kubeblade-e2e", "--data-dir="+etcdDir,
		"--listen-client-urls=http://127.0.0.1:2379", "--advertise-client-urls=http://127.0.0.1:2379",
		"--listen-peer-urls=http://127.0.0.1:2380", "--initial-advertise-peer-urls=http://127.0.0.1:2380",
		"--initial-cluster=kubeblade-e2e=http://127.0.0.1:2380", "--listen-metrics-urls=http://127.0.0.1:2381",
		// A test cluster on a shared disk: fsync only slows it down.
		"--unsafe-no-fsync")
	if err != nil {
		return err
	}
	web := &http.Client{Timeout: 2 * time.Second}
	if err := waitFor(ctx, etcd, time.Minute, "etcd", func(ctx context.Context) (bool, string) {
		resp, err := web.Get("http://127.0.0.1:2379/health")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == 200, resp.Status
	}); err != nil {
		return err
	}
	api, err := n.start("kube-apiserver", a.k8s("kube-apiserver"),
		"--etcd-servers=http://127.0.0.1:2379",
		// On the bridge's address: host-network pods reach it as the node
		// IP, pod-network pods through the Service DNAT.
		"--bind-address="+Gateway, "--advertise-address="+Gateway, "--secure-port=6443",
		"--tls-cert-file="+pkiPath("apiserver.crt"), "--tls-private-key-file="+pkiPath("apiserver.key"),
		"--client-ca-file="+pkiPath("ca.crt"),
		"--service-account-key-file="+pkiPath("sa.pub"), "--service-account-signing-key-file="+pkiPath("sa.key"),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-cluster-ip-range="+ServiceCIDR,
		"--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction",
		// The agent is privileged (GPIO, PWM and LED files).
		"--allow-privileged=true",
		"--kubelet-client-certificate="+pkiPath("apiserver-kubelet-client.crt"), "--kubelet-client-key="+pkiPath("apiserver-kubelet-client.key"),
		"--kubelet-certificate-authority="+pkiPath("ca.crt"), "--kubelet-preferred-address-types=InternalIP",
		"--audit-policy-file="+auditPolicy, "--audit-log-path="+n.AuditLog, "--audit-log-format=json",
		// One file for the whole run (no rotation), written as requests end.
		"--audit-log-maxsize=0", "--audit-log-mode=blocking",
		"--profiling=false")
	if err != nil {
		return err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", n.Kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 50, 100
	n.Config = cfg
	if n.Client, err = kubernetes.NewForConfig(cfg); err != nil {
		return err
	}
	if err := waitFor(ctx, api, 2*time.Minute, "kube-apiserver /readyz", func(ctx context.Context) (bool, string) {
		body, err := n.Client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			return false, err.Error()
		}
		return true, string(body)
	}); err != nil {
		return err
	}
	if _, err := n.start("kube-controller-manager", a.k8s("kube-controller-manager"),
		"--kubeconfig="+pkiPath("controller-manager.kubeconfig"),
		"--authentication-kubeconfig="+pkiPath("controller-manager.kubeconfig"),
		"--authorization-kubeconfig="+pkiPath("controller-manager.kubeconfig"),
		"--bind-address=127.0.0.1", "--secure-port=10257", "--leader-elect=false",
		"--service-account-private-key-file="+pkiPath("sa.key"), "--root-ca-file="+pkiPath("ca.crt"),
		"--use-service-account-credentials=true", "--controllers=*"); err != nil {
		return err
	}
	_, err = n.start("kube-scheduler", a.k8s("kube-scheduler"),
		"--kubeconfig="+pkiPath("scheduler.kubeconfig"),
		"--authentication-kubeconfig="+pkiPath("scheduler.kubeconfig"),
		"--authorization-kubeconfig="+pkiPath("scheduler.kubeconfig"),
		"--bind-address=127.0.0.1", "--secure-port=10259", "--leader-elect=false")
	return err
}

func (n *Node) startContainerd(ctx context.Context) error {
	cfgPath := filepath.Join(StateDir, "containerd.toml")
	if err := os.WriteFile(cfgPath, []byte(containerdConfig(n.Assets, n.ctrSock)), 0o600); err != nil {
		return err
	}
	cni := fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "kubeblade-e2e",
  "plugins": [{
    "type": "bridge", "bridge": %q, "isGateway": true, "ipMasq": false,
    "ipam": {"type": "host-local", "dataDir": %q, "ranges": [[{"subnet": %q, "gateway": %q}]], "routes": [{"dst": "0.0.0.0/0"}]}
  }]
}
`, Bridge, cniDataDir, PodCIDR, Gateway)
	if err := os.WriteFile(filepath.Join(cniConfDir, "10-kubeblade-e2e.conflist"), []byte(cni), 0o644); err != nil {
		return err
	}
	p, err := n.startEnv("containerd", n.Assets.node("containerd"), []string{"--config", cfgPath},
		// The runc shim and runc are found on PATH.
		[]string{"PATH=" + n.Assets.NodeDir + ":" + os.Getenv("PATH")})
	if err != nil {
		return err
	}
	return waitFor(ctx, p, time.Minute, "containerd", func(ctx context.Context) (bool, string) {
		out, err := n.Ctr(ctx, "version")
		if err != nil {
			return false, err.Error()
		}
		return true, out
	})
}

// containerdConfig is containerd 2's configuration for the node.
func containerdConfig(a Assets, sock string) string {
	return fmt.Sprintf(`version = 3
root = %q
state = %q

[grpc]
  address = %q

[ttrpc]
  address = %q

[plugins]
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = 'overlayfs'
    # The sandbox image is imported and pinned, so the kubelet's image GC
    # never removes it; registries are configured per host under
    # RegistryHostsDir.
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = %q
    [plugins.'io.containerd.cri.v1.images'.registry]
      config_path = %q

  [plugins.'io.containerd.cri.v1.runtime']
    # This VM denies CAP_SYS_RESOURCE even to root: lowering oom_score_adj
    # (the kubelet asks -998 for sandboxes) fails and every sandbox dies
    # with "can't get final child's PID from pipe: EOF".
    restrict_oom_score_adj = true
    # netns mounts under the state directory, not /var/run/netns.
    netns_mounts_under_state_dir = true
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = 'runc'
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = 'io.containerd.runc.v2'
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          SystemdCgroup = false
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = [%q]
      conf_dir = %q

  [plugins.'io.containerd.grpc.v1.cri']
    stream_server_address = '127.0.0.1'
`, containerRoot, containerRun, sock, sock+".ttrpc", pauseRef(a), RegistryHostsDir, filepath.Join(a.NodeDir, "cni"), cniConfDir)
}

func pauseRef(a Assets) string {
	b, err := os.ReadFile(a.node("pause.ref"))
	if err != nil {
		return "registry.k8s.io/pause:kubeblade"
	}
	return strings.TrimSpace(string(b))
}

// Ctr runs ctr against the node's containerd in the CRI namespace.
func (n *Node) Ctr(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, n.Assets.node("ctr"), append([]string{"--address", n.ctrSock, "--namespace", "k8s.io"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("ctr %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

func (n *Node) startKubelet(ctx context.Context) error {
	cfgPath := filepath.Join(StateDir, "kubelet.yaml")
	cfg := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# Kubelet 1.37 refuses cgroup v1 unless told otherwise; this VM has only v1.
failCgroupV1: false
cgroupDriver: cgroupfs
address: 127.0.0.1
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
containerRuntimeEndpoint: unix://%s
podLogsDir: %s
tlsCertFile: %s
tlsPrivateKeyFile: %s
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %s}
authorization: {mode: Webhook}
failSwapOn: false
# A shared developer disk: never evict or garbage-collect images for space.
evictionHard: {memory.available: "100Mi", nodefs.available: "1%%", imagefs.available: "1%%", nodefs.inodesFree: "1%%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
maxPods: 20
serializeImagePulls: false
resolvConf: /etc/resolv.conf
`, n.ctrSock, podLogDir, pkiPath("kubelet-serving.crt"), pkiPath("kubelet-serving.key"), pkiPath("ca.crt"))
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return err
	}
	p, err := n.start("kubelet", n.Assets.node("kubelet"),
		"--config="+cfgPath, "--kubeconfig="+pkiPath("kubelet.kubeconfig"), "--root-dir="+kubeletRoot,
		"--hostname-override="+NodeName, "--node-ip="+Gateway)
	if err != nil {
		return err
	}
	return waitFor(ctx, p, 3*time.Minute, "Node "+NodeName+" Ready", func(ctx context.Context) (bool, string) {
		node, err := n.Client.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status == corev1.ConditionTrue, c.Reason + ": " + c.Message
			}
		}
		return false, "no Ready condition"
	})
}

// Exited reports the first component that has exited, if any.
func (n *Node) Exited() error {
	for _, p := range n.procs {
		if err := p.exited(); err != nil {
			return err
		}
	}
	return nil
}

// StartComponent starts one more process beside the node's own (a
// controller or server a suite adds) and waits until ready holds, failing
// early when the process exits. Like the node's components, its output goes
// to LogDir/<name>.log, Exited watches it, and Stop (or an interrupted
// run's next Cleanup) ends it.
func (n *Node) StartComponent(ctx context.Context, name, bin string, args, env []string, timeout time.Duration, ready func(context.Context) (bool, string)) error {
	p, err := n.startEnv(name, bin, args, env)
	if err != nil {
		return err
	}
	return waitFor(ctx, p, timeout, name, ready)
}
