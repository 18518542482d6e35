package security

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbv1 "github.com/kubeblade/kubeblade/api/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/testenv"
)

// pathAttacks are spec.agent values of issue 31's finding 1: each makes
// the agent (root on the blade) open and write a host file, or serve a
// socket where no socket belongs. They are raw JSON, so this file also
// builds against the API of 8f44781, where every one of them was stored.
var pathAttacks = map[string]struct {
	agent string
	// pruned: a field that left the API; a lenient write is accepted but
	// the API server drops the field, a strict one is refused.
	pruned bool
}{
	"leds.stream is /proc/sysrq-trigger":     {agent: `{"hardware":{"linux":{"leds":{"stream":"/proc/sysrq-trigger"}}}}`},
	"leds.stream is the boot disk":           {agent: `{"hardware":{"linux":{"leds":{"stream":"/dev/mmcblk0"}}}}`},
	"leds.stream is the CA key":              {agent: `{"hardware":{"linux":{"leds":{"stream":"/var/lib/kubeblade/ca.key"}}}}`},
	"serialDevice climbs out of /dev":        {agent: `{"hardware":{"linux":{"serialDevice":"../../etc/shadow"}}}`},
	"serialDevice is /dev/mem":               {agent: `{"hardware":{"linux":{"serialDevice":"/dev/mem"}}}`},
	"pwmChip is a path":                      {agent: `{"hardware":{"linux":{"pwmChip":"../../../dev/mem"}}}`},
	"leds.top is ..":                         {agent: `{"hardware":{"linux":{"leds":{"top":".."}}}}`},
	"grpc.socketPath in the state directory": {agent: `{"grpc":{"socketPath":"/var/lib/kubeblade/ca.crt"}}`},
	"metrics probed at the metadata address": {agent: `{"metrics":{"bindAddress":"169.254.169.254:80"}}`},
	"devRoot is /proc":                       {agent: `{"hardware":{"linux":{"devRoot":"/proc"}}}`, pruned: true},
	"sysfsRoot is elsewhere":                 {agent: `{"hardware":{"linux":{"sysfsRoot":"/var/lib/kubeblade"}}}`, pruned: true},
	"procRoot is elsewhere":                  {agent: `{"hardware":{"linux":{"procRoot":"/var/lib/kubeblade"}}}`, pruned: true},
	"simulated.controlSocket over a key":     {agent: `{"hardware":{"simulated":{"controlSocket":"/var/lib/kubeblade/ca.key"}}}`, pruned: true},
}

// bladeConfigWrite sends spec.agent=agent to the BladeConfig name one way.
type bladeConfigWrite func(t *testing.T, c client.Client, name, agent string) error

func bcPatch(pt types.PatchType, body func(agent string) string, opts ...client.PatchOption) bladeConfigWrite {
	return func(t *testing.T, c client.Client, name, agent string) error {
		return c.Patch(ctx(t), &kbv1.BladeConfig{ObjectMeta: metav1.ObjectMeta{Name: name}}, client.RawPatch(pt, []byte(body(agent))), opts...)
	}
}

var bladeConfigWrites = map[string]bladeConfigWrite{
	"merge patch": bcPatch(types.MergePatchType, func(a string) string { return `{"spec":{"agent":` + a + `}}` }),
	"JSON patch":  bcPatch(types.JSONPatchType, func(a string) string { return `[{"op":"add","path":"/spec/agent","value":` + a + `}]` }),
	"server-side apply with force": bcPatch(types.ApplyPatchType, func(a string) string {
		return `{"apiVersion":"kubeblade.io/v1alpha1","kind":"BladeConfig","spec":{"agent":` + a + `}}`
	}, client.FieldOwner("attacker"), client.ForceOwnership),
	"dry-run merge patch": bcPatch(types.MergePatchType, func(a string) string { return `{"spec":{"agent":` + a + `}}` }, client.DryRunAll),
	// Custom resources take no strategic merge patch; the API server says
	// so whatever the body.
	"strategic merge patch": bcPatch(types.StrategicMergePatchType, func(a string) string { return `{"spec":{"agent":` + a + `}}` }),
	// The whole object, read fresh after each conflict: the operator adds
	// its finalizer meanwhile.
	"PUT": func(t *testing.T, c client.Client, name, agent string) error {
		for {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(kbv1.GroupVersion.WithKind("BladeConfig"))
			if err := admin.Get(ctx(t), client.ObjectKey{Name: name}, u); err != nil {
				t.Fatal(err)
			}
			var a map[string]any
			if err := json.Unmarshal([]byte(agent), &a); err != nil {
				t.Fatal(err)
			}
			if err := unstructured.SetNestedMap(u.Object, a, "spec", "agent"); err != nil {
				t.Fatal(err)
			}
			if err := c.Update(ctx(t), u); !apierrors.IsConflict(err) {
				return err
			}
		}
	},
	"status subresource": func(t *testing.T, c client.Client, name, agent string) error {
		return c.Status().Patch(ctx(t), &kbv1.BladeConfig{ObjectMeta: metav1.ObjectMeta{Name: name}},
			client.RawPatch(types.MergePatchType, []byte(`{"spec":{"agent":`+agent+`}}`)))
	},
	"create": func(t *testing.T, c client.Client, name, agent string) error {
		u := &unstructured.Unstructured{}
		if err := json.Unmarshal([]byte(`{"apiVersion":"kubeblade.io/v1alpha1","kind":"BladeConfig","metadata":{"name":"`+name+`-new"},`+
			`"spec":{"nodeSelector":{"matchLabels":{"kbtest":"nothing"}},"agent":`+agent+`}}`), &u.Object); err != nil {
			t.Fatal(err)
		}
		return c.Create(ctx(t), u)
	},
}

