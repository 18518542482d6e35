package kubeagent

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	agentconfigv1 "github.com/kubeblade/kubeblade/api/agentconfig/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeblade/kubeblade/api/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/core"
	"github.com/kubeblade/kubeblade/internal/hardware"
	"github.com/kubeblade/kubeblade/internal/hardware/simulated"
	"github.com/kubeblade/kubeblade/internal/testwait"
)

const wait = 30 * time.Second

// withHeartbeat shortens the Blade heartbeat, so a killed peer goes stale
// (three periods) within seconds.
func withHeartbeat(d time.Duration) option {
	return func(_ *simulated.Options, _ *agentconfigv1.AgentConfig, o *Options) { o.Heartbeat = d }
}

func (b *bladeUnderTest) blade1(ctx context.Context) (*v1alpha1.Blade, string) {
	bl, err := b.getBlade()
	if err != nil {
		return nil, err.Error()
	}
	return bl, ""
}

func peerState(bl *v1alpha1.Blade) string {
	if bl == nil || bl.Status.Fan.Peer == nil {
		return ""
	}
	return bl.Status.Fan.Peer.Name + "/" + bl.Status.Fan.Peer.State
}

// TestFanPeers runs two agents whose Nodes declare each other fan peers
// (docs/cluster-aware.md): each publishes its own demand and drives the higher of both;
// a critical peer means 100 %; a killed peer goes stale after three of its
// heartbeat periods (FanPeerLost, the lost-peer floor) and is followed
// again when it returns (FanPeerRestored).
func TestFanPeers(t *testing.T) {
	a := startBlade(t, "peer-a", withHeartbeat(2*time.Second))
	b := startBlade(t, "peer-b", withHeartbeat(2*time.Second))
	a.annotate(map[string]*string{v1alpha1.AnnotationFanPeer: ptr("peer-b")})
	b.annotate(map[string]*string{v1alpha1.AnnotationFanPeer: ptr("peer-a"), v1alpha1.AnnotationFanSpeed: ptr("90")})

	testwait.Eventually(t, wait, "peer-a drives peer-b's 90 % demand", func(ctx context.Context) (bool, string) {
		bl, detail := a.blade1(ctx)
		st := a.agent.Status()
		return st.FanPercent == 90 && a.blade.State().FanPercent == 90 && peerState(bl) == "peer-b/Synced",
			fmt.Sprintf("fan %d %% hw %d %% peer %s %s", st.FanPercent, a.blade.State().FanPercent, peerState(bl), detail)
	})
	testwait.Eventually(t, wait, "both publish their own demand and heartbeat period", func(ctx context.Context) (bool, string) {
		ba, _ := a.blade1(ctx)
		bb, _ := b.blade1(ctx)
		if ba == nil || bb == nil || ba.Status.Fan.DemandPercent == nil || bb.Status.Fan.DemandPercent == nil {
			return false, "no demand yet"
		}
		own := int32(a.agent.Status().DemandPercent)
		return *bb.Status.Fan.DemandPercent == 90 && *ba.Status.Fan.DemandPercent == own && own < 90 &&
				ba.Status.HeartbeatPeriodSeconds == 2 && ba.Status.Fan.Mode == "auto",
			fmt.Sprintf("a demand %d (own %d) b demand %d period %d", *ba.Status.Fan.DemandPercent, own, *bb.Status.Fan.DemandPercent, ba.Status.HeartbeatPeriodSeconds)
	})

	// A critical peer means a full fan, whatever it demands.
	b.annotate(map[string]*string{v1alpha1.AnnotationFanSpeed: ptr("auto")})
	b.blade.SetTemperature(75)
	testwait.Eventually(t, wait, "peer-a at 100 % for its critical peer", func(context.Context) (bool, string) {
		return a.blade.State().FanPercent == 100 && !a.agent.Status().Critical, fmt.Sprint(a.blade.State().FanPercent)
	})
	b.blade.SetTemperature(30)
	testwait.Eventually(t, wait, "peer-b back to normal", func(context.Context) (bool, string) {
		return !b.agent.Status().Critical && a.agent.Status().FanPercent < 100, fmt.Sprint(a.agent.Status().FanPercent)
	})

	// Kill peer-b's agent: its heartbeat ages out.
	// When (three heartbeat periods after the last) is core's rule,
	// asserted on explicit times in core's TestFanPeer; here the Event
	// must come, and a wall-clock bound would measure the machine.
	b.stop()
	ev := a.waitEvent("FanPeerLost")
	if ev.Type != corev1.EventTypeWarning || !strings.Contains(ev.Note, "peer-b") || !strings.Contains(ev.Note, "60 %") {
		t.Errorf("FanPeerLost = %s %q", ev.Type, ev.Note)
	}
	testwait.Eventually(t, wait, "peer-a at the lost-peer floor, Blade says Lost", func(ctx context.Context) (bool, string) {
		bl, _ := a.blade1(ctx)
		own := a.agent.Status().DemandPercent
		return a.blade.State().FanPercent == max(own, 60) && peerState(bl) == "peer-b/Lost",
			fmt.Sprintf("fan %d own %d peer %s", a.blade.State().FanPercent, own, peerState(bl))
	})

	// The peer's agent comes back (same Node, new process).
	startBlade(t, "peer-b", withHeartbeat(2*time.Second))
	a.waitEvent("FanPeerRestored")
	testwait.Eventually(t, wait, "peer-a follows its peer again", func(ctx context.Context) (bool, string) {
		bl, _ := a.blade1(ctx)
		return peerState(bl) == "peer-b/Synced", peerState(bl)
	})

	// Removing the annotation ends the sync.
	a.annotate(map[string]*string{v1alpha1.AnnotationFanPeer: nil})
	testwait.Eventually(t, wait, "no peer on peer-a", func(ctx context.Context) (bool, string) {
		bl, _ := a.blade1(ctx)
		st := a.agent.Status()
		return st.FanPeer == "" && st.FanPercent == st.DemandPercent && peerState(bl) == "", peerState(bl)
	})
}

