package security

import (
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbv1 "github.com/kubeblade/kubeblade/api/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/testenv"
)

func applyBlade(t *testing.T, c client.Client, name string, body map[string]any, subresource string) error {
	t.Helper()
	body["apiVersion"], body["kind"] = kbv1.GroupVersion.String(), "Blade"
	meta, _ := body["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
		body["metadata"] = meta
	}
	meta["name"] = name
	raw, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	b := &kbv1.Blade{ObjectMeta: metav1.ObjectMeta{Name: name}}
	p := client.RawPatch(types.ApplyPatchType, raw)
	if subresource == "status" {
		return c.Status().Patch(ctx(t), b, p, client.FieldOwner("kubeblade-agent"), client.ForceOwnership)
	}
	return c.Patch(ctx(t), b, p, client.FieldOwner("kubeblade-agent"), client.ForceOwnership)
}

func ownerRef(n *corev1.Node) map[string]any {
	return map[string]any{"apiVersion": "v1", "kind": "Node", "name": n.Name, "uid": string(n.UID)}
}

// TestAgentBlade: the agent writes the Blade named like its Node, owned by
// that Node, with status.nodeName its Node — as internal/kubeagent does —
// and nothing else.
func TestAgentBlade(t *testing.T) {
	testenv.Need(t)
	own, other := seedNode(t), seedNode(t)
	agent := as(testenv.AsAgent(env.Config, own.Name, own.UID))

	// What internal/kubeagent writes: the Blade owned by its Node, then
	// its status.
	allowed(t, "creating its Blade owned by its Node", applyBlade(t, agent, own.Name,
		map[string]any{"metadata": map[string]any{"ownerReferences": []any{ownerRef(own)}}}, ""))
	allowed(t, "reporting its status", applyBlade(t, agent, own.Name,
		map[string]any{"status": map[string]any{"nodeName": own.Name, "state": "Idle", "fan": map[string]any{"percent": 40, "mode": "auto"}}}, "status"))

	if err := admin.Create(ctx(t), &kbv1.Blade{ObjectMeta: metav1.ObjectMeta{Name: other.Name}}); err != nil {
		t.Fatal(err)
	}
	attacks := map[string]struct {
		err error
		say string
	}{
		"create another blade's Blade": {agent.Create(ctx(t), &kbv1.Blade{ObjectMeta: metav1.ObjectMeta{Name: "x-" + other.Name}}), "its own Blade (" + own.Name + ")"},
		"report another blade's status": {applyBlade(t, agent, other.Name,
			map[string]any{"status": map[string]any{"state": "Idle"}}, "status"), "its own Blade (" + own.Name + ")"},
		"name another Node in its status": {applyBlade(t, agent, own.Name,
			map[string]any{"status": map[string]any{"nodeName": other.Name}}, "status"), "status.nodeName"},
		"be owned by another Node": {applyBlade(t, agent, own.Name,
			map[string]any{"metadata": map[string]any{"ownerReferences": []any{ownerRef(own), ownerRef(other)}}}, ""), "owned by its own Node"},
		"be owned by a Node of its name with another UID": {applyBlade(t, agent, own.Name,
			map[string]any{"metadata": map[string]any{"ownerReferences": []any{ownerRef(own), map[string]any{"apiVersion": "v1", "kind": "Node", "name": own.Name, "uid": string(other.UID)}}}}, ""), "owned by its own Node"},
		"label its Blade": {agent.Patch(ctx(t), &kbv1.Blade{ObjectMeta: metav1.ObjectMeta{Name: own.Name}},
			client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"evil.example/x":"1"}}}`))), "labels, annotations or finalizers"},
		"keep its Blade with a finalizer": {agent.Patch(ctx(t), &kbv1.Blade{ObjectMeta: metav1.ObjectMeta{Name: own.Name}},
			client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":["evil.example/keep"]}}`))), "labels, annotations or finalizers"},
		"drop the Node as owner": {agent.Patch(ctx(t), &kbv1.Blade{ObjectMeta: metav1.ObjectMeta{Name: own.Name}},
			client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"ownerReferences":null}}`))), "owners may not be removed"},
		"delete its Blade": {agent.Delete(ctx(t), &kbv1.Blade{ObjectMeta: metav1.ObjectMeta{Name: own.Name}}), ""},
	}
	for name, a := range attacks {
		refused(t, name, a.err, a.say)
	}
	b := &kbv1.Blade{}
	if err := admin.Get(ctx(t), client.ObjectKey{Name: own.Name}, b); err != nil {
		t.Fatal(err)
	}
	if b.Status.NodeName != own.Name || len(b.OwnerReferences) != 1 || b.OwnerReferences[0].UID != own.UID || len(b.Labels)+len(b.Finalizers) != 0 {
		t.Errorf("the refused writes changed the Blade: %+v %+v", b.ObjectMeta, b.Status)
	}
}
