package kubeevents

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubeblade/kubeblade/internal/core"
	"github.com/kubeblade/kubeblade/internal/testwait"
)

// apiServer is a fake events API that can be switched off.
type apiServer struct {
	mu      sync.Mutex
	down    error
	created []string // notes, in arrival order
}

func (a *apiServer) setDown(err error) {
	a.mu.Lock()
	a.down = err
	a.mu.Unlock()
}

func (a *apiServer) notes() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.created...)
}

func newFake(a *apiServer) *fake.Clientset {
	cs := fake.NewClientset()
	cs.PrependReactor("create", "events", func(act k8stesting.Action) (bool, runtime.Object, error) {
		a.mu.Lock()
		defer a.mu.Unlock()
		if a.down != nil {
			return true, nil, a.down
		}
		ev := act.(k8stesting.CreateAction).GetObject().(*eventsv1.Event)
		a.created = append(a.created, ev.Note)
		return false, nil, nil
	})
	return cs
}

func event(note string) *eventsv1.Event {
	return &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Name: "blade1." + note, Namespace: "default"}, Note: note, ReportingInstance: "pod-abc"}
}

func TestWritesThroughWhenUp(t *testing.T) {
	a := &apiServer{}
	cs := newFake(a)
	s := newBufferedSink(cs.EventsV1().Events("default"), "blade1", 10, clocktesting.NewFakeClock(time.Now()))
	if _, err := s.Create(context.Background(), event("one")); err != nil {
		t.Fatal(err)
	}
	got, err := cs.EventsV1().Events("default").Get(context.Background(), "blade1.one", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.ReportingInstance != "blade1" {
		t.Errorf("reporting instance = %q, want the node name", got.ReportingInstance)
	}
	if s.pending() != 0 || s.sent.Load() != 1 {
		t.Errorf("pending %d sent %d", s.pending(), s.sent.Load())
	}
}

func TestQueuesInOrderDropsOldestAndFlushes(t *testing.T) {
	a := &apiServer{}
	a.setDown(errors.New("dial tcp 127.0.0.1:6443: connect: connection refused"))
	clk := clocktesting.NewFakeClock(time.Now())
	s := newBufferedSink(newFake(a).EventsV1().Events("default"), "blade1", 3, clk)
	for i := 1; i <= 5; i++ {
		// The recorder must see success, or it would retry and give up
		// on its own schedule.
		if _, err := s.Create(context.Background(), event(fmt.Sprint(i))); err != nil {
			t.Fatalf("Create while down returned %v", err)
		}
	}
	if s.pending() != 3 || s.dropped.Load() != 2 || !s.failing.Load() {
		t.Fatalf("pending %d dropped %d failing %v", s.pending(), s.dropped.Load(), s.failing.Load())
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); s.run(ctx) }()
	// The flusher tries, fails and waits on the clock.
	testwait.Eventually(t, 10*time.Second, "the flusher waiting on the clock", func(context.Context) (bool, string) {
		return clk.HasWaiters(), ""
	})
	a.setDown(nil)
	clk.Step(time.Second)
	testwait.Eventually(t, 10*time.Second, "the queue flushed", func(context.Context) (bool, string) {
		return s.pending() == 0, fmt.Sprintf("%d pending", s.pending())
	})
	if diff := cmp.Diff([]string{"3", "4", "5"}, a.notes()); diff != "" {
		t.Errorf("delivered (-want +got):\n%s", diff)
	}
	// With the queue empty, writes go straight through again.
	if _, err := s.Create(context.Background(), event("6")); err != nil {
		t.Fatal(err)
	}
	if got := a.notes(); got[len(got)-1] != "6" || s.failing.Load() {
		t.Errorf("after recovery: %v failing %v", got, s.failing.Load())
	}
	cancel()
	<-done
}

func TestMalformedEventIsNotQueued(t *testing.T) {
	a := &apiServer{}
	a.setDown(apierrors.NewInvalid(schema.GroupKind{Group: "events.k8s.io", Kind: "Event"}, "x", nil))
	s := newBufferedSink(newFake(a).EventsV1().Events("default"), "blade1", 3, clocktesting.NewFakeClock(time.Now()))
	if _, err := s.Create(context.Background(), event("bad")); err == nil {
		t.Fatal("a refused event was reported as written")
	}
	if s.pending() != 0 {
		t.Fatal("a refused event was queued: it would block the queue forever")
	}
}

