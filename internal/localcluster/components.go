package localcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentconfigv1 "github.com/kubeblade/kubeblade/api/agentconfig/v1alpha1"
	kbv1 "github.com/kubeblade/kubeblade/api/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/dashboard"
	"github.com/kubeblade/kubeblade/internal/hardware/simulated"
	"github.com/kubeblade/kubeblade/internal/operator/agentdaemonset"
)

// DefaultAgentImage is the image the operator puts into its DaemonSets. No
// container runs it: the fake kubelet only reports the pods running, and the
// agents are the processes StartAgent runs.
const DefaultAgentImage = "kubeblade:local"

// OperatorOptions configure StartOperator.
type OperatorOptions struct {
	// Binary is the operator binary (default BinDir/kubeblade-operator).
	Binary string
	// Image is its --agent-image (default DefaultAgentImage).
	Image string
	// Name names the log file (default kubeblade-operator).
	Name string
	// Args are appended to the defaults.
	Args []string
}

// StartOperator runs kubeblade-operator against the cluster, leader-elected
// like in a real Deployment, with its metrics and probes on free loopback
// ports.
func (c *Cluster) StartOperator(o OperatorOptions) (*Process, error) {
	if o.Binary == "" {
		o.Binary = filepath.Join(c.BinDir, "kubeblade-operator")
	}
	if o.Image == "" {
		o.Image = DefaultAgentImage
	}
	if o.Name == "" {
		o.Name = "kubeblade-operator"
	}
	args := append([]string{
		"--namespace=" + Namespace,
		"--agent-image=" + o.Image,
		"--metrics-bind-address=127.0.0.1:0",
		"--health-probe-bind-address=127.0.0.1:0",
		"--leader-elect=true",
		"--log-format=text",
	}, o.Args...)
	// The operator reads its kubeconfig the controller-runtime way.
	p, err := startProcess(o.Name, filepath.Join(c.Dir, "logs"), "", o.Binary, args, []string{"KUBECONFIG=" + c.Kubeconfig})
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.operator = append(c.operator, p)
	c.mu.Unlock()
	return p, nil
}

// Start-only agent settings for blades that share one machine. An agent in
// Kubernetes mode starts with its BladeConfig's hardware, gRPC and metrics
// settings, and every blade here follows the same BladeConfig, so the
// gRPC socket path is relative (each agent runs in its own blade
// directory) and metrics take a free loopback port.
const (
	AgentSocket  = "agent.sock"
	AgentMetrics = "127.0.0.1:0"
)

// AgentStartSettings sets the start-only sections of a BladeConfig's
// spec.agent for this cluster's simulated blades; hack/demo/bladeconfig.yaml
// spells out the same.
func AgentStartSettings(a *agentconfigv1.AgentConfig) {
	a.Hardware = agentconfigv1.HardwareConfig{Backend: agentconfigv1.BackendSimulated}
	a.GRPC.SocketPath = AgentSocket
	a.Metrics.BindAddress = AgentMetrics
}

// Agent is one kubeblade-agent process on a simulated blade.
type Agent struct {
	*Process
	Node string
	// Dir holds Config, StateDir and Socket.
	Dir, Config, StateDir string
	// Kubeconfig is the agent's own: it acts as the agent ServiceAccount
	// of its Node (see agentKubeconfig).
	Kubeconfig string
	// Socket is the agent's gRPC unix socket; SimSocket the simulated
	// blade's control socket (in StateDir).
	Socket, SimSocket string
	http              *http.Client
}

