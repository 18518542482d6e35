package kubeagent

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentconfigv1 "github.com/kubeblade/kubeblade/api/agentconfig/v1alpha1"
	"github.com/kubeblade/kubeblade/api/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/agent"
	"github.com/kubeblade/kubeblade/internal/core"
	"github.com/kubeblade/kubeblade/internal/hardware"
	"github.com/kubeblade/kubeblade/internal/hardware/simulated"
	"github.com/kubeblade/kubeblade/internal/testwait"
)

func TestAnnotationsDriveTheHardware(t *testing.T) {
	b := startBlade(t, "ann-hw")
	b.annotate(map[string]*string{v1alpha1.AnnotationIdentify: ptr("true")})
	testwait.Eventually(t, waitTimeout, "identify from the annotation", func(context.Context) (bool, string) {
		st := b.agent.Status()
		return st.Identify && st.LEDs[hardware.LEDEdge].Pattern == core.PatternBlink, fmt.Sprint(st.Identify)
	})
	b.annotate(map[string]*string{v1alpha1.AnnotationStealth: ptr("true"), v1alpha1.AnnotationFanSpeed: ptr("70")})
	testwait.Eventually(t, waitTimeout, "stealth output and a 70 % fan on the hardware", func(context.Context) (bool, string) {
		s := b.blade.State()
		return s.Stealth && s.FanPercent == 70, fmt.Sprintf("%+v", s)
	})
	b.annotate(map[string]*string{v1alpha1.AnnotationFanSpeed: ptr("auto"), v1alpha1.AnnotationStealth: nil, v1alpha1.AnnotationIdentify: ptr("false")})
	testwait.Eventually(t, waitTimeout, "back to the curve, stealth from config, identify off", func(context.Context) (bool, string) {
		st := b.agent.Status()
		return st.FanMode == core.FanModeAuto && !st.Stealth && !st.Identify && st.StealthOverride == nil, fmt.Sprintf("%+v", st.Status)
	})
	for _, r := range []string{"IdentifyStarted", "StealthEnabled", "IdentifyStopped"} {
		b.waitEvent(r)
	}
}

func TestInvalidAnnotationChangesNothingAndWarnsOncePerValue(t *testing.T) {
	b := startBlade(t, "ann-bad")
	b.annotate(map[string]*string{v1alpha1.AnnotationFanSpeed: ptr("55")})
	testwait.Eventually(t, waitTimeout, "fan 55", func(context.Context) (bool, string) { return b.blade.State().FanPercent == 55, "" })

	b.annotate(map[string]*string{v1alpha1.AnnotationFanSpeed: ptr("fast")})
	ev := b.waitEvent("InvalidAnnotation")
	if ev.Type != corev1.EventTypeWarning || !strings.Contains(ev.Note, `kubeblade.io/fan-speed="fast"`) {
		t.Fatalf("event = %s %q", ev.Type, ev.Note)
	}
	// Another annotation changes; the bad value stays: no second warning.
	b.annotate(map[string]*string{v1alpha1.AnnotationStealth: ptr("true")})
	testwait.Eventually(t, waitTimeout, "stealth applied", func(context.Context) (bool, string) { return b.blade.State().Stealth, "" })
	b.annotate(map[string]*string{v1alpha1.AnnotationIdentify: ptr("maybe")})
	testwait.Eventually(t, waitTimeout, "a warning for the second bad value", func(context.Context) (bool, string) {
		n := 0
		for _, e := range b.events("InvalidAnnotation") {
			if strings.Contains(e.Note, "maybe") {
				n++
			}
		}
		return n == 1, fmt.Sprint(n)
	})
	b.annotate(map[string]*string{v1alpha1.AnnotationStealth: ptr("")})
	testwait.Eventually(t, waitTimeout, "a warning for an empty value", func(context.Context) (bool, string) {
		for _, e := range b.events("InvalidAnnotation") {
			if strings.Contains(e.Note, `kubeblade.io/stealth=""`) {
				return true, ""
			}
		}
		return false, ""
	})
	for _, e := range b.events("InvalidAnnotation") {
		if strings.Contains(e.Note, "fast") && e.Series != nil {
			t.Fatalf("the same bad value was reported again: series %+v", e.Series)
		}
	}
	if got := b.blade.State().FanPercent; got != 55 {
		t.Fatalf("fan = %d after an invalid annotation, want 55 unchanged", got)
	}
	if st := b.agent.Status(); st.FanMode != core.FanModeManual || st.Identify {
		t.Fatalf("state changed: %+v", st.Status)
	}
}

