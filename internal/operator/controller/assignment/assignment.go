// Package assignment is the controller that labels every candidate Node
// with the BladeConfig it belongs to (kubeblade.io/config), as package
// placement decides. It recomputes the whole placement from the informer
// cache on any relevant change and patches only the Nodes whose label
// differs, so a settled cluster costs no writes.
package assignment

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
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
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kbv1 "github.com/kubeblade/kubeblade/api/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/operator/nodemeta"
	"github.com/kubeblade/kubeblade/internal/operator/opmetrics"
	"github.com/kubeblade/kubeblade/internal/operator/outcome"
	"github.com/kubeblade/kubeblade/internal/operator/placement"
)

const (
	// ControllerName names the controller in logs and metrics.
	ControllerName = "bladeconfig-assignment"
	// FieldManager owns the kubeblade.io/config label on Nodes.
	FieldManager = "kubeblade-operator-assignment"
	// DefaultWorkers is how many Node patches run at once.
	DefaultWorkers = 16
	// DefaultPendingTimeout is how long a patched Node may look stale in
	// the cache before it is patched again.
	DefaultPendingTimeout = 30 * time.Second
)

// Event reasons on BladeConfigs.
const (
	ReasonNodesAssigned = "NodesAssigned"
	ReasonNodesReleased = "NodesReleased"
	ReasonAssignFailed  = "AssignmentFailed"
)

// singleKey is the one work item: every change leads to a full, cheap
// recomputation, and a burst of Node events collapses into one reconcile.
var singleKey = reconcile.Request{NamespacedName: types.NamespacedName{Name: "all-nodes"}}

// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=kubeblade.io,resources=bladeconfigs,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconciler labels Nodes.
type Reconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
	Clock    clock.PassiveClock
	// Workers bounds concurrent patches (DefaultWorkers if zero).
	Workers int
	// PendingTimeout: see DefaultPendingTimeout.
	PendingTimeout time.Duration
	// Outcome, when set, learns which BladeConfigs' Nodes could not be
	// labelled, so the status controller shows the API server's refusal
	// in the BladeConfig's Degraded condition; it clears once they are.
	Outcome *outcome.Store

	mu sync.Mutex
	// pending remembers labels just written, so a cache that has not yet
	// seen the write does not cause a second, identical patch.
	pending map[string]pendingWrite
}

type pendingWrite struct {
	value string
	until time.Time
}

// SetupWithManager registers the controller.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	toKey := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{singleKey}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		WatchesMetadata(&corev1.Node{}, toKey, builder.WithPredicates(nodemeta.LabelsChanged())).
		Watches(&kbv1.BladeConfig{}, toKey, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{}, deletionStarted()))).
		Complete(r)
}

func deletionStarted() predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectOld.GetDeletionTimestamp().IsZero() != e.ObjectNew.GetDeletionTimestamp().IsZero()
	}}
}

// Reconcile recomputes the assignment and patches the Nodes that differ.
func (r *Reconciler) Reconcile(ctx context.Context, _ reconcile.Request) (ctrl.Result, error) {
	log := logf.FromContext(ctx)
	var bcs kbv1.BladeConfigList
	if err := r.Client.List(ctx, &bcs); err != nil {
		return ctrl.Result{}, err
	}
	nodes := nodemeta.List()
	if err := r.Client.List(ctx, nodes); err != nil {
		return ctrl.Result{}, err
	}
	configs, byName := placement.Eligible(bcs.Items)
	res := placement.Compute(configs, placement.NodesOf(nodes.Items))

	opmetrics.AssignedNodes.Reset()
	for name, n := range res.Matched {
		opmetrics.AssignedNodes.WithLabelValues(name).Set(float64(n))
	}

	todo, waiting := r.diff(nodes.Items, res.Winner)
	if len(todo) == 0 {
		r.record(byName, nil)
		if waiting {
			return ctrl.Result{RequeueAfter: r.pendingTimeout()}, nil
		}
		return ctrl.Result{}, nil
	}
	log.V(1).Info("patching Node labels", "count", len(todo))
	errs := r.patchAll(ctx, todo)

	// One Event per config and direction, not one per Node.
	assigned, released := map[string]int{}, map[string]int{}
	for _, c := range todo {
		if c.err != nil {
			continue
		}
		if c.want != "" {
			assigned[c.want]++
		}
		if c.have != "" {
			released[c.have]++
		}
	}
	for name, n := range assigned {
		if bc := byName[name]; bc != nil && r.Recorder != nil {
			r.Recorder.Eventf(bc, nil, corev1.EventTypeNormal, ReasonNodesAssigned, "Assign", "Assigned %d node(s)", n)
		}
	}
	for name, n := range released {
		if bc := byName[name]; bc != nil && r.Recorder != nil {
			r.Recorder.Eventf(bc, nil, corev1.EventTypeNormal, ReasonNodesReleased, "Release", "Released %d node(s)", n)
		}
	}
	r.record(byName, todo)
	if err := errors.Join(errs...); err != nil {
		return ctrl.Result{}, fmt.Errorf("labelling nodes: %w", err)
	}
	if waiting {
		return ctrl.Result{RequeueAfter: r.pendingTimeout()}, nil
	}
	return ctrl.Result{}, nil
}

