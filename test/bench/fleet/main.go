// Command fleet runs a fleet of simulated blades in one process, each a
// real agent (simulated backend, agent loop, Kubernetes reporter with its
// own clients and watches), against one local API server (envtest), and
// measures what the fleet costs the cluster: the time until every Blade
// object exists, the time for a BladeConfig change to reach every blade,
// API writes per minute at steady state and memory per agent.
//
//	go run ./test/bench/fleet [-agents 1000] [-rate 0] [-settle 15s] [-quiet 90s] [-window 5m] [-fan-peers] [-profile DIR]
//
// Each agent has its own client, rate limiter, HTTP transport and so its own
// TCP and TLS connection to the API server, as agents on separate blades
// would (client-go would otherwise hand every agent of the process the same
// cached transport, k8s.io/client-go/transport/cache.go, v0.37.2; a dial
// function of each agent's own makes its transport its own). -rate starts
// the agents at that many per second, as a DaemonSet rollout would, instead
// of all at once.
//
// Besides the agents' own figures it reads what the fleet costs the control
// plane: kube-apiserver's CPU time over the start-up wave and over the
// steady window, its resident memory, and etcd's database size, before the
// agents started and after, each also per agent.
//
// -fan-peers declares blades 2i and 2i+1 each other's fan peer (Node
// annotation kubeblade.io/fan-peer): every agent also watches its peer's
// Blade and follows its demand, and the steady-state count shows what that
// costs in writes.
//
// -kill N runs the operator in the harness's process and, after the steady
// state, kills N agents at once (their contexts end; their Blades stay, as
// with a crashed pod), then times until the operator has marked every one of
// them stale (state Unknown). Three heartbeat periods at the default 5 min
// would be 15 min of waiting: -heartbeat shortens the agents' period for
// this measurement (every agent publishes its period, which the operator
// reads), and -window 0 skips the steady-state count, which a short
// heartbeat would distort.
//
// Steady state is what a settled blade costs: a heartbeat every 5 min.
// A config change moves the temperature, which is written once more
// MinInterval (1 min) later; -quiet waits past that, and the default
// window of one heartbeat period counts each blade's heartbeat once.
//
// A BladeConfig change is followed once a second on both sides of the wire
// (reach.go): the watch events kube-apiserver has sent and the agents that
// have applied the change, then the times by which half, 90 % and 99 % of
// them had. -profile DIR also writes CPU profiles of this process (until
// every agent applied it) and of kube-apiserver (60 s from the update).
//
// It prints human-readable progress and, last, one "fleet-result" line of
// key=value pairs that hack/bench.sh turns into the benchmark table.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentconfigv1 "github.com/kubeblade/kubeblade/api/agentconfig/v1alpha1"
	kbv1 "github.com/kubeblade/kubeblade/api/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/agent"
	"github.com/kubeblade/kubeblade/internal/config"
	"github.com/kubeblade/kubeblade/internal/hardware/simulated"
	"github.com/kubeblade/kubeblade/internal/kubeagent"
	"github.com/kubeblade/kubeblade/internal/testwait"
	"github.com/kubeblade/kubeblade/test/bench/internal/benchenv"
)

const configName = "fleet"

