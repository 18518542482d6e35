package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/rest"
)

// A BladeConfig change crosses two processes before an agent applies it:
// kube-apiserver sends one watch event down each agent's connection, then
// the agent (in this process) decodes it and applies it. reachTrace follows
// both once a second so a slow change can be placed on one side or the
// other: the API server's count of BladeConfig watch events it has sent,
// and the count of agents that have applied the change.
type reachTrace struct {
	api     *apiGetter
	samples []reachSample
	// before is the API server's counters at the update.
	before apiCounters
}

type reachSample struct {
	at      time.Duration
	api     apiCounters
	applied int
}

// apiCounters are what kube-apiserver's /metrics says about BladeConfig
// watches. Metric names and labels are kube-apiserver's own
// (k8s.io/apiserver/pkg/endpoints/metrics/metrics.go for the watch events,
// k8s.io/apiserver/pkg/storage/cacher/metrics/metrics.go for the watch
// cache's terminated watchers); a label set may name the kind
// (kind="BladeConfig") or the resource, with or without its group
// (resource="bladeconfigs", "bladeconfigs.kubeblade.io"), depending on
// the metric and the version, and all are matched.
type apiCounters struct {
	// sent counts watch events written to BladeConfig watchers.
	sent float64
	// terminated counts BladeConfig watchers the watch cache closed
	// because they did not take an event in time.
	terminated float64
	// watchers is how many BladeConfig watches are open.
	watchers float64
}

func newReachTrace(cfg *rest.Config) (*reachTrace, error) {
	g, err := newAPIGetter(cfg)
	if err != nil {
		return nil, err
	}
	return &reachTrace{api: g}, nil
}

func (t *reachTrace) read(ctx context.Context) (apiCounters, error) {
	body, err := t.api.get(ctx, "/metrics")
	if err != nil {
		return apiCounters{}, err
	}
	return parseAPICounters(body), nil
}

// apiGetter reads kube-apiserver's non-resource paths (/metrics,
// /debug/pprof) as cfg's user. A plain HTTP client on cfg's transport, with
// no timeout of its own: the CPU profile takes as long as it was asked to
// (client-go's discovery client would give up after 32 s).
type apiGetter struct {
	host string
	c    *http.Client
}

func newAPIGetter(cfg *rest.Config) (*apiGetter, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = 0
	c, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	return &apiGetter{host: strings.TrimSuffix(cfg.Host, "/"), c: c}, nil
}

func (g *apiGetter) get(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.host+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := g.c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %.200s", path, resp.Status, body)
	}
	return body, nil
}

// parseAPICounters sums the BladeConfig series of the counters it knows in
// Prometheus text format.
func parseAPICounters(body []byte) apiCounters {
	var c apiCounters
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, `kind="BladeConfig"`) && !strings.Contains(line, `resource="bladeconfigs"`) &&
			!strings.Contains(line, `resource="bladeconfigs.`) {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		switch {
		case strings.HasPrefix(line, "apiserver_watch_events_total{"):
			c.sent += v
		case strings.HasPrefix(line, "apiserver_terminated_watchers_total{"):
			c.terminated += v
		case strings.HasPrefix(line, "apiserver_registered_watchers{"),
			strings.HasPrefix(line, "apiserver_longrunning_requests{") && strings.Contains(line, `verb="WATCH"`):
			c.watchers = max(c.watchers, v)
		}
	}
	return c
}

// follow samples once a second, on a goroutine of its own (a sample waits
// for kube-apiserver, which a change keeps busy), until stop is called.
func (t *reachTrace) follow(ctx context.Context, start time.Time, applied func() int) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				t.sample(ctx, time.Since(start), applied())
			}
		}
	}()
	return func() { cancel(); <-done }
}

// sample records one point; applied is how many agents have applied the
// change.
func (t *reachTrace) sample(ctx context.Context, since time.Duration, applied int) {
	c, err := t.read(ctx)
	if err != nil {
		if ctx.Err() == nil {
			fmt.Printf("  reach trace: reading kube-apiserver's metrics: %v\n", err)
		}
		return
	}
	s := reachSample{at: since, api: c, applied: applied}
	t.samples = append(t.samples, s)
	fmt.Printf("  %5.1f s: kube-apiserver sent %.0f BladeConfig watch events, bookmarks included (%.0f watchers closed as too slow, %.0f open); %d agents applied it\n",
		since.Seconds(), c.sent-t.before.sent, c.terminated-t.before.terminated, c.watchers, applied)
}

// sentAll returns when the API server had sent n events, or -1 s if it
// had not by the last sample (or its metrics were not read).
func (t *reachTrace) sentAll(n int) time.Duration {
	for _, s := range t.samples {
		if s.api.sent-t.before.sent >= float64(n) {
			return s.at
		}
	}
	return -time.Second
}

// quantiles returns the times (from start) by which the given fractions of
// the agents had applied the change.
func quantiles(at []time.Time, start time.Time, qs ...float64) []time.Duration {
	d := make([]time.Duration, len(at))
	for i, t := range at {
		d[i] = t.Sub(start)
	}
	slices.Sort(d)
	out := make([]time.Duration, len(qs))
	for i, q := range qs {
		if len(d) == 0 {
			continue
		}
		out[i] = d[min(len(d)-1, int(q*float64(len(d))))]
	}
	return out
}

// profileChange starts a CPU profile of this process and asks kube-apiserver
// for one of itself (its /debug/pprof handler, on by default with
// --profiling) over the next d. stop ends the harness's profile; wait
// waits for the API server's, which runs its full d in the background.
// Both land in dir.
func profileChange(ctx context.Context, api *apiGetter, dir string, d time.Duration) (stop, wait func(), err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, err
	}
	f, err := os.Create(filepath.Join(dir, "harness-change.pprof"))
	if err != nil {
		return nil, nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		body, err := api.get(ctx, "/debug/pprof/profile?seconds="+strconv.Itoa(int(d.Seconds())))
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, "apiserver-change.pprof"), body, 0o644)
		}
		if err != nil {
			fmt.Printf("  kube-apiserver profile: %v\n", err)
		}
	}()
	stop = func() {
		pprof.StopCPUProfile()
		f.Close()
	}
	wait = func() {
		<-done
		fmt.Printf("profiles of the change: %s/harness-change.pprof (until all applied), %s/apiserver-change.pprof (%s from the update; go tool pprof -top FILE)\n", dir, dir, d)
	}
	return stop, wait, nil
}