// TestFanPeerMissingAndInvalid: a peer with no Blade gets the lost-peer
// floor at once (its Blade says Lost); the Warning waits for core.PeerGrace,
// since blades that boot together create their Blades seconds apart (the
// core's tests time it). An invalid peer (the blade itself, not a DNS
// label) is refused with InvalidAnnotation and changes nothing.
func TestFanPeerMissingAndInvalid(t *testing.T) {
	a := startBlade(t, "lonely")
	a.annotate(map[string]*string{v1alpha1.AnnotationFanPeer: ptr("ghost")})
	testwait.Eventually(t, wait, "lost-peer floor, Blade says Lost", func(ctx context.Context) (bool, string) {
		bl, _ := a.blade1(ctx)
		return a.blade.State().FanPercent >= 60 && a.agent.Status().FanPeerState == core.PeerPending && peerState(bl) == "ghost/Lost",
			fmt.Sprintf("fan %d state %s blade %s", a.blade.State().FanPercent, a.agent.Status().FanPeerState, peerState(bl))
	})
	if evs := a.events("FanPeerLost"); len(evs) != 0 {
		t.Fatalf("FanPeerLost within the grace: %+v", evs)
	}

	for _, bad := range []string{"lonely", "Not_A_Label"} {
		a.annotate(map[string]*string{v1alpha1.AnnotationFanPeer: ptr(bad)})
		testwait.Eventually(t, wait, "InvalidAnnotation for "+bad, func(context.Context) (bool, string) {
			for _, e := range a.events("InvalidAnnotation") {
				if strings.Contains(e.Note, fmt.Sprintf("kubeblade.io/fan-peer=%q", bad)) {
					return e.Type == corev1.EventTypeWarning, e.Note
				}
			}
			return false, ""
		})
		if st := a.agent.Status(); st.FanPeer != "ghost" {
			t.Fatalf("invalid peer %q changed the peer to %q", bad, st.FanPeer)
		}
	}
}

// TestFanPeerAgesOutWithTheClusterDown: with the API server gone, the last
// known peer demand ages out and the lost-peer floor applies on the
// hardware, without any help from the cluster.
func TestFanPeerAgesOutWithTheClusterDown(t *testing.T) {
	// The outage suite's own API server: no other test sees it stop.
	outageSuite.Need(t)
	c := &outage
	env := c.env
	a := startBladeOn(t, c, "down-a", withHeartbeat(2*time.Second))
	b := startBladeOn(t, c, "down-b", withHeartbeat(2*time.Second))
	a.annotate(map[string]*string{v1alpha1.AnnotationFanPeer: ptr("down-b")})
	b.annotate(map[string]*string{v1alpha1.AnnotationFanSpeed: ptr("30")})
	testwait.Eventually(t, wait, "synced", func(context.Context) (bool, string) {
		return a.agent.Status().FanPeerState == core.PeerSynced, string(a.agent.Status().FanPeerState)
	})
	if err := env.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			_ = env.StartAPIServer()
		}
	})
	testwait.Eventually(t, wait, "peer lost while the API server is down", func(context.Context) (bool, string) {
		st := a.agent.Status()
		return st.FanPeerState == core.PeerLost && a.blade.State().FanPercent >= 60, fmt.Sprintf("%s %d", st.FanPeerState, a.blade.State().FanPercent)
	})
	if err := env.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	restarted = true
	// The Warning raised during the outage is delivered afterwards, and
	// the peer (still running) is followed again.
	a.waitEvent("FanPeerLost")
	a.waitEvent("FanPeerRestored")
}