func main() {
	agents := flag.Int("agents", 1000, "simulated blades (and Nodes)")
	settle := flag.Duration("settle", 15*time.Second, "wait after start-up before changing the BladeConfig")
	quiet := flag.Duration("quiet", 90*time.Second, "wait after the config change before counting steady-state writes: past the one temperature-drift write MinInterval (1m) after it")
	window := flag.Duration("window", 5*time.Minute, "steady-state window; one heartbeat period (5m) counts every blade's heartbeat once")
	timeout := flag.Duration("timeout", 5*time.Minute, "give up on a phase after this long")
	fanPeers := flag.Bool("fan-peers", false, "pair the blades as fan peers (kubeblade.io/fan-peer on each Node)")
	heartbeat := flag.Duration("heartbeat", 0, "the agents' Blade heartbeat period (0: the agent's default, 5m)")
	kill := flag.Int("kill", 0, "after the steady state, kill this many agents at once and time the operator's stale detection (runs the operator)")
	rate := flag.Float64("rate", 0, "start the agents at this many per second (0: all at once)")
	flag.DurationVar(&handshakeTimeout, "tls-handshake-timeout", handshakeTimeout, "each agent's TLS handshake timeout (client-go's is 10s)")
	pingTimeout := flag.Duration("http2-ping-timeout", 0, "each agent's HTTP/2 health-check ping timeout (0: client-go's, 15s, or $HTTP2_PING_TIMEOUT_SECONDS)")
	profileDir := flag.String("profile", "", "write CPU profiles of the harness and of kube-apiserver over the BladeConfig change into this directory")
	flag.Parse()
	if *pingTimeout > 0 {
		// client-go reads it when it builds each transport
		// (k8s.io/apimachinery/pkg/util/net/http.go, v0.37.2).
		os.Setenv("HTTP2_PING_TIMEOUT_SECONDS", strconv.Itoa(int(pingTimeout.Seconds())))
	}
	p := params{n: *agents, settle: *settle, quiet: *quiet, window: *window, timeout: *timeout,
		fanPeers: *fanPeers, heartbeat: *heartbeat, kill: *kill, rate: *rate, profileDir: *profileDir}
	if err := run(p); err != nil {
		fmt.Fprintln(os.Stderr, "fleet:", err)
		os.Exit(1)
	}
}

// handshakeTimeout bounds each agent's TLS handshake with the API server.
// client-go sets 10 s on every transport it builds
// (k8s.io/client-go/transport/cache.go, v0.37.2). When this machine's two
// shared cores hold the control plane and thousands of agents, handshakes
// queue for longer than that: the agent gives up, the API server's work on
// it is lost, and the retry queues another, so a start-up wave turns into
// a storm of handshakes that measures the machine rather than what an agent
// costs. make bench-scale raises it (-tls-handshake-timeout) and says so.
var handshakeTimeout = 10 * time.Second

type blade struct {
	sim *simulated.Blade
	rep *kubeagent.Reporter
}

// params are the harness's flags (main says what each is).
type params struct {
	n                                         int
	settle, quiet, window, timeout, heartbeat time.Duration
	fanPeers                                  bool
	kill                                      int
	rate                                      float64
	profileDir                                string
}