// StartAgent runs kubeblade-agent for node in Kubernetes mode on the
// simulated backend, with its gRPC socket, state and simulator socket under
// Dir/blades/<node> and metrics on a free loopback port, and waits until
// the simulated blade answers. A stopped agent of the same node is
// restarted on the same state directory.
func (c *Cluster) StartAgent(ctx context.Context, node string, extraArgs ...string) (*Agent, error) {
	c.mu.Lock()
	if a := c.agents[node]; a != nil && a.Running() {
		c.mu.Unlock()
		return nil, fmt.Errorf("agent for %s already runs (pid %d)", node, a.Pid())
	}
	c.mu.Unlock()
	dir := filepath.Join(c.Dir, "blades", node)
	a := &Agent{
		Node: node, Dir: dir,
		Config:     filepath.Join(dir, "agent.yaml"),
		StateDir:   filepath.Join(dir, "state"),
		Socket:     filepath.Join(dir, AgentSocket),
		Kubeconfig: filepath.Join(dir, "kubeconfig"),
	}
	a.SimSocket = filepath.Join(a.StateDir, "simulator.sock")
	if err := os.MkdirAll(a.StateDir, 0o700); err != nil {
		return nil, err
	}
	// The local config, used until the Node is assigned a BladeConfig;
	// the same start-only settings as AgentStartSettings.
	cfg := fmt.Sprintf(`# kubeblade-agent for %s on a simulated blade (written by localcluster).
hardware:
  backend: simulated
grpc:
  socketPath: %s
metrics:
  bindAddress: %s
`, node, AgentSocket, AgentMetrics)
	if err := os.WriteFile(a.Config, []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	if err := c.agentKubeconfig(ctx, node, a.Kubeconfig); err != nil {
		return nil, err
	}
	args := append([]string{
		"--kubernetes", "--kubeconfig=" + a.Kubeconfig, "--node-name=" + node,
		"--config=" + a.Config, "--state-dir=" + a.StateDir,
	}, extraArgs...)
	// The agent runs in its blade's directory, where the relative
	// AgentSocket puts its gRPC socket.
	p, err := startProcess("agent-"+node, filepath.Join(c.Dir, "logs"), dir, filepath.Join(c.BinDir, "kubeblade-agent"), args, nil)
	if err != nil {
		return nil, err
	}
	a.Process = p
	a.http = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", a.SimSocket)
		},
	}}
	c.mu.Lock()
	c.agents[node] = a
	c.mu.Unlock()
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		if !p.Running() {
			return false, fmt.Errorf("agent for %s exited: %v (log: %s)", node, p.Err(), p.Log)
		}
		_, err := a.State(ctx)
		return err == nil, nil
	})
	if err != nil {
		return a, fmt.Errorf("agent for %s: %w", node, err)
	}
	return a, nil
}

// agentKubeconfig writes a kubeconfig that acts as the agent of node: the
// ServiceAccount user with the authentication.kubernetes.io/node-name and
// node-uid extras that a pod-bound token of a DaemonSet pod on node carries.
// The agents are processes, not pods, so they impersonate that identity
// with the admin credentials; the API server then authorizes every request
// as the agent's (RBAC, then the admission policies), as in a cluster.
func (c *Cluster) agentKubeconfig(ctx context.Context, node, path string) error {
	n := &corev1.Node{}
	if err := c.Ctrl.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
		return fmt.Errorf("the Node of agent %s: %w", node, err)
	}
	kc, err := clientcmd.LoadFromFile(c.Kubeconfig)
	if err != nil {
		return err
	}
	for _, ai := range kc.AuthInfos {
		ai.Impersonate = agentIdentity().AgentUser()
		ai.ImpersonateGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + Namespace}
		ai.ImpersonateUserExtra = map[string][]string{
			"authentication.kubernetes.io/node-name": {node},
			"authentication.kubernetes.io/node-uid":  {string(n.UID)},
		}
	}
	return clientcmd.WriteToFile(*kc, path)
}

// DeclareFanPeers annotates a and b as each other's fan peer
// (kubeblade.io/fan-peer), as Talos's machine.nodeAnnotations would for two
// blades sharing a standard fan unit.
func (c *Cluster) DeclareFanPeers(ctx context.Context, a, b string) error {
	for _, p := range [][2]string{{a, b}, {b, a}} {
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, kbv1.AnnotationFanPeer, p[1])
		if err := c.Ctrl.Patch(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: p[0]}}, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
			return fmt.Errorf("declaring %s's fan peer: %w", p[0], err)
		}
	}
	return nil
}

// DemoChassis is the chassis make demo puts its blades in.
const DemoChassis = "demo-rack"

// ChassisLabels are the rack view's Node labels (docs/dashboard.md) that put nodes
// into chassis in slots 1, 2, … in their order: what PlaceInChassis sets,
// and what the dashboard's screenshot test draws as the demo's rack.
func ChassisLabels(chassis string, nodes []string) map[string]map[string]string {
	out := make(map[string]map[string]string, len(nodes))
	for i, n := range nodes {
		out[n] = map[string]string{dashboard.LabelChassis: chassis, dashboard.LabelSlot: strconv.Itoa(i + 1)}
	}
	return out
}

// PlaceInChassis labels the cluster's Nodes as the blades of chassis in
// slots 1, 2, … (ChassisLabels), as an operator would with `kubectl label
// node` or Talos's machine.nodeLabels, so the rack view draws them there.
func (c *Cluster) PlaceInChassis(ctx context.Context, chassis string) error {
	for n, labels := range ChassisLabels(chassis, c.Nodes) {
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
		if err != nil {
			return err
		}
		if err := c.Ctrl.Patch(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, client.RawPatch(types.MergePatchType, patch)); err != nil {
			return fmt.Errorf("placing %s in chassis %s: %w", n, chassis, err)
		}
	}
	return nil
}

