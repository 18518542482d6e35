package finalizer_test

import (
	"context"
	"maps"
	"os"
	"slices"
	"sync/atomic"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/keymutex"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbv1 "github.com/kubeblade/kubeblade/api/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/operator"
	"github.com/kubeblade/kubeblade/internal/operator/agentdaemonset"
	"github.com/kubeblade/kubeblade/internal/operator/controller/daemonset"
	"github.com/kubeblade/kubeblade/internal/operator/controller/finalizer"
	"github.com/kubeblade/kubeblade/internal/operator/optest"
	"github.com/kubeblade/kubeblade/internal/testwait"
)

// The finalizer controller runs alone: the tests label Nodes and apply the
// DaemonSet themselves, or run the daemonset controller's Reconcile.
var suite = optest.NewSuite(func(_ context.Context, mgr ctrl.Manager, o operator.Options) error {
	return (&finalizer.Reconciler{Client: hookedClient{mgr.GetClient()}, APIReader: mgr.GetAPIReader(), Cleanup: cleanup,
		Recorder: mgr.GetEventRecorder(operator.Name), Namespace: o.Namespace}).SetupWithManager(mgr)
})

// cleanup is the lock the finalizer controller shares with the daemonset
// controller, as operator.Setup shares one.
var cleanup = keymutex.NewHashed(0)

// listHook, when set, runs before each List the reconciler makes: a test's
// way to land a write between the finalizer's steps.
var listHook atomic.Pointer[func(context.Context, client.ObjectList)]

// hookedClient is the manager's client with listHook in its List.
type hookedClient struct{ client.Client }

func (c hookedClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if h := listHook.Load(); h != nil {
		(*h)(ctx, list)
	}
	return c.Client.List(ctx, list, opts...)
}

func TestMain(m *testing.M) { os.Exit(suite.Run(m)) }

func TestDeletionRemovesDaemonSetAndLabels(t *testing.T) {
	e := suite.Need(t)
	sel := map[string]string{"kbtest": "fin"}
	e.CreateAll(t,
		optest.Node("fin-1", map[string]string{"kbtest": "fin", kbv1.LabelConfig: "fin"}),
		optest.Node("fin-2", map[string]string{"kbtest": "fin", kbv1.LabelConfig: "fin"}),
		// Already given to another config: not this one's to unlabel.
		optest.Node("fin-3", map[string]string{"kbtest": "fin", kbv1.LabelConfig: "fin-other"}),
		optest.Config("fin", 0, sel),
	)
	waitFinalizer(t, e, "fin")
	d := e.Options.DaemonSet
	d.Namespace = optest.Namespace
	if err := e.Client.Apply(optest.Ctx(t), agentdaemonset.Build(e.GetConfig(t, "fin"), d), client.FieldOwner("test")); err != nil {
		t.Fatal(err)
	}

	deleteConfig(t, e, "fin")
	// envtest runs no garbage collector: the DaemonSet is gone because the
	// controller deleted it, not through its owner reference.
	err := e.Client.Get(optest.Ctx(t), types.NamespacedName{Namespace: optest.Namespace, Name: agentdaemonset.Name("fin")}, &appsv1.DaemonSet{})
	if client.IgnoreNotFound(err) != nil || err == nil {
		t.Errorf("DaemonSet still there (err %v)", err)
	}
	got, err := e.ConfigLabels(optest.Ctx(t), "fin-1", "fin-2", "fin-3")
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"fin-1": "", "fin-2": "", "fin-3": "fin-other"}; !maps.Equal(got, want) {
		t.Errorf("labels after the deletion %v, want %v", got, want)
	}
	e.WaitEvent(t, "BladeConfig", "fin", finalizer.ReasonCleanedUp)
}

