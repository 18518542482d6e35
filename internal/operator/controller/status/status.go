// Package status is the controller that writes BladeConfig status: the
// Ready, Progressing, Degraded and Conflict conditions Flux and kstatus read,
// matched and applied node counts and the DaemonSet's rollout. It is the
// only writer of BladeConfig status and writes only when something changed.
package status

import (
	"context"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	kbv1 "github.com/kubeblade/kubeblade/api/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/operator/agentdaemonset"
	"github.com/kubeblade/kubeblade/internal/operator/imagepolicy"
	"github.com/kubeblade/kubeblade/internal/operator/nodemeta"
	"github.com/kubeblade/kubeblade/internal/operator/outcome"
	"github.com/kubeblade/kubeblade/internal/operator/placement"
	"github.com/kubeblade/kubeblade/internal/operator/priorityclass"
)

// ControllerName names the controller in logs and metrics.
const ControllerName = "bladeconfig-status"

// BladeConfigIndex indexes Blades by status.config.name.
const BladeConfigIndex = "status.config.name"

// Condition reasons.
const (
	ReasonReady = "Ready"

	ReasonComplete         = "Complete"
	ReasonAssigningNodes   = "AssigningNodes"
	ReasonDaemonSetPending = "DaemonSetPending"
	ReasonRollingOut       = "RollingOut"
	ReasonAgentsNotReady   = "AgentsNotReady"
	ReasonApplyingConfig   = "ApplyingConfig"

	ReasonNotDegraded     = "AsExpected"
	ReasonInvalidName     = "InvalidName"
	ReasonInvalidSelector = "InvalidSelector"
	ReasonReconcileError  = "ReconcileError"
	// ReasonImageNotAllowed: spec.daemonSet.image is not from an allowed
	// repository; the agents run the operator's own image instead.
	ReasonImageNotAllowed = "ImageNotAllowed"
	// ReasonPriorityClassNotFound: spec.daemonSet.priorityClassName names
	// no PriorityClass; the agents run with the default class instead.
	ReasonPriorityClassNotFound = "PriorityClassNotFound"
	// ReasonApplyFailed: a controller could not apply the BladeConfig (the
	// API server refused its DaemonSet, say); the message is the error.
	ReasonApplyFailed = "ApplyFailed"

	ReasonNoConflict = "NoConflict"
	ReasonNodesTaken = "NodesClaimedByOtherConfigs"
)

// Event reasons (besides the condition reasons above).
const (
	EventReady    = "Ready"
	EventConflict = "Conflict"
)

// +kubebuilder:rbac:groups=kubeblade.io,resources=bladeconfigs,verbs=get;list;watch
// +kubebuilder:rbac:groups=kubeblade.io,resources=bladeconfigs/status,verbs=patch
// +kubebuilder:rbac:groups=kubeblade.io,resources=blades,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=scheduling.k8s.io,resources=priorityclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps,namespace=kubeblade-system,resources=daemonsets,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconciler writes BladeConfig status.
type Reconciler struct {
	Client    client.Client
	Recorder  events.EventRecorder
	Clock     clock.PassiveClock
	Namespace string
	// Images are the repositories spec.daemonSet.image may name; another
	// image makes the config Degraded (the daemonset controller runs the
	// operator's own image instead).
	Images imagepolicy.AllowList
	// NodeDelay batches Node events (DefaultNodeDelay if zero).
	NodeDelay time.Duration
	// Outcome holds the errors other controllers met applying a
	// BladeConfig; any makes it Degraded.
	Outcome *outcome.Store
	// DefaultPriorityClass is the class the agents run with when the one
	// a BladeConfig names does not exist (the daemonset controller's
	// Defaults.PriorityClassName; system-node-critical if empty).
	DefaultPriorityClass string
}

// DefaultNodeDelay is how long Node label changes are batched.
const DefaultNodeDelay = 500 * time.Millisecond

