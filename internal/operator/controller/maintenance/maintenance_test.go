package maintenance_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbv1 "github.com/kubeblade/kubeblade/api/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/agent"
	"github.com/kubeblade/kubeblade/internal/config"
	"github.com/kubeblade/kubeblade/internal/core"
	"github.com/kubeblade/kubeblade/internal/hardware"
	"github.com/kubeblade/kubeblade/internal/hardware/simulated"
	"github.com/kubeblade/kubeblade/internal/kubeagent"
	"github.com/kubeblade/kubeblade/internal/operator/controller/maintenance"
	"github.com/kubeblade/kubeblade/internal/operator/optest"
	"github.com/kubeblade/kubeblade/internal/testwait"
)

// TestDrainLifecycle: "true" cordons (kubeblade's cordon, recorded) and
// drains through the Eviction API — replicated and emptyDir pods (allowed
// here) go, DaemonSet and mirror pods stay — then reports drained; "false"
// uncordons and clears every maintenance annotation. All six Events but
// Queued and DrainFailed are on the Node.
func TestDrainLifecycle(t *testing.T) {
	e := suite.Need(t)
	kubelet(t, e, "life-1")
	bladeConfig(t, e, "life", kbv1.MaintenanceSpec{DeleteEmptyDirData: true}, "life-1")
	namespace(t, e, "life")
	createPod(t, e, "life", "web", "life-1", replicated, nil)
	createPod(t, e, "life", "cache", "life-1", withEmptyDir, nil)
	createPod(t, e, "life", "agent", "life-1", daemonSet, nil)
	createPod(t, e, "life", "static", "life-1", mirror, nil)
	startOperator(t, e)

	annotate(t, e, "life-1", map[string]any{kbv1.AnnotationMaintenance: "true"})
	n := waitState(t, e, "life-1", kbv1.MaintenanceDrained)
	if !n.Spec.Unschedulable || n.Annotations[kbv1.AnnotationMaintenanceCordoned] != "true" {
		t.Fatalf("drained Node: unschedulable=%t cordoned=%q", n.Spec.Unschedulable, n.Annotations[kbv1.AnnotationMaintenanceCordoned])
	}
	if diff := cmp.Diff([]string{"life/agent", "life/static"}, podNames(t, e, "life-1")); diff != "" {
		t.Errorf("pods left on the drained Node (-want +got):\n%s", diff)
	}
	for _, r := range []string{maintenance.EventRequested, maintenance.EventDraining, maintenance.EventDrained} {
		e.WaitEventOf(t, corev1.EventTypeNormal, "Node", "life-1", r)
	}

	annotate(t, e, "life-1", map[string]any{kbv1.AnnotationMaintenance: "false"})
	note := e.WaitEventOf(t, corev1.EventTypeNormal, "Node", "life-1", maintenance.EventEnded)
	if !strings.Contains(note, "uncordoned") {
		t.Errorf("MaintenanceEnded note %q", note)
	}
	testwait.Eventually(t, optest.Timeout, "uncordoned and cleared", func(ctx context.Context) (bool, string) {
		n := getNode(t, e, "life-1")
		for _, k := range []string{kbv1.AnnotationMaintenanceState, kbv1.AnnotationMaintenanceCordoned,
			kbv1.AnnotationMaintenanceRequestedAt, kbv1.AnnotationMaintenanceDrainStartedAt} {
			if _, ok := n.Annotations[k]; ok {
				return false, k + " still set"
			}
		}
		return !n.Spec.Unschedulable, fmt.Sprint(n.Spec.Unschedulable)
	})
}

