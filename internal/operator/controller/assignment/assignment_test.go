package assignment_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	kbv1 "github.com/kubeblade/kubeblade/api/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/operator"
	"github.com/kubeblade/kubeblade/internal/operator/controller/assignment"
	"github.com/kubeblade/kubeblade/internal/operator/optest"
	"github.com/kubeblade/kubeblade/internal/operator/outcome"
	"github.com/kubeblade/kubeblade/internal/testwait"
)

// The assignment controller runs alone: no status, DaemonSet or finalizer
// controller touches the objects these tests look at.
var suite = optest.NewSuite(func(_ context.Context, mgr ctrl.Manager, o operator.Options) error {
	return (&assignment.Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder(operator.Name), Clock: o.Clock, Outcome: outcomes}).SetupWithManager(mgr)
})

// outcomes is what the controller tells the status controller, which does
// not run here: the tests read it directly.
var outcomes = outcome.New()

func TestMain(m *testing.M) { os.Exit(suite.Run(m)) }

func TestPrioritiesOverlapsAndChurn(t *testing.T) {
	e := suite.Need(t)
	sel := map[string]string{"kbtest": "assign"}
	gold := map[string]string{"kbtest": "assign", "tier": "gold"}
	e.CreateAll(t,
		optest.Node("as-1", map[string]string{"kbtest": "assign"}),
		optest.Node("as-2", map[string]string{"kbtest": "assign"}),
		optest.Node("as-3", map[string]string{"kbtest": "assign", "tier": "gold"}),
		optest.Node("as-4", map[string]string{"kbtest": "assign", kbv1.LabelBlade: "false"}),
		optest.Node("as-5", map[string]string{"kbtest": "other"}),
		optest.Config("as-low", 0, sel),
		optest.Config("as-high", 10, gold),
	)
	e.WaitConfigLabels(t, map[string]string{"as-1": "as-low", "as-2": "as-low", "as-3": "as-high", "as-4": "", "as-5": ""})

	// One Event per config and reconcile, not one per Node. (as-low may
	// have won as-3 for a moment if it was seen before as-high.)
	e.WaitEvent(t, "BladeConfig", "as-low", assignment.ReasonNodesAssigned)
	if note := e.WaitEvent(t, "BladeConfig", "as-high", assignment.ReasonNodesAssigned); note != "Assigned 1 node(s)" {
		t.Errorf("as-high: NodesAssigned note %q, want %q", note, "Assigned 1 node(s)")
	}

	// Churn: the gold node leaves the high config, a node leaves every
	// selector, another turns out not to be a blade, a new one arrives.
	e.PatchLabels(t, "as-3", nil, "tier")
	e.PatchLabels(t, "as-1", nil, "kbtest")
	e.PatchLabels(t, "as-2", map[string]string{kbv1.LabelBlade: "false"})
	e.PatchLabels(t, "as-5", map[string]string{"kbtest": "assign", "tier": "gold"})
	e.WaitConfigLabels(t, map[string]string{"as-1": "", "as-2": "", "as-3": "as-low", "as-4": "", "as-5": "as-high"})
	e.WaitEvent(t, "BladeConfig", "as-low", assignment.ReasonNodesReleased)

	// A priority change moves nodes: low now outranks high.
	e.UpdateConfig(t, "as-low", func(bc *kbv1.BladeConfig) { bc.Spec.Priority = 20 })
	e.WaitConfigLabels(t, map[string]string{"as-3": "as-low", "as-5": "as-low"})
}

func TestDefaultSelector(t *testing.T) {
	e := suite.Need(t)
	// The only test with arm64 nodes and a config without a selector.
	e.CreateAll(t,
		optest.Node("def-1", map[string]string{"kubernetes.io/arch": "arm64"}),
		optest.Node("def-2", map[string]string{"kubernetes.io/arch": "amd64"}),
		&kbv1.BladeConfig{ObjectMeta: objectMeta("def-config")},
	)
	e.WaitConfigLabels(t, map[string]string{"def-1": "def-config", "def-2": ""})
}

func TestRemovesStaleLabels(t *testing.T) {
	e := suite.Need(t)
	// A label naming a config that does not exist, on a node nobody selects.
	e.CreateAll(t, optest.Node("stale-1", map[string]string{kbv1.LabelConfig: "gone"}))
	e.WaitConfigLabels(t, map[string]string{"stale-1": ""})
}

