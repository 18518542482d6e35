package debounce

import "time"

// PressKind tells a short press from a long one.
type PressKind int

const (
	// Short is a press released before LongPress (or one whose length
	// the source cannot tell).
	Short PressKind = iota
	// Long is a press held for LongPress or more. It is decided the
	// moment the threshold passes, while the button is still held, so
	// the person sees the blade react without letting go.
	Long
)

func (k PressKind) String() string {
	if k == Long {
		return "long"
	}
	return "short"
}

// Press is one decided press.
type Press struct {
	Kind PressKind
	// At is when it was decided: the release for a short press, the
	// threshold for a long one.
	At time.Time
	// Held is how long the button was down (LongPress for a long press,
	// zero for a click).
	Held time.Duration
}

// Button turns the raw down and up edges of a mechanical button into short
// and long presses. A level counts only once it has been stable for
// Window (trailing-edge debounce): contact bounce on press and on release
// leaves one press, and a quick tap whose release falls inside the bounce
// of its press still ends the press, rather than leaving the button "held"
// until a long press fires by mistake. Because a level is decided after
// the fact, the caller asks Next when to call Advance.
//
// Edge timestamps come from whoever saw the edge first (the kernel for
// GPIO), so the lengths do not depend on scheduling delays. Not safe for
// concurrent use; the zero value is unusable: set Window and LongPress.
type Button struct {
	Window    time.Duration
	LongPress time.Duration

	clicks Debouncer

	raw     bool // the last raw level: true = down
	rawAt   time.Time
	pending bool // raw has not been stable for Window yet

	down     bool // the debounced level
	downAt   time.Time
	longDone bool
}

// Edge feeds one raw edge (down = the button went down) and returns the
// presses it decided, oldest first.
func (b *Button) Edge(t time.Time, down bool) []Press {
	out := b.Advance(t)
	if down == b.raw || (b.pending && t.Before(b.rawAt)) {
		// A repeated level (an edge between was lost) or an edge older
		// than the one pending: nothing new about the level.
		return out
	}
	b.raw, b.rawAt, b.pending = down, t, true
	return out
}

// Click feeds a whole press from a source that reports no release (the
// smart fan unit's button frame): a short press, unless it is bounce of
// the previous click.
func (b *Button) Click(t time.Time) []Press {
	if b.clicks.Window == 0 {
		b.clicks.Window = b.Window
	}
	if !b.clicks.Accept(t) {
		return nil
	}
	return []Press{{Kind: Short, At: t}}
}

// Advance returns the presses decided by time now.
func (b *Button) Advance(now time.Time) []Press {
	var out []Press
	if b.pending && !now.Before(b.rawAt.Add(b.Window)) {
		b.pending = false
		if b.raw != b.down {
			if b.raw {
				b.down, b.downAt, b.longDone = true, b.rawAt, false
			} else {
				b.down = false
				if !b.longDone {
					out = append(out, Press{Kind: Short, At: b.rawAt, Held: b.rawAt.Sub(b.downAt)})
				}
			}
		}
	}
	// A long press needs the button still down, raw as well as
	// debounced: a release that is still settling may end it short.
	if b.down && b.raw && !b.longDone && !now.Before(b.downAt.Add(b.LongPress)) {
		b.longDone = true
		out = append(out, Press{Kind: Long, At: b.downAt.Add(b.LongPress), Held: b.LongPress})
	}
	return out
}

// Next returns when Advance can next decide something; ok is false when
// nothing is pending.
func (b *Button) Next() (t time.Time, ok bool) {
	if b.pending {
		t, ok = b.rawAt.Add(b.Window), true
	}
	if b.down && b.raw && !b.longDone && !b.pending {
		if l := b.downAt.Add(b.LongPress); !ok || l.Before(t) {
			t, ok = l, true
		}
	}
	return t, ok
}

// Held reports whether the button is down (debounced) now.
func (b *Button) Held() bool { return b.down }
