package uart_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kubeblade/kubeblade/internal/smartfan"
	"github.com/kubeblade/kubeblade/internal/smartfan/smartfantest"
	"github.com/kubeblade/kubeblade/internal/smartfan/uart"
	"github.com/kubeblade/kubeblade/internal/testwait"
)

// The tests in this file run the client against the firmware model
// (smartfantest.Unit) over real pseudo-terminals, two blades sharing one
// unit, on one fake clock that the unit's Advance moves.

const resend = uart.DefaultResendInterval

// rack is one smart fan unit with a blade agent's client on each UART.
type rack struct {
	t       *testing.T
	unit    *smartfantest.Unit
	clients [2]*uart.Client
	since   [2]time.Time // when each client's re-send timer started
	want    [2]uint8
	wants   []wish
}

type wish struct {
	at   time.Time
	side smartfantest.Side
	pct  uint8
}

func newRack(t *testing.T, left, right uint8) *rack {
	r := &rack{t: t, unit: smartfantest.NewUnit(t, smartfantest.Options{})}
	for i, pct := range []uint8{left, right} {
		s := smartfantest.Side(i)
		master, path := smartfantest.OpenPTY(t)
		r.unit.Attach(s, master)
		c, _ := start(t, uart.Options{Dial: uart.Serial(path), Clock: r.unit.Clock()})
		r.clients[s] = c
		r.since[s] = r.unit.Clock().Now()
		connected(t, c, pct)
		r.wish(s, pct)
		// The unit reads each UART on its own goroutine: without settling
		// here, the right blade's first request could be handled before the
		// left's, and the shared request variable (which every later test
		// reasons about) would hold the wrong blade's percent.
		r.settle()
	}
	return r
}

func (r *rack) wish(s smartfantest.Side, pct uint8) {
	r.want[s] = pct
	r.wants = append(r.wants, wish{at: r.unit.Clock().Now(), side: s, pct: pct})
}

func (r *rack) setFan(s smartfantest.Side, pct uint8) {
	r.t.Helper()
	if err := r.clients[s].SetFanPercent(pct); err != nil {
		r.t.Fatal(err)
	}
	r.wish(s, pct)
}

func (r *rack) setLED(s smartfantest.Side, c smartfantest.Color) {
	r.t.Helper()
	if err := r.clients[s].SetLED(c.R, c.G, c.B); err != nil {
		r.t.Fatal(err)
	}
}

// advance moves time, stopping at every client timer tick (so a re-send
// lands at the instant it is due) and settling at each stop.
func (r *rack) advance(d time.Duration) {
	target := r.unit.Clock().Now().Add(d)
	for {
		now := r.unit.Clock().Now()
		next := target
		for _, since := range r.since {
			tick := since.Add((now.Sub(since)/resend + 1) * resend)
			if tick.Before(next) {
				next = tick
			}
		}
		r.unit.Advance(next.Sub(now))
		r.settle()
		if !next.Before(target) {
			return
		}
	}
}

// settle waits until both sides are quiet: every re-send tick that fell
// due has been sent, the unit handled every frame the clients sent, and
// the clients handled (and answered) every frame the unit sent.
func (r *rack) settle() {
	r.t.Helper()
	now := r.unit.Clock().Now()
	// Polled every millisecond: the random tests settle thousands of
	// times, and the pty round trip takes far less than Interval.
	testwait.EventuallyEvery(r.t, waitTimeout, time.Millisecond, "the rack to settle", func(context.Context) (bool, string) {
		var notes []string
		for i, c := range r.clients {
			if c == nil {
				continue // not attached yet (newRack)
			}
			s := smartfantest.Side(i)
			st := c.Stats()
			ticks := uint64(now.Sub(r.since[s]) / resend)
			if st.Resends != ticks || r.unit.Frames(s) != st.Sent || st.Handled != r.unit.Sent(s) {
				notes = append(notes, fmt.Sprintf("%s: resends %d/%d, unit got %d/%d, client handled %d/%d",
					s, st.Resends, ticks, r.unit.Frames(s), st.Sent, st.Handled, r.unit.Sent(s)))
			}
		}
		return len(notes) == 0, strings.Join(notes, "; ")
	})
}

