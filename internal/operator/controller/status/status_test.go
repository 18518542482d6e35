package status_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbv1 "github.com/kubeblade/kubeblade/api/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/operator"
	"github.com/kubeblade/kubeblade/internal/operator/agentdaemonset"
	"github.com/kubeblade/kubeblade/internal/operator/controller/status"
	"github.com/kubeblade/kubeblade/internal/operator/optest"
)

// The status controller runs alone: the tests play the assignment
// controller (they label Nodes), the daemonset controller (they apply the
// DaemonSet) and Kubernetes' DaemonSet controller (they write its status).
var suite = optest.NewSuite(func(ctx context.Context, mgr ctrl.Manager, o operator.Options) error {
	return (&status.Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder(operator.Name), Clock: o.Clock, Namespace: o.Namespace,
		Images: o.AgentImages}).SetupWithManager(ctx, mgr)
})

func TestMain(m *testing.M) { os.Exit(suite.Run(m)) }

func reason(bc *kbv1.BladeConfig, typ string) string {
	c := meta.FindStatusCondition(bc.Status.Conditions, typ)
	if c == nil {
		return ""
	}
	return string(c.Status) + "/" + c.Reason
}

// labelled is a Node as the assignment leaves it: selected and labelled.
func labelled(name, config string, sel map[string]string) client.Object {
	l := map[string]string{kbv1.LabelConfig: config}
	for k, v := range sel {
		l[k] = v
	}
	return optest.Node(name, l)
}

// applyDS applies the agent DaemonSet as the daemonset controller would.
func applyDS(t *testing.T, e *optest.Env, config string) {
	t.Helper()
	d := e.Options.DaemonSet
	d.Namespace = optest.Namespace
	if err := e.Client.Apply(optest.Ctx(t), agentdaemonset.Build(e.GetConfig(t, config), d), client.FieldOwner("test"), client.ForceOwnership); err != nil {
		t.Fatal(err)
	}
}

// setDSStatus plays the DaemonSet controller, which envtest lacks.
func setDSStatus(t *testing.T, e *optest.Env, config string, desired, updated, ready int32) {
	t.Helper()
	ds := &appsv1.DaemonSet{}
	if err := e.Client.Get(optest.Ctx(t), types.NamespacedName{Namespace: optest.Namespace, Name: agentdaemonset.Name(config)}, ds); err != nil {
		t.Fatal(err)
	}
	ds.Status = appsv1.DaemonSetStatus{ObservedGeneration: ds.Generation, DesiredNumberScheduled: desired,
		UpdatedNumberScheduled: updated, NumberReady: ready, CurrentNumberScheduled: desired, NumberAvailable: ready}
	if err := e.Client.Status().Update(optest.Ctx(t), ds); err != nil {
		t.Fatal(err)
	}
}

// reportApplied plays an agent reporting the generation it applied.
func reportApplied(t *testing.T, e *optest.Env, nodeName, config string, gen int64) {
	t.Helper()
	b := &kbv1.Blade{}
	if err := e.Client.Get(optest.Ctx(t), types.NamespacedName{Name: nodeName}, b); err != nil {
		b = &kbv1.Blade{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}
		if err := e.Client.Create(optest.Ctx(t), b); err != nil {
			t.Fatal(err)
		}
	}
	b.Status.NodeName = nodeName
	b.Status.Config = &kbv1.AppliedConfig{Name: config, Generation: gen}
	if err := e.Client.Status().Update(optest.Ctx(t), b); err != nil {
		t.Fatal(err)
	}
}

