// Package kubeagent is the agent's Kubernetes side: it watches its own Node
// (annotations are commands, the kubeblade.io/config label names the
// BladeConfig to follow) and that one BladeConfig, and reports the blade as
// Node labels, the BladeThermalCritical condition, an optional taint, a Blade
// object and Events. The blade's safety never waits for it: the agent runs
// the hardware on its own, and this package catches up whenever the API
// server is reachable.
package kubeagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"github.com/kubeblade/kubeblade/api/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/agent"
	"github.com/kubeblade/kubeblade/internal/annotations"
	"github.com/kubeblade/kubeblade/internal/config"
	"github.com/kubeblade/kubeblade/internal/core"
	"github.com/kubeblade/kubeblade/internal/eventbus"
	"github.com/kubeblade/kubeblade/internal/kubeclient"
	"github.com/kubeblade/kubeblade/internal/kubeevents"
)

// Defaults for Options.
const (
	DefaultHeartbeat   = 5 * time.Minute
	DefaultMinInterval = time.Minute
	DefaultConfigGrace = 10 * time.Second
)

// Options configure the Kubernetes side of one agent.
type Options struct {
	// Config reaches the API server; its transport is wrapped to count writes.
	Config   *rest.Config
	NodeName string
	Agent    *agent.Agent
	// Local is the agent's own (file/env) config, used while the Node is
	// assigned to no BladeConfig.
	Local config.Checked
	// Initial, when set, is the agent's first read of its Node and
	// BladeConfig (ReadInitial): the watches start from it instead of
	// listing the same objects again.
	Initial *Initial
	// Environ holds KUBEBLADE_* overrides, laid over every BladeConfig as
	// over the config file.
	Environ []string
	// Heartbeat is the longest time between Blade status writes.
	Heartbeat time.Duration
	// MinInterval is the shortest time between writes caused only by
	// temperature drift; state changes are written at once.
	MinInterval time.Duration
	// ConfigGrace is how long the first Blade status waits for the
	// assigned BladeConfig to be read (default DefaultConfigGrace).
	ConfigGrace time.Duration
	// ConfirmRate is how many blades per second confirm one change to a
	// BladeConfig's spec between them (default DefaultConfirmRate): each
	// agent writes its confirmation after a random delay in
	// [0, matchedNodes / ConfirmRate), at most MaxConfirmSpread (confirm.go).
	ConfirmRate   float64
	EventCapacity int
	Clock         clock.WithTicker
	Logger        *slog.Logger
	// jitter picks a confirmation's delay as a fraction of the spread
	// (uniform in [0, 1) unless a test fixes it).
	jitter func() float64
}

// Stats are counters for metrics and benchmarks.
type Stats struct {
	Events kubeevents.Stats
	// Writes counts mutating API requests (POST, PUT, PATCH, DELETE).
	Writes uint64
	// Requests counts all API requests.
	Requests uint64
	// Connected is false while the last API request failed.
	Connected bool
	// BladeCreated is when the API server acknowledged the Blade's
	// creation in this run (zero until then).
	BladeCreated time.Time
	// Config is the BladeConfig generation last applied to the hardware
	// (nil on the local config), and ConfigAppliedAt when.
	Config          *v1alpha1.AppliedConfig
	ConfigAppliedAt time.Time
	// ConfigDeliveredAt is when the BladeConfig watch first delivered
	// the generation in Config (zero if it did not, or not yet): a change
	// applied well after it was delivered waited for the agent, not for
	// the API server.
	ConfigDeliveredAt time.Time
}

// appliedAt is a config and when it was applied.
type appliedAt struct {
	config *v1alpha1.AppliedConfig
	at     time.Time
}

