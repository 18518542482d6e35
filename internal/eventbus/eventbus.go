// Package eventbus fans events out from the agent's hardware loop to any
// number of subscribers (gRPC watches, the Kubernetes reporter, metrics)
// without ever blocking the loop: each subscriber has a bounded queue, and
// when it falls behind its oldest events are dropped and counted.
package eventbus

import (
	"sync"
	"sync/atomic"
)

// Bus delivers values of type T to subscribers. The zero Bus is not usable;
// call New.
type Bus[T any] struct {
	mu      sync.Mutex
	subs    map[*Subscription[T]]struct{}
	dropped atomic.Uint64
}

// New returns an empty bus.
func New[T any]() *Bus[T] {
	return &Bus[T]{subs: map[*Subscription[T]]struct{}{}}
}

// Subscription is one subscriber's queue. Read from C; call Close when done.
type Subscription[T any] struct {
	bus     *Bus[T]
	ch      chan T
	dropped atomic.Uint64
	once    sync.Once
}

// C returns the channel events arrive on. It is closed by Close.
func (s *Subscription[T]) C() <-chan T { return s.ch }

// Dropped returns how many events this subscriber lost by falling behind.
func (s *Subscription[T]) Dropped() uint64 { return s.dropped.Load() }

// Close unsubscribes and closes C. It is safe to call more than once.
func (s *Subscription[T]) Close() {
	s.once.Do(func() {
		s.bus.mu.Lock()
		delete(s.bus.subs, s)
		close(s.ch)
		s.bus.mu.Unlock()
	})
}

// Subscribe returns a subscription whose queue holds up to size events
// (at least 1).
func (b *Bus[T]) Subscribe(size int) *Subscription[T] {
	if size < 1 {
		size = 1
	}
	s := &Subscription[T]{bus: b, ch: make(chan T, size)}
	b.mu.Lock()
	b.subs[s] = struct{}{}
	b.mu.Unlock()
	return s
}

// Publish delivers v to every subscriber without blocking. A full queue
// loses its oldest event to make room, so a slow reader always ends up with
// the most recent state.
func (b *Bus[T]) Publish(v T) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for s := range b.subs {
		for {
			select {
			case s.ch <- v:
			default:
				// Queue full: drop the oldest and retry. Only Publish
				// sends, under b.mu, so the retry cannot loop forever.
				select {
				case <-s.ch:
					s.dropped.Add(1)
					b.dropped.Add(1)
				default:
				}
				continue
			}
			break
		}
	}
}

// Dropped returns how many events all subscribers together lost.
func (b *Bus[T]) Dropped() uint64 { return b.dropped.Load() }

// Subscribers returns the current number of subscribers.
func (b *Bus[T]) Subscribers() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.subs)
}
