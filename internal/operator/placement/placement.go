// Package placement decides which BladeConfig each Node belongs to. It is
// pure: given BladeConfigs and Node labels it returns the winner per Node
// and the Nodes each config lost. The assignment controller writes its
// answer as Node labels and the status controller reports it; both call
// this package, so they cannot disagree.
package placement

import (
	"cmp"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"k8s.io/apimachinery/pkg/util/validation"

	kbv1 "github.com/kubeblade/kubeblade/api/v1alpha1"
)

// DefaultSelector is used when a BladeConfig has no spec.nodeSelector.
var DefaultSelector = labels.SelectorFromSet(labels.Set{"kubernetes.io/arch": "arm64"})

// MaxConflictingNodes caps status.conflictingNodes.
const MaxConflictingNodes = 20

// Config is one BladeConfig as placement sees it.
type Config struct {
	Name     string
	Priority int32
	Created  metav1.Time
	Selector labels.Selector
}

// Node is one Node's name and labels.
type Node struct {
	Name   string
	Labels map[string]string
}

// NodesOf takes the names and labels of Node metadata, which is all
// placement needs (the operator caches nothing else of Nodes).
func NodesOf(items []metav1.PartialObjectMetadata) []Node {
	out := make([]Node, len(items))
	for i := range items {
		out[i] = Node{Name: items[i].Name, Labels: items[i].Labels}
	}
	return out
}

// FromBladeConfig compiles a BladeConfig. An invalid selector matches
// nothing (the API server's schema makes it unlikely), and the error is
// returned so the caller can report it.
func FromBladeConfig(bc *kbv1.BladeConfig) (Config, error) {
	c := Config{Name: bc.Name, Priority: bc.Spec.Priority, Created: bc.CreationTimestamp, Selector: DefaultSelector}
	if bc.Spec.NodeSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(bc.Spec.NodeSelector)
		if err != nil {
			c.Selector = labels.Nothing()
			return c, err
		}
		c.Selector = sel
	}
	return c, nil
}

// Candidate reports whether a Node with these labels may be assigned at
// all: a node the agent found not to be a blade never is.
func Candidate(nodeLabels map[string]string) bool {
	return nodeLabels[kbv1.LabelBlade] != "false"
}

// Result is the assignment of every Node.
type Result struct {
	// Winner maps each candidate Node to the config it belongs to. Nodes
	// that no config selects are absent.
	Winner map[string]string
	// Matched counts the Nodes each config won.
	Matched map[string]int
	// Conflicts lists, per config, the Nodes it selects but lost to
	// another config, sorted by name.
	Conflicts map[string][]string
}

// Less orders configs by precedence: highest priority first, then the
// oldest, then the name.
func Less(a, b Config) bool { return compare(a, b) < 0 }

func compare(a, b Config) int {
	if a.Priority != b.Priority {
		return cmp.Compare(b.Priority, a.Priority)
	}
	if !a.Created.Equal(&b.Created) {
		if a.Created.Before(&b.Created) {
			return -1
		}
		return 1
	}
	return cmp.Compare(a.Name, b.Name)
}

// Compute assigns every Node. Configs may come in any order.
func Compute(configs []Config, nodes []Node) Result {
	ordered := slices.Clone(configs)
	slices.SortFunc(ordered, compare)
	r := Result{Winner: make(map[string]string, len(nodes)), Matched: map[string]int{}, Conflicts: map[string][]string{}}
	for _, c := range ordered {
		r.Matched[c.Name] = 0
	}
	for _, n := range nodes {
		if !Candidate(n.Labels) {
			continue
		}
		set := labels.Set(n.Labels)
		winner := ""
		for _, c := range ordered {
			if !c.Selector.Matches(set) {
				continue
			}
			if winner == "" {
				winner = c.Name
				r.Winner[n.Name] = winner
				r.Matched[winner]++
				continue
			}
			r.Conflicts[c.Name] = append(r.Conflicts[c.Name], n.Name)
		}
	}
	for k := range r.Conflicts {
		slices.Sort(r.Conflicts[k])
	}
	return r
}

// Eligible compiles the configs that may win Nodes: not being deleted and
// with a name that fits in a label value. byName holds every config given,
// eligible or not.
func Eligible(items []kbv1.BladeConfig) (configs []Config, byName map[string]*kbv1.BladeConfig) {
	byName = map[string]*kbv1.BladeConfig{}
	for i := range items {
		bc := &items[i]
		byName[bc.Name] = bc
		if !bc.DeletionTimestamp.IsZero() || len(validation.IsValidLabelValue(bc.Name)) > 0 {
			continue
		}
		c, _ := FromBladeConfig(bc) // an invalid selector matches nothing; status reports it
		configs = append(configs, c)
	}
	return configs, byName
}
