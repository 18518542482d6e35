package kubeagent

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubeblade/kubeblade/api/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/core"
)

// TestAPIServerOutage stops kube-apiserver while the blade overheats and its
// button is pressed: protection must engage locally, and once the API server
// is back the condition, the Blade status and every Event must arrive.
func TestAPIServerOutage(t *testing.T) {
	b := startBlade(t, "outage")
	eventually(t, "initial Blade", func() (bool, string) {
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
	for ev := range sub.C() {
		if ev.Reason == core.ReasonCriticalTemperature {
			break
		}
	}
	sub.Close()
	if st := b.blade.State(); st.FanPercent != 100 || !b.agent.Status().Critical {
		t.Fatalf("local protection without the API server: %+v", st)
	}
	b.blade.PressButton()
	eventually(t, "events queued while the API server is down", func() (bool, string) {
		s := b.rep.Stats()
		return s.Events.Pending >= 2 && !s.Connected, fmt.Sprintf("%+v", s)
	})

	if err := env.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	restarted = true
	eventually(t, "condition after the outage", func() (bool, string) {
		n := &corev1.Node{}
		if err := k8s.Get(t.Context(), clientKey("outage"), n); err != nil {
			return false, err.Error()
		}
		c := nodeCondition(n)
		return c != nil && c.Status == corev1.ConditionTrue, fmt.Sprintf("%+v", c)
	})
	for _, r := range []string{"CriticalTemperature", "ButtonPressed", "IdentifyStarted"} {
		b.waitEvent(r)
	}
	eventually(t, "Blade status after the outage", func() (bool, string) {
		bl, err := b.getBlade()
		return err == nil && bl.Status.Critical && bl.Status.Identify, fmt.Sprint(err)
	})
	eventually(t, "queue drained", func() (bool, string) {
		s := b.rep.Stats()
		return s.Events.Pending == 0, fmt.Sprintf("%+v", s)
	})
	if d := b.rep.Stats().Events.Dropped; d != 0 {
		t.Fatalf("%d events dropped", d)
	}
}
