// Package uninstall removes what kubeblade put on a cluster's Nodes: the
// `kubeblade-operator cleanup` command (a Helm pre-delete hook) strips every
// kubeblade label, taint and condition and lets go of the BladeConfigs.
package uninstall

import (
	"context"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	kbv1 "github.com/kubeblade/kubeblade/api/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/operator/agentdaemonset"
)

// Prefix is the prefix of every label kubeblade writes on Nodes.
const Prefix = "kubeblade.io/"

// FieldManager is used for the label, taint and condition removals.
const FieldManager = "kubeblade-operator-cleanup"

// +kubebuilder:rbac:groups="",resources=nodes/status,verbs=patch
// +kubebuilder:rbac:groups=apps,namespace=kubeblade-system,resources=daemonsets,verbs=list;delete;deletecollection

// Report says what Uninstall changed.
type Report struct {
	DaemonSets  int
	Finalizers  int
	Nodes       int
	NodeChanges int
}

// Uninstall removes kubeblade from the cluster's Nodes: the agent
// DaemonSets in namespace (so agents stop relabelling), the finalizer of
// every BladeConfig (so they can be deleted without the operator), and
// from every Node each kubeblade.io/ label, the thermal-critical taint and
// the BladeThermalCritical condition. It is idempotent. c must read from
// the API server, not a cache. Stop the operator first, or it puts the
// kubeblade.io/config labels back.
func Uninstall(ctx context.Context, c client.Client, namespace string) (Report, error) {
	var rep Report
	var dss appsv1.DaemonSetList
	if err := c.List(ctx, &dss, client.InNamespace(namespace), client.MatchingLabels{agentdaemonset.LabelManagedBy: agentdaemonset.ManagedBy}); err != nil {
		return rep, fmt.Errorf("listing agent DaemonSets: %w", err)
	}
	for i := range dss.Items {
		if err := c.Delete(ctx, &dss.Items[i]); client.IgnoreNotFound(err) != nil {
			return rep, fmt.Errorf("deleting DaemonSet %s: %w", dss.Items[i].Name, err)
		}
		rep.DaemonSets++
	}

	var bcs kbv1.BladeConfigList
	if err := c.List(ctx, &bcs); err != nil {
		return rep, fmt.Errorf("listing BladeConfigs: %w", err)
	}
	for i := range bcs.Items {
		bc := &bcs.Items[i]
		if !controllerutil.ContainsFinalizer(bc, kbv1.FinalizerCleanup) {
			continue
		}
		orig := bc.DeepCopy()
		controllerutil.RemoveFinalizer(bc, kbv1.FinalizerCleanup)
		if err := c.Patch(ctx, bc, client.MergeFrom(orig)); client.IgnoreNotFound(err) != nil {
			return rep, fmt.Errorf("BladeConfig %s: %w", bc.Name, err)
		}
		rep.Finalizers++
	}

	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes); err != nil {
		return rep, fmt.Errorf("listing nodes: %w", err)
	}
	rep.Nodes = len(nodes.Items)
	for i := range nodes.Items {
		changed, err := stripNode(ctx, c, nodes.Items[i].Name)
		if err != nil {
			return rep, fmt.Errorf("node %s: %w", nodes.Items[i].Name, err)
		}
		if changed {
			rep.NodeChanges++
		}
	}
	return rep, nil
}

// stripNode removes kubeblade's marks from one Node, retrying on
// conflicts: the taint and condition lists are replaced whole, so the
// patches carry the resourceVersion they were computed from.
func stripNode(ctx context.Context, c client.Client, name string) (bool, error) {
	changed := false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n := &corev1.Node{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
			return client.IgnoreNotFound(err)
		}
		orig := n.DeepCopy()
		metaChanged := false
		for k := range n.Labels {
			if strings.HasPrefix(k, Prefix) {
				delete(n.Labels, k)
				metaChanged = true
			}
		}
		var taints []corev1.Taint
		for _, t := range n.Spec.Taints {
			if t.Key == kbv1.TaintThermalCritical {
				metaChanged = true
				continue
			}
			taints = append(taints, t)
		}
		n.Spec.Taints = taints
		if metaChanged {
			if err := c.Patch(ctx, n, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}), client.FieldOwner(FieldManager)); err != nil {
				return client.IgnoreNotFound(err)
			}
			changed = true
			orig = n.DeepCopy()
		}
		var conds []corev1.NodeCondition
		for _, cond := range n.Status.Conditions {
			if cond.Type != kbv1.NodeConditionThermalCritical {
				conds = append(conds, cond)
			}
		}
		if len(conds) == len(n.Status.Conditions) {
			return nil
		}
		n.Status.Conditions = conds
		if err := c.Status().Patch(ctx, n, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}), client.FieldOwner(FieldManager)); err != nil {
			return client.IgnoreNotFound(err)
		}
		changed = true
		return nil
	})
	return changed, err
}
