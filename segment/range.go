package segment

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leafd/leafd"
)

// Range leases: a caller takes a run of consecutive IDs and hands them out
// itself, as Didi Tinyid's client does with its segments.
//
// A range of at most a quarter of the current buffer is carved out of it
// with one compare-and-swap; when too few IDs are left they are skipped and
// the range comes from the next buffer, so a switch gives up at most a
// quarter of a buffer. A larger range is taken from the store directly, in
// a transaction of its own that passes the same rewind check, and the tag
// moves towards buffers of four such ranges (makeRoom), so that a tag
// served by ranges alone soon carves them from its buffers. A dated tag
// makes no room (its loads are capped to a share of its period): its
// larger ranges always come from the store, and its buffers are left
// intact.

// rangeShare is how many ranges a buffer must hold for ranges to be carved
// from it: a larger range is taken from the store directly.
const rangeShare = 4

// ErrRangeExpires is the cause of Range's range_unsupported for a dated
// tag, whose ranges expire: a transport that leases them (RangeLease) to
// callers that say they honour the expiry tells the others how to say it.
var ErrRangeExpires = errors.New("the tag's ranges expire; Range leases none")

// Range reserves size consecutive IDs of tag and returns them as one range
// [Start, End) with Stride 1, which no one else will ever receive. IDs of
// the range the caller does not use are simply skipped.
//
// Errors: invalid_size when size is outside 1..MaxRange; range_unsupported
// for a tag whose IDs are not consecutive (an opaque tag, or a tag of a
// strided store), and for a dated tag, whose ranges expire (RangeLease
// serves those; the error's cause is ErrRangeExpires); otherwise those of
// Next.
func (a *Allocator) Range(ctx context.Context, name string, size int64) (Range, error) {
	r, _, err := a.rangeLease(ctx, name, size, false)
	return r, err
}

// RangeLease is Range for every tag Range serves and for dated tags too.
// valid is how long the range may be used, from now: 0 for a range that
// never expires; for a dated tag's range, the time left until periodMargin
// before its period ends by the server's clock (at least 1 ns), after which
// the caller must hand out none of its IDs. A dated tag's range lies
// within one period: carved from a buffer of the period, or, when larger
// than a quarter of the buffers, taken from the store within the period,
// where it is shorter than size when the period has fewer numbers left.
func (a *Allocator) RangeLease(ctx context.Context, name string, size int64) (r Range, valid time.Duration, err error) {
	return a.rangeLease(ctx, name, size, true)
}

func (a *Allocator) rangeLease(ctx context.Context, name string, size int64, expiring bool) (Range, time.Duration, error) {
	if size < 1 || size > a.cfg.MaxRange {
		return Range{}, 0, leafd.Errorf(leafd.EInvalidSize, "size %d is out of range: use 1 to %d", size, a.cfg.MaxRange)
	}
	t, err := a.lookup(ctx, name)
	if err != nil {
		return Range{}, 0, err
	}
	for replaced := 0; ; replaced++ {
		r, valid, err := a.leaseOf(ctx, t, size, expiring)
		if err != nil && replaced < maxReplaced {
			if nt := a.replacement(t); nt != nil {
				t = nt // served anew under its name (recreated): ask it
				continue
			}
		}
		return r, valid, err
	}
}

// leaseOf is rangeLease of the tag t.
func (a *Allocator) leaseOf(ctx context.Context, t *tag, size int64, expiring bool) (Range, time.Duration, error) {
	name := t.name
	if t.opaque != nil {
		return Range{}, 0, t.failed(leafd.Errorf(leafd.ERangeUnsupported,
			"tag %q is opaque: its IDs are not consecutive, so it hands out no ranges; ask for IDs with GET /segment/%s?count=N", name, name))
	}
	if t.dated != nil && !expiring {
		return Range{}, 0, t.failed(leafd.Wrap(leafd.ERangeUnsupported, ErrRangeExpires, fmt.Sprintf(
			"tag %q is dated: its ranges expire at the end of their period, which this caller cannot say; ask for numbers with GET /segment/%s?count=N", name, name)))
	}
	var w refillWait
	defer w.stop()
	for {
		if b := t.bufs.cur.Load(); b != nil && (t.dated == nil || t.periodOpen(b, a.cfg.Now)) {
			if b.stride > 1 {
				return Range{}, 0, t.failed(stridedRange(name, b.stride))
			}
			if size*rangeShare <= b.size {
				if r, off, ok := b.carve(size); ok {
					if off+size > b.preloadAt && !b.preloaded.Load() {
						a.preload(t, b)
					}
					return r, a.validFor(t, b.until), nil
				}
				// Too few IDs left in b: give them up and go on to the
				// next buffer.
				b.drain()
			} else {
				// A dated tag makes no room: its loads are capped to a
				// small share of what the period has left, so a buffer of
				// four such ranges may never come, and each drain would
				// skip numbers of the period. The range is taken from the
				// store, and the buffers serve on as they are.
				if t.dated == nil && size*rangeShare <= max(a.cfg.MaxStep, b.size) {
					retry, ls, begun := t.makeRoom(b, size*rangeShare, a.cfg.Now, a.policy)
					if begun {
						a.startLoad(t, ls)
					}
					if retry {
						continue
					}
				}
				return a.rangeDirect(ctx, t, size, &w)
			}
		}
		if err := a.awaitRefill(ctx, t, &w); err != nil {
			return Range{}, 0, err
		}
	}
}