func TestButtonPressBecomesAnEventOnTheNode(t *testing.T) {
	b := startBlade(t, "button")
	node := b.getNode()
	b.waitEvent("AgentStarted")
	b.blade.PressButton()
	ev := b.waitEvent("ButtonPressed")
	if ev.Regarding.UID != node.UID || ev.Regarding.Kind != "Node" || ev.Regarding.Name != "button" {
		t.Errorf("regarding = %+v, want the Node with its UID %s", ev.Regarding, node.UID)
	}
	if ev.ReportingController != "kubeblade.io/agent" || ev.ReportingInstance != "button" {
		t.Errorf("reporting = %q / %q", ev.ReportingController, ev.ReportingInstance)
	}
	if ev.Type != corev1.EventTypeNormal || ev.Action == "" || ev.Note == "" {
		t.Errorf("event = %+v", ev)
	}
	b.waitEvent("IdentifyStarted")
}

// heldWrites holds every write to Blades until released, so a test can keep
// the reporter's loop inside a Node/Blade sync.
type heldWrites struct {
	rt       http.RoundTripper
	armed    *atomic.Bool
	held     chan struct{} // one value per write held
	released chan struct{} // closed to let the held writes through
}

func (h heldWrites) RoundTrip(req *http.Request) (*http.Response, error) {
	if h.armed.Load() && req.Method != http.MethodGet && strings.Contains(req.URL.Path, "/blades") {
		select {
		case h.held <- struct{}{}:
		default:
		}
		select {
		case <-h.released:
		case <-req.Context().Done():
			return nil, req.Context().Err()
		}
	}
	return h.rt.RoundTrip(req)
}

// A press is an Event at once, even while the reporter waits for the API
// server on a Blade write: Events do not queue behind the loop's writes.
func TestButtonEventIsNotHeldBehindABladeWrite(t *testing.T) {
	var armed atomic.Bool
	h := heldWrites{armed: &armed, held: make(chan struct{}, 1), released: make(chan struct{})}
	b := startBlade(t, "button-held", func(_ *simulated.Options, _ *agentconfigv1.AgentConfig, ro *Options) {
		ro.Config = rest.CopyConfig(ro.Config)
		ro.Config.Wrap(func(rt http.RoundTripper) http.RoundTripper { h.rt = rt; return h })
	})
	defer close(h.released)
	testwait.Eventually(t, waitTimeout, "Blade written", func(context.Context) (bool, string) {
		_, err := b.getBlade()
		return err == nil, fmt.Sprint(err)
	})
	b.waitEvent("AgentStarted")
	armed.Store(true)
	// The first press starts identify, which the Blade's status shows: the
	// loop's write of it is held.
	first := time.Now()
	b.blade.PressButtonAt(first)
	select {
	case <-h.held:
	case <-time.After(waitTimeout):
		t.Fatal("no Blade write after identify started; the test holds nothing")
	}
	b.waitEvent("IdentifyStarted")
	// The second press stops identify while that write is still held. Its
	// edge is stamped a debounce window after the first, so it is a press of
	// its own whenever the test gets here.
	b.blade.PressButtonAt(first.Add(agent.DefaultButtonDebounce))
	b.waitEvent("IdentifyStopped")
}