// Reporter is the running Kubernetes side of one agent.
type Reporter struct {
	o      Options
	log    *slog.Logger
	clk    clock.WithTicker
	c      *kubeclient.Clientset
	events *kubeevents.Recorder
	// sub and eventSub are taken in New, before the agent runs, so
	// AgentStarted and everything after it reach Kubernetes. sub feeds the
	// loop; eventSub feeds the Events recorder on a goroutine of its own,
	// because the loop's Node and Blade writes are synchronous: an Event
	// read by the loop waited for whatever write was in flight (up to
	// 190 ms under load for a button press, docs/performance.md).
	sub      *eventbus.Subscription[core.Event]
	eventSub *eventbus.Subscription[core.Event]
	writes   atomic.Uint64
	requests atomic.Uint64
	failing  atomic.Bool
	// bladeCreated is when this run's Blade creation was acknowledged.
	bladeCreated atomic.Pointer[time.Time]
	// lastApplied is the config last applied and when (nil until the
	// first): Stats and ConfigApplied report it.
	lastApplied atomic.Pointer[appliedAt]
	// configDelivered is the BladeConfig generation the watch delivered
	// last and when it first did (Stats.ConfigDeliveredAt).
	configDelivered atomic.Pointer[appliedAt]
	// hwMu serialises applying a config to the hardware between the loop
	// and the config applier (applyHardware).
	hwMu sync.Mutex
	// cfgReady tells the loop the config applier has handled a copy of
	// the BladeConfig.
	cfgReady chan struct{}

	// Loop state, touched only by Run's goroutine.
	node       *corev1.Node
	seen       map[string]string // annotation values last acted on
	reported   map[string]string // bad annotation values already reported
	pendingFan *annotations.Fan
	configName string
	cfgWatch   *objectWatch
	// stopApplier stops the config applier of cfgWatch (nil when none).
	stopApplier func()
	// initialUsed is set once Options.Initial's BladeConfig list has
	// served a watch.
	initialUsed bool
	applied     *v1alpha1.AppliedConfig
	badConfig   string // "name/generation" of an invalid config already reported
	taint       bool
	lastBlade   *v1alpha1.BladeStatus
	lastWrite   time.Time
	created     bool
	started     time.Time // when Run started: Options.ConfigGrace counts from it
	retryAt     time.Time
	backoff     time.Duration
	// confirmAt is when the confirmation of a BladeConfig change is due
	// (confirm.go); appliedEvents are its ConfigApplied events, held
	// until then.
	confirmAt     time.Time
	appliedEvents []core.Event

	peerName  string
	peerWatch *objectWatch
	nodeState *nodeState
	// toggle is a long press whose maintenance toggle is not written yet.
	toggle bool
}

// New prepares a Reporter; Run starts it.
func New(o Options) (*Reporter, error) {
	if o.NodeName == "" {
		return nil, errors.New("kubernetes mode needs the node name (NODE_NAME or --node-name)")
	}
	if o.Agent == nil || o.Config == nil {
		return nil, errors.New("kubeagent: Agent and Config are required")
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = DefaultHeartbeat
	}
	if o.MinInterval <= 0 {
		o.MinInterval = DefaultMinInterval
	}
	if o.ConfigGrace <= 0 {
		o.ConfigGrace = DefaultConfigGrace
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.ConfirmRate <= 0 {
		o.ConfirmRate = DefaultConfirmRate
	}
	if o.jitter == nil {
		o.jitter = rand.Float64
	}
	r := &Reporter{o: o, log: o.Logger.With("node", o.NodeName), clk: o.Clock,
		seen: map[string]string{}, reported: map[string]string{}, taint: o.Local.Config.TaintOnCritical,
		cfgReady: make(chan struct{}, 1)}
	cfg := rest.CopyConfig(o.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return countingTransport{rt, r} })
	if cfg.UserAgent == "" {
		cfg.UserAgent = "kubeblade-agent/" + o.NodeName
	}
	c, err := kubeclient.New(cfg)
	if err != nil {
		return nil, err
	}
	r.c = c
	r.sub = o.Agent.Subscribe(1024)
	r.eventSub = o.Agent.Subscribe(eventQueue)
	r.events = kubeevents.New(kubeevents.Options{
		Client: c.Events(metav1.NamespaceDefault), NodeName: o.NodeName, Capacity: o.EventCapacity, Clock: o.Clock, Logger: o.Logger,
	})
	return r, nil
}

