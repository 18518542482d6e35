package kubeagent

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	clocktesting "k8s.io/utils/clock/testing"

	agentconfigv1 "github.com/kubeblade/kubeblade/api/agentconfig/v1alpha1"
	"github.com/kubeblade/kubeblade/api/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/core"
	"github.com/kubeblade/kubeblade/internal/hardware/simulated"
	"github.com/kubeblade/kubeblade/internal/testwait"
)

func reportPercentiles(b *testing.B, d []time.Duration) {
	if len(d) == 0 {
		return
	}
	slices.Sort(d)
	p := func(q float64) float64 { return float64(d[int(q*float64(len(d)-1))].Microseconds()) / 1000 }
	b.ReportMetric(p(0.5), "p50-ms")
	b.ReportMetric(p(0.99), "p99-ms")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkAnnotationToHardware measures the time from a person's
// annotation write to the simulated fan changing duty.
func BenchmarkAnnotationToHardware(b *testing.B) {
	bl := startBlade(b, fmt.Sprintf("bench-ann-%d", b.N))
	testwait.Eventually(b, waitTimeout, "started", func(context.Context) (bool, string) { return bl.rep.Stats().Events.Sent >= 1, "" })
	sub := bl.agent.Subscribe(256)
	defer sub.Close()
	var lat []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		target := 30 + 30*(i%2)
		start := time.Now()
		bl.annotate(map[string]*string{v1alpha1.AnnotationFanSpeed: ptr(fmt.Sprint(target))})
		for bl.blade.State().FanPercent != uint8(target) {
			<-sub.C()
		}
		lat = append(lat, time.Since(start))
	}
	reportPercentiles(b, lat)
}

// BenchmarkButtonToStoredEvent measures the time from a button press to its
// ButtonPressed Event being stored by the API server. Each iteration uses a
// fresh blade: client-go folds repeats of an Event into a series.
func BenchmarkButtonToStoredEvent(b *testing.B) {
	cs := kubernetes.NewForConfigOrDie(need(b).env.Config)
	var lat []time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		node := fmt.Sprintf("bench-btn-%d-%d", b.N, i)
		bl := startBlade(b, node)
		testwait.Eventually(b, waitTimeout, "started", func(context.Context) (bool, string) { return bl.rep.Stats().Events.Sent >= 1, "" })
		w, err := cs.EventsV1().Events("default").Watch(context.Background(), metav1.ListOptions{
			FieldSelector: "regarding.name=" + node + ",reason=ButtonPressed",
		})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		bl.blade.PressButton()
		for ev := range w.ResultChan() {
			if e, ok := ev.Object.(*eventsv1.Event); ok && e.Reason == "ButtonPressed" {
				break
			}
		}
		lat = append(lat, time.Since(start))
		w.Stop()
		b.StopTimer()
		bl.stop()
	}
	reportPercentiles(b, lat)
}

// BenchmarkWritesPerHour runs a blade at constant temperature through one
// hour of the reporter's clock (default heartbeat and minimum interval) and
// reports the API writes it makes, after the start-up writes.
func BenchmarkWritesPerHour(b *testing.B) {
	for i := 0; i < b.N; i++ {
		clk := clocktesting.NewFakeClock(time.Now())
		bl := startBlade(b, fmt.Sprintf("bench-writes-%d-%d", b.N, i), func(so *simulated.Options, _ *agentconfigv1.AgentConfig, ro *Options) {
			so.TimeConstant = time.Nanosecond // always at equilibrium: a constant temperature
			ro.Clock, ro.Heartbeat, ro.MinInterval = clk, DefaultHeartbeat, DefaultMinInterval
		})
		testwait.Eventually(b, waitTimeout, "settled", func(context.Context) (bool, string) {
			s := bl.rep.Stats()
			bs, err := bl.getBlade()
			return err == nil && bs.Status.Fan.Mode == string(core.FanModeAuto) && s.Events.Sent >= 1 && s.Events.Pending == 0, ""
		})
		before := bl.rep.Stats().Writes
		for m := 0; m < 60; m++ {
			clk.Step(time.Minute)
			// The reporter re-arms its timer once it has handled the tick.
			testwait.Eventually(b, waitTimeout, "reporter idle", func(context.Context) (bool, string) { return clk.HasWaiters(), "" })
		}
		b.ReportMetric(float64(bl.rep.Stats().Writes-before), "writes/hour")
		b.ReportMetric(0, "ns/op")
		bl.stop()
	}
}
