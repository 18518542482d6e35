package kubeagent

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	agentconfigv1 "github.com/kubeblade/kubeblade/api/agentconfig/v1alpha1"
	"github.com/kubeblade/kubeblade/api/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/agent"
	"github.com/kubeblade/kubeblade/internal/config"
	"github.com/kubeblade/kubeblade/internal/hardware"
	"github.com/kubeblade/kubeblade/internal/hardware/simulated"
	"github.com/kubeblade/kubeblade/internal/testenv"
	"github.com/kubeblade/kubeblade/internal/testwait"
)

// cluster is a control plane and a client of it.
type cluster struct {
	env *testenv.Env
	k8s client.Client // direct, uncached
}

func newSuite(o testenv.Options, c *cluster) *testenv.Suite {
	o.CRDDirs = []string{"config/crd/bases"}
	return testenv.NewSuite(o, func(_ context.Context, e *testenv.Env) error {
		s := runtime.NewScheme()
		_ = clientgoscheme.AddToScheme(s)
		_ = v1alpha1.AddToScheme(s)
		k, err := client.New(e.Config, client.Options{Scheme: s})
		c.env, c.k8s = e, k
		return err
	})
}

var (
	// shared is the control plane of every test but the outage test, which
	// stops and starts its own API server and so has its own.
	shared, outage           cluster
	sharedSuite, outageSuite = newSuite(testenv.Options{}, &shared), newSuite(testenv.Options{Restartable: true}, &outage)
)

// need returns the shared cluster, skipping (or failing, under
// KUBEBLADE_TEST_REQUIRED=1) without control-plane binaries.
func need(t testing.TB) *cluster {
	t.Helper()
	sharedSuite.Need(t)
	return &shared
}

// waitTimeout bounds every wait for the API server or the agent.
const waitTimeout = 30 * time.Second

func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	klog.SetLogger(logr.Discard()) // client-go's reconnect chatter during outage tests
	code := m.Run()
	sharedSuite.Stop()
	outageSuite.Stop()
	os.Exit(code)
}

// bladeUnderTest is one agent on a simulated blade, with its Kubernetes side,
// reporting for its own Node.
type bladeUnderTest struct {
	t     testing.TB
	c     *cluster
	node  string
	blade *simulated.Blade
	agent *agent.Agent
	rep   *Reporter
	stop  func()
}

type option func(*simulated.Options, *agentconfigv1.AgentConfig, *Options)

func withLocal(f func(*agentconfigv1.AgentConfig)) option {
	return func(_ *simulated.Options, c *agentconfigv1.AgentConfig, _ *Options) { f(c) }
}

// startBlade creates the Node (unless it exists) in the shared cluster and
// runs an agent for it.
func startBlade(t testing.TB, node string, opts ...option) *bladeUnderTest {
	t.Helper()
	return startBladeOn(t, need(t), node, opts...)
}

// startBladeOn is startBlade in cluster c.
func startBladeOn(t testing.TB, c *cluster, node string, opts ...option) *bladeUnderTest {
	t.Helper()
	ctx := context.Background()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, Labels: map[string]string{"kubernetes.io/arch": "arm64"}}}
	if err := c.k8s.Create(ctx, n); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	so := simulated.Options{Load: 0.2}
	local := config.Default()
	ro := Options{Config: c.env.Config, NodeName: node, Heartbeat: time.Hour, MinInterval: time.Hour}
	for _, o := range opts {
		o(&so, &local, &ro)
	}
	checked, err := config.Check(local)
	if err != nil {
		t.Fatal(err)
	}
	b := &bladeUnderTest{t: t, c: c, node: node, blade: simulated.New(so)}
	var backend hardware.Backend = b.blade
	if so.FanUnit == "not-a-blade" {
		backend = notABlade{b.blade}
	}
	b.agent, err = agent.New(agent.Options{Backend: backend, Settings: checked.Settings, SampleInterval: 50 * time.Millisecond, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	ro.Agent, ro.Local = b.agent, checked
	if b.rep, err = New(ro); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	agentDone, repDone := make(chan struct{}), make(chan struct{})
	go func() { defer close(agentDone); _ = b.agent.Run(ctx) }()
	go func() { defer close(repDone); _ = b.rep.Run(ctx) }()
	stopped := false
	b.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		<-agentDone
		<-repDone
	}
	t.Cleanup(b.stop)
	return b
}

type notABlade struct{ *simulated.Blade }

func (n notABlade) Info() hardware.Info {
	i := n.Blade.Info()
	i.IsBlade, i.SoC = false, ""
	return i
}

func (b *bladeUnderTest) getNode() *corev1.Node {
	n := &corev1.Node{}
	if err := b.c.k8s.Get(context.Background(), client.ObjectKey{Name: b.node}, n); err != nil {
		b.t.Fatal(err)
	}
	return n
}

func (b *bladeUnderTest) annotate(kv map[string]*string) {
	b.t.Helper()
	ann := map[string]any{}
	for k, v := range kv {
		if v == nil {
			ann[k] = nil
		} else {
			ann[k] = *v
		}
	}
	patch := client.RawPatch("application/merge-patch+json", mustJSON(map[string]any{"metadata": map[string]any{"annotations": ann}}))
	if err := b.c.k8s.Patch(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: b.node}}, patch); err != nil {
		b.t.Fatal(err)
	}
}

func (b *bladeUnderTest) getBlade() (*v1alpha1.Blade, error) {
	bl := &v1alpha1.Blade{}
	return bl, b.c.k8s.Get(context.Background(), client.ObjectKey{Name: b.node}, bl)
}

// events lists the Events about this blade's Node with the given reason.
func (b *bladeUnderTest) events(reason string) []eventsv1.Event {
	b.t.Helper()
	l := &eventsv1.EventList{}
	if err := b.c.k8s.List(context.Background(), l, client.InNamespace("default")); err != nil {
		b.t.Fatal(err)
	}
	var out []eventsv1.Event
	for _, e := range l.Items {
		if e.Regarding.Name == b.node && e.Regarding.Kind == "Node" && e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

func (b *bladeUnderTest) waitEvent(reason string) eventsv1.Event {
	b.t.Helper()
	var got []eventsv1.Event
	testwait.Eventually(b.t, waitTimeout, "Event "+reason, func(context.Context) (bool, string) {
		got = b.events(reason)
		return len(got) > 0, fmt.Sprint(len(got))
	})
	return got[0]
}

func ptr(s string) *string { return &s }

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func clientKey(name string) client.ObjectKey { return client.ObjectKey{Name: name} }
