package reliability

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	kbv1 "github.com/kubeblade/kubeblade/api/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/core"
	"github.com/kubeblade/kubeblade/internal/hardware"
	"github.com/kubeblade/kubeblade/internal/kubeevents"
	"github.com/kubeblade/kubeblade/internal/testwait"
)

// TestAPIServerOutage kills kube-apiserver for RELIABILITY_OUTAGE (60s in
// `make reliability`, 5s by default) while the blade overheats, its button
// is pressed and its power source changes. Protection must engage locally
// within 2 s; once the API server is back, the condition, the labels, the
// Blade status and every Event from the outage must arrive.
func TestAPIServerOutage(t *testing.T) {
	needCP(t)
	outage := durationEnv(t, "RELIABILITY_OUTAGE", 5*time.Second)
	summary.fault(t, fmt.Sprintf("API server down %s during overheat", outage))
	b := startBlade(t, "rel-outage", nil)
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

	heat := time.Now()
	// A hot rack: even at full fan the blade stays above critical
	// (equilibrium 85 °C), so it is still critical when the API server
	// returns, however long the outage.
	if err := b.sim.SetLoad(3); err != nil {
		t.Fatal(err)
	}
	b.sim.SetTemperature(75)
	testwait.Eventually(t, 10*time.Second, "critical mode, locally", func(context.Context) (bool, string) {
		st := b.agent.Status()
		return st.Critical && b.sim.State().FanPercent == 100, fmt.Sprintf("critical=%v fan=%d", st.Critical, b.sim.State().FanPercent)
	})
	engaged := time.Since(heat)
	summary.note("critical engaged locally %s after the overheat, API server down", engaged.Round(time.Millisecond))
	if engaged > 2*time.Second {
		t.Errorf("critical mode engaged after %s, want within 2s", engaged)
	}
	b.sim.PressButton()
	b.sim.SetPower(hardware.PowerPoEOrUSBC)

	// Everything the agent published while the API server was down.
	var published []core.Reason
	want := []core.Reason{core.ReasonCriticalTemperature, core.ReasonButtonPressed, core.ReasonIdentifyStarted, core.ReasonPowerSourceChanged}
	testwait.Eventually(t, 10*time.Second, "events of the outage published", func(context.Context) (bool, string) {
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
