package kubeagent

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubeblade/kubeblade/api/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/core"
	"github.com/kubeblade/kubeblade/internal/eventbus"
	"github.com/kubeblade/kubeblade/internal/testwait"
)

// TestAPIServerOutage stops kube-apiserver while the blade overheats and its
// button is pressed: protection must engage locally, and once the API server
// is back the condition, the Blade status and every Event must arrive. The
// API server it stops is its own, so no other test sees the outage, whatever
// order the tests run in.
//
// The blade must still be critical when the API server returns, however long
// that takes, so it overheats from a load the fan cannot carry away: with
// the simulated thermal model, load 3 settles at 85 °C even with the fan at
// 100 %. A spike alone (70 °C at load 0.2) cools below 55 °C, the end of
// critical mode, 9.1 s later with the fan at full speed (70 °C towards
// 29 °C with a 20 s time constant), which is less than a loaded machine may
// take to restart kube-apiserver; the blade is then rightly no longer
// critical when it returns, the case TestOverheatThatEndsDuringAnOutage
// checks.
func TestAPIServerOutage(t *testing.T) {
	b, restart := bladeWithoutAPIServer(t, "outage")
	sub := b.agent.Subscribe(256)
	if err := b.blade.SetLoad(3); err != nil {
		t.Fatal(err)
	}
	b.blade.SetTemperature(70)
	awaitAgentEvent(t, sub, core.ReasonCriticalTemperature)
	sub.Close()
	if st := b.blade.State(); st.FanPercent != 100 || !b.agent.Status().Critical {
		t.Fatalf("local protection without the API server: %+v", st)
	}
	b.blade.PressButton()
	testwait.Eventually(t, waitTimeout, "events queued while the API server is down", func(context.Context) (bool, string) {
		s := b.rep.Stats()
		return s.Events.Pending >= 2 && !s.Connected, fmt.Sprintf("%+v", s)
	})

	restart()
	testwait.Eventually(t, waitTimeout, "condition after the outage", func(context.Context) (bool, string) {
		c, err := b.condition()
		if err != nil {
			return false, err.Error()
		}
		return c != nil && c.Status == corev1.ConditionTrue, fmt.Sprintf("%+v (agent critical: %t)", c, b.agent.Status().Critical)
	})
	for _, r := range []string{"CriticalTemperature", "ButtonPressed", "IdentifyStarted"} {
		b.waitEvent(r)
	}
	testwait.Eventually(t, waitTimeout, "Blade status after the outage", func(context.Context) (bool, string) {
		bl, err := b.getBlade()
		return err == nil && bl.Status.Critical && bl.Status.Identify, fmt.Sprint(err)
	})
	b.waitDelivered()
}

// TestOverheatThatEndsDuringAnOutage: the blade overheats and cools down
// again while the API server is down. Once it is back, the Events tell what
// happened, in order, and the Node and the Blade tell how things are now:
// not critical, so no BladeThermalCritical condition True.
func TestOverheatThatEndsDuringAnOutage(t *testing.T) {
	b, restart := bladeWithoutAPIServer(t, "outage-over")
	sub := b.agent.Subscribe(256)
	b.blade.SetTemperature(70)
	awaitAgentEvent(t, sub, core.ReasonCriticalTemperature)
	b.blade.SetTemperature(40) // at or below 60 − 5 °C hysteresis ends critical mode
	awaitAgentEvent(t, sub, core.ReasonTemperatureNormal)
	// Identify, from the button, is a change only a Blade status written
	// after the outage shows.
	b.blade.PressButton()
	awaitAgentEvent(t, sub, core.ReasonIdentifyStarted)
	sub.Close()

	restart()
	testwait.Eventually(t, waitTimeout, "Blade status after the outage", func(context.Context) (bool, string) {
		bl, err := b.getBlade()
		if err != nil {
			return false, err.Error()
		}
		return bl.Status.Identify, fmt.Sprintf("identify %t, critical %t", bl.Status.Identify, bl.Status.Critical)
	})
	// The reporter writes the Blade status only after the Node is in line
	// with the same agent state (Reporter.sync), and the agent has not been
	// critical since before the API server returned: the Node is final.
	if bl, err := b.getBlade(); err != nil || bl.Status.Critical {
		t.Errorf("Blade status critical after the blade cooled down (err %v)", err)
	}
	if c, err := b.condition(); err != nil {
		t.Error(err)
	} else if c != nil && c.Status == corev1.ConditionTrue {
		t.Errorf("condition %+v on a blade that is no longer critical", *c)
	}
	critical, normal := b.waitEvent("CriticalTemperature"), b.waitEvent("TemperatureNormal")
	if !critical.EventTime.Before(&normal.EventTime) {
		t.Errorf("CriticalTemperature at %v is not before TemperatureNormal at %v", critical.EventTime, normal.EventTime)
	}
	b.waitDelivered()
}

// bladeWithoutAPIServer starts an agent on node in the outage suite's
// cluster, waits until it reported, and stops kube-apiserver. restart starts
// it again; if the test ends first, a cleanup does.
func bladeWithoutAPIServer(t *testing.T, node string) (b *bladeUnderTest, restart func()) {
	t.Helper()
	outageSuite.Need(t)
	env := outage.env
	b = startBladeOn(t, &outage, node)
	testwait.Eventually(t, waitTimeout, "initial Blade", func(context.Context) (bool, string) {
		bl, err := b.getBlade()
		return err == nil && bl.Status.State == v1alpha1.BladeStateIdle, fmt.Sprint(err)
	})
	b.waitEvent("AgentStarted")

	if err := env.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			_ = env.StartAPIServer()
		}
	})
	return b, func() {
		t.Helper()
		if err := env.StartAPIServer(); err != nil {
			t.Fatal(err)
		}
		restarted = true
	}
}

// awaitAgentEvent waits for the agent to publish an event with reason on
// sub, which works without the API server.
func awaitAgentEvent(t *testing.T, sub *eventbus.Subscription[core.Event], reason core.Reason) {
	t.Helper()
	deadline := time.After(waitTimeout) // bounds a broken run only
	for {
		select {
		case ev, ok := <-sub.C():
			if !ok {
				t.Fatalf("the agent's events ended before %s", reason)
			}
			if ev.Reason == reason {
				return
			}
		case <-deadline:
			t.Fatalf("no %s event from the agent while the API server is down", reason)
		}
	}
}

// condition is the Node's BladeThermalCritical condition as the API server
// has it (nil if there is none).
func (b *bladeUnderTest) condition() (*corev1.NodeCondition, error) {
	n := &corev1.Node{}
	if err := b.c.k8s.Get(context.Background(), clientKey(b.node), n); err != nil {
		return nil, err
	}
	return nodeCondition(n), nil
}

// waitDelivered waits until every Event queued during the outage was
// delivered, and checks none was dropped.
func (b *bladeUnderTest) waitDelivered() {
	b.t.Helper()
	testwait.Eventually(b.t, waitTimeout, "queue drained", func(context.Context) (bool, string) {
		s := b.rep.Stats()
		return s.Events.Pending == 0, fmt.Sprintf("%+v", s)
	})
	if d := b.rep.Stats().Events.Dropped; d != 0 {
		b.t.Fatalf("%d events dropped", d)
	}
}