type countingTransport struct {
	rt http.RoundTripper
	r  *Reporter
}

func (t countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.r.requests.Add(1)
	switch req.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		t.r.writes.Add(1)
	}
	resp, err := t.rt.RoundTrip(req)
	t.r.failing.Store(err != nil || (resp != nil && resp.StatusCode >= 500))
	return resp, err
}

// Stats returns the counters.
func (r *Reporter) Stats() Stats {
	s := Stats{Events: r.events.Stats(), Writes: r.writes.Load(), Requests: r.requests.Load(), Connected: !r.failing.Load(),
		BladeCreated: r.BladeCreated()}
	if a := r.lastApplied.Load(); a != nil {
		s.ConfigAppliedAt = a.at
		if d := r.configDelivered.Load(); d != nil && a.config != nil && *d.config == *a.config {
			s.ConfigDeliveredAt = d.at
		}
		if a.config != nil {
			c := *a.config
			s.Config = &c
		}
	}
	return s
}

// BladeCreated is Stats().BladeCreated, without the other counters.
func (r *Reporter) BladeCreated() time.Time {
	if t := r.bladeCreated.Load(); t != nil {
		return *t
	}
	return time.Time{}
}

// Run reports until ctx ends.
func (r *Reporter) Run(ctx context.Context) error {
	sub := r.sub
	defer sub.Close()
	evDone, recDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(evDone)
		_ = r.events.Run(ctx)
	}()
	go func() {
		defer close(recDone)
		r.recordEvents(ctx)
	}()
	var firstNodes runtime.Object
	if in := r.o.Initial; in != nil && in.Node != nil {
		firstNodes = in.Node
	}
	nodeWatch := newObjectWatch(ctx, r.c.Nodes, &corev1.Node{}, r.o.NodeName, firstNodes, nil)
	defer func() {
		if r.stopApplier != nil {
			r.stopApplier()
		}
		stopAll(nodeWatch, r.cfgWatch, r.peerWatch)
		<-recDone
		<-evDone
	}()

	r.started = r.clk.Now()
	timer := r.clk.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		var peerChanged <-chan struct{}
		if r.peerWatch != nil {
			peerChanged = r.peerWatch.changed
		}
		select {
		case <-ctx.Done():
			return nil
		case <-nodeWatch.changed:
			if n, ok := nodeWatch.get().(*corev1.Node); ok && n != nil {
				r.onNode(ctx, n)
			} else if nodeWatch.synced() {
				r.node = nil
			}
		case <-r.cfgReady:
			r.onConfig(ctx)
		case <-peerChanged:
			r.onPeer(ctx)
		case ev, ok := <-sub.C():
			if !ok {
				return nil
			}
			r.onEvent(ctx, ev)
		case <-timer.C():
		}
		now := r.clk.Now()
		due := r.sync(ctx, now)
		timer.Reset(max(due.Sub(now), 10*time.Millisecond))
	}
}

func (r *Reporter) onNode(ctx context.Context, n *corev1.Node) {
	r.node = n
	r.events.SetNode(n)
	r.onAnnotations(ctx, n.Annotations)
	r.onNodeState(ctx, readNodeState(n, r.seen[v1alpha1.AnnotationMaintenance] == "true"))
	if name := n.Labels[v1alpha1.LabelConfig]; name != r.configName {
		r.follow(ctx, name)
	}
}