// A config being deleted gives up its Nodes at once, to the next config
// that selects them, even while a finalizer still holds it.
func TestDeletedConfigReleasesNodes(t *testing.T) {
	e := suite.Need(t)
	sel := map[string]string{"kbtest": "del"}
	hold := optest.Config("del-first", 10, sel)
	controllerutil.AddFinalizer(hold, "kubeblade.io/test-hold")
	e.CreateAll(t, optest.Node("del-1", sel), hold, optest.Config("del-second", 0, sel))
	e.WaitConfigLabels(t, map[string]string{"del-1": "del-first"})

	if err := e.Client.Delete(optest.Ctx(t), e.GetConfig(t, "del-first")); err != nil {
		t.Fatal(err)
	}
	e.WaitConfigLabels(t, map[string]string{"del-1": "del-second"})
	e.UpdateConfig(t, "del-first", func(bc *kbv1.BladeConfig) { controllerutil.RemoveFinalizer(bc, "kubeblade.io/test-hold") })
}

// A name too long for a label value can win no Node.
func TestUnlabellableNameWinsNothing(t *testing.T) {
	e := suite.Need(t)
	sel := map[string]string{"kbtest": "long"}
	long := fmt.Sprintf("long-%063d", 0)
	e.CreateAll(t, optest.Node("long-1", sel), optest.Config(long, 10, sel), optest.Config("long-short", 0, sel))
	e.WaitConfigLabels(t, map[string]string{"long-1": "long-short"})
	if err := e.Client.Delete(optest.Ctx(t), e.GetConfig(t, long)); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
}

func objectMeta(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name} }

// TestRefusedLabelReachesTheConfig: a Node the API server will not let the
// operator label (here a ValidatingAdmissionPolicy, in a real cluster a
// policy engine or a webhook) is reported to the status controller against
// the BladeConfig it was to join, with a Warning Event naming the Node and
// the API server's message; the other Nodes are labelled anyway, and the
// failure clears once the label can be written.
func TestRefusedLabelReachesTheConfig(t *testing.T) {
	e := suite.Need(t)
	fail := admissionregistrationv1.Fail
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "lock-refused-1"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				ResourceNames: []string{"refused-1"},
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"nodes"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: `!has(object.metadata.labels) || !('kubeblade.io/config' in object.metadata.labels)`,
				Message:    "refused-1 is locked by the site policy",
			}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "lock-refused-1"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        policy.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	// Policies take effect asynchronously: lock first, and wait until a
	// label write is really refused before the config exists.
	e.CreateAll(t, policy, binding, optest.Node("refused-1", map[string]string{"kbtest": "refused"}), optest.Node("refused-2", map[string]string{"kbtest": "refused"}))
	testwait.Eventually(t, time.Minute, "the policy to refuse label writes on refused-1", func(ctx context.Context) (bool, string) {
		n := optest.Node("refused-1", nil)
		patch := []byte(`{"metadata":{"labels":{"kubeblade.io/config":"probe"}}}`)
		err := e.Client.Patch(ctx, n, client.RawPatch("application/merge-patch+json", patch))
		if err == nil {
			_ = e.Client.Patch(ctx, n, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"labels":{"kubeblade.io/config":null}}}`)))
			return false, "still allowed"
		}
		return strings.Contains(err.Error(), "locked by the site policy"), err.Error()
	})

	e.CreateAll(t, optest.Config("refused", 0, map[string]string{"kbtest": "refused"}))
	e.WaitConfigLabels(t, map[string]string{"refused-2": "refused"})
	testwait.Eventually(t, optest.Timeout, "the refusal recorded against the config", func(context.Context) (bool, string) {
		fs := outcomes.Failures("refused")
		if len(fs) != 1 {
			return false, fmt.Sprintf("%d failures", len(fs))
		}
		f := fs[0]
		return f.Controller == assignment.ControllerName && strings.Contains(f.Message, "refused-1") &&
			strings.Contains(f.Message, "locked by the site policy"), f.Message
	})
	if note := e.WaitEvent(t, "BladeConfig", "refused", assignment.ReasonAssignFailed); !strings.Contains(note, "refused-1") || !strings.Contains(note, "locked by the site policy") {
		t.Errorf("AssignmentFailed note %q names neither the node nor the API server's message", note)
	}

	// Fixed: the policy goes, the next reconcile labels the node and clears.
	if err := e.Client.Delete(optest.Ctx(t), binding); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, optest.Timeout, "the label written once the policy is gone", func(ctx context.Context) (bool, string) {
		// A label change on the node wakes the controller, as a person
		// fixing things would; the requeue after the error would too, later.
		_ = e.Client.Patch(ctx, optest.Node("refused-1", nil), client.RawPatch("application/merge-patch+json",
			[]byte(fmt.Sprintf(`{"metadata":{"labels":{"kbtest-poke":"%d"}}}`, time.Now().UnixNano()))))
		got, err := e.ConfigLabels(ctx, "refused-1")
		if err != nil {
			return false, err.Error()
		}
		return got["refused-1"] == "refused" && len(outcomes.Failures("refused")) == 0, fmt.Sprint(got, outcomes.Failures("refused"))
	})
}
