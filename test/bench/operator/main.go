// Command operator measures kubeblade-operator against a local API server
// (envtest): 1 000 Nodes and 3 overlapping BladeConfigs, the time until
// every Node carries the right kubeblade.io/config label and every config's
// status accounts for its Nodes, the requests the operator issued, and its
// writes per minute once everything settled (target: none).
//
//	go run ./test/bench/operator [-nodes 1000] [-steady 60s]
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	kbv1 "github.com/kubeblade/kubeblade/api/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/operator"
	"github.com/kubeblade/kubeblade/internal/operator/placement"
	"github.com/kubeblade/kubeblade/internal/testwait"
	"github.com/kubeblade/kubeblade/test/bench/internal/benchenv"
)

// counter counts the operator's requests by verb and resource.
type counter struct {
	mu     sync.Mutex
	counts map[string]int
	writes atomic.Int64
}

func (c *counter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if r.Method != http.MethodGet {
			c.writes.Add(1)
			c.mu.Lock()
			c.counts[r.Method+" "+resource(r.URL.Path)]++
			c.mu.Unlock()
		}
		return rt.RoundTrip(r)
	})
}

func (c *counter) reset() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.counts
	c.counts = map[string]int{}
	c.writes.Store(0)
	return out
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// resource reduces a request path to its resource (and subresource).
func resource(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	// /api/v1/[namespaces/ns/]res[/name[/sub]] or /apis/g/v/...
	i := 2
	if len(parts) > 0 && parts[0] == "apis" {
		i = 3
	}
	if len(parts) > i+1 && parts[i] == "namespaces" && len(parts) > i+2 {
		i += 2
	}
	if len(parts) <= i {
		return path
	}
	res := parts[i]
	if len(parts) > i+2 {
		res += "/" + parts[i+2]
	}
	return res
}