// maxNamedNodes bounds how many failing Nodes a message names.
const maxNamedNodes = 5

// record tells Outcome, per BladeConfig, whether its Nodes' labels could
// be written this time: a failed patch counts against the config the Node
// was to join (or, when it was only leaving, the one it was leaving), and
// every other config is cleared. A config with failures also gets a
// Warning Event naming the Nodes and the API server's first error.
func (r *Reconciler) record(byName map[string]*kbv1.BladeConfig, todo []*change) {
	failed := map[string][]*change{}
	for _, c := range todo {
		if c.err == nil {
			continue
		}
		name := c.want
		if name == "" {
			name = c.have
		}
		failed[name] = append(failed[name], c)
	}
	for name, bc := range byName {
		cs := failed[name]
		var err error
		if len(cs) > 0 {
			nodes := make([]string, 0, min(len(cs), maxNamedNodes))
			for _, c := range cs[:min(len(cs), maxNamedNodes)] {
				nodes = append(nodes, c.node)
			}
			more := ""
			if len(cs) > maxNamedNodes {
				more = fmt.Sprintf(" and %d more", len(cs)-maxNamedNodes)
			}
			err = fmt.Errorf("labelling %d node(s) %s=%s failed (%s%s): %v",
				len(cs), kbv1.LabelConfig, name, strings.Join(nodes, ", "), more, cs[0].err)
			if r.Recorder != nil {
				r.Recorder.Eventf(bc, nil, corev1.EventTypeWarning, ReasonAssignFailed, "Assign", "%v", err)
			}
		}
		if r.Outcome != nil && bc.DeletionTimestamp.IsZero() {
			r.Outcome.Record(ControllerName, bc, err)
		}
	}
}

type change struct {
	node       string
	have, want string
	err        error
}

func (r *Reconciler) pendingTimeout() time.Duration {
	if r.PendingTimeout > 0 {
		return r.PendingTimeout
	}
	return DefaultPendingTimeout
}

func (r *Reconciler) now() time.Time {
	if r.Clock == nil {
		return time.Now()
	}
	return r.Clock.Now()
}

// diff lists the Nodes to patch, skipping those whose patch is still on
// its way into the cache (waiting reports that some were skipped).
func (r *Reconciler) diff(nodes []metav1.PartialObjectMetadata, winner map[string]string) (todo []*change, waiting bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pending == nil {
		r.pending = map[string]pendingWrite{}
	}
	now := r.now()
	seen := make(map[string]struct{}, len(nodes))
	for i := range nodes {
		n := &nodes[i]
		seen[n.Name] = struct{}{}
		have, want := n.Labels[kbv1.LabelConfig], winner[n.Name]
		if have == want {
			delete(r.pending, n.Name)
			continue
		}
		if p, ok := r.pending[n.Name]; ok && p.value == want && now.Before(p.until) {
			waiting = true
			continue
		}
		todo = append(todo, &change{node: n.Name, have: have, want: want})
	}
	for name := range r.pending {
		if _, ok := seen[name]; !ok {
			delete(r.pending, name)
		}
	}
	return todo, waiting
}

func (r *Reconciler) patchAll(ctx context.Context, todo []*change) []error {
	workers := r.Workers
	if workers <= 0 {
		workers = DefaultWorkers
	}
	work := make(chan *change)
	var wg sync.WaitGroup
	for range min(workers, len(todo)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range work {
				c.err = r.patch(ctx, c)
			}
		}()
	}
	for _, c := range todo {
		work <- c
	}
	close(work)
	wg.Wait()

	var errs []error
	until := r.now().Add(r.pendingTimeout())
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range todo {
		if c.err != nil {
			errs = append(errs, fmt.Errorf("node %s: %w", c.node, c.err))
			continue
		}
		r.pending[c.node] = pendingWrite{value: c.want, until: until}
	}
	return errs
}

func (r *Reconciler) patch(ctx context.Context, c *change) error {
	n := nodemeta.Node()
	n.Name = c.node
	err := r.Client.Patch(ctx, n, client.RawPatch(types.MergePatchType, nodemeta.LabelPatch(kbv1.LabelConfig, c.want)), client.FieldOwner(FieldManager))
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err == nil {
		opmetrics.NodeLabelWrites.Inc()
	}
	return err
}
