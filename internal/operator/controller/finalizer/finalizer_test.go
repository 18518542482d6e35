package finalizer_test

import (
	"context"
	"maps"
	"os"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbv1 "github.com/kubeblade/kubeblade/api/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/operator"
	"github.com/kubeblade/kubeblade/internal/operator/agentdaemonset"
	"github.com/kubeblade/kubeblade/internal/operator/controller/finalizer"
	"github.com/kubeblade/kubeblade/internal/operator/optest"
	"github.com/kubeblade/kubeblade/internal/testwait"
)

// The finalizer controller runs alone: the tests label Nodes and apply the
// DaemonSet themselves.
var suite = optest.NewSuite(func(_ context.Context, mgr ctrl.Manager, o operator.Options) error {
	return (&finalizer.Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder(operator.Name), Namespace: o.Namespace}).SetupWithManager(mgr)
})

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
	testwait.Eventually(t, optest.Timeout, "the finalizer", func(ctx context.Context) (bool, string) {
		bc := &kbv1.BladeConfig{}
		if err := e.Client.Get(ctx, types.NamespacedName{Name: "fin"}, bc); err != nil {
			return false, err.Error()
		}
		return slices.Equal(bc.Finalizers, []string{kbv1.FinalizerCleanup}), ""
	})
	d := e.Options.DaemonSet
	d.Namespace = optest.Namespace
	if err := e.Client.Apply(optest.Ctx(t), agentdaemonset.Build(e.GetConfig(t, "fin"), d), client.FieldOwner("test")); err != nil {
		t.Fatal(err)
	}

	if err := e.Client.Delete(optest.Ctx(t), e.GetConfig(t, "fin")); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, optest.Timeout, "the BladeConfig gone", func(ctx context.Context) (bool, string) {
		err := e.Client.Get(ctx, types.NamespacedName{Name: "fin"}, &kbv1.BladeConfig{})
		if err == nil {
			return false, "still there"
		}
		return client.IgnoreNotFound(err) == nil, err.Error()
	})
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