// underCooled returns the longest stretch during which the fan ran below
// the larger of the two agents' requests, when it began, and how many
// such stretches there were (a dip between two frames at one instant
// counts, with length zero).
func (r *rack) underCooled() (longest time.Duration, from time.Time, dips int) {
	type ev struct {
		at   time.Time
		fan  int // -1: not a fan change
		side smartfantest.Side
		pct  uint8
	}
	var evs []ev
	for _, c := range r.unit.History() {
		evs = append(evs, ev{at: c.At, fan: int(c.Percent)})
	}
	for _, w := range r.wants {
		evs = append(evs, ev{at: w.at, fan: -1, side: w.side, pct: w.pct})
	}
	// Stable by time; everything at one instant is applied before judging.
	for i := 1; i < len(evs); i++ {
		for j := i; j > 0 && evs[j].at.Before(evs[j-1].at); j-- {
			evs[j], evs[j-1] = evs[j-1], evs[j]
		}
	}
	// Judged after every event, in order: a dip between two frames at
	// one instant counts, with length zero.
	var fan int
	var want [2]uint8
	var start time.Time
	below := false
	judge := func(at time.Time) {
		now := fan < int(max(want[0], want[1]))
		switch {
		case now && !below:
			start, below = at, true
			dips++
		case !now && below:
			below = false
			if d := at.Sub(start); d > longest {
				longest, from = d, start
			}
		}
	}
	for _, e := range evs {
		if e.fan >= 0 {
			fan = e.fan
		} else {
			want[e.side] = e.pct
		}
		judge(e.at)
	}
	if below {
		if d := r.unit.Clock().Now().Sub(start); d > longest {
			longest, from = d, start
		}
	}
	return longest, from, dips
}

func (r *rack) history() string {
	var b strings.Builder
	for _, c := range r.unit.History() {
		fmt.Fprintf(&b, "  %s fan %3d %% (%s)\n", c.At.Format("05.000"), c.Percent, c.Why)
	}
	for _, w := range r.wants {
		fmt.Fprintf(&b, "  %s %s agent wants %d %%\n", w.at.Format("05.000"), w.side, w.pct)
	}
	return b.String()
}

func TestResendsEveryInterval(t *testing.T) {
	r := newRack(t, 60, 20)
	for _, c := range r.clients {
		if st := c.Stats(); st.Resends != 0 {
			t.Fatalf("re-sent before the first period: %+v", st)
		}
	}
	r.advance(5 * resend)
	for i, c := range r.clients {
		if st := c.Stats(); st.Resends != 5 {
			t.Fatalf("%s client re-sent %d times in 5 periods", smartfantest.Side(i), st.Resends)
		}
	}
	if st := r.unit.State(); st.Fan != 60 || st.Requests != [2]uint8{60, 20} {
		t.Fatalf("unit: %+v", st)
	}
}

// TestSilentResetIsUndoneWithinOnePeriod: the unit resets (40 %, both
// requests forgotten) and tells nobody; the agents' next re-sends restore
// the higher request.
func TestSilentResetIsUndoneWithinOnePeriod(t *testing.T) {
	r := newRack(t, 90, 30)
	r.advance(resend / 4)
	r.unit.Reset()
	if st := r.unit.State(); st.Fan != 40 {
		t.Fatalf("the model did not reset: %+v", st)
	}
	r.advance(resend)
	if st := r.unit.State(); st.Fan != 90 || st.Requests != [2]uint8{90, 30} {
		t.Fatalf("one period after the reset: %+v\n%s", st, r.history())
	}
	if d, from, _ := r.underCooled(); d > resend {
		t.Fatalf("under-cooled for %s from %s:\n%s", d, from.Format("05.000"), r.history())
	}
}

