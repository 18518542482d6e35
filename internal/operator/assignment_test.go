package operator_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbv1 "github.com/kubeblade/kubeblade/api/v1alpha1"
)

func config(name string, prio int32, sel map[string]string) *kbv1.BladeConfig {
	return &kbv1.BladeConfig{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       kbv1.BladeConfigSpec{Priority: prio, NodeSelector: &metav1.LabelSelector{MatchLabels: sel}},
	}
}

// labelsOf returns node -> kubeblade.io/config for the named nodes.
func labelsOf(ctx context.Context, names ...string) (map[string]string, error) {
	out := map[string]string{}
	for _, n := range names {
		node := &corev1.Node{}
		if err := k8s.Get(ctx, types.NamespacedName{Name: n}, node); err != nil {
			return nil, err
		}
		out[n] = node.Labels[kbv1.LabelConfig]
	}
	return out, nil
}

func waitLabels(t *testing.T, want map[string]string) {
	t.Helper()
	var names []string
	for n := range want {
		names = append(names, n)
	}
	slices.Sort(names)
	var diff string
	eventually(t, "node labels", func() (bool, error) {
		got, err := labelsOf(ctx(t), names...)
		if err != nil {
			return false, err
		}
		diff = cmp.Diff(want, got)
		return diff == "", nil
	})
	_ = diff
}

func patchLabels(t *testing.T, name string, set map[string]string, remove ...string) {
	t.Helper()
	n := &corev1.Node{}
	if err := k8s.Get(ctx(t), types.NamespacedName{Name: name}, n); err != nil {
		t.Fatal(err)
	}
	orig := n.DeepCopy()
	for k, v := range set {
		n.Labels[k] = v
	}
	for _, k := range remove {
		delete(n.Labels, k)
	}
	if err := k8s.Patch(ctx(t), n, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
}

func getConfig(t *testing.T, name string) *kbv1.BladeConfig {
	t.Helper()
	bc := &kbv1.BladeConfig{}
	if err := k8s.Get(ctx(t), types.NamespacedName{Name: name}, bc); err != nil {
		t.Fatal(err)
	}
	return bc
}

func TestAssignmentPrioritiesOverlapsAndChurn(t *testing.T) {
	sel := map[string]string{"kbtest": "assign"}
	gold := map[string]string{"kbtest": "assign", "tier": "gold"}
	createAll(t,
		node("as-1", map[string]string{"kbtest": "assign"}),
		node("as-2", map[string]string{"kbtest": "assign"}),
		node("as-3", map[string]string{"kbtest": "assign", "tier": "gold"}),
		node("as-4", map[string]string{"kbtest": "assign", kbv1.LabelBlade: "false"}),
		node("as-5", map[string]string{"kbtest": "other"}),
		config("as-low", 0, sel),
		config("as-high", 10, gold),
	)
	waitLabels(t, map[string]string{"as-1": "as-low", "as-2": "as-low", "as-3": "as-high", "as-4": "", "as-5": ""})

	eventually(t, "Conflict on the losing config", func() (bool, error) {
		low, high := getConfig(t, "as-low"), getConfig(t, "as-high")
		return meta.IsStatusConditionTrue(low.Status.Conditions, kbv1.BladeConfigConflict) &&
			slices.Equal(low.Status.ConflictingNodes, []string{"as-3"}) &&
			meta.IsStatusConditionFalse(high.Status.Conditions, kbv1.BladeConfigConflict) &&
			low.Status.MatchedNodes == 2 && high.Status.MatchedNodes == 1, nil
	})
	c := meta.FindStatusCondition(getConfig(t, "as-low").Status.Conditions, kbv1.BladeConfigConflict)
	if want := "as-3 (as-high)"; !strings.Contains(c.Message, want) {
		t.Errorf("Conflict message %q does not name %q", c.Message, want)
	}

	// Churn: the gold node leaves the high config, a node leaves every
	// selector, another turns out not to be a blade, a new one arrives.
	patchLabels(t, "as-3", nil, "tier")
	patchLabels(t, "as-1", nil, "kbtest")
	patchLabels(t, "as-2", map[string]string{kbv1.LabelBlade: "false"})
	patchLabels(t, "as-5", map[string]string{"kbtest": "assign", "tier": "gold"})
	waitLabels(t, map[string]string{"as-1": "", "as-2": "", "as-3": "as-low", "as-4": "", "as-5": "as-high"})

	// A priority change moves nodes: low now outranks high.
	low := getConfig(t, "as-low")
	orig := low.DeepCopy()
	low.Spec.Priority = 20
	if err := k8s.Patch(ctx(t), low, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
	waitLabels(t, map[string]string{"as-3": "as-low", "as-5": "as-low"})
	eventually(t, "Conflict moves to the other config", func() (bool, error) {
		low, high := getConfig(t, "as-low"), getConfig(t, "as-high")
		return meta.IsStatusConditionFalse(low.Status.Conditions, kbv1.BladeConfigConflict) &&
			meta.IsStatusConditionTrue(high.Status.Conditions, kbv1.BladeConfigConflict) &&
			slices.Equal(high.Status.ConflictingNodes, []string{"as-5"}) &&
			high.Status.MatchedNodes == 0 && low.Status.ObservedGeneration == low.Generation, nil
	})
}

func TestAssignmentDefaultSelector(t *testing.T) {
	// The only test with arm64 nodes and a config without a selector.
	createAll(t,
		node("def-1", map[string]string{"kubernetes.io/arch": "arm64"}),
		node("def-2", map[string]string{"kubernetes.io/arch": "amd64"}),
		&kbv1.BladeConfig{ObjectMeta: metav1.ObjectMeta{Name: "def-config"}},
	)
	waitLabels(t, map[string]string{"def-1": "def-config", "def-2": ""})
}

func TestAssignmentRemovesStaleLabels(t *testing.T) {
	// A label naming a config that does not exist, on a node nobody selects.
	createAll(t, node("stale-1", map[string]string{kbv1.LabelConfig: "gone"}))
	waitLabels(t, map[string]string{"stale-1": ""})
}