// follow switches the BladeConfig watch to name ("" = none).
func (r *Reporter) follow(ctx context.Context, name string) {
	if r.stopApplier != nil {
		r.stopApplier()
		r.stopApplier = nil
	}
	if r.cfgWatch != nil {
		r.cfgWatch.stop()
		r.cfgWatch = nil
	}
	r.configName = name
	if name == "" {
		r.log.Info("node is assigned to no BladeConfig; using the local config")
		r.apply(ctx, r.o.Local, nil)
		return
	}
	r.log.Info("following BladeConfig", "bladeConfig", name)
	// The initial list serves the first watch of the config it lists,
	// once: a later return to that config lists it anew.
	var first runtime.Object
	if in := r.o.Initial; in != nil && in.Config != nil && in.ConfigName == name && !r.initialUsed {
		first, r.initialUsed = in.Config, true
	}
	r.cfgWatch = newObjectWatch(ctx, r.c.BladeConfigs, &v1alpha1.BladeConfig{}, name, first, r.configDelivery)
	actx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func(w *objectWatch) {
		defer close(done)
		r.applyAhead(actx, w)
	}(r.cfgWatch)
	r.stopApplier = func() { cancel(); <-done }
}

// applyAhead is the config applier: each copy of the BladeConfig the watch
// w delivers is applied to the hardware at once, on this goroutine, and
// then handed to the loop (cfgReady), which confirms it in the Blade's
// status and Events and reports a config it refuses. The loop may be
// waiting for the API server meanwhile; the hardware does not wait with it.
// A 10 000-agent run found agents applying a change 40 s after their watch
// delivered it, their loop in a request the busy API server answered only
// with a timeout (docs/performance.md).
func (r *Reporter) applyAhead(ctx context.Context, w *objectWatch) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.changed:
		}
		if bc, ok := w.get().(*v1alpha1.BladeConfig); ok && bc != nil {
			// An invalid config is left to the loop, which reports it.
			if cfg, err := config.FromSpec(bc.Spec.Agent, r.o.Environ); err == nil {
				if err := r.applyHardware(ctx, cfg, &v1alpha1.AppliedConfig{Name: bc.Name, Generation: bc.Generation}); err != nil && ctx.Err() == nil {
					r.log.Error("applying config", "err", err)
				}
			}
		}
		select {
		case r.cfgReady <- struct{}{}:
		default: // the loop has a notice pending; it reads the latest copy
		}
	}
}

// applyHardware applies cfg to the hardware, unless the config it names
// (nil: the local config) is the one applied last, by the loop or the
// config applier, whichever came first.
func (r *Reporter) applyHardware(ctx context.Context, cfg config.Checked, applied *v1alpha1.AppliedConfig) error {
	r.hwMu.Lock()
	defer r.hwMu.Unlock()
	if a := r.lastApplied.Load(); a != nil && sameConfig(a.config, applied) {
		return nil
	}
	name := "local config"
	if applied != nil {
		name = fmt.Sprintf("BladeConfig %s generation %d", applied.Name, applied.Generation)
	}
	if err := r.o.Agent.ApplySettings(ctx, cfg.Settings, name); err != nil {
		return err
	}
	r.lastApplied.Store(&appliedAt{config: applied, at: r.clk.Now()})
	return nil
}

func sameConfig(a, b *v1alpha1.AppliedConfig) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// configDelivery notes when the BladeConfig watch first delivered each
// generation (Stats.ConfigDeliveredAt).
func (r *Reporter) configDelivery(o any) {
	bc, ok := o.(*v1alpha1.BladeConfig)
	if !ok {
		return
	}
	if d := r.configDelivered.Load(); d != nil && d.config.Name == bc.Name && d.config.Generation == bc.Generation {
		return
	}
	r.configDelivered.Store(&appliedAt{config: &v1alpha1.AppliedConfig{Name: bc.Name, Generation: bc.Generation}, at: r.clk.Now()})
}

