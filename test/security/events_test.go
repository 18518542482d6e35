package security

import (
	"fmt"
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
