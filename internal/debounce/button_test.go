package debounce

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestButton feeds edge sequences as a GPIO line delivers them (active-low
// button: falling = down, rising = up; a mechanical contact bounces for a
// few milliseconds on press and on release) and advances time the way the
// agent does, at the moments Next asks for and at the end.
func TestButton(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	type edge struct {
		at    int // ms
		down  bool
		click bool
	}
	type press struct {
		Kind PressKind
		At   int // ms
		Held int // ms
	}
	cases := map[string]struct {
		edges []edge
		end   int // advance to this ms last
		want  []press
	}{
		"clean short press": {
			edges: []edge{{0, true, false}, {200, false, false}}, end: 5000,
			want: []press{{Short, 200, 200}},
		},
		"bounce on press and release is one short press": {
			edges: []edge{{0, true, false}, {2, false, false}, {4, true, false}, {300, false, false}, {303, true, false}, {305, false, false}},
			end:   5000,
			want:  []press{{Short, 305, 301}}, // held from the last bounce of the press
		},
		"quick tap released inside the press bounce window still ends": {
			edges: []edge{{0, true, false}, {20, false, false}}, end: 10000,
			want: nil, // never stable down for 50 ms: no press at all, and no false long press
		},
		"long press fires at the threshold while held": {
			edges: []edge{{0, true, false}, {4000, false, false}}, end: 10000,
			want: []press{{Long, 3000, 3000}},
		},
		"released just before the threshold is short": {
			edges: []edge{{0, true, false}, {2990, false, false}}, end: 10000,
			want: []press{{Short, 2990, 2990}},
		},
		"bounce during a long hold does not split it": {
			edges: []edge{{0, true, false}, {1500, false, false}, {1510, true, false}, {3500, false, false}}, end: 10000,
			want: []press{{Long, 3000, 3000}},
		},
		"two long presses": {
			edges: []edge{{0, true, false}, {3500, false, false}, {6000, true, false}, {9500, false, false}}, end: 20000,
			want: []press{{Long, 3000, 3000}, {Long, 9000, 3000}},
		},
		"clicks are short presses, debounced": {
			edges: []edge{{0, false, true}, {10, false, true}, {500, false, true}}, end: 1000,
			want: []press{{Short, 0, 0}, {Short, 500, 0}},
		},
		"release without press ignored": {
			edges: []edge{{0, false, false}}, end: 5000,
		},
		"repeated down (lost edge) keeps the first": {
			edges: []edge{{0, true, false}, {100, true, false}, {400, false, false}}, end: 5000,
			want: []press{{Short, 400, 400}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			b := Button{Window: 50 * time.Millisecond, LongPress: 3 * time.Second}
			var got []press
			collect := func(ps []Press) {
				for _, p := range ps {
					got = append(got, press{p.Kind, int(p.At.Sub(t0) / time.Millisecond), int(p.Held / time.Millisecond)})
				}
			}
			// advanceTo runs Advance at every deadline Next names up to
			// end, as the agent's timer would.
			advanceTo := func(end time.Time) {
				for {
					next, ok := b.Next()
					if !ok || next.After(end) {
						return
					}
					collect(b.Advance(next))
				}
			}
			for _, e := range tc.edges {
				advanceTo(ms(e.at))
				if e.click {
					collect(b.Click(ms(e.at)))
				} else {
					collect(b.Edge(ms(e.at), e.down))
				}
			}
			advanceTo(ms(tc.end))
			collect(b.Advance(ms(tc.end)))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("presses (-want +got):\n%s", diff)
			}
			if b.Held() {
				t.Error("button still held at the end")
			}
		})
	}
}

// TestButtonLateAdvance: an agent that wakes late (a slow loop) still
// decides each press once and in order.
func TestButtonLateAdvance(t *testing.T) {
	t0 := time.Unix(1000, 0)
	b := Button{Window: 50 * time.Millisecond, LongPress: 3 * time.Second}
	b.Edge(t0, true)
	ps := b.Advance(t0.Add(10 * time.Second)) // settles the press and passes the threshold at once
	if len(ps) != 1 || ps[0].Kind != Long || !ps[0].At.Equal(t0.Add(3*time.Second)) {
		t.Fatalf("presses = %+v", ps)
	}
	if ps := b.Edge(t0.Add(11*time.Second), false); len(ps) != 0 {
		t.Fatalf("release produced %+v", ps)
	}
	if ps := b.Advance(t0.Add(12 * time.Second)); len(ps) != 0 {
		t.Fatalf("settled release of a long press produced %+v", ps)
	}
}
