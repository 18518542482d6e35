// Package optest is what the operator's envtest suites share: a control
// plane with kubeblade's CRDs and the operator's namespace, a manager with
// the operator's cache settings that runs only the controllers a suite
// registers (so each controller is tested alone), and small helpers to
// create and wait for objects. Only tests import it.
package optest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crconfig "sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	kbv1 "github.com/kubeblade/kubeblade/api/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/operator"
	"github.com/kubeblade/kubeblade/internal/testenv"
	"github.com/kubeblade/kubeblade/internal/testwait"
)

// Namespace is the operator's namespace in every suite.
const Namespace = "kubeblade-system"

// Timeout bounds every wait: long enough for a loaded 2-core machine,
// short enough that a broken controller fails the run rather than hangs it.
const Timeout = 30 * time.Second

// Register adds the controllers under test to mgr.
type Register func(ctx context.Context, mgr ctrl.Manager, o operator.Options) error

// Env is a started suite.
type Env struct {
	*testenv.Env
	// Client talks to the API server directly, without a cache, so a test
	// reads what is stored.
	Client client.Client
	// Options are those the controllers were registered with.
	Options operator.Options

	agentRBAC sync.Once
}

// Suite is one package's control plane and manager.
type Suite struct {
	ts  *testenv.Suite
	env *Env
}

// NewSuite returns a suite whose manager runs what register adds. A nil
// register starts no manager (for tests of the API server's own rules).
func NewSuite(register Register) *Suite {
	s := &Suite{}
	// The suites' tests use fixed names (Nodes, BladeConfigs), so each run
	// of go test -count=N gets its own control plane and manager.
	s.ts = testenv.NewSuite(testenv.Options{CRDDirs: []string{"config/crd/bases"}, FreshEachRun: true}, func(ctx context.Context, e *testenv.Env) error {
		env, err := start(ctx, e, register)
		s.env = env
		return err
	})
	return s
}

// Run is the package's TestMain body.
func (s *Suite) Run(m *testing.M) int { return s.ts.Run(m) }

// Need returns the started suite, or skips (fails under
// KUBEBLADE_TEST_REQUIRED=1) when the control-plane binaries are missing.
func (s *Suite) Need(t testing.TB) *Env {
	t.Helper()
	s.ts.Need(t)
	return s.env
}

func start(ctx context.Context, e *testenv.Env, register Register) (*Env, error) {
	ctrl.SetLogger(logr.Discard())
	c, err := client.New(e.Config, client.Options{Scheme: operator.Scheme()})
	if err != nil {
		return nil, err
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}); err != nil {
		return nil, err
	}
	o := operator.DefaultOptions()
	o.Namespace = Namespace
	o.DaemonSet.Namespace = Namespace
	o.DaemonSet.Image = "ghcr.io/kubeblade/kubeblade:test"
	// Tests name custom agent images from example.com/agent.
	o.AgentImages = append(o.AgentImages, "example.com/agent")
	o.Clock = clock.RealClock{}
	env := &Env{Env: e, Client: c, Options: o}
	if register == nil {
		return env, nil
	}
	skip := true
	mgr, err := ctrl.NewManager(e.Config, operator.ManagerOptions(o, ctrl.Options{
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// Controller names are global to a process; each suite has one
		// manager, but a failed start must not poison a retry.
		Controller: crconfig.Controller{SkipNameValidation: &skip},
	}))
	if err != nil {
		return nil, err
	}
	if err := register(ctx, mgr, o); err != nil {
		return nil, err
	}
	go func() {
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "optest: manager:", err)
			os.Exit(1)
		}
	}()
	syncCtx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	if !mgr.GetCache().WaitForCacheSync(syncCtx) {
		return nil, fmt.Errorf("the manager's cache did not sync within %s", Timeout)
	}
	return env, nil
}

// Ctx is a context for one API call or wait, ending with the test.
func Ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(t.Context(), 2*Timeout)
	t.Cleanup(cancel)
	return c
}

