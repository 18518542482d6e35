// Package maintenance is the controller that takes a blade out of service
// when its Node asks (docs/cluster-aware.md): kubeblade.io/maintenance "true" — set by a
// long press of the blade's button or by a person — cordons the Node and
// drains it through the Eviction API, never more than maxConcurrent blades
// cluster-wide at once, the others queued in the order they asked; "false"
// lifts the cordon (only one kubeblade made) and clears the state. Progress
// is the kubeblade.io/maintenance-state annotation (queued, draining,
// drained, failed) and six Events on the Node.
//
// Everything it needs to continue lives on the Node (the state, when the
// request came, when draining began, whether the cordon is kubeblade's),
// so an operator restarted mid-drain carries on where it was.
package maintenance

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
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
	"github.com/kubeblade/kubeblade/internal/drain"
	"github.com/kubeblade/kubeblade/internal/operator/nodemeta"
)

// ControllerName names the controller in logs and metrics.
const ControllerName = "node-maintenance"

// FieldManager names the operator's patches to Nodes.
const FieldManager = "kubeblade-operator-maintenance"

// Event reasons (docs/cluster-aware.md).
const (
	EventRequested = "MaintenanceRequested"
	EventQueued    = "MaintenanceQueued"
	EventDraining  = "Draining"
	EventDrained   = "Drained"
	EventFailed    = "DrainFailed"
	EventEnded     = "MaintenanceEnded"
)

// DefaultPassInterval is how often a draining Node is looked at again: a
// PodDisruptionBudget that refused an eviction may allow it a moment later.
const DefaultPassInterval = 2 * time.Second

// queuedRecheck is a safety net for a queued Node: a slot that frees up
// wakes the queue at once, but a missed wake must not strand it.
const queuedRecheck = 30 * time.Second

// maintenanceAnnotations are the keys whose change wakes the controller.
var maintenanceAnnotations = []string{
	kbv1.AnnotationMaintenance, kbv1.AnnotationMaintenanceState, kbv1.AnnotationMaintenanceRequestedAt,
	kbv1.AnnotationMaintenanceDrainStartedAt, kbv1.AnnotationMaintenanceCordoned,
}

// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=list
// +kubebuilder:rbac:groups="",resources=pods/eviction,verbs=create
// +kubebuilder:rbac:groups=kubeblade.io,resources=bladeconfigs,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconciler runs maintenance for one Node per reconcile. It must run with
// one worker (the controller-runtime default): admission decisions read
// the cluster's maintenance states and must see each other's writes.
type Reconciler struct {
	// Client reads BladeConfigs and Node metadata from the cache and
	// writes Nodes and evictions.
	Client client.Client
	// APIReader reads uncached: a Node's spec, the pods on a Node (an
	// operator must not cache every pod of the cluster for a rare drain)
	// and the maintenance states admission counts, including its own
	// writes of a moment ago.
	APIReader    client.Reader
	Recorder     events.EventRecorder
	Clock        clock.PassiveClock
	PassInterval time.Duration

	wake   chan event.GenericEvent
	passes atomic.Int64
	// ended holds the Nodes whose request the watch saw end ("true" to
	// "false" or removed) and that have not been reconciled since. A
	// quick "false" then "true" leaves only "true" in the cache by the
	// time the reconcile runs; this is how it still counts as the retry
	// docs/cluster-aware.md promises for a failed drain.
	// The value is the resourceVersion the end was seen at, so a
	// reconcile consumes only the mark it acted on (CompareAndDelete),
	// not one the watch stored while it ran.
	ended sync.Map // Node name → resourceVersion
}

// Passes counts drain passes (for metrics and tests: a budget that refuses
// evictions shows as passes without progress).
func (r *Reconciler) Passes() int64 { return r.passes.Load() }

