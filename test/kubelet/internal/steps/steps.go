// Package steps records the results of a suite's ordered steps (the
// real-kubelet suite's and the Flux suite's subtests), so a step can refuse
// to run after one it needs failed, and the suite can end with a summary.
package steps

import (
	"fmt"
	"sync"
)

// Result is how a step ended.
type Result int

const (
	Passed Result = iota
	Failed
	Skipped
)

// Tally holds each step's last result, in the order the steps first ran.
type Tally struct {
	mu      sync.Mutex
	order   []string
	results map[string]Result
}

// Record sets name's result.
func (t *Tally) Record(name string, r Result) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.results == nil {
		t.results = map[string]Result{}
	}
	if _, ok := t.results[name]; !ok {
		t.order = append(t.order, name)
	}
	t.results[name] = r
}

// NotPassed reports whether name did not pass, or has not run.
func (t *Tally) NotPassed(name string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.results[name]
	return !ok || r != Passed
}

// Count prints "FAILED: <step>" for each failed step and returns the
// counts. A non-zero exit code with no failed or skipped step counts as one
// failure: one outside the steps (TestMain).
func (t *Tally) Count(code int) (passed, failed, skipped int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, n := range t.order {
		switch t.results[n] {
		case Passed:
			passed++
		case Failed:
			failed++
			fmt.Printf("FAILED: %s\n", n)
		case Skipped:
			skipped++
		}
	}
	if code != 0 && failed == 0 && skipped == 0 {
		failed++
	}
	return passed, failed, skipped
}