// TestReportAfterGapCountsAsRestart: the firmware's reset path skips a
// report, so reports resuming after more than RestartGap make the clients
// re-send at once, not at their next tick.
func TestReportAfterGapCountsAsRestart(t *testing.T) {
	r := newRack(t, 70, 10)
	r.advance(2 * time.Second) // first report
	r.unit.FailI2C()
	r.advance(2 * time.Second) // the report that resets instead
	if st := r.unit.State(); st.Resets != 1 {
		t.Fatalf("no reset: %+v", st)
	}
	before := r.clients[0].Stats().Restarts
	r.advance(2 * time.Second) // reports resume, 4 s after the last
	if got := r.clients[0].Stats().Restarts; got != before+1 {
		t.Fatalf("restarts %d → %d: the gap was not taken as a restart", before, got)
	}
}

// TestLEDNeverLowersTheFan: an LED frame sets the sender's request to the
// last percent the unit decoded (here the other blade's lower one). The
// client's fan request just before it makes that percent its own, so the
// fan never dips, not even for the time of one frame.
func TestLEDNeverLowersTheFan(t *testing.T) {
	r := newRack(t, 80, 15)
	r.setFan(smartfantest.Right, 16) // the shared percent is now 16
	r.settle()
	r.setLED(smartfantest.Left, smartfantest.Color{R: 255})
	r.settle()
	if st := r.unit.State(); st.Fan != 80 || st.LEDs[smartfantest.Left] != (smartfantest.Color{R: 255}) {
		t.Fatalf("after the LED frame: %+v\n%s", st, r.history())
	}
	if d, from, dips := r.underCooled(); dips != 0 {
		t.Fatalf("an LED update left the fan below the request (%d times, longest %s from %s):\n%s", dips, d, from.Format("05.000"), r.history())
	}
}

// TestNoSequenceUnderCoolsLongerThanOnePeriod drives random sequences of
// requests, LED updates, resets, failed sensor reads and time on two
// agents sharing one unit, and checks the fan never stays below the
// higher request for longer than one re-send period. Lost frames are left
// out: each one can add a period (TestLostFrameIsRepairedByTheNextResend
// shows the repair).
func TestNoSequenceUnderCoolsLongerThanOnePeriod(t *testing.T) {
	seeds := uint64(200)
	if testing.Short() {
		seeds = 20
	}
	// A rack spends its time waiting for its ptys, not computing, so
	// racks run many at a time: more than t.Parallel's limit (GOMAXPROCS),
	// which would make the waits add up.
	const racks = 16
	slots := make(chan struct{}, racks)
	var wg sync.WaitGroup
	for seed := uint64(1); seed <= seeds; seed++ {
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-slots; wg.Done() }()
			t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, 12))
				steps := make([]byte, 60)
				for i := range steps {
					steps[i] = byte(rng.Uint32())
				}
				runSequence(t, byte(rng.IntN(101)), byte(rng.IntN(101)), steps)
			})
		}()
	}
	wg.Wait()
}

// FuzzNoSequenceUnderCools is the same invariant over sequences the fuzzer
// picks: go test -fuzz FuzzNoSequenceUnderCools ./internal/smartfan/uart.
func FuzzNoSequenceUnderCools(f *testing.F) {
	f.Add(byte(90), byte(30), []byte{0x21, 0x80, 0x41, 0x70})                   // requests, LED, reset
	f.Add(byte(80), byte(15), []byte{0x5f, 0x66, 0x00, 0x90, 0x08, 0x99, 0x31}) // lost frames around an LED
	f.Add(byte(0), byte(100), []byte{0xe0, 0x0f, 0xe1, 0x70, 0x70, 0x71})       // I2C errors and resets
	f.Fuzz(func(t *testing.T, left, right byte, steps []byte) {
		if len(steps) > 200 {
			steps = steps[:200] // a longer run adds time, not cases
		}
		runSequence(t, left%101, right%101, steps)
	})
}