// TestDaemonSetBackDuringDeletion: a daemonset-controller reconcile that
// read the BladeConfig before its deletion may apply the DaemonSet after the
// finalizer deleted it (seen under load in make test). Here that apply lands
// while the finalizer unlabels the Nodes; envtest runs no garbage collector,
// so the DaemonSet is gone at the end only if the finalizer deleted it again
// before letting the BladeConfig go.
func TestDaemonSetBackDuringDeletion(t *testing.T) {
	e := suite.Need(t)
	sel := map[string]string{"kbtest": "fin-back"}
	e.CreateAll(t,
		optest.Node("fin-back-1", map[string]string{"kbtest": "fin-back", kbv1.LabelConfig: "fin-back"}),
		optest.Config("fin-back", 0, sel),
	)
	waitFinalizer(t, e, "fin-back")
	d := e.Options.DaemonSet
	d.Namespace = optest.Namespace
	cfg := e.GetConfig(t, "fin-back")
	// Apply fills in what the server returns (its uid among it), so the
	// second apply, of a DaemonSet deleted meanwhile, gets its own copy.
	ds, again := agentdaemonset.Build(cfg, d), agentdaemonset.Build(cfg, d)
	if err := e.Client.Apply(optest.Ctx(t), ds, client.FieldOwner("test")); err != nil {
		t.Fatal(err)
	}
	var reapplied atomic.Int32
	hook := func(ctx context.Context, list client.ObjectList) {
		if _, nodes := list.(*metav1.PartialObjectMetadataList); !nodes || reapplied.Load() > 0 {
			return
		}
		if err := e.Client.Apply(ctx, again, client.FieldOwner("test")); err != nil {
			t.Errorf("re-applying the DaemonSet: %v", err)
		}
		reapplied.Add(1)
	}
	listHook.Store(&hook)
	t.Cleanup(func() { listHook.Store(nil) })

	deleteConfig(t, e, "fin-back")
	if reapplied.Load() != 1 {
		t.Fatalf("the DaemonSet was re-applied %d times during the deletion, want 1: the test did not hit the window", reapplied.Load())
	}
	err := e.Client.Get(optest.Ctx(t), types.NamespacedName{Namespace: optest.Namespace, Name: agentdaemonset.Name("fin-back")}, &appsv1.DaemonSet{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("the DaemonSet applied during the deletion outlived its BladeConfig (get: %v)", err)
	}
}

// TestStaleReadAppliesNothing: a daemonset-controller reconcile that read
// the BladeConfig from its cache before the deletion reaches its apply only
// after the finalizer let the BladeConfig go (test/security's
// TestOperatorAppliesUnderThePolicy once saw the DaemonSet outlive its
// BladeConfig by a minute, in a cold CI run of 8f44781). The reconcile runs
// here on a client whose BladeConfig reads return what the API server had
// before the whole deletion, which lands during that read. envtest runs no
// garbage collector, so a DaemonSet applied then would stay.
func TestStaleReadAppliesNothing(t *testing.T) {
	e := suite.Need(t)
	const name = "fin-stale"
	e.CreateAll(t, optest.Config(name, 0, map[string]string{"kbtest": name}))
	waitFinalizer(t, e, name)

	var deletions int
	stale := staleReads{Client: e.Client, during: func() {
		deletions++
		if deletions == 1 {
			deleteConfig(t, e, name)
		}
	}}
	d := e.Options.DaemonSet
	d.Namespace = optest.Namespace
	r := &daemonset.Reconciler{Client: stale, APIReader: e.Client, Cleanup: cleanup, Defaults: d, Images: e.Options.AgentImages}
	if _, err := r.Reconcile(optest.Ctx(t), ctrl.Request{NamespacedName: types.NamespacedName{Name: name}}); err != nil {
		t.Errorf("reconcile: %v", err)
	}
	if deletions != 1 {
		t.Fatalf("the reconcile read the BladeConfig %d times, want 1: the test did not land the deletion in its read", deletions)
	}
	ds := &appsv1.DaemonSet{}
	err := e.Client.Get(optest.Ctx(t), types.NamespacedName{Namespace: optest.Namespace, Name: agentdaemonset.Name(name)}, ds)
	if err == nil {
		t.Errorf("the daemonset controller applied DaemonSet %s (controller %v) after its BladeConfig was gone; it outlives it", ds.Name, metav1.GetControllerOf(ds))
	} else if !apierrors.IsNotFound(err) {
		t.Errorf("reading the DaemonSet: %v", err)
	}
}

// staleReads is a client whose reads of BladeConfigs return what the API
// server had before during ran, as a cache behind the API server does.
type staleReads struct {
	client.Client
	during func()
}

func (c staleReads) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	err := c.Client.Get(ctx, key, obj, opts...)
	if _, config := obj.(*kbv1.BladeConfig); config && err == nil {
		c.during()
	}
	return err
}

// waitFinalizer waits until BladeConfig name carries the cleanup finalizer.
func waitFinalizer(t *testing.T, e *optest.Env, name string) {
	t.Helper()
	testwait.Eventually(t, optest.Timeout, "the finalizer", func(ctx context.Context) (bool, string) {
		bc := &kbv1.BladeConfig{}
		if err := e.Client.Get(ctx, types.NamespacedName{Name: name}, bc); err != nil {
			return false, err.Error()
		}
		return slices.Equal(bc.Finalizers, []string{kbv1.FinalizerCleanup}), ""
	})
}

// deleteConfig deletes BladeConfig name and waits until the finalizer has
// let it go.
func deleteConfig(t *testing.T, e *optest.Env, name string) {
	t.Helper()
	if err := e.Client.Delete(optest.Ctx(t), e.GetConfig(t, name)); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, optest.Timeout, "the BladeConfig gone", func(ctx context.Context) (bool, string) {
		err := e.Client.Get(ctx, types.NamespacedName{Name: name}, &kbv1.BladeConfig{})
		if err == nil {
			return false, "still there"
		}
		return client.IgnoreNotFound(err) == nil, err.Error()
	})
}