// TestBudgetBlocksThenFailsAndRetryByToggling: a PodDisruptionBudget that
// never allows ends the drain as failed after the timeout, the Event naming
// the pod and the budget; a pod with emptyDir data and a bare pod are named
// too. Toggling the annotation retries, and once the budget allows and the
// other pods are gone the drain finishes.
func TestBudgetBlocksThenFailsAndRetryByToggling(t *testing.T) {
	e := suite.Need(t)
	kubelet(t, e, "pdb-1")
	bladeConfig(t, e, "pdb", kbv1.MaintenanceSpec{DrainTimeout: &metav1.Duration{Duration: 2 * time.Second}}, "pdb-1")
	namespace(t, e, "pdb")
	createPod(t, e, "pdb", "db-0", "pdb-1", replicated, map[string]string{"app": "db"})
	budget(t, e, "pdb", "db", 0)
	createPod(t, e, "pdb", "scratch", "pdb-1", withEmptyDir, nil)
	createPod(t, e, "pdb", "hand-made", "pdb-1", bare, nil)
	startOperator(t, e)

	annotate(t, e, "pdb-1", map[string]any{kbv1.AnnotationMaintenance: "true"})
	n := waitState(t, e, "pdb-1", kbv1.MaintenanceFailed)
	if !n.Spec.Unschedulable {
		t.Error("a failed drain uncordoned the Node")
	}
	note := e.WaitEventOf(t, corev1.EventTypeWarning, "Node", "pdb-1", maintenance.EventFailed)
	for _, want := range []string{"within 2s", "pdb/db-0 (disruption budget", "pdb/scratch (emptyDir data)", "pdb/hand-made (no controller)"} {
		if !strings.Contains(note, want) {
			t.Errorf("DrainFailed note %q does not say %q", note, want)
		}
	}
	if got := podNames(t, e, "pdb-1"); !slices.Contains(got, "pdb/db-0") {
		t.Fatalf("the budget's pod was evicted: %v", got)
	}

	// Retry: the budget now allows one disruption, the other pods went.
	setBudget(t, e, "pdb", "db", 1)
	for _, p := range []string{"scratch", "hand-made"} {
		deletePod(t, e, "pdb", p)
	}
	annotate(t, e, "pdb-1", map[string]any{kbv1.AnnotationMaintenance: "false"})
	testwait.Eventually(t, optest.Timeout, "state cleared", func(context.Context) (bool, string) {
		_, has := getNode(t, e, "pdb-1").Annotations[kbv1.AnnotationMaintenanceState]
		return !has, ""
	})
	annotate(t, e, "pdb-1", map[string]any{kbv1.AnnotationMaintenance: "true"})
	waitState(t, e, "pdb-1", kbv1.MaintenanceDrained)
}

// TestQuickToggleRetriesAFailedDrain: "false" and "true" written back to
// back, as a script or an impatient person does, retry a failed drain
// whether or not the controller reconciled in between (when it did not,
// its cache holds only "true"; TestToggleCollapsedInTheCache pins that
// case down).
func TestQuickToggleRetriesAFailedDrain(t *testing.T) {
	e := suite.Need(t)
	kubelet(t, e, "toggle-1")
	bladeConfig(t, e, "toggle", kbv1.MaintenanceSpec{DrainTimeout: &metav1.Duration{Duration: time.Second}}, "toggle-1")
	namespace(t, e, "toggle")
	createPod(t, e, "toggle", "db-0", "toggle-1", replicated, map[string]string{"app": "db"})
	budget(t, e, "toggle", "db", 0)
	startOperator(t, e)
	annotate(t, e, "toggle-1", map[string]any{kbv1.AnnotationMaintenance: "true"})
	waitState(t, e, "toggle-1", kbv1.MaintenanceFailed)

	setBudget(t, e, "toggle", "db", 1)
	annotate(t, e, "toggle-1", map[string]any{kbv1.AnnotationMaintenance: "false"})
	annotate(t, e, "toggle-1", map[string]any{kbv1.AnnotationMaintenance: "true"})
	if note := e.WaitEventOf(t, corev1.EventTypeNormal, "Node", "toggle-1", maintenance.EventEnded); !strings.Contains(note, "was failed") {
		t.Errorf("MaintenanceEnded note %q", note)
	}
	n := waitState(t, e, "toggle-1", kbv1.MaintenanceDrained)
	if !n.Spec.Unschedulable {
		t.Error("the retried drain left the Node schedulable")
	}
}

// TestDeletedNodeFreesItsSlot: a Node deleted while it holds the only
// slot (drained, the blade pulled and its Node removed) lets the queued
// one start at once, not at the queue's 30 s safety recheck.
func TestDeletedNodeFreesItsSlot(t *testing.T) {
	e := suite.Need(t)
	e.CreateAll(t, optest.Node("gone-1", nil))
	kubelet(t, e, "gone-2")
	bladeConfig(t, e, "gone", kbv1.MaintenanceSpec{}, "gone-1", "gone-2")
	startOperator(t, e)
	annotate(t, e, "gone-1", map[string]any{kbv1.AnnotationMaintenance: "true"})
	waitState(t, e, "gone-1", kbv1.MaintenanceDrained)
	annotate(t, e, "gone-2", map[string]any{kbv1.AnnotationMaintenance: "true"})
	waitState(t, e, "gone-2", kbv1.MaintenanceQueued)

	if err := e.Client.Delete(optest.Ctx(t), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gone-1"}}); err != nil {
		t.Fatal(err)
	}
	// Well under the 30 s recheck, generous for a loaded machine.
	testwait.Eventually(t, 15*time.Second, "gone-2 drained after gone-1's deletion", func(ctx context.Context) (bool, string) {
		n := &corev1.Node{}
		if err := e.Client.Get(ctx, client.ObjectKey{Name: "gone-2"}, n); err != nil {
			return false, err.Error()
		}
		st := n.Annotations[kbv1.AnnotationMaintenanceState]
		return st == kbv1.MaintenanceDrained, st
	})
}

