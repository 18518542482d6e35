package e2e

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	kbv1 "github.com/kubeblade/kubeblade/api/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/config"
	"github.com/kubeblade/kubeblade/internal/testwait"
)

// testFanPeersAcrossProcesses: two agent processes whose Nodes declare each
// other fan peers follow each other's demand through a watch of the peer's
// Blade, under the agents' installed RBAC and admission policy (the suite
// fails on any refused agent request).
func testFanPeersAcrossProcesses(t *testing.T) {
	needCluster(t)
	ctx := t.Context()
	if err := cluster.DeclareFanPeers(ctx, "blade-1", "blade-2"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, n := range []string{"blade-1", "blade-2"} {
			annotate(context.Background(), t, n, kbv1.AnnotationFanPeer, nil)
		}
		annotate(context.Background(), t, "blade-2", kbv1.AnnotationFanSpeed, nil)
	})
	for _, n := range []string{"blade-1", "blade-2"} {
		testwait.Eventually(t, 20*time.Second, n+" follows its fan peer", func(ctx context.Context) (bool, string) {
			b, err := blade(ctx, n)
			if err != nil {
				return false, err.Error()
			}
			return b.Status.Fan.Peer != nil && b.Status.Fan.Peer.State == kbv1.FanPeerSynced, fmt.Sprintf("%+v", b.Status.Fan.Peer)
		})
	}
	annotate(ctx, t, "blade-2", kbv1.AnnotationFanSpeed, ptrTo("95"))
	testwait.Eventually(t, 20*time.Second, "blade-1's fan at blade-2's 95 %", func(ctx context.Context) (bool, string) {
		st, err := cluster.Agent("blade-1").State(ctx)
		if err != nil {
			return false, err.Error()
		}
		return st.FanPercent == 95, fmt.Sprint(st.FanPercent)
	})
}

// testLongPressDrainsTheBlade: a 3.5 s hold of blade-3's simulated button
// (the simulator's control socket, as in the demo) asks for maintenance
// from the agent process; the operator process cordons and drains the
// Node; the edge LED turns steady safe-to-pull; a second hold ends it.
func testLongPressDrainsTheBlade(t *testing.T) {
	needCluster(t)
	const name = "blade-3"
	ctx := t.Context()
	a := cluster.Agent(name)
	since := time.Now()
	hold := func() {
		t.Helper()
		if _, err := a.Sim(ctx, http.MethodPost, "/button?hold=3500ms"); err != nil {
			t.Fatal(err)
		}
	}
	hold()
	testwait.Eventually(t, 60*time.Second, "blade-3 drained", func(ctx context.Context) (bool, string) {
		n := node(ctx, t, name)
		return n.Annotations[kbv1.AnnotationMaintenanceState] == kbv1.MaintenanceDrained && n.Spec.Unschedulable,
			fmt.Sprintf("request %q state %q unschedulable %t", n.Annotations[kbv1.AnnotationMaintenance],
				n.Annotations[kbv1.AnnotationMaintenanceState], n.Spec.Unschedulable)
	})
	waitEvent(t, name, "ButtonLongPressed", since)
	for _, r := range []string{"MaintenanceRequested", "Draining", "Drained"} {
		waitOperatorEvent(t, name, r, since)
	}
	testwait.Eventually(t, 10*time.Second, "edge LED steady safe-to-pull", func(ctx context.Context) (bool, string) {
		st, err := a.State(ctx)
		if err != nil {
			return false, err.Error()
		}
		return st.EdgeLED == config.DefaultSafeToPullColor, "edge LED " + st.EdgeLED
	})
	// A person lets go before pressing again: a release and a press closer
	// than the agent's 50 ms debounce are contact bounce, one long press.
	time.Sleep(200 * time.Millisecond)
	hold()
	waitOperatorEvent(t, name, "MaintenanceEnded", since)
	testwait.Eventually(t, 20*time.Second, "blade-3 uncordoned and idle", func(ctx context.Context) (bool, string) {
		n := node(ctx, t, name)
		st, err := a.State(ctx)
		if err != nil {
			return false, err.Error()
		}
		_, state := n.Annotations[kbv1.AnnotationMaintenanceState]
		return !n.Spec.Unschedulable && !state && st.EdgeLED == config.DefaultIdleColor, "edge LED " + st.EdgeLED
	})
	annotate(ctx, t, name, kbv1.AnnotationMaintenance, nil)
}

// waitOperatorEvent waits for an Event the operator reported about a Node.
func waitOperatorEvent(t *testing.T, nodeName, reason string, since time.Time) {
	t.Helper()
	testwait.Eventually(t, 30*time.Second, reason+" Event for "+nodeName, func(ctx context.Context) (bool, string) {
		evs, err := events(ctx, nodeName, reason)
		if err != nil {
			return false, err.Error()
		}
		for _, e := range evs {
			if !e.EventTime.Time.Before(since.Truncate(time.Second)) && e.ReportingController == "kubeblade-operator" {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d %s Event(s), none new from the operator", len(evs), reason)
	})
}