func (r *Reporter) onConfig(ctx context.Context) {
	bc, ok := r.cfgWatch.get().(*v1alpha1.BladeConfig)
	if !ok || bc == nil {
		return // not there (yet): keep what runs
	}
	if r.applied != nil && r.applied.Name == bc.Name && r.applied.Generation == bc.Generation {
		return
	}
	key := fmt.Sprintf("%s/%d", bc.Name, bc.Generation)
	if key == r.badConfig {
		return // refused already: said once, in an Event and the log
	}
	cfg, err := config.FromSpec(bc.Spec.Agent, r.o.Environ)
	if err != nil {
		r.badConfig = key
		r.events.Record(core.Event{Reason: kubeevents.ReasonInvalidConfig, Warning: true, Time: r.clk.Now(),
			Message: fmt.Sprintf("BladeConfig %s generation %d is invalid and was not applied: %v", bc.Name, bc.Generation, err)})
		r.log.Error("BladeConfig refused; keeping the running config", "bladeConfig", bc.Name, "generation", bc.Generation, "err", err)
		return
	}
	r.holdConfirmation(bc, r.clk.Now())
	r.apply(ctx, cfg, &v1alpha1.AppliedConfig{Name: bc.Name, Generation: bc.Generation})
}

// apply makes cfg the config the loop reports, applying it to the
// hardware unless the config applier already has.
func (r *Reporter) apply(ctx context.Context, cfg config.Checked, applied *v1alpha1.AppliedConfig) {
	if err := r.applyHardware(ctx, cfg, applied); err != nil {
		r.log.Error("applying config", "err", err)
		return
	}
	r.applied = applied
	r.taint = cfg.Config.TaintOnCritical
}

// ConfigApplied reports whether a config has been applied since Run
// started: the assigned BladeConfig, or the local config when the Node is
// assigned none. The agent is ready only then.
func (r *Reporter) ConfigApplied() bool { return r.lastApplied.Load() != nil }

var annotationKeys = []string{v1alpha1.AnnotationIdentify, v1alpha1.AnnotationStealth, v1alpha1.AnnotationFanSpeed,
	v1alpha1.AnnotationFanPeer, v1alpha1.AnnotationMaintenance}

// onAnnotations acts on annotations that changed since they were last seen
// (all of them on start, which restores what people asked for after a
// restart). Acting on changes only, not on levels, lets the button and the
// gRPC API change the same things without the annotation undoing them.
func (r *Reporter) onAnnotations(ctx context.Context, ann map[string]string) {
	reqs, bad := annotations.Parse(ann, r.o.NodeName)
	badKeys := map[string]annotations.Invalid{}
	for _, b := range bad {
		badKeys[b.Key] = b
	}
	for _, key := range annotationKeys {
		cur, has := ann[key]
		prev, had := r.seen[key]
		if has == had && cur == prev {
			continue
		}
		if has {
			r.seen[key] = cur
		} else {
			delete(r.seen, key)
		}
		if b, isBad := badKeys[key]; isBad {
			// Look the key up, not just the value: an empty bad value
			// equals the map's zero value.
			if prevBad, done := r.reported[key]; !done || prevBad != cur {
				r.reported[key] = cur
				r.events.Record(core.Event{Reason: kubeevents.ReasonInvalidAnnotation, Warning: true, Time: r.clk.Now(), Message: b.String()})
				r.log.Warn("invalid annotation ignored", "annotation", key, "value", cur, "reason", b.Reason)
			}
			continue
		}
		delete(r.reported, key)
		r.act(ctx, key, has, reqs)
	}
}

func (r *Reporter) act(ctx context.Context, key string, has bool, reqs annotations.Requests) {
	a, src := r.o.Agent, core.SourceAnnotation
	var err error
	switch key {
	case v1alpha1.AnnotationIdentify:
		on := has && *reqs.Identify
		err = a.SetIdentify(ctx, on, src)
	case v1alpha1.AnnotationStealth:
		err = a.SetStealth(ctx, reqs.Stealth, src) // nil (removed) returns to the config
	case v1alpha1.AnnotationFanPeer:
		peer := ""
		if has {
			peer = *reqs.FanPeer
		}
		r.followPeer(ctx, peer)
	case v1alpha1.AnnotationMaintenance:
		// Shown on the LEDs with the operator's state (onNodeState); the
		// operator acts on it.
	case v1alpha1.AnnotationFanSpeed:
		fan := reqs.Fan
		if !has {
			fan = &annotations.Fan{Auto: true}
		}
		r.pendingFan = nil
		err = r.setFan(ctx, *fan)
		if errors.Is(err, core.ErrCriticalActive) {
			// Applied once critical mode lets go of the fan.
			r.pendingFan = fan
			r.log.Info("fan-speed annotation waits for critical mode to end", "value", r.seen[key])
			return
		}
	}
	if err != nil {
		r.log.Error("applying annotation", "annotation", key, "err", err)
	}
}

