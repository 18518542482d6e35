// Package kubeevents reports blade events as Kubernetes Events
// (events.k8s.io/v1) regarding the blade's Node. A repeat of the same event
// within SeriesWindow updates the first one's series (count and last time)
// instead of adding an Event. Events that happen while the API server is
// unreachable wait in a bounded queue, oldest dropped first, and are
// delivered in order when it returns.
//
// It does what client-go's events recorder does for the agent's one kind of
// Event without importing it: that package imports client-go's all-groups
// scheme, which would link every built-in API type into the agent (see
// internal/kubeclient). Unlike client-go's recorder it writes series counts
// at once rather than on a 6-minute timer.
package kubeevents

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	core.ReasonButtonLongPressed:   "PressButton",
	core.ReasonFanPeerLost:         "SyncFan",
	core.ReasonFanPeerRestored:     "SyncFan",
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
	// Client writes Events in the "default" namespace, where Events about
	// cluster-scoped objects such as Nodes belong.
	Client   EventClient
	NodeName string
	// Capacity of the undelivered-event queue (DefaultCapacity if 0).
	Capacity int
	Clock    clock.WithTicker
	Logger   *slog.Logger
}

// SeriesWindow is how long after its last occurrence a repeated event still
// joins the series of the first one (client-go's value).
const SeriesWindow = 6 * time.Minute

// maxNoteBytes is the API server's limit on Event.note.
const maxNoteBytes = 1024

// Recorder turns blade events into Kubernetes Events.
type Recorder struct {
	sink *bufferedSink
	clk  clock.WithTicker
	log  *slog.Logger
	// writes carries Record's writes to Run, so Record never waits for the
	// API server.
	writes chan write

	mu   sync.Mutex
	node *corev1.Node
	// early holds events raised before the Node was first seen.
	early  []core.Event
	series map[seriesKey]*series
	// lastName is the time part of the last Event name: events of one
	// instant (a button press and the identify it starts) need distinct
	// names, or the second create would look like a retried first.
	lastName int64
}

// seriesKey says which events are "the same": everything but the time.
type seriesKey struct {
	reason, action, typ, note string
}

type series struct {
	event *eventsv1.Event // the first one, as written
	last  time.Time
	count int32
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
	return &Recorder{
		sink:   newBufferedSink(o.Client, o.NodeName, o.Capacity, o.Clock),
		clk:    o.Clock,
		log:    o.Logger,
		writes: make(chan write, o.Capacity),
		series: map[seriesKey]*series{},
	}
}

// Run delivers events until ctx ends.
func (r *Recorder) Run(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.sink.run(ctx)
	}()
	defer func() { <-done }()
	for {
		select {
		case <-ctx.Done():
			return nil
		case w := <-r.writes:
			var err error
			if w.patch != nil {
				_, err = r.sink.Patch(ctx, w.event, w.patch)
			} else {
				_, err = r.sink.Create(ctx, w.event)
			}
			if err != nil && ctx.Err() == nil {
				// Refused for good (invalid, forbidden): retrying cannot help.
				r.log.Error("Event refused by the API server", "reason", w.event.Reason, "err", err)
			}
		}
	}
}

// SetNode gives the Node events are about (its UID goes into each Event).
// Events recorded before the first call are held and sent then, ahead of
// any recorded later: SetNode and Record may be called from different
// goroutines.
func (r *Recorder) SetNode(n *corev1.Node) {
	r.mu.Lock()
	defer r.mu.Unlock()
	first := r.node == nil
	r.node = n.DeepCopy()
	if first {
		early := r.early
		r.early = nil
		for _, ev := range early {
			r.record(ev)
		}
	}
}

// Record reports ev if its reason is one the spec lists. It never blocks.
func (r *Recorder) Record(ev core.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.record(ev)
}

// record is Record with r.mu held.
func (r *Recorder) record(ev core.Event) {
	action, ok := actions[ev.Reason]
	if !ok {
		return
	}
	if r.node == nil {
		if len(r.early) < r.sink.capacity {
			r.early = append(r.early, ev)
		} else {
			r.sink.dropped.Add(1)
		}
		return
	}
	now := ev.Time
	if now.IsZero() {
		now = r.clk.Now()
	}
	typ := corev1.EventTypeNormal
	if ev.Warning {
		typ = corev1.EventTypeWarning
	}
	key := seriesKey{reason: string(ev.Reason), action: action, typ: typ, note: Truncate(ev.Message, maxNoteBytes)}
	var w write
	if s := r.series[key]; s != nil && now.Sub(s.last) < SeriesWindow && s.event.Regarding.UID == r.node.UID {
		s.count++
		s.last = now
		es := &eventsv1.EventSeries{Count: s.count, LastObservedTime: metav1.NewMicroTime(now)}
		patch, err := json.Marshal(map[string]any{"series": es})
		if err != nil {
			r.log.Error("encoding an Event series", "err", err)
			return
		}
		full := s.event.DeepCopy()
		full.Series = es
		w = write{event: full, patch: patch}
	} else {
		r.lastName = max(now.UnixNano(), r.lastName+1)
		e := &eventsv1.Event{
			ObjectMeta: metav1.ObjectMeta{
				// client-go's naming: the Node and a time.
				Name:      fmt.Sprintf("%s.%x", r.node.Name, r.lastName),
				Namespace: metav1.NamespaceDefault,
			},
			EventTime:           metav1.NewMicroTime(now),
			ReportingController: ReportingController,
			Action:              action,
			Reason:              string(ev.Reason),
			Regarding:           corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: r.node.Name, UID: r.node.UID},
			Note:                key.note,
			Type:                typ,
		}
		r.series[key] = &series{event: e, last: now, count: 1}
		r.expire(now)
		w = write{event: e}
	}
	select {
	case r.writes <- w:
	default:
		r.sink.dropped.Add(1)
	}
}

// expire forgets series that ended, so the map stays as small as the set of
// distinct recent events.
func (r *Recorder) expire(now time.Time) {
	for k, s := range r.series {
		if now.Sub(s.last) >= SeriesWindow {
			delete(r.series, k)
		}
	}
}

// Truncate cuts s to at most n bytes on a rune boundary, marking the cut
// with "…". The API server's limits on an Event's note and on the Blade's
// status strings are in bytes, and a cut inside a rune would make invalid
// UTF-8 that it refuses.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "…"
	cut := n - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
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
	return Stats{Pending: r.sink.pending() + len(r.writes), Dropped: r.sink.dropped.Load(), Sent: r.sink.sent.Load(), Failing: r.sink.failing.Load()}
}
