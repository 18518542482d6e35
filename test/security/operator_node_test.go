package security

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbv1 "github.com/kubeblade/kubeblade/api/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/operator/controller/assignment"
	"github.com/kubeblade/kubeblade/internal/operator/controller/maintenance"
	"github.com/kubeblade/kubeblade/internal/operator/nodemeta"
	"github.com/kubeblade/kubeblade/internal/operator/uninstall"
	"github.com/kubeblade/kubeblade/internal/testenv"
)

const nodePolicy = "kubeblade-operator-nodes"

// TestOperatorNodeFields: the operator's identity may change only the
// kubeblade.io/config label, kubeblade.io/ annotations and the cordon of a
// Node. Each attack leaves the Node exactly as it was; the same write by an
// administrator is not the policy's business.
func TestOperatorNodeFields(t *testing.T) {
	testenv.Need(t)
	op := as(operatorConfig())
	attacks := map[string]struct {
		write nodeWrite
		say   string
	}{
		"add a foreign label":             {mergePatch(`{"metadata":{"labels":{"evil.example/x":"1"}}}`, false), "evil.example/x"},
		"remove the control-plane label":  {mergePatch(`{"metadata":{"labels":{"node-role.kubernetes.io/control-plane":null}}}`, false), "node-role.kubernetes.io/control-plane"},
		"change a node-restriction label": {mergePatch(`{"metadata":{"labels":{"node-restriction.kubernetes.io/rack":"r9"}}}`, false), "node-restriction.kubernetes.io/rack"},
		"change an agent's fact label":    {mergePatch(`{"metadata":{"labels":{"kubeblade.io/soc":"bcm2711"}}}`, false), "kubeblade.io/soc"},
		"change a foreign annotation":     {mergePatch(`{"metadata":{"annotations":{"example.com/owner":"me"}}}`, false), "example.com/owner"},
		"remove a foreign taint":          {mergePatch(`{"spec":{"taints":null}}`, false), "spec.taints"},
		"add a NoExecute taint":           {mergePatch(`{"spec":{"taints":[{"key":"dedicated","value":"storage","effect":"NoSchedule"},{"key":"evil","effect":"NoExecute"}]}}`, false), "spec.taints"},
		"add the agent's thermal taint":   {taintPatch(true), "spec.taints"},
		"set the provider ID":             {mergePatch(`{"spec":{"providerID":"talos://other"}}`, false), "spec.providerID"},
		"add a finalizer":                 {mergePatch(`{"metadata":{"finalizers":["evil.example/keep"]}}`, false), "metadata.finalizers"},
		"add an owner reference": {mergePatch(`{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"Namespace","name":"default","uid":"00000000-0000-0000-0000-000000000001"}]}}`, false),
			"metadata.ownerReferences"},
		"its config label but also a foreign one": {mergePatch(`{"metadata":{"labels":{"kubeblade.io/config":"gold","evil.example/x":"1"}}}`, false), "evil.example/x"},
		"cordon and taint at once":                {mergePatch(`{"spec":{"unschedulable":true,"taints":[{"key":"evil","effect":"NoExecute"}]}}`, false), "spec.taints"},
	}
	for name, a := range attacks {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			n := seedNode(t)
			before := getNode(t, n.Name)
			refused(t, name, a.write(t, op, n), nodePolicy, n.Name, a.say)
			if diff := cmp.Diff(before, getNode(t, n.Name)); diff != "" {
				t.Errorf("the refused write changed the Node (-before +after):\n%s", diff)
			}
			allowed(t, "the same write by an administrator", a.write(t, admin, n))
		})
	}
	// RBAC refuses these already; the policy would too.
	n := seedNode(t)
	refused(t, "creating a Node", op.Create(ctx(t), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name + "-new"}}))
	refused(t, "deleting a Node", op.Delete(ctx(t), n))
}