// markReady gives the Node the Ready condition a kubelet would post.
func markReady(t *testing.T, node string, ready bool) {
	t.Helper()
	status := corev1.ConditionTrue
	if !ready {
		status = corev1.ConditionFalse
	}
	patch := client.RawPatch("application/strategic-merge-patch+json", mustJSON(map[string]any{"status": map[string]any{
		"conditions": []any{map[string]any{"type": "Ready", "status": status, "reason": "Test", "lastHeartbeatTime": metav1.Now(), "lastTransitionTime": metav1.Now()}},
	}}))
	if err := need(t).k8s.Status().Patch(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, patch); err != nil {
		t.Fatal(err)
	}
}

func (b *bladeUnderTest) leds() [2]core.LEDState { return b.agent.Status().LEDs }

// TestNodeStateOnTheLEDs: the operator's maintenance state and the Node's
// cordon and readiness reach the LEDs with docs/cluster-aware.md's patterns.
func TestNodeStateOnTheLEDs(t *testing.T) {
	b := startBlade(t, "leds")
	s := b.agent.Status().Settings
	steady := func(c hardware.Color) core.LEDState { return core.LEDState{Pattern: core.PatternSteady, Color: c} }
	blink := func(c hardware.Color) core.LEDState { return core.LEDState{Pattern: core.PatternBlink, Color: c} }
	off := core.LEDState{Pattern: core.PatternOff}
	expect := func(what string, want [2]core.LEDState) {
		t.Helper()
		testwait.Eventually(t, wait, what, func(context.Context) (bool, string) {
			got := b.leds()
			return got == want, cmp.Diff(want, got)
		})
	}
	// No kubelet posts Ready here: a Node that is not Ready needs attention.
	expect("not Ready: top steady attention", [2]core.LEDState{steady(s.NodeAttentionColor), steady(s.IdleColor)})
	markReady(t, "leds", true)
	expect("Ready: idle", [2]core.LEDState{off, steady(s.IdleColor)})

	cordon := func(on bool, ours bool) {
		t.Helper()
		ann := map[string]any{v1alpha1.AnnotationMaintenanceCordoned: nil}
		if ours {
			ann[v1alpha1.AnnotationMaintenanceCordoned] = "true"
		}
		patch := client.RawPatch("application/merge-patch+json", mustJSON(map[string]any{
			"metadata": map[string]any{"annotations": ann}, "spec": map[string]any{"unschedulable": on},
		}))
		if err := b.c.k8s.Patch(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "leds"}}, patch); err != nil {
			t.Fatal(err)
		}
	}
	cordon(true, false)
	expect("cordoned by someone else: attention", [2]core.LEDState{steady(s.NodeAttentionColor), steady(s.IdleColor)})
	cordon(true, true)
	expect("kubeblade's own cordon: no attention", [2]core.LEDState{off, steady(s.IdleColor)})

	for _, tc := range []struct {
		requested, state string
		want             [2]core.LEDState
	}{
		{"true", "", [2]core.LEDState{off, steady(s.MaintenanceColor)}},
		{"true", "queued", [2]core.LEDState{off, steady(s.MaintenanceColor)}},
		{"true", "draining", [2]core.LEDState{off, blink(s.MaintenanceColor)}},
		{"true", "drained", [2]core.LEDState{off, steady(s.SafeToPullColor)}},
		{"true", "failed", [2]core.LEDState{blink(s.MaintenanceColor), steady(s.IdleColor)}},
	} {
		ann := map[string]*string{v1alpha1.AnnotationMaintenance: ptr(tc.requested), v1alpha1.AnnotationMaintenanceState: nil}
		if tc.state != "" {
			ann[v1alpha1.AnnotationMaintenanceState] = ptr(tc.state)
		}
		b.annotate(ann)
		expect("maintenance "+tc.state, tc.want)
	}
	b.annotate(map[string]*string{v1alpha1.AnnotationMaintenance: nil, v1alpha1.AnnotationMaintenanceState: nil})
	cordon(false, false)
	expect("maintenance over", [2]core.LEDState{off, steady(s.IdleColor)})
	testwait.Eventually(t, wait, "the Blade reports the LEDs", func(ctx context.Context) (bool, string) {
		bl, detail := b.blade1(ctx)
		return bl != nil && bl.Status.LEDs.Top.Pattern == "off" && bl.Status.LEDs.Edge.Color == s.IdleColor.String(), detail
	})
}

