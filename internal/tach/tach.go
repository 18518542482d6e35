// Package tach turns fan tachometer edge timestamps into RPM. It is fed
// the kernel's timestamps of one edge direction (so bounce on the line and
// scheduling delays do not skew the rate) and keeps a fixed ring of recent
// edges, so recording an edge is O(1) and allocation-free even at 10 000 RPM.
package tach

import (
	"sync"
	"time"
)

// Defaults for a 4-wire PC fan with an open-collector tach output.
const (
	DefaultPulsesPerRevolution = 2
	DefaultWindow              = 2 * time.Second
	// DefaultMaxRPM bounds what a reading can claim. Blade fans top out
	// well under 10 000 RPM; anything faster is noise on the tach wire.
	DefaultMaxRPM = 20000
	ringSize      = 128
)

// Options shape a Meter. Zero values take the defaults.
type Options struct {
	// PulsesPerRevolution is how many counted edges one turn makes.
	PulsesPerRevolution int
	// Window is how far back edges count. A fan slower than one edge per
	// window reads as stopped, which with the defaults is below 15 RPM.
	Window time.Duration
	// MaxRPM caps readings; edges closer together than MaxRPM allows are
	// dropped as glitches rather than averaged in.
	MaxRPM float64
}

// Meter measures RPM from edge timestamps. Edge and RPM may be called from
// different goroutines: the GPIO event goroutine feeds it while the agent
// reads it.
type Meter struct {
	ppr      int
	window   time.Duration
	maxRPM   float64
	minDelta time.Duration

	mu   sync.Mutex
	ring [ringSize]time.Duration
	head int // index of the newest edge
	n    int // edges held, ≤ ringSize
	// glitches counts dropped edges, for diagnostics.
	glitches uint64
}

// New returns a Meter.
func New(o Options) *Meter {
	if o.PulsesPerRevolution <= 0 {
		o.PulsesPerRevolution = DefaultPulsesPerRevolution
	}
	if o.Window <= 0 {
		o.Window = DefaultWindow
	}
	if o.MaxRPM <= 0 {
		o.MaxRPM = DefaultMaxRPM
	}
	// One edge every minDelta is MaxRPM.
	minDelta := time.Duration(float64(time.Minute) / (o.MaxRPM * float64(o.PulsesPerRevolution)))
	return &Meter{ppr: o.PulsesPerRevolution, window: o.Window, maxRPM: o.MaxRPM, minDelta: minDelta}
}

// Edge records one edge at ts, a monotonic timestamp (the kernel's
// CLOCK_MONOTONIC for GPIO events). Edges that go back in time or come
// faster than MaxRPM allows are glitches and are dropped.
func (m *Meter) Edge(ts time.Duration) {
	m.mu.Lock()
	if m.n > 0 {
		if d := ts - m.ring[m.head]; d < m.minDelta {
			m.glitches++
			m.mu.Unlock()
			return
		}
	}
	m.head = (m.head + 1) % ringSize
	m.ring[m.head] = ts
	if m.n < ringSize {
		m.n++
	}
	m.mu.Unlock()
}

// RPM returns the speed over the window ending at now (same clock as the
// edges). No edge within the window reads 0: the fan is stopped, and the
// agent's stall detection relies on exactly that.
func (m *Meter) RPM(now time.Duration) float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.n < 2 {
		return 0
	}
	newest := m.ring[m.head]
	if now-newest > m.window {
		return 0
	}
	// Walk back to the oldest edge still inside the window.
	oldest, count := newest, 1
	for i := 1; i < m.n; i++ {
		ts := m.ring[(m.head-i+ringSize)%ringSize]
		if now-ts > m.window {
			break
		}
		oldest, count = ts, count+1
	}
	span := newest - oldest
	if count < 2 || span <= 0 {
		return 0
	}
	rpm := float64(count-1) / span.Minutes() / float64(m.ppr)
	if rpm > m.maxRPM {
		rpm = m.maxRPM
	}
	return rpm
}

// Glitches returns how many edges were dropped as impossible.
func (m *Meter) Glitches() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.glitches
}

// Reset forgets all edges, e.g. after the tach line was re-requested.
func (m *Meter) Reset() {
	m.mu.Lock()
	m.n, m.head = 0, 0
	m.mu.Unlock()
}
