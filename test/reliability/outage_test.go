package reliability

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	kbv1 "github.com/kubeblade/kubeblade/api/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/agent"
	"github.com/kubeblade/kubeblade/internal/core"
	"github.com/kubeblade/kubeblade/internal/hardware"
	"github.com/kubeblade/kubeblade/internal/kubeevents"
	"github.com/kubeblade/kubeblade/internal/testwait"
)

// TestAPIServerOutage kills kube-apiserver for RELIABILITY_OUTAGE (60s in
// `make reliability`, 5s by default) while the blade overheats, its button
// is pressed and its power source changes. Protection must engage locally
// within 2 s, counted on the agent's (fake) clock; once the API server is
// back, the condition, the labels, the Blade status and every Event from
// the outage must arrive.
func TestAPIServerOutage(t *testing.T) {
	needCP(t)
	outage := durationEnv(t, "RELIABILITY_OUTAGE", 5*time.Second)
	summary.fault(t, fmt.Sprintf("API server down %s during overheat", outage))
	// The agent runs on a fake clock: how soon protection engages is
	// counted in its sample intervals, which a loaded machine cannot
	// stretch. The API server's outage is real time.
	clk := clocktesting.NewFakeClock(time.Now())
	b := startBladeOn(t, "rel-outage", nil, clk)
	sub := b.agent.Subscribe(256)
	defer sub.Close()

	if err := cp.stopAPIServer(); err != nil {
		t.Fatal(err)
	}
	down := time.Now()
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			_ = cp.startAPIServer()
		}
	})

	// A hot rack: even at full fan the blade stays above critical
	// (equilibrium 85 °C), so it is still critical when the API server
	// returns, however long the outage.
	if err := b.sim.SetLoad(3); err != nil {
		t.Fatal(err)
	}
	b.sim.SetTemperature(75)
	// Protection must engage within 2 s of the overheat with the API
	// server down: by the agent's second sample at the latest (one a
	// second). Step its clock one sample interval at a time, each step
	// taken only once the loop has sampled after the previous one.
	var engaged time.Duration
	for step := 1; ; step++ {
		samples := b.agent.Counters().Samples
		clk.Step(agent.DefaultSampleInterval)
		testwait.Eventually(t, 10*time.Second, fmt.Sprintf("the agent's sample after %d interval(s)", step), func(context.Context) (bool, string) {
			n := b.agent.Counters().Samples
			return n > samples, fmt.Sprintf("%d samples", n)
		})
		if st := b.agent.Status(); st.Critical && b.sim.State().FanPercent == 100 {
			engaged = time.Duration(step) * agent.DefaultSampleInterval
			break
		}
		if time.Duration(step)*agent.DefaultSampleInterval >= 2*time.Second {
			t.Fatalf("critical mode not engaged %d sample intervals after the overheat, API server down (want within 2 s): critical=%v fan=%d",
				step, b.agent.Status().Critical, b.sim.State().FanPercent)
		}
	}
	summary.note("critical engaged locally at the agent's sample %s after the overheat, API server down", engaged)
	b.sim.PressButton()
	b.sim.SetPower(hardware.PowerPoEOrUSBC)

	// Everything the agent published while the API server was down.
	var published []core.Reason
	want := []core.Reason{core.ReasonCriticalTemperature, core.ReasonButtonPressed, core.ReasonIdentifyStarted, core.ReasonPowerSourceChanged}
	// The power source is read at each sample: the agent's clock moves
	// one sample interval per poll until every event is out.
	testwait.Eventually(t, 10*time.Second, "events of the outage published", func(context.Context) (bool, string) {
		clk.Step(agent.DefaultSampleInterval)
		for {
			select {
			case ev := <-sub.C():
				if kubeevents.Reported(ev.Reason) {
					published = append(published, ev.Reason)
				}
				continue
			default:
			}
			break
		}
		for _, r := range want {
			if !slices.Contains(published, r) {
				return false, fmt.Sprint(published)
			}
		}
		return true, ""
	})
	testwait.Eventually(t, 30*time.Second, "events queued, API server unreachable", func(context.Context) (bool, string) {
		s := b.rep.Stats()
		return s.Events.Pending >= len(want) && !s.Connected, fmt.Sprintf("%+v", s)
	})
	time.Sleep(time.Until(down.Add(outage))) // the rest of the outage
	downFor := time.Since(down)
	if err := cp.startAPIServer(); err != nil {
		t.Fatal(err)
	}
	restarted = true
	back := time.Now()

	testwait.Eventually(t, 60*time.Second, "condition, labels and Blade status after the outage", func(context.Context) (bool, string) {
		n, err := b.getNode()
		if err != nil {
			return false, err.Error()
		}
		cond := false
		for _, c := range n.Status.Conditions {
			if c.Type == kbv1.NodeConditionThermalCritical && c.Status == corev1.ConditionTrue {
				cond = true
			}
		}
		bl, err := b.getBlade()
		if err != nil {
			return false, err.Error()
		}
		ok := cond && n.Labels[kbv1.LabelPower] == string(hardware.PowerPoEOrUSBC) && n.Labels[kbv1.LabelBlade] == "true" &&
			bl.Status.Critical && bl.Status.Identify && bl.Status.PowerSource == string(hardware.PowerPoEOrUSBC)
		return ok, fmt.Sprintf("condition=%v labels=%v blade=%+v", cond, n.Labels, bl.Status)
	})
	testwait.Eventually(t, 60*time.Second, "event queue drained", func(context.Context) (bool, string) {
		s := b.rep.Stats()
		return s.Events.Pending == 0 && s.Connected, fmt.Sprintf("%+v", s)
	})
	for _, r := range published {
		got, err := events(b.node, string(r))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 0 {
			summary.lose(t, "Event %s from the outage never reached the API server", r)
		}
	}
	if d := b.rep.Stats().Events.Dropped; d != 0 {
		summary.lose(t, "%d Events dropped during the outage", d)
	}
	summary.note("API server down %s: afterwards condition, labels, Blade status and all %d buffered Events arrived within %s",
		downFor.Round(time.Second), len(published), time.Since(back).Round(time.Millisecond))
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
