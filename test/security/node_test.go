package security

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbv1 "github.com/kubeblade/kubeblade/api/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/testenv"
)

var nodeSeq atomic.Int32

// seedNode creates a Node the way a kubelet, an installer and other
// controllers leave it: control-plane and node-restriction labels, foreign
// annotations and taints, addresses, capacity and a Ready condition. No
// BladeConfig of this suite selects it, so the operator leaves it alone.
func seedNode(t *testing.T) *corev1.Node {
	t.Helper()
	name := fmt.Sprintf("blade-%d", nodeSeq.Add(1))
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				"kubernetes.io/hostname":                name,
				"node-role.kubernetes.io/control-plane": "",
				"node-restriction.kubernetes.io/rack":   "r1",
				kbv1.LabelSoC:                           "bcm2712",
			},
			Annotations: map[string]string{
				"example.com/owner":     "ops",
				kbv1.AnnotationIdentify: "true",
			},
		},
		Spec: corev1.NodeSpec{
			PodCIDR:  "10.244.1.0/24",
			PodCIDRs: []string{"10.244.1.0/24"},
			Taints:   []corev1.Taint{{Key: "dedicated", Value: "storage", Effect: corev1.TaintEffectNoSchedule}},
		},
	}
	if err := admin.Create(ctx(t), n); err != nil {
		t.Fatal(err)
	}
	n.Status = corev1.NodeStatus{
		Addresses:   []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}, {Type: corev1.NodeHostName, Address: name}},
		Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi")},
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi")},
		Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}},
	}
	if err := admin.Status().Update(ctx(t), n); err != nil {
		t.Fatal(err)
	}
	return n
}

func getNode(t *testing.T, name string) *corev1.Node {
	t.Helper()
	n := &corev1.Node{}
	if err := admin.Get(ctx(t), client.ObjectKey{Name: name}, n); err != nil {
		t.Fatal(err)
	}
	return n
}

type nodeWrite func(t *testing.T, c client.Client, n *corev1.Node) error

func mergePatch(body string, status bool) nodeWrite {
	return patch(types.MergePatchType, body, status)
}

func patch(pt types.PatchType, body string, status bool) nodeWrite {
	return func(t *testing.T, c client.Client, n *corev1.Node) error {
		obj := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name}}
		p := client.RawPatch(pt, []byte(body))
		var opts []client.SubResourcePatchOption
		var mainOpts []client.PatchOption
		if pt == types.ApplyPatchType {
			opts = append(opts, client.FieldOwner("kubeblade-agent"), client.ForceOwnership)
			mainOpts = append(mainOpts, client.FieldOwner("kubeblade-agent"), client.ForceOwnership)
		}
		if status {
			return c.Status().Patch(ctx(t), obj, p, opts...)
		}
		return c.Patch(ctx(t), obj, p, mainOpts...)
	}
}

// taintPatch adds or removes the thermal-critical taint the way
// internal/kubeagent does: the whole list in a merge patch guarded by the
// resourceVersion.
func taintPatch(on bool) nodeWrite {
	return func(t *testing.T, c client.Client, n *corev1.Node) error {
		cur := getNode(t, n.Name)
		var taints []corev1.Taint
		for _, x := range cur.Spec.Taints {
			if x.Key != kbv1.TaintThermalCritical {
				taints = append(taints, x)
			}
		}
		if on {
			now := metav1.Now()
			taints = append(taints, corev1.Taint{Key: kbv1.TaintThermalCritical, Effect: corev1.TaintEffectNoSchedule, TimeAdded: &now})
		}
		body, err := json.Marshal(map[string]any{
			"metadata": map[string]any{"resourceVersion": cur.ResourceVersion},
			"spec":     map[string]any{"taints": taints},
		})
		if err != nil {
			t.Fatal(err)
		}
		err = c.Patch(ctx(t), cur, client.RawPatch(types.MergePatchType, body))
		if apierrors.IsConflict(err) {
			// Someone else changed the Node meanwhile; the agent reads
			// it again and retries, and so does this.
			return taintPatch(on)(t, c, n)
		}
		return err
	}
}

