// Package reliability is kubeblade's fault and bad-input suite: it breaks
// the API server, etcd, agent processes and the operator leader, and feeds
// every interface bad input, then checks that each fault is survived, each
// bad input gets a clear error, and no state is lost. `make reliability`
// runs it in full and prints the summary; `go test ./...` runs it with a
// short API-server outage (RELIABILITY_OUTAGE, default 5s).
package reliability

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	kbv1 "github.com/kubeblade/kubeblade/api/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/agent"
	"github.com/kubeblade/kubeblade/internal/config"
	"github.com/kubeblade/kubeblade/internal/hardware/simulated"
	"github.com/kubeblade/kubeblade/internal/kubeagent"
	"github.com/kubeblade/kubeblade/internal/operator"
	"github.com/kubeblade/kubeblade/internal/testenv"
	"github.com/kubeblade/kubeblade/internal/testreq"
	"github.com/kubeblade/kubeblade/internal/testwait"
)

var (
	cp    *controlPlane
	cpErr error // why cp is nil
	k8s   client.Client
)

// needCP ends a test that needs the control plane when it could not start.
func needCP(t testing.TB) {
	t.Helper()
	if cp == nil {
		testreq.Unavailable(t, "reliability control plane: %v", cpErr)
	}
}

func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	klog.SetLogger(logr.Discard()) // client-go's reconnect chatter while things are down
	os.Exit(run(m))
}

func run(m *testing.M) int {
	c, err := startControlPlane()
	switch {
	case errors.Is(err, testenv.ErrNoAssets):
		// The tests still run: those that need the control plane call
		// needCP, which skips them visibly (or fails them under
		// KUBEBLADE_TEST_REQUIRED=1); the others do not need it.
		cpErr = err
	case err != nil:
		fmt.Fprintln(os.Stderr, "reliability:", err)
		return 1
	default:
		cp = c
		defer cp.stop()
		if k8s, err = client.New(cp.cfg, client.Options{Scheme: operator.Scheme()}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if err := k8s.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kubeblade-system"}}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	code := m.Run()
	summary.print(os.Stdout)
	return code
}

// controlPlane is envtest's kube-apiserver and etcd with what faults need:
// certificates and etcd data in fixed directories, so either process can
// be stopped and started again on the same address with the same data.
type controlPlane struct {
	env *envtest.Environment
	cfg *rest.Config
	dir string
}

func startControlPlane() (*controlPlane, error) {
	assets, err := testenv.AssetsDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "kubeblade-reliability-")
	if err != nil {
		return nil, err
	}
	for _, d := range []string{"certs", "etcd"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			return nil, err
		}
	}
	e := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     []string{filepath.Join(testenv.RepoRoot(), "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	// A short grace, then SIGKILL: stopping models a crash.
	e.ControlPlane.APIServer = &envtest.APIServer{CertDir: filepath.Join(dir, "certs"), StopTimeout: 2 * time.Second}
	e.ControlPlane.Etcd = &envtest.Etcd{DataDir: filepath.Join(dir, "etcd")}
	cfg, err := e.Start()
	if err != nil {
		return nil, fmt.Errorf("starting envtest with binaries from %s: %w", assets, err)
	}
	return &controlPlane{env: e, cfg: cfg, dir: dir}, nil
}

func (c *controlPlane) stop() {
	_ = c.env.Stop()
	_ = os.RemoveAll(c.dir)
}

// stopAPIServer stops kube-apiserver; a server that does not finish its
// graceful shutdown in time is killed, which is the point.
func (c *controlPlane) stopAPIServer() error {
	err := c.env.ControlPlane.APIServer.Stop()
	if err != nil && strings.Contains(err.Error(), "timeout waiting for process") {
		return nil
	}
	return err
}

func (c *controlPlane) startAPIServer() error { return c.env.ControlPlane.APIServer.Start() }

func (c *controlPlane) stopEtcd() error {
	err := c.env.ControlPlane.Etcd.Stop()
	if err != nil && strings.Contains(err.Error(), "timeout waiting for process") {
		return nil
	}
	return err
}

func (c *controlPlane) startEtcd() error { return c.env.ControlPlane.Etcd.Start() }

// kubeconfig writes an admin kubeconfig for agent processes.
func (c *controlPlane) kubeconfig(t *testing.T) string {
	t.Helper()
	u, err := c.env.AddUser(envtest.User{Name: "reliability-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := u.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(p, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// durationEnv reads a duration from the environment.
func durationEnv(t testing.TB, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, v, err)
	}
	return d
}

// ---- the summary ----

type tally struct {
	mu        sync.Mutex
	faults    []string
	failed    []string
	badTried  int
	badClear  int
	lost      []string
	notes     []string
	badGroups map[string]int
}

var summary = &tally{badGroups: map[string]int{}}

// fault records a fault scenario; it counts as survived if the test passes.
func (s *tally) fault(t *testing.T, name string) {
	t.Cleanup(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if t.Failed() {
			s.failed = append(s.failed, name)
		} else {
			s.faults = append(s.faults, name)
		}
	})
}

// bad records one bad input of a group; clear says it got a clear error
// (refused, or an explicit Warning) rather than being silently accepted.
func (s *tally) bad(group string, clear bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.badTried++
	s.badGroups[group]++
	if clear {
		s.badClear++
	}
}

// lose records lost state and fails the test.
func (s *tally) lose(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	s.mu.Lock()
	s.lost = append(s.lost, msg)
	s.mu.Unlock()
	t.Errorf("STATE LOST: %s", msg)
}

// note adds a measured figure to the summary.
func (s *tally) note(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.notes = append(s.notes, fmt.Sprintf(format, args...))
}

func (s *tally) print(w *os.File) {
	s.mu.Lock()
	defer s.mu.Unlock()
	groups := make([]string, 0, len(s.badGroups))
	for g, n := range s.badGroups {
		groups = append(groups, fmt.Sprintf("%s %d", g, n))
	}
	sort.Strings(groups)
	fmt.Fprintln(w, "reliability summary")
	fmt.Fprintf(w, "  faults survived:  %d of %d (%s)\n", len(s.faults), len(s.faults)+len(s.failed), strings.Join(s.faults, "; "))
	if len(s.failed) > 0 {
		fmt.Fprintf(w, "  faults NOT survived: %s\n", strings.Join(s.failed, "; "))
	}
	fmt.Fprintf(w, "  bad inputs tried: %d, each with a clear error: %d (%s)\n", s.badTried, s.badClear, strings.Join(groups, ", "))
	fmt.Fprintf(w, "  state lost:       %d\n", len(s.lost))
	for _, l := range s.lost {
		fmt.Fprintf(w, "    - %s\n", l)
	}
	for _, n := range s.notes {
		fmt.Fprintf(w, "  %s\n", n)
	}
}

// ---- an in-process blade reporting to the API server ----

type blade struct {
	t     *testing.T
	node  string
	sim   *simulated.Blade
	agent *agent.Agent
	rep   *kubeagent.Reporter
	stop  func()
}

// startBlade creates the Node (with extra labels) and runs an agent with
// the default sample interval and write pacing: what a real blade runs.
func startBlade(t *testing.T, node string, labels map[string]string) *blade {
	t.Helper()
	return startBladeOn(t, node, labels, nil)
}

// startBladeOn is startBlade with the agent and its simulated blade on clk
// (nil: the real clock), for a test that asserts how soon the agent acts:
// on a fake clock that is a count of sample intervals, which neither load
// nor -race can stretch. The reporter keeps the real clock: it talks to a
// real API server.
func startBladeOn(t *testing.T, node string, labels map[string]string, clk clock.WithTicker) *blade {
	t.Helper()
	l := map[string]string{"kubernetes.io/arch": "arm64"}
	for k, v := range labels {
		l[k] = v
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, Labels: l}}
	if err := k8s.Create(context.Background(), n); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	local, err := config.Check(config.Default())
	if err != nil {
		t.Fatal(err)
	}
	b := &blade{t: t, node: node, sim: simulated.New(simulated.Options{Load: 0.2, Clock: clk})}
	ao := agent.Options{Backend: b.sim, Settings: local.Settings, Version: "reliability"}
	if clk != nil {
		ao.Clock = clk
	}
	if b.agent, err = agent.New(ao); err != nil {
		t.Fatal(err)
	}
	if b.rep, err = kubeagent.New(kubeagent.Options{Config: cp.cfg, NodeName: node, Agent: b.agent, Local: local}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	go func() { _ = b.agent.Run(ctx); done <- struct{}{} }()
	go func() { _ = b.rep.Run(ctx); done <- struct{}{} }()
	stopped := false
	b.stop = func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
			<-done
		}
	}
	t.Cleanup(b.stop)
	testwait.Eventually(t, 30*time.Second, "Blade "+node+" reported", func(context.Context) (bool, string) {
		bl, err := b.getBlade()
		return err == nil && bl.Status.State == kbv1.BladeStateIdle, fmt.Sprint(err)
	})
	b.waitEvent("AgentStarted")
	return b
}

