package maintenance_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crconfig "sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	kbv1 "github.com/kubeblade/kubeblade/api/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/fakekubelet"
	"github.com/kubeblade/kubeblade/internal/operator"
	"github.com/kubeblade/kubeblade/internal/operator/controller/maintenance"
	"github.com/kubeblade/kubeblade/internal/operator/optest"
	"github.com/kubeblade/kubeblade/internal/testwait"
)

// The suite starts no shared manager: each test runs the maintenance
// controller in its own manager, so one can stop and restart it mid-drain
// as an operator rollout would.
var suite = optest.NewSuite(nil)

func TestMain(m *testing.M) { os.Exit(suite.Run(m)) }

// operatorProcess is one run of the maintenance controller.
type operatorProcess struct {
	*maintenance.Reconciler
	cancel context.CancelFunc
	done   chan error
}

// startOperator runs the maintenance controller (and only it) as the
// operator would: the operator's cache settings, metadata-only Nodes.
func startOperator(t *testing.T, e *optest.Env) *operatorProcess {
	t.Helper()
	skip := true
	mgr, err := ctrl.NewManager(e.Config, operator.ManagerOptions(e.Options, ctrl.Options{
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             crconfig.Controller{SkipNameValidation: &skip},
	}))
	if err != nil {
		t.Fatal(err)
	}
	r := &maintenance.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(),
		Recorder: mgr.GetEventRecorder(operator.Name), Clock: clock.RealClock{}, PassInterval: 200 * time.Millisecond}
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &operatorProcess{Reconciler: r, cancel: cancel, done: make(chan error, 1)}
	go func() { p.done <- mgr.Start(ctx) }()
	t.Cleanup(p.stop)
	return p
}

func (p *operatorProcess) stop() {
	if p.cancel != nil {
		p.cancel()
		<-p.done
		p.cancel = nil
	}
}

// kubelet plays the kubelet of nodes: registers them Ready and removes
// evicted (terminating) pods, as a real one does once their containers
// stopped.
func kubelet(t *testing.T, e *optest.Env, nodes ...string) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(e.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() { done <- fakekubelet.Run(ctx, fakekubelet.Options{Client: cs, Nodes: nodes}, ready) }()
	t.Cleanup(func() {
		cancel()
		<-done
		// The suite's tests share one API server and maxConcurrent counts
		// cluster-wide: a blade left in maintenance would hold a slot in
		// the next test. Clear as an administrator would.
		clear := map[string]any{kbv1.AnnotationMaintenance: nil}
		for _, k := range []string{kbv1.AnnotationMaintenanceState, kbv1.AnnotationMaintenanceRequestedAt,
			kbv1.AnnotationMaintenanceDrainStartedAt, kbv1.AnnotationMaintenanceCordoned} {
			clear[k] = nil
		}
		for _, n := range nodes {
			patch := client.RawPatch(types.MergePatchType, []byte(mustJSON(map[string]any{
				"metadata": map[string]any{"annotations": clear}, "spec": map[string]any{"unschedulable": false}})))
			_ = e.Client.Patch(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, patch)
		}
	})
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("fake kubelet: %v", err)
	}
}

// bladeConfig creates a BladeConfig with the given maintenance settings and
// assigns nodes to it (the assignment controller's job, done by hand).
func bladeConfig(t *testing.T, e *optest.Env, name string, m kbv1.MaintenanceSpec, nodes ...string) {
	t.Helper()
	bc := &kbv1.BladeConfig{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: kbv1.BladeConfigSpec{Maintenance: m}}
	e.CreateAll(t, bc)
	for _, n := range nodes {
		e.PatchLabels(t, n, map[string]string{kbv1.LabelConfig: name})
	}
}

func annotate(t *testing.T, e *optest.Env, node string, kv map[string]any) {
	t.Helper()
	patch := client.RawPatch(types.MergePatchType, []byte(mustJSON(map[string]any{"metadata": map[string]any{"annotations": kv}})))
	if err := e.Client.Patch(optest.Ctx(t), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, patch); err != nil {
		t.Fatal(err)
	}
}