func TestLifecycle(t *testing.T) {
	e := suite.Need(t)
	sel := map[string]string{"kbtest": "st"}
	e.CreateAll(t, labelled("st-1", "st", sel), optest.Node("st-2", sel), optest.Config("st", 0, sel))

	// st-2 is selected but not labelled yet.
	bc := e.WaitStatus(t, "st", func(bc *kbv1.BladeConfig) bool {
		return reason(bc, kbv1.BladeConfigProgressing) == "True/"+status.ReasonAssigningNodes
	})
	if c := meta.FindStatusCondition(bc.Status.Conditions, kbv1.BladeConfigProgressing); c.Message != "1 of 2 node(s) labelled kubeblade.io/config=st" {
		t.Errorf("Progressing message %q", c.Message)
	}
	e.PatchLabels(t, "st-2", map[string]string{kbv1.LabelConfig: "st"})

	bc = e.WaitStatus(t, "st", func(bc *kbv1.BladeConfig) bool {
		return bc.Status.MatchedNodes == 2 && reason(bc, kbv1.BladeConfigProgressing) == "True/"+status.ReasonDaemonSetPending
	})
	if reason(bc, kbv1.BladeConfigReady) != "False/"+status.ReasonDaemonSetPending ||
		reason(bc, kbv1.BladeConfigDegraded) != "False/"+status.ReasonNotDegraded ||
		reason(bc, kbv1.BladeConfigConflict) != "False/"+status.ReasonNoConflict {
		t.Errorf("conditions %+v", bc.Status.Conditions)
	}

	applyDS(t, e, "st")
	setDSStatus(t, e, "st", 2, 1, 1)
	e.WaitStatus(t, "st", func(bc *kbv1.BladeConfig) bool {
		return reason(bc, kbv1.BladeConfigProgressing) == "True/"+status.ReasonRollingOut && bc.Status.DaemonSet.DesiredNumberScheduled == 2 &&
			bc.Status.DaemonSet.Name == agentdaemonset.Name("st")
	})
	setDSStatus(t, e, "st", 2, 2, 1)
	e.WaitStatus(t, "st", func(bc *kbv1.BladeConfig) bool {
		return reason(bc, kbv1.BladeConfigProgressing) == "True/"+status.ReasonAgentsNotReady
	})
	setDSStatus(t, e, "st", 2, 2, 2)
	e.WaitStatus(t, "st", func(bc *kbv1.BladeConfig) bool {
		return reason(bc, kbv1.BladeConfigProgressing) == "True/"+status.ReasonApplyingConfig && bc.Status.AppliedNodes == 0
	})
	reportApplied(t, e, "st-1", "st", bc.Generation)
	reportApplied(t, e, "st-2", "st", bc.Generation)
	bc = e.WaitStatus(t, "st", func(bc *kbv1.BladeConfig) bool {
		return reason(bc, kbv1.BladeConfigReady) == "True/"+status.ReasonReady && bc.Status.AppliedNodes == 2 &&
			reason(bc, kbv1.BladeConfigProgressing) == "False/"+status.ReasonComplete && bc.Status.DaemonSet.NumberReady == 2
	})
	if note := e.WaitEvent(t, "BladeConfig", "st", status.EventReady); note != fmt.Sprintf("2 node(s) run generation %d", bc.Generation) {
		t.Errorf("Ready Event note %q", note)
	}

	// A new generation is not applied until the agents report it.
	bc = e.UpdateConfig(t, "st", func(bc *kbv1.BladeConfig) { bc.Spec.Agent.Stealth = true })
	bc = e.WaitStatus(t, "st", func(bc *kbv1.BladeConfig) bool {
		return bc.Status.AppliedNodes == 0 && reason(bc, kbv1.BladeConfigReady) == "False/"+status.ReasonApplyingConfig
	})
	for _, c := range bc.Status.Conditions {
		if c.ObservedGeneration != bc.Generation {
			t.Errorf("condition %s observedGeneration %d, want %d", c.Type, c.ObservedGeneration, bc.Generation)
		}
	}
	reportApplied(t, e, "st-1", "st", bc.Generation)
	reportApplied(t, e, "st-2", "st", bc.Generation)
	e.WaitStatus(t, "st", func(bc *kbv1.BladeConfig) bool {
		return bc.Status.AppliedNodes == 2 && reason(bc, kbv1.BladeConfigReady) == "True/"+status.ReasonReady
	})

	// A node that leaves (and is unlabelled) is no longer counted.
	e.PatchLabels(t, "st-2", nil, "kbtest", kbv1.LabelConfig)
	e.WaitStatus(t, "st", func(bc *kbv1.BladeConfig) bool {
		return bc.Status.MatchedNodes == 1 && bc.Status.AppliedNodes == 1
	})
}