func TestButtonConfirmationRemovesTheIdentifyAnnotation(t *testing.T) {
	b := startBlade(t, "confirm")
	b.annotate(map[string]*string{v1alpha1.AnnotationIdentify: ptr("true")})
	testwait.Eventually(t, waitTimeout, "identify on", func(context.Context) (bool, string) { return b.agent.Status().Identify, "" })
	b.blade.PressButton()
	testwait.Eventually(t, waitTimeout, "annotation removed", func(context.Context) (bool, string) {
		v, has := b.getNode().Annotations[v1alpha1.AnnotationIdentify]
		return !has, v
	})
	if b.agent.Status().Identify {
		t.Fatal("identify still on")
	}
}

func TestOverheatConditionTaintEventsAndBack(t *testing.T) {
	b := startBlade(t, "hot", withLocal(func(c *agentconfigv1.AgentConfig) { c.TaintOnCritical = true }))
	testwait.Eventually(t, waitTimeout, "first Blade status", func(context.Context) (bool, string) {
		bl, err := b.getBlade()
		return err == nil && bl.Status.State == v1alpha1.BladeStateIdle, fmt.Sprint(err)
	})
	b.blade.SetTemperature(70)
	testwait.Eventually(t, waitTimeout, "condition True and taint", func(context.Context) (bool, string) {
		n := b.getNode()
		c := nodeCondition(n)
		return c != nil && c.Status == corev1.ConditionTrue && hasTaint(n), fmt.Sprintf("%+v %v", c, n.Spec.Taints)
	})
	ev := b.waitEvent("CriticalTemperature")
	if ev.Type != corev1.EventTypeWarning {
		t.Errorf("CriticalTemperature type = %s", ev.Type)
	}
	testwait.Eventually(t, waitTimeout, "Blade critical", func(context.Context) (bool, string) {
		bl, _ := b.getBlade()
		return bl.Status.Critical && bl.Status.State == v1alpha1.BladeStateCritical && bl.Status.Fan.Mode == "critical", bl.Status.State
	})
	b.blade.SetTemperature(35)
	testwait.Eventually(t, waitTimeout, "condition False, taint gone", func(context.Context) (bool, string) {
		n := b.getNode()
		c := nodeCondition(n)
		return c != nil && c.Status == corev1.ConditionFalse && !hasTaint(n), fmt.Sprintf("%+v %v", c, n.Spec.Taints)
	})
	b.waitEvent("TemperatureNormal")
}

func TestTaintRemovedAfterRestart(t *testing.T) {
	b := startBlade(t, "restart-taint", withLocal(func(c *agentconfigv1.AgentConfig) { c.TaintOnCritical = true }))
	b.blade.SetTemperature(70)
	testwait.Eventually(t, waitTimeout, "taint", func(context.Context) (bool, string) { return hasTaint(b.getNode()), "" })
	b.stop() // dies while critical: the taint stays behind
	if !hasTaint(b.getNode()) {
		t.Fatal("taint gone before the restart; the test proves nothing")
	}
	startBlade(t, "restart-taint", withLocal(func(c *agentconfigv1.AgentConfig) { c.TaintOnCritical = true }))
	testwait.Eventually(t, waitTimeout, "taint removed by the restarted, cool agent", func(context.Context) (bool, string) {
		n := b.getNode()
		c := nodeCondition(n)
		return !hasTaint(n) && c != nil && c.Status == corev1.ConditionFalse, fmt.Sprint(n.Spec.Taints)
	})
}

