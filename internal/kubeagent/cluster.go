package kubeagent

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubeblade/kubeblade/api/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/core"
	"github.com/kubeblade/kubeblade/internal/kubeclient"
)

// The cluster-aware half of the reporter (docs/cluster-aware.md): the fan peer's Blade,
// the Node's maintenance and attention states, and the long press that
// toggles maintenance. Like the rest, it reads only named objects: its own
// Node and, when one is declared, the one peer Blade.

// followPeer switches the peer Blade watch to name ("" = none).
func (r *Reporter) followPeer(ctx context.Context, name string) {
	if name == r.peerName {
		return
	}
	if r.peerWatch != nil {
		r.peerWatch.stop()
		r.peerWatch = nil
	}
	r.peerName = name
	if err := r.o.Agent.SetFanPeer(ctx, name); err != nil {
		r.log.Error("setting the fan peer", "peer", name, "err", err)
	}
	if name == "" {
		r.log.Info("no fan peer: the fan follows this blade's own demand")
		return
	}
	r.log.Info("following fan peer", "peer", name)
	r.peerWatch = newObjectWatch(ctx, r.c.Blades, &v1alpha1.Blade{}, name, nil, nil)
}

// onPeer hands the peer's Blade, as last listed or watched, to the agent.
// Nothing is said before the first list: the agent keeps the lost-peer
// floor meanwhile, and calls the peer lost only once core.PeerGrace has
// passed without one (the cluster unreachable from the start).
func (r *Reporter) onPeer(ctx context.Context) {
	if r.peerWatch == nil {
		return
	}
	var o core.PeerObservation
	switch b, ok := r.peerWatch.get().(*v1alpha1.Blade); {
	case ok && b != nil:
		o = peerObservation(b)
	case r.peerWatch.synced():
		o = core.PeerObservation{Present: false}
	default:
		return
	}
	if err := r.o.Agent.ObserveFanPeer(ctx, o); err != nil {
		r.log.Error("observing the fan peer", "peer", r.peerName, "err", err)
	}
}

func peerObservation(b *v1alpha1.Blade) core.PeerObservation {
	o := core.PeerObservation{Present: true, Critical: b.Status.Critical, StaleAfter: b.Status.StalePeriod()}
	if h := b.Status.HeartbeatTime; h != nil {
		o.HeartbeatTime = h.Time
	}
	if d := b.Status.Fan.DemandPercent; d != nil && *d >= 0 && *d <= 100 {
		v := uint8(*d)
		o.DemandPercent = &v
	}
	return o
}

// nodeState is what the Node says that the LEDs show.
type nodeState struct {
	requested   bool
	maintenance core.MaintenanceState
	attention   bool
}

// readNodeState reads the maintenance request, the operator's maintenance
// state and whether the Node needs attention: cordoned by someone other
// than kubeblade, or its Ready condition not True.
func readNodeState(n *corev1.Node, requested bool) nodeState {
	s := nodeState{requested: requested}
	switch v := n.Annotations[v1alpha1.AnnotationMaintenanceState]; v {
	case v1alpha1.MaintenanceQueued, v1alpha1.MaintenanceDraining, v1alpha1.MaintenanceDrained, v1alpha1.MaintenanceFailed:
		s.maintenance = core.MaintenanceState(v)
	}
	ownCordon := n.Annotations[v1alpha1.AnnotationMaintenanceCordoned] == "true"
	ready := false
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			ready = c.Status == corev1.ConditionTrue
		}
	}
	s.attention = (n.Spec.Unschedulable && !ownCordon) || !ready
	return s
}

func (r *Reporter) onNodeState(ctx context.Context, s nodeState) {
	if r.nodeState != nil && *r.nodeState == s {
		return
	}
	if err := r.o.Agent.SetNodeState(ctx, s.requested, s.maintenance, s.attention); err != nil {
		r.log.Error("setting the node state", "err", err)
		return
	}
	r.nodeState = &s
}

// toggleMaintenance writes the opposite of the Node's maintenance request:
// "true" unless it is "true". The patch carries the resourceVersion the
// decision was made on, so a request someone changed meanwhile is not
// overwritten blindly: the write fails and is decided again on the fresh
// Node.
func toggleMaintenance(ctx context.Context, nodes *kubeclient.NodeClient, n *corev1.Node) (string, error) {
	want := "true"
	if n.Annotations[v1alpha1.AnnotationMaintenance] == "true" {
		want = "false"
	}
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": n.ResourceVersion,
		"annotations":     map[string]any{v1alpha1.AnnotationMaintenance: want},
	}})
	if err != nil {
		return "", err
	}
	if _, err := nodes.Patch(ctx, n.Name, types.MergePatchType, body, patchOptions); err != nil {
		return "", fmt.Errorf("setting %s=%s: %w", v1alpha1.AnnotationMaintenance, want, err)
	}
	return want, nil
}
