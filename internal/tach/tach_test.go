package tach

import (
	"math"
	"testing"
	"time"
)

// edgesAt feeds edges for a fan turning at rpm from start for d.
func feed(m *Meter, rpm float64, ppr int, start, d time.Duration) time.Duration {
	period := time.Duration(float64(time.Minute) / (rpm * float64(ppr)))
	ts := start
	for ; ts < start+d; ts += period {
		m.Edge(ts)
	}
	return ts - period
}

func TestRPM(t *testing.T) {
	base := 1000 * time.Second // kernel monotonic clocks do not start at 0
	cases := map[string]struct {
		rpm  float64
		opts Options
	}{
		"idle fan 600":          {rpm: 600},
		"typical 3000":          {rpm: 3000},
		"fast 10000":            {rpm: 10000},
		"slow 40":               {rpm: 40},
		"one pulse per rev":     {rpm: 1500, opts: Options{PulsesPerRevolution: 1}},
		"short window 5000 rpm": {rpm: 5000, opts: Options{Window: 200 * time.Millisecond}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			m := New(tc.opts)
			last := feed(m, tc.rpm, m.ppr, base, 3*time.Second)
			got := m.RPM(last + time.Millisecond)
			if math.Abs(got-tc.rpm)/tc.rpm > 0.01 {
				t.Fatalf("RPM = %.1f, want %.0f ±1 %%", got, tc.rpm)
			}
		})
	}
}

func TestStoppedAndEdgeCases(t *testing.T) {
	base := 50 * time.Second
	t.Run("no edges", func(t *testing.T) {
		if got := New(Options{}).RPM(base); got != 0 {
			t.Fatalf("RPM = %v", got)
		}
	})
	t.Run("one edge", func(t *testing.T) {
		m := New(Options{})
		m.Edge(base)
		if got := m.RPM(base); got != 0 {
			t.Fatalf("RPM = %v", got)
		}
	})
	t.Run("fan stops: reading falls to 0 after the window", func(t *testing.T) {
		m := New(Options{})
		last := feed(m, 3000, 2, base, time.Second)
		if got := m.RPM(last); got < 2900 {
			t.Fatalf("running RPM = %v", got)
		}
		if got := m.RPM(last + DefaultWindow + time.Millisecond); got != 0 {
			t.Fatalf("stopped RPM = %v, want 0", got)
		}
	})
	t.Run("identical timestamps do not divide by zero", func(t *testing.T) {
		m := New(Options{})
		for i := 0; i < 10; i++ {
			m.Edge(base)
		}
		got := m.RPM(base)
		if got != 0 || math.IsNaN(got) || math.IsInf(got, 0) {
			t.Fatalf("RPM = %v, want 0", got)
		}
		if m.Glitches() != 9 {
			t.Fatalf("glitches = %d, want 9", m.Glitches())
		}
	})
	t.Run("glitch burst does not run away", func(t *testing.T) {
		m := New(Options{})
		last := feed(m, 2000, 2, base, time.Second)
		// 100 edges 1 µs apart: electrical noise, not a 15 000 000 RPM fan.
		for i := 1; i <= 100; i++ {
			m.Edge(last + time.Duration(i)*time.Microsecond)
		}
		got := m.RPM(last + time.Millisecond)
		if math.Abs(got-2000) > 40 {
			t.Fatalf("RPM after glitches = %v, want ≈2000", got)
		}
		if got > DefaultMaxRPM {
			t.Fatalf("RPM %v above cap", got)
		}
	})
	t.Run("time going backwards is dropped", func(t *testing.T) {
		m := New(Options{})
		m.Edge(base)
		m.Edge(base + 20*time.Millisecond)
		m.Edge(base - time.Second)
		if got := m.RPM(base + 20*time.Millisecond); math.Abs(got-1500) > 1 {
			t.Fatalf("RPM = %v, want 1500", got)
		}
	})
	t.Run("speed change shows within the window", func(t *testing.T) {
		m := New(Options{Window: 500 * time.Millisecond})
		last := feed(m, 6000, 2, base, 2*time.Second)
		last = feed(m, 1200, 2, last+time.Millisecond, 2*time.Second)
		if got := m.RPM(last); math.Abs(got-1200)/1200 > 0.02 {
			t.Fatalf("RPM = %v, want ≈1200", got)
		}
	})
	t.Run("reset", func(t *testing.T) {
		m := New(Options{})
		last := feed(m, 3000, 2, base, time.Second)
		m.Reset()
		if got := m.RPM(last); got != 0 {
			t.Fatalf("RPM after reset = %v", got)
		}
	})
}

// BenchmarkEdges1000 is the CPU cost of recording 1 000 edges at 10 000 RPM
// (about 3 s of a fast fan) plus one reading, the agent's per-second load.
func BenchmarkEdges1000(b *testing.B) {
	m := New(Options{})
	period := time.Duration(float64(time.Minute) / (10000 * 2))
	ts := time.Second
	b.ReportAllocs()
	for b.Loop() {
		for i := 0; i < 1000; i++ {
			ts += period
			m.Edge(ts)
		}
		if m.RPM(ts) == 0 {
			b.Fatal("no reading")
		}
	}
}
