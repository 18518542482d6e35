package operator_test

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbv1 "github.com/kubeblade/kubeblade/api/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/operator/daemonset"
	"github.com/kubeblade/kubeblade/internal/operator/status"
)

func reason(bc *kbv1.BladeConfig, typ string) string {
	c := meta.FindStatusCondition(bc.Status.Conditions, typ)
	if c == nil {
		return ""
	}
	return string(c.Status) + "/" + c.Reason
}

func waitStatus(t *testing.T, name string, cond func(*kbv1.BladeConfig) bool) *kbv1.BladeConfig {
	t.Helper()
	var bc *kbv1.BladeConfig
	eventually(t, "status of "+name, func() (bool, error) {
		bc = getConfig(t, name)
		return bc.Status.ObservedGeneration == bc.Generation && cond(bc), nil
	})
	return bc
}

// setDSStatus plays the DaemonSet controller, which envtest lacks.
func setDSStatus(t *testing.T, config string, desired, updated, ready int32) {
	t.Helper()
	ds, err := getDS(t, config)
	if err != nil {
		t.Fatal(err)
	}
	ds.Status = appsv1.DaemonSetStatus{ObservedGeneration: ds.Generation, DesiredNumberScheduled: desired,
		UpdatedNumberScheduled: updated, NumberReady: ready, CurrentNumberScheduled: desired, NumberAvailable: ready}
	if err := k8s.Status().Update(ctx(t), ds); err != nil {
		t.Fatal(err)
	}
}

func reportApplied(t *testing.T, nodeName, config string, gen int64) {
	t.Helper()
	b := &kbv1.Blade{}
	err := k8s.Get(ctx(t), types.NamespacedName{Name: nodeName}, b)
	if err != nil {
		b = &kbv1.Blade{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}
		if err := k8s.Create(ctx(t), b); err != nil {
			t.Fatal(err)
		}
	}
	b.Status.NodeName = nodeName
	b.Status.Config = &kbv1.AppliedConfig{Name: config, Generation: gen}
	if err := k8s.Status().Update(ctx(t), b); err != nil {
		t.Fatal(err)
	}
}

