package testwait

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

func TestPollReturnsOnceTheConditionHolds(t *testing.T) {
	var n atomic.Int32
	err := Poll(t.Context(), time.Minute, func(context.Context) (bool, string) {
		return n.Add(1) == 3, "not yet"
	})
	if err != nil || n.Load() != 3 {
		t.Fatalf("Poll = %v after %d calls, want nil after 3", err, n.Load())
	}
}

func TestPollTimesOutWithTheLastDetail(t *testing.T) {
	err := Poll(t.Context(), 3*Interval, func(context.Context) (bool, string) { return false, "still pending" })
	var te *TimeoutError
	if !errors.As(err, &te) || te.Last != "still pending" {
		t.Fatalf("Poll = %v, want a TimeoutError quoting the last detail", err)
	}
}

func TestPollStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := Poll(ctx, time.Minute, func(context.Context) (bool, string) { return false, "" })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Poll = %v, want context.Canceled", err)
	}
}

func TestPollEveryReturnsOnceTheConditionHolds(t *testing.T) {
	var n atomic.Int32
	err := PollEvery(t.Context(), time.Minute, time.Millisecond, func(context.Context) (bool, string) {
		return n.Add(1) == 5, "not yet"
	})
	if err != nil || n.Load() != 5 {
		t.Fatalf("PollEvery = %v after %d calls, want nil after 5", err, n.Load())
	}
}
