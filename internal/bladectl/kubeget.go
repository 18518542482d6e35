package bladectl

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/kubeblade/kubeblade/api/v1alpha1"
)

// outWide is `get`'s table with more columns, as in kubectl.
const outWide = "wide"

// wideAllowed: -o wide exists for the get commands only.
func wideAllowed(cmd *cobra.Command, output string) bool {
	return output == outWide && cmd.Parent() != nil && cmd.Parent().Name() == "get"
}

func newGetCmd(o *options) *cobra.Command {
	get := &cobra.Command{
		Use:   "get",
		Short: "List kubeblade objects from the Kubernetes API (get blades)",
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			return usagef("get %q: bladectl can get blades", args[0])
		},
	}
	get.AddCommand(&cobra.Command{
		Use:     "blades [NODE...]",
		Aliases: []string{"blade", "bl"},
		Short:   "List Blade objects, like kubectl get blades",
		Long: `get blades lists the Blade objects the agents keep (a Blade is named after
its node): all of them, the named nodes' (arguments or --node), or those
of the nodes matching --selector. -o wide adds RPM, SoC, identify, stealth
and capabilities; -o json|yaml prints the objects.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.all || len(o.blades) > 0 {
				return usagef("get blades reads the Kubernetes API: --blade and --all do not apply")
			}
			return o.getBlades(cmd.Context(), args)
		},
	})
	return get
}

// getBlades prints Blades. Named nodes without a Blade are failures, as
// with status; nodes found by a selector without one are just not listed.
func (o *options) getBlades(ctx context.Context, args []string) error {
	if o.kube.allNodes && o.kube.selector != "" {
		return usagef("use either --all-nodes or --selector")
	}
	k, err := o.kubeConn()
	if err != nil {
		return err
	}
	var names []string
	for _, n := range append(args, o.kube.nodes...) {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	explicit := len(names)

	var blades []*v1alpha1.Blade
	var results []result // one per named node, for the exit status
	if o.kube.selector != "" {
		sel, err := labels.Parse(o.kube.selector)
		if err != nil {
			return usagef("--selector %q: %v", o.kube.selector, err)
		}
		matched, err := k.nodesMatching(ctx, sel)
		if err != nil {
			return err
		}
		listed, err := k.listBlades(ctx)
		if err != nil {
			return err
		}
		for _, b := range listed {
			if slices.Contains(matched, b.Name) && !slices.Contains(names, b.Name) {
				names = append(names, b.Name)
			}
		}
	}
	if len(names) == 0 && o.kube.selector == "" {
		if blades, err = k.listBlades(ctx); err != nil {
			return err
		}
	} else {
		blades, results = k.getBlades(ctx, names)
	}

	p := o.printer()
	switch {
	case p.format == outTable || p.format == outWide:
		if len(blades) == 0 {
			if len(results) == 0 {
				fmt.Fprintln(o.env.Stderr, "No Blades found.")
			}
		} else if err := o.bladeTable(blades, p.format == outWide); err != nil {
			return err
		}
	case explicit == 1 && o.kube.selector == "" && len(blades) == 1:
		// One named Blade prints as the object, as kubectl does.
		if err := p.encode(forOutput(blades[0])); err != nil {
			return err
		}
	default:
		items := make([]*v1alpha1.Blade, len(blades))
		for i, b := range blades {
			items[i] = forOutput(b)
		}
		if err := p.encode(bladeListView{APIVersion: "v1", Kind: "List", Items: items}); err != nil {
			return err
		}
	}
	return o.finish(results)
}

// bladeListView is kubectl's List wrapper for -o json|yaml.
type bladeListView struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Items      []*v1alpha1.Blade `json:"items"`
}

// forOutput sets the type (which typed clients leave empty) and drops
// managedFields, as kubectl does by default.
func forOutput(b *v1alpha1.Blade) *v1alpha1.Blade {
	b = b.DeepCopy()
	b.APIVersion, b.Kind = v1alpha1.GroupVersion.String(), "Blade"
	b.ManagedFields = nil
	return b
}

func (k *kubeConn) listBlades(ctx context.Context) ([]*v1alpha1.Blade, error) {
	rctx, cancel := k.request(ctx)
	defer cancel()
	var l v1alpha1.BladeList
	if err := k.c.List(rctx, &l); err != nil {
		return nil, k.explain(ctx, err)
	}
	out := make([]*v1alpha1.Blade, len(l.Items))
	for i := range l.Items {
		out[i] = &l.Items[i]
	}
	slices.SortFunc(out, func(a, b *v1alpha1.Blade) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// getBlades reads the named Blades concurrently and returns those found,
// in the order named, and a result per name that carries any failure.
func (k *kubeConn) getBlades(ctx context.Context, names []string) ([]*v1alpha1.Blade, []result) {
	got := make([]*v1alpha1.Blade, len(names))
	results := make([]result, len(names))
	var wg sync.WaitGroup
	for i, n := range names {
		wg.Go(func() {
			var err error
			got[i], err = k.getBlade(ctx, n)
			results[i].Blade = n
			if err != nil {
				results[i].Error = err.Error()
			}
		})
	}
	wg.Wait()
	var blades []*v1alpha1.Blade
	for _, b := range got {
		if b != nil {
			blades = append(blades, b)
		}
	}
	return blades, results
}

func (o *options) bladeTable(blades []*v1alpha1.Blade, wide bool) error {
	header := "NODE\tTEMP\tFAN\tPOWER\tSTATE\tCONFIG\tAGE"
	if wide {
		header += "\tRPM\tSOC\tIDENTIFY\tSTEALTH\tCAPABILITIES"
	}
	now := o.env.Now()
	rows := make([][]string, 0, len(blades))
	for _, b := range blades {
		s := b.Status
		node := s.NodeName
		if node == "" {
			node = b.Name
		}
		temp := "-"
		if s.TemperatureCelsius != nil {
			temp = fmt.Sprintf("%d°C", *s.TemperatureCelsius)
		}
		fan := fmt.Sprintf("%d%%", s.Fan.Percent)
		if s.Fan.Mode != "" {
			fan += " " + s.Fan.Mode
		}
		config := "-"
		if s.Config != nil && s.Config.Name != "" {
			config = s.Config.Name
		}
		age := "<unknown>"
		if !b.CreationTimestamp.IsZero() {
			age = duration.HumanDuration(now.Sub(b.CreationTimestamp.Time))
		}
		row := []string{node, temp, fan, orDash(s.PowerSource), orDash(s.State), config, age}
		if wide {
			rpm := "-"
			if s.Fan.RPM != nil {
				rpm = strconv.Itoa(int(*s.Fan.RPM))
			}
			caps := "-"
			if len(s.Capabilities) > 0 {
				caps = strings.Join(s.Capabilities, ",")
			}
			row = append(row, rpm, orDash(s.SoC), strconv.FormatBool(s.Identify), strconv.FormatBool(s.Stealth), caps)
		}
		rows = append(rows, row)
	}
	return printer{format: outTable, out: o.env.Stdout}.table(header, rows)
}