// TestBudgetHonouredAndRetried: an eviction the budget refuses is asked
// again each pass, and goes through once the budget allows.
func TestBudgetHonouredAndRetried(t *testing.T) {
	e := suite.Need(t)
	kubelet(t, e, "retry-1")
	bladeConfig(t, e, "retry", kbv1.MaintenanceSpec{}, "retry-1")
	namespace(t, e, "retry")
	createPod(t, e, "retry", "db-0", "retry-1", replicated, map[string]string{"app": "db"})
	budget(t, e, "retry", "db", 0)
	op := startOperator(t, e)
	annotate(t, e, "retry-1", map[string]any{kbv1.AnnotationMaintenance: "true"})
	waitState(t, e, "retry-1", kbv1.MaintenanceDraining)
	// Several passes are refused (the controller passes every 200 ms here)
	// and the pod stays.
	first := op.Passes()
	testwait.Eventually(t, optest.Timeout, "three more passes refused by the budget", func(ctx context.Context) (bool, string) {
		return op.Passes() >= first+3, fmt.Sprint(op.Passes() - first)
	})
	if !slices.Contains(podNames(t, e, "retry-1"), "retry/db-0") {
		t.Fatal("the budget's pod was evicted while the budget allowed no disruption")
	}
	if st := getNode(t, e, "retry-1").Annotations[kbv1.AnnotationMaintenanceState]; st != kbv1.MaintenanceDraining {
		t.Fatalf("state %q while the budget blocks", st)
	}
	setBudget(t, e, "retry", "db", 1)
	waitState(t, e, "retry-1", kbv1.MaintenanceDrained)
}

// TestForeignCordonIsNotLifted: a Node someone else cordoned stays
// cordoned when maintenance ends.
func TestForeignCordonIsNotLifted(t *testing.T) {
	e := suite.Need(t)
	kubelet(t, e, "foreign-1")
	cordon(t, e, "foreign-1")
	startOperator(t, e)
	annotate(t, e, "foreign-1", map[string]any{kbv1.AnnotationMaintenance: "true"})
	n := waitState(t, e, "foreign-1", kbv1.MaintenanceDrained)
	if _, ours := n.Annotations[kbv1.AnnotationMaintenanceCordoned]; ours {
		t.Fatal("someone else's cordon recorded as kubeblade's")
	}
	if note := e.WaitEventOf(t, corev1.EventTypeNormal, "Node", "foreign-1", maintenance.EventDraining); !strings.Contains(note, "already cordoned") {
		t.Errorf("Draining note %q", note)
	}
	annotate(t, e, "foreign-1", map[string]any{kbv1.AnnotationMaintenance: "false"})
	if note := e.WaitEventOf(t, corev1.EventTypeNormal, "Node", "foreign-1", maintenance.EventEnded); !strings.Contains(note, "stays cordoned") {
		t.Errorf("MaintenanceEnded note %q", note)
	}
	if !getNode(t, e, "foreign-1").Spec.Unschedulable {
		t.Fatal("kubeblade lifted someone else's cordon")
	}
}

