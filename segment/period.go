package segment

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/leafd/leafd"
)

// How a server keeps a dated tag's numbers in their period.
//
// Each range of a dated tag is loaded for the period the server's clock is
// in (the store checks the clock against the database's in the same
// transaction), and its buffer carries the end of that period (until). A
// buffer is given up (drained: its numbers are skipped, never issued) once
// the clock is within periodMargin of that end, so that no number is issued
// after its period:
//
//   - NextN (every route) reads the clock before it takes from a buffer
//     whose period ends within periodWatch, and gives the buffer up when
//     its period is closing. Before that it reads no clock: it compares the
//     allocator's coarse clock (Allocator.wall, the server's clock read
//     every coarseTick by a goroutine of its own) with the start of that
//     last stretch (buffer.watch). The coarse clock lags the server's by at
//     most coarseTick, far less than periodWatch, so NextN reads the clock
//     in time; it could issue a number after its period only if that
//     goroutine ran more than periodWatch-coarseTick late (a process
//     stopped or starved that long), or, after the server's clock stepped
//     forward over the whole of periodWatch, for at most coarseTick;
//   - the slow path reads the clock, and gives such a buffer up too;
//   - Next and Handle.Next, whose hot path reads no clock, take NextN's
//     path for a dated tag (tag.takeOne). A timer per tag also gives the
//     buffers up periodMargin before the end, so that a tag nobody asks
//     for holds no numbers of a period past; being measured on the
//     monotonic clock, it does not see the server's clock stepped, and
//     no request relies on it.
//
// Requests in the last periodMargin of a period wait for the next one: no
// range is loaded for a period about to end.
const periodMargin = 20 * time.Millisecond

// periodWatch is the last stretch of a period in which NextN reads the
// clock on every call; coarseTick is how often the coarse clock is read.
const (
	periodWatch = time.Minute
	coarseTick  = 50 * time.Millisecond
)

// noWatch is buffer.watch of a buffer whose period never ends.
const noWatch = math.MaxInt64

// setPeriod makes b a buffer of the period that ends at until.
func (b *buffer) setPeriod(until time.Time) {
	b.until = until
	b.watch = until.Add(-periodWatch).UnixMilli()
}

// watched reports whether b's period may be closing by the coarse clock
// wall (Unix ms): NextN then reads the clock before it takes from b.
func (b *buffer) watched(wall int64) bool { return wall >= b.watch }

// readWall reads the server's clock into the coarse clock.
func (a *Allocator) readWall() { a.wall.Store(a.cfg.Now().UnixMilli()) }

// startCoarseClock starts, once, the goroutine that reads the server's
// clock into the coarse clock every coarseTick, until the allocator closes.
// It runs from the first load of a dated tag on.
func (a *Allocator) startCoarseClock() {
	a.coarseOnce.Do(func() {
		a.goroutine(func() {
			tick := time.NewTicker(coarseTick)
			defer tick.Stop()
			for {
				select {
				case <-a.ctx.Done():
					return
				case <-tick.C:
					a.readWall()
				}
			}
		})
	})
}

// errPeriodClosing is a load asked in the last periodMargin of a period:
// the load waits for the next period and asks again.
var errPeriodClosing = errors.New("segment: the period is about to end")

// ErrLaterPeriod is Store.AllocateIn's answer when the tag's max_id is past
// the window's limit: other servers, whose clocks passed the end of the
// period first, took numbers of a later one. The period is over for this
// server too, a moment later by its clock (within the clock tolerance):
// the load waits for it, as for a closing period.
var ErrLaterPeriod = errors.New("a later period's numbers were handed out")

// periodState is what a server knows of a dated tag's current period,
// guarded by the tag's mu.
type periodState struct {
	// timer gives up the buffers of the period that ends at timerFor;
	// armed until it did.
	timer    *time.Timer
	timerFor time.Time
	armed    bool
	// laterSince is when loads began to find the tag's max_id past the
	// period of this server's clock (ErrLaterPeriod); zero when they do
	// not.
	laterSince time.Time
	// refusal is a failure answered from memory until refusedUntil,
	// without asking the store again: period_exhausted until the period
	// it names ends, a clock too far from the database's for a second.
	refusal      error
	refusedUntil time.Time
	// top is the last number of the tag's last range on this server (or
	// its row's max_id - 1 before the first): the step is sized from the
	// room its period has left.
	top int64
}

