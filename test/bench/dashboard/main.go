// Command dashboard measures the rack view with many simulated blades on a
// local API server (envtest): `bladectl dashboard` as its own process, the
// page in headless Chromium. It reports the page's first paint, the time
// until the blades in view are drawn and the page answers, how soon the far
// end of the rack shows when scrolled to, the browser's memory, and the CPU
// of the dashboard server and of the browser and the bytes the server sends
// while every blade's temperature changes every 5 s (N/5 Blade status
// writes per second), plus how soon a change shows on the page under that
// load. Its last line, "dashboard-result k=v ...", is for scripts
// (hack/bench-dashboard.sh).
//
//	go run ./test/bench/dashboard -bladectl bin/bladectl [-blades 1000] [-window 60s]
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/performance"
	"github.com/chromedp/chromedp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeblade/kubeblade/api/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/dashboard"
	"github.com/kubeblade/kubeblade/internal/testbrowser"
	"github.com/kubeblade/kubeblade/internal/testwait"
	"github.com/kubeblade/kubeblade/test/bench/internal/benchenv"
)

func main() {
	var o options
	flag.StringVar(&o.bladectl, "bladectl", "bin/bladectl", "the bladectl binary to measure")
	flag.IntVar(&o.blades, "blades", 1000, "simulated blades (20 per chassis)")
	flag.DurationVar(&o.period, "period", 5*time.Second, "every blade's temperature changes once per period")
	flag.DurationVar(&o.window, "window", 60*time.Second, "how long to measure CPU under load")
	flag.IntVar(&o.probes, "probes", 20, "LED changes timed from the API write to the page")
	flag.IntVar(&o.writers, "writers", 64, "concurrent Blade status writes of the load")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "bench dashboard:", err)
		os.Exit(1)
	}
}

type options struct {
	bladectl string
	blades   int
	period   time.Duration
	window   time.Duration
	probes   int
	writers  int
}

// result is the run's figures, printed as one "dashboard-result k=v ..."
// line at the end for scripts (hack/bench-dashboard.sh).
type result struct {
	kv []string
}

func (r *result) add(k string, format string, v any) {
	r.kv = append(r.kv, k+"="+fmt.Sprintf(format, v))
}

// marksJS reads the page's own User Timing marks, relative to the
// navigation's start: Chromium's first contentful paint, and the rack
// view's kubeblade:snapshot-received, kubeblade:snapshot-drawn and (a page
// that draws only what is in view) kubeblade:view-drawn. "usable" is when
// what is in view was drawn: view-drawn on a page that draws lazily
// (main#racks has data-lazy), else snapshot-drawn, when every blade was.
const marksJS = `(() => {
	const at = (n) => (performance.getEntriesByName(n)[0] || {startTime: -1}).startTime;
	const lazy = document.querySelector("#racks").hasAttribute("data-lazy");
	const m = {fcp: at("first-contentful-paint"), received: at("kubeblade:snapshot-received"),
		drawn: at("kubeblade:snapshot-drawn"), view: at("kubeblade:view-drawn"), now: performance.now()};
	m.usable = lazy ? m.view : m.drawn;
	m.cards = document.querySelectorAll("article.blade").length;
	return m;
})()`

// inViewJS names the blades whose cards are on the screen.
const inViewJS = `[...document.querySelectorAll("article.blade")].filter((c) => {
	const r = c.getBoundingClientRect(); return r.bottom > 0 && r.top < innerHeight && !c.hidden;
}).map((c) => c.dataset.name)`