func run(p params) error {
	n, settle, quiet, window, timeout := p.n, p.settle, p.quiet, p.window, p.timeout
	fanPeers, heartbeat, kill, rate := p.fanPeers, p.heartbeat, p.kill, p.rate
	klog.SetLogger(logr.Discard())
	// The API server's in-flight limits are raised with the fleet: every
	// agent starts with a burst of reads and writes, and past the limits
	// the API server answers 429 and the agents back off (seconds each).
	// The harness's client is in system:masters, which API Priority and
	// Fairness exempts, so these flags are the limits that matter.
	env, err := benchenv.Start(benchenv.Options{
		APIServerFlags: map[string]string{
			"max-requests-inflight":          strconv.Itoa(max(3000, 3*n)),
			"max-mutating-requests-inflight": strconv.Itoa(max(1000, n)),
		},
		AdminQPS: 2000, AdminBurst: 4000,
	})
	if err != nil {
		return err
	}
	defer env.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	cfg, adminCfg, admin := env.Config, env.AdminConfig, env.Admin
	bc := &kbv1.BladeConfig{ObjectMeta: metav1.ObjectMeta{Name: configName}}
	if err := admin.Create(ctx, bc); err != nil {
		return err
	}
	// How many Nodes follow the config, as the operator writes it: each
	// agent spreads its confirmation of a change over matchedNodes /
	// kubeagent.DefaultConfirmRate seconds (internal/kubeagent/confirm.go).
	bc.Status.MatchedNodes = int32(n)
	if err := admin.Status().Update(ctx, bc); err != nil {
		return err
	}
	names := make([]string, n)
	nodes := make([]*corev1.Node, n)
	for i := range names {
		names[i] = benchenv.NodeName(i)
		nodes[i] = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: names[i], Labels: map[string]string{
			"kubernetes.io/arch": "arm64", kbv1.LabelConfig: configName,
		}}}
		if peer := i ^ 1; fanPeers && peer < n {
			nodes[i].Annotations = map[string]string{kbv1.AnnotationFanPeer: benchenv.NodeName(peer)}
		}
	}
	start := time.Now()
	if err := benchenv.CreateNodes(ctx, admin, 32, nodes); err != nil {
		return fmt.Errorf("creating Nodes: %w", err)
	}
	fmt.Printf("fixture: %d Nodes labelled %s=%s and BladeConfig %s created in %s\n",
		n, kbv1.LabelConfig, configName, configName, time.Since(start).Round(time.Millisecond))
	if fanPeers {
		fmt.Printf("fixture: blades paired as fan peers (%s), %d pairs\n", kbv1.AnnotationFanPeer, n/2)
	}

	// The harness watches Blades through one informer: counting them is a
	// local read, not a list of 1 000 objects every poll.
	blades := newBladeWatch(ctx, adminCfg)

	local, err := config.Check(config.Default())
	if err != nil {
		return err
	}
	memBefore := memStats()
	cp0, err := readControlPlane(ctx, env)
	if err != nil {
		return err
	}
	fleet := make([]blade, n)
	stops := make([]func(), n)
	fails := newFailures()
	var runErr atomic.Value
	var wg sync.WaitGroup
	start = time.Now()
	waveProgress := start
	for i, name := range names {
		if time.Since(waveProgress) >= 15*time.Second {
			waveProgress = time.Now()
			fmt.Printf("  %s: %d agents started (%.1f/s), %d with their last request failed; failures so far: %s\n",
				time.Since(start).Round(time.Second), i, float64(i)/time.Since(start).Seconds(), disconnected(fleet[:i]), fails)
		}
		if rate > 0 {
			// The start-up wave: agent i starts i/rate after the first.
			time.Sleep(time.Until(start.Add(time.Duration(float64(i) / rate * float64(time.Second)))))
		}
		// client-go's default QPS 5/burst 10, per agent: as a real agent.
		// The dial function is the agent's own, so is its transport.
		agentCfg := rest.CopyConfig(cfg)
		agentCfg.Dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
		agentCfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
			// client-go's own transport, this agent's alone (its
			// dial function makes it uncacheable).
			if t, ok := rt.(*http.Transport); ok {
				t.TLSHandshakeTimeout = handshakeTimeout
			}
			return rt
		})
		agentCfg.Wrap(fails.wrap)
		// A short thermal time constant lets the fleet reach equilibrium
		// quickly, so "steady state" is reached in seconds, not minutes.
		sim := simulated.New(simulated.Options{Load: 0.2, TimeConstant: 2 * time.Second})
		a, err := agent.New(agent.Options{Backend: sim, Settings: local.Settings, ConfigName: "fleet-local", Version: "bench"})
		if err != nil {
			return err
		}
		rep, err := kubeagent.New(kubeagent.Options{Config: agentCfg, NodeName: name, Agent: a, Local: local, Heartbeat: heartbeat})
		if err != nil {
			return err
		}
		fleet[i] = blade{sim: sim, rep: rep}
		actx, stop := context.WithCancel(ctx)
		var done sync.WaitGroup
		done.Add(2)
		stops[i] = func() { stop(); done.Wait() }
		wg.Add(2)
		go func() {
			defer wg.Done()
			defer done.Done()
			if err := a.Run(actx); err != nil {
				runErr.Store(err)
			}
		}()
		go func() {
			defer wg.Done()
			defer done.Done()
			if err := rep.Run(actx); err != nil {
				runErr.Store(err)
			}
		}()
	}
	defer func() { cancel(); wg.Wait() }()

	// Two clocks: when the API server acknowledged each Blade's creation
	// (the agents' own record: the Blade exists from then on), and when
	// the harness's watch had seen them all. Under a write storm the
	// second trails the first: the API server's watch cache, which serves
	// every watch, falls behind etcd.
	progress := time.Now()
	var tCreated time.Duration
	_, err = waitFor(ctx, timeout, func() bool {
		created, last := lastCreated(fleet)
		if created < n && time.Since(progress) >= 15*time.Second {
			progress = time.Now()
			seen, _ := blades.count(0)
			fmt.Printf("  %s: %d Blades created, %d seen by the watch; %d agents started, %d with their last request failed; failures so far: %s\n",
				time.Since(start).Round(time.Second), created, seen, started(fleet), disconnected(fleet), fails)
		}
		if created == n {
			tCreated = last.Sub(start)
		}
		return created == n
	})
	if err != nil {
		created, _ := lastCreated(fleet)
		return fmt.Errorf("only %d of %d Blades created after %s (%d agents started, %d with their last request failed; failures: %s)",
			created, n, timeout, started(fleet), disconnected(fleet), fails)
	}
	fmt.Printf("all %d Blade objects created (API server acknowledged) %s after the agents started\n", n, tCreated.Round(time.Millisecond))
	if _, err := waitFor(ctx, timeout, func() bool { c, _ := blades.count(0); return c >= n }); err != nil {
		c, _ := blades.count(0)
		return fmt.Errorf("only %d of %d Blades after %s", c, n, timeout)
	}
	tBlades := time.Since(start)
	fmt.Printf("all %d Blade objects seen by the harness's watch %s after the agents started\n", n, tBlades.Round(time.Millisecond))
	_, err = waitFor(ctx, timeout, func() bool { _, c := blades.count(1); return c >= n })
	tGen1 := time.Since(start)
	if err != nil {
		_, c := blades.count(1)
		return fmt.Errorf("BladeConfig generation 1 reported by %d of %d after %s (%d with their last request failed; failures: %s)", c, n, timeout, disconnected(fleet), fails)
	}
	fmt.Printf("all %d Blades report BladeConfig %s generation 1 %s after the agents started\n", n, configName, tGen1.Round(time.Millisecond))
	cp1, err := readControlPlane(ctx, env)
	if err != nil {
		return err
	}
	startCPU := (cp1.apiCPU - cp0.apiCPU).Seconds()
	fmt.Printf("failed requests during the start-up wave: %s\n", fails)
	startFailures := fails.total()
	fmt.Printf("start-up wave: kube-apiserver used %.1f CPU-s (%.1f CPU-ms per agent), etcd %.1f CPU-s\n",
		startCPU, 1000*startCPU/float64(n), (cp1.etcdCPU - cp0.etcdCPU).Seconds())
	if e := runErr.Load(); e != nil {
		return e.(error)
	}

	// Let the start-up writes (Events, labels, condition) drain before the
	// change, so the change is timed on its own.
	time.Sleep(settle)
	if err := admin.Get(ctx, client.ObjectKey{Name: configName}, bc); err != nil {
		return err
	}
	bc.Spec.Agent.LEDs.IdleColor = "#0000ff"
	bc.Spec.Agent.FanCurve = []agentconfigv1.FanCurveStep{{TemperatureCelsius: 35, Percent: 30}, {TemperatureCelsius: 60, Percent: 100}}
	trace, err := newReachTrace(adminCfg)
	if err != nil {
		return err
	}
	if trace.before, err = trace.read(ctx); err != nil {
		return fmt.Errorf("reading kube-apiserver's metrics: %w", err)
	}
	stopProfile, waitProfile := func() {}, func() {}
	if p.profileDir != "" {
		if stopProfile, waitProfile, err = profileChange(ctx, trace.api, p.profileDir, 60*time.Second); err != nil {
			return err
		}
	}
	defer waitProfile()
	start = time.Now()
	if err := admin.Update(ctx, bc); err != nil {
		return err
	}
	if bc.Generation != 2 {
		return fmt.Errorf("BladeConfig generation is %d after the update, want 2", bc.Generation)
	}
	// Two clocks again: when every agent had applied the change to its
	// hardware (its own record), and when every Blade's status confirmed
	// it, which each agent spreads over matchedNodes / ConfirmRate. The
	// trace says, once a second, how far the API server's sending and
	// the agents' applying had got.
	var tReached time.Duration
	stopTrace := trace.follow(ctx, start, func() int { c, _ := appliedGeneration(fleet, 2); return c })
	_, err = waitFor(ctx, timeout, func() bool {
		c, last := appliedGeneration(fleet, 2)
		tReached = last.Sub(start)
		return c == n
	})
	stopTrace()
	stopProfile()
	if err != nil {
		c, _ := appliedGeneration(fleet, 2)
		fmt.Printf("fleet-result agents=%d rate=%g partial=reach reached=%d config_timeout_s=%.0f gen1_s=%.2f apiserver_start_cpu_s=%.1f start_failures=%d tls_handshake_timeout_s=%.0f\n",
			n, rate, c, timeout.Seconds(), tGen1.Seconds(), startCPU, startFailures, handshakeTimeout.Seconds())
		return fmt.Errorf("only %d of %d agents applied generation 2 after %s (%d with their last request failed; failures: %s)", c, n, timeout, disconnected(fleet), fails)
	}
	fmt.Printf("BladeConfig change reached and applied by all %d agents %s after the update (confirmations spread over %s)\n",
		n, tReached.Round(time.Millisecond), kubeagent.ConfirmSpread(int32(n), kubeagent.DefaultConfirmRate))
	trace.sample(ctx, time.Since(start), n)
	q, qd := reachQuantiles(fleet, start)
	tSent := trace.sentAll(n)
	fmt.Printf("applied by half the agents %s after the update, by 90 %% %s, by 99 %% %s; delivered by their watches to half %s, 90 %% %s, 99 %% %s, all %s; kube-apiserver had sent %d watch events by %s (bookmarks included)\n",
		q[0].Round(time.Millisecond), q[1].Round(time.Millisecond), q[2].Round(time.Millisecond),
		qd[0].Round(time.Millisecond), qd[1].Round(time.Millisecond), qd[2].Round(time.Millisecond), qd[3].Round(time.Millisecond), n, tSent.Round(time.Second))
	printSlowest(fleet, start, 5)
	fmt.Printf("failed requests so far, the wave's %d included: %s\n", startFailures, fails)
	_, err = waitFor(ctx, timeout, func() bool { _, c := blades.count(2); return c >= n })
	tConfig := time.Since(start)
	if err != nil {
		_, c := blades.count(2)
		// What the start-up wave measured stands on its own: print it
		// (the control plane as read after the wave) before giving up.
		fmt.Printf("fleet-result agents=%d rate=%g partial=config reached_s=%.2f config_reached=%d config_timeout_s=%.0f gen1_s=%.2f apiserver_start_cpu_s=%.1f start_failures=%d apiserver_rss_mib=%.0f apiserver_peak_mib=%.0f apiserver_kib_per_agent=%.1f etcd_db_inuse_mib=%.1f etcd_db_kib_per_blade=%.2f tls_handshake_timeout_s=%.0f\n",
			n, rate, tReached.Seconds(), c, timeout.Seconds(), tGen1.Seconds(), startCPU, startFailures, benchenv.MiB(cp1.api.RSS), benchenv.MiB(cp1.api.Peak),
			float64(cp1.api.RSS-cp0.api.RSS)/float64(n), float64(cp1.dbInUse)/(1<<20), float64(cp1.dbInUse-cp0.dbInUse)/float64(n)/1024, handshakeTimeout.Seconds())
		return fmt.Errorf("only %d of %d Blades report generation 2 after %s (%d with their last request failed; failures: %s)", c, n, timeout, disconnected(fleet), fails)
	}
	fmt.Printf("BladeConfig change confirmed by all %d blades (Blade.status.config generation 2) %s after the update\n",
		n, tConfig.Round(time.Millisecond))

	var perMin, perBlade, cpuPct, apiPct float64
	var elapsed time.Duration
	if window > 0 {
		fmt.Printf("waiting %s for the change's temperature drift to be written, then counting API writes for %s...\n", quiet, window)
		time.Sleep(quiet)
		w0, cpu0, t0 := writes(fleet), processCPU(), time.Now()
		s0, err := readControlPlane(ctx, env)
		if err != nil {
			return err
		}
		time.Sleep(window) // the measurement window itself
		var w1 uint64
		var cpu1 time.Duration
		w1, cpu1, elapsed = writes(fleet), processCPU(), time.Since(t0)
		s1, err := readControlPlane(ctx, env)
		if err != nil {
			return err
		}
		apiPct = 100 * (s1.apiCPU - s0.apiCPU).Seconds() / elapsed.Seconds()
		fmt.Printf("kube-apiserver CPU at steady state: %.1f %% of one core (%.4f %% per agent), etcd %.1f %%\n",
			apiPct, apiPct/float64(n), 100*(s1.etcdCPU-s0.etcdCPU).Seconds()/elapsed.Seconds())
		perMin = float64(w1-w0) / elapsed.Minutes()
		perBlade = float64(w1-w0) / float64(n) / (elapsed.Minutes() / 5)
		fmt.Printf("steady state: %d writes in %s = %.1f writes/min (%.3f per blade per 5 min; target <= 1)\n",
			w1-w0, elapsed.Round(time.Second), perMin, perBlade)
		cpuPct = 100 * (cpu1 - cpu0).Seconds() / elapsed.Seconds()
		fmt.Printf("harness CPU at steady state: %.1f %% of one core for %d agents (%.3f %% per agent)\n", cpuPct, n, cpuPct/float64(n))
	}
	staleS, staleHbS := 0.0, 0.0
	if kill > 0 {
		if staleS, staleHbS, err = measureStale(ctx, adminCfg, admin, blades, names, stops, min(kill, n), heartbeat, timeout); err != nil {
			return err
		}
	}

	memAfter := memStats()
	heapPer := float64(memAfter.HeapInuse-memBefore.HeapInuse) / float64(n) / 1024
	sysPer := float64(memAfter.Sys-memBefore.Sys) / float64(n) / 1024
	self, err := benchenv.SelfMemory()
	if err != nil {
		return err
	}
	fmt.Printf("memory per agent: heap in use %.1f KiB, runtime Sys %.1f KiB (process RSS %.1f MiB, %d goroutines)\n",
		heapPer, sysPer, benchenv.MiB(self.RSS), runtime.NumGoroutine())
	if e := runErr.Load(); e != nil {
		return e.(error)
	}

	cp2, err := readControlPlane(ctx, env)
	if err != nil {
		return err
	}
	api, etcd := cp2.api, cp2.etcd
	apiPerAgent := float64(api.RSS-cp0.api.RSS) / float64(n) // KiB
	dbPerBlade := float64(cp2.dbInUse-cp0.dbInUse) / float64(n)
	fmt.Printf("control plane memory: kube-apiserver %.0f MiB resident (peak %.0f MiB; %.0f MiB before the agents: %.1f KiB per agent), etcd %.0f MiB (peak %.0f MiB)\n",
		benchenv.MiB(api.RSS), benchenv.MiB(api.Peak), benchenv.MiB(cp0.api.RSS), apiPerAgent, benchenv.MiB(etcd.RSS), benchenv.MiB(etcd.Peak))
	fmt.Printf("etcd database: %.1f MiB in use (%.1f MiB file), %.1f MiB in use before the agents: %.2f KiB per blade\n",
		float64(cp2.dbInUse)/(1<<20), float64(cp2.dbTotal)/(1<<20), float64(cp0.dbInUse)/(1<<20), dbPerBlade/1024)
	fmt.Printf("fleet-result fan_peers=%t agents=%d rate=%g created_s=%.2f blades_s=%.2f gen1_s=%.2f reached_s=%.2f reached_p50_s=%.2f reached_p90_s=%.2f delivered_s=%.2f config_s=%.2f writes_per_min=%.1f writes_per_blade_5min=%.3f window_s=%.0f heap_kib=%.1f sys_kib=%.1f cpu_pct=%.1f killed=%d stale_after_kill_s=%.1f stale_after_heartbeat_s=%.1f apiserver_rss_mib=%.0f apiserver_peak_mib=%.0f etcd_rss_mib=%.0f etcd_peak_mib=%.0f apiserver_start_cpu_s=%.1f apiserver_steady_pct=%.2f apiserver_kib_per_agent=%.1f etcd_db_inuse_mib=%.1f etcd_db_kib_per_blade=%.2f start_failures=%d tls_handshake_timeout_s=%.0f\n",
		fanPeers, n, rate, tCreated.Seconds(), tBlades.Seconds(), tGen1.Seconds(), tReached.Seconds(), q[0].Seconds(), q[1].Seconds(), qd[3].Seconds(), tConfig.Seconds(), perMin, perBlade,
		elapsed.Seconds(), heapPer, sysPer, cpuPct, kill, staleS, staleHbS, benchenv.MiB(api.RSS), benchenv.MiB(api.Peak), benchenv.MiB(etcd.RSS), benchenv.MiB(etcd.Peak),
		startCPU, apiPct, apiPerAgent, float64(cp2.dbInUse)/(1<<20), dbPerBlade/1024, startFailures, handshakeTimeout.Seconds())
	return nil
}