// SetupWithManager registers the controller and the Blade index it uses.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &kbv1.Blade{}, BladeConfigIndex, func(o client.Object) []string {
		b := o.(*kbv1.Blade)
		if b.Status.Config == nil || b.Status.Config.Name == "" {
			return nil
		}
		return []string{b.Status.Config.Name}
	}); err != nil {
		return err
	}
	// Node label changes come in bursts while the assignment relabels
	// many Nodes; each config is recomputed at most once per NodeDelay
	// during a burst instead of once per event.
	allConfigs := delayedAll{r: r, delay: r.nodeDelay()}
	b := ctrl.NewControllerManagedBy(mgr)
	if r.Outcome != nil {
		b = b.WatchesRawSource(source.Channel(r.Outcome.Changed(), &handler.EnqueueRequestForObject{}))
	}
	return b.
		Named(ControllerName).
		For(&kbv1.BladeConfig{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&appsv1.DaemonSet{}).
		// Any Node's labels can change every config's counts and conflicts.
		WatchesMetadata(&corev1.Node{}, allConfigs, builder.WithPredicates(
			nodemeta.LabelsChanged(), predicate.Funcs{DeleteFunc: func(event.DeleteEvent) bool { return true }})).
		Watches(&kbv1.Blade{}, handler.EnqueueRequestsFromMapFunc(bladeConfigOf), builder.WithPredicates(appliedChanged())).
		WatchesMetadata(priorityclass.Metadata(), handler.EnqueueRequestsFromMapFunc(priorityclass.ConfigsNaming(mgr.GetClient())),
			builder.WithPredicates(predicate.Funcs{UpdateFunc: func(event.UpdateEvent) bool { return false }})).
		Complete(r)
}

func (r *Reconciler) nodeDelay() time.Duration {
	if r.NodeDelay > 0 {
		return r.NodeDelay
	}
	return DefaultNodeDelay
}

// delayedAll enqueues every BladeConfig after a delay.
type delayedAll struct {
	r     *Reconciler
	delay time.Duration
}

type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]

func (h delayedAll) add(ctx context.Context, q queue) {
	for _, req := range h.r.allConfigs(ctx, nil) {
		q.AddAfter(req, h.delay)
	}
}

func (h delayedAll) Create(ctx context.Context, _ event.CreateEvent, q queue)   { h.add(ctx, q) }
func (h delayedAll) Update(ctx context.Context, _ event.UpdateEvent, q queue)   { h.add(ctx, q) }
func (h delayedAll) Delete(ctx context.Context, _ event.DeleteEvent, q queue)   { h.add(ctx, q) }
func (h delayedAll) Generic(ctx context.Context, _ event.GenericEvent, q queue) { h.add(ctx, q) }

func (r *Reconciler) allConfigs(ctx context.Context, _ client.Object) []reconcile.Request {
	var l kbv1.BladeConfigList
	if err := r.Client.List(ctx, &l); err != nil {
		return nil
	}
	out := make([]reconcile.Request, len(l.Items))
	for i := range l.Items {
		out[i] = reconcile.Request{NamespacedName: types.NamespacedName{Name: l.Items[i].Name}}
	}
	return out
}

func bladeConfigOf(_ context.Context, o client.Object) []reconcile.Request {
	b, ok := o.(*kbv1.Blade)
	if !ok || b.Status.Config == nil || b.Status.Config.Name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: b.Status.Config.Name}}}
}

// appliedChanged passes Blade events that can change an applied count;
// heartbeats and temperature reports do not.
func appliedChanged() predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*kbv1.Blade)
		n, ok2 := e.ObjectNew.(*kbv1.Blade)
		return !ok1 || !ok2 || !equality.Semantic.DeepEqual(o.Status.Config, n.Status.Config)
	}}
}

