package kubeagent

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentconfigv1 "github.com/kubeblade/kubeblade/api/agentconfig/v1alpha1"
	"github.com/kubeblade/kubeblade/api/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/hardware/simulated"
	"github.com/kubeblade/kubeblade/internal/testwait"
)

func TestConfirmSpread(t *testing.T) {
	for _, c := range []struct {
		matched int32
		rate    float64
		want    time.Duration
	}{
		{0, 200, 0},
		{1, 200, 0}, // one blade has nobody to make room for
		{1000, 200, 5 * time.Second},
		{10000, 200, 50 * time.Second},
		{100000, 200, MaxConfirmSpread},
		{3, 1, 3 * time.Second},
		{1000, 0, 0},
	} {
		if got := ConfirmSpread(c.matched, c.rate); got != c.want {
			t.Errorf("ConfirmSpread(%d, %g) = %s, want %s", c.matched, c.rate, got, c.want)
		}
	}
}

func TestOnlyConfirmationWaits(t *testing.T) {
	pct := func(v int32) *int32 { return &v }
	last := v1alpha1.BladeStatus{
		State:  v1alpha1.BladeStateIdle,
		Config: &v1alpha1.AppliedConfig{Name: "c", Generation: 1},
		Fan:    v1alpha1.BladeFanStatus{Percent: 40, Mode: "auto", DemandPercent: pct(40)},
		LEDs:   v1alpha1.BladeLEDsStatus{Edge: v1alpha1.LEDStatus{Color: "#00ff00"}},
	}
	applied := *last.DeepCopy()
	applied.Config.Generation = 2
	applied.LEDs.Edge.Color = "#0000ff"
	applied.Fan.DemandPercent = pct(90)
	if !onlyConfirmation(&last, applied) {
		t.Error("a new generation with its colour and fan demand is the confirmation alone; want it held")
	}
	identify := *applied.DeepCopy()
	identify.Identify = true
	if onlyConfirmation(&last, identify) {
		t.Error("identify turned on during the hold is the blade's own state; want it written at once")
	}
	critical := *applied.DeepCopy()
	critical.Critical = true
	if onlyConfirmation(&last, critical) {
		t.Error("critical temperature during the hold; want it written at once")
	}
	if onlyConfirmation(nil, applied) {
		t.Error("the first status is never held")
	}
}

// confirmRequests records when the agent wrote its Blade status and its
// ConfigApplied Events, with what they said.
type confirmRequests struct {
	rt http.RoundTripper

	mu     sync.Mutex
	writes []confirmWrite
}

type confirmWrite struct {
	at   time.Time
	kind string // "status" or "event"
	body string
}

func (c *confirmRequests) RoundTrip(req *http.Request) (*http.Response, error) {
	kind := ""
	switch {
	case req.Method == http.MethodPatch && strings.Contains(req.URL.Path, "/blades/") && strings.HasSuffix(req.URL.Path, "/status"):
		kind = "status"
	case req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/events"):
		kind = "event"
	}
	if kind != "" {
		data, err := requestBody(req)
		if err != nil {
			return nil, err
		}
		c.mu.Lock()
		c.writes = append(c.writes, confirmWrite{at: time.Now(), kind: kind, body: data})
		c.mu.Unlock()
	}
	return c.rt.RoundTrip(req)
}

// first returns the first write of kind whose body contains all of want.
func (c *confirmRequests) first(kind string, want ...string) (confirmWrite, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
next:
	for _, w := range c.writes {
		if w.kind != kind {
			continue
		}
		for _, s := range want {
			if !strings.Contains(w.body, s) {
				continue next
			}
		}
		return w, true
	}
	return confirmWrite{}, false
}

func (c *confirmRequests) wrap(ro *Options) {
	ro.Config.Wrap(func(rt http.RoundTripper) http.RoundTripper { c.rt = rt; return c })
}

