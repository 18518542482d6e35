package security

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbv1 "github.com/kubeblade/kubeblade/api/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/testenv"
)

// operatorRecords are the annotations the maintenance controller writes and
// trusts. They are named by value, so this file also builds against the
// API of 8f44781.
var operatorRecords = []string{
	"kubeblade.io/maintenance-state", "kubeblade.io/maintenance-requested-at",
	"kubeblade.io/maintenance-drain-started-at", "kubeblade.io/maintenance-cordoned",
}

// annotationWrites set (value non-nil) or remove (nil) annotations of a
// Node every way a client can.
var annotationWrites = map[string]func(t *testing.T, c client.Client, node string, ann map[string]*string, opts ...client.PatchOption) error{
	"merge patch": func(t *testing.T, c client.Client, node string, ann map[string]*string, opts ...client.PatchOption) error {
		b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}})
		return c.Patch(ctx(t), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, client.RawPatch(types.MergePatchType, b), opts...)
	},
	"strategic merge patch": func(t *testing.T, c client.Client, node string, ann map[string]*string, opts ...client.PatchOption) error {
		b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}})
		return c.Patch(ctx(t), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, client.RawPatch(types.StrategicMergePatchType, b), opts...)
	},
	"JSON patch": func(t *testing.T, c client.Client, node string, ann map[string]*string, opts ...client.PatchOption) error {
		var ops []map[string]any
		cur := getNode(t, node).Annotations
		for k, v := range ann {
			p := "/metadata/annotations/" + strings.ReplaceAll(k, "/", "~1")
			_, has := cur[k]
			switch {
			case v == nil:
				ops = append(ops, map[string]any{"op": "remove", "path": p})
			case has:
				ops = append(ops, map[string]any{"op": "replace", "path": p, "value": *v})
			default:
				ops = append(ops, map[string]any{"op": "add", "path": p, "value": *v})
			}
		}
		b, _ := json.Marshal(ops)
		return c.Patch(ctx(t), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, client.RawPatch(types.JSONPatchType, b), opts...)
	},
	"server-side apply with force": func(t *testing.T, c client.Client, node string, ann map[string]*string, opts ...client.PatchOption) error {
		// Apply can only set; removing takes the merge patches above.
		set := map[string]string{}
		for k, v := range ann {
			if v != nil {
				set[k] = *v
			}
		}
		b, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "Node", "metadata": map[string]any{"name": node, "annotations": set}})
		return c.Patch(ctx(t), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, client.RawPatch(types.ApplyPatchType, b),
			append(opts, client.FieldOwner("kubeblade-agent"), client.ForceOwnership)...)
	},
	"PUT": func(t *testing.T, c client.Client, node string, ann map[string]*string, _ ...client.PatchOption) error {
		for {
			n := getNode(t, node)
			for k, v := range ann {
				if v == nil {
					delete(n.Annotations, k)
				} else {
					n.Annotations[k] = *v
				}
			}
			if err := c.Update(ctx(t), n); !apierrors.IsConflict(err) {
				return err
			}
		}
	},
	"status subresource": func(t *testing.T, c client.Client, node string, ann map[string]*string, opts ...client.PatchOption) error {
		b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}})
		return c.Status().Patch(ctx(t), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, client.RawPatch(types.MergePatchType, b))
	},
	"dry-run merge patch": func(t *testing.T, c client.Client, node string, ann map[string]*string, opts ...client.PatchOption) error {
		b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}})
		return c.Patch(ctx(t), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, client.RawPatch(types.MergePatchType, b), append(opts, client.DryRunAll)...)
	},
}

func str(s string) *string { return &s }

// policySays is what the refusal of a write must say: the agent's Node
// policy and what, except for a PUT, which RBAC refuses the agent before
// the policy (it only patches Nodes).
func policySays(how, what string) []string {
	if how == "PUT" {
		return nil
	}
	return []string{"kubeblade-agent-own-node", what}
}

// cordonedByAdmin is a Node an administrator cordoned, as kubectl cordon
// leaves it.
func cordonedByAdmin(t *testing.T) *corev1.Node {
	t.Helper()
	n := seedNode(t)
	if err := admin.Patch(ctx(t), n, client.RawPatch(types.StrategicMergePatchType, []byte(`{"spec":{"unschedulable":true}}`))); err != nil {
		t.Fatal(err)
	}
	return getNode(t, n.Name)
}