// SetupWithManager registers the controller: Node metadata whose
// maintenance annotations change, BladeConfigs (a raised maxConcurrent
// lets queued Nodes start) and wake-ups of queued Nodes when a slot frees.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.PassInterval <= 0 {
		r.PassInterval = DefaultPassInterval
	}
	r.wake = make(chan event.GenericEvent, 1024)
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		WatchesMetadata(&corev1.Node{}, &handler.EnqueueRequestForObject{}, builder.WithPredicates(predicate.Funcs{
			CreateFunc: func(e event.CreateEvent) bool { return hasAny(e.Object.GetAnnotations()) },
			UpdateFunc: func(e event.UpdateEvent) bool { return r.sawUpdate(e.ObjectOld, e.ObjectNew) },
			// A deleted Node that held a slot frees it: its reconcile
			// finds it gone and wakes the queue.
			DeleteFunc: func(e event.DeleteEvent) bool { return holdsSlot(e.Object.GetAnnotations()) },
		})).
		Watches(&kbv1.BladeConfig{}, handler.EnqueueRequestsFromMapFunc(r.queuedNodes),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WatchesRawSource(source.Channel(r.wake, &handler.EnqueueRequestForObject{})).
		Complete(r)
}

// sawUpdate is the watch's view of one Node update: it remembers a request
// that ended (see Reconciler.ended) and says whether the update concerns
// maintenance at all.
func (r *Reconciler) sawUpdate(old, updated client.Object) bool {
	o, n := old.GetAnnotations(), updated.GetAnnotations()
	if requests(o) && !requests(n) && !invalid(n) {
		r.ended.Store(updated.GetName(), updated.GetResourceVersion())
	}
	for _, k := range maintenanceAnnotations {
		if o[k] != n[k] {
			return true
		}
	}
	return false
}

// requests says whether the Node asks for maintenance.
func requests(ann map[string]string) bool {
	return strings.TrimSpace(ann[kbv1.AnnotationMaintenance]) == "true"
}

// invalid says whether the request is neither "true", "false" nor absent
// (it changes nothing).
func invalid(ann map[string]string) bool {
	v, has := ann[kbv1.AnnotationMaintenance]
	v = strings.TrimSpace(v)
	return has && v != "true" && v != "false"
}

// holdsSlot says whether the Node counts against maxConcurrent.
func holdsSlot(ann map[string]string) bool {
	switch ann[kbv1.AnnotationMaintenanceState] {
	case kbv1.MaintenanceDraining, kbv1.MaintenanceDrained, kbv1.MaintenanceFailed:
		return true
	}
	return false
}

func hasAny(ann map[string]string) bool {
	for _, k := range maintenanceAnnotations {
		if _, ok := ann[k]; ok {
			return true
		}
	}
	return false
}

// Reconcile moves one Node's maintenance one step on.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	n := nodemeta.Node()
	if err := r.Client.Get(ctx, req.NamespacedName, n); err != nil {
		if apierrors.IsNotFound(err) {
			// Deleted: a slot it held is free now (admission lists
			// Nodes from the API server, where it is gone).
			r.ended.Delete(req.Name)
			r.wakeQueue(ctx)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	ann := n.GetAnnotations()
	mark, toggled := r.ended.Load(n.Name)
	switch {
	case requests(ann) && toggled && hasRecords(ann):
		// "false" then "true" before this reconcile: end the old
		// maintenance first, as if "false" had been seen on its own;
		// the patch wakes the Node again for the new request.
		if err := r.end(ctx, n); err != nil {
			return ctrl.Result{}, err
		}
		r.ended.CompareAndDelete(n.Name, mark)
		return ctrl.Result{}, nil
	case requests(ann):
		if toggled { // an end with nothing to undo
			r.ended.CompareAndDelete(n.Name, mark)
		}
		return r.maintain(ctx, n)
	case invalid(ann):
		// Changes nothing (the agent reports InvalidAnnotation).
		return ctrl.Result{}, nil
	default:
		if err := r.end(ctx, n); err != nil {
			return ctrl.Result{}, err
		}
		if toggled {
			r.ended.CompareAndDelete(n.Name, mark)
		}
		return ctrl.Result{}, nil
	}
}

// hasRecords says whether the Node carries an earlier maintenance's
// records (state, request time, kubeblade's cordon).
func hasRecords(ann map[string]string) bool {
	for _, k := range maintenanceAnnotations[1:] {
		if _, ok := ann[k]; ok {
			return true
		}
	}
	return false
}

// settings are the maintenance settings of the Node's BladeConfig, or the
// defaults for a Node assigned to none.
func (r *Reconciler) settings(ctx context.Context, n client.Object) (kbv1.MaintenanceSpec, error) {
	name := n.GetLabels()[kbv1.LabelConfig]
	if name == "" {
		return kbv1.MaintenanceSpec{}, nil
	}
	bc := &kbv1.BladeConfig{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: name}, bc); err != nil {
		if apierrors.IsNotFound(err) {
			return kbv1.MaintenanceSpec{}, nil
		}
		return kbv1.MaintenanceSpec{}, err
	}
	return bc.Spec.Maintenance, nil
}