// closing reports whether the period of a buffer that ends at until is
// over, or about to be, at now. A buffer of no period (a tag that is not
// dated) never closes.
func closing(until, now time.Time) bool {
	return !until.IsZero() && !now.Before(until.Add(-periodMargin))
}

// periodOpen reports whether b, t's current buffer, may serve at now: not
// when t is dated and b's period is closing, which gives b up.
func (t *tag) periodOpen(b *buffer, now func() time.Time) bool {
	if t.dated == nil || !closing(b.until, now()) {
		return true
	}
	t.closePeriod(b.until)
	return false
}

// closePeriod gives up t's buffers of the period that ends at until (or
// earlier): their numbers are skipped, and the next request loads a range
// of the new period.
func (t *tag) closePeriod(until time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.per.timerFor.Equal(until) {
		t.per.armed = false // a range of the period landing later arms it again
	}
	t.closeBeforeLocked(until.Add(time.Nanosecond))
}

// closeBeforeLocked gives up t's buffers of periods that end before
// until. t.mu is held.
func (t *tag) closeBeforeLocked(until time.Time) {
	if n := t.bufs.next; n != nil && n.until.Before(until) {
		n.drain()
		t.bufs.next = nil
	}
	if c := t.bufs.cur.Load(); c != nil && c.until.Before(until) {
		c.drain()
	}
}

// armLocked sets the timer that gives up the buffers of the period ending
// at until, periodMargin before it, as measured by now. t.mu is held.
func (t *tag) armLocked(until, now time.Time) {
	p := &t.per
	if until.IsZero() || (p.armed && p.timerFor.Equal(until)) {
		return
	}
	if p.timer != nil {
		p.timer.Stop() // an earlier period's: loaded gave its buffers up
	}
	p.timerFor, p.armed = until, true
	p.timer = time.AfterFunc(until.Add(-periodMargin).Sub(now), func() { t.closePeriod(until) })
}

// refusalLocked returns the refusal that still holds at now, nil when
// there is none. t.mu is held.
func (t *tag) refusalLocked(now time.Time) error {
	if t.per.refusal != nil && now.Before(t.per.refusedUntil) {
		return t.per.refusal
	}
	return nil
}

// refusal returns the refusal that holds now, nil when there is none.
func (t *tag) refusal(now func() time.Time) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.refusalLocked(now())
}

// refuse answers err, without a load, to the requests for t until until.
func (t *tag) refuse(err error, until time.Time) error {
	t.mu.Lock()
	t.per.refusal, t.per.refusedUntil = err, until
	t.mu.Unlock()
	return err
}

// clockRecheck is how long a server whose clock was found too far from
// the database's answers so before it compares the clocks again.
const clockRecheck = time.Second

// errClockSkew marks the failure of a load refused for the server's clock.
var errClockSkew = errors.New("segment: the clock differs from the database's")

// datedCapLocked returns the largest step the next load of a dated tag may
// ask for at now: the tag's own largest step, and at most 1/domainShare of
// what its period has left (at least 1), so that a server that stops gives
// up a small part of it. t.mu is held.
func (t *tag) datedCapLocked(now time.Time) int64 {
	w := t.dated.window(now)
	left := w.Limit - max(t.per.top+1, w.Floor)
	c := max(1, left/domainShare)
	if t.spec.maxStep > 0 {
		c = min(c, t.spec.maxStep)
	}
	return c
}

// landedDated records a range of a dated tag just loaded: its last number,
// and the timer of its period. t.mu is held.
func (t *tag) landedDated(b *buffer, now time.Time) {
	t.per.top = b.id(b.size - 1)
	t.per.laterSince = time.Time{}
	t.armLocked(b.until, now)
}

