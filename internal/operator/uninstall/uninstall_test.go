package uninstall_test

import (
	"os"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	kbv1 "github.com/kubeblade/kubeblade/api/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/operator/agentdaemonset"
	"github.com/kubeblade/kubeblade/internal/operator/optest"
	"github.com/kubeblade/kubeblade/internal/operator/uninstall"
)

// No operator runs: uninstall is documented to run after it stopped.
var suite = optest.NewSuite(nil)

func TestMain(m *testing.M) { os.Exit(suite.Run(m)) }

func TestUninstall(t *testing.T) {
	e := suite.Need(t)
	n := optest.Node("un-1", map[string]string{kbv1.LabelSoC: "bcm2711", kbv1.LabelBlade: "true", kbv1.LabelConfig: "un", "keep": "me"})
	n.Spec.Taints = []corev1.Taint{{Key: kbv1.TaintThermalCritical, Effect: corev1.TaintEffectNoSchedule}, {Key: "other", Effect: corev1.TaintEffectNoSchedule}}
	bc := optest.Config("un", 0, nil)
	controllerutil.AddFinalizer(bc, kbv1.FinalizerCleanup)
	e.CreateAll(t, n, bc, optest.Node("un-untouched", map[string]string{"keep": "me"}))
	n.Status.Conditions = []corev1.NodeCondition{{Type: kbv1.NodeConditionThermalCritical, Status: corev1.ConditionTrue}, {Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	if err := e.Client.Status().Update(optest.Ctx(t), n); err != nil {
		t.Fatal(err)
	}
	d := e.Options.DaemonSet
	d.Namespace = optest.Namespace
	if err := e.Client.Apply(optest.Ctx(t), agentdaemonset.Build(e.GetConfig(t, "un"), d), client.FieldOwner("test")); err != nil {
		t.Fatal(err)
	}

	rep, err := uninstall.Uninstall(optest.Ctx(t), e.Client, optest.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	if want := (uninstall.Report{DaemonSets: 1, Finalizers: 1, Nodes: 2, NodeChanges: 1}); rep != want {
		t.Errorf("report %+v, want %+v", rep, want)
	}
	got := &corev1.Node{}
	if err := e.Client.Get(optest.Ctx(t), types.NamespacedName{Name: "un-1"}, got); err != nil {
		t.Fatal(err)
	}
	for k := range got.Labels {
		if strings.HasPrefix(k, uninstall.Prefix) {
			t.Errorf("label %s left behind", k)
		}
	}
	taints := map[string]bool{}
	for _, tn := range got.Spec.Taints {
		taints[tn.Key] = true
	}
	if got.Labels["keep"] != "me" || taints[kbv1.TaintThermalCritical] || !taints["other"] ||
		len(got.Status.Conditions) != 1 || got.Status.Conditions[0].Type != corev1.NodeReady {
		t.Errorf("uninstall touched what is not kubeblade's or left kubeblade's: %v %v %v", got.Labels, got.Spec.Taints, got.Status.Conditions)
	}
	if bc := e.GetConfig(t, "un"); len(bc.Finalizers) != 0 {
		t.Errorf("finalizers left: %v", bc.Finalizers)
	}
	err = e.Client.Get(optest.Ctx(t), types.NamespacedName{Namespace: optest.Namespace, Name: agentdaemonset.Name("un")}, &appsv1.DaemonSet{})
	if client.IgnoreNotFound(err) != nil || err == nil {
		t.Errorf("agent DaemonSet left (err %v)", err)
	}

	// Idempotent: a second run changes nothing.
	rep, err = uninstall.Uninstall(optest.Ctx(t), e.Client, optest.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	if want := (uninstall.Report{Nodes: 2}); rep != want {
		t.Errorf("second run: report %+v, want %+v", rep, want)
	}
}