func main() {
	nodes := flag.Int("nodes", 1000, "Nodes to create")
	steady := flag.Duration("steady", 60*time.Second, "how long to count writes once settled")
	qps := flag.Float64("qps", 200, "operator client QPS (the operator's default)")
	burst := flag.Int("burst", 400, "operator client burst (the operator's default)")
	timeout := flag.Duration("timeout", 2*time.Minute, "give up if not settled after this long")
	flag.Parse()
	if err := run(*nodes, *steady, float32(*qps), *burst, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(nNodes int, steady time.Duration, qps float32, burst int, timeout time.Duration) error {
	env, err := benchenv.Start(benchenv.Options{AdminQPS: 1000, AdminBurst: 2000})
	if err != nil {
		return err
	}
	defer env.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	admin := env.Admin
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kubeblade-system"}}); err != nil {
		return err
	}

	// Fixture: every node arm64; a third in zone a; a fifth gold.
	start := time.Now()
	in := make([]placement.Node, nNodes)
	objs := make([]*corev1.Node, nNodes)
	for i := range nNodes {
		l := map[string]string{"kubernetes.io/arch": "arm64"}
		if i%3 == 0 {
			l["zone"] = "a"
		}
		if i%5 == 0 {
			l["tier"] = "gold"
		}
		name := benchenv.NodeName(i)
		in[i] = placement.Node{Name: name, Labels: l}
		objs[i] = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}
	}
	if err := benchenv.CreateNodes(ctx, admin, 16, objs); err != nil {
		return err
	}
	fmt.Printf("fixture: %d nodes created in %s\n", nNodes, time.Since(start).Round(time.Millisecond))

	configs := []*kbv1.BladeConfig{
		{ObjectMeta: metav1.ObjectMeta{Name: "bench-all"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "bench-zone-a"}, Spec: kbv1.BladeConfigSpec{Priority: 5,
			NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"zone": "a"}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "bench-gold"}, Spec: kbv1.BladeConfigSpec{Priority: 10,
			NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "gold"}}}},
	}
	var compiled []placement.Config
	for _, bc := range configs {
		if err := admin.Create(ctx, bc); err != nil {
			return err
		}
		c, _ := placement.FromBladeConfig(bc)
		compiled = append(compiled, c)
	}
	want := placement.Compute(compiled, in)

	cs, err := kubernetes.NewForConfig(env.AdminConfig)
	if err != nil {
		return err
	}
	nodeInf := informers.NewSharedInformerFactory(cs, 0).Core().V1().Nodes().Informer()
	go nodeInf.RunWithContext(ctx)
	if !toolscache.WaitForCacheSync(ctx.Done(), nodeInf.HasSynced) {
		return fmt.Errorf("the harness's Node informer did not sync")
	}
	nodeStore := nodeInf.GetStore()
	memBefore := heapInUse()

	opCfg := rest.CopyConfig(env.Config)
	opCfg.QPS, opCfg.Burst = qps, burst
	cnt := &counter{counts: map[string]int{}}
	opCfg.WrapTransport = cnt.wrap
	o := operator.DefaultOptions()
	o.DaemonSet.Image = "ghcr.io/kubeblade/kubeblade:bench"
	mgr, err := ctrl.NewManager(opCfg, operator.ManagerOptions(o, ctrl.Options{
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		LeaderElection:         true,
	}))
	if err != nil {
		return err
	}
	if err := operator.Setup(ctx, mgr, o); err != nil {
		return err
	}
	start = time.Now()
	go func() {
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "manager:", err)
			os.Exit(1)
		}
	}()

	// Both milestones are timed from start. Nodes are counted in the
	// harness's own informer, synced before the operator starts: listing
	// 10 000 Nodes at every poll would load the API server the operator is
	// measured against.
	var assigned, accounted time.Duration
	err = testwait.Poll(ctx, timeout, func(ctx context.Context) (bool, string) {
		if assigned == 0 {
			ok := 0
			for _, o := range nodeStore.List() {
				n := o.(*corev1.Node)
				if n.Labels[kbv1.LabelConfig] == want.Winner[n.Name] {
					ok++
				}
			}
			if ok == nNodes {
				assigned = time.Since(start)
			}
		}
		if assigned != 0 && accounted == 0 {
			var bl kbv1.BladeConfigList
			if err := admin.List(ctx, &bl); err != nil {
				return false, err.Error()
			}
			ok := 0
			for _, bc := range bl.Items {
				if bc.Status.ObservedGeneration == bc.Generation && int(bc.Status.MatchedNodes) == want.Matched[bc.Name] &&
					len(bc.Status.Conditions) == 4 {
					ok++
				}
			}
			if ok == len(configs) {
				accounted = time.Since(start)
			}
		}
		return assigned != 0 && accounted != 0, fmt.Sprintf("assigned after %s, accounted after %s (0: not yet)", assigned, accounted)
	})
	if err != nil {
		return fmt.Errorf("not settled after %s: %w", timeout, err)
	}
	settle := cnt.reset()
	fmt.Printf("all %d nodes assigned after %s; all %d BladeConfig statuses account for them after %s\n",
		nNodes, assigned.Round(time.Millisecond), len(configs), accounted.Round(time.Millisecond))
	for name, n := range want.Matched {
		fmt.Printf("  %-14s %4d nodes, %d conflicting\n", name, n, len(want.Conflicts[name]))
	}
	printCounts("writes until settled", settle)

	fmt.Printf("counting writes for %s at steady state...\n", steady)
	time.Sleep(steady) // the measurement window itself
	st := cnt.reset()
	total, lease := 0, 0
	for k, v := range st {
		total += v
		if strings.Contains(k, "leases") {
			lease += v
		}
	}
	printCounts("writes at steady state", st)
	perMin := func(n int) float64 { return float64(n) / steady.Minutes() }
	fmt.Printf("steady state: %.1f writes/min excluding leader-election lease renewals (%.1f/min including them)\n",
		perMin(total-lease), perMin(total))
	// The operator runs in this process: its memory is the heap it added
	// (the harness's own Node informer was counted before it started).
	api, etcd, err := env.ControlPlaneMemory()
	if err != nil {
		return err
	}
	self, err := benchenv.SelfMemory()
	if err != nil {
		return err
	}
	fmt.Printf("memory: operator heap in use %.1f MiB (process RSS %.1f MiB); kube-apiserver %.0f MiB resident (peak %.0f), etcd %.0f MiB (peak %.0f)\n",
		float64(heapInUse()-memBefore)/(1<<20), benchenv.MiB(self.RSS), benchenv.MiB(api.RSS), benchenv.MiB(api.Peak), benchenv.MiB(etcd.RSS), benchenv.MiB(etcd.Peak))
	return nil
}

func printCounts(title string, m map[string]int) {
	keys := make([]string, 0, len(m))
	total := 0
	for k, v := range m {
		keys = append(keys, k)
		total += v
	}
	sort.Strings(keys)
	fmt.Printf("%s: %d\n", title, total)
	for _, k := range keys {
		fmt.Printf("  %-45s %5d\n", k, m[k])
	}
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}