// TestLongPressTogglesMaintenance: a press held 3 s sets
// kubeblade.io/maintenance "true" on the agent's own Node (a ButtonLongPressed
// Event says so); the next one sets "false"; a short press stays identify.
// The down edge is stamped up to 3.5 s in the past, as the kernel stamps
// an edge the agent reads late (never before the previous release); the
// release is injected once the agent has decided the press is long.
func TestLongPressTogglesMaintenance(t *testing.T) {
	b := startBlade(t, "longpress")
	b.waitEvent("AgentStarted")
	var lastUp time.Time
	longPress := func(n uint64) {
		t.Helper()
		down := time.Now().Add(-3500 * time.Millisecond)
		if earliest := lastUp.Add(100 * time.Millisecond); down.Before(earliest) {
			down = earliest
		}
		b.blade.ButtonEdgeAt(down, hardware.ButtonDown)
		testwait.Eventually(t, wait, fmt.Sprintf("long press %d decided while held", n), func(context.Context) (bool, string) {
			got := b.agent.Counters().Events[core.ReasonButtonLongPressed]
			return got >= n, fmt.Sprint(got)
		})
		lastUp = time.Now()
		b.blade.ButtonEdgeAt(lastUp, hardware.ButtonUp)
	}
	longPress(1)
	testwait.Eventually(t, wait, "maintenance=true", func(context.Context) (bool, string) {
		v := b.getNode().Annotations[v1alpha1.AnnotationMaintenance]
		return v == "true", v
	})
	ev := b.waitEvent("ButtonLongPressed")
	if !strings.Contains(ev.Note, "start maintenance") {
		t.Errorf("ButtonLongPressed note %q", ev.Note)
	}
	testwait.Eventually(t, wait, "edge LED shows the request", func(context.Context) (bool, string) {
		st := b.agent.Status()
		return st.Maintenance == core.MaintenanceRequested && st.LEDs[hardware.LEDEdge].Color == st.Settings.MaintenanceColor, string(st.Maintenance)
	})
	longPress(2)
	testwait.Eventually(t, wait, "maintenance=false", func(context.Context) (bool, string) {
		v := b.getNode().Annotations[v1alpha1.AnnotationMaintenance]
		return v == "false", v
	})
	if b.agent.Status().Identify || len(b.events("IdentifyStarted")) != 0 {
		t.Fatal("a long press started identify")
	}
	b.blade.PressButton()
	b.waitEvent("IdentifyStarted")
	if v := b.getNode().Annotations[v1alpha1.AnnotationMaintenance]; v != "false" {
		t.Fatalf("a short press changed maintenance to %q", v)
	}
}

// TestDemandWrittenOnFivePointMoves: the published demand is written at
// once when it moves by 5 points or more; smaller moves ride along with
// the next drift write or heartbeat (docs/cluster-aware.md).
func TestDemandWrittenOnFivePointMoves(t *testing.T) {
	d := func(v int32) *int32 { return &v }
	base := v1alpha1.BladeStatus{State: v1alpha1.BladeStateIdle, Fan: v1alpha1.BladeFanStatus{Mode: "auto", Percent: 40, DemandPercent: d(40)}}
	cases := map[string]struct {
		next *int32
		want statusChange
	}{
		"unchanged":          {d(40), noChange},
		"up 4":               {d(44), driftOnly},
		"down 4":             {d(36), driftOnly},
		"up 5":               {d(45), stateChange},
		"down 5":             {d(35), stateChange},
		"no longer reported": {nil, stateChange},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			next := *base.DeepCopy()
			next.Fan.DemandPercent = tc.next
			if got := classify(&base, next); got != tc.want {
				t.Errorf("classify = %d, want %d", got, tc.want)
			}
		})
	}
}
