// Package debounce turns the bouncing edges of a mechanical button into
// single presses: Debouncer for sources that report presses only, Button
// for down and up edges, which also tells a long press from a short one.
package debounce

import "time"

// Debouncer accepts a press only when no press was seen within Window
// before it. Every edge, accepted or not, restarts the window, so a contact
// that chatters for longer than Window still yields one press. The zero
// value with a Window set is ready to use; it is not safe for concurrent use.
type Debouncer struct {
	Window time.Duration

	last time.Time
	seen bool
}

// Accept reports whether an edge at t is a new press.
func (d *Debouncer) Accept(t time.Time) bool {
	quiet := !d.seen || t.Sub(d.last) >= d.Window
	// Edges can arrive out of order when two sources timestamp them; never
	// move the window backwards.
	if !d.seen || t.After(d.last) {
		d.last = t
	}
	d.seen = true
	return quiet
}