// spreadConfig creates BladeConfig name with status.matchedNodes set as
// the operator sets it, and a Node assigned to it, and starts its agent
// with the given confirmation rate and a fixed jitter.
func spreadConfig(t *testing.T, name string, matched int32, rate, jitter float64) (*bladeUnderTest, *confirmRequests, *v1alpha1.BladeConfig) {
	t.Helper()
	ctx := context.Background()
	k8s := need(t).k8s
	bc := &v1alpha1.BladeConfig{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := k8s.Create(ctx, bc); err != nil {
		t.Fatal(err)
	}
	bc.Status.MatchedNodes = matched
	if err := k8s.Status().Update(ctx, bc); err != nil {
		t.Fatal(err)
	}
	labelledNode(t, name, name)
	rec := &confirmRequests{}
	b := startBlade(t, name, func(_ *simulated.Options, _ *agentconfigv1.AgentConfig, ro *Options) {
		rec.wrap(ro)
		ro.ConfirmRate = rate
		ro.jitter = func() float64 { return jitter }
	})
	waitGeneration(t, b, name, 1)
	b.waitEvent("ConfigApplied")
	if err := k8s.Get(ctx, client.ObjectKey{Name: name}, bc); err != nil {
		t.Fatal(err)
	}
	return b, rec, bc
}

func waitGeneration(t *testing.T, b *bladeUnderTest, name string, gen int64) {
	t.Helper()
	testwait.Eventually(t, waitTimeout, fmt.Sprintf("Blade reports %s generation %d", name, gen), func(context.Context) (bool, string) {
		bl, err := b.getBlade()
		if err != nil || bl.Status.Config == nil {
			return false, fmt.Sprint(err)
		}
		return bl.Status.Config.Name == name && bl.Status.Config.Generation == gen, fmt.Sprintf("%+v", bl.Status.Config)
	})
}

// waitApplied waits until the agent has applied generation gen to its
// hardware and returns when it did.
func waitApplied(t *testing.T, b *bladeUnderTest, gen int64) time.Time {
	t.Helper()
	var at time.Time
	testwait.Eventually(t, waitTimeout, fmt.Sprintf("generation %d applied to the hardware", gen), func(context.Context) (bool, string) {
		s := b.rep.Stats()
		at = s.ConfigAppliedAt
		return s.Config != nil && s.Config.Generation == gen, fmt.Sprintf("%+v", s.Config)
	})
	return at
}

// A change to a BladeConfig followed by many blades is applied to the
// hardware at once, and confirmed (Blade status, ConfigApplied Event)
// after the agent's share of the spread, not in the same second as every
// other agent's confirmation.
func TestConfigChangeIsAppliedAtOnceAndConfirmedSpread(t *testing.T) {
	const name = "spread-confirm"
	// 3 blades at 1 per second: a 3 s spread, of which this agent's
	// jitter takes 0.9: its confirmation is due 2.7 s after it applied.
	b, rec, bc := spreadConfig(t, name, 3, 1, 0.9)
	const delay = 2700 * time.Millisecond
	bc.Spec.Agent.FanCurve = []agentconfigv1.FanCurveStep{{TemperatureCelsius: 20, Percent: 90}}
	bc.Spec.Agent.LEDs.IdleColor = "#0000ff"
	updated := time.Now()
	if err := need(t).k8s.Update(context.Background(), bc); err != nil {
		t.Fatal(err)
	}
	applied := waitApplied(t, b, 2)
	// The watch's delivery of the change is recorded, between the
	// update and the apply (the fleet harness tells the API server's
	// part of a slow change from the agent's by it).
	if d := b.rep.Stats().ConfigDeliveredAt; d.Before(updated) || d.After(applied) {
		t.Errorf("ConfigDeliveredAt = %s, want between the update (%s) and the apply (%s)", d, updated, applied)
	}
	waitGeneration(t, b, name, 2)
	status, ok := rec.first("status", `"generation":2`)
	if !ok {
		t.Fatal("no status write with generation 2 recorded")
	}
	if early := applied.Add(delay).Sub(status.at); early > 0 {
		t.Errorf("generation 2's status was written %s after it was applied, %s before its confirmation was due", status.at.Sub(applied), early)
	}
	var event confirmWrite
	testwait.Eventually(t, waitTimeout, "ConfigApplied Event for generation 2", func(context.Context) (bool, string) {
		event, ok = rec.first("event", "ConfigApplied", "generation 2")
		return ok, ""
	})
	if early := applied.Add(delay).Sub(event.at); early > 0 {
		t.Errorf("generation 2's ConfigApplied Event was written %s before its confirmation was due", early)
	}
	// The hardware did not wait: the fan follows the new curve.
	if got := b.blade.State().FanPercent; got != 90 {
		t.Errorf("fan at %d %% after the change, want the new curve's 90 %%", got)
	}
}

// A change of the blade's own state while a confirmation waits is written
// at once, and carries the new generation with it (which confirms it).
func TestStateChangeDuringTheSpreadIsWrittenAtOnce(t *testing.T) {
	const name = "spread-state"
	// 3 600 blades at 1 per second: the spread is capped at a minute.
	b, rec, bc := spreadConfig(t, name, 3600, 1, 0.99)
	bc.Spec.Agent.LEDs.IdleColor = "#0000ff"
	if err := need(t).k8s.Update(context.Background(), bc); err != nil {
		t.Fatal(err)
	}
	applied := waitApplied(t, b, 2)
	b.annotate(map[string]*string{v1alpha1.AnnotationIdentify: ptr("true")})
	testwait.Eventually(t, waitTimeout, "identify in the Blade status", func(context.Context) (bool, string) {
		bl, err := b.getBlade()
		if err != nil {
			return false, err.Error()
		}
		return bl.Status.Identify, ""
	})
	w, ok := rec.first("status", `"identify":true`)
	if !ok {
		t.Fatal("no status write with identify recorded")
	}
	if !strings.Contains(w.body, `"generation":2`) {
		t.Errorf("the identify write does not carry generation 2: %s", w.body)
	}
	if due := applied.Add(59 * time.Second); !w.at.Before(due) {
		t.Errorf("identify was written %s after the change was applied: it waited for the confirmation", w.at.Sub(applied))
	}
	// Confirmed by that write, the Event need not wait for the spread.
	testwait.Eventually(t, waitTimeout, "ConfigApplied Event for generation 2", func(context.Context) (bool, string) {
		_, ok := rec.first("event", "ConfigApplied", "generation 2")
		return ok, ""
	})
}

// statusGate holds the agent's Blade status writes while closed: the API
// server answering late, as a busy one does.
type statusGate struct {
	rt      http.RoundTripper
	closed  chan struct{} // closed while writes pass
	waiting chan struct{} // one value per write that found the gate shut
	mu      sync.Mutex
	shut    bool
}

func (g *statusGate) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPatch && strings.Contains(req.URL.Path, "/blades/") && strings.HasSuffix(req.URL.Path, "/status") {
		g.mu.Lock()
		shut, open := g.shut, g.closed
		g.mu.Unlock()
		if shut {
			select {
			case g.waiting <- struct{}{}:
			default:
			}
			select {
			case <-open:
			case <-req.Context().Done():
				return nil, req.Context().Err()
			}
		}
	}
	return g.rt.RoundTrip(req)
}

