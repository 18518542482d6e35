package kubeagent

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubeblade/kubeblade/api/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/core"
	"github.com/kubeblade/kubeblade/internal/testwait"
)

// TestAPIServerOutage stops kube-apiserver while the blade overheats and its
// button is pressed: protection must engage locally, and once the API server
// is back the condition, the Blade status and every Event must arrive. The
// API server it stops is its own, so no other test sees the outage, whatever
// order the tests run in.
func TestAPIServerOutage(t *testing.T) {
	outageSuite.Need(t)
	c := &outage
	env := c.env
	b := startBladeOn(t, c, "outage")
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
	sub := b.agent.Subscribe(256)
	b.blade.SetTemperature(70)
	deadline := time.After(waitTimeout) // bounds a broken run only
	for critical := false; !critical; {
		select {
		case ev := <-sub.C():
			critical = ev.Reason == core.ReasonCriticalTemperature
		case <-deadline:
			t.Fatal("no CriticalTemperature event from the agent while the API server is down")
		}
	}
	sub.Close()
	if st := b.blade.State(); st.FanPercent != 100 || !b.agent.Status().Critical {
		t.Fatalf("local protection without the API server: %+v", st)
	}
	b.blade.PressButton()
	testwait.Eventually(t, waitTimeout, "events queued while the API server is down", func(context.Context) (bool, string) {
		s := b.rep.Stats()
		return s.Events.Pending >= 2 && !s.Connected, fmt.Sprintf("%+v", s)
	})

	if err := env.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	restarted = true
	testwait.Eventually(t, waitTimeout, "condition after the outage", func(context.Context) (bool, string) {
		n := &corev1.Node{}
		if err := c.k8s.Get(t.Context(), clientKey("outage"), n); err != nil {
			return false, err.Error()
		}
		c := nodeCondition(n)
		return c != nil && c.Status == corev1.ConditionTrue, fmt.Sprintf("%+v", c)
	})
	for _, r := range []string{"CriticalTemperature", "ButtonPressed", "IdentifyStarted"} {
		b.waitEvent(r)
	}
	testwait.Eventually(t, waitTimeout, "Blade status after the outage", func(context.Context) (bool, string) {
		bl, err := b.getBlade()
		return err == nil && bl.Status.Critical && bl.Status.Identify, fmt.Sprint(err)
	})
	testwait.Eventually(t, waitTimeout, "queue drained", func(context.Context) (bool, string) {
		s := b.rep.Stats()
		return s.Events.Pending == 0, fmt.Sprintf("%+v", s)
	})
	if d := b.rep.Stats().Events.Dropped; d != 0 {
		t.Fatalf("%d events dropped", d)
	}
}
