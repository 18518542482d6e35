// Package daemonset is the controller that applies one agent DaemonSet per
// BladeConfig, as package agentdaemonset builds it, and takes back hand
// edits of the fields it owns.
package daemonset

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/keymutex"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	kbv1 "github.com/kubeblade/kubeblade/api/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/operator/agentdaemonset"
	"github.com/kubeblade/kubeblade/internal/operator/imagepolicy"
	"github.com/kubeblade/kubeblade/internal/operator/outcome"
	"github.com/kubeblade/kubeblade/internal/operator/priorityclass"
)

const (
	// ControllerName names the controller in logs and metrics.
	ControllerName = "bladeconfig-daemonset"
	// FieldManager owns every field of the agent DaemonSets the operator sets.
	FieldManager = "kubeblade-operator"
)

// Event reasons on BladeConfigs.
const (
	ReasonDaemonSetApplied = "DaemonSetApplied"
	ReasonApplyFailed      = "DaemonSetApplyFailed"
	// ReasonImageNotAllowed: spec.daemonSet.image is not from an allowed
	// repository; the DaemonSet runs the operator's own agent image.
	ReasonImageNotAllowed = "ImageNotAllowed"
	// ReasonPriorityClassNotFound: spec.daemonSet.priorityClassName names
	// no PriorityClass; the DaemonSet runs the agents with the default
	// class instead, since the API server would refuse their pods.
	ReasonPriorityClassNotFound = "PriorityClassNotFound"
	// ReasonNoProbes: spec.agent.metrics.bindAddress gives the kubelet no
	// fixed port to probe (port 0, which only tests use; the API server
	// refuses "0" in a BladeConfig), so the agents run without liveness
	// and readiness probes.
	ReasonNoProbes = "NoProbes"
)

// +kubebuilder:rbac:groups=kubeblade.io,resources=bladeconfigs,verbs=get;list;watch
// +kubebuilder:rbac:groups=kubeblade.io,resources=bladeconfigs/finalizers,verbs=update
// The agent DaemonSets are named after BladeConfigs, so RBAC cannot name
// them; nor can it limit what a DaemonSet the operator creates looks like
// (privileged, host network, /dev and /sys). The image allow-list (Images,
// and the admission policy kubeblade-agent-images) keeps a BladeConfig
// editor from choosing what runs; the policy kubeblade-operator-daemonsets
// (config/admission/operator-daemonsets.yaml) keeps the operator's own
// ServiceAccount to exactly what agentdaemonset renders, so a change to the
// rendered pod needs a change to that policy.
// +kubebuilder:rbac:groups=apps,namespace=kubeblade-system,resources=daemonsets,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconciler applies the agent DaemonSets.
type Reconciler struct {
	Client client.Client
	// APIReader reads past the cache: right before an apply the controller
	// checks with it that the BladeConfig is still there and not being
	// deleted. Nil skips that check.
	APIReader client.Reader
	// Cleanup, shared with the finalizer controller, is held per
	// BladeConfig name from that check to the end of the apply; the
	// finalizer controller holds it while it removes a deleted
	// BladeConfig's DaemonSet and lets the BladeConfig go. Nil locks
	// nothing.
	Cleanup  keymutex.KeyMutex
	Recorder events.EventRecorder
	Defaults agentdaemonset.Defaults
	// Images are the repositories spec.daemonSet.image may name. A
	// BladeConfig naming another image gets a DaemonSet with the
	// operator's own agent image (Defaults.Image) instead, so its blades
	// keep fan control; the status controller marks it Degraded. Nil
	// allows nothing but Defaults.Image.
	Images imagepolicy.AllowList
	// Outcome, when set, learns every apply's result, so the BladeConfig's
	// status shows a DaemonSet the API server refused.
	Outcome *outcome.Store
}

// SetupWithManager registers the controller. It reacts to spec changes of
// BladeConfigs, to any change of the DaemonSets they own, which is how
// hand edits get reverted, and to PriorityClasses the BladeConfigs name
// appearing or going away.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&kbv1.BladeConfig{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&appsv1.DaemonSet{}, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		WatchesMetadata(priorityclass.Metadata(), handler.EnqueueRequestsFromMapFunc(priorityclass.ConfigsNaming(mgr.GetClient())),
			builder.WithPredicates(predicate.Funcs{UpdateFunc: func(event.UpdateEvent) bool { return false }})).
		Complete(r)
}

// Reconcile applies the DaemonSet of one BladeConfig.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	bc := &kbv1.BladeConfig{}
	if err := r.Client.Get(ctx, req.NamespacedName, bc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	// Deletion is the cleanup controller's job.
	if !bc.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	// A name that cannot be a label value can select no Node.
	if len(validation.IsValidLabelValue(bc.Name)) > 0 {
		return ctrl.Result{}, nil
	}
	err := r.reconcile(ctx, bc)
	if r.Outcome != nil {
		r.Outcome.Record(ControllerName, bc, err)
	}
	return ctrl.Result{}, err
}