func run(o options) error {
	var res result
	res.add("blades", "%d", o.blades)
	fmt.Printf("machine: %d CPUs, load %s\n", nproc(), loadavg())
	res.add("load_before", "%s", strings.ReplaceAll(loadavg(), " ", "/"))
	env, err := benchenv.Start(benchenv.Options{AdminQPS: 2000, AdminBurst: 4000})
	if err != nil {
		return err
	}
	defer env.Stop()
	ctx := context.Background()

	start := time.Now()
	if err := createBlades(ctx, env.Admin, o.blades); err != nil {
		return err
	}
	fmt.Printf("fixtures: %d Nodes and Blades in %d chassis created in %.1f s\n", o.blades, (o.blades+19)/20, time.Since(start).Seconds())

	dir, err := os.MkdirTemp("", "bench-dashboard")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := writeKubeconfig(kubeconfig, env); err != nil {
		return err
	}
	srv, url, err := startDashboard(o.bladectl, kubeconfig)
	if err != nil {
		return err
	}
	defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
	srvPID := []int{srv.Process.Pid}
	// The dashboard server lists every Blade and Node before it serves a
	// full snapshot; a page opened earlier would time the listing.
	if err := testwait.Poll(ctx, 5*time.Minute, func(context.Context) (bool, string) {
		st, err := httpGetStatus(url)
		return err == nil && st.Synced, fmt.Sprint(st, err)
	}); err != nil {
		return fmt.Errorf("bladectl dashboard never listed the blades: %w", err)
	}

	b, err := testbrowser.Start(ctx)
	if err != nil {
		return err
	}
	defer b.Stop()
	tab, cancel := chromedp.NewContext(b.Ctx)
	defer cancel()
	if err := chromedp.Do(tab, chromedp.EmulateViewport(1920, 1080), chromedp.Navigate("about:blank")); err != nil {
		return err
	}

	// First paint and the rack, on a cold page.
	sentBefore, err := bytesWritten(srvPID)
	if err != nil {
		return err
	}
	if err := chromedp.Do(tab, chromedp.Navigate(url)); err != nil {
		return err
	}
	var marks map[string]float64
	if err := testwait.Poll(ctx, 5*time.Minute, func(context.Context) (bool, string) {
		marks, err = chromedp.Run(tab, chromedp.Evaluate[map[string]float64](marksJS))
		return err == nil && marks["usable"] >= 0 && marks["cards"] > 0, fmt.Sprint(marks, err)
	}); err != nil {
		return fmt.Errorf("the page never showed the blades: %w", err)
	}
	// The page answers a script only when its main thread is free again.
	answering, err := chromedp.Run(tab, chromedp.Evaluate[float64](`performance.now()`))
	if err != nil {
		return err
	}
	sentAfter, _ := bytesWritten(srvPID)
	fmt.Printf("first contentful paint %.0f ms; snapshot of %d blades received at %.0f ms, built at %.0f ms; in-view blades drawn (usable) at %.0f ms; "+
		"main thread free by %.0f ms (after navigating); %d cards in the DOM; the server wrote %.1f MiB for the load\n",
		marks["fcp"], o.blades, marks["received"], marks["drawn"], marks["usable"], answering, int(marks["cards"]), float64(sentAfter-sentBefore)/(1<<20))
	res.add("fcp_ms", "%.0f", marks["fcp"])
	res.add("snapshot_ms", "%.0f", marks["received"])
	res.add("usable_ms", "%.0f", marks["usable"])
	res.add("answering_ms", "%.0f", answering)
	res.add("cards", "%d", int(marks["cards"]))
	res.add("load_mib", "%.1f", float64(sentAfter-sentBefore)/(1<<20))
	heap, nodes, err := pageMetrics(tab)
	if err != nil {
		return err
	}
	pss := pssMiB(browserPIDs(b.Profile))
	fmt.Printf("browser after load: JS heap %.1f MiB, %d DOM nodes, Chromium PSS %.0f MiB (all its processes)\n", heap, nodes, pss)
	res.add("heap_mib", "%.1f", heap)
	res.add("dom_nodes", "%d", nodes)
	res.add("pss_mib", "%.0f", pss)

	// The far end of the rack: scrolled to the bottom, how soon its last
	// blade is drawn.
	last := benchenv.NodeName(o.blades - 1)
	scrolled := time.Now()
	if _, err := chromedp.Run(tab, chromedp.Evaluate[any](`window.scrollTo(0, document.documentElement.scrollHeight), null`)); err != nil {
		return err
	}
	if err := testwait.PollEvery(ctx, time.Minute, 10*time.Millisecond, func(context.Context) (bool, string) {
		names, err := chromedp.Run(tab, chromedp.Evaluate[[]string](inViewJS))
		return err == nil && slices.Contains(names, last), fmt.Sprint(len(names), err)
	}); err != nil {
		return fmt.Errorf("%s never showed at the bottom of the page: %w", last, err)
	}
	scroll := time.Since(scrolled)
	if _, err := chromedp.Run(tab, chromedp.Evaluate[any](`window.scrollTo(0, 0), null`)); err != nil {
		return err
	}
	fmt.Printf("scrolled to the bottom: %s drawn in view %d ms later\n", last, scroll.Milliseconds())
	res.add("scroll_ms", "%d", scroll.Milliseconds())

	// Load: every blade's temperature changes once per period, spread evenly.
	loadCtx, stopLoad := context.WithCancel(ctx)
	var writes, failures atomic.Int64
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stopLoad()
	wg.Go(func() {
		changeTemperatures(loadCtx, env.Admin, o.blades, o.period, max(o.writers, 1), &writes, &failures)
	})
	// Let the load settle for one period before measuring.
	time.Sleep(o.period)
	writes.Store(0)
	srvBefore, err := cpuTicks(srvPID)
	if err != nil {
		return err
	}
	wBefore, err := bytesWritten(srvPID)
	if err != nil {
		return err
	}
	brPIDs := browserPIDs(b.Profile)
	brBefore, _ := cpuTicks(brPIDs)
	mStart := time.Now()

	// Meanwhile: how soon an LED change shows on a blade in view, under
	// that load.
	var lat []time.Duration
	for i := range o.probes {
		names, err := chromedp.Run(tab, chromedp.Evaluate[[]string](inViewJS))
		if err != nil {
			return err
		}
		if len(names) == 0 {
			return errors.New("no blade in view")
		}
		name := names[rand.IntN(len(names))]
		color := fmt.Sprintf("#%02x%02x%02x", 1+i, 0x40, 0x80)
		patch := fmt.Sprintf(`{"status":{"leds":{"edge":{"color":%q,"pattern":"steady"}}}}`, color)
		w := time.Now()
		if err := env.Admin.Status().Patch(ctx, &v1alpha1.Blade{ObjectMeta: metav1.ObjectMeta{Name: name}}, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
			return err
		}
		js := fmt.Sprintf(`(document.querySelector('article.blade[data-name=%q] .led.edge') || {dataset: {}}).dataset.color === %q`, name, color)
		if err := testwait.Poll(ctx, 30*time.Second, func(context.Context) (bool, string) {
			ok, err := chromedp.Run(tab, chromedp.Evaluate[bool](js))
			return err == nil && ok, fmt.Sprint(err)
		}); err != nil {
			return fmt.Errorf("LED change on %s never showed: %w", name, err)
		}
		lat = append(lat, time.Since(w))
		time.Sleep(o.window / time.Duration(max(o.probes, 1))) // spreads the probes over the window
	}
	time.Sleep(time.Until(mStart.Add(o.window))) // the rest of the measurement window
	elapsed := time.Since(mStart)
	srvAfter, err := cpuTicks(srvPID)
	if err != nil {
		return err
	}
	wAfter, err := bytesWritten(srvPID)
	if err != nil {
		return err
	}
	brAfter, _ := cpuTicks(brPIDs)
	n := writes.Load()
	heap2, nodes2, err := pageMetrics(tab)
	if err != nil {
		return err
	}
	stopLoad()

	minutes := elapsed.Minutes()
	fmt.Printf("load: %d Blade status writes in %.0f s (%.0f/s, target %.0f/s), %d failed\n", n, elapsed.Seconds(),
		float64(n)/elapsed.Seconds(), float64(o.blades)/o.period.Seconds(), failures.Load())
	res.add("writes_per_s", "%.0f", float64(n)/elapsed.Seconds())
	res.add("target_per_s", "%.0f", float64(o.blades)/o.period.Seconds())
	sticks := srvAfter - srvBefore
	srvPSS := pssMiB(srvPID)
	fmt.Printf("dashboard server (bladectl) CPU %.1f %% of one core = %.2f CPU-s per minute (%.2f ms per Blade write), PSS %.0f MiB; "+
		"it wrote %.2f MiB per minute to the page (%.0f bytes per Blade write)\n", pct(sticks, elapsed), float64(sticks)/100/minutes,
		float64(sticks)*10/float64(max(n, 1)), srvPSS, float64(wAfter-wBefore)/(1<<20)/minutes, float64(wAfter-wBefore)/float64(max(n, 1)))
	res.add("server_cpu_s_per_min", "%.2f", float64(sticks)/100/minutes)
	res.add("server_ms_per_write", "%.2f", float64(sticks)*10/float64(max(n, 1)))
	res.add("server_pss_mib", "%.0f", srvPSS)
	res.add("sent_mib_per_min", "%.2f", float64(wAfter-wBefore)/(1<<20)/minutes)
	res.add("sent_bytes_per_write", "%.0f", float64(wAfter-wBefore)/float64(max(n, 1)))
	pss2 := pssMiB(browserPIDs(b.Profile))
	fmt.Printf("browser CPU %.1f %% of one core (all its processes), JS heap %.1f MiB, %d DOM nodes, Chromium PSS %.0f MiB\n",
		pct(brAfter-brBefore, elapsed), heap2, nodes2, pss2)
	res.add("browser_cpu_pct", "%.1f", pct(brAfter-brBefore, elapsed))
	res.add("heap_load_mib", "%.1f", heap2)
	res.add("dom_nodes_load", "%d", nodes2)
	res.add("pss_load_mib", "%.0f", pss2)
	if len(lat) > 0 {
		slices.Sort(lat)
		fmt.Printf("LED change shown on the page under load: p50 %d ms, max %d ms (%d probes)\n",
			lat[len(lat)/2].Milliseconds(), lat[len(lat)-1].Milliseconds(), len(lat))
		res.add("led_p50_ms", "%d", lat[len(lat)/2].Milliseconds())
		res.add("led_max_ms", "%d", lat[len(lat)-1].Milliseconds())
	}
	fmt.Printf("machine load after: %s\n", loadavg())
	res.add("load_after", "%s", strings.ReplaceAll(loadavg(), " ", "/"))
	fmt.Println("dashboard-result " + strings.Join(res.kv, " "))
	return nil
}

