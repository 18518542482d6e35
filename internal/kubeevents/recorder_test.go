package kubeevents

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubeblade/kubeblade/internal/core"
	"github.com/kubeblade/kubeblade/internal/testwait"
)

var testNode = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "blade1", UID: types.UID("uid-1")}}

// runRecorder starts a Recorder over a fake API and returns it with a
// function that waits until n writes (creates and patches) arrived.
func runRecorder(t *testing.T, clk *clocktesting.FakeClock, capacity int) (*Recorder, *fake.Clientset, func(n int) []k8stesting.Action) {
	t.Helper()
	cs := fake.NewClientset()
	r := New(Options{Client: cs.EventsV1().Events("default"), NodeName: "blade1", Capacity: capacity, Clock: clk})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	// writes waits for n writes in the fake's action log, which the
	// recorder's goroutine fills: polled, not synchronised with it.
	writes := func(n int) []k8stesting.Action {
		t.Helper()
		var got []k8stesting.Action
		testwait.Eventually(t, 10*time.Second, fmt.Sprintf("%d writes", n), func(context.Context) (bool, string) {
			got = nil
			for _, a := range cs.Actions() {
				if a.GetVerb() == "create" || a.GetVerb() == "patch" {
					got = append(got, a)
				}
			}
			return len(got) >= n, fmt.Sprintf("%d writes arrived", len(got))
		})
		return got
	}
	return r, cs, writes
}

func TestRecorderWritesEventsRegardingTheNode(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	r, cs, writes := runRecorder(t, clk, 10)
	// Raised before the Node is known: held, then sent.
	r.Record(core.Event{Reason: core.ReasonAgentStarted, Message: "started", Time: clk.Now()})
	r.Record(core.Event{Reason: core.ReasonStatusChanged, Message: "internal, never an Event", Time: clk.Now()})
	r.SetNode(testNode)
	// A button press and the identify it starts happen in one instant.
	r.Record(core.Event{Reason: core.ReasonButtonPressed, Message: "edge button pressed", Time: clk.Now()})
	r.Record(core.Event{Reason: core.ReasonIdentifyStarted, Message: "identify started by button", Time: clk.Now()})
	r.Record(core.Event{Reason: core.ReasonCriticalTemperature, Warning: true, Message: "hot", Time: clk.Now()})
	got := writes(4)
	if len(got) != 4 {
		t.Fatalf("writes = %d, want 4", len(got))
	}
	l, err := cs.EventsV1().Events("default").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Items) != 4 {
		t.Fatalf("stored %d Events, want 4 (distinct names even in one instant)", len(l.Items))
	}
	byReason := map[string]eventsv1.Event{}
	for _, e := range l.Items {
		byReason[e.Reason] = e
		if e.Regarding.Kind != "Node" || e.Regarding.Name != "blade1" || e.Regarding.UID != "uid-1" {
			t.Errorf("%s regards %+v", e.Reason, e.Regarding)
		}
		if e.ReportingController != ReportingController || e.ReportingInstance != "blade1" || e.Namespace != "default" {
			t.Errorf("%s reported by %s/%s in %s", e.Reason, e.ReportingController, e.ReportingInstance, e.Namespace)
		}
		if !strings.HasPrefix(e.Name, "blade1.") || !e.EventTime.Time.Equal(clk.Now()) {
			t.Errorf("%s: name %s, time %s", e.Reason, e.Name, e.EventTime)
		}
	}
	if e := byReason["CriticalTemperature"]; e.Type != corev1.EventTypeWarning || e.Action != "ProtectThermal" || e.Note != "hot" {
		t.Errorf("critical Event = %+v", e)
	}
	if e := byReason["AgentStarted"]; e.Type != corev1.EventTypeNormal || e.Action != "Start" {
		t.Errorf("AgentStarted Event = %+v", e)
	}
}

func TestRecorderFoldsRepeatsIntoASeries(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	r, cs, writes := runRecorder(t, clk, 10)
	r.SetNode(testNode)
	press := func() {
		r.Record(core.Event{Reason: core.ReasonButtonPressed, Message: "edge button pressed", Time: clk.Now()})
	}
	press()
	clk.Step(time.Second)
	press()
	clk.Step(time.Minute)
	press()
	got := writes(3)
	if got[0].GetVerb() != "create" || got[1].GetVerb() != "patch" || got[2].GetVerb() != "patch" {
		t.Fatalf("verbs = %s %s %s, want create patch patch", got[0].GetVerb(), got[1].GetVerb(), got[2].GetVerb())
	}
	l, _ := cs.EventsV1().Events("default").List(context.Background(), metav1.ListOptions{})
	if len(l.Items) != 1 {
		t.Fatalf("stored %d Events, want one with a series", len(l.Items))
	}
	s := l.Items[0].Series
	if s == nil || s.Count != 3 || !s.LastObservedTime.Time.Equal(clk.Now()) {
		t.Fatalf("series = %+v, want count 3 at %s", s, clk.Now())
	}
	// A different message is a different event; a repeat after the
	// window starts a new one.
	r.Record(core.Event{Reason: core.ReasonButtonPressed, Message: "top button pressed", Time: clk.Now()})
	clk.Step(SeriesWindow)
	press()
	got = writes(5)
	if got[3].GetVerb() != "create" || got[4].GetVerb() != "create" {
		t.Errorf("verbs = %s %s, want create create", got[3].GetVerb(), got[4].GetVerb())
	}
}

func TestRecorderTruncatesLongNotes(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	r, cs, writes := runRecorder(t, clk, 10)
	r.SetNode(testNode)
	long := strings.Repeat("é", 2000) // 4000 bytes: over the API server's 1 KiB
	r.Record(core.Event{Reason: ReasonInvalidAnnotation, Warning: true, Message: long, Time: clk.Now()})
	writes(1)
	l, _ := cs.EventsV1().Events("default").List(context.Background(), metav1.ListOptions{})
	if len(l.Items) != 1 {
		t.Fatalf("stored %d Events", len(l.Items))
	}
	note := l.Items[0].Note
	if len(note) > maxNoteBytes || !utf8.ValidString(note) || !strings.HasSuffix(note, "…") {
		t.Errorf("note has %d bytes, valid UTF-8 %v, ends %q", len(note), utf8.ValidString(note), note[len(note)-4:])
	}
}

func TestRecordNeverBlocks(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	// Not running: nothing drains the hand-over queue.
	r := New(Options{Client: fake.NewClientset().EventsV1().Events("default"), NodeName: "blade1", Capacity: 2, Clock: clk})
	r.SetNode(testNode)
	for i := range 5 {
		r.Record(core.Event{Reason: core.ReasonButtonPressed, Message: strings.Repeat("x", i+1), Time: clk.Now()})
	}
	if st := r.Stats(); st.Pending != 2 || st.Dropped != 3 {
		t.Errorf("stats = %+v, want 2 pending and 3 dropped", st)
	}
}
