// Package kubeevents reports blade events as Kubernetes Events
// (events.k8s.io/v1) on the blade's Node, through client-go's recorder
// (which merges repeats into series). Events that happen while the API
// server is unreachable wait in a bounded queue, oldest dropped first, and
// are delivered in order when it returns.
package kubeevents

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	typedeventsv1 "k8s.io/client-go/kubernetes/typed/events/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"

	"github.com/kubeblade/kubeblade/internal/core"
)

// ReportingController is the reportingController of every agent Event.
const ReportingController = "kubeblade.io/agent"

// DefaultCapacity bounds the queue of undelivered events.
const DefaultCapacity = 1000

// reasons the spec lists, and the action each stands for. Internal reasons
// (StatusChanged, FanModeChanged, FanRecovered) are not Kubernetes Events.
var actions = map[core.Reason]string{
	core.ReasonAgentStarted:        "Start",
	core.ReasonButtonPressed:       "PressButton",
	core.ReasonIdentifyStarted:     "Identify",
	core.ReasonIdentifyStopped:     "Identify",
	core.ReasonCriticalTemperature: "ProtectThermal",
	core.ReasonTemperatureNormal:   "ProtectThermal",
	core.ReasonStealthEnabled:      "SetStealth",
	core.ReasonStealthDisabled:     "SetStealth",
	core.ReasonFanStalled:          "MonitorFan",
	core.ReasonPowerSourceChanged:  "MonitorPower",
	core.ReasonConfigApplied:       "ApplyConfig",
	ReasonInvalidAnnotation:        "ReadAnnotations",
	ReasonInvalidConfig:            "ApplyConfig",
}

// Reasons raised by the Kubernetes side of the agent.
const (
	ReasonInvalidAnnotation core.Reason = "InvalidAnnotation"
	ReasonInvalidConfig     core.Reason = "InvalidConfig"
)

// Reported reports whether a reason becomes a Kubernetes Event.
func Reported(r core.Reason) bool {
	_, ok := actions[r]
	return ok
}

// Options configure a Recorder.
type Options struct {
	Client   typedeventsv1.EventsV1Interface
	NodeName string
	// Capacity of the undelivered-event queue (DefaultCapacity if 0).
	Capacity int
	Clock    clock.WithTicker
	Logger   *slog.Logger
}

// Recorder turns blade events into Kubernetes Events.
type Recorder struct {
	sink        *bufferedSink
	broadcaster events.EventBroadcaster
	recorder    events.EventRecorder
	log         *slog.Logger

	mu   sync.Mutex
	node *corev1.Node
	// early holds events raised before the Node was first seen.
	early []core.Event
}

// New returns a Recorder; call Run to start delivering.
func New(o Options) *Recorder {
	if o.Capacity <= 0 {
		o.Capacity = DefaultCapacity
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	sink := newBufferedSink(o.Client, o.NodeName, o.Capacity, o.Clock)
	b := events.NewBroadcaster(sink)
	scheme := runtime.NewScheme()
	// Events are only about Nodes; the recorder needs their kind to build
	// the reference.
	_ = corev1.AddToScheme(scheme)
	return &Recorder{
		sink:        sink,
		broadcaster: b,
		recorder:    b.NewRecorder(scheme, ReportingController),
		log:         o.Logger,
	}
}

// Run delivers events until ctx ends.
func (r *Recorder) Run(ctx context.Context) error {
	if err := r.broadcaster.StartRecordingToSinkWithContext(ctx); err != nil {
		return fmt.Errorf("starting event recording: %w", err)
	}
	go r.sink.run(ctx)
	<-ctx.Done()
	r.broadcaster.Shutdown()
	return nil
}

// SetNode gives the Node events are about (its UID goes into each Event).
// Events recorded before the first call are held and sent then.
func (r *Recorder) SetNode(n *corev1.Node) {
	r.mu.Lock()
	first := r.node == nil
	r.node = n.DeepCopy()
	early := r.early
	r.early = nil
	r.mu.Unlock()
	if first {
		for _, ev := range early {
			r.Record(ev)
		}
	}
}

// Record reports ev if its reason is one the spec lists.
func (r *Recorder) Record(ev core.Event) {
	action, ok := actions[ev.Reason]
	if !ok {
		return
	}
	r.mu.Lock()
	node := r.node
	if node == nil {
		if len(r.early) < r.sink.capacity {
			r.early = append(r.early, ev)
		} else {
			r.sink.dropped.Add(1)
		}
		r.mu.Unlock()
		return
	}
	r.mu.Unlock()
	typ := corev1.EventTypeNormal
	if ev.Warning {
		typ = corev1.EventTypeWarning
	}
	r.recorder.Eventf(node, nil, typ, string(ev.Reason), action, "%s", ev.Message)
}

// Stats are delivery counters for metrics.
type Stats struct {
	Pending int
	Dropped uint64
	Sent    uint64
	// Failing is true while the last write to the API server failed.
	Failing bool
}

// Stats returns the delivery counters.
func (r *Recorder) Stats() Stats {
	return Stats{Pending: r.sink.pending(), Dropped: r.sink.dropped.Load(), Sent: r.sink.sent.Load(), Failing: r.sink.failing.Load()}
}