// validFor is how long a range of t whose period ends at until may be
// used from now: 0 for a tag that is not dated; else until periodMargin
// before until, at least 1 ns (the range was taken in its period).
func (a *Allocator) validFor(t *tag, until time.Time) time.Duration {
	if t.dated == nil {
		return 0
	}
	return max(until.Add(-periodMargin).Sub(a.cfg.Now()), 1)
}

func stridedRange(name string, stride int64) error {
	return leafd.Errorf(leafd.ERangeUnsupported,
		"tag %q is served by independent databases (store.shards): its IDs are not consecutive (one in every %d), so it hands out no ranges; ask for IDs with GET /segment/%s?count=N",
		name, stride, name)
}

// rangeDirect takes a range of size IDs of t from the store in a
// transaction of its own. A dated tag's lies within the period of the
// server's clock: near the period's end the request waits for the next
// one (as loads do, within WaitTimeout: w), and the range is shorter than
// size when the period has fewer numbers left.
// While the tag's refusal holds (period.go: a full period, or a clock
// too far from the database's) a dated tag's range is refused from
// memory, without a transaction.
func (a *Allocator) rangeDirect(ctx context.Context, t *tag, size int64, w *refillWait) (Range, time.Duration, error) {
	var alloc Allocation
	var until time.Time
	var err error
	for {
		if t.dated != nil {
			// A full period, or a clock too far from the database's, is
			// answered from memory, as to a request for one number: the
			// database is not asked at the callers' pace.
			if err := t.refusal(a.cfg.Now); err != nil {
				return Range{}, 0, t.failed(err)
			}
		}
		alloc, until, _, err = a.allocate(ctx, t, size, true)
		if t.dated == nil {
			break
		}
		var wait time.Duration
		if err, wait = a.periodOutcome(t, until, err); wait == 0 {
			break
		}
		if w.timer == nil {
			w.timer = time.NewTimer(a.cfg.WaitTimeout)
		}
		pause := time.NewTimer(wait)
		select {
		case <-pause.C:
			continue
		case <-w.timer.C:
			err = leafd.Errorf(leafd.ESegmentUnavailable, "tag %q: its period is changing and no range of the next one came within %v; retry", t.name, a.cfg.WaitTimeout)
		case <-ctx.Done():
			err = ctx.Err()
		}
		pause.Stop()
		break
	}
	if err != nil {
		if code := leafd.ErrorCode(err); finalCode(err) || code == leafd.ETagRewound || code == leafd.ESegmentUnavailable && t.dated != nil {
			return Range{}, 0, t.failed(err)
		}
		if ctx.Err() != nil {
			return Range{}, 0, t.failed(leafd.Wrap(leafd.ESegmentUnavailable, err,
				fmt.Sprintf("tag %q: the request ended while a range of %d IDs was taken from the store; retry later", t.name, size)))
		}
		return Range{}, 0, t.failed(leafd.Wrap(leafd.ESegmentUnavailable, err,
			fmt.Sprintf("tag %q: a range of %d IDs is larger than the server buffers and could not be taken from the store; retry later, or ask for a smaller range", t.name, size)))
	}
	if alloc.Stride > 1 {
		return Range{}, 0, t.failed(stridedRange(t.name, alloc.Stride))
	}
	t.addDirect(alloc.Count())
	return Range{Start: alloc.Start, End: alloc.End, Stride: 1}, a.validFor(t, until), nil
}