// controlPlane is one reading of what kube-apiserver and etcd use.
type controlPlane struct {
	apiCPU, etcdCPU  time.Duration
	api, etcd        benchenv.Memory
	dbTotal, dbInUse int64
}

func readControlPlane(ctx context.Context, env *benchenv.Env) (controlPlane, error) {
	var c controlPlane
	var err error
	if c.apiCPU, c.etcdCPU, err = env.ControlPlaneCPU(); err != nil {
		return c, err
	}
	if c.api, c.etcd, err = env.ControlPlaneMemory(); err != nil {
		return c, err
	}
	c.dbTotal, c.dbInUse, err = env.EtcdDBSize(ctx)
	return c, err
}

// bladeWatch counts Blades, and Blades reporting a BladeConfig generation,
// and notes when each Blade was first seen marked stale.
type bladeWatch struct {
	store toolscache.Store

	mu sync.Mutex
	// marked: Blade name → when the watch saw it Unknown and the
	// heartbeat time it had then.
	marked map[string][2]time.Time
}

func newBladeWatch(ctx context.Context, cfg *rest.Config) *bladeWatch {
	dc := dynamic.NewForConfigOrDie(cfg)
	f := dynamicinformer.NewDynamicSharedInformerFactory(dc, 0)
	inf := f.ForResource(schema.GroupVersionResource{Group: kbv1.GroupVersion.Group, Version: kbv1.GroupVersion.Version, Resource: "blades"})
	w := &bladeWatch{store: inf.Informer().GetStore(), marked: map[string][2]time.Time{}}
	note := func(o any) {
		u, ok := o.(interface {
			UnstructuredContent() map[string]any
			GetName() string
		})
		if !ok {
			return
		}
		st, _ := u.UnstructuredContent()["status"].(map[string]any)
		w.mu.Lock()
		defer w.mu.Unlock()
		if st["state"] != kbv1.BladeStateUnknown {
			delete(w.marked, u.GetName())
			return
		}
		if _, seen := w.marked[u.GetName()]; !seen {
			hb, _ := time.Parse(time.RFC3339, fmt.Sprint(st["heartbeatTime"]))
			w.marked[u.GetName()] = [2]time.Time{time.Now(), hb}
		}
	}
	_, _ = inf.Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: note, UpdateFunc: func(_, o any) { note(o) },
	})
	go inf.Informer().RunWithContext(ctx)
	// Synced before the agents start: an informer's first list waits
	// for the API server's watch cache to catch up with etcd, which
	// under the agents' write storm takes seconds, and would be timed
	// as the agents' start-up.
	toolscache.WaitForCacheSync(ctx.Done(), inf.Informer().HasSynced)
	return w
}