func TestStatusLifecycle(t *testing.T) {
	sel := map[string]string{"kbtest": "st"}
	createAll(t, node("st-1", sel), node("st-2", sel), config("st", 0, sel))

	bc := waitStatus(t, "st", func(bc *kbv1.BladeConfig) bool {
		return bc.Status.MatchedNodes == 2 && reason(bc, kbv1.BladeConfigProgressing) == "True/"+status.ReasonDaemonSetPending
	})
	if reason(bc, kbv1.BladeConfigReady) != "False/"+status.ReasonDaemonSetPending ||
		reason(bc, kbv1.BladeConfigDegraded) != "False/"+status.ReasonNotDegraded ||
		reason(bc, kbv1.BladeConfigConflict) != "False/"+status.ReasonNoConflict {
		t.Errorf("conditions %+v", bc.Status.Conditions)
	}

	setDSStatus(t, "st", 2, 1, 1)
	waitStatus(t, "st", func(bc *kbv1.BladeConfig) bool {
		return reason(bc, kbv1.BladeConfigProgressing) == "True/"+status.ReasonRollingOut && bc.Status.DaemonSet.DesiredNumberScheduled == 2
	})
	setDSStatus(t, "st", 2, 2, 1)
	waitStatus(t, "st", func(bc *kbv1.BladeConfig) bool {
		return reason(bc, kbv1.BladeConfigProgressing) == "True/"+status.ReasonAgentsNotReady
	})
	setDSStatus(t, "st", 2, 2, 2)
	waitStatus(t, "st", func(bc *kbv1.BladeConfig) bool {
		return reason(bc, kbv1.BladeConfigProgressing) == "True/"+status.ReasonApplyingConfig && bc.Status.AppliedNodes == 0
	})
	reportApplied(t, "st-1", "st", bc.Generation)
	reportApplied(t, "st-2", "st", bc.Generation)
	bc = waitStatus(t, "st", func(bc *kbv1.BladeConfig) bool {
		return reason(bc, kbv1.BladeConfigReady) == "True/"+status.ReasonReady && bc.Status.AppliedNodes == 2 &&
			reason(bc, kbv1.BladeConfigProgressing) == "False/"+status.ReasonComplete && bc.Status.DaemonSet.NumberReady == 2
	})

	// A new generation is not applied until the agents report it.
	orig := bc.DeepCopy()
	bc.Spec.Agent.Stealth = true
	if err := k8s.Patch(ctx(t), bc, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
	bc = waitStatus(t, "st", func(bc *kbv1.BladeConfig) bool {
		return bc.Status.AppliedNodes == 0 && reason(bc, kbv1.BladeConfigReady) == "False/"+status.ReasonApplyingConfig
	})
	for _, c := range bc.Status.Conditions {
		if c.ObservedGeneration != bc.Generation {
			t.Errorf("condition %s observedGeneration %d, want %d", c.Type, c.ObservedGeneration, bc.Generation)
		}
	}
	reportApplied(t, "st-1", "st", bc.Generation)
	reportApplied(t, "st-2", "st", bc.Generation)
	waitStatus(t, "st", func(bc *kbv1.BladeConfig) bool {
		return bc.Status.AppliedNodes == 2 && reason(bc, kbv1.BladeConfigReady) == "True/"+status.ReasonReady
	})

	// A node that leaves is no longer counted.
	patchLabels(t, "st-2", nil, "kbtest")
	waitStatus(t, "st", func(bc *kbv1.BladeConfig) bool {
		return bc.Status.MatchedNodes == 1 && bc.Status.AppliedNodes == 1
	})
}

func TestStatusInvalidSelectorIsDegraded(t *testing.T) {
	bc := &kbv1.BladeConfig{ObjectMeta: metav1.ObjectMeta{Name: "st-invalid"}, Spec: kbv1.BladeConfigSpec{
		NodeSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "kbtest", Operator: "Sometimes"}}},
	}}
	createAll(t, bc)
	bc = waitStatus(t, "st-invalid", func(bc *kbv1.BladeConfig) bool {
		return reason(bc, kbv1.BladeConfigDegraded) == "True/"+status.ReasonInvalidSelector
	})
	if reason(bc, kbv1.BladeConfigReady) != "False/"+status.ReasonInvalidSelector {
		t.Errorf("Ready %s", reason(bc, kbv1.BladeConfigReady))
	}
	// Fixing it clears Degraded at the new generation.
	orig := bc.DeepCopy()
	bc.Spec.NodeSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"kbtest": "st-invalid"}}
	if err := k8s.Patch(ctx(t), bc, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, "st-invalid", func(bc *kbv1.BladeConfig) bool {
		return reason(bc, kbv1.BladeConfigDegraded) == "False/"+status.ReasonNotDegraded
	})
}

func TestFinalizerCleanup(t *testing.T) {
	sel := map[string]string{"kbtest": "fin"}
	createAll(t, node("fin-1", sel), node("fin-2", sel), config("fin", 0, sel))
	waitLabels(t, map[string]string{"fin-1": "fin", "fin-2": "fin"})
	waitDS(t, "fin", func(*appsv1.DaemonSet) bool { return true })
	eventually(t, "finalizer", func() (bool, error) {
		return len(getConfig(t, "fin").Finalizers) == 1, nil
	})
	if err := k8s.Delete(ctx(t), getConfig(t, "fin")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "BladeConfig gone", func() (bool, error) {
		err := k8s.Get(ctx(t), types.NamespacedName{Name: "fin"}, &kbv1.BladeConfig{})
		return client.IgnoreNotFound(err) == nil && err != nil, nil
	})
	if _, err := getDS(t, "fin"); client.IgnoreNotFound(err) != nil || err == nil {
		t.Errorf("DaemonSet still there (err %v)", err)
	}
	waitLabels(t, map[string]string{"fin-1": "", "fin-2": ""})
}