func (r *Reporter) setFan(ctx context.Context, f annotations.Fan) error {
	if f.Auto {
		return r.o.Agent.SetFanAuto(ctx, core.SourceAnnotation)
	}
	return r.o.Agent.SetFanManual(ctx, f.Percent, core.SourceAnnotation)
}

// eventQueue is the Events subscription's queue. Its reader only hands
// events to the recorder, which never blocks, so it stays near empty; the
// agent loop's samples raise at most a few events each.
const eventQueue = 256

// recordEvents hands the agent's events to the Events recorder as they are
// published, until ctx ends.
func (r *Reporter) recordEvents(ctx context.Context) {
	defer r.eventSub.Close()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-r.eventSub.C():
			if !ok {
				return
			}
			if ev.Reason == core.ReasonConfigApplied {
				continue // the loop reports it with its confirmation
			}
			r.events.Record(ev)
		}
	}
}

// onEvent acts on the agent's events in the loop; recordEvents reports them.
func (r *Reporter) onEvent(ctx context.Context, ev core.Event) {
	switch ev.Reason {
	case core.ReasonConfigApplied:
		// Recorded by sync when its confirmation is due. Configs applied
		// faster than they are confirmed keep their latest few.
		if len(r.appliedEvents) == maxHeldEvents {
			r.appliedEvents = append(r.appliedEvents[:0], r.appliedEvents[1:]...)
		}
		r.appliedEvents = append(r.appliedEvents, ev)
	case core.ReasonIdentifyStopped:
		// The button confirmed identify: the request is fulfilled, so the
		// annotation goes; otherwise a restart would start it again.
		if ev.Source == core.SourceButton && r.node != nil {
			if err := removeAnnotation(ctx, r.c.Nodes, r.node, v1alpha1.AnnotationIdentify, "true"); err != nil {
				r.log.Error("could not remove the identify annotation", "err", err)
				r.scheduleRetry()
			}
		}
	case core.ReasonButtonLongPressed:
		if ev.Source == core.SourceButton {
			r.toggle = true // written by sync, retried until it lands
		}
	case core.ReasonTemperatureNormal:
		if f := r.pendingFan; f != nil {
			if err := r.setFan(ctx, *f); err == nil {
				r.pendingFan = nil
			}
		}
	}
}

func (r *Reporter) scheduleRetry() {
	if r.backoff == 0 {
		r.backoff = 500 * time.Millisecond
	} else {
		r.backoff = min(2*r.backoff, 10*time.Second)
	}
	r.retryAt = r.clk.Now().Add(r.backoff)
}

// sync brings the Node and the Blade in line with the agent's state,
// reports the ConfigApplied events whose confirmation is due, and returns
// when it next needs to run.
func (r *Reporter) sync(ctx context.Context, now time.Time) time.Time {
	// The config applier got a config to the hardware that the loop has
	// not taken over yet (its notice is still queued): take it over
	// first, so what is written now reports what the hardware runs.
	if a := r.lastApplied.Load(); a != nil && !sameConfig(a.config, r.applied) && r.cfgWatch != nil {
		r.onConfig(ctx)
	}
	due := r.syncObjects(ctx, now)
	r.recordConfigApplied(now)
	if len(r.appliedEvents) > 0 && r.confirming(now) && r.confirmAt.Before(due) {
		due = r.confirmAt
	}
	return due
}