// unknown counts the named Blades seen marked stale.
func (w *bladeWatch) unknown(names []string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	c := 0
	for _, n := range names {
		if _, ok := w.marked[n]; ok {
			c++
		}
	}
	return c
}

// worstMarkDelay is the longest time from a Blade's last heartbeat to the
// harness seeing it marked.
func (w *bladeWatch) worstMarkDelay(names []string) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	var worst time.Duration
	for _, n := range names {
		if m, ok := w.marked[n]; ok && m[0].Sub(m[1]) > worst {
			worst = m[0].Sub(m[1])
		}
	}
	return worst
}

// count returns how many Blades exist and how many report generation gen
// of the fleet's BladeConfig.
func (w *bladeWatch) count(gen int64) (all, atGen int) {
	for _, o := range w.store.List() {
		all++
		u, ok := o.(interface{ UnstructuredContent() map[string]any })
		if !ok {
			continue
		}
		st, _ := u.UnstructuredContent()["status"].(map[string]any)
		c, _ := st["config"].(map[string]any)
		if c["name"] == configName && toInt(c["generation"]) == gen {
			atGen++
		}
	}
	return all, atGen
}

func toInt(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case float64:
		return int64(x)
	}
	return -1
}

// waitFor returns how long cond (a local read) took to hold, polled every
// testwait.Interval.
func waitFor(ctx context.Context, timeout time.Duration, cond func() bool) (time.Duration, error) {
	start := time.Now()
	if err := testwait.Poll(ctx, timeout, func(context.Context) (bool, string) { return cond(), "" }); err != nil {
		return 0, fmt.Errorf("timed out after %s", timeout)
	}
	return time.Since(start), nil
}