// TestAgentNodeFields: the agent of a Node may change only kubeblade's
// fact labels, annotations under kubeblade.io/, its condition and its
// taint. Each attack leaves the Node exactly as it was.
func TestAgentNodeFields(t *testing.T) {
	testenv.Need(t)
	attacks := map[string]struct {
		write nodeWrite
		say   string
	}{
		"add a foreign label":              {mergePatch(`{"metadata":{"labels":{"evil.example/x":"1"}}}`, false), "evil.example/x"},
		"remove the control-plane label":   {mergePatch(`{"metadata":{"labels":{"node-role.kubernetes.io/control-plane":null}}}`, false), "node-role.kubernetes.io/control-plane"},
		"change a node-restriction label":  {mergePatch(`{"metadata":{"labels":{"node-restriction.kubernetes.io/rack":"r9"}}}`, false), "node-restriction.kubernetes.io/rack"},
		"change the hostname label":        {mergePatch(`{"metadata":{"labels":{"kubernetes.io/hostname":"blade-x"}}}`, false), "kubernetes.io/hostname"},
		"choose its own BladeConfig":       {mergePatch(`{"metadata":{"labels":{"kubeblade.io/config":"other"}}}`, false), "kubeblade.io/config"},
		"change a foreign annotation":      {mergePatch(`{"metadata":{"annotations":{"example.com/owner":"me"}}}`, false), "example.com/owner"},
		"add a foreign annotation":         {mergePatch(`{"metadata":{"annotations":{"evil.example/x":"1"}}}`, false), "evil.example/x"},
		"remove a foreign taint":           {mergePatch(`{"spec":{"taints":null}}`, false), "spec.taints"},
		"add a foreign taint":              {mergePatch(`{"spec":{"taints":[{"key":"dedicated","value":"storage","effect":"NoSchedule"},{"key":"evil","effect":"NoExecute"}]}}`, false), "spec.taints"},
		"evict with its own taint key":     {mergePatch(`{"spec":{"taints":[{"key":"dedicated","value":"storage","effect":"NoSchedule"},{"key":"kubeblade.io/thermal-critical","effect":"NoExecute"}]}}`, false), "spec.taints"},
		"cordon":                           {mergePatch(`{"spec":{"unschedulable":true}}`, false), "spec.unschedulable"},
		"set the provider ID":              {mergePatch(`{"spec":{"providerID":"talos://other"}}`, false), "spec.providerID"},
		"add a finalizer":                  {mergePatch(`{"metadata":{"finalizers":["evil.example/keep"]}}`, false), "metadata.finalizers"},
		"add an owner reference":           {mergePatch(`{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"Namespace","name":"default","uid":"00000000-0000-0000-0000-000000000001"}]}}`, false), "metadata.ownerReferences"},
		"claim another blade's address":    {mergePatch(`{"status":{"addresses":[{"type":"InternalIP","address":"10.0.0.2"}]}}`, true), "status.addresses"},
		"add an address":                   {patch(types.StrategicMergePatchType, `{"status":{"addresses":[{"type":"ExternalIP","address":"192.0.2.7"}]}}`, true), "status.addresses"},
		"change the capacity":              {mergePatch(`{"status":{"capacity":{"cpu":"64"}}}`, true), "status.capacity"},
		"mark the Node not ready":          {patch(types.StrategicMergePatchType, `{"status":{"conditions":[{"type":"Ready","status":"False","reason":"Evil"}]}}`, true), "status.conditions"},
		"add a foreign condition":          {patch(types.StrategicMergePatchType, `{"status":{"conditions":[{"type":"DiskPressure","status":"True","reason":"Evil"}]}}`, true), "status.conditions"},
		"change the node info":             {mergePatch(`{"status":{"nodeInfo":{"kubeletVersion":"v0.0.0"}}}`, true), "status.nodeInfo"},
		"own label but also a foreign one": {mergePatch(`{"metadata":{"labels":{"kubeblade.io/soc":"bcm2711","evil.example/x":"1"}}}`, false), "evil.example/x"},
	}
	for name, a := range attacks {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			n := seedNode(t)
			agent := as(testenv.AsAgent(env.Config, n.Name, n.UID))
			before := getNode(t, n.Name)
			refused(t, name, a.write(t, agent, n), "kubeblade-agent-own-node", n.Name, a.say)
			if diff := cmp.Diff(before, getNode(t, n.Name)); diff != "" {
				t.Errorf("the refused write changed the Node (-before +after):\n%s", diff)
			}
			// The same write by an administrator is not the policy's business.
			allowed(t, "the same write by an administrator", a.write(t, admin, n))
		})
	}
}