// TestForbiddenIsRetriedAWhile: a kube-apiserver that has just started
// answers 403 until its RBAC and admission caches are filled, so a 403 is
// retried ForbiddenRetries times before the write is dropped and the queue
// moves on.
func TestForbiddenIsRetriedAWhile(t *testing.T) {
	gr := schema.GroupResource{Group: "events.k8s.io", Resource: "events"}
	for name, tc := range map[string]struct {
		refusals  int
		delivered []string
	}{
		"while the API server warms up": {refusals: ForbiddenRetries, delivered: []string{"first", "second"}},
		"for good":                      {refusals: 1000, delivered: []string{"second"}},
	} {
		t.Run(name, func(t *testing.T) {
			a := &apiServer{}
			var mu sync.Mutex
			refusals := tc.refusals
			cs := newFake(a)
			cs.PrependReactor("create", "events", func(act k8stesting.Action) (bool, runtime.Object, error) {
				mu.Lock()
				defer mu.Unlock()
				if act.(k8stesting.CreateAction).GetObject().(*eventsv1.Event).Note == "first" && refusals > 0 {
					refusals--
					return true, nil, apierrors.NewForbidden(gr, "x", errors.New("not yet ready to handle request"))
				}
				return false, nil, nil
			})
			clk := clocktesting.NewFakeClock(time.Now())
			s := newBufferedSink(cs.EventsV1().Events("default"), "blade1", 10, clk)
			if _, err := s.Create(context.Background(), event("first")); err != nil {
				t.Fatalf("a first 403 was final: %v", err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan struct{})
			go func() { defer close(done); s.run(ctx) }()
			// The flusher retries on the fake clock until the write is sent
			// or given up: each time it waits on the clock, move the clock
			// past its backoff.
			testwait.Eventually(t, 10*time.Second, "the queue sent or given up", func(context.Context) (bool, string) {
				if n := s.pending(); n != 0 {
					if clk.HasWaiters() {
						clk.Step(10 * time.Second)
					}
					return false, fmt.Sprintf("%d pending", n)
				}
				return true, ""
			})
			if _, err := s.Create(context.Background(), event("second")); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.delivered, a.notes()); diff != "" {
				t.Errorf("delivered (-want +got):\n%s", diff)
			}
			cancel()
			<-done
		})
	}
}

func TestTransient(t *testing.T) {
	gr := schema.GroupResource{Group: "events.k8s.io", Resource: "events"}
	cases := map[string]struct {
		err  error
		want bool
	}{
		"connection refused": {errors.New("connection refused"), true},
		"503":                {apierrors.NewServiceUnavailable("starting"), true},
		"429":                {apierrors.NewTooManyRequests("slow down", 1), true},
		"500":                {apierrors.NewInternalError(errors.New("etcd")), true},
		"timeout":            {apierrors.NewTimeoutError("slow", 1), true},
		"invalid":            {apierrors.NewInvalid(schema.GroupKind{Kind: "Event"}, "x", nil), false},
		"forbidden":          {apierrors.NewForbidden(gr, "x", errors.New("rbac")), false},
		"not found":          {apierrors.NewNotFound(gr, "x"), false},
	}
	for name, tc := range cases {
		if got := transient(tc.err); got != tc.want {
			t.Errorf("%s: transient = %v, want %v", name, got, tc.want)
		}
	}
}

func TestReported(t *testing.T) {
	for _, r := range []string{"ButtonPressed", "IdentifyStarted", "IdentifyStopped", "CriticalTemperature", "TemperatureNormal",
		"StealthEnabled", "StealthDisabled", "FanStalled", "PowerSourceChanged", "InvalidAnnotation", "ConfigApplied", "AgentStarted"} {
		if !Reported(core.Reason(r)) {
			t.Errorf("%s is a spec Event reason but is not reported", r)
		}
	}
	for _, r := range []string{"StatusChanged", "FanModeChanged"} {
		if Reported(core.Reason(r)) {
			t.Errorf("%s is internal but would be reported", r)
		}
	}
}