func TestConflict(t *testing.T) {
	e := suite.Need(t)
	sel := map[string]string{"kbtest": "sc"}
	gold := map[string]string{"kbtest": "sc", "tier": "gold"}
	// Configs first: the status of every config is recomputed when Node
	// labels change (as the assignment changes them), not when another
	// config appears.
	e.CreateAll(t,
		optest.Config("sc-low", 0, sel),
		optest.Config("sc-high", 10, gold),
		labelled("sc-1", "sc-low", sel),
		labelled("sc-2", "sc-high", gold),
	)
	e.WaitStatus(t, "sc-low", func(bc *kbv1.BladeConfig) bool {
		return meta.IsStatusConditionTrue(bc.Status.Conditions, kbv1.BladeConfigConflict) &&
			slices.Equal(bc.Status.ConflictingNodes, []string{"sc-2"}) && bc.Status.MatchedNodes == 1
	})
	e.WaitStatus(t, "sc-high", func(bc *kbv1.BladeConfig) bool {
		return meta.IsStatusConditionFalse(bc.Status.Conditions, kbv1.BladeConfigConflict) && bc.Status.MatchedNodes == 1
	})
	if note := e.WaitEvent(t, "BladeConfig", "sc-low", status.EventConflict); !strings.Contains(note, "sc-2 (sc-high)") {
		t.Errorf("Conflict Event %q does not name sc-2 (sc-high)", note)
	}

	// low now outranks high. Until the assignment relabels sc-2, low is
	// still assigning it; the relabelling moves the conflict to high.
	e.UpdateConfig(t, "sc-low", func(bc *kbv1.BladeConfig) { bc.Spec.Priority = 20 })
	e.WaitStatus(t, "sc-low", func(bc *kbv1.BladeConfig) bool {
		return reason(bc, kbv1.BladeConfigProgressing) == "True/"+status.ReasonAssigningNodes &&
			meta.IsStatusConditionFalse(bc.Status.Conditions, kbv1.BladeConfigConflict)
	})
	e.PatchLabels(t, "sc-2", map[string]string{kbv1.LabelConfig: "sc-low"})
	e.WaitStatus(t, "sc-high", func(bc *kbv1.BladeConfig) bool {
		return meta.IsStatusConditionTrue(bc.Status.Conditions, kbv1.BladeConfigConflict) &&
			slices.Equal(bc.Status.ConflictingNodes, []string{"sc-2"}) && bc.Status.MatchedNodes == 0
	})
	e.WaitStatus(t, "sc-low", func(bc *kbv1.BladeConfig) bool {
		return bc.Status.MatchedNodes == 2 && reason(bc, kbv1.BladeConfigProgressing) == "True/"+status.ReasonDaemonSetPending
	})
}

func TestInvalidSelectorIsDegraded(t *testing.T) {
	e := suite.Need(t)
	bc := &kbv1.BladeConfig{ObjectMeta: metav1.ObjectMeta{Name: "st-invalid"}, Spec: kbv1.BladeConfigSpec{
		NodeSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "kbtest", Operator: "Sometimes"}}},
	}}
	e.CreateAll(t, bc)
	bc = e.WaitStatus(t, "st-invalid", func(bc *kbv1.BladeConfig) bool {
		return reason(bc, kbv1.BladeConfigDegraded) == "True/"+status.ReasonInvalidSelector
	})
	if reason(bc, kbv1.BladeConfigReady) != "False/"+status.ReasonInvalidSelector {
		t.Errorf("Ready %s", reason(bc, kbv1.BladeConfigReady))
	}
	e.WaitEvent(t, "BladeConfig", "st-invalid", status.ReasonInvalidSelector)
	// Fixing it clears Degraded at the new generation.
	e.UpdateConfig(t, "st-invalid", func(bc *kbv1.BladeConfig) {
		bc.Spec.NodeSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"kbtest": "st-invalid"}}
	})
	e.WaitStatus(t, "st-invalid", func(bc *kbv1.BladeConfig) bool {
		return reason(bc, kbv1.BladeConfigDegraded) == "False/"+status.ReasonNotDegraded
	})
}

// TestRefusedImageIsDegraded: an image from no allowed repository makes
// the config Degraded and not Ready, with a Warning Event naming the image;
// an allowed one clears it.
func TestRefusedImageIsDegraded(t *testing.T) {
	e := suite.Need(t)
	bc := optest.Config("st-image", 0, map[string]string{"kbtest": "st-image"})
	bc.Spec.DaemonSet.Image = "evil.example.com/root-shell:v1"
	e.CreateAll(t, bc)
	bc = e.WaitStatus(t, "st-image", func(bc *kbv1.BladeConfig) bool {
		return reason(bc, kbv1.BladeConfigDegraded) == "True/"+status.ReasonImageNotAllowed
	})
	if reason(bc, kbv1.BladeConfigReady) != "False/"+status.ReasonImageNotAllowed {
		t.Errorf("Ready %s", reason(bc, kbv1.BladeConfigReady))
	}
	if c := meta.FindStatusCondition(bc.Status.Conditions, kbv1.BladeConfigDegraded); !strings.Contains(c.Message, "evil.example.com/root-shell:v1") {
		t.Errorf("Degraded message %q does not name the image", c.Message)
	}
	e.WaitEvent(t, "BladeConfig", "st-image", status.ReasonImageNotAllowed)
	e.UpdateConfig(t, "st-image", func(bc *kbv1.BladeConfig) { bc.Spec.DaemonSet.Image = "example.com/agent:v1" })
	e.WaitStatus(t, "st-image", func(bc *kbv1.BladeConfig) bool {
		return reason(bc, kbv1.BladeConfigDegraded) == "False/"+status.ReasonNotDegraded
	})
}

