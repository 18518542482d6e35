package security

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeblade/kubeblade/internal/testenv"
)

var eventSeq atomic.Int32

// agentEvent is an Event as internal/kubeevents writes it.
func agentEvent(n *corev1.Node) *eventsv1.Event {
	return &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: fmt.Sprintf("%s.%d", n.Name, eventSeq.Add(1)), Namespace: metav1.NamespaceDefault},
		EventTime:           metav1.NowMicro(),
		ReportingController: "kubeblade.io/agent",
		ReportingInstance:   n.Name,
		Action:              "PressButton",
		Reason:              "ButtonPressed",
		Type:                corev1.EventTypeNormal,
		Regarding:           corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: n.Name, UID: n.UID},
	}
}

// TestAgentEvents: the agent writes Events about its own Node (by name and
// UID), as kubeblade.io/agent from that Node, in default; anything else is
// refused, also as a patch of someone else's Event.
func TestAgentEvents(t *testing.T) {
	testenv.Need(t)
	own, other := seedNode(t), seedNode(t)
	agent := as(testenv.AsAgent(env.Config, own.Name, own.UID))

	ev := agentEvent(own)
	allowed(t, "an Event about its Node", agent.Create(ctx(t), ev))
	allowed(t, "counting a series on it", agent.Patch(ctx(t), ev, client.RawPatch(types.StrategicMergePatchType,
		[]byte(`{"series":{"count":2,"lastObservedTime":"`+metav1.NowMicro().UTC().Format("2006-01-02T15:04:05.000000Z")+`"}}`))))

	attacks := map[string]func(e *eventsv1.Event){
		"about another Node":                   func(e *eventsv1.Event) { e.Regarding.Name, e.Regarding.UID = other.Name, other.UID },
		"about its Node name with another UID": func(e *eventsv1.Event) { e.Regarding.UID = other.UID },
		"without the Node's UID":               func(e *eventsv1.Event) { e.Regarding.UID = "" },
		"about a Pod": func(e *eventsv1.Event) {
			e.Regarding = corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: "default", Name: own.Name}
		},
		"as another controller": func(e *eventsv1.Event) { e.ReportingController = "kubelet" },
		"from another instance": func(e *eventsv1.Event) { e.ReportingInstance = other.Name },
		"with a related object": func(e *eventsv1.Event) {
			e.Related = &corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: other.Name}
		},
		"in kube-system": func(e *eventsv1.Event) { e.Namespace = "kube-system" },
	}
	for name, mutate := range attacks {
		e := agentEvent(own)
		mutate(e)
		refused(t, name, agent.Create(ctx(t), e), "kubeblade-agent-events")
	}

	// Someone else's Event about the agent's own Node stays theirs.
	foreign := agentEvent(own)
	foreign.ReportingController, foreign.ReportingInstance = "kubelet", own.Name
	if err := admin.Create(ctx(t), foreign); err != nil {
		t.Fatal(err)
	}
	refused(t, "counting a series on the kubelet's Event", agent.Patch(ctx(t), foreign, client.RawPatch(types.MergePatchType,
		[]byte(`{"series":{"count":99,"lastObservedTime":"`+metav1.NowMicro().UTC().Format("2006-01-02T15:04:05.000000Z")+`"}}`))), "kubeblade-agent-events")
	refused(t, "deleting its own Event", agent.Delete(ctx(t), ev))
}