func (r *Reconciler) reconcile(ctx context.Context, bc *kbv1.BladeConfig) error {
	log := logf.FromContext(ctx)
	// A refused image never runs, whoever got it into the BladeConfig
	// (the admission policy stops it at the API server when installed).
	image, refused := r.Images.Allowed(bc.Spec.DaemonSet.Image, r.Defaults.Image)
	if refused != nil {
		log.Info("not running the BladeConfig's agent image; running the operator's own", "refused", refused.Error(), "image", image)
		bc = bc.DeepCopy()
		bc.Spec.DaemonSet.Image = image
	}
	// A DaemonSet naming a missing PriorityClass is accepted but gets no
	// pods, and a rolling update would remove the running agents first.
	noPriorityClass, err := priorityclass.Missing(ctx, r.Client, bc, r.Defaults.PriorityClassName)
	if err != nil {
		return err
	}
	if noPriorityClass != "" {
		log.Info("running the agents with the default PriorityClass", "reason", noPriorityClass)
		bc = bc.DeepCopy()
		bc.Spec.DaemonSet.PriorityClassName = ""
	}
	want := agentdaemonset.Build(bc, r.Defaults)

	existing := &appsv1.DaemonSet{}
	err = r.Client.Get(ctx, types.NamespacedName{Namespace: r.Defaults.Namespace, Name: agentdaemonset.Name(bc.Name)}, existing)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return err
	default:
		if UpToDate(existing, want) {
			return nil
		}
	}
	applied, err := r.apply(ctx, bc, want)
	if err != nil {
		if r.Recorder != nil {
			r.Recorder.Eventf(bc, nil, corev1.EventTypeWarning, ReasonApplyFailed, "Apply", "Applying DaemonSet %s/%s: %v", r.Defaults.Namespace, agentdaemonset.Name(bc.Name), err)
		}
		return fmt.Errorf("applying DaemonSet: %w", err)
	}
	if !applied {
		log.Info("not applying the agent DaemonSet: the BladeConfig is gone or being deleted")
		return nil
	}
	log.Info("applied agent DaemonSet", "daemonset", client.ObjectKey{Namespace: r.Defaults.Namespace, Name: agentdaemonset.Name(bc.Name)})
	if r.Recorder != nil {
		switch {
		case refused != nil:
			r.Recorder.Eventf(bc, nil, corev1.EventTypeWarning, ReasonImageNotAllowed, "Apply", "Applied DaemonSet %s/%s with the operator's agent image %s: %v",
				r.Defaults.Namespace, agentdaemonset.Name(bc.Name), image, refused)
		case noPriorityClass != "":
			r.Recorder.Eventf(bc, nil, corev1.EventTypeWarning, ReasonPriorityClassNotFound, "Apply", "Applied DaemonSet %s/%s: %s",
				r.Defaults.Namespace, agentdaemonset.Name(bc.Name), noPriorityClass)
		default:
			r.Recorder.Eventf(bc, nil, corev1.EventTypeNormal, ReasonDaemonSetApplied, "Apply", "Applied DaemonSet %s/%s", r.Defaults.Namespace, agentdaemonset.Name(bc.Name))
		}
		if live, _ := agentdaemonset.Probes(bc.Spec.Agent.Metrics.BindAddress); live == nil {
			r.Recorder.Eventf(bc, nil, corev1.EventTypeWarning, ReasonNoProbes, "Apply",
				"Applied DaemonSet %s/%s without liveness and readiness probes: spec.agent.metrics.bindAddress %q has no fixed port to probe, so a stalled agent is not restarted",
				r.Defaults.Namespace, agentdaemonset.Name(bc.Name), bc.Spec.Agent.Metrics.BindAddress)
		}
	}
	return nil
}

// apply applies want, the DaemonSet of bc as read from the cache, unless
// the API server no longer has that BladeConfig or is deleting it. The
// cache can be behind: a reconcile that read bc before its deletion would
// otherwise apply after the finalizer controller removed the DaemonSet and
// let the BladeConfig go, and that DaemonSet would stay until a garbage
// collector followed its owner reference (envtest runs none). Holding
// Cleanup from the check to the end of the apply makes the two exclusive:
// an apply that passed the check ends before the finalizer deletes the
// DaemonSet, and a check made after the finalizer finished sees the
// deletion. The finalizer controller holds back only BladeConfigs that
// carry its finalizer: one deleted before it was added can still go between
// the check and the apply, and its DaemonSet then goes only with a garbage
// collector.
func (r *Reconciler) apply(ctx context.Context, bc *kbv1.BladeConfig, want *appsv1ac.DaemonSetApplyConfiguration) (applied bool, _ error) {
	if r.Cleanup != nil {
		r.Cleanup.LockKey(bc.Name)
		// keymutex.NewHashed's UnlockKey never fails.
		defer func() { _ = r.Cleanup.UnlockKey(bc.Name) }()
	}
	if r.APIReader != nil {
		live := &kbv1.BladeConfig{}
		err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(bc), live)
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("checking the BladeConfig is still there: %w", err)
		}
		// Another UID is a BladeConfig created again under the name; its
		// creation queues a reconcile of its own.
		if live.UID != bc.UID || !live.DeletionTimestamp.IsZero() {
			return false, nil
		}
	}
	return true, r.Client.Apply(ctx, want, client.FieldOwner(FieldManager), client.ForceOwnership)
}

// UpToDate reports whether the fields the operator owns in existing already
// hold want, so a settled DaemonSet costs no request. A field someone else
// took over (kubectl edit, kubectl scale) is no longer ours and shows up
// as a difference, which the forced apply takes back.
func UpToDate(existing *appsv1.DaemonSet, want *appsv1ac.DaemonSetApplyConfiguration) bool {
	have, err := appsv1ac.ExtractDaemonSet(existing, FieldManager)
	if err != nil {
		return false
	}
	return equality.Semantic.DeepEqual(have, want)
}