func (r *Reconciler) maintain(ctx context.Context, n *metav1.PartialObjectMetadata) (ctrl.Result, error) {
	ann := n.GetAnnotations()
	switch state := ann[kbv1.AnnotationMaintenanceState]; state {
	case kbv1.MaintenanceDrained, kbv1.MaintenanceFailed:
		return ctrl.Result{}, nil // until someone sets "false"
	case kbv1.MaintenanceDraining:
		return r.drainPass(ctx, n)
	default: // "" (new request) or queued
		now := r.Clock.Now()
		if _, seen := ann[kbv1.AnnotationMaintenanceRequestedAt]; !seen {
			if err := r.patchAnnotations(ctx, n.Name, "", map[string]any{
				kbv1.AnnotationMaintenanceRequestedAt: now.UTC().Format(time.RFC3339Nano),
			}, nil); err != nil {
				return ctrl.Result{}, err
			}
			r.event(n, corev1.EventTypeNormal, EventRequested, "Request",
				"maintenance requested: the Node will be cordoned and drained")
			// The patch wakes this Node again with the time recorded.
			return ctrl.Result{}, nil
		}
		ok, why, err := r.admit(ctx, n)
		if err != nil {
			return ctrl.Result{}, err
		}
		if !ok {
			if state != kbv1.MaintenanceQueued {
				if err := r.patchAnnotations(ctx, n.Name, "", map[string]any{kbv1.AnnotationMaintenanceState: kbv1.MaintenanceQueued}, nil); err != nil {
					return ctrl.Result{}, err
				}
				r.event(n, corev1.EventTypeNormal, EventQueued, "Queue", "maintenance queued: %s", why)
			}
			return ctrl.Result{RequeueAfter: queuedRecheck}, nil
		}
		return r.startDrain(ctx, n)
	}
}

// queueEntry is a Node waiting for, or holding, a maintenance slot.
type queueEntry struct {
	name string
	at   time.Time
}

// admit decides whether n may start now: fewer than its config's
// maxConcurrent Nodes hold a slot (draining, drained or failed), counting
// the queued Nodes ahead of it in the order they asked (then by name).
func (r *Reconciler) admit(ctx context.Context, n *metav1.PartialObjectMetadata) (bool, string, error) {
	spec, err := r.settings(ctx, n)
	if err != nil {
		return false, "", err
	}
	limit := spec.MaxConcurrentOrDefault()
	all := nodemeta.List()
	if err := r.APIReader.List(ctx, all); err != nil {
		return false, "", fmt.Errorf("listing Nodes: %w", err)
	}
	var holding []string
	var queue []queueEntry
	for _, o := range all.Items {
		ann := o.Annotations
		switch ann[kbv1.AnnotationMaintenanceState] {
		case kbv1.MaintenanceDraining, kbv1.MaintenanceDrained, kbv1.MaintenanceFailed:
			if o.Name != n.Name {
				holding = append(holding, o.Name)
			}
		case "", kbv1.MaintenanceQueued:
			if strings.TrimSpace(ann[kbv1.AnnotationMaintenance]) == "true" {
				queue = append(queue, queueEntry{o.Name, requestedAt(ann)})
			}
		}
	}
	sort.Slice(queue, func(i, j int) bool {
		if !queue[i].at.Equal(queue[j].at) {
			return queue[i].at.Before(queue[j].at)
		}
		return queue[i].name < queue[j].name
	})
	ahead := 0
	for _, q := range queue {
		if q.name == n.Name {
			break
		}
		ahead++
	}
	sort.Strings(holding)
	if len(holding)+ahead < limit {
		return true, "", nil
	}
	why := fmt.Sprintf("%d of at most %d blade(s) in maintenance", len(holding), limit)
	if len(holding) > 0 {
		why += " (" + strings.Join(holding, ", ") + ")"
	}
	if ahead > 0 {
		why += fmt.Sprintf(", %d ahead in the queue", ahead)
	}
	return false, why, nil
}

