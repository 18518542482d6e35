package kubeagent

import (
	"time"

	"github.com/kubeblade/kubeblade/api/v1alpha1"
)

// A change to a BladeConfig's spec reaches every agent that follows it at
// once: one watch event each. Every agent applies it to its hardware
// straight away, and then confirms it with two writes, its Blade's status
// (the new generation) and a ConfigApplied Event. Written at once, that is
// two writes per blade in the same second: 20 000 for 10 000 blades, a
// burst that an API server queues past its 60 s request timeout, after
// which the agents retry and the burst feeds itself (docs/performance.md,
// "The fleet at scale"). So the confirmation of a change is spread: each
// agent waits a random time in [0, matchedNodes / ConfirmRate) before it
// writes it, the BladeConfig's status.matchedNodes being how many agents
// received the same change. Only the confirmation waits: the hardware
// already runs the new config, and a change of the blade's own state
// (critical temperature, identify, a stalled fan) is written at once and
// carries the new generation with it.

// DefaultConfirmRate is the rate, in blades per second, at which a fleet
// confirms one BladeConfig change: 200 Blade status writes and 200 Events
// per second, beside the Node Lease renewals a 5 000-node cluster's
// kubelets already make (one per node per 10 s, 500 per second).
const DefaultConfirmRate = 200

// MaxConfirmSpread bounds the spread however large the fleet.
const MaxConfirmSpread = time.Minute

// ConfirmSpread is the window each of matched agents picks its delay from
// at rate blades per second.
func ConfirmSpread(matched int32, rate float64) time.Duration {
	if matched <= 1 || rate <= 0 {
		return 0
	}
	return min(time.Duration(float64(matched)/rate*float64(time.Second)), MaxConfirmSpread)
}

// holdConfirmation starts the wait for a new generation of the BladeConfig
// already applied (not for the first config of a run, nor a move to
// another BladeConfig: the operator assigns Nodes at its own client's
// pace, so those arrive spread already).
func (r *Reporter) holdConfirmation(bc *v1alpha1.BladeConfig, now time.Time) {
	if r.applied == nil || r.applied.Name != bc.Name || r.lastBlade == nil {
		r.confirmAt = time.Time{}
		return
	}
	spread := ConfirmSpread(bc.Status.MatchedNodes, r.o.ConfirmRate)
	r.confirmAt = now.Add(time.Duration(r.o.jitter() * float64(spread)))
}

// confirming reports whether the change held by holdConfirmation is still
// waiting at now.
func (r *Reporter) confirming(now time.Time) bool {
	return !r.confirmAt.IsZero() && now.Before(r.confirmAt)
}

// onlyConfirmation reports whether next differs from what was last
// written only by what applying a config changes: its name and
// generation, the LEDs (the idle colour), the fan's duty and its published
// demand (the curve). Those wait for the confirmation; anything else is a
// change of the blade's own state.
func onlyConfirmation(last *v1alpha1.BladeStatus, next v1alpha1.BladeStatus) bool {
	if last == nil {
		return false
	}
	n := *next.DeepCopy()
	n.Config = last.Config
	n.LEDs = last.LEDs
	n.Fan.Percent = last.Fan.Percent
	n.Fan.DemandPercent = last.Fan.DemandPercent
	return classify(last, n) != stateChange
}

// recordConfigApplied hands a held ConfigApplied event to the Events
// recorder once its confirmation is due. The loop, not recordEvents,
// reports these, so the Event and the status confirm a change together.
func (r *Reporter) recordConfigApplied(now time.Time) {
	if len(r.appliedEvents) == 0 || r.confirming(now) {
		return
	}
	// The config applier got to the hardware before the loop took the
	// config over (and so before its confirmation was held): wait for
	// the loop.
	if a := r.lastApplied.Load(); a != nil && !sameConfig(a.config, r.applied) {
		return
	}
	for _, ev := range r.appliedEvents {
		r.events.Record(ev)
	}
	r.appliedEvents = r.appliedEvents[:0]
}

// maxHeldEvents bounds the ConfigApplied events held for confirmation.
const maxHeldEvents = 4
