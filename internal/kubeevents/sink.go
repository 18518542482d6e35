package kubeevents

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// write is one pending API call: a create, or a series patch.
type write struct {
	event *eventsv1.Event
	patch []byte // nil: create
	// forbidden counts the 403s this write got (see ForbiddenRetries).
	forbidden int
}

// ForbiddenRetries is how often a write the API server refused with 403
// Forbidden is tried again before it is dropped. The agent writes as its
// own ServiceAccount, and a kube-apiserver that has just (re)started
// answers 403 until its RBAC and admission-policy caches are filled ("not
// yet ready to handle request"): right after an outage a refusal is usually
// not final. One that persists through the retries (a few seconds of
// backoff) is.
const ForbiddenRetries = 5

// EventClient is the part of the events.k8s.io/v1 Events API the recorder
// uses, for the namespace its Events go to; client-go's typed EventInterface
// and kubeclient.EventClient both satisfy it.
type EventClient interface {
	Create(ctx context.Context, ev *eventsv1.Event, opts metav1.CreateOptions) (*eventsv1.Event, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*eventsv1.Event, error)
}

// bufferedSink writes Events. It writes through when the API server answers
// and otherwise keeps the writes, in order, in a bounded queue that loses
// its oldest entries first; a flusher sends them once the server is back.
type bufferedSink struct {
	client   EventClient
	instance string // reporting instance: the node name
	capacity int
	clk      clock.WithTicker
	timeout  time.Duration

	mu      sync.Mutex
	queue   []write
	wake    chan struct{}
	dropped atomic.Uint64
	sent    atomic.Uint64
	failing atomic.Bool
}

func newBufferedSink(c EventClient, instance string, capacity int, clk clock.WithTicker) *bufferedSink {
	return &bufferedSink{
		client: c, instance: instance, capacity: capacity, clk: clk,
		timeout: 10 * time.Second, wake: make(chan struct{}, 1),
	}
}

// Create writes a new Event.
func (s *bufferedSink) Create(ctx context.Context, ev *eventsv1.Event) (*eventsv1.Event, error) {
	return s.submit(ctx, write{event: s.stamp(ev)})
}

// Patch updates a series' count on an Event written before; ev is the
// whole Event, created instead if the first one never arrived.
func (s *bufferedSink) Patch(ctx context.Context, ev *eventsv1.Event, data []byte) (*eventsv1.Event, error) {
	return s.submit(ctx, write{event: s.stamp(ev), patch: data})
}

// stamp sets the reporting instance to the node name, as the spec asks.
func (s *bufferedSink) stamp(ev *eventsv1.Event) *eventsv1.Event {
	ev = ev.DeepCopy()
	ev.ReportingInstance = s.instance
	return ev
}

func (s *bufferedSink) submit(ctx context.Context, w write) (*eventsv1.Event, error) {
	s.mu.Lock()
	queued := len(s.queue) > 0
	s.mu.Unlock()
	if !queued {
		got, err := s.do(ctx, w)
		if err == nil || !s.retry(&w, err) {
			return got, err
		}
	}
	// Keep order behind what is already waiting; the queue delivers it.
	s.enqueue(w)
	return w.event, nil
}

func (s *bufferedSink) enqueue(w write) {
	s.mu.Lock()
	if len(s.queue) >= s.capacity {
		s.queue = s.queue[1:]
		s.dropped.Add(1)
	}
	s.queue = append(s.queue, w)
	s.mu.Unlock()
	s.failing.Store(true)
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *bufferedSink) do(ctx context.Context, w write) (*eventsv1.Event, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	events := s.client
	var got *eventsv1.Event
	var err error
	if w.patch != nil {
		got, err = events.Patch(ctx, w.event.Name, types.StrategicMergePatchType, w.patch, metav1.PatchOptions{})
		if apierrors.IsNotFound(err) {
			// The series' first event never arrived (or expired): create
			// it whole, count included.
			w.patch = nil
		}
	}
	if w.patch == nil {
		ev := w.event.DeepCopy()
		ev.ResourceVersion = ""
		got, err = events.Create(ctx, ev, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			err = nil // a retried create that had in fact arrived
		}
	}
	if err == nil {
		s.sent.Add(1)
		s.failing.Store(false)
	}
	return got, err
}

// retry reports whether w is worth another try after err, counting 403s.
func (s *bufferedSink) retry(w *write, err error) bool {
	if apierrors.IsForbidden(err) && w.forbidden < ForbiddenRetries {
		w.forbidden++
		return true
	}
	return transient(err)
}

// transient reports whether err means "try again later" rather than "this
// event is malformed".
func transient(err error) bool {
	var se *apierrors.StatusError
	if !errors.As(err, &se) {
		return true // transport errors: connection refused, timeouts
	}
	return apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err) || se.ErrStatus.Code >= 500
}

// run flushes the queue until ctx ends, backing off between failed tries.
func (s *bufferedSink) run(ctx context.Context) {
	const minBackoff, maxBackoff = 500 * time.Millisecond, 5 * time.Second
	backoff := minBackoff
	for {
		s.mu.Lock()
		var next *write
		if len(s.queue) > 0 {
			w := s.queue[0]
			next = &w
		}
		s.mu.Unlock()
		if next == nil {
			select {
			case <-ctx.Done():
				return
			case <-s.wake:
				continue
			}
		}
		_, err := s.do(ctx, *next)
		if err != nil && s.retry(next, err) {
			s.mu.Lock()
			if len(s.queue) > 0 && s.queue[0].event == next.event {
				s.queue[0].forbidden = next.forbidden
			}
			s.mu.Unlock()
			t := s.clk.NewTimer(backoff)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C():
			}
			backoff = min(2*backoff, maxBackoff)
			continue
		}
		// Sent, or refused for good (then retrying cannot help).
		backoff = minBackoff
		s.mu.Lock()
		if len(s.queue) > 0 && s.queue[0].event == next.event {
			s.queue = s.queue[1:]
		}
		s.mu.Unlock()
	}
}

func (s *bufferedSink) pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue)
}
