// Package finalizer is the controller that holds every BladeConfig with the
// kubeblade.io/cleanup finalizer and, when one is deleted, takes its agent
// DaemonSet and its kubeblade.io/config Node labels with it.
package finalizer

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/keymutex"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	kbv1 "github.com/kubeblade/kubeblade/api/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/operator/agentdaemonset"
	"github.com/kubeblade/kubeblade/internal/operator/nodemeta"
)

const (
	// ControllerName names the finalizer controller.
	ControllerName = "bladeconfig-finalizer"
	// Finalizer holds a BladeConfig until its DaemonSet and labels are gone.
	Finalizer = kbv1.FinalizerCleanup
	// FieldManager is used for the label removals.
	FieldManager = "kubeblade-operator-cleanup"
)

// Event reasons.
const (
	ReasonCleanedUp = "CleanedUp"
)

// +kubebuilder:rbac:groups=kubeblade.io,resources=bladeconfigs,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=kubeblade.io,resources=bladeconfigs/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=apps,namespace=kubeblade-system,resources=daemonsets,verbs=get;list;watch;delete

// Reconciler adds the finalizer to BladeConfigs and, on deletion, removes
// the config's DaemonSet and its label from Nodes before letting go.
type Reconciler struct {
	Client client.Client
	// APIReader reads past the cache: finalize checks with it that the
	// DaemonSet is really gone before it lets the BladeConfig go. Nil
	// skips that check.
	APIReader client.Reader
	// Cleanup, shared with the daemonset controller, is held per
	// BladeConfig name while a deleted BladeConfig's DaemonSet is removed
	// and the BladeConfig let go; that controller holds it from its last
	// check that the BladeConfig is not being deleted to the end of its
	// apply. Nil locks nothing.
	Cleanup   keymutex.KeyMutex
	Recorder  events.EventRecorder
	Namespace string
}

// recheckAfter is how soon finalize runs again when the DaemonSet came back.
const recheckAfter = time.Second

// SetupWithManager registers the controller.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named(ControllerName).For(&kbv1.BladeConfig{}).Complete(r)
}

// Reconcile adds or honours the finalizer.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	bc := &kbv1.BladeConfig{}
	if err := r.Client.Get(ctx, req.NamespacedName, bc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if bc.DeletionTimestamp.IsZero() {
		if controllerutil.ContainsFinalizer(bc, Finalizer) {
			return ctrl.Result{}, nil
		}
		orig := bc.DeepCopy()
		controllerutil.AddFinalizer(bc, Finalizer)
		return ctrl.Result{}, client.IgnoreNotFound(r.Client.Patch(ctx, bc, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})))
	}
	if !controllerutil.ContainsFinalizer(bc, Finalizer) {
		return ctrl.Result{}, nil
	}
	if r.Cleanup != nil {
		r.Cleanup.LockKey(bc.Name)
		// keymutex.NewHashed's UnlockKey never fails.
		defer func() { _ = r.Cleanup.UnlockKey(bc.Name) }()
	}
	again, err := r.finalize(ctx, bc)
	if err != nil || !again {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: recheckAfter}, nil
}

// finalize removes the DaemonSet and the labels, then the finalizer. It
// reports again when the DaemonSet was there once more at the end, deleted
// again, and the finalizer kept for another pass.
func (r *Reconciler) finalize(ctx context.Context, bc *kbv1.BladeConfig) (again bool, _ error) {
	log := logf.FromContext(ctx)
	// The DaemonSet first, so no agent runs on a Node about to lose its label.
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: r.Namespace, Name: agentdaemonset.Name(bc.Name)}}
	if err := r.deleteDaemonSet(ctx, ds); err != nil {
		return false, err
	}
	// The assignment controller no longer gives Nodes to a config being
	// deleted (it may move them to another one); Nodes still carrying this
	// name lose it here, but only if they still carry exactly this name.
	nodes := nodemeta.List()
	if err := r.Client.List(ctx, nodes, client.MatchingLabels{kbv1.LabelConfig: bc.Name}); err != nil {
		return false, err
	}
	for i := range nodes.Items {
		if err := nodemeta.RemoveLabelIf(ctx, r.Client, nodes.Items[i].Name, kbv1.LabelConfig, bc.Name, client.FieldOwner(FieldManager)); err != nil {
			return false, fmt.Errorf("node %s: %w", nodes.Items[i].Name, err)
		}
	}
	// The daemonset controller skips BladeConfigs being deleted, and under
	// Cleanup it checks with the API server right before it applies, so an
	// apply of its ends before the delete above or sees the deletion. An
	// apply from anywhere else (another operator process during a leader
	// handover, a hand-made DaemonSet) can still land after that delete. A
	// garbage collector would take such a DaemonSet with its owner; this
	// does not count on one (envtest has none), so the BladeConfig goes
	// only once its DaemonSet has.
	back, err := r.daemonSetBack(ctx, ds)
	if err != nil {
		return false, err
	}
	if back {
		log.Info("the DaemonSet of a BladeConfig being deleted came back; deleting it again", "daemonSet", ds.Name)
		return true, r.deleteDaemonSet(ctx, ds)
	}
	orig := bc.DeepCopy()
	controllerutil.RemoveFinalizer(bc, Finalizer)
	if err := r.Client.Patch(ctx, bc, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); client.IgnoreNotFound(err) != nil {
		return false, err
	}
	log.Info("removed the DaemonSet and node labels of a deleted BladeConfig", "nodes", len(nodes.Items))
	if r.Recorder != nil {
		r.Recorder.Eventf(bc, nil, corev1.EventTypeNormal, ReasonCleanedUp, "Delete", "Deleted DaemonSet %s/%s and unlabelled %d node(s)", r.Namespace, ds.Name, len(nodes.Items))
	}
	return false, nil
}

func (r *Reconciler) deleteDaemonSet(ctx context.Context, ds *appsv1.DaemonSet) error {
	if err := r.Client.Delete(ctx, ds, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting DaemonSet: %w", err)
	}
	return nil
}

// daemonSetBack reports whether the API server (not the cache, which may
// not have seen it) has the DaemonSet again, not being deleted.
func (r *Reconciler) daemonSetBack(ctx context.Context, ds *appsv1.DaemonSet) (bool, error) {
	if r.APIReader == nil {
		return false, nil
	}
	live := &appsv1.DaemonSet{}
	err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(ds), live)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("checking the DaemonSet is gone: %w", err)
	}
	return live.DeletionTimestamp.IsZero(), nil
}