// httpGetStatus reads the dashboard's status the way its page starts: the
// first message of its stream, the snapshot.
func httpGetStatus(url string) (dashboard.Status, error) {
	var st dashboard.Status
	req, err := http.NewRequest(http.MethodGet, url+"api/stream", nil)
	if err != nil {
		return st, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	r := bufio.NewReaderSize(resp.Body, 1<<20)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return st, err
		}
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			var m struct {
				Status dashboard.Status `json:"status"`
			}
			err := json.Unmarshal([]byte(data), &m)
			return m.Status, err
		}
	}
}

func createBlades(ctx context.Context, c client.Client, n int) error {
	nodes := make([]*corev1.Node, n)
	for i := range nodes {
		nodes[i] = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: benchenv.NodeName(i), Labels: map[string]string{
			v1alpha1.LabelBlade: "true", v1alpha1.LabelConfig: "default",
			dashboard.LabelChassis: fmt.Sprintf("chassis-%02d", i/20+1), dashboard.LabelSlot: strconv.Itoa(i%20 + 1),
		}}}
	}
	if err := benchenv.CreateNodes(ctx, c, 32, nodes); err != nil {
		return err
	}
	return parallel(n, 32, func(i int) error {
		name := benchenv.NodeName(i)
		b := &v1alpha1.Blade{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if err := c.Create(ctx, b); err != nil {
			return err
		}
		t := int32(40 + i%25)
		rpm := int32(2730)
		b.Status = v1alpha1.BladeStatus{NodeName: name, State: v1alpha1.BladeStateIdle, SoC: "simulated", FanUnit: "standard",
			PowerSource: "poe-802.3at", TemperatureCelsius: &t, Fan: v1alpha1.BladeFanStatus{Percent: 35, RPM: &rpm, Mode: "auto"},
			LEDs: v1alpha1.BladeLEDsStatus{Top: v1alpha1.LEDStatus{Color: "#000000", Pattern: "off"},
				Edge: v1alpha1.LEDStatus{Color: "#001000", Pattern: "steady"}},
			HardwareBackend: "simulated", AgentVersion: "bench", Config: &v1alpha1.AppliedConfig{Name: "default", Generation: 1},
			HeartbeatTime: &metav1.Time{Time: time.Now()}}
		if i%97 == 0 {
			b.Status.LEDs.Edge = v1alpha1.LEDStatus{Color: "#100010", Pattern: "blink"}
			b.Status.Identify = true
		}
		return c.Status().Update(ctx, b)
	})
}