// TestAgentNodeOwnFields: everything the agent writes (internal/kubeagent)
// and the cluster-aware maintenance annotation still work under the policy.
func TestAgentNodeOwnFields(t *testing.T) {
	testenv.Need(t)
	n := seedNode(t)
	agent := as(testenv.AsAgent(env.Config, n.Name, n.UID))
	steps := []struct {
		name  string
		write nodeWrite
		check func(n *corev1.Node) bool
	}{
		{"apply the fact labels", patch(types.ApplyPatchType,
			`{"apiVersion":"v1","kind":"Node","metadata":{"name":"`+n.Name+`","labels":{"kubeblade.io/blade":"true","kubeblade.io/soc":"bcm2711","kubeblade.io/fan-unit":"smart","kubeblade.io/power":"poe-802.3at"}}}`, false),
			func(n *corev1.Node) bool {
				return n.Labels[kbv1.LabelFanUnit] == "smart" && n.Labels[kbv1.LabelSoC] == "bcm2711"
			}},
		{"remove a fact label", mergePatch(`{"metadata":{"labels":{"kubeblade.io/power":null}}}`, false),
			func(n *corev1.Node) bool { _, has := n.Labels[kbv1.LabelPower]; return !has }},
		{"remove the identify annotation the button confirmed", patch(types.JSONPatchType,
			`[{"op":"test","path":"/metadata/annotations/kubeblade.io~1identify","value":"true"},{"op":"remove","path":"/metadata/annotations/kubeblade.io~1identify"}]`, false),
			func(n *corev1.Node) bool { _, has := n.Annotations[kbv1.AnnotationIdentify]; return !has }},
		{"set the BladeThermalCritical condition", patch(types.StrategicMergePatchType,
			`{"status":{"conditions":[{"type":"BladeThermalCritical","status":"True","reason":"CriticalTemperature","message":"hot"}]}}`, true),
			func(n *corev1.Node) bool { return condition(n) == corev1.ConditionTrue }},
		{"add the thermal-critical taint", taintPatch(true),
			func(n *corev1.Node) bool { return hasOwnTaint(n) }},
		{"remove the thermal-critical taint", taintPatch(false),
			func(n *corev1.Node) bool { return !hasOwnTaint(n) }},
		{"clear the BladeThermalCritical condition", patch(types.StrategicMergePatchType,
			`{"status":{"conditions":[{"type":"BladeThermalCritical","status":"False","reason":"TemperatureNormal","message":"ok"}]}}`, true),
			func(n *corev1.Node) bool { return condition(n) == corev1.ConditionFalse }},
		// Last: the operator's maintenance controller acts on it.
		{"request maintenance from the button", mergePatch(`{"metadata":{"annotations":{"kubeblade.io/maintenance":"true"}}}`, false),
			func(n *corev1.Node) bool { return n.Annotations["kubeblade.io/maintenance"] == "true" }},
	}
	for _, s := range steps {
		if err := s.write(t, agent, n); err != nil {
			t.Fatalf("%s: refused: %v", s.name, err)
		}
		if got := getNode(t, n.Name); !s.check(got) {
			t.Errorf("%s: not in effect: labels %v, annotations %v, taints %v, conditions %v", s.name, got.Labels, got.Annotations, got.Spec.Taints, got.Status.Conditions)
		}
	}
	after := getNode(t, n.Name)
	if after.Labels["node-role.kubernetes.io/control-plane"] != "" || after.Labels["node-restriction.kubernetes.io/rack"] != "r1" ||
		after.Annotations["example.com/owner"] != "ops" || after.Spec.Taints[0].Key != "dedicated" {
		t.Errorf("foreign fields changed along the way: %v %v %v", after.Labels, after.Annotations, after.Spec.Taints)
	}
}