// TestOneAtATimeInRequestOrder: with maxConcurrent 1 (the default) a
// second request waits (queued, MaintenanceQueued) while the first blade
// is in maintenance, and starts when it ends; a third one, asked last,
// waits behind the second.
func TestOneAtATimeInRequestOrder(t *testing.T) {
	e := suite.Need(t)
	kubelet(t, e, "queue-1", "queue-2", "queue-3")
	bladeConfig(t, e, "queue", kbv1.MaintenanceSpec{}, "queue-1", "queue-2", "queue-3")
	startOperator(t, e)
	annotate(t, e, "queue-1", map[string]any{kbv1.AnnotationMaintenance: "true"})
	waitState(t, e, "queue-1", kbv1.MaintenanceDrained)
	annotate(t, e, "queue-2", map[string]any{kbv1.AnnotationMaintenance: "true"})
	waitState(t, e, "queue-2", kbv1.MaintenanceQueued)
	annotate(t, e, "queue-3", map[string]any{kbv1.AnnotationMaintenance: "true"})
	waitState(t, e, "queue-3", kbv1.MaintenanceQueued)
	if note := e.WaitEventOf(t, corev1.EventTypeNormal, "Node", "queue-3", maintenance.EventQueued); !strings.Contains(note, "queue-1") || !strings.Contains(note, "1 ahead") {
		t.Errorf("MaintenanceQueued note %q", note)
	}
	if getNode(t, e, "queue-2").Spec.Unschedulable {
		t.Fatal("a queued Node was cordoned")
	}
	annotate(t, e, "queue-1", map[string]any{kbv1.AnnotationMaintenance: "false"})
	waitState(t, e, "queue-2", kbv1.MaintenanceDrained)
	if st := getNode(t, e, "queue-3").Annotations[kbv1.AnnotationMaintenanceState]; st != kbv1.MaintenanceQueued {
		t.Fatalf("queue-3 is %q while queue-2 holds the only slot", st)
	}
	annotate(t, e, "queue-2", map[string]any{kbv1.AnnotationMaintenance: "false"})
	waitState(t, e, "queue-3", kbv1.MaintenanceDrained)
}

// TestRestartMidDrain: an operator stopped while a budget holds a drain
// leaves the Node draining; the next one carries on with the same start
// time and finishes when the budget allows.
func TestRestartMidDrain(t *testing.T) {
	e := suite.Need(t)
	kubelet(t, e, "restart-1")
	bladeConfig(t, e, "restart", kbv1.MaintenanceSpec{DrainTimeout: &metav1.Duration{Duration: time.Hour}}, "restart-1")
	namespace(t, e, "restart")
	createPod(t, e, "restart", "db-0", "restart-1", replicated, map[string]string{"app": "db"})
	budget(t, e, "restart", "db", 0)
	op := startOperator(t, e)
	annotate(t, e, "restart-1", map[string]any{kbv1.AnnotationMaintenance: "true"})
	started := waitState(t, e, "restart-1", kbv1.MaintenanceDraining).Annotations[kbv1.AnnotationMaintenanceDrainStartedAt]
	op.stop()

	setBudget(t, e, "restart", "db", 1)
	if st := getNode(t, e, "restart-1").Annotations[kbv1.AnnotationMaintenanceState]; st != kbv1.MaintenanceDraining {
		t.Fatalf("with no operator the state moved to %q", st)
	}
	startOperator(t, e)
	n := waitState(t, e, "restart-1", kbv1.MaintenanceDrained)
	if got := n.Annotations[kbv1.AnnotationMaintenanceDrainStartedAt]; got != started {
		t.Errorf("drain start %q after the restart, want the original %q", got, started)
	}
}

// TestInvalidRequestChangesNothing: a value other than true or false is
// ignored by the operator (the agent reports it as InvalidAnnotation).
func TestInvalidRequestChangesNothing(t *testing.T) {
	e := suite.Need(t)
	kubelet(t, e, "invalid-1")
	startOperator(t, e)
	annotate(t, e, "invalid-1", map[string]any{kbv1.AnnotationMaintenance: "yes"})
	// A valid request on another Node shows the controller ran meanwhile.
	kubelet(t, e, "invalid-2")
	annotate(t, e, "invalid-2", map[string]any{kbv1.AnnotationMaintenance: "true"})
	waitState(t, e, "invalid-2", kbv1.MaintenanceDrained)
	n := getNode(t, e, "invalid-1")
	if n.Spec.Unschedulable || n.Annotations[kbv1.AnnotationMaintenanceState] != "" {
		t.Fatalf("an invalid request acted: unschedulable=%t state=%q", n.Spec.Unschedulable, n.Annotations[kbv1.AnnotationMaintenanceState])
	}
	annotate(t, e, "invalid-2", map[string]any{kbv1.AnnotationMaintenance: "false"})
}

// bladeAgent is a real agent on a simulated blade, reporting as the agent
// ServiceAccount of its Node under the installed RBAC and admission policy.
type bladeAgent struct {
	blade *simulated.Blade
	agent *agent.Agent
	up    time.Time // the last release
}