// requestedAt is when the request was first seen; a Node without the
// record (written just now) sorts last.
func requestedAt(ann map[string]string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, ann[kbv1.AnnotationMaintenanceRequestedAt])
	if err != nil {
		return time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	return t
}

// startDrain cordons the Node (remembering that the cordon is kubeblade's,
// unless someone else's was there first) and marks it draining, in one
// patch guarded by the Node's resourceVersion.
func (r *Reconciler) startDrain(ctx context.Context, n *metav1.PartialObjectMetadata) (ctrl.Result, error) {
	node := &corev1.Node{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Name: n.Name}, node); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	set := map[string]any{
		kbv1.AnnotationMaintenanceState:          kbv1.MaintenanceDraining,
		kbv1.AnnotationMaintenanceDrainStartedAt: r.Clock.Now().UTC().Format(time.RFC3339Nano),
	}
	var spec map[string]any
	cordon := "cordoned the Node"
	if node.Spec.Unschedulable {
		cordon = "the Node was already cordoned by someone else (kubeblade will not uncordon it)"
	} else {
		set[kbv1.AnnotationMaintenanceCordoned] = "true"
		spec = map[string]any{"unschedulable": true}
	}
	if err := r.patchAnnotations(ctx, n.Name, node.ResourceVersion, set, spec); err != nil {
		return ctrl.Result{}, err
	}
	r.event(n, corev1.EventTypeNormal, EventDraining, "Drain", "%s; evicting its pods", cordon)
	// The patch wakes the Node again in the draining state.
	return ctrl.Result{}, nil
}

func (r *Reconciler) drainPass(ctx context.Context, n *metav1.PartialObjectMetadata) (ctrl.Result, error) {
	spec, err := r.settings(ctx, n)
	if err != nil {
		return ctrl.Result{}, err
	}
	r.passes.Add(1)
	res, err := drain.Evictor{Reader: r.APIReader, Client: r.Client}.Pass(ctx, n.Name, drain.Options{DeleteEmptyDirData: spec.DeleteEmptyDirData})
	if err != nil {
		return ctrl.Result{}, err
	}
	log := ctrl.LoggerFrom(ctx)
	if len(res.Evicted) > 0 {
		log.Info("evicted", "node", n.Name, "pods", res.Evicted)
	}
	if res.Done() {
		if err := r.patchAnnotations(ctx, n.Name, "", map[string]any{kbv1.AnnotationMaintenanceState: kbv1.MaintenanceDrained}, nil); err != nil {
			return ctrl.Result{}, err
		}
		r.event(n, corev1.EventTypeNormal, EventDrained, "Drain",
			"drained: every pod that may move was evicted (%d DaemonSet or mirror pod(s) stay); safe to pull", res.Left)
		return ctrl.Result{}, nil
	}
	now := r.Clock.Now()
	started, err := time.Parse(time.RFC3339Nano, n.GetAnnotations()[kbv1.AnnotationMaintenanceDrainStartedAt])
	if err != nil {
		// Lost or mangled: time the drain from now on.
		return ctrl.Result{}, r.patchAnnotations(ctx, n.Name, "", map[string]any{
			kbv1.AnnotationMaintenanceDrainStartedAt: now.UTC().Format(time.RFC3339Nano)}, nil)
	}
	timeout := spec.DrainTimeoutOrDefault()
	if left := started.Add(timeout).Sub(now); left > 0 {
		return ctrl.Result{RequeueAfter: min(r.PassInterval, left)}, nil
	}
	if err := r.patchAnnotations(ctx, n.Name, "", map[string]any{kbv1.AnnotationMaintenanceState: kbv1.MaintenanceFailed}, nil); err != nil {
		return ctrl.Result{}, err
	}
	r.event(n, corev1.EventTypeWarning, EventFailed, "Drain",
		"drain did not finish within %s; blocked by %s. The Node stays cordoned; set %s to \"false\" and \"true\" again to retry",
		timeout, res.Blocking(), kbv1.AnnotationMaintenance)
	return ctrl.Result{}, nil
}

