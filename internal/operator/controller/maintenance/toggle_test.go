package maintenance

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"

	kbv1 "github.com/kubeblade/kubeblade/api/v1alpha1"
)

// TestToggleCollapsedInTheCache drives the watch's view (sawUpdate) and
// the reconcile by hand, which the envtest suite cannot: a "false" and a
// "true" written before the controller reconciles leave only "true" in its
// cache, on a Node still marked failed. The transition the watch saw must
// still end the old maintenance (uncordon, clear) so the next reconcile
// starts a new one — the retry docs/cluster-aware.md promises for a failed drain.
func TestToggleCollapsedInTheCache(t *testing.T) {
	failed := map[string]string{
		kbv1.AnnotationMaintenance:               "true",
		kbv1.AnnotationMaintenanceState:          kbv1.MaintenanceFailed,
		kbv1.AnnotationMaintenanceRequestedAt:    "2026-01-01T00:00:00Z",
		kbv1.AnnotationMaintenanceDrainStartedAt: "2026-01-01T00:00:01Z",
		kbv1.AnnotationMaintenanceCordoned:       "true",
	}
	with := func(v string) map[string]string {
		m := map[string]string{}
		for k, x := range failed {
			m[k] = x
		}
		if v == "" {
			delete(m, kbv1.AnnotationMaintenance)
		} else {
			m[kbv1.AnnotationMaintenance] = v
		}
		return m
	}
	cases := []struct {
		name string
		seen []string // the values of kubeblade.io/maintenance the watch saw, in order, after "true"
		// after the first reconcile of the Node (its cache shows "true")
		wantState  string
		wantCordon bool
		wantEvents []string
	}{
		{name: "nothing seen: a failed drain waits for a person", seen: nil,
			wantState: kbv1.MaintenanceFailed, wantCordon: true},
		{name: "false then true: ended, to be requested again", seen: []string{"false", "true"},
			wantState: "", wantCordon: false, wantEvents: []string{EventEnded}},
		{name: "removed then true: the same", seen: []string{"", "true"},
			wantState: "", wantCordon: false, wantEvents: []string{EventEnded}},
		{name: "an invalid value in between changes nothing", seen: []string{"yes", "true"},
			wantState: kbv1.MaintenanceFailed, wantCordon: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "blade-1", Annotations: failed}, Spec: corev1.NodeSpec{Unschedulable: true}}
			c := fake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(node).Build()
			rec := events.NewFakeRecorder(10)
			r := &Reconciler{Client: c, APIReader: c, Recorder: rec, Clock: clocktesting.NewFakeClock(time.Now()),
				wake: make(chan event.GenericEvent, 10)}

			prev := metaOf("blade-1", "1", failed)
			for i, v := range tc.seen {
				next := metaOf("blade-1", string(rune('2'+i)), with(v))
				r.sawUpdate(prev, next)
				prev = next
			}
			req := ctrl.Request{NamespacedName: client.ObjectKey{Name: "blade-1"}}
			if _, err := r.Reconcile(context.Background(), req); err != nil {
				t.Fatal(err)
			}
			got := &corev1.Node{}
			if err := c.Get(context.Background(), req.NamespacedName, got); err != nil {
				t.Fatal(err)
			}
			if st := got.Annotations[kbv1.AnnotationMaintenanceState]; st != tc.wantState || got.Spec.Unschedulable != tc.wantCordon {
				t.Errorf("state %q unschedulable %t, want %q %t", st, got.Spec.Unschedulable, tc.wantState, tc.wantCordon)
			}
			if diff := reasons(rec); strings.Join(diff, ",") != strings.Join(tc.wantEvents, ",") {
				t.Errorf("events %v, want %v", diff, tc.wantEvents)
			}
			if tc.wantState != "" {
				return
			}
			// The end's patch wakes the Node again: now a new request.
			if _, err := r.Reconcile(context.Background(), req); err != nil {
				t.Fatal(err)
			}
			if got := reasons(rec); strings.Join(got, ",") != EventRequested {
				t.Errorf("second reconcile: events %v, want [%s]", got, EventRequested)
			}
			if _, pending := r.ended.Load("blade-1"); pending {
				t.Error("the toggle's mark outlived the end it caused: it would end the new request too")
			}
		})
	}
}

func metaOf(name, rv string, ann map[string]string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: rv, Annotations: ann}}
}

func scheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := corev1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := kbv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// reasons drains the recorder: "Normal MaintenanceEnded ..." → reasons.
func reasons(rec *events.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			if f := strings.Fields(e); len(f) > 1 {
				out = append(out, f[1])
			}
		default:
			return out
		}
	}
}