func TestLabelsAndStaleLabelCleanup(t *testing.T) {
	b := startBlade(t, "labels")
	want := map[string]string{"kubeblade.io/blade": "true", "kubeblade.io/soc": "simulated", "kubeblade.io/fan-unit": "standard", "kubeblade.io/power": "poe-802.3at"}
	testwait.Eventually(t, waitTimeout, "fact labels", func(context.Context) (bool, string) {
		l := b.getNode().Labels
		for k, v := range want {
			if l[k] != v {
				return false, fmt.Sprint(l)
			}
		}
		return l["kubernetes.io/arch"] == "arm64", fmt.Sprint(l)
	})
	b.blade.SetPower(hardware.PowerPoEOrUSBC)
	testwait.Eventually(t, waitTimeout, "power label follows", func(context.Context) (bool, string) {
		return b.getNode().Labels["kubeblade.io/power"] == "poe-or-usbc", ""
	})
	b.waitEvent("PowerSourceChanged")
	b.stop()
	// The next agent cannot read the PoE line: the label it no longer
	// means must go, and nobody else's label may.
	startBlade(t, "labels", func(so *simulated.Options, _ *agentconfigv1.AgentConfig, _ *Options) {
		so.Missing = []hardware.Capability{hardware.CapPoEDetect}
	})
	testwait.Eventually(t, waitTimeout, "stale power label removed", func(context.Context) (bool, string) {
		l := b.getNode().Labels
		_, has := l["kubeblade.io/power"]
		return !has && l["kubeblade.io/blade"] == "true" && l["kubernetes.io/arch"] == "arm64", fmt.Sprint(l)
	})
}

func TestNotABladeIsLabelledAndIdles(t *testing.T) {
	b := startBlade(t, "pi-or-amd64", func(so *simulated.Options, _ *agentconfigv1.AgentConfig, _ *Options) { so.FanUnit = "not-a-blade" })
	testwait.Eventually(t, waitTimeout, "kubeblade.io/blade=false", func(context.Context) (bool, string) {
		l := b.getNode().Labels
		return l["kubeblade.io/blade"] == "false", fmt.Sprint(l)
	})
	if _, err := b.getBlade(); !apierrors.IsNotFound(err) {
		t.Fatalf("a Blade object exists for a machine that is not a blade: %v", err)
	}
	if l := b.getNode().Labels; l["kubeblade.io/soc"] != "" {
		t.Fatalf("labels %v", l)
	}
}

func TestBladeObjectOwnedByNodeWithStatus(t *testing.T) {
	b := startBlade(t, "blade-object")
	var bl *v1alpha1.Blade
	testwait.Eventually(t, waitTimeout, "Blade", func(context.Context) (bool, string) {
		var err error
		bl, err = b.getBlade()
		return err == nil && bl.Status.HeartbeatTime != nil, fmt.Sprint(err)
	})
	node := b.getNode()
	if len(bl.OwnerReferences) != 1 || bl.OwnerReferences[0].UID != node.UID || bl.OwnerReferences[0].Kind != "Node" {
		t.Fatalf("owner references = %+v", bl.OwnerReferences)
	}
	s := bl.Status
	if s.NodeName != "blade-object" || s.SoC != "simulated" || s.HardwareBackend != "simulated" || s.AgentVersion != "test" ||
		s.PowerSource != "poe-802.3at" || s.TemperatureCelsius == nil || s.Fan.Mode != "auto" || s.FanUnit != "standard" ||
		!slices.Contains(s.Capabilities, "fan") || s.LEDs.Edge.Color != "#001000" || s.LEDs.Edge.Pattern != "steady" ||
		s.HardwareDetail != "software blade; leds: simulated WS2812 pair" {
		t.Fatalf("status = %+v", s)
	}
	for _, c := range []string{v1alpha1.BladeConditionAgentReady, v1alpha1.BladeConditionThermalCritical, v1alpha1.BladeConditionFanStalled, v1alpha1.BladeConditionHardwareDegraded} {
		found := false
		for _, cond := range s.Conditions {
			found = found || cond.Type == c
		}
		if !found {
			t.Errorf("condition %s missing", c)
		}
	}
}

