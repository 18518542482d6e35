package dashboard

import (
	"bytes"
	"encoding/json"
	"slices"
	"sort"
	"sync"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/utils/clock"

	"github.com/kubeblade/kubeblade/api/v1alpha1"
)

// Resource kinds the dashboard watches, in the order the status lists them.
const (
	KindBlades = "blades"
	KindNodes  = "nodes"
	KindEvents = "events"
)

// Problems a watch can have, for the page to choose what to say.
const (
	// ProblemUnreachable: the API server does not answer (or answered with
	// an error that may pass); the page shows the last state it had.
	ProblemUnreachable = "unreachable"
	// ProblemForbidden: the caller may not list or watch the kind.
	ProblemForbidden = "forbidden"
	// ProblemNotInstalled: the cluster has no Blade resource.
	ProblemNotInstalled = "notInstalled"
)

// Status is the state of the dashboard's view of the cluster.
type Status struct {
	// Server is the API server's address, Context the kubeconfig context.
	Server  string `json:"server"`
	Context string `json:"context,omitempty"`
	// Synced is true once Blades and Nodes were listed in full.
	Synced bool         `json:"synced"`
	Kinds  []KindStatus `json:"kinds"`
}

// KindStatus is the health of one kind's watch.
type KindStatus struct {
	Kind    string `json:"kind"`
	OK      bool   `json:"ok"`
	Problem string `json:"problem,omitempty"`
	Message string `json:"message,omitempty"`
}

// HubOptions tune a Hub; zero values take the defaults.
type HubOptions struct {
	Clock clock.WithTicker
	// FlushInterval batches changes: every page gets one message per
	// interval with everything that changed in it (default 200 ms).
	FlushInterval time.Duration
	// EventsPerBlade is how many recent Events are kept per Node (default 20).
	EventsPerBlade int
	// SubscriberBuffer is how many messages a page may lag behind before
	// it is dropped; its browser reconnects and starts from a snapshot
	// (default 256).
	SubscriberBuffer int
}

// Hub holds the joined view of all blades and fans every change out to the
// subscribed pages. Watches feed it from their own goroutines; Run sends
// the changes of each interval as one message, encoded once for all pages.
type Hub struct {
	clk       clock.WithTicker
	interval  time.Duration
	maxEvents int
	buffer    int

	mu        sync.Mutex
	blades    map[string]*v1alpha1.Blade
	nodes     map[string]*corev1.Node
	views     map[string]json.RawMessage // the JSON of every blade on the page
	sent      map[string]json.RawMessage // each blade's JSON as the pages last got it
	events    map[string][]Event         // per node, oldest first
	status    Status
	dirty     map[string]struct{}
	newEvents []Event
	statusNew bool
	subs      map[*Subscription]struct{}
	dropped   int
}

// NewHub makes an empty hub.
func NewHub(o HubOptions) *Hub {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.FlushInterval <= 0 {
		o.FlushInterval = 200 * time.Millisecond
	}
	if o.EventsPerBlade <= 0 {
		o.EventsPerBlade = 20
	}
	if o.SubscriberBuffer <= 0 {
		o.SubscriberBuffer = 256
	}
	h := &Hub{
		clk: o.Clock, interval: o.FlushInterval, maxEvents: o.EventsPerBlade, buffer: o.SubscriberBuffer,
		blades: map[string]*v1alpha1.Blade{}, nodes: map[string]*corev1.Node{},
		views: map[string]json.RawMessage{}, sent: map[string]json.RawMessage{}, events: map[string][]Event{},
		dirty: map[string]struct{}{}, subs: map[*Subscription]struct{}{},
	}
	for _, k := range []string{KindBlades, KindNodes, KindEvents} {
		h.status.Kinds = append(h.status.Kinds, KindStatus{Kind: k})
	}
	return h
}

// SetBlade records a Blade as added or changed.
func (h *Hub) SetBlade(b *v1alpha1.Blade) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.blades[b.Name] = b
	h.update(b.Name)
}

// DeleteBlade records that a Blade is gone.
func (h *Hub) DeleteBlade(name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.blades, name)
	h.update(name)
}

// SetNode records a Node as added or changed.
func (h *Hub) SetNode(n *corev1.Node) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.nodes[n.Name] = n
	h.update(n.Name)
}