// storedAgent is spec.agent of a BladeConfig as stored, "" when missing.
func storedAgent(t *testing.T, name string) string {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(kbv1.GroupVersion.WithKind("BladeConfig"))
	if err := admin.Get(ctx(t), client.ObjectKey{Name: name}, u); apierrors.IsNotFound(err) {
		return ""
	} else if err != nil {
		t.Fatal(err)
	}
	a, _, _ := unstructured.NestedMap(u.Object, "spec", "agent")
	b, _ := json.Marshal(a)
	return string(b)
}

// leaked reports the attack's values that the stored spec.agent holds.
func leaked(stored, agent string) []string {
	var a any
	_ = json.Unmarshal([]byte(agent), &a)
	var out []string
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for _, x := range v {
				walk(x)
			}
		case string:
			if strings.Contains(stored, `"`+v+`"`) {
				out = append(out, v)
			}
		}
	}
	walk(a)
	return out
}

// TestBladeConfigDevicePaths (issue 31, finding 1): neither a user who may
// only edit BladeConfigs nor the operator's ServiceAccount (which patches
// BladeConfigs for its finalizer) can store a device path that reaches a
// host file, by any write path. Fields with a shape are refused as
// Invalid; the fields that left the API are refused to a strict client
// and otherwise dropped, never stored. Nothing of the attack is stored.
func TestBladeConfigDevicePaths(t *testing.T) {
	testenv.Need(t)
	identities := map[string]client.Client{
		"BladeConfig editor":        bladeConfigEditor(t),
		"operator's ServiceAccount": as(operatorConfig()),
	}
	for who, c := range identities {
		for how, write := range bladeConfigWrites {
			for what, a := range pathAttacks {
				t.Run(fmt.Sprintf("%s/%s/%s", who, how, what), func(t *testing.T) {
					t.Parallel()
					bc := bladeConfig("")
					if err := admin.Create(ctx(t), bc); err != nil {
						t.Fatal(err)
					}
					before := storedAgent(t, bc.Name)
					err := write(t, c, bc.Name, a.agent)
					switch {
					case how == "strategic merge patch":
						if !apierrors.IsUnsupportedMediaType(err) {
							t.Errorf("strategic merge patch of a custom resource: %v, want 415", err)
						}
					case (who == "operator's ServiceAccount" && (how == "PUT" || how == "create")):
						refused(t, "a write RBAC does not grant the operator", err)
					case how == "status subresource":
						// Spec changes through /status are ignored.
					case a.pruned:
						// Accepted with the field dropped, or refused.
					default:
						if !apierrors.IsInvalid(err) {
							t.Errorf("%s: %v, want refused as Invalid by the BladeConfig schema", what, err)
						}
					}
					for _, name := range []string{bc.Name, bc.Name + "-new"} {
						if got := leaked(storedAgent(t, name), a.agent); len(got) > 0 {
							t.Errorf("%s stored %v (err %v)", name, got, err)
						}
					}
					if after := storedAgent(t, bc.Name); !a.pruned && after != before {
						t.Errorf("the refused write changed spec.agent:\nbefore %s\nafter  %s", before, after)
					}
				})
			}
		}
	}
}