// TestDeletedBladeComesBackWithinOneHeartbeat (issue 31, finding 4): a
// Blade deleted by hand is created again by the next status write, at the
// latest one heartbeat later; on 8f44781 every write failed "not found"
// from then on, retried every 10 s for ever.
func TestDeletedBladeComesBackWithinOneHeartbeat(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	const heartbeat = 5 * time.Minute
	b := startBlade(t, "blade-deleted", func(so *simulated.Options, _ *agentconfigv1.AgentConfig, ro *Options) {
		so.TimeConstant = time.Nanosecond // a constant temperature: only the heartbeat writes
		ro.Clock, ro.Heartbeat = clk, heartbeat
	})
	var first *v1alpha1.Blade
	testwait.Eventually(t, waitTimeout, "the Blade with a heartbeat", func(context.Context) (bool, string) {
		var err error
		first, err = b.getBlade()
		return err == nil && first.Status.HeartbeatTime != nil && clk.HasWaiters(), fmt.Sprint(err)
	})
	if err := b.c.k8s.Delete(context.Background(), first); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, waitTimeout, "the Blade gone", func(context.Context) (bool, string) {
		_, err := b.getBlade()
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	clk.Step(heartbeat)
	// The heartbeat's write finds the Blade gone and creates it again. A
	// write the API server refuses on the way (a transient error under
	// load) is retried after a backoff of 0.5 s doubling to 10 s on the
	// reporter's clock, which only moves when the test moves it: so while
	// the Blade is not back the clock moves on a second per poll, and the
	// recreated Blade's heartbeat time shows how late it came.
	var back *v1alpha1.Blade
	testwait.EventuallyEvery(t, waitTimeout, 20*time.Millisecond, "the Blade back with its status", func(context.Context) (bool, string) {
		bl, err := b.getBlade()
		if err != nil {
			clk.Step(time.Second)
			return false, err.Error()
		}
		back = bl
		return bl.UID != first.UID && bl.Status.HeartbeatTime != nil && bl.Status.NodeName == b.node &&
			len(bl.OwnerReferences) == 1 && bl.OwnerReferences[0].Kind == "Node", fmt.Sprintf("%+v %+v", bl.ObjectMeta, bl.Status)
	})
	if late := back.Status.HeartbeatTime.Sub(first.Status.HeartbeatTime.Time); late > heartbeat+30*time.Second {
		t.Errorf("the Blade came back %s after its last heartbeat; want within one heartbeat (%s) and a write's retries", late, heartbeat)
	}
}

func TestSteadyStateWritesNothing(t *testing.T) {
	b := startBlade(t, "steady")
	testwait.Eventually(t, waitTimeout, "initial sync", func(context.Context) (bool, string) {
		bl, err := b.getBlade()
		return err == nil && bl.Status.HeartbeatTime != nil && b.getNode().Labels["kubeblade.io/blade"] == "true", ""
	})
	// Let the initial writes settle: this reporter's AgentStarted event
	// must be out, then count.
	testwait.Eventually(t, waitTimeout, "AgentStarted sent", func(context.Context) (bool, string) {
		s := b.rep.Stats()
		return s.Events.Sent >= 1 && s.Events.Pending == 0, fmt.Sprintf("%+v", s)
	})
	sub := b.agent.Subscribe(256)
	defer sub.Close()
	before := b.rep.Stats().Writes
	// 40 samples of a blade whose temperature drifts by fractions of a degree.
	deadline := time.After(waitTimeout) // bounds a broken run only
	for n := 0; n < 40; {
		select {
		case ev := <-sub.C():
			if ev.Reason == core.ReasonStatusChanged {
				n++
			}
		case <-deadline:
			t.Fatalf("only %d samples in %s", n, waitTimeout)
		}
	}
	if after := b.rep.Stats().Writes; after != before {
		t.Fatalf("%d API writes during 40 steady samples, want 0", after-before)
	}
}

func TestRestartRestoresAnnotatedState(t *testing.T) {
	k8s := need(t).k8s
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "restore", Annotations: map[string]string{
		v1alpha1.AnnotationStealth: "true", v1alpha1.AnnotationFanSpeed: "30", v1alpha1.AnnotationIdentify: "true",
	}}}
	if err := k8s.Create(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	b := startBlade(t, "restore")
	testwait.Eventually(t, waitTimeout, "restored", func(context.Context) (bool, string) {
		s, st := b.blade.State(), b.agent.Status()
		return s.Stealth && s.FanPercent == 30 && st.Identify, fmt.Sprintf("%+v", s)
	})
}