// DeleteNode records that a Node is gone.
func (h *Hub) DeleteNode(name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.nodes, name)
	h.update(name)
}

// update recomputes one blade's view and marks it for the next message
// when what the page shows changed. Callers hold mu.
func (h *Hub) update(name string) {
	b, n := h.blades[name], h.nodes[name]
	if b == nil && (n == nil || !shown(n)) {
		if _, ok := h.views[name]; ok {
			delete(h.views, name)
			h.dirty[name] = struct{}{}
		}
		return
	}
	raw, err := json.Marshal(view(name, b, n))
	if err != nil { // cannot happen: the view is plain data
		panic(err)
	}
	if bytes.Equal(raw, h.views[name]) {
		return
	}
	h.views[name] = raw
	h.dirty[name] = struct{}{}
}

// SetEvent records an Event; only Events about Nodes are kept.
func (h *Hub) SetEvent(e *eventsv1.Event) {
	if e.Regarding.Kind != "Node" || e.Regarding.Name == "" {
		return
	}
	v := eventView(e)
	h.mu.Lock()
	defer h.mu.Unlock()
	list := slices.DeleteFunc(h.events[v.Node], func(o Event) bool { return o.ID == v.ID })
	list = append(list, v)
	sort.SliceStable(list, func(i, j int) bool { return list[i].Time.Before(list[j].Time) })
	if len(list) > h.maxEvents {
		list = slices.Delete(list, 0, len(list)-h.maxEvents)
	}
	h.events[v.Node] = list
	h.newEvents = append(h.newEvents, v)
}

// DeleteEvent forgets an Event (the API server expires them).
func (h *Hub) DeleteEvent(e *eventsv1.Event) {
	v := eventView(e)
	h.mu.Lock()
	defer h.mu.Unlock()
	list := slices.DeleteFunc(h.events[v.Node], func(o Event) bool { return o.ID == v.ID })
	if len(list) == 0 {
		delete(h.events, v.Node)
	} else {
		h.events[v.Node] = list
	}
}

// Events returns a Node's recent Events, newest first.
func (h *Hub) Events(node string) []Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := slices.Clone(h.events[node])
	slices.Reverse(out)
	return out
}

// SetServer names the API server and context the page shows.
func (h *Hub) SetServer(server, context string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.status.Server, h.status.Context = server, context
	h.statusNew = true
}

// SetSynced records that Blades and Nodes were listed in full.
func (h *Hub) SetSynced() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.status.Synced {
		h.status.Synced = true
		h.statusNew = true
	}
}

// SetKind records the health of one kind's watch; it reports whether that
// changed it.
func (h *Hub) SetKind(s KindStatus) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, k := range h.status.Kinds {
		if k.Kind == s.Kind {
			if k == s {
				return false
			}
			h.status.Kinds[i] = s
			h.statusNew = true
			return true
		}
	}
	return false
}

// Status returns the current status.
func (h *Hub) Status() Status {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.status
	s.Kinds = slices.Clone(s.Kinds)
	return s
}

// Subscription is one page's stream of messages, each a complete
// server-sent event.
type Subscription struct {
	h *Hub
	c chan []byte
	// done is closed when the hub drops the subscription: it lagged
	// SubscriberBuffer messages behind.
	done chan struct{}
}

// C delivers the messages, the snapshot first.
func (s *Subscription) C() <-chan []byte { return s.c }

// Dropped is closed when the hub dropped this subscriber for lagging.
func (s *Subscription) Dropped() <-chan struct{} { return s.done }

// Close ends the subscription.
func (s *Subscription) Close() {
	s.h.mu.Lock()
	defer s.h.mu.Unlock()
	delete(s.h.subs, s)
}

// Subscribe starts a page's stream with a snapshot of everything.
func (h *Hub) Subscribe() *Subscription {
	s := &Subscription{h: h, c: make(chan []byte, h.buffer), done: make(chan struct{})}
	h.mu.Lock()
	defer h.mu.Unlock()
	s.c <- h.snapshot()
	h.subs[s] = struct{}{}
	return s
}

// Subscribers is how many pages are subscribed.
func (h *Hub) Subscribers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs)
}