// changeTemperatures writes each blade's temperature once per period,
// spread evenly, as N agents whose SoCs drift would, from writers
// goroutines; a write none of them can start on time is skipped.
func changeTemperatures(ctx context.Context, c client.Client, n int, period time.Duration, writers int, writes, failures *atomic.Int64) {
	tick := time.NewTicker(period / time.Duration(n))
	defer tick.Stop()
	jobs := make(chan int, 64)
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for i := range jobs {
				patch := fmt.Sprintf(`{"status":{"temperatureCelsius":%d}}`, 40+rand.IntN(30))
				err := c.Status().Patch(ctx, &v1alpha1.Blade{ObjectMeta: metav1.ObjectMeta{Name: benchenv.NodeName(i)}},
					client.RawPatch(types.MergePatchType, []byte(patch)))
				if err == nil {
					writes.Add(1)
				} else if ctx.Err() == nil {
					failures.Add(1)
				}
			}
		})
	}
	for i := 0; ; i = (i + 1) % n {
		select {
		case <-ctx.Done():
			close(jobs)
			wg.Wait()
			return
		case <-tick.C:
			select {
			case jobs <- i:
			default: // the writers are behind: count it as not written
			}
		}
	}
}

func parallel(n, workers int, f func(i int) error) error {
	var next atomic.Int64
	var mu sync.Mutex
	var first error
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := f(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return first
}

func writeKubeconfig(path string, env *benchenv.Env) error {
	cfg := env.Config
	kc := clientcmdapi.NewConfig()
	kc.Clusters["bench"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["bench"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts["bench"] = &clientcmdapi.Context{Cluster: "bench", AuthInfo: "bench"}
	kc.CurrentContext = "bench"
	return clientcmd.WriteToFile(*kc, path)
}

var urlRe = regexp.MustCompile(`http://127\.0\.0\.1:\d+/`)

func startDashboard(bin, kubeconfig string) (*exec.Cmd, string, error) {
	cmd := exec.Command(bin, "dashboard", "--listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", err
	}
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	url := urlRe.FindString(line)
	if url == "" {
		_ = cmd.Process.Kill()
		return nil, "", fmt.Errorf("bladectl dashboard printed %q (%v)", line, err)
	}
	go func() { _, _ = bufio.NewReader(out).WriteTo(os.Stdout) }()
	return cmd, url, nil
}

func pageMetrics(tab context.Context) (heapMiB float64, domNodes int, err error) {
	res, err := chromedp.Run(tab, func(ctx context.Context, t *chromedp.Target) (performance.GetMetricsResult, error) {
		if _, err := cdp.Call(ctx, t, performance.Enable, performance.EnableParams{}); err != nil {
			return performance.GetMetricsResult{}, err
		}
		return cdp.Call(ctx, t, performance.GetMetrics, cdp.Empty{})
	})
	if err != nil {
		return 0, 0, err
	}
	for _, m := range res.Metrics {
		switch m.Name {
		case "JSHeapUsedSize":
			heapMiB = m.Value / (1 << 20)
		case "Nodes":
			domNodes = int(m.Value)
		}
	}
	return heapMiB, domNodes, nil
}

// browserPIDs are the processes of the browser with this profile.
func browserPIDs(profile string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(cmd), profile) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// cpuTicks is the user+system CPU time of the processes, in clock ticks.
func cpuTicks(pids []int) (int64, error) {
	var sum int64
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			return 0, err
		}
		// Fields after the command's closing parenthesis; utime and stime
		// are fields 14 and 15 of the whole line.
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
		u, _ := strconv.ParseInt(f[11], 10, 64)
		s, _ := strconv.ParseInt(f[12], 10, 64)
		sum += u + s
	}
	return sum, nil
}

// bytesWritten is what the processes wrote through write system calls
// (/proc/<pid>/io wchar): for bladectl dashboard, nearly all of it is the
// page's stream (its requests to the API server are small; it logs little).
func bytesWritten(pids []int) (int64, error) {
	var sum int64
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
		if err != nil {
			return 0, err
		}
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "wchar:"); ok {
				n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				sum += n
			}
		}
	}
	return sum, nil
}

// pct is CPU ticks (USER_HZ = 100 on Linux) over a wall time, in percent of one core.
func pct(ticks int64, d time.Duration) float64 { return float64(ticks) / 100 / d.Seconds() * 100 }

// pssMiB is the proportional set size of the processes: shared pages
// (Chromium's processes share many) are divided among their users, so the
// sum is what they take together.
func pssMiB(pids []int) float64 {
	var kb int64
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "Pss:"); ok {
				n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
				kb += n
			}
		}
	}
	return float64(kb) / 1024
}

func nproc() int {
	b, _ := os.ReadFile("/proc/cpuinfo")
	return strings.Count(string(b), "processor\t:")
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	return strings.Join(strings.Fields(string(b))[:3], " ")
}
