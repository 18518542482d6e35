// Package stale is the controller that makes a silent agent visible
// (docs/cluster-aware.md): a Blade whose heartbeat is older than three of
// its agent's heartbeat periods gets AgentReady=Unknown (reason
// HeartbeatStale) and the state Unknown, and its Node a Warning Event
// AgentStale. The agent's next status write clears both, since it owns
// those fields and applies them with force.
//
// Each Blade has one timer: a reconcile computes when the Blade goes stale
// and asks the work queue to come back then (a delayed requeue, which the
// queue keeps once per Blade, at the earliest time asked). Nothing polls
// the Blades; a fresh heartbeat only moves the time.
package stale

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	kbv1 "github.com/kubeblade/kubeblade/api/v1alpha1"
)

// ControllerName names the controller in logs and metrics.
const ControllerName = "blade-stale"

// FieldManager owns the fields this controller applies to Blade status.
const FieldManager = "kubeblade-operator-stale"

// EventAgentStale is the Warning Event on the Node of a stale Blade.
const EventAgentStale = "AgentStale"

// Workers is how many Blades are reconciled at once.
const Workers = 4

// +kubebuilder:rbac:groups=kubeblade.io,resources=blades,verbs=get;list;watch
// +kubebuilder:rbac:groups=kubeblade.io,resources=blades/status,verbs=get;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconciler marks stale Blades.
type Reconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
	Clock    clock.PassiveClock
}

// SetupWithManager registers the controller. Only what moves the stale
// time wakes it: a new heartbeat, a new period, the AgentReady condition.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		// Blades killed together go stale together: their marks (a status
		// patch each) must not queue behind one another. The work queue
		// never hands one Blade to two workers.
		WithOptions(controller.Options{MaxConcurrentReconciles: Workers}).
		For(&kbv1.Blade{}, builder.WithPredicates(predicate.Funcs{
			UpdateFunc: func(e event.UpdateEvent) bool {
				o, n := e.ObjectOld.(*kbv1.Blade), e.ObjectNew.(*kbv1.Blade)
				return !o.Status.HeartbeatTime.Equal(n.Status.HeartbeatTime) ||
					o.Status.HeartbeatPeriodSeconds != n.Status.HeartbeatPeriodSeconds ||
					o.Status.State != n.Status.State ||
					!conditionEqual(o, n)
			},
			DeleteFunc: func(event.DeleteEvent) bool { return false },
		})).
		Complete(r)
}

func conditionEqual(o, n *kbv1.Blade) bool {
	a := meta.FindStatusCondition(o.Status.Conditions, kbv1.BladeConditionAgentReady)
	b := meta.FindStatusCondition(n.Status.Conditions, kbv1.BladeConditionAgentReady)
	if a == nil || b == nil {
		return a == b
	}
	return a.Status == b.Status && a.Reason == b.Reason
}

// StaleAt is when b goes stale: three heartbeat periods after its last
// heartbeat (or, for a Blade that never wrote one, after it was created).
func StaleAt(b *kbv1.Blade) time.Time {
	last := b.CreationTimestamp.Time
	if h := b.Status.HeartbeatTime; h != nil {
		last = h.Time
	}
	return last.Add(b.Status.StalePeriod())
}

// Marked reports whether b carries this controller's mark.
func Marked(b *kbv1.Blade) bool {
	c := meta.FindStatusCondition(b.Status.Conditions, kbv1.BladeConditionAgentReady)
	return c != nil && c.Status == metav1.ConditionUnknown && c.Reason == kbv1.BladeReasonHeartbeatStale &&
		b.Status.State == kbv1.BladeStateUnknown
}

// Reconcile marks b when it is stale and otherwise comes back when it will be.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	b := &kbv1.Blade{}
	if err := r.Client.Get(ctx, req.NamespacedName, b); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	now := r.Clock.Now()
	at := StaleAt(b)
	if now.Before(at) {
		// The heartbeat time has one-second resolution: come back just
		// after, not a hair before.
		return ctrl.Result{RequeueAfter: at.Sub(now) + 10*time.Millisecond}, nil
	}
	if Marked(b) {
		return ctrl.Result{}, nil // nothing more to say until the agent writes
	}
	since := "it was created"
	if h := b.Status.HeartbeatTime; h != nil {
		since = h.UTC().Format(time.RFC3339)
	}
	msg := fmt.Sprintf("no heartbeat from the agent since %s: more than %d heartbeat periods (%s)",
		since, kbv1.StaleHeartbeats, b.Status.StalePeriod()/kbv1.StaleHeartbeats)
	if err := r.mark(ctx, b, now, msg); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	ctrl.LoggerFrom(ctx).Info("agent stale", "blade", b.Name, "staleSince", at)
	r.Recorder.Eventf(nodeOf(b), nil, corev1.EventTypeWarning, EventAgentStale, "MonitorAgent",
		"Blade %s: %s; its state is Unknown until the agent reports again", b.Name, msg)
	return ctrl.Result{}, nil
}

// mark applies state Unknown and AgentReady=Unknown with this controller's
// field manager and only those fields, so everything else the agent
// reported stays as it was (and stays the agent's).
func (r *Reconciler) mark(ctx context.Context, b *kbv1.Blade, now time.Time, msg string) error {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": kbv1.GroupVersion.String(),
		"kind":       "Blade",
		"metadata":   map[string]any{"name": b.Name},
		"status": map[string]any{
			"state": kbv1.BladeStateUnknown,
			"conditions": []any{map[string]any{
				"type":               kbv1.BladeConditionAgentReady,
				"status":             string(metav1.ConditionUnknown),
				"reason":             kbv1.BladeReasonHeartbeatStale,
				"message":            msg,
				"lastTransitionTime": now.UTC().Format(time.RFC3339),
			}},
		},
	}}
	return r.Client.Status().Patch(ctx, u, client.Apply, client.FieldOwner(FieldManager), client.ForceOwnership)
}

// nodeOf is the Node a Blade reports for, with the UID from the Blade's
// owner reference (the agent makes its Node the owner).
func nodeOf(b *kbv1.Blade) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: b.Name}}
	for _, o := range b.OwnerReferences {
		if o.Kind == "Node" && o.Name == b.Name {
			n.UID = types.UID(o.UID)
		}
	}
	n.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Node"))
	return n
}