// syncObjects is sync's Node and Blade part.
func (r *Reporter) syncObjects(ctx context.Context, now time.Time) time.Time {
	far := now.Add(time.Hour)
	if r.node == nil {
		return far
	}
	if !r.retryAt.IsZero() && now.Before(r.retryAt) {
		return r.retryAt
	}
	st := r.o.Agent.Status()
	err := r.syncNode(ctx, st, now)
	due := far
	if err == nil {
		if r.applied == nil && r.cfgWatch != nil && r.cfgWatch.synced() {
			// Listed but not yet handed to onConfig (the loop's select
			// picked another ready channel first): apply it now, so the
			// first status carries it. (onConfig skips a generation it
			// refused already.)
			r.onConfig(ctx)
			st = r.o.Agent.Status()
		}
		due, err = r.syncBlade(ctx, st, now)
	}
	if err != nil {
		r.scheduleRetry()
		r.log.Warn("API server write failed; will retry", "err", err, "in", r.backoff)
		return r.retryAt
	}
	r.retryAt, r.backoff = time.Time{}, 0
	return due
}

func (r *Reporter) syncNode(ctx context.Context, st agent.Status, now time.Time) error {
	n := r.node
	if r.toggle {
		v, err := toggleMaintenance(ctx, r.c.Nodes, n)
		if err != nil {
			return fmt.Errorf("long press: %w", err)
		}
		r.toggle = false
		r.log.Info("long press: maintenance annotation set", "annotation", v1alpha1.AnnotationMaintenance, "value", v)
	}
	if want := desiredLabels(st); !labelsInSync(n, want) {
		if err := applyLabels(ctx, r.c.Nodes, n.Name, want); err != nil {
			return fmt.Errorf("node labels: %w", err)
		}
		r.markNodeStale()
	}
	if !st.Info.IsBlade {
		return nil
	}
	if !conditionInSync(n, st.Critical) {
		if err := patchCondition(ctx, r.c.Nodes, n.Name, st.Critical, now); err != nil {
			return fmt.Errorf("node condition: %w", err)
		}
		r.markNodeStale()
	}
	if want := r.taint && st.Critical; hasTaint(n) != want {
		if err := setTaint(ctx, r.c.Nodes, n, want); err != nil {
			return fmt.Errorf("node taint: %w", err)
		}
		r.markNodeStale()
	}
	return nil
}

// markNodeStale keeps the local copy from triggering the same write again
// before the watch delivers the updated Node.
func (r *Reporter) markNodeStale() {
	n := r.node.DeepCopy()
	st := r.o.Agent.Status()
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	for _, k := range factLabels {
		delete(n.Labels, k)
	}
	for k, v := range desiredLabels(st) {
		n.Labels[k] = v
	}
	status := corev1.ConditionFalse
	if st.Critical {
		status = corev1.ConditionTrue
	}
	if c := nodeCondition(n); c != nil {
		c.Status = status
	} else {
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: v1alpha1.NodeConditionThermalCritical, Status: status})
	}
	r.node = n
}