// end lifts kubeblade's cordon and clears the maintenance annotations, and
// lets the queue move on.
func (r *Reconciler) end(ctx context.Context, n *metav1.PartialObjectMetadata) error {
	ann := n.GetAnnotations()
	state, active := ann[kbv1.AnnotationMaintenanceState]
	ours := ann[kbv1.AnnotationMaintenanceCordoned] == "true"
	_, requested := ann[kbv1.AnnotationMaintenanceRequestedAt]
	if !active && !ours && !requested {
		return nil
	}
	clear := map[string]any{}
	for _, k := range maintenanceAnnotations[1:] {
		if _, ok := ann[k]; ok {
			clear[k] = nil
		}
	}
	var spec map[string]any
	rv := ""
	if ours {
		node := &corev1.Node{}
		if err := r.APIReader.Get(ctx, client.ObjectKey{Name: n.Name}, node); err != nil {
			return client.IgnoreNotFound(err)
		}
		rv, spec = node.ResourceVersion, map[string]any{"unschedulable": false}
	}
	if err := r.patchAnnotations(ctx, n.Name, rv, clear, spec); err != nil {
		return err
	}
	msg := "maintenance ended"
	if state != "" {
		msg += " (was " + state + ")"
	}
	switch {
	case ours:
		msg += "; uncordoned the Node"
	case state == kbv1.MaintenanceDraining || state == kbv1.MaintenanceDrained || state == kbv1.MaintenanceFailed:
		msg += "; the Node stays cordoned: the cordon was not kubeblade's"
	}
	r.event(n, corev1.EventTypeNormal, EventEnded, "EndMaintenance", "%s", msg)
	r.wakeQueue(ctx)
	return nil
}

// wakeQueue reconciles every Node waiting for a slot.
func (r *Reconciler) wakeQueue(ctx context.Context) {
	for _, req := range r.queuedNodes(ctx, nil) {
		o := nodemeta.Node()
		o.Name = req.Name
		select {
		case r.wake <- event.GenericEvent{Object: o}:
		default: // full: the queued Nodes' recheck picks them up
		}
	}
}

// queuedNodes lists (from the cache) the Nodes that asked for maintenance
// and hold no slot yet.
func (r *Reconciler) queuedNodes(ctx context.Context, _ client.Object) []reconcile.Request {
	all := nodemeta.List()
	if err := r.Client.List(ctx, all); err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, o := range all.Items {
		st := o.Annotations[kbv1.AnnotationMaintenanceState]
		if (st == "" || st == kbv1.MaintenanceQueued) && strings.TrimSpace(o.Annotations[kbv1.AnnotationMaintenance]) == "true" {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: o.Name}})
		}
	}
	return out
}

// patchAnnotations merge-patches annotations (nil deletes) and, when
// given, spec fields. With a resourceVersion the patch fails on a Node
// that changed since it was read, and the reconcile starts over.
func (r *Reconciler) patchAnnotations(ctx context.Context, node, resourceVersion string, ann map[string]any, spec map[string]any) error {
	meta := map[string]any{"annotations": ann}
	if resourceVersion != "" {
		meta["resourceVersion"] = resourceVersion
	}
	body := map[string]any{"metadata": meta}
	if spec != nil {
		body["spec"] = spec
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return err
	}
	err = r.Client.Patch(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, client.RawPatch(types.MergePatchType, raw), client.FieldOwner(FieldManager))
	if err != nil {
		return fmt.Errorf("patching Node %s: %w", node, err)
	}
	return nil
}

func (r *Reconciler) event(n *metav1.PartialObjectMetadata, typ, reason, action, note string, args ...any) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, UID: n.UID}}
	node.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Node"))
	r.Recorder.Eventf(node, nil, typ, reason, action, note, args...)
}