// Agent returns the agent started for node, or nil.
func (c *Cluster) Agent(node string) *Agent {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.agents[node]
}

// Sim calls the simulated blade's control socket: method and path as in
// simulated.ControlHandler (POST /button, POST /temperature?celsius=70, …).
func (a *Agent) Sim(ctx context.Context, method, path string) (simulated.State, error) {
	var st simulated.State
	req, err := http.NewRequestWithContext(ctx, method, "http://blade"+path, nil)
	if err != nil {
		return st, err
	}
	resp, err := a.http.Do(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return st, fmt.Errorf("simulator %s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(msg)))
	}
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// State reads the simulated hardware.
func (a *Agent) State(ctx context.Context) (simulated.State, error) {
	return a.Sim(ctx, http.MethodGet, "/state")
}

// PressButton presses the simulated blade's button once.
func (a *Agent) PressButton(ctx context.Context) error {
	_, err := a.Sim(ctx, http.MethodPost, "/button")
	return err
}

// SetTemperature jumps the simulated SoC temperature.
func (a *Agent) SetTemperature(ctx context.Context, celsius float64) error {
	_, err := a.Sim(ctx, http.MethodPost, fmt.Sprintf("/temperature?celsius=%g", celsius))
	return err
}

// SetLoad sets the simulated CPU load (the temperature follows it).
func (a *Agent) SetLoad(ctx context.Context, load float64) error {
	_, err := a.Sim(ctx, http.MethodPost, fmt.Sprintf("/load?value=%g", load))
	return err
}

// Rollout is what WaitRolledOut last saw.
type Rollout struct {
	Generation, ObservedGeneration int64
	Ready                          *metav1.Condition
	DaemonSet                      appsv1.DaemonSetStatus
	// Applied lists the Blades that run the BladeConfig's generation.
	Applied []string
}

func (r Rollout) String() string {
	ready := "Ready condition missing"
	if r.Ready != nil {
		ready = fmt.Sprintf("Ready=%s (%s: %s)", r.Ready.Status, r.Ready.Reason, r.Ready.Message)
	}
	return fmt.Sprintf("generation %d observed %d, %s; DaemonSet desired %d updated %d ready %d; applied on %v",
		r.Generation, r.ObservedGeneration, ready, r.DaemonSet.DesiredNumberScheduled,
		r.DaemonSet.UpdatedNumberScheduled, r.DaemonSet.NumberReady, r.Applied)
}

// WaitRolledOut polls until the BladeConfig is Ready for its current
// generation, its DaemonSet runs an up-to-date ready pod on every one of
// the cluster's Nodes, and every Node's Blade reports that generation
// applied.
func (c *Cluster) WaitRolledOut(ctx context.Context, bladeConfig string, timeout time.Duration) (Rollout, error) {
	var last Rollout
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		r, done := c.rollout(ctx, bladeConfig)
		last = r
		return done, nil
	})
	if err != nil {
		return last, fmt.Errorf("BladeConfig %s not rolled out within %s: %s", bladeConfig, timeout, last)
	}
	return last, nil
}

func (c *Cluster) rollout(ctx context.Context, name string) (Rollout, bool) {
	var r Rollout
	bc := &kbv1.BladeConfig{}
	if err := c.Ctrl.Get(ctx, client.ObjectKey{Name: name}, bc); err != nil {
		return r, false
	}
	r.Generation = bc.Generation
	r.Ready = meta.FindStatusCondition(bc.Status.Conditions, kbv1.BladeConfigReady)
	if r.Ready != nil {
		r.ObservedGeneration = r.Ready.ObservedGeneration
	}
	ds := &appsv1.DaemonSet{}
	if err := c.Ctrl.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: agentdaemonset.Name(name)}, ds); err == nil {
		r.DaemonSet = ds.Status
	}
	for _, n := range c.Nodes {
		b := &kbv1.Blade{}
		if err := c.Ctrl.Get(ctx, client.ObjectKey{Name: n}, b); err == nil &&
			b.Status.Config != nil && b.Status.Config.Name == name && b.Status.Config.Generation == bc.Generation {
			r.Applied = append(r.Applied, n)
		}
	}
	want := int32(len(c.Nodes))
	done := r.Ready != nil && r.Ready.Status == metav1.ConditionTrue && r.ObservedGeneration == bc.Generation &&
		ds.Generation == ds.Status.ObservedGeneration &&
		r.DaemonSet.DesiredNumberScheduled == want && r.DaemonSet.UpdatedNumberScheduled == want &&
		r.DaemonSet.NumberReady == want && len(r.Applied) == len(c.Nodes)
	return r, done
}
