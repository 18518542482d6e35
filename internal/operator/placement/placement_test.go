package placement

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	kbv1 "github.com/kubeblade/kubeblade/api/v1alpha1"
)

func TestCompute(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Hour))
	all := labels.Everything()
	gold := labels.SelectorFromSet(labels.Set{"tier": "gold"})
	nodes := []Node{
		{Name: "n1", Labels: map[string]string{"tier": "gold"}},
		{Name: "n2", Labels: map[string]string{}},
		{Name: "n3", Labels: map[string]string{"kubeblade.io/blade": "false", "tier": "gold"}},
	}
	cases := map[string]struct {
		configs   []Config
		winner    map[string]string
		conflicts map[string][]string
	}{
		"highest priority wins": {
			configs:   []Config{{Name: "a", Priority: 1, Created: t0, Selector: all}, {Name: "b", Priority: 5, Created: t1, Selector: gold}},
			winner:    map[string]string{"n1": "b", "n2": "a"},
			conflicts: map[string][]string{"a": {"n1"}},
		},
		"tie goes to the oldest": {
			configs:   []Config{{Name: "a", Created: t1, Selector: all}, {Name: "b", Created: t0, Selector: all}},
			winner:    map[string]string{"n1": "b", "n2": "b"},
			conflicts: map[string][]string{"a": {"n1", "n2"}},
		},
		"then to the name": {
			configs:   []Config{{Name: "b", Created: t0, Selector: all}, {Name: "a", Created: t0, Selector: all}},
			winner:    map[string]string{"n1": "a", "n2": "a"},
			conflicts: map[string][]string{"b": {"n1", "n2"}},
		},
		"no overlap": {
			configs:   []Config{{Name: "g", Selector: gold}},
			winner:    map[string]string{"n1": "g"},
			conflicts: map[string][]string{},
		},
		"nothing selected": {
			configs:   []Config{{Name: "x", Selector: labels.Nothing()}},
			winner:    map[string]string{},
			conflicts: map[string][]string{},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := Compute(tc.configs, nodes)
			if diff := cmp.Diff(tc.winner, r.Winner); diff != "" {
				t.Errorf("winners (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.conflicts, r.Conflicts); diff != "" {
				t.Errorf("conflicts (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDefaultSelector(t *testing.T) {
	c, err := FromBladeConfig(&kbv1.BladeConfig{})
	if err != nil || !c.Selector.Matches(labels.Set{"kubernetes.io/arch": "arm64"}) || c.Selector.Matches(labels.Set{"kubernetes.io/arch": "amd64"}) {
		t.Errorf("default selector %v (%v)", c.Selector, err)
	}
}

func TestEligible(t *testing.T) {
	now := metav1.Now()
	items := []kbv1.BladeConfig{
		{ObjectMeta: metav1.ObjectMeta{Name: "ok"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "deleting", DeletionTimestamp: &now, Finalizers: []string{"x"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "a-name-far-too-long-for-a-label-value-because-label-values-stop-at-63"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "bad-selector"}, Spec: kbv1.BladeConfigSpec{NodeSelector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "k", Operator: "Sometimes"}}}}},
	}
	configs, byName := Eligible(items)
	var names []string
	for _, c := range configs {
		names = append(names, c.Name)
	}
	if diff := cmp.Diff([]string{"ok", "bad-selector"}, names); diff != "" {
		t.Errorf("eligible configs (-want +got):\n%s", diff)
	}
	if len(byName) != len(items) {
		t.Errorf("byName holds %d configs, want all %d", len(byName), len(items))
	}
	// An invalid selector is eligible but matches nothing.
	r := Compute(configs, []Node{{Name: "n", Labels: map[string]string{"k": "v", "kubernetes.io/arch": "arm64"}}})
	if diff := cmp.Diff(map[string]string{"n": "ok"}, r.Winner); diff != "" {
		t.Errorf("winners (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int{"ok": 1, "bad-selector": 0}, r.Matched); diff != "" {
		t.Errorf("matched (-want +got):\n%s", diff)
	}
}

func TestNodesOf(t *testing.T) {
	items := []metav1.PartialObjectMetadata{{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"x": "y"}}}, {ObjectMeta: metav1.ObjectMeta{Name: "b"}}}
	if diff := cmp.Diff([]Node{{Name: "a", Labels: map[string]string{"x": "y"}}, {Name: "b"}}, NodesOf(items)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