func TestUnlabellableNameIsDegraded(t *testing.T) {
	e := suite.Need(t)
	long := fmt.Sprintf("st-long-%060d", 0)
	e.CreateAll(t, optest.Config(long, 0, map[string]string{"kbtest": "st-long"}))
	bc := e.WaitStatus(t, long, func(bc *kbv1.BladeConfig) bool {
		return reason(bc, kbv1.BladeConfigDegraded) == "True/"+status.ReasonInvalidName
	})
	if reason(bc, kbv1.BladeConfigReady) != "False/"+status.ReasonInvalidName || bc.Status.MatchedNodes != 0 {
		t.Errorf("status %+v", bc.Status)
	}
}

// TestMissingPriorityClassIsDegraded: a BladeConfig naming a PriorityClass
// that does not exist (the API server accepts the DaemonSet but refuses
// its pods) is Degraded at its generation with a Warning Event naming the
// class, until the class appears or the field is fixed.
func TestMissingPriorityClassIsDegraded(t *testing.T) {
	e := suite.Need(t)
	bc := optest.Config("st-prio", 0, map[string]string{"kbtest": "st-prio"})
	bc.Spec.DaemonSet.PriorityClassName = "st-blades"
	e.CreateAll(t, bc)
	missing := func(name string) *kbv1.BladeConfig {
		t.Helper()
		bc := e.WaitStatus(t, "st-prio", func(bc *kbv1.BladeConfig) bool {
			c := meta.FindStatusCondition(bc.Status.Conditions, kbv1.BladeConfigDegraded)
			return c != nil && c.Status == metav1.ConditionTrue && c.Reason == status.ReasonPriorityClassNotFound &&
				c.ObservedGeneration == bc.Generation && strings.Contains(c.Message, `PriorityClass "`+name+`" does not exist`)
		})
		if reason(bc, kbv1.BladeConfigReady) != "False/"+status.ReasonPriorityClassNotFound {
			t.Errorf("Ready %s, want False/%s", reason(bc, kbv1.BladeConfigReady), status.ReasonPriorityClassNotFound)
		}
		if c := meta.FindStatusCondition(bc.Status.Conditions, kbv1.BladeConfigDegraded); !strings.Contains(c.Message, "system-node-critical") {
			t.Errorf("Degraded message %q does not say the agents run with the default class", c.Message)
		}
		return bc
	}
	notDegraded := func() {
		t.Helper()
		e.WaitStatus(t, "st-prio", func(bc *kbv1.BladeConfig) bool {
			c := meta.FindStatusCondition(bc.Status.Conditions, kbv1.BladeConfigDegraded)
			return c != nil && c.Status == metav1.ConditionFalse && c.ObservedGeneration == bc.Generation
		})
	}

	missing("st-blades")
	if note := e.WaitEvent(t, "BladeConfig", "st-prio", status.ReasonPriorityClassNotFound); !strings.Contains(note, `"st-blades"`) {
		t.Errorf("Warning Event %q does not name the PriorityClass", note)
	}
	// The class appearing clears it, with no change to the BladeConfig.
	e.CreateAll(t, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "st-blades"}, Value: 1000})
	notDegraded()
	// A typo is Degraded again; fixing the field (back to the default)
	// clears it.
	e.UpdateConfig(t, "st-prio", func(bc *kbv1.BladeConfig) { bc.Spec.DaemonSet.PriorityClassName = "st-bladez" })
	missing("st-bladez")
	e.UpdateConfig(t, "st-prio", func(bc *kbv1.BladeConfig) { bc.Spec.DaemonSet.PriorityClassName = "" })
	notDegraded()
}
