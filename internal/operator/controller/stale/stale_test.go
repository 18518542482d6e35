package stale_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbv1 "github.com/kubeblade/kubeblade/api/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/agent"
	"github.com/kubeblade/kubeblade/internal/config"
	"github.com/kubeblade/kubeblade/internal/hardware/simulated"
	"github.com/kubeblade/kubeblade/internal/kubeagent"
	"github.com/kubeblade/kubeblade/internal/operator"
	"github.com/kubeblade/kubeblade/internal/operator/controller/stale"
	"github.com/kubeblade/kubeblade/internal/operator/optest"
	"github.com/kubeblade/kubeblade/internal/testwait"
)

// The stale controller runs alone.
var suite = optest.NewSuite(func(_ context.Context, mgr ctrl.Manager, o operator.Options) error {
	return (&stale.Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder(operator.Name), Clock: o.Clock}).SetupWithManager(mgr)
})

func TestMain(m *testing.M) { os.Exit(suite.Run(m)) }

// runAgent runs a real agent (simulated blade, Kubernetes reporter acting
// as the agent's ServiceAccount of node) with a short heartbeat; the
// returned func kills it, leaving its Blade behind as a crashed pod would.
func runAgent(t *testing.T, e *optest.Env, node string, heartbeat time.Duration) (kill func()) {
	t.Helper()
	e.WithAgentRBAC(t)
	settings, err := config.Settings(config.Default())
	if err != nil {
		t.Fatal(err)
	}
	a, err := agent.New(agent.Options{Backend: simulated.New(simulated.Options{}), Settings: settings, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := kubeagent.New(kubeagent.Options{Config: e.Impersonate(node), NodeName: node, Agent: a, Local: checkedDefault(t),
		Heartbeat: heartbeat, MinInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	go func() { _ = a.Run(ctx); done <- struct{}{} }()
	go func() { _ = rep.Run(ctx); done <- struct{}{} }()
	killed := false
	kill = func() {
		if !killed {
			killed = true
			cancel()
			<-done
			<-done
		}
	}
	t.Cleanup(kill)
	return kill
}

func getBlade(ctx context.Context, e *optest.Env, name string) (*kbv1.Blade, error) {
	b := &kbv1.Blade{}
	return b, e.Client.Get(ctx, client.ObjectKey{Name: name}, b)
}

// printedState is the STATE column of `kubectl get blades`: the API
// server's own table rendering of the CRD's printer columns.
func printedState(ctx context.Context, e *optest.Env, name string) (string, error) {
	hc, err := rest.HTTPClientFor(e.Config)
	if err != nil {
		return "", err
	}
	u, err := url.JoinPath(e.Config.Host, "/apis/kubeblade.io/v1alpha1/blades", name)
	if err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return "", fmt.Errorf("GET %s: %s: %s", u, resp.Status, b)
	}
	var table metav1.Table
	if err := json.NewDecoder(resp.Body).Decode(&table); err != nil {
		return "", err
	}
	for i, c := range table.ColumnDefinitions {
		if c.Name == "State" && len(table.Rows) == 1 {
			return fmt.Sprint(table.Rows[0].Cells[i]), nil
		}
	}
	return "", fmt.Errorf("no State column in %+v", table)
}

// TestKilledAgentGoesStaleAndRecovers: the agent of a Node is killed; three
// heartbeat periods later the operator marks its Blade (AgentReady=Unknown,
// HeartbeatStale, STATE Unknown) and warns on the Node (AgentStale); a new
// agent's first write clears the mark.
func TestKilledAgentGoesStaleAndRecovers(t *testing.T) {
	e := suite.Need(t)
	e.CreateAll(t, optest.Node("stale-1", nil))
	const heartbeat = time.Second
	kill := runAgent(t, e, "stale-1", heartbeat)
	testwait.Eventually(t, optest.Timeout, "a running agent's Blade", func(ctx context.Context) (bool, string) {
		b, err := getBlade(ctx, e, "stale-1")
		if err != nil {
			return false, err.Error()
		}
		return b.Status.State == kbv1.BladeStateIdle && b.Status.HeartbeatPeriodSeconds == 1, b.Status.State
	})
	kill()
	testwait.Eventually(t, optest.Timeout, "the Blade marked stale", func(ctx context.Context) (bool, string) {
		b, err := getBlade(ctx, e, "stale-1")
		if err != nil {
			return false, err.Error()
		}
		return stale.Marked(b), b.Status.State
	})
	// When it is marked (three periods after the last heartbeat) is
	// asserted on the controller's clock in
	// TestMarkedThreeHeartbeatPeriodsAfterTheLast; a wall-clock bound
	// here would measure the machine's load.
	b, _ := getBlade(optest.Ctx(t), e, "stale-1")
	c := meta.FindStatusCondition(b.Status.Conditions, kbv1.BladeConditionAgentReady)
	if c == nil || c.Reason != kbv1.BladeReasonHeartbeatStale || !strings.Contains(c.Message, "no heartbeat from the agent since") {
		t.Errorf("AgentReady = %+v", c)
	}
	if b.Status.SoC != "simulated" || b.Status.Fan.DemandPercent == nil {
		t.Errorf("the mark changed what the agent reported: %+v", b.Status)
	}
	if st, err := printedState(optest.Ctx(t), e, "stale-1"); err != nil || st != "Unknown" {
		t.Errorf("kubectl get blades STATE = %q, %v; want Unknown", st, err)
	}
	note := e.WaitEventOf(t, corev1.EventTypeWarning, "Node", "stale-1", stale.EventAgentStale)
	if !strings.Contains(note, "stale-1") {
		t.Errorf("AgentStale note %q", note)
	}

	runAgent(t, e, "stale-1", heartbeat)
	testwait.Eventually(t, optest.Timeout, "the mark cleared by the agent's heartbeat", func(ctx context.Context) (bool, string) {
		b, err := getBlade(ctx, e, "stale-1")
		if err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(b.Status.Conditions, kbv1.BladeConditionAgentReady)
		return !stale.Marked(b) && b.Status.State == kbv1.BladeStateIdle && c != nil && c.Status == metav1.ConditionTrue, b.Status.State
	})
}

// TestNodeWithoutBladeIsNotFlagged: only Blades are watched; a Node that
// never had an agent gets no AgentStale.
func TestNodeWithoutBladeIsNotFlagged(t *testing.T) {
	e := suite.Need(t)
	e.CreateAll(t, optest.Node("bare-node", nil))
	// A Blade created long ago that has gone quiet shows the controller
	// is running meanwhile.
	quiet := &kbv1.Blade{ObjectMeta: metav1.ObjectMeta{Name: "quiet"}}
	e.CreateAll(t, quiet)
	writeStatus(t, e, "quiet", time.Now().Add(-time.Hour), 60)
	testwait.Eventually(t, optest.Timeout, "the quiet Blade marked", func(ctx context.Context) (bool, string) {
		b, err := getBlade(ctx, e, "quiet")
		return err == nil && stale.Marked(b), fmt.Sprint(err)
	})
	evs, err := e.Events(optest.Ctx(t), "Node", "bare-node")
	if err != nil || len(evs) != 0 {
		t.Fatalf("events about a Node without a Blade: %v %v", evs, err)
	}
}

// TestFreshBladeWaitsForItsTime: a Blade with a fresh heartbeat and a long
// period is not marked (its timer is minutes away), however often it is
// reconciled.
func TestFreshBladeWaitsForItsTime(t *testing.T) {
	e := suite.Need(t)
	e.CreateAll(t, &kbv1.Blade{ObjectMeta: metav1.ObjectMeta{Name: "fresh"}}, &kbv1.Blade{ObjectMeta: metav1.ObjectMeta{Name: "fresh-marker"}})
	writeStatus(t, e, "fresh", time.Now(), 300)
	writeStatus(t, e, "fresh-marker", time.Now().Add(-time.Hour), 300)
	testwait.Eventually(t, optest.Timeout, "the old marker Blade marked (the controller ran)", func(ctx context.Context) (bool, string) {
		b, err := getBlade(ctx, e, "fresh-marker")
		return err == nil && stale.Marked(b), fmt.Sprint(err)
	})
	b, err := getBlade(optest.Ctx(t), e, "fresh")
	if err != nil || stale.Marked(b) {
		t.Fatalf("a fresh Blade was marked: %+v %v", b.Status, err)
	}
	if at := stale.StaleAt(b); at.Sub(b.Status.HeartbeatTime.Time) != 15*time.Minute {
		t.Errorf("stale after %s, want 3 × 300 s", at.Sub(b.Status.HeartbeatTime.Time))
	}
}

// TestMarkedThreeHeartbeatPeriodsAfterTheLast drives the controller on a
// fake clock against the real API server: a second before the Blade's
// stale time it does not mark it and asks to come back just after it; at
// that time it marks it and warns on the Node. (The suite's own
// controller, on the real clock, leaves the Blade alone: its heartbeat is
// fresh and its period five minutes.)
func TestMarkedThreeHeartbeatPeriodsAfterTheLast(t *testing.T) {
	e := suite.Need(t)
	const name = "stale-clock"
	e.CreateAll(t, &kbv1.Blade{ObjectMeta: metav1.ObjectMeta{Name: name}})
	heartbeat := time.Now().Truncate(time.Second) // its resolution on the wire
	writeStatus(t, e, name, heartbeat, 300)
	staleAt := heartbeat.Add(3 * 300 * time.Second)

	clk := clocktesting.NewFakeClock(staleAt.Add(-time.Second))
	rec := events.NewFakeRecorder(10)
	r := &stale.Reconciler{Client: e.Client, Recorder: rec, Clock: clk}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: name}}
	res, err := r.Reconcile(optest.Ctx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	if want := time.Second + 10*time.Millisecond; res.RequeueAfter != want {
		t.Errorf("a second before its stale time: come back after %s, want %s", res.RequeueAfter, want)
	}
	if b, err := getBlade(optest.Ctx(t), e, name); err != nil || stale.Marked(b) {
		t.Fatalf("marked a second before its stale time: %+v %v", b.Status, err)
	}

	clk.Step(res.RequeueAfter)
	if res, err = r.Reconcile(optest.Ctx(t), req); err != nil || res.RequeueAfter != 0 {
		t.Fatalf("at its stale time: %+v, %v", res, err)
	}
	b, err := getBlade(optest.Ctx(t), e, name)
	if err != nil || !stale.Marked(b) {
		t.Fatalf("not marked at its stale time: %+v %v", b.Status, err)
	}
	select {
	case ev := <-rec.Events:
		if !strings.HasPrefix(ev, "Warning "+stale.EventAgentStale+" ") {
			t.Errorf("Event %q, want a Warning %s", ev, stale.EventAgentStale)
		}
	default:
		t.Error("no Event on the Node")
	}
}

// writeStatus writes a Blade status as an agent would (its field manager,
// with force), with the given heartbeat.
func writeStatus(t *testing.T, e *optest.Env, name string, heartbeat time.Time, periodSeconds int32) {
	t.Helper()
	st := map[string]any{
		"state": kbv1.BladeStateIdle, "heartbeatTime": heartbeat.UTC().Format(time.RFC3339), "heartbeatPeriodSeconds": periodSeconds,
		"conditions": []any{map[string]any{"type": kbv1.BladeConditionAgentReady, "status": "True", "reason": "LoopRunning",
			"message": "the agent's control loop is running", "lastTransitionTime": heartbeat.UTC().Format(time.RFC3339)}},
	}
	body, _ := json.Marshal(map[string]any{"apiVersion": kbv1.GroupVersion.String(), "kind": "Blade", "metadata": map[string]any{"name": name}, "status": st})
	b := &kbv1.Blade{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := e.Client.Status().Patch(optest.Ctx(t), b, client.RawPatch(types.ApplyPatchType, body),
		client.FieldOwner(kubeagent.FieldManager), &client.SubResourcePatchOptions{PatchOptions: client.PatchOptions{Force: ptr.To(true)}}); err != nil {
		t.Fatal(err)
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