// appliedGeneration returns how many of the fleet's agents have applied
// generation gen of the BladeConfig to their hardware, and when the latest
// of them did.
// reachQuantiles returns the times from start by which half, 90 % and
// 99 % of the agents had applied the config they run, and by which half,
// 90 %, 99 % and all had had it delivered by their watch.
func reachQuantiles(fleet []blade, start time.Time) (applied, delivered []time.Duration) {
	at := make([]time.Time, 0, len(fleet))
	dl := make([]time.Time, 0, len(fleet))
	for _, b := range fleet {
		s := b.rep.Stats()
		at = append(at, s.ConfigAppliedAt)
		dl = append(dl, s.ConfigDeliveredAt)
	}
	return quantiles(at, start, 0.5, 0.9, 0.99), quantiles(dl, start, 0.5, 0.9, 0.99, 1)
}

// printSlowest prints the k agents that applied the change last: when
// their watch delivered it, and when they applied it.
func printSlowest(fleet []blade, start time.Time, k int) {
	idx := make([]int, len(fleet))
	for i := range idx {
		idx[i] = i
	}
	applied := func(i int) time.Time { return fleet[i].rep.Stats().ConfigAppliedAt }
	slices.SortFunc(idx, func(a, b int) int { return applied(b).Compare(applied(a)) })
	for _, i := range idx[:min(k, len(idx))] {
		s := fleet[i].rep.Stats()
		fmt.Printf("  slow: agent %d: delivered %s after the update, applied %s after it (%d requests, %d writes so far, connected %t)\n",
			i, s.ConfigDeliveredAt.Sub(start).Round(time.Millisecond), s.ConfigAppliedAt.Sub(start).Round(time.Millisecond), s.Requests, s.Writes, s.Connected)
	}
}