// Reconcile computes one BladeConfig's status. As in Cluster API, the
// status is patched on the way out whatever happened, but
// observedGeneration only moves when the whole computation succeeded.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, retErr error) {
	bc := &kbv1.BladeConfig{}
	if err := r.Client.Get(ctx, req.NamespacedName, bc); err != nil {
		if apierrors.IsNotFound(err) && r.Outcome != nil {
			r.Outcome.Forget(req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !bc.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	orig := bc.DeepCopy()
	defer func() {
		if retErr == nil {
			bc.Status.ObservedGeneration = bc.Generation
		} else {
			r.set(bc, kbv1.BladeConfigDegraded, metav1.ConditionTrue, ReasonReconcileError, retErr.Error())
			r.set(bc, kbv1.BladeConfigReady, metav1.ConditionFalse, ReasonReconcileError, retErr.Error())
		}
		if equality.Semantic.DeepEqual(orig.Status, bc.Status) {
			return
		}
		if err := r.Client.Status().Patch(ctx, bc, client.MergeFrom(orig)); err != nil && !apierrors.IsNotFound(err) {
			retErr = err
		}
		r.emitTransitions(orig, bc)
	}()
	return ctrl.Result{}, r.reconcile(ctx, bc)
}

func (r *Reconciler) reconcile(ctx context.Context, bc *kbv1.BladeConfig) error {
	if errs := validation.IsValidLabelValue(bc.Name); len(errs) > 0 {
		r.degraded(bc, ReasonInvalidName, "The name cannot be a kubeblade.io/config label value: "+strings.Join(errs, "; "))
		return nil
	}
	if _, err := placement.FromBladeConfig(bc); err != nil {
		r.degraded(bc, ReasonInvalidSelector, "spec.nodeSelector: "+err.Error())
		return nil
	}

	var bcs kbv1.BladeConfigList
	if err := r.Client.List(ctx, &bcs); err != nil {
		return err
	}
	nodes := nodemeta.List()
	if err := r.Client.List(ctx, nodes); err != nil {
		return err
	}
	configs, _ := placement.Eligible(bcs.Items)
	labelled := map[string]bool{}
	for _, n := range nodes.Items {
		if n.Labels[kbv1.LabelConfig] == bc.Name {
			labelled[n.Name] = true
		}
	}
	res := placement.Compute(configs, placement.NodesOf(nodes.Items))

	var blades kbv1.BladeList
	if err := r.Client.List(ctx, &blades, client.MatchingFields{BladeConfigIndex: bc.Name}); err != nil {
		return err
	}
	applied := 0
	for _, b := range blades.Items {
		if labelled[b.Name] && b.Status.Config.Generation == bc.Generation {
			applied++
		}
	}

	ds := &appsv1.DaemonSet{}
	dsErr := r.Client.Get(ctx, types.NamespacedName{Namespace: r.Namespace, Name: agentdaemonset.Name(bc.Name)}, ds)
	if dsErr != nil && !apierrors.IsNotFound(dsErr) {
		return dsErr
	}
	dsFound := dsErr == nil

	st := &bc.Status
	st.MatchedNodes = int32(len(labelled))
	st.AppliedNodes = int32(applied)
	conflicts := res.Conflicts[bc.Name]
	st.ConflictingNodes = nil
	if len(conflicts) > 0 {
		st.ConflictingNodes = conflicts[:min(len(conflicts), placement.MaxConflictingNodes)]
	}
	st.DaemonSet = kbv1.DaemonSetStatus{}
	if dsFound {
		st.DaemonSet = kbv1.DaemonSetStatus{
			Name:                   ds.Name,
			DesiredNumberScheduled: ds.Status.DesiredNumberScheduled,
			NumberReady:            ds.Status.NumberReady,
			UpdatedNumberScheduled: ds.Status.UpdatedNumberScheduled,
		}
	}

	if len(conflicts) > 0 {
		r.set(bc, kbv1.BladeConfigConflict, metav1.ConditionTrue, ReasonNodesTaken, conflictMessage(conflicts, res.Winner))
	} else {
		r.set(bc, kbv1.BladeConfigConflict, metav1.ConditionFalse, ReasonNoConflict, "No selected node belongs to another BladeConfig")
	}
	r.set(bc, kbv1.BladeConfigDegraded, metav1.ConditionFalse, ReasonNotDegraded, "")
	if msg := r.failures(bc); msg != "" {
		r.set(bc, kbv1.BladeConfigDegraded, metav1.ConditionTrue, ReasonApplyFailed, msg)
		r.set(bc, kbv1.BladeConfigProgressing, metav1.ConditionFalse, ReasonApplyFailed, msg)
		r.set(bc, kbv1.BladeConfigReady, metav1.ConditionFalse, ReasonApplyFailed, msg)
		return nil
	}

	reason, msg := progress(bc, res.Matched[bc.Name], dsFound, ds)
	if reason == ReasonComplete {
		r.set(bc, kbv1.BladeConfigProgressing, metav1.ConditionFalse, ReasonComplete, msg)
		r.set(bc, kbv1.BladeConfigReady, metav1.ConditionTrue, ReasonReady, msg)
	} else {
		r.set(bc, kbv1.BladeConfigProgressing, metav1.ConditionTrue, reason, msg)
		r.set(bc, kbv1.BladeConfigReady, metav1.ConditionFalse, reason, msg)
	}
	// The agents run, but not as written: not Ready. Each substitution
	// the daemonset controller makes is named.
	var subst []string
	why := ""
	if img := bc.Spec.DaemonSet.Image; img != "" {
		if err := r.Images.Check(img); err != nil {
			why = ReasonImageNotAllowed
			subst = append(subst, "spec.daemonSet.image: "+err.Error()+"; the agents run the operator's own agent image instead")
		}
	}
	noPriorityClass, err := priorityclass.Missing(ctx, r.Client, bc, r.defaultPriorityClass())
	if err != nil {
		return err
	}
	if noPriorityClass != "" {
		if why == "" {
			why = ReasonPriorityClassNotFound
		}
		subst = append(subst, noPriorityClass)
	}
	if len(subst) > 0 {
		msg := strings.Join(subst, "; ")
		r.set(bc, kbv1.BladeConfigDegraded, metav1.ConditionTrue, why, msg)
		r.set(bc, kbv1.BladeConfigReady, metav1.ConditionFalse, why, msg)
	}
	return nil
}

func (r *Reconciler) defaultPriorityClass() string {
	if r.DefaultPriorityClass != "" {
		return r.DefaultPriorityClass
	}
	return agentdaemonset.DefaultDefaults().PriorityClassName
}

// failures joins the errors other controllers met applying bc, each with
// the controller's name, as the API server worded them.
func (r *Reconciler) failures(bc *kbv1.BladeConfig) string {
	if r.Outcome == nil {
		return ""
	}
	var msgs []string
	for _, f := range r.Outcome.Failures(bc.Name) {
		msgs = append(msgs, fmt.Sprintf("%s (generation %d): %s", f.Controller, f.Generation, f.Message))
	}
	return strings.Join(msgs, "; ")
}

// progress says what, if anything, the config is still waiting for.
func progress(bc *kbv1.BladeConfig, want int, dsFound bool, ds *appsv1.DaemonSet) (reason, msg string) {
	st := bc.Status
	switch {
	case int(st.MatchedNodes) != want:
		return ReasonAssigningNodes, fmt.Sprintf("%d of %d node(s) labelled %s=%s", st.MatchedNodes, want, kbv1.LabelConfig, bc.Name)
	case !dsFound:
		return ReasonDaemonSetPending, "The agent DaemonSet does not exist yet"
	case ds.Status.ObservedGeneration < ds.Generation:
		return ReasonDaemonSetPending, "The DaemonSet controller has not observed the latest DaemonSet yet"
	case ds.Status.UpdatedNumberScheduled < ds.Status.DesiredNumberScheduled:
		return ReasonRollingOut, fmt.Sprintf("%d of %d agent(s) updated", ds.Status.UpdatedNumberScheduled, ds.Status.DesiredNumberScheduled)
	case ds.Status.NumberReady < ds.Status.DesiredNumberScheduled:
		return ReasonAgentsNotReady, fmt.Sprintf("%d of %d agent(s) ready", ds.Status.NumberReady, ds.Status.DesiredNumberScheduled)
	case st.AppliedNodes < st.MatchedNodes:
		return ReasonApplyingConfig, fmt.Sprintf("%d of %d agent(s) applied generation %d", st.AppliedNodes, st.MatchedNodes, bc.Generation)
	}
	return ReasonComplete, fmt.Sprintf("%d node(s) run generation %d", st.MatchedNodes, bc.Generation)
}

func conflictMessage(nodes []string, winner map[string]string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d selected node(s) belong to BladeConfigs of higher precedence:", len(nodes))
	for i, n := range nodes {
		if i == placement.MaxConflictingNodes {
			fmt.Fprintf(&b, " and %d more", len(nodes)-i)
			break
		}
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, " %s (%s)", n, winner[n])
	}
	return b.String()
}

func (r *Reconciler) degraded(bc *kbv1.BladeConfig, reason, msg string) {
	bc.Status.MatchedNodes, bc.Status.AppliedNodes, bc.Status.ConflictingNodes = 0, 0, nil
	r.set(bc, kbv1.BladeConfigDegraded, metav1.ConditionTrue, reason, msg)
	r.set(bc, kbv1.BladeConfigReady, metav1.ConditionFalse, reason, msg)
	r.set(bc, kbv1.BladeConfigProgressing, metav1.ConditionFalse, reason, msg)
	r.set(bc, kbv1.BladeConfigConflict, metav1.ConditionFalse, ReasonNoConflict, "")
}

func (r *Reconciler) set(bc *kbv1.BladeConfig, typ string, s metav1.ConditionStatus, reason, msg string) {
	now := metav1.Now()
	if r.Clock != nil {
		now = metav1.NewTime(r.Clock.Now())
	}
	meta.SetStatusCondition(&bc.Status.Conditions, metav1.Condition{
		Type: typ, Status: s, Reason: reason, Message: msg,
		ObservedGeneration: bc.Generation, LastTransitionTime: now,
	})
}

func (r *Reconciler) emitTransitions(before, after *kbv1.BladeConfig) {
	if r.Recorder == nil {
		return
	}
	if became(before, after, kbv1.BladeConfigConflict, metav1.ConditionTrue) {
		c := meta.FindStatusCondition(after.Status.Conditions, kbv1.BladeConfigConflict)
		r.Recorder.Eventf(after, nil, corev1.EventTypeWarning, EventConflict, "Assign", "%s", c.Message)
	}
	if became(before, after, kbv1.BladeConfigReady, metav1.ConditionTrue) {
		r.Recorder.Eventf(after, nil, corev1.EventTypeNormal, EventReady, "Rollout", "%d node(s) run generation %d", after.Status.MatchedNodes, after.Generation)
	}
	if became(before, after, kbv1.BladeConfigDegraded, metav1.ConditionTrue) {
		c := meta.FindStatusCondition(after.Status.Conditions, kbv1.BladeConfigDegraded)
		r.Recorder.Eventf(after, nil, corev1.EventTypeWarning, c.Reason, "Reconcile", "%s", c.Message)
	}
}

func became(before, after *kbv1.BladeConfig, typ string, s metav1.ConditionStatus) bool {
	return !meta.IsStatusConditionPresentAndEqual(before.Status.Conditions, typ, s) &&
		meta.IsStatusConditionPresentAndEqual(after.Status.Conditions, typ, s)
}