// TestAgentEventSize (issue 31, finding 7): an agent's Event is bounded in
// size. On 8f44781 an Event with 190 KB of annotations was accepted. Every
// field nothing else bounds is refused on create and on every later
// write; the agent's own Events (internal/kubeevents) still go through.
func TestAgentEventSize(t *testing.T) {
	testenv.Need(t)
	own := seedNode(t)
	agent := as(testenv.AsAgent(env.Config, own.Name, own.UID))
	big := strings.Repeat("x", 190*1024)
	attacks := map[string]func(e *eventsv1.Event){
		"190 KB of annotations": func(e *eventsv1.Event) { e.Annotations = map[string]string{"example.com/padding": big} },
		"190 KB of labels": func(e *eventsv1.Event) {
			e.Labels = map[string]string{}
			for i := 0; i < 3000; i++ {
				e.Labels[fmt.Sprintf("example.com/l%d", i)] = strings.Repeat("v", 63)
			}
		},
		"finalizers": func(e *eventsv1.Event) { e.Finalizers = []string{"example.com/keep"} },
		"owner references": func(e *eventsv1.Event) {
			e.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: own.Name, UID: own.UID}}
		},
		"a 100 KB field path":       func(e *eventsv1.Event) { e.Regarding.FieldPath = big[:100*1024] },
		"a 100 KB resource version": func(e *eventsv1.Event) { e.Regarding.ResourceVersion = big[:100*1024] },
		"a namespace for the Node":  func(e *eventsv1.Event) { e.Regarding.Namespace = "default" },
		"managed fields padding": func(e *eventsv1.Event) {
			for i := 0; i < 50; i++ {
				e.ManagedFields = append(e.ManagedFields, metav1.ManagedFieldsEntry{Manager: fmt.Sprintf("padding-%03d-%s", i, strings.Repeat("m", 100)),
					Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "events.k8s.io/v1", FieldsType: "FieldsV1",
					FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:note":{}}`)}, Time: ptrTime(metav1.Now())})
			}
		},
	}
	for name, mutate := range attacks {
		t.Run(name, func(t *testing.T) {
			e := agentEvent(own)
			mutate(e)
			refused(t, "creating an Event with "+name, agent.Create(ctx(t), e), "kubeblade-agent-events")
			refused(t, "dry-run", agent.Create(ctx(t), e, client.DryRunAll), "kubeblade-agent-events")
		})
	}
	// Growing the agent's own Event afterwards, every way a client can.
	ev := agentEvent(own)
	allowed(t, "an Event about its Node", agent.Create(ctx(t), ev))
	for how, p := range map[string]client.Patch{
		"merge patch":           client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"example.com/padding":"`+big+`"}}}`)),
		"strategic merge patch": client.RawPatch(types.StrategicMergePatchType, []byte(`{"metadata":{"annotations":{"example.com/padding":"`+big+`"}}}`)),
		"JSON patch":            client.RawPatch(types.JSONPatchType, []byte(`[{"op":"add","path":"/metadata/labels","value":{"example.com/x":"1"}}]`)),
		"server-side apply": client.RawPatch(types.ApplyPatchType, []byte(`{"apiVersion":"events.k8s.io/v1","kind":"Event","metadata":{"name":"`+ev.Name+
			`","namespace":"default","annotations":{"example.com/padding":"`+big+`"}}}`)),
	} {
		var opts []client.PatchOption
		if how == "server-side apply" {
			opts = append(opts, client.FieldOwner("kubeblade-agent"), client.ForceOwnership)
		}
		refused(t, how+" growing its Event", agent.Patch(ctx(t), ev.DeepCopy(), p, opts...), "kubeblade-agent-events")
	}
	cur := &eventsv1.Event{}
	if err := admin.Get(ctx(t), client.ObjectKeyFromObject(ev), cur); err != nil {
		t.Fatal(err)
	}
	cur.Annotations = map[string]string{"example.com/padding": big}
	// RBAC grants the agent no update on Events: refused before the policy.
	refused(t, "PUT growing its Event", agent.Update(ctx(t), cur))
	allowed(t, "counting a series on it", agent.Patch(ctx(t), ev, client.RawPatch(types.StrategicMergePatchType,
		[]byte(`{"series":{"count":2,"lastObservedTime":"`+metav1.NowMicro().UTC().Format("2006-01-02T15:04:05.000000Z")+`"}}`))))
	if err := admin.Get(ctx(t), client.ObjectKeyFromObject(ev), cur); err != nil {
		t.Fatal(err)
	}
	if len(cur.Annotations)+len(cur.Labels) != 0 {
		t.Errorf("the refused writes grew the Event: %d annotations, %d labels", len(cur.Annotations), len(cur.Labels))
	}
}

func ptrTime(t metav1.Time) *metav1.Time { return &t }