func (g *statusGate) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.shut, g.closed = true, make(chan struct{})
}

func (g *statusGate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.shut {
		g.shut = false
		close(g.closed)
	}
}

// A BladeConfig change reaches the hardware while the agent's loop waits
// for the API server to answer a write: the config applier does not wait
// with it. A 10 000-agent run found agents applying a change 40 s after
// their watch delivered it, their loop in a write answered only by a
// timeout. Once the write is answered, the change is confirmed.
func TestConfigReachesTheHardwareWhileAWriteWaits(t *testing.T) {
	const name = "write-waits"
	ctx := context.Background()
	k8s := need(t).k8s
	bc := &v1alpha1.BladeConfig{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := k8s.Create(ctx, bc); err != nil {
		t.Fatal(err)
	}
	labelledNode(t, name, name)
	gate := &statusGate{waiting: make(chan struct{}, 1)}
	b := startBlade(t, name, func(_ *simulated.Options, _ *agentconfigv1.AgentConfig, ro *Options) {
		ro.Config.Wrap(func(rt http.RoundTripper) http.RoundTripper { gate.rt = rt; return gate })
	})
	waitGeneration(t, b, name, 1)
	gate.close()
	defer gate.open()
	// A change of the blade's own state is written at once: that write
	// now waits at the gate, and the loop with it.
	b.annotate(map[string]*string{v1alpha1.AnnotationIdentify: ptr("true")})
	select {
	case <-gate.waiting:
	case <-time.After(waitTimeout):
		t.Fatal("the identify write never reached the API server")
	}
	if err := k8s.Get(ctx, client.ObjectKey{Name: name}, bc); err != nil {
		t.Fatal(err)
	}
	bc.Spec.Agent.FanCurve = []agentconfigv1.FanCurveStep{{TemperatureCelsius: 20, Percent: 90}}
	if err := k8s.Update(ctx, bc); err != nil {
		t.Fatal(err)
	}
	waitApplied(t, b, 2)
	if got := b.blade.State().FanPercent; got != 90 {
		t.Errorf("fan at %d %% with generation 2 applied, want its curve's 90 %%", got)
	}
	select {
	case <-gate.closed:
		t.Fatal("the gate opened before the change was applied: the test proves nothing")
	default:
	}
	gate.open()
	waitGeneration(t, b, name, 2)
}