func getNode(t *testing.T, e *optest.Env, name string) *corev1.Node {
	t.Helper()
	n := &corev1.Node{}
	if err := e.Client.Get(optest.Ctx(t), client.ObjectKey{Name: name}, n); err != nil {
		t.Fatal(err)
	}
	return n
}

func waitState(t *testing.T, e *optest.Env, node, want string) *corev1.Node {
	t.Helper()
	var n *corev1.Node
	testwait.Eventually(t, optest.Timeout, fmt.Sprintf("%s maintenance-state %q", node, want), func(ctx context.Context) (bool, string) {
		n = &corev1.Node{}
		if err := e.Client.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
			return false, err.Error()
		}
		got := n.Annotations[kbv1.AnnotationMaintenanceState]
		return got == want, fmt.Sprintf("%q", got)
	})
	return n
}

// pod kinds for the fixtures.
type podKind int

const (
	replicated podKind = iota
	daemonSet
	mirror
	withEmptyDir
	bare
)

// createPod binds a pod of the given kind to node, as the scheduler would.
func createPod(t *testing.T, e *optest.Env, ns, name, node string, kind podKind, labels map[string]string) {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "registry.example/app:1"}},
			AutomountServiceAccountToken: ptr.To(false)},
	}
	owner := func(kind string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: name + "-owner", UID: types.UID("uid-" + name), Controller: ptr.To(true)}}
	}
	switch kind {
	case replicated:
		p.OwnerReferences = owner("ReplicaSet")
	case daemonSet:
		p.OwnerReferences = owner("DaemonSet")
	case mirror:
		p.Annotations = map[string]string{"kubernetes.io/config.mirror": "hash"}
	case withEmptyDir:
		p.OwnerReferences = owner("ReplicaSet")
		p.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	}
	e.CreateAll(t, p)
}

func namespace(t *testing.T, e *optest.Env, name string) {
	t.Helper()
	e.CreateAll(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
}

// budget creates a PodDisruptionBudget over pods labelled app=name and
// plays the disruption controller (kube-controller-manager, not part of
// envtest) by writing its status: allowed disruptions, observed current.
// The API server's eviction endpoint reads exactly that status.
func budget(t *testing.T, e *optest.Env, ns, name string, allowed int32) {
	t.Helper()
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}}}
	e.CreateAll(t, pdb)
	setBudget(t, e, ns, name, allowed)
}

func setBudget(t *testing.T, e *optest.Env, ns, name string, allowed int32) {
	t.Helper()
	pdb := &policyv1.PodDisruptionBudget{}
	if err := e.Client.Get(optest.Ctx(t), client.ObjectKey{Namespace: ns, Name: name}, pdb); err != nil {
		t.Fatal(err)
	}
	pdb.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: pdb.Generation, DisruptionsAllowed: allowed,
		CurrentHealthy: 1, DesiredHealthy: 1, ExpectedPods: 1}
	if err := e.Client.Status().Update(optest.Ctx(t), pdb); err != nil {
		t.Fatal(err)
	}
}

func podNames(t *testing.T, e *optest.Env, node string) []string {
	t.Helper()
	l := &corev1.PodList{}
	if err := e.Client.List(optest.Ctx(t), l); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range l.Items {
		if p.Spec.NodeName == node {
			out = append(out, p.Namespace+"/"+p.Name)
		}
	}
	return out
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func deletePod(t *testing.T, e *optest.Env, ns, name string) {
	t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := e.Client.Delete(optest.Ctx(t), p, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
}

// cordon marks the Node unschedulable as `kubectl cordon` does.
func cordon(t *testing.T, e *optest.Env, node string) {
	t.Helper()
	patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"unschedulable":true}}`))
	if err := e.Client.Patch(optest.Ctx(t), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, patch); err != nil {
		t.Fatal(err)
	}
}