// periodWindow is the window of the range a dated tag's load asks for,
// decided in the store's transaction from the database's clock (dbNow) and
// this server's, read before the transaction (before) and now: the
// period's numbers, and the end of the period (until). A clock that
// differs from the database's by more than tolerance gets no window.
func (a *Allocator) periodWindow(t *tag, before, dbNow time.Time) (Window, time.Time, error) {
	now := a.cfg.Now()
	tol := a.cfg.ClockTolerance
	if dbNow.Before(before.Add(-tol)) || dbNow.After(now.Add(tol)) {
		skew, way := before.Sub(dbNow), "ahead of"
		if dbNow.After(now) {
			skew, way = dbNow.Sub(now), "behind"
		}
		return Window{}, time.Time{}, leafd.Wrap(leafd.ESegmentUnavailable, errClockSkew, fmt.Sprintf(
			"tag %q is dated, and this server's clock is %v %s the database's, more than segment.clock_tolerance (%v): "+
				"its numbers would carry the wrong date, so none is loaded. Correct the server's clock (NTP)",
			t.name, skew.Round(time.Millisecond), way, tol))
	}
	until := t.dated.end(now)
	if closing(until, now) {
		return Window{}, until, errPeriodClosing
	}
	w := t.dated.window(now)
	w.Share = domainShare
	return w, until, nil
}

// periodOutcome sorts the outcome of a load of dated tag t, a range of the
// period ending at until (or its error). wait, when not 0, is how long to
// wait before the load asks again, for the period to change: it ends in
// less than periodMargin, whose numbers would be given up at once, or has
// ended for the other servers already. A full period, and a clock too far from the database's,
// are answered to requests from memory (refuse): the first until the
// period ends, the second for clockRecheck, so that requests get the
// reason at once and the database is not asked at their pace.
func (a *Allocator) periodOutcome(t *tag, until time.Time, err error) (_ error, wait time.Duration) {
	now := a.cfg.Now()
	toEnd := max(until.Sub(now), periodMargin)
	switch {
	case errors.Is(err, ErrLaterPeriod):
		// The period is over for the fleet: none of its numbers more here.
		// This server's clock passes its end within the tolerance, unless
		// max_id was set ahead by hand: look again now and then.
		t.closePeriod(until)
		err, later := t.laterPeriod(err, now, a.cfg.ClockTolerance)
		if later {
			return err, min(toEnd, a.cfg.ClockTolerance/2+periodMargin)
		}
		return err, 0
	case errors.Is(err, errPeriodClosing) || (err == nil && closing(until, now)):
		return err, toEnd
	case leafd.ErrorCode(err) == leafd.EPeriodExhausted:
		return t.periodFull(err, until.Add(-time.Nanosecond)), 0 // dated by the window's period
	case errors.Is(err, errClockSkew):
		a.log.Warn("segment: this server's clock differs from the database's; no range of the dated tag is loaded", "tag", t.name, "err", err)
		return t.refuse(err, now.Add(clockRecheck)), 0
	}
	return err, 0
}

// laterPeriod is the outcome of a load that found t's max_id past the
// period of this server's clock, at now: wait for the clock (next), for as
// long as two clocks within tolerance of the database's can differ; past
// that, the max_id is not another server's doing but was set by hand (or
// a clock is further off than its check allows), and the load fails with
// a reason, retried with backoff like any failure.
func (t *tag) laterPeriod(err error, now time.Time, tol time.Duration) (error, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.per.laterSince.IsZero() {
		t.per.laterSince = now
	}
	if now.Sub(t.per.laterSince) <= 2*tol+2*periodMargin {
		return err, true
	}
	return leafd.Wrap(leafd.ESegmentUnavailable, err, fmt.Sprintf(
		"tag %q is dated, and its max_id lies past the numbers of this server's period (%s) for longer than the servers' clocks "+
			"may differ: its max_id was set by hand, or another server's clock is ahead; numbers resume when this server's clock "+
			"reaches the period of max_id", t.name, t.dated.label(now))), false
}

// periodFull words the store's period_exhausted for the period of now,
// and answers it until that period ends.
func (t *tag) periodFull(err error, now time.Time) error {
	d := t.dated
	until := d.end(now)
	return t.refuse(leafd.Wrap(leafd.EPeriodExhausted, err, fmt.Sprintf(
		"tag %q has handed out every number of %s (%s): %d, the capacity of %d digits. Numbers resume with the next period, at %s; "+
			"for more numbers per period create a tag with more digits",
		t.name, d.label(now), d.zoneName(), d.capacity(), d.digits, until.In(d.loc).Format(time.RFC3339))), until)
}