func (b *blade) getBlade() (*kbv1.Blade, error) {
	bl := &kbv1.Blade{}
	return bl, k8s.Get(context.Background(), client.ObjectKey{Name: b.node}, bl)
}

func (b *blade) getNode() (*corev1.Node, error) {
	n := &corev1.Node{}
	return n, k8s.Get(context.Background(), client.ObjectKey{Name: b.node}, n)
}

func annotate(t *testing.T, node string, kv map[string]any) {
	t.Helper()
	patch := client.RawPatch("application/merge-patch+json", mustJSON(map[string]any{"metadata": map[string]any{"annotations": kv}}))
	if err := k8s.Patch(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, patch); err != nil {
		t.Fatal(err)
	}
}

// events lists the Events about node with the given reason.
func events(node, reason string) ([]eventsv1.Event, error) {
	l := &eventsv1.EventList{}
	if err := k8s.List(context.Background(), l, client.InNamespace("default")); err != nil {
		return nil, err
	}
	var out []eventsv1.Event
	for _, e := range l.Items {
		if e.Regarding.Name == node && e.Regarding.Kind == "Node" && e.Reason == reason {
			out = append(out, e)
		}
	}
	return out, nil
}

func (b *blade) waitEvent(reason string) {
	b.t.Helper()
	testwait.Eventually(b.t, 60*time.Second, "Event "+reason+" about "+b.node, func(context.Context) (bool, string) {
		got, err := events(b.node, reason)
		return err == nil && len(got) > 0, fmt.Sprint(err)
	})
}