// TestAgentNodeIdentity: the token decides which Node is the agent's, by
// name and UID; without the node extras nothing is allowed.
func TestAgentNodeIdentity(t *testing.T) {
	testenv.Need(t)
	own, other := seedNode(t), seedNode(t)
	label := mergePatch(`{"metadata":{"labels":{"kubeblade.io/soc":"bcm2711"}}}`, false)
	refused(t, "another blade's Node", label(t, as(testenv.AsAgent(env.Config, own.Name, own.UID)), other),
		"kubeblade-agent-own-node", "its own Node ("+own.Name+")")
	refused(t, "its Node name with another Node's UID", label(t, as(testenv.AsAgent(env.Config, own.Name, other.UID)), own),
		"kubeblade-agent-own-node", "with another UID")
	noUID := testenv.AsAgent(env.Config, own.Name, own.UID)
	delete(noUID.Impersonate.Extra, testenv.NodeUIDExtra)
	refused(t, "a token without the node UID", label(t, as(noUID), own), "pod-bound ServiceAccount token")
	noNode := testenv.AsAgent(env.Config, own.Name, own.UID)
	noNode.Impersonate.Extra = nil
	refused(t, "a token without node extras", label(t, as(noNode), own), "pod-bound ServiceAccount token")
	refused(t, "deleting its own Node", as(testenv.AsAgent(env.Config, own.Name, own.UID)).Delete(ctx(t), own))
	allowed(t, "its own Node", label(t, as(testenv.AsAgent(env.Config, own.Name, own.UID)), own))
}

// TestNodePolicyCoversEveryField guards the Node policies against API
// growth: every field of Node metadata, spec and status is either compared
// by the policy or named here as handled another way. A Kubernetes upgrade
// that adds a field fails this test until the policies compare it.
func TestNodePolicyCoversEveryField(t *testing.T) {
	for file, own := range map[string]map[string]string{
		"agent-own-node.yaml": nil,
		"operator-nodes.yaml": {"spec.unschedulable": "the maintenance controller's cordon"},
	} {
		t.Run(file, func(t *testing.T) {
			raw := readPolicyFile(t, file)
			handled := map[string]string{
				"metadata.name":            "compared with the token's node name",
				"metadata.labels":          "foreignLabels",
				"metadata.annotations":     "foreignAnnotations",
				"metadata.resourceVersion": "set by the API server",
				"metadata.generation":      "set by the API server",
				"metadata.managedFields":   "bookkeeping of field owners",
				"metadata.clusterName":     "not served",
			}
			for k, v := range own {
				handled[k] = v
			}
			for prefix, typ := range map[string]reflect.Type{
				"metadata": reflect.TypeOf(metav1.ObjectMeta{}),
				"spec":     reflect.TypeOf(corev1.NodeSpec{}),
				"status":   reflect.TypeOf(corev1.NodeStatus{}),
			} {
				for i := 0; i < typ.NumField(); i++ {
					tag, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
					if tag == "" || tag == "-" {
						continue
					}
					field := prefix + "." + tag
					if _, ok := handled[field]; ok {
						if strings.Contains(raw, "'"+field+"'") && own[field] != "" {
							t.Errorf("config/admission/%s compares %s, which it should let change (%s)", file, field, own[field])
						}
						continue
					}
					if !strings.Contains(raw, "'"+field+"'") {
						t.Errorf("config/admission/%s does not compare %s: it could change", file, field)
					}
				}
			}
		})
	}
}

func hasOwnTaint(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == kbv1.TaintThermalCritical && t.Effect == corev1.TaintEffectNoSchedule {
			return true
		}
	}
	return false
}

func condition(n *corev1.Node) corev1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == kbv1.NodeConditionThermalCritical {
			return c.Status
		}
	}
	return ""
}