func appliedGeneration(fleet []blade, gen int64) (n int, last time.Time) {
	for _, b := range fleet {
		s := b.rep.Stats()
		if s.Config == nil || s.Config.Generation != gen {
			continue
		}
		n++
		if s.ConfigAppliedAt.After(last) {
			last = s.ConfigAppliedAt
		}
	}
	return n, last
}

// lastCreated returns how many of the fleet's Blades are created and when
// the latest of them was.
func lastCreated(fleet []blade) (created int, last time.Time) {
	for _, b := range fleet {
		t := b.rep.BladeCreated()
		if t.IsZero() {
			continue
		}
		created++
		if t.After(last) {
			last = t
		}
	}
	return created, last
}

// started counts the agents built and started so far (the start-up
// wave fills the slice in order).
func started(fleet []blade) int {
	c := 0
	for _, b := range fleet {
		if b.rep != nil {
			c++
		}
	}
	return c
}

// disconnected counts started agents whose last request failed.
func disconnected(fleet []blade) int {
	c := 0
	for _, b := range fleet {
		if b.rep != nil && !b.rep.Stats().Connected {
			c++
		}
	}
	return c
}

func writes(fleet []blade) uint64 {
	var w uint64
	for _, b := range fleet {
		w += b.rep.Stats().Writes
	}
	return w
}

func memStats() runtime.MemStats {
	runtime.GC()
	debug.FreeOSMemory()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m
}

func processCPU() time.Duration {
	d, _ := benchenv.ProcessCPU("/proc/self")
	return d
}
