// Package testwait is the one way tests wait for another process (an API
// server, a kubelet, a guest kernel, a browser) to reach a state: poll a
// condition until it holds, and fail with what it last reported when the
// deadline passes. The deadline only bounds a broken run; the poll never
// decides an outcome by timing.
package testwait

import (
	"context"
	"testing"
	"time"
)

// Interval is how often conditions are polled.
const Interval = 25 * time.Millisecond

// Eventually polls cond until it reports done, and fails t with what when
// timeout passes first, quoting the last non-empty detail cond returned.
// cond's context ends with the deadline or the test.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func(ctx context.Context) (done bool, detail string)) {
	t.Helper()
	if err := Poll(t.Context(), timeout, cond); err != nil {
		t.Fatalf("timed out after %s waiting for %s; %v", timeout, what, err)
	}
}

// TimeoutError says a condition never held and what it said last.
type TimeoutError struct{ Last string }

func (e *TimeoutError) Error() string {
	if e.Last == "" {
		return "the condition never held"
	}
	return "last seen: " + e.Last
}

// Poll is Eventually for code without a testing.TB (harnesses, helpers
// that return errors): nil once cond holds, a *TimeoutError or the
// context's error otherwise.
func Poll(ctx context.Context, timeout time.Duration, cond func(ctx context.Context) (bool, string)) error {
	return PollEvery(ctx, timeout, Interval, cond)
}

// EventuallyEvery is Eventually polling every interval: for a cheap
// in-process condition that a test waits on thousands of times (a model
// on a fake clock settling after each step), where Interval would make
// the wait, not the work, the test's running time.
func EventuallyEvery(t testing.TB, timeout, interval time.Duration, what string, cond func(ctx context.Context) (done bool, detail string)) {
	t.Helper()
	if err := PollEvery(t.Context(), timeout, interval, cond); err != nil {
		t.Fatalf("timed out after %s waiting for %s; %v", timeout, what, err)
	}
}

// PollEvery is Poll polling every interval.
func PollEvery(ctx context.Context, timeout, interval time.Duration, cond func(ctx context.Context) (bool, string)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var last string
	for {
		done, detail := cond(ctx)
		if done {
			return nil
		}
		// A call cut short by the deadline reports the deadline, not the
		// state waited for: keep what the previous call saw.
		if detail != "" && ctx.Err() == nil {
			last = detail
		}
		select {
		case <-ctx.Done():
			if ctx.Err() == context.DeadlineExceeded {
				return &TimeoutError{Last: last}
			}
			return ctx.Err()
		case <-tick.C:
		}
	}
}
