package operator_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbv1 "github.com/kubeblade/kubeblade/api/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/operator"
	"github.com/kubeblade/kubeblade/internal/operator/optest"
	"github.com/kubeblade/kubeblade/internal/testwait"
)

// TestAdmissionPolicyOwnNode proves config/admission: the agent of blade-1
// may change blade-1 and is refused on blade-2, by the API server.
func TestAdmissionPolicyOwnNode(t *testing.T) {
	e := suite.Need(t)
	k8s := e.Client
	e.WithAgentRBAC(t)
	e.ApplyYAML(t, "config/admission/agent-own-node.yaml")
	e.CreateAll(t, optest.Node("blade-1", nil), optest.Node("blade-2", nil))
	agent, err := client.New(e.Impersonate("blade-1"), client.Options{Scheme: operator.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	label := func(name string) error {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
		return agent.Patch(optest.Ctx(t), n, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"kubeblade.io/soc":"simulated"}}}`)))
	}
	// The policy is compiled and loaded asynchronously; it is in force once
	// the foreign node is refused.
	testwait.Eventually(t, optest.Timeout, "the policy to refuse blade-2", func(context.Context) (bool, string) {
		err := label("blade-2")
		if err == nil {
			return false, "allowed"
		}
		return strings.Contains(err.Error(), "kubeblade-agent-own-node"), err.Error()
	})
	if err := label("blade-1"); err != nil {
		t.Errorf("the agent of blade-1 may not label blade-1: %v", err)
	}
	status := func(name string) error {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
		return agent.Status().Patch(optest.Ctx(t), n, client.RawPatch(types.StrategicMergePatchType,
			[]byte(`{"status":{"conditions":[{"type":"BladeThermalCritical","status":"False","reason":"Normal"}]}}`)))
	}
	if err := status("blade-1"); err != nil {
		t.Errorf("node status of blade-1: %v", err)
	}
	if err := status("blade-2"); err == nil || !strings.Contains(err.Error(), "denied") {
		t.Errorf("node status of blade-2 allowed: %v", err)
	}

	for name, wantOK := range map[string]bool{"blade-1": true, "blade-2": false} {
		err := agent.Create(optest.Ctx(t), &kbv1.Blade{ObjectMeta: metav1.ObjectMeta{Name: name}})
		if (err == nil) != wantOK {
			t.Errorf("creating Blade %s: err %v, want allowed=%v", name, err, wantOK)
		}
	}
	// A Blade someone else created for blade-2 stays out of reach too.
	if err := k8s.Create(optest.Ctx(t), &kbv1.Blade{ObjectMeta: metav1.ObjectMeta{Name: "blade-2"}}); err != nil {
		t.Fatal(err)
	}
	b := &kbv1.Blade{ObjectMeta: metav1.ObjectMeta{Name: "blade-2"}}
	if err := agent.Status().Patch(optest.Ctx(t), b, client.RawPatch(types.MergePatchType, []byte(`{"status":{"state":"Idle"}}`))); err == nil {
		t.Error("the agent of blade-1 patched the status of Blade blade-2")
	}
	b.Name = "blade-1"
	if err := agent.Status().Patch(optest.Ctx(t), b, client.RawPatch(types.MergePatchType, []byte(`{"status":{"state":"Idle"}}`))); err != nil {
		t.Errorf("the agent of blade-1 may not report its own Blade: %v", err)
	}

	for name, wantOK := range map[string]bool{"blade-1": true, "blade-2": false} {
		ev := &eventsv1.Event{
			ObjectMeta:          metav1.ObjectMeta{Name: "vap-" + name, Namespace: metav1.NamespaceDefault},
			EventTime:           metav1.NowMicro(),
			ReportingController: "kubeblade.io/agent", ReportingInstance: "blade-1",
			Action: "Press", Reason: "ButtonPressed", Type: corev1.EventTypeNormal,
			Regarding: corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: name},
		}
		err := agent.Create(optest.Ctx(t), ev)
		if (err == nil) != wantOK {
			t.Errorf("event regarding %s: err %v, want allowed=%v", name, err, wantOK)
		}
	}

	// Anyone else is not subject to the policy.
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "blade-2"}}
	if err := k8s.Patch(optest.Ctx(t), n, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"kubeblade.io/soc":"simulated"}}}`))); err != nil {
		t.Errorf("the admin was refused: %v", err)
	}
}
