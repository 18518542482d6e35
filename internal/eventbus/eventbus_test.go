package eventbus

import (
	"sync"
	"testing"

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

func TestPublishNeverBlocksWithConcurrentReaders(t *testing.T) {
	b := New[int]()
	var wg sync.WaitGroup
	subs := make([]*Subscription[int], 4)
	for i := range subs {
		subs[i] = b.Subscribe(1)
		wg.Add(1)
		go func(s *Subscription[int]) {
			defer wg.Done()
			for range s.C() {
			}
		}(subs[i])
	}
	for i := 0; i < 10000; i++ {
		b.Publish(i)
	}
	for _, s := range subs {
		s.Close()
	}
	wg.Wait()
}
