// Package drain empties a cordoned Node through the Eviction API with the
// semantics of `kubectl drain` (k8s.io/kubectl/pkg/drain): DaemonSet and
// mirror pods are left where they are, pods with emptyDir volumes are
// evicted only when allowed (their data is lost), pods that no controller
// would recreate are not evicted, and PodDisruptionBudgets are honoured by
// the API server, which refuses an eviction they forbid (429) and is asked
// again on the next pass.
//
// kubectl's package is not imported: it pulls in kubectl's command
// framework, cli-runtime and kustomize (about 700 packages) for a loop this
// size. Unlike kubectl's, this drain does not block: each Pass does what can
// be done now and reports what is left, so a controller drives it across
// reconciles and restarts.
package drain

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Options shape a drain.
type Options struct {
	// DeleteEmptyDirData allows evicting pods with emptyDir volumes.
	DeleteEmptyDirData bool
}

// Why says why a pod is still on the Node.
type Why string

const (
	// Terminating: evicted (or deleted), waiting for it to go.
	Terminating Why = "terminating"
	// DisruptionBudget: the API server refused the eviction because a
	// PodDisruptionBudget does not allow it now; retried next pass.
	DisruptionBudget Why = "disruption budget"
	// EmptyDir: the pod has emptyDir volumes and DeleteEmptyDirData is off.
	EmptyDir Why = "emptyDir data"
	// Unmanaged: no controller would recreate the pod elsewhere.
	Unmanaged Why = "no controller"
)

// Remaining is a pod still on the Node.
type Remaining struct {
	// Pod is namespace/name.
	Pod string
	Why Why
	// Detail is the API server's message for a refused eviction.
	Detail string
}

func (r Remaining) String() string {
	if r.Detail != "" {
		return fmt.Sprintf("%s (%s: %s)", r.Pod, r.Why, r.Detail)
	}
	return fmt.Sprintf("%s (%s)", r.Pod, r.Why)
}

// Result is what one Pass found and did.
type Result struct {
	// Evicted are the pods whose eviction the API server accepted now.
	Evicted []string
	// Remaining are the pods that keep the drain from finishing, sorted.
	Remaining []Remaining
	// Left are the pods a drain leaves on purpose (DaemonSet, mirror).
	Left int
}

// Done reports whether nothing but pods left on purpose remains.
func (r Result) Done() bool { return len(r.Remaining) == 0 }

// Blocking names the remaining pods, for an Event.
func (r Result) Blocking() string {
	var parts []string
	for _, p := range r.Remaining {
		parts = append(parts, p.String())
	}
	return strings.Join(parts, ", ")
}

// Evictor is what a Pass needs from the API server: a reader that lists
// the Node's pods (uncached: an operator must not cache every pod of a
// cluster for the rare drain) and a client that posts evictions.
type Evictor struct {
	Reader client.Reader
	Client client.Client
}

// Pass lists the pods bound to node and evicts every one a drain may
// evict. It is safe to repeat: a pod already terminating is waited for,
// not evicted again.
func (e Evictor) Pass(ctx context.Context, node string, o Options) (Result, error) {
	pods := &corev1.PodList{}
	if err := e.Reader.List(ctx, pods, client.MatchingFields{"spec.nodeName": node}); err != nil {
		return Result{}, fmt.Errorf("listing the pods on %s: %w", node, err)
	}
	var res Result
	for i := range pods.Items {
		p := &pods.Items[i]
		key := p.Namespace + "/" + p.Name
		switch Classify(p, o) {
		case Leave:
			res.Left++
			continue
		case Finished:
			// Nothing runs; kubectl removes them, and failing to is no
			// reason to keep a blade.
			_ = e.evict(ctx, p)
			continue
		case Wait:
			res.Remaining = append(res.Remaining, Remaining{Pod: key, Why: Terminating})
			continue
		case BlockEmptyDir:
			res.Remaining = append(res.Remaining, Remaining{Pod: key, Why: EmptyDir})
			continue
		case BlockUnmanaged:
			res.Remaining = append(res.Remaining, Remaining{Pod: key, Why: Unmanaged})
			continue
		}
		switch err := e.evict(ctx, p); {
		case err == nil:
			res.Evicted = append(res.Evicted, key)
			res.Remaining = append(res.Remaining, Remaining{Pod: key, Why: Terminating})
		case apierrors.IsNotFound(err):
			// Gone meanwhile.
		case apierrors.IsTooManyRequests(err):
			res.Remaining = append(res.Remaining, Remaining{Pod: key, Why: DisruptionBudget, Detail: budgetDetail(err)})
		default:
			return res, fmt.Errorf("evicting %s: %w", key, err)
		}
	}
	sort.Slice(res.Remaining, func(i, j int) bool { return res.Remaining[i].Pod < res.Remaining[j].Pod })
	sort.Strings(res.Evicted)
	return res, nil
}

func (e Evictor) evict(ctx context.Context, p *corev1.Pod) error {
	ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}}
	return e.Client.SubResource("eviction").Create(ctx, p, ev)
}

// budgetDetail keeps the part of a 429 that names the budget.
func budgetDetail(err error) string {
	var st apierrors.APIStatus
	if s, ok := err.(apierrors.APIStatus); ok {
		st = s
	} else {
		return err.Error()
	}
	if d := st.Status().Details; d != nil {
		for _, c := range d.Causes {
			if c.Message != "" {
				return c.Message
			}
		}
	}
	return st.Status().Message
}

// Class is what a drain does with one pod.
type Class int

const (
	// Evict through the Eviction API.
	Evict Class = iota
	// Leave: DaemonSet and mirror pods stay (a DaemonSet would put its
	// pod right back; a mirror pod is the kubelet's static pod).
	Leave
	// Finished: Succeeded or Failed; removed, never blocking.
	Finished
	// Wait: already terminating.
	Wait
	// BlockEmptyDir: would lose emptyDir data without DeleteEmptyDirData.
	BlockEmptyDir
	// BlockUnmanaged: no controller would recreate it (kubectl refuses
	// these without --force).
	BlockUnmanaged
)

// mirrorAnnotation marks the API server's copy of a static pod.
const mirrorAnnotation = "kubernetes.io/config.mirror"

// Classify decides what a drain does with p, in kubectl drain's order of
// filters: deleted, DaemonSet, mirror, finished, emptyDir, unreplicated.
func Classify(p *corev1.Pod, o Options) Class {
	if p.DeletionTimestamp != nil {
		return Wait
	}
	if c := metav1.GetControllerOf(p); c != nil && c.Kind == "DaemonSet" {
		return Leave
	}
	if _, ok := p.Annotations[mirrorAnnotation]; ok {
		return Leave
	}
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return Finished
	}
	if !o.DeleteEmptyDirData {
		for _, v := range p.Spec.Volumes {
			if v.EmptyDir != nil {
				return BlockEmptyDir
			}
		}
	}
	if metav1.GetControllerOf(p) == nil {
		return BlockUnmanaged
	}
	return Evict
}