func (r *Reporter) syncBlade(ctx context.Context, st agent.Status, now time.Time) (time.Time, error) {
	far := now.Add(time.Hour)
	if !st.Info.IsBlade {
		return far, nil
	}
	var prev []metav1.Condition
	if r.lastBlade != nil {
		prev = r.lastBlade.Conditions
	}
	if r.lastBlade == nil && r.awaitingConfig() && now.Before(r.started.Add(r.o.ConfigGrace)) {
		// The first status waits for the assigned BladeConfig, which the
		// config watch delivers one round trip after the Node: written
		// before it, the status would be written again at once with the
		// config's generation (two status writes per blade at every
		// start). The Blade itself exists already.
		if err := r.createBlade(ctx); err != nil {
			return now, err
		}
		return r.started.Add(r.o.ConfigGrace), nil
	}
	next := bladeStatus(r.o.NodeName, st, r.applied, prev, now)
	next.HeartbeatPeriodSeconds = int32(max(r.o.Heartbeat/time.Second, 1))
	change := classify(r.lastBlade, next)
	// A BladeConfig change's own effects wait for its confirmation
	// (confirm.go); the heartbeat and any other change do not.
	held := change == stateChange && r.confirming(now) && onlyConfirmation(r.lastBlade, next)
	write := (change == stateChange && !held) ||
		(change == driftOnly && !now.Before(r.lastWrite.Add(r.o.MinInterval))) ||
		!now.Before(r.lastWrite.Add(r.o.Heartbeat))
	if write {
		if err := r.writeBlade(ctx, next, now); err != nil {
			return now, err
		}
		change = noChange
	}
	// The heartbeat is due whatever else is pending: drift waiting for
	// MinInterval may bring the next write forward, never put it off (with
	// MinInterval longer than the heartbeat it did, and a Blade deleted by
	// hand stayed gone until the drift's write).
	due := r.lastWrite.Add(r.o.Heartbeat)
	if drift := r.lastWrite.Add(r.o.MinInterval); change == driftOnly && drift.Before(due) {
		due = drift
	}
	if held && r.confirmAt.Before(due) {
		due = r.confirmAt
	}
	return due, nil
}

// awaitingConfig reports whether the Node names a BladeConfig that the
// config watch has not listed yet.
func (r *Reporter) awaitingConfig() bool {
	return r.applied == nil && r.cfgWatch != nil && !r.cfgWatch.synced()
}

func (r *Reporter) writeBlade(ctx context.Context, bs v1alpha1.BladeStatus, now time.Time) error {
	if err := r.createBlade(ctx); err != nil {
		return err
	}
	t := metav1.NewTime(now)
	bs.HeartbeatTime = &t
	body, err := json.Marshal(map[string]any{
		"apiVersion": v1alpha1.GroupVersion.String(),
		"kind":       "Blade",
		"metadata":   map[string]any{"name": r.o.NodeName},
		"status":     bs,
	})
	if err != nil {
		return err
	}
	_, err = r.c.Blades.Patch(ctx, r.o.NodeName, types.ApplyPatchType, body, applyOptions, "status")
	if apierrors.IsNotFound(err) {
		// Deleted by hand since this run created it: create it again
		// now, at the write that found it gone, so it is back within one
		// heartbeat instead of never.
		r.log.Info("Blade was deleted; creating it again", "blade", r.o.NodeName)
		r.created = false
		if err := r.createBlade(ctx); err != nil {
			return err
		}
		_, err = r.c.Blades.Patch(ctx, r.o.NodeName, types.ApplyPatchType, body, applyOptions, "status")
	}
	if err != nil {
		return fmt.Errorf("Blade status: %w", err)
	}
	r.lastBlade = &bs
	r.lastWrite = now
	if bs.Config != nil && r.applied != nil && *bs.Config == *r.applied {
		// The status confirms the applied config (early, if another
		// change was written first): its Event need wait no longer.
		r.confirmAt = time.Time{}
	}
	return nil
}

// createBlade creates the Blade, once per Run. The Blade is owned by its
// Node, so it is garbage-collected with it.
func (r *Reporter) createBlade(ctx context.Context) error {
	if r.created {
		return nil
	}
	body, err := json.Marshal(map[string]any{
		"apiVersion": v1alpha1.GroupVersion.String(),
		"kind":       "Blade",
		"metadata": map[string]any{
			"name": r.o.NodeName,
			"ownerReferences": []any{map[string]any{
				"apiVersion": "v1", "kind": "Node", "name": r.node.Name, "uid": string(r.node.UID),
			}},
		},
	})
	if err != nil {
		return err
	}
	if _, err := r.c.Blades.Patch(ctx, r.o.NodeName, types.ApplyPatchType, body, applyOptions); err != nil {
		return fmt.Errorf("creating Blade: %w", err)
	}
	r.created = true
	t := r.clk.Now()
	r.bladeCreated.Store(&t)
	return nil
}