// allocate asks the store for a range of step IDs of t, within
// LoadTimeout, and admits it against the IDs this server issued before. It
// holds the tag's allocation turn, so that a load and a direct range never
// race to the rewind check. took leaves out the wait for the turn. The
// range of a dated tag lies in the period of the server's clock, which
// ends at until (period.go).
//
// A direct range (direct) of a dated tag is not bounded to a share of what
// the period has left, only by the period.
func (a *Allocator) allocate(ctx context.Context, t *tag, step int64, direct bool) (alloc Allocation, until time.Time, took time.Duration, err error) {
	select {
	case t.allocTurn <- struct{}{}:
	case <-ctx.Done():
		return Allocation{}, until, 0, ctx.Err()
	}
	defer func() { <-t.allocTurn }()
	ctx, cancel := context.WithTimeout(ctx, a.cfg.LoadTimeout)
	defer cancel()
	began := time.Now()
	anyOrder := false
	if s, ok := a.store.(AnyOrderStore); ok && t.opaque != nil {
		// An opaque tag's IDs have no order to keep.
		anyOrder = true
		alloc, err = s.AllocateAnyOrder(ctx, t.name, step)
	} else if t.dated != nil {
		before := a.cfg.Now()
		alloc, err = a.store.AllocateIn(ctx, t.name, step, func(dbNow time.Time) (w Window, err error) {
			w, until, err = a.periodWindow(t, before, dbNow)
			if direct {
				w.Share = 0
			}
			return w, err
		})
	} else {
		alloc, err = a.store.Allocate(ctx, t.name, step)
	}
	took = time.Since(began)
	if err == nil {
		err = a.issued.admit(t.name, alloc, anyOrder)
	}
	if t.spec == (tagSpec{}) && (errors.Is(err, ErrDatedRow) || err == nil && alloc.Format != "" && alloc.Format != FormatSequential) {
		err = a.recreated(ctx, t)
	}
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) && a.ctx.Err() == nil {
		// Say what a timeout most likely means: "cannot be reached" alone
		// sends the on-call engineer to the network.
		err = fmt.Errorf("no answer within the load timeout of %v (a row lock held by a long transaction, or a database that hangs): %w", a.cfg.LoadTimeout, err)
	}
	return alloc, until, took, err
}

// recreated drops a range the store handed out for t, which this server
// serves as sequential, from a row whose recorded format is another (a
// dated row hands out none: ErrDatedRow). A tag that never handed out an
// ID has no past, so it may be deleted by SQL and created again in another
// format (store.CreateTag allows it), while a server that read the tag
// list before serves it as sequential until its next refresh: its raw
// counters would fall among an opaque tag's IDs, or be no date. The tag is
// served as the store has it from now on; the requests and leases waiting
// for this range go on with it (Allocator.replacement).
func (a *Allocator) recreated(ctx context.Context, t *tag) error {
	row, err := a.store.LookupTag(ctx, t.name)
	if err != nil {
		return err
	}
	a.adopt(row, false)
	return unknownTag(t.name)
}

// refillWait is what a request keeps while it waits for a tag's buffers:
// NextN and Range share it.
type refillWait struct {
	timer  *time.Timer
	waited bool
}

func (w *refillWait) stop() {
	if w.timer != nil {
		w.timer.Stop()
	}
}

// awaitRefill is what a request does when the current buffer of t cannot
// serve it: switch to the next buffer, or wait for the load in flight
// (beginning one if none is). It returns nil when the request should take
// again, and the request's error when it must give up: the load failed for
// good, or no range came within WaitTimeout or before ctx ended.
func (a *Allocator) awaitRefill(ctx context.Context, t *tag, w *refillWait) error {
	rf, err := t.ranOut(a.cfg.Now, a.policy)
	if err != nil {
		return t.failed(err)
	}
	if rf.begun {
		a.startLoad(t, rf.load)
	}
	if rf.ready == nil {
		return nil // the tag switched to its next buffer
	}
	if !w.waited {
		w.waited = true
		t.count.waits.Add(1)
	}
	if w.timer == nil {
		w.timer = time.NewTimer(a.cfg.WaitTimeout)
	}
	select {
	case <-rf.ready:
		if err := t.finalSince(rf.finalSeq); err != nil {
			return t.failed(err)
		}
		return nil
	case <-w.timer.C:
		return t.failed(a.unavailable(t, "no range could be loaded within "+a.cfg.WaitTimeout.String()))
	case <-ctx.Done():
		return t.failed(a.unavailable(t, "the request ended while waiting for a range"))
	}
}
