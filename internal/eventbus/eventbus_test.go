package eventbus

import (
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func drain(s *Subscription[int]) []int {
	var out []int
	for {
		select {
		case v := <-s.C():
			out = append(out, v)
		default:
			return out
		}
	}
}

func TestPublishDeliversToEverySubscriber(t *testing.T) {
	b := New[int]()
	a, c := b.Subscribe(4), b.Subscribe(4)
	for i := 1; i <= 3; i++ {
		b.Publish(i)
	}
	for name, s := range map[string]*Subscription[int]{"a": a, "c": c} {
		if diff := cmp.Diff([]int{1, 2, 3}, drain(s)); diff != "" {
			t.Errorf("subscriber %s (-want +got):\n%s", name, diff)
		}
	}
}

func TestFullQueueDropsOldestAndCounts(t *testing.T) {
	b := New[int]()
	slow := b.Subscribe(2)
	fast := b.Subscribe(10)
	for i := 1; i <= 5; i++ {
		b.Publish(i)
	}
	if diff := cmp.Diff([]int{4, 5}, drain(slow)); diff != "" {
		t.Errorf("slow subscriber kept (-want +got):\n%s", diff)
	}
	if got := slow.Dropped(); got != 3 {
		t.Errorf("slow.Dropped() = %d, want 3", got)
	}
	if got := fast.Dropped(); got != 0 {
		t.Errorf("fast.Dropped() = %d, want 0", got)
	}
	if got := b.Dropped(); got != 3 {
		t.Errorf("bus.Dropped() = %d, want 3", got)
	}
	if diff := cmp.Diff([]int{1, 2, 3, 4, 5}, drain(fast)); diff != "" {
		t.Errorf("fast subscriber (-want +got):\n%s", diff)
	}
}

func TestCloseUnsubscribesAndIsIdempotent(t *testing.T) {
	b := New[int]()
	s := b.Subscribe(1)
	s.Close()
	s.Close()
	if n := b.Subscribers(); n != 0 {
		t.Fatalf("Subscribers() = %d after Close, want 0", n)
	}
	if _, ok := <-s.C(); ok {
		t.Fatal("channel still open after Close")
	}
	b.Publish(1) // must not panic on a closed subscriber
}

// Readers that keep up only partly still see every event exactly once,
// received or counted as dropped, in publishing order, and Publish never
// waits for them.
func TestPublishNeverBlocksWithConcurrentReaders(t *testing.T) {
	const n = 10000
	b := New[int]()
	var wg sync.WaitGroup
	subs := make([]*Subscription[int], 4)
	got := make([][]int, len(subs))
	for i := range subs {
		subs[i] = b.Subscribe(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for v := range subs[i].C() {
				got[i] = append(got[i], v)
			}
		}()
	}
	published := make(chan struct{})
	go func() {
		defer close(published)
		for i := range n {
			b.Publish(i)
		}
	}()
	select {
	case <-published:
	case <-time.After(time.Minute): // only bounds a broken run
		t.Fatal("Publish blocked on its subscribers")
	}
	for _, s := range subs {
		s.Close()
	}
	wg.Wait()
	var dropped uint64
	for i, s := range subs {
		if len(got[i]) == 0 || !strictlyIncreasing(got[i]) {
			t.Errorf("subscriber %d got %d events, not strictly in publishing order", i, len(got[i]))
			continue
		}
		if total := uint64(len(got[i])) + s.Dropped(); total != n {
			t.Errorf("subscriber %d: %d received + %d dropped = %d, want %d", i, len(got[i]), s.Dropped(), total, n)
		}
		if last := got[i][len(got[i])-1]; last != n-1 {
			t.Errorf("subscriber %d: last event %d, want the newest (%d)", i, last, n-1)
		}
		dropped += s.Dropped()
	}
	if b.Dropped() != dropped {
		t.Errorf("bus.Dropped() = %d, want the subscribers' sum %d", b.Dropped(), dropped)
	}
}

func strictlyIncreasing(v []int) bool {
	for i := 1; i < len(v); i++ {
		if v[i] <= v[i-1] {
			return false
		}
	}
	return true
}