// Node is a Node object to create.
func Node(name string, labels map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

// Config is a BladeConfig with a priority and a matchLabels selector.
func Config(name string, prio int32, sel map[string]string) *kbv1.BladeConfig {
	return &kbv1.BladeConfig{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       kbv1.BladeConfigSpec{Priority: prio, NodeSelector: &metav1.LabelSelector{MatchLabels: sel}},
	}
}

// CreateAll creates objs, failing the test on the first error.
func (e *Env) CreateAll(t testing.TB, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := e.Client.Create(Ctx(t), o); err != nil {
			t.Fatalf("creating %s: %v", o.GetName(), err)
		}
	}
}

// GetConfig reads a BladeConfig.
func (e *Env) GetConfig(t testing.TB, name string) *kbv1.BladeConfig {
	t.Helper()
	bc := &kbv1.BladeConfig{}
	if err := e.Client.Get(Ctx(t), types.NamespacedName{Name: name}, bc); err != nil {
		t.Fatal(err)
	}
	return bc
}

// UpdateConfig changes a BladeConfig with a merge patch.
func (e *Env) UpdateConfig(t testing.TB, name string, change func(*kbv1.BladeConfig)) *kbv1.BladeConfig {
	t.Helper()
	bc := e.GetConfig(t, name)
	orig := bc.DeepCopy()
	change(bc)
	if err := e.Client.Patch(Ctx(t), bc, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
	return bc
}

// PatchLabels sets and removes labels of a Node.
func (e *Env) PatchLabels(t testing.TB, name string, set map[string]string, remove ...string) {
	t.Helper()
	n := &corev1.Node{}
	if err := e.Client.Get(Ctx(t), types.NamespacedName{Name: name}, n); err != nil {
		t.Fatal(err)
	}
	orig := n.DeepCopy()
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	for k, v := range set {
		n.Labels[k] = v
	}
	for _, k := range remove {
		delete(n.Labels, k)
	}
	if err := e.Client.Patch(Ctx(t), n, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
}

// ConfigLabels returns node name -> kubeblade.io/config label of the
// named Nodes ("" when absent).
func (e *Env) ConfigLabels(ctx context.Context, names ...string) (map[string]string, error) {
	out := map[string]string{}
	for _, n := range names {
		node := &corev1.Node{}
		if err := e.Client.Get(ctx, types.NamespacedName{Name: n}, node); err != nil {
			return nil, err
		}
		out[n] = node.Labels[kbv1.LabelConfig]
	}
	return out, nil
}

// WaitConfigLabels waits until the Nodes in want carry exactly these
// kubeblade.io/config labels, and fails with the last difference.
func (e *Env) WaitConfigLabels(t testing.TB, want map[string]string) {
	t.Helper()
	names := make([]string, 0, len(want))
	for n := range want {
		names = append(names, n)
	}
	slices.Sort(names)
	testwait.Eventually(t, Timeout, "kubeblade.io/config labels", func(ctx context.Context) (bool, string) {
		got, err := e.ConfigLabels(ctx, names...)
		if err != nil {
			return false, err.Error()
		}
		if diff := cmp.Diff(want, got); diff != "" {
			return false, "(-want +got)\n" + diff
		}
		return true, ""
	})
}

// WaitStatus waits until the BladeConfig's status observed its generation
// and cond holds, and returns it.
func (e *Env) WaitStatus(t testing.TB, name string, cond func(*kbv1.BladeConfig) bool) *kbv1.BladeConfig {
	t.Helper()
	var bc *kbv1.BladeConfig
	testwait.Eventually(t, Timeout, "the status of BladeConfig "+name, func(ctx context.Context) (bool, string) {
		bc = &kbv1.BladeConfig{}
		if err := e.Client.Get(ctx, types.NamespacedName{Name: name}, bc); err != nil {
			return false, err.Error()
		}
		return bc.Status.ObservedGeneration == bc.Generation && cond(bc),
			fmt.Sprintf("generation %d, observed %d, status %+v", bc.Generation, bc.Status.ObservedGeneration, bc.Status)
	})
	return bc
}

// Events lists the events.k8s.io Events regarding an object, by reason.
func (e *Env) Events(ctx context.Context, kind, name string) (map[string][]string, error) {
	evs, err := e.regarding(ctx, kind, name)
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, ev := range evs {
		out[ev.Reason] = append(out[ev.Reason], ev.Note)
	}
	return out, nil
}

func (e *Env) regarding(ctx context.Context, kind, name string) ([]eventsv1.Event, error) {
	var l eventsv1.EventList
	if err := e.Client.List(ctx, &l); err != nil {
		return nil, err
	}
	var out []eventsv1.Event
	for _, ev := range l.Items {
		if ev.Regarding.Kind == kind && ev.Regarding.Name == name {
			out = append(out, ev)
		}
	}
	return out, nil
}

// WaitEvent waits for an Event with reason regarding an object and
// returns its note. WaitEventOf also checks its type.
func (e *Env) WaitEvent(t testing.TB, kind, name, reason string) string {
	t.Helper()
	return e.waitEvent(t, "", kind, name, reason)
}

// WaitEventOf waits for an Event with reason regarding an object and
// returns its note; the test fails when the Event is not of type typ
// (corev1.EventTypeNormal or corev1.EventTypeWarning): a Warning is what
// `kubectl get events --field-selector type=Warning` and alerting on
// Events pick up, so it is part of the contract.
func (e *Env) WaitEventOf(t testing.TB, typ, kind, name, reason string) string {
	t.Helper()
	return e.waitEvent(t, typ, kind, name, reason)
}

func (e *Env) waitEvent(t testing.TB, typ, kind, name, reason string) string {
	t.Helper()
	var got eventsv1.Event
	testwait.Eventually(t, Timeout, fmt.Sprintf("a %s Event regarding %s %s", reason, kind, name), func(ctx context.Context) (bool, string) {
		evs, err := e.regarding(ctx, kind, name)
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, ev := range evs {
			if ev.Reason == reason {
				got = ev
				return true, ""
			}
			seen = append(seen, ev.Type+" "+ev.Reason+": "+ev.Note)
		}
		return false, fmt.Sprintf("events: %v", seen)
	})
	if typ != "" && got.Type != typ {
		t.Errorf("%s Event regarding %s %s is of type %q, want %q (note %q)", reason, kind, name, got.Type, typ, got.Note)
	}
	return got.Note
}

// ApplyYAML creates the objects of a manifest under the repository root.
func (e *Env) ApplyYAML(t testing.TB, rel string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), rel))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range splitYAML(string(b)) {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
		if len(u.Object) == 0 {
			continue
		}
		if err := e.Client.Create(Ctx(t), u); err != nil {
			t.Fatalf("%s: creating %s %s: %v", rel, u.GetKind(), u.GetName(), err)
		}
	}
}

// splitYAML splits a multi-document manifest at its "---" lines.
func splitYAML(s string) []string {
	var docs []string
	var cur strings.Builder
	for _, line := range strings.Split(s, "\n") {
		if strings.TrimRight(line, " ") == "---" {
			docs = append(docs, cur.String())
			cur.Reset()
			continue
		}
		cur.WriteString(line)
		cur.WriteByte('\n')
	}
	return append(docs, cur.String())
}

// AgentUser is the user name of the agents' ServiceAccount in every suite.
const AgentUser = "system:serviceaccount:" + Namespace + ":kubeblade-agent"

// Impersonate returns a config acting as the agent of node: its
// ServiceAccount with a token bound to a pod on node.
func (e *Env) Impersonate(node string) *rest.Config {
	cfg := rest.CopyConfig(e.Config)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: AgentUser,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + Namespace, "system:authenticated"},
		Extra:    map[string][]string{"authentication.kubernetes.io/node-name": {node}},
	}
	return cfg
}
