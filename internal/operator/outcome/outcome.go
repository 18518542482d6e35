// Package outcome records what happened when a controller applied a
// BladeConfig (its agent DaemonSet, say): the error the API server
// returned, for the generation it was applying, or nothing once it worked.
// The status controller, the only writer of BladeConfig status, reads it,
// so an error another controller met reaches the BladeConfig's Degraded
// condition and a Warning Event instead of only a log line; it clears
// when the same controller next succeeds.
package outcome

import (
	"sort"
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/event"

	kbv1 "github.com/kubeblade/kubeblade/api/v1alpha1"
)

// Failure is one controller's last error on one BladeConfig.
type Failure struct {
	// Controller that met the error.
	Controller string
	// Generation of the BladeConfig it was applying.
	Generation int64
	// Message is the error as the API server (or the controller) put it.
	Message string
}

// Store holds the last failure per BladeConfig and controller. It is safe
// for concurrent use.
type Store struct {
	mu       sync.Mutex
	failures map[string]map[string]Failure // config → controller → failure
	changed  chan event.GenericEvent
}

// New returns an empty store.
func New() *Store {
	return &Store{failures: map[string]map[string]Failure{}, changed: make(chan event.GenericEvent, 1024)}
}

// Record stores err (nil: success, which clears the controller's failure)
// for a BladeConfig generation, and announces a change on Changed.
func (s *Store) Record(controller string, bc *kbv1.BladeConfig, err error) {
	s.mu.Lock()
	byController := s.failures[bc.Name]
	old, had := byController[controller]
	var changed bool
	if err == nil {
		if had {
			delete(byController, controller)
			if len(byController) == 0 {
				delete(s.failures, bc.Name)
			}
			changed = true
		}
	} else {
		f := Failure{Controller: controller, Generation: bc.Generation, Message: err.Error()}
		if !had || old != f {
			if byController == nil {
				byController = map[string]Failure{}
				s.failures[bc.Name] = byController
			}
			byController[controller] = f
			changed = true
		}
	}
	s.mu.Unlock()
	if changed {
		obj := &kbv1.BladeConfig{}
		obj.Name = bc.Name
		select {
		case s.changed <- event.GenericEvent{Object: obj}:
		default:
			// A full buffer means the status controller is far behind; it
			// recomputes every config on its next events anyway.
		}
	}
}

// Failures returns a BladeConfig's failures, by controller name.
func (s *Store) Failures(config string) []Failure {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Failure, 0, len(s.failures[config]))
	for _, f := range s.failures[config] {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Controller < out[j].Controller })
	return out
}

// Forget drops a deleted BladeConfig's failures.
func (s *Store) Forget(config string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.failures, config)
}

// Changed announces BladeConfigs whose failures changed, for a
// source.Channel.
func (s *Store) Changed() <-chan event.GenericEvent { return s.changed }