func TestBladeConfigAppliedLive(t *testing.T) {
	k8s := need(t).k8s
	ctx := context.Background()
	bc := &v1alpha1.BladeConfig{ObjectMeta: metav1.ObjectMeta{Name: "live"}}
	bc.Spec.Agent.CriticalCelsius = 80
	bc.Spec.Agent.LEDs.IdleColor = "#0000ff"
	if err := k8s.Create(ctx, bc); err != nil {
		t.Fatal(err)
	}
	b := startBlade(t, "live-config")
	patch := client.RawPatch("application/merge-patch+json", mustJSON(map[string]any{"metadata": map[string]any{"labels": map[string]string{v1alpha1.LabelConfig: "live"}}}))
	if err := k8s.Patch(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "live-config"}}, patch); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, waitTimeout, "generation 1 applied", func(context.Context) (bool, string) {
		bl, err := b.getBlade()
		if err != nil || bl.Status.Config == nil {
			return false, fmt.Sprint(err)
		}
		return bl.Status.Config.Name == "live" && bl.Status.Config.Generation == 1 && b.agent.Status().Settings.CriticalCelsius == 80, fmt.Sprintf("%+v", bl.Status.Config)
	})
	if got := b.blade.LED(hardware.LEDEdge); got != (hardware.Color{B: 0xff}) {
		t.Errorf("idle colour = %v, want the config's blue", got)
	}
	b.waitEvent("ConfigApplied")
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(bc), bc); err != nil {
		t.Fatal(err)
	}
	bc.Spec.Agent.CriticalCelsius = 75
	bc.Spec.Agent.FanCurve = []agentconfigv1.FanCurveStep{{TemperatureCelsius: 20, Percent: 90}}
	if err := k8s.Update(ctx, bc); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, waitTimeout, "generation 2 applied without a restart", func(context.Context) (bool, string) {
		bl, _ := b.getBlade()
		return bl.Status.Config != nil && bl.Status.Config.Generation == 2 && b.blade.State().FanPercent == 90, fmt.Sprintf("%+v", bl.Status.Config)
	})
}

func TestTwoAgentsNeverTouchEachOther(t *testing.T) {
	a := startBlade(t, "pair-a")
	b := startBlade(t, "pair-b")
	a.annotate(map[string]*string{v1alpha1.AnnotationIdentify: ptr("true")})
	testwait.Eventually(t, waitTimeout, "a identifies", func(context.Context) (bool, string) { return a.agent.Status().Identify, "" })
	b.blade.SetTemperature(70)
	testwait.Eventually(t, waitTimeout, "b critical on b's node", func(context.Context) (bool, string) {
		c := nodeCondition(b.getNode())
		return c != nil && c.Status == corev1.ConditionTrue, ""
	})
	if b.agent.Status().Identify {
		t.Error("b identifies after a's annotation")
	}
	if c := nodeCondition(a.getNode()); c != nil && c.Status == corev1.ConditionTrue {
		t.Error("a's node marked critical")
	}
	for _, e := range a.events("CriticalTemperature") {
		t.Errorf("critical event on a's node: %s", e.Note)
	}
	bl, err := a.getBlade()
	if err != nil || bl.Status.Critical || bl.Status.NodeName != "pair-a" {
		t.Errorf("a's Blade: %+v %v", bl.Status, err)
	}
	_ = time.Second
}
