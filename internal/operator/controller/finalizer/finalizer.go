// Package finalizer is the controller that holds every BladeConfig with the
// kubeblade.io/cleanup finalizer and, when one is deleted, takes its agent
// DaemonSet and its kubeblade.io/config Node labels with it.
package finalizer

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
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

// +kubebuilder:rbac:groups=kubeblade.io,resources=bladeconfigs,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=kubeblade.io,resources=bladeconfigs/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=apps,namespace=kubeblade-system,resources=daemonsets,verbs=get;list;watch;delete

// Reconciler adds the finalizer to BladeConfigs and, on deletion, removes
// the config's DaemonSet and its label from Nodes before letting go.
type Reconciler struct {
	Client    client.Client
	Recorder  events.EventRecorder
	Namespace string
}

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
	return ctrl.Result{}, r.finalize(ctx, bc)
}

func (r *Reconciler) finalize(ctx context.Context, bc *kbv1.BladeConfig) error {
	log := logf.FromContext(ctx)
	// The DaemonSet first, so no agent runs on a Node about to lose its label.
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: r.Namespace, Name: agentdaemonset.Name(bc.Name)}}
	if err := r.Client.Delete(ctx, ds, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting DaemonSet: %w", err)
	}
	// The assignment controller no longer gives Nodes to a config being
	// deleted (it may move them to another one); Nodes still carrying this
	// name lose it here, but only if they still carry exactly this name.
	nodes := nodemeta.List()
	if err := r.Client.List(ctx, nodes, client.MatchingLabels{kbv1.LabelConfig: bc.Name}); err != nil {
		return err
	}
	for i := range nodes.Items {
		if err := nodemeta.RemoveLabelIf(ctx, r.Client, nodes.Items[i].Name, kbv1.LabelConfig, bc.Name, client.FieldOwner(FieldManager)); err != nil {
			return fmt.Errorf("node %s: %w", nodes.Items[i].Name, err)
		}
	}
	orig := bc.DeepCopy()
	controllerutil.RemoveFinalizer(bc, Finalizer)
	if err := r.Client.Patch(ctx, bc, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); client.IgnoreNotFound(err) != nil {
		return err
	}
	log.Info("removed the DaemonSet and node labels of a deleted BladeConfig", "nodes", len(nodes.Items))
	if r.Recorder != nil {
		r.Recorder.Eventf(bc, nil, corev1.EventTypeNormal, ReasonCleanedUp, "Delete", "Deleted DaemonSet %s/%s and unlabelled %d node(s)", r.Namespace, ds.Name, len(nodes.Items))
	}
	return nil
}