// TestAgentCannotForgeMaintenanceRecords (issue 31, finding 2): the agent
// of a Node may request maintenance, but not write the operator's records
// of it. On 8f44781 kubeblade.io/maintenance-cordoned=true made the
// operator lift an administrator's cordon 6 s later, and
// maintenance-state=drained (with an invalid request) held the cluster's
// only maintenance slot. Every write path is refused and the Node stays as
// it was.
func TestAgentCannotForgeMaintenanceRecords(t *testing.T) {
	testenv.Need(t)
	attacks := map[string]map[string]*string{
		"claim an administrator's cordon as kubeblade's": {"kubeblade.io/maintenance-cordoned": str("true")},
		"hold a maintenance slot": {"kubeblade.io/maintenance": str("bogus"), "kubeblade.io/maintenance-state": str("drained"),
			"kubeblade.io/maintenance-drain-started-at": str(time.Now().UTC().Format(time.RFC3339Nano))},
		"jump the maintenance queue":       {"kubeblade.io/maintenance-requested-at": str("2000-01-01T00:00:00Z")},
		"a record kubeblade may add later": {"kubeblade.io/maintenance-x": str("1")},
	}
	for how, write := range annotationWrites {
		for what, ann := range attacks {
			t.Run(how+"/"+what, func(t *testing.T) {
				t.Parallel()
				n := cordonedByAdmin(t)
				agent := as(testenv.AsAgent(env.Config, n.Name, n.UID))
				refused(t, what, write(t, agent, n.Name, ann), policySays(how, "may not change the operator's maintenance records")...)
				after := getNode(t, n.Name)
				if !after.Spec.Unschedulable {
					t.Error("the administrator's cordon is gone")
				}
				for _, k := range operatorRecords {
					if v, ok := after.Annotations[k]; ok {
						t.Errorf("the Node holds %s=%s", k, v)
					}
				}
			})
		}
	}
}

// TestAgentCannotEraseMaintenanceRecords: a blade the operator drained
// keeps the records; its agent can neither remove them (and so strand
// the operator's own cordon or free the slot early) nor rewrite them,
// while a person's "false" — the way to end maintenance — still works.
func TestAgentCannotEraseMaintenanceRecords(t *testing.T) {
	testenv.Need(t)
	n := seedNode(t)
	now := time.Now().UTC().Format(time.RFC3339Nano)
	// What the maintenance controller leaves on a drained Node; it waits
	// there for "false", so the records stay put.
	drained := fmt.Sprintf(`{"metadata":{"annotations":{"kubeblade.io/maintenance":"true","kubeblade.io/maintenance-state":"drained",`+
		`"kubeblade.io/maintenance-requested-at":%q,"kubeblade.io/maintenance-drain-started-at":%q,"kubeblade.io/maintenance-cordoned":"true"}},`+
		`"spec":{"unschedulable":true}}`, now, now)
	if err := admin.Patch(ctx(t), n, client.RawPatch(types.MergePatchType, []byte(drained))); err != nil {
		t.Fatal(err)
	}
	agent := as(testenv.AsAgent(env.Config, n.Name, n.UID))
	before := getNode(t, n.Name)
	for how, write := range annotationWrites {
		if how == "server-side apply with force" {
			continue // apply only adds; removing is the patches'
		}
		for _, k := range operatorRecords {
			refused(t, how+": remove "+k, write(t, agent, n.Name, map[string]*string{k: nil}), policySays(how, k)...)
		}
		refused(t, how+": queued again", write(t, agent, n.Name, map[string]*string{"kubeblade.io/maintenance-state": str("queued")}),
			policySays(how, "kubeblade.io/maintenance-state")...)
	}
	after := getNode(t, n.Name)
	for _, k := range operatorRecords {
		if after.Annotations[k] != before.Annotations[k] {
			t.Errorf("%s: %q, was %q", k, after.Annotations[k], before.Annotations[k])
		}
	}
	allowed(t, "the agent's long press ending maintenance", annotationWrites["merge patch"](t, agent, n.Name,
		map[string]*string{kbv1.AnnotationMaintenance: str("false")}))
}