func runAgent(t *testing.T, e *optest.Env, node string) *bladeAgent {
	t.Helper()
	e.WithAgentRBAC(t)
	settings, err := config.Settings(config.Default())
	if err != nil {
		t.Fatal(err)
	}
	b := &bladeAgent{blade: simulated.New(simulated.Options{})}
	if b.agent, err = agent.New(agent.Options{Backend: b.blade, Settings: settings, Version: "test"}); err != nil {
		t.Fatal(err)
	}
	rep, err := kubeagent.New(kubeagent.Options{Config: e.Impersonate(node), NodeName: node, Agent: b.agent, Local: checkedDefault(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	go func() { _ = b.agent.Run(ctx); done <- struct{}{} }()
	go func() { _ = rep.Run(ctx); done <- struct{}{} }()
	t.Cleanup(func() { cancel(); <-done; <-done })
	return b
}

// longPress holds the button 3.5 s: the down edge is stamped in the past
// (as the kernel stamps an edge the agent reads late, never before the
// previous release), and released once the agent has decided.
func (b *bladeAgent) longPress(t *testing.T) {
	t.Helper()
	n := b.agent.Counters().Events[core.ReasonButtonLongPressed] + 1
	down := time.Now().Add(-3500 * time.Millisecond)
	if earliest := b.up.Add(100 * time.Millisecond); down.Before(earliest) {
		down = earliest
	}
	b.blade.ButtonEdgeAt(down, hardware.ButtonDown)
	testwait.Eventually(t, optest.Timeout, "the long press decided", func(context.Context) (bool, string) {
		got := b.agent.Counters().Events[core.ReasonButtonLongPressed]
		return got >= n, fmt.Sprint(got)
	})
	b.up = time.Now()
	b.blade.ButtonEdgeAt(b.up, hardware.ButtonUp)
}

func (b *bladeAgent) waitEdge(t *testing.T, what string, want core.LEDState) {
	t.Helper()
	testwait.Eventually(t, optest.Timeout, what, func(context.Context) (bool, string) {
		got := b.agent.Status().LEDs[hardware.LEDEdge]
		return got == want, fmt.Sprintf("%+v", got)
	})
}

// TestTwoLongPressesOneAtATime: two blades' buttons held for maintenance
// with maxConcurrent 1: the first drains and shows safe-to-pull, the second
// waits queued (edge LED steady in the maintenance colour) and drains once
// a second long press on the first ends its maintenance. The agents act
// under their real RBAC and admission policy (their own Node's annotation;
// each other's Blade as fan peers, watched by name).
func TestTwoLongPressesOneAtATime(t *testing.T) {
	e := suite.Need(t)
	kubelet(t, e, "press-1", "press-2")
	bladeConfig(t, e, "press", kbv1.MaintenanceSpec{}, "press-1", "press-2")
	annotate(t, e, "press-1", map[string]any{kbv1.AnnotationFanPeer: "press-2"})
	annotate(t, e, "press-2", map[string]any{kbv1.AnnotationFanPeer: "press-1"})
	startOperator(t, e)
	one, two := runAgent(t, e, "press-1"), runAgent(t, e, "press-2")
	testwait.Eventually(t, optest.Timeout, "fan peers synced under the agent RBAC", func(context.Context) (bool, string) {
		return one.agent.Status().FanPeerState == core.PeerSynced && two.agent.Status().FanPeerState == core.PeerSynced,
			fmt.Sprint(one.agent.Status().FanPeerState, two.agent.Status().FanPeerState)
	})
	s := one.agent.Status().Settings

	one.longPress(t)
	waitState(t, e, "press-1", kbv1.MaintenanceDrained)
	one.waitEdge(t, "press-1 safe to pull", core.LEDState{Pattern: core.PatternSteady, Color: s.SafeToPullColor})
	two.longPress(t)
	waitState(t, e, "press-2", kbv1.MaintenanceQueued)
	two.waitEdge(t, "press-2 queued", core.LEDState{Pattern: core.PatternSteady, Color: s.MaintenanceColor})

	one.longPress(t)
	e.WaitEventOf(t, corev1.EventTypeNormal, "Node", "press-1", maintenance.EventEnded)
	waitState(t, e, "press-2", kbv1.MaintenanceDrained)
	two.waitEdge(t, "press-2 safe to pull", core.LEDState{Pattern: core.PatternSteady, Color: s.SafeToPullColor})
	one.waitEdge(t, "press-1 idle again", core.LEDState{Pattern: core.PatternSteady, Color: s.IdleColor})
	if v := getNode(t, e, "press-1").Annotations[kbv1.AnnotationMaintenance]; v != "false" {
		t.Errorf("press-1 maintenance = %q after the second long press", v)
	}
}

func checkedDefault(t *testing.T) config.Checked {
	t.Helper()
	c, err := config.Check(config.Default())
	if err != nil {
		t.Fatal(err)
	}
	return c
}