func TestUninstall(t *testing.T) {
	n := node("un-1", map[string]string{kbv1.LabelSoC: "bcm2711", kbv1.LabelBlade: "true", "keep": "me"})
	n.Spec.Taints = []corev1.Taint{{Key: kbv1.TaintThermalCritical, Effect: corev1.TaintEffectNoSchedule}, {Key: "other", Effect: corev1.TaintEffectNoSchedule}}
	createAll(t, n)
	n.Status.Conditions = []corev1.NodeCondition{{Type: kbv1.NodeConditionThermalCritical, Status: corev1.ConditionTrue}, {Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	if err := k8s.Status().Update(ctx(t), n); err != nil {
		t.Fatal(err)
	}
	if _, err := cleanupUninstall(t); err != nil {
		t.Fatal(err)
	}
	got := &corev1.Node{}
	if err := k8s.Get(ctx(t), types.NamespacedName{Name: "un-1"}, got); err != nil {
		t.Fatal(err)
	}
	for k := range got.Labels {
		if len(k) > 13 && k[:13] == "kubeblade.io/" {
			t.Errorf("label %s left behind", k)
		}
	}
	taints := map[string]bool{}
	for _, tn := range got.Spec.Taints {
		taints[tn.Key] = true
	}
	if got.Labels["keep"] != "me" || taints[kbv1.TaintThermalCritical] || !taints["other"] ||
		len(got.Status.Conditions) != 1 || got.Status.Conditions[0].Type != corev1.NodeReady {
		t.Errorf("uninstall touched what is not kubeblade's or left kubeblade's: %v %v %v", got.Labels, got.Spec.Taints, got.Status.Conditions)
	}
}

// TestStatusApplyFailureIsDegraded: a BladeConfig the CRD accepts but whose
// DaemonSet the API server refuses (requests above limits) is Degraded with
// the API server's words at the current generation, with a Warning Event,
// and recovers when fixed.
func TestStatusApplyFailureIsDegraded(t *testing.T) {
	bc := config("st-refused", 0, map[string]string{"kbtest": "st-refused"})
	bc.Spec.DaemonSet.Resources = &corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
	}
	createAll(t, bc)
	bc = waitStatus(t, "st-refused", func(bc *kbv1.BladeConfig) bool {
		return reason(bc, kbv1.BladeConfigDegraded) == "True/"+status.ReasonApplyFailed
	})
	c := meta.FindStatusCondition(bc.Status.Conditions, kbv1.BladeConfigDegraded)
	if !strings.Contains(c.Message, "must be less than or equal to cpu limit") || !strings.Contains(c.Message, daemonset.ControllerName) {
		t.Errorf("Degraded message %q, want the controller and the API server's reason", c.Message)
	}
	if c.ObservedGeneration != bc.Generation {
		t.Errorf("Degraded at generation %d, the config is at %d", c.ObservedGeneration, bc.Generation)
	}
	for _, typ := range []string{kbv1.BladeConfigReady, kbv1.BladeConfigProgressing} {
		if got := reason(bc, typ); got != "False/"+status.ReasonApplyFailed {
			t.Errorf("%s = %s, want False/%s: nothing progresses while the DaemonSet is refused", typ, got, status.ReasonApplyFailed)
		}
	}
	eventually(t, "a Warning Event on the BladeConfig", func() (bool, error) {
		var evs eventsv1.EventList
		if err := k8s.List(ctx(t), &evs); err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.Regarding.Kind == "BladeConfig" && e.Regarding.Name == "st-refused" && e.Type == corev1.EventTypeWarning &&
				e.Reason == status.ReasonApplyFailed && strings.Contains(e.Note, "must be less than or equal to cpu limit") {
				return true, nil
			}
		}
		return false, nil
	})

	// The fix: Degraded clears at the new generation and the DaemonSet exists.
	orig := bc.DeepCopy()
	bc.Spec.DaemonSet.Resources = nil
	if err := k8s.Patch(ctx(t), bc, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, "st-refused", func(bc *kbv1.BladeConfig) bool {
		return reason(bc, kbv1.BladeConfigDegraded) == "False/"+status.ReasonNotDegraded
	})
	if _, err := getDS(t, "st-refused"); err != nil {
		t.Errorf("DaemonSet after the fix: %v", err)
	}
}