// runSequence starts a rack at the given requests, applies one action per
// step byte (its low three bits choose the action, bit 3 the blade, the
// high nibble the amount), lets two periods pass and checks the fan never
// ran below the higher request for longer than one re-send period and
// ends at it.
func runSequence(t *testing.T, left, right byte, steps []byte) {
	r := newRack(t, left, right)
	var log []string
	for _, b := range steps {
		s := smartfantest.Side(b >> 3 & 1)
		amount := int(b >> 4) // 0–15
		switch b & 7 {
		case 0, 1:
			d := time.Duration(50+amount*63) * time.Millisecond // up to ~1 s
			log = append(log, fmt.Sprintf("advance %s", d))
			r.advance(d)
		case 2, 3:
			p := uint8(amount * 100 / 15)
			log = append(log, fmt.Sprintf("%s wants %d", s, p))
			r.setFan(s, p)
		case 4, 5:
			log = append(log, fmt.Sprintf("%s LED", s))
			r.setLED(s, smartfantest.Color{R: b, G: ^b})
		case 6:
			if amount < 8 {
				log = append(log, "reset")
				r.unit.Reset()
			} else {
				log = append(log, "I2C error")
				r.unit.FailI2C()
			}
		case 7:
			// Long enough for reports, and for a reset's gap in them.
			d := time.Duration(1000+amount*200) * time.Millisecond // up to 4 s
			log = append(log, fmt.Sprintf("advance %s", d))
			r.advance(d)
		}
		r.settle()
	}
	r.advance(2 * resend)
	if d, from, _ := r.underCooled(); d > resend {
		t.Fatalf("under-cooled for %s from %s\nactions: %s\n%s", d, from.Format("05.000"), strings.Join(log, ", "), r.history())
	}
	if st := r.unit.State(); st.Fan != max(r.want[0], r.want[1]) {
		t.Fatalf("fan %d at the end, want %d\nactions: %s\n%s", st.Fan, max(r.want[0], r.want[1]), strings.Join(log, ", "), r.history())
	}
}

// TestLostFrameIsRepairedByTheNextResend: the firmware's one-slot queue
// can drop the fan requests around an LED frame; the periodic re-send
// repairs it within one period.
func TestLostFrameIsRepairedByTheNextResend(t *testing.T) {
	r := newRack(t, 70, 20)
	r.advance(resend / 2)
	r.unit.DropFanFrames(smartfantest.Left, smartfan.CmdSetFanPercent, 2)
	r.setLED(smartfantest.Left, smartfantest.Color{G: 9})
	r.settle()
	if st := r.unit.State(); st.Fan != 20 {
		t.Fatalf("the model should now run at the right blade's 20 %%: %+v", st)
	}
	r.advance(resend)
	if st := r.unit.State(); st.Fan != 70 {
		t.Fatalf("not repaired: %+v\n%s", st, r.history())
	}
	if d, _, _ := r.underCooled(); d > resend {
		t.Fatalf("under-cooled for %s", d)
	}
}

// TestRestartedUnitGetsTheLEDBack: after a restart the unit's LEDs are
// dark; the client's re-send after a suspected restart includes the LED.
func TestRestartedUnitGetsTheLEDBack(t *testing.T) {
	r := newRack(t, 50, 50)
	r.setLED(smartfantest.Left, smartfantest.Color{B: 200})
	r.advance(2 * time.Second)
	r.unit.FailI2C()
	r.advance(4 * time.Second)
	if st := r.unit.State(); st.LEDs[smartfantest.Left] != (smartfantest.Color{B: 200}) || st.Fan != 50 {
		t.Fatalf("after the restart: %+v\n%s", st, r.history())
	}
}