// snapshot is the "snapshot" message: the status and every blade, sorted
// by name. Callers hold mu.
func (h *Hub) snapshot() []byte {
	names := make([]string, 0, len(h.views))
	for n := range h.views {
		names = append(names, n)
	}
	slices.Sort(names)
	var b bytes.Buffer
	b.WriteString(`{"status":`)
	st, _ := json.Marshal(h.status)
	b.Write(st)
	b.WriteString(`,"blades":[`)
	for i, n := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(h.views[n])
	}
	b.WriteString("]}")
	return frame("snapshot", b.Bytes())
}

// bladesMessage is the "blades" message: blades new to the page in full,
// changes to the others as JSON merge patches (RFC 7386) of their JSON,
// each with the blade's name added, and the names of those no longer on
// the page. A temperature change is {"name":"blade-0042","temperatureCelsius":61},
// some 50 bytes instead of the blade's 450, and a rack of 10 000 blades
// that each change every 5 s sends 2 000 of them a second.
//
// A patch turns what the page had at the last message into what is now;
// applied to a blade that already is what is now (a page whose snapshot
// came after the change) it changes nothing, so every page can get the
// same message.
type bladesMessage struct {
	Upsert []json.RawMessage `json:"upsert,omitempty"`
	Patch  []json.RawMessage `json:"patch,omitempty"`
	Remove []string          `json:"remove,omitempty"`
}

// Flush sends what changed since the last flush to every page. Run calls
// it every FlushInterval; tests call it directly.
func (h *Hub) Flush() {
	h.mu.Lock()
	defer h.mu.Unlock()
	var msgs [][]byte
	if h.statusNew {
		st, _ := json.Marshal(h.status)
		msgs = append(msgs, frame("status", st))
		h.statusNew = false
	}
	if len(h.dirty) > 0 {
		names := make([]string, 0, len(h.dirty))
		for n := range h.dirty {
			names = append(names, n)
		}
		slices.Sort(names)
		var m bladesMessage
		for _, n := range names {
			raw, now := h.views[n]
			before, had := h.sent[n]
			switch {
			case now && had:
				if p := namedPatch(n, before, raw); p != nil {
					m.Patch = append(m.Patch, p)
				}
				h.sent[n] = raw
			case now:
				m.Upsert = append(m.Upsert, raw)
				h.sent[n] = raw
			case had:
				m.Remove = append(m.Remove, n)
				delete(h.sent, n)
			}
		}
		if len(m.Upsert)+len(m.Patch)+len(m.Remove) > 0 {
			raw, _ := json.Marshal(m)
			msgs = append(msgs, frame("blades", raw))
		}
		clear(h.dirty)
	}
	if len(h.newEvents) > 0 {
		raw, _ := json.Marshal(h.newEvents)
		msgs = append(msgs, frame("events", raw))
		h.newEvents = nil
	}
	for _, m := range msgs {
		for s := range h.subs {
			select {
			case s.c <- m:
			default:
				// A page that cannot keep up is dropped rather than
				// slowing everyone; it reconnects to a fresh snapshot.
				delete(h.subs, s)
				close(s.done)
				h.dropped++
			}
		}
	}
}

// namedPatch is the JSON merge patch from one view of a blade to another,
// with the blade's name added (a name never changes, so a patch never has
// one of its own); nil when they do not differ.
func namedPatch(name string, before, after json.RawMessage) json.RawMessage {
	p, err := jsonpatch.CreateMergePatch(before, after)
	if err != nil { // cannot happen: both are the hub's own JSON objects
		panic(err)
	}
	if bytes.Equal(p, []byte("{}")) {
		return nil
	}
	n, _ := json.Marshal(name)
	out := make([]byte, 0, len(p)+len(n)+9)
	out = append(out, `{"name":`...)
	out = append(out, n...)
	out = append(out, ',')
	return append(out, p[1:]...)
}

// Run flushes every FlushInterval until stop is closed.
func (h *Hub) Run(stop <-chan struct{}) {
	t := h.clk.NewTicker(h.interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C():
			h.Flush()
		}
	}
}

// frame formats one server-sent event. JSON has no raw newlines, so the
// data fits on one line.
func frame(event string, data []byte) []byte {
	b := make([]byte, 0, len(event)+len(data)+16)
	b = append(b, "event: "...)
	b = append(b, event...)
	b = append(b, "\ndata: "...)
	b = append(b, data...)
	return append(b, "\n\n"...)
}