// TestOperatorNodeOwnFields: the Node writes of the operator's controllers,
// sent as they send them, pass the policy: the assignment controller's
// label patch, the finalizer's guarded removal, the maintenance
// controller's cordon with its state annotations and the uncordon.
func TestOperatorNodeOwnFields(t *testing.T) {
	testenv.Need(t)
	op := as(operatorConfig())
	n := seedNode(t)
	before := getNode(t, n.Name)
	node := nodemeta.Node()
	node.Name = n.Name
	// As the maintenance controller's patchAnnotations sends it; the
	// Node it returns is the one the write left.
	maintenancePatch := func(ann map[string]any, unschedulable bool) (*corev1.Node, error) {
		written := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name}}
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			body, err := json.Marshal(map[string]any{
				"metadata": map[string]any{"annotations": ann, "resourceVersion": getNode(t, n.Name).ResourceVersion},
				"spec":     map[string]any{"unschedulable": unschedulable},
			})
			if err != nil {
				t.Fatal(err)
			}
			return op.Patch(ctx(t), written, client.RawPatch(types.MergePatchType, body), client.FieldOwner(maintenance.FieldManager))
		})
		return written, err
	}
	allowed(t, "assigning the Node to a BladeConfig", op.Patch(ctx(t), node,
		client.RawPatch(types.MergePatchType, nodemeta.LabelPatch(kbv1.LabelConfig, "gold")), client.FieldOwner(assignment.FieldManager)))
	allowed(t, "moving it to another", op.Patch(ctx(t), node,
		client.RawPatch(types.MergePatchType, nodemeta.LabelPatch(kbv1.LabelConfig, "silver")), client.FieldOwner(assignment.FieldManager)))
	allowed(t, "the finalizer taking the label back", nodemeta.RemoveLabelIf(ctx(t), op, n.Name, kbv1.LabelConfig, "silver"))
	// The maintenance controller may act on the Node meanwhile (it ends a
	// maintenance nobody asked for), so the writes are checked by what
	// each left.
	cordoned, err := maintenancePatch(map[string]any{
		kbv1.AnnotationMaintenanceState: kbv1.MaintenanceDraining, kbv1.AnnotationMaintenanceCordoned: "true",
		kbv1.AnnotationMaintenanceDrainStartedAt: "2026-01-01T00:00:00Z"}, true)
	allowed(t, "cordoning for maintenance", err)
	if err == nil && (!cordoned.Spec.Unschedulable || cordoned.Annotations[kbv1.AnnotationMaintenanceState] != kbv1.MaintenanceDraining) {
		t.Errorf("the cordon is not in effect: unschedulable %v, annotations %v", cordoned.Spec.Unschedulable, cordoned.Annotations)
	}
	uncordoned, err := maintenancePatch(map[string]any{
		kbv1.AnnotationMaintenanceState: nil, kbv1.AnnotationMaintenanceCordoned: nil, kbv1.AnnotationMaintenanceDrainStartedAt: nil}, false)
	allowed(t, "ending maintenance", err)
	if err == nil && uncordoned.Spec.Unschedulable {
		t.Error("the uncordon is not in effect")
	}
	after := getNode(t, n.Name)
	if after.Spec.Unschedulable || !cmp.Equal(after.Labels, before.Labels) || after.Annotations["example.com/owner"] != "ops" ||
		!cmp.Equal(after.Spec.Taints, before.Spec.Taints) {
		t.Errorf("foreign fields changed along the way: %v %v %v", after.Labels, after.Annotations, after.Spec.Taints)
	}
}

// TestUninstallIdentityIsNotTheOperator: the uninstall strips kubeblade's
// fact labels and the thermal taint, which the operator may not; it runs
// as the chart's cleanup ServiceAccount (templates/cleanup-hook.yaml),
// which the operator's policy does not match.
func TestUninstallIdentityIsNotTheOperator(t *testing.T) {
	testenv.Need(t)
	const user = "system:serviceaccount:" + testenv.AgentNamespace + ":kubeblade-cleanup"
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "test-kubeblade-cleanup"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "patch"}}},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "kubeblade-cleanup", Namespace: testenv.AgentNamespace}},
	}
	for _, o := range []client.Object{role, binding} {
		if err := admin.Create(ctx(t), o); client.IgnoreAlreadyExists(err) != nil {
			t.Fatal(err)
		}
	}
	n := seedNode(t)
	if err := taintPatch(true)(t, admin, n); err != nil {
		t.Fatal(err)
	}
	// What uninstall.stripNode sends for one Node.
	strip := func(c client.Client) error {
		cur := getNode(t, n.Name)
		orig := cur.DeepCopy()
		delete(cur.Labels, kbv1.LabelSoC)
		cur.Spec.Taints = cur.Spec.Taints[:1]
		return c.Patch(ctx(t), cur, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}), client.FieldOwner(uninstall.FieldManager))
	}
	refused(t, "the uninstall's Node changes as the operator", strip(as(operatorConfig())), nodePolicy, kbv1.LabelSoC)
	allowed(t, "the uninstall's Node changes as the cleanup ServiceAccount",
		strip(as(testenv.As(env.Config, user, "system:serviceaccounts", "system:serviceaccounts:"+testenv.AgentNamespace))))
}
