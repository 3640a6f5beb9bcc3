package segment

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leafd/leafd"
)

// tag is the double buffer of one business tag.
//
// cur is read without a lock on the hot path. Everything else, and every
// change of cur, is guarded by mu. The tag makes its own state changes, in
// the methods below; the allocator calls them and never takes mu itself.
// None of them calls back into the allocator, so mu is never held while
// the allocator takes a lock (refreshMu is taken before it, never after).
type tag struct {
	name string
	cur  atomic.Pointer[buffer]
	// adopted is when Upsert or a lookup made the tag served (zero for a
	// tag read with the list); it is set before the tag is published and
	// never changes.
	adopted time.Time
	// spec is what the tag's row says of its format, and opaque, for an
	// opaque tag, how its counters map to IDs (or why this server refuses
	// it). Both are set before the tag is published and never change: a
	// tag whose format changes is replaced.
	spec   opaqueSpec
	opaque *opaque
	// dom is an opaque tag's domain (domain.go), nil for a sequential tag:
	// set before the tag is published, its fields guarded by mu.
	dom *domain

	// allocTurn is held (a token in a channel of one) while a range of
	// the tag is asked of the store and admitted: see Allocator.allocate.
	allocTurn chan struct{}

	mu      sync.Mutex
	next    *buffer
	pos     int // index of cur in the two-slot view of State
	loading bool
	// loadSince is when the load in flight began, by the monotonic clock.
	loadSince time.Time
	removed   bool
	// changed is closed and replaced whenever a load lands or fails for
	// good, or the tag is removed: waiters park on it.
	changed chan struct{}
	// err is the last load failure, nil after a success. finalErr is the
	// last failure that ended a load (unknown tag, exhausted), and finalSeq
	// counts those, so that a waiter knows whether its load failed.
	err      error
	finalErr error
	finalSeq uint64

	step, tableStep int64
	lastLoad        time.Time
	lastPeriod      time.Duration
	issuedAtLoad    int64 // IDs issued when the last load began
	// starvedAt is when requests found both buffers empty, zero while one
	// has IDs; starved adds up the time spent so, and starvedAtLoad is
	// what it was when the last load began. While starved the tag cannot
	// show how fast IDs are wanted, so the step policy leaves that time
	// out of its measure.
	starvedAt     time.Time
	starved       time.Duration
	starvedAtLoad time.Duration
	retired       int64 // IDs in buffers the tag has switched away from
	direct        int64 // IDs of ranges taken from the store directly (Range)
	// nextMin is the smallest step of the next load to begin, room for a
	// range asked of the tag (see makeRoom); 0 for none. The load that
	// begins takes it and clears it.
	nextMin    int64
	loads      int64
	loadErrors int64
	// waits counts requests that had to wait for a load, failedRequests
	// requests that failed. Both are counted by requests without mu.
	waits          atomic.Int64
	failedRequests atomic.Int64
}

// newTag returns a tag whose table step is tableStep. adopted is when
// Upsert or a lookup made it served; zero for a tag read with the list.
func newTag(name string, tableStep int64, adopted time.Time) *tag {
	return &tag{name: name, tableStep: tableStep, adopted: adopted, changed: make(chan struct{}), allocTurn: make(chan struct{}, 1)}
}

// setRow takes what the tag's row, read again, says of its table step
// and of how far its counter went.
func (t *tag) setRow(row leafd.Tag) {
	t.mu.Lock()
	t.tableStep = row.Step
	if t.dom != nil {
		t.dom.top = max(t.dom.top, row.MaxID-1)
	}
	t.mu.Unlock()
}

// isRemoved reports whether the tag was removed.
func (t *tag) isRemoved() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.removed
}

// remove stops serving the tag: buffered IDs are dropped and waiters woken.
func (t *tag) remove() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.removed = true
	t.cur.Store(nil)
	t.next = nil
	t.broadcastLocked()
}

// takeOne is the hot path of Allocator.Next and Handle.Next: one ID from
// the current buffer of t, which may be nil (no such tag). It reports false
// when there is no tag or buffer, or the buffer is used up: the caller then
// takes the slow path.
//
// preload is set for the caller that took the buffer's preload point, and
// that caller starts the load of the next range (Allocator.preload).
// Exactly one caller takes that offset (or a batch spanning it, in NextN),
// so the load starts once, without an atomic read on every other call.
// Should that caller be descheduled before it starts the load, the load
// starts late, when the buffer runs out: waits, never a duplicate.
//
// takeOne must stay small enough to be inlined (go build -gcflags=-m
// ./segment says "can inline (*tag).takeOne"): a call would be a third of
// the cost of Next. That is why it leaves the call of preload to its caller.
func (t *tag) takeOne() (id int64, ok bool, preload *buffer) {
	if t == nil {
		return 0, false, nil
	}
	b := t.cur.Load()
	if b == nil {
		return 0, false, nil
	}
	off := b.used.Add(1) - 1
	if off >= b.size {
		return 0, false, nil
	}
	if off == b.preloadAt {
		preload = b
	}
	return b.start + off*b.stride, true, preload
}

// refill is what a request that found the tag's current buffer used up is
// to do next, as ranOut decided it.
type refill struct {
	// ready is nil when the tag switched to its next buffer: take again.
	// Otherwise it is closed once the outcome of the load in flight is
	// known, and finalSeq is the tag's count of final failures as of then,
	// for finalSince.
	ready    <-chan struct{}
	finalSeq uint64
	// load is the load this request began, when begun: the caller starts
	// it (Allocator.startLoad).
	load  loadStart
	begun bool
}

// loadStart is what a load knew when it began: the step it asks for, and
// the time, the IDs issued and the time starved so far, from which the next
// load measures the rate.
type loadStart struct {
	step    int64
	at      time.Time
	issued  int64
	starved time.Duration
}

// ranOut is the slow path of a request, taken when the current buffer is
// exhausted or absent. It switches to the next buffer if that is ready;
// otherwise it marks the tag starved and begins a load unless one is in
// flight. now is read under mu, so that times recorded by concurrent
// switches and loads stay in order. Errors: unknown_tag when the tag was
// removed.
func (t *tag) ranOut(now func() time.Time, p stepPolicy) (refill, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.removed {
		return refill{}, unknownTag(t.name)
	}
	if b := t.cur.Load(); b != nil && !b.exhausted() {
		return refill{}, nil // another request switched buffers meanwhile
	}
	at := now()
	if t.next != nil {
		t.switchLocked(at)
		return refill{}, nil
	}
	if t.starvedAt.IsZero() && t.cur.Load() != nil {
		// Starved: the buffers ran out. (Before the first range the tag
		// was never serving, and the first range's rate is not measured.)
		t.starvedAt = at
	}
	r := refill{ready: t.changed, finalSeq: t.finalSeq}
	r.load, r.begun = t.beginLoadLocked(at, p)
	return r, nil
}

// beginPreload begins the load of b's successor, once per buffer, unless
// the tag has moved on from b or has its next range already. When it
// reports true the caller starts the load (Allocator.startLoad).
func (t *tag) beginPreload(b *buffer, now func() time.Time, p stepPolicy) (loadStart, bool) {
	if !b.preloaded.CompareAndSwap(false, true) {
		return loadStart{}, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.next != nil || t.cur.Load() != b {
		return loadStart{}, false
	}
	return t.beginLoadLocked(now(), p)
}

// beginLoadLocked marks a load of the next range in flight and returns what
// it starts from, with the step p chooses; it reports false, and begins
// nothing, when a load is in flight already or the tag is removed. The
// caller holds t.mu.
func (t *tag) beginLoadLocked(now time.Time, p stepPolicy) (loadStart, bool) {
	if t.loading || t.removed {
		return loadStart{}, false
	}
	issued, starved := t.issuedLocked(), t.starvedLocked(now)
	// The rate since the last load began, leaving out the time the tag
	// had nothing to serve: requests that waited were wanted all the same.
	// Before the first load t.step is 0 and the policy answers the table step.
	period := now.Sub(t.lastLoad)
	if s := starved - t.starvedAtLoad; s > 0 {
		// A tag starved all along is wanted faster than anything measured.
		period = max(period-s, time.Millisecond)
	}
	step := max(p.next(t.step, t.tableStep, issued-t.issuedAtLoad, period), t.nextMin)
	step = min(step, t.domainCapLocked())
	t.nextMin = 0
	t.loading, t.loadSince = true, time.Now()
	return loadStart{step: step, at: now, issued: issued, starved: starved}, true
}

// loadNotStarted undoes beginLoadLocked for a load that could not start:
// the allocator is closed.
func (t *tag) loadNotStarted() {
	t.mu.Lock()
	t.loading = false
	t.mu.Unlock()
}

// loaded ends the load begun as ls: b, the range it brought, becomes the
// next buffer, or the current one when the current is absent or exhausted,
// and waiters are woken. A tag removed meanwhile drops b. tableStep is the
// table step read with the range. It reports whether the tag recovered: its
// previous attempt had failed.
func (t *tag) loaded(b *buffer, tableStep int64, ls loadStart, now func() time.Time) (recovered bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.loading = false
	if t.removed {
		return false
	}
	recovered, t.err = t.err != nil, nil
	if !t.lastLoad.IsZero() {
		t.lastPeriod = ls.at.Sub(t.lastLoad)
	}
	t.lastLoad, t.issuedAtLoad, t.starvedAtLoad = ls.at, ls.issued, ls.starved
	// The policy measures ranges in IDs: the step of the next load follows
	// the number of IDs this range holds, which for a strided range is not
	// its width End-Start.
	t.step, t.tableStep = b.size, tableStep
	if t.dom != nil {
		t.dom.top, t.dom.stride = b.id(b.size-1), b.stride
	}
	t.loads++
	t.next = b
	if cur := t.cur.Load(); cur == nil || cur.exhausted() {
		t.switchLocked(now())
	}
	t.broadcastLocked()
	return recovered
}

// loadFailed records a failed load attempt. A final failure ends the load
// and wakes the waiters, who then fail with err. It reports whether the load
// should go on retrying (false once the tag is removed).
func (t *tag) loadFailed(err error, final bool) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.removed {
		t.loading = false
		return false
	}
	t.err = err
	if !errors.Is(err, context.Canceled) {
		t.loadErrors++
	}
	if final {
		t.loading = false
		t.finalErr = err
		t.finalSeq++
		t.broadcastLocked()
	}
	return true
}

// rewoundFirst reports whether err, a tag_rewound failure, is the first of
// a run: the last load did not already fail so.
func (t *tag) rewoundFirst(err error) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return leafd.ErrorCode(t.err) != leafd.ETagRewound
}

// failed counts a request for the tag that failed with err, and returns err.
func (t *tag) failed(err error) error {
	t.failedRequests.Add(1)
	return err
}

// finalSince returns the failure that ended a load after the waiter read
// seq, or nil if none did.
func (t *tag) finalSince(seq uint64) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.finalSeq == seq {
		return nil
	}
	if leafd.ErrorCode(t.finalErr) == leafd.EInternal {
		return leafd.Wrap(leafd.ESegmentUnavailable, t.finalErr, "tag \""+t.name+"\": the server is shutting down")
	}
	return t.finalErr
}

// lastErr returns the last load failure, nil after a success.
func (t *tag) lastErr() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}

// dry reports whether the tag has no IDs buffered while its load fails for
// a reason that may pass, or has been in flight for longer than hung.
func (t *tag) dry(hung time.Duration) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	cur := t.cur.Load()
	empty := t.next == nil && (cur == nil || cur.exhausted())
	failing := t.err != nil && !finalCode(t.err)
	stuck := t.loading && time.Since(t.loadSince) > hung
	return empty && (failing || stuck)
}

// switchLocked makes next the current buffer, as of now, which ends a
// starvation.
func (t *tag) switchLocked(now time.Time) {
	if old := t.cur.Load(); old != nil {
		t.retired += old.size
		t.pos ^= 1
	}
	if !t.starvedAt.IsZero() {
		t.starved += now.Sub(t.starvedAt)
		t.starvedAt = time.Time{}
	}
	t.cur.Store(t.next)
	t.next = nil
}

func (t *tag) broadcastLocked() {
	close(t.changed)
	t.changed = make(chan struct{})
}

// starvedLocked returns the time the tag has spent with both buffers
// empty, up to now.
func (t *tag) starvedLocked(now time.Time) time.Duration {
	d := t.starved
	if !t.starvedAt.IsZero() {
		d += now.Sub(t.starvedAt)
	}
	return d
}

// makeRoom moves the tag towards a buffer of at least step IDs, for a
// range that its current buffer b is too small to carve (Range). When the
// next buffer is ready, b is drained (its IDs skipped) and the tag switches
// to it: retry reports that the caller should look again. Otherwise a load
// of at least step IDs begins, unless one is in flight already, and the
// caller takes its range from the store meanwhile; when begun, the caller
// starts the load (Allocator.startLoad).
func (t *tag) makeRoom(b *buffer, step int64, now func() time.Time, p stepPolicy) (retry bool, ls loadStart, begun bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.removed {
		return false, loadStart{}, false
	}
	if t.cur.Load() != b {
		return true, loadStart{}, false // another request switched meanwhile
	}
	if t.next != nil {
		b.drain()
		t.switchLocked(now())
		return true, loadStart{}, false
	}
	t.nextMin = max(t.nextMin, step)
	ls, begun = t.beginLoadLocked(now(), p)
	return false, ls, begun
}

// addDirect counts n IDs of a range taken from the store directly: they
// are issued, and the step policy measures them.
func (t *tag) addDirect(n int64) {
	t.mu.Lock()
	t.direct += n
	t.mu.Unlock()
}

func (t *tag) issuedLocked() int64 {
	n := t.retired + t.direct
	if b := t.cur.Load(); b != nil {
		n += b.taken()
	}
	return n
}

func (t *tag) state(now time.Time) TagState {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := TagState{
		Tag:        t.name,
		Step:       t.step,
		MinStep:    t.tableStep,
		Current:    t.pos,
		Loading:    t.loading,
		LastLoad:   t.lastLoad,
		LastPeriod: t.lastPeriod,
		Issued:     t.issuedLocked(),
		Loads:      t.loads,
		Waits:      t.waits.Load(),
		Errors:     t.failedRequests.Load(),
		LoadErrors: t.loadErrors,
		Err:        t.err,
	}
	if t.dom != nil {
		s.Domain = t.dom.n
		s.DomainUsed, s.DomainReserved = t.domainLocked()
	}
	if b := t.cur.Load(); b != nil {
		s.Buffers[t.pos] = b.state()
	}
	if b := t.next; b != nil {
		s.Buffers[1-t.pos] = b.state()
	}
	if t.loading {
		// install fills the current slot only before the first range (cur
		// is nil and pos has not moved); every later range lands in the
		// other slot.
		slot := 1 - t.pos
		if t.cur.Load() == nil {
			slot = t.pos
		}
		s.Buffers[slot].Loading = true
	}
	switch cur := t.cur.Load(); {
	case t.err != nil:
		s.Status = StatusFailing
	case !t.starvedAt.IsZero() || (t.loading && cur == nil):
		// Starved, or asked for before its first range arrived.
		s.Status = StatusWaiting
	case t.loading:
		s.Status = StatusLoading
	case t.next != nil || (cur != nil && !cur.exhausted()):
		s.Status = StatusServing
	default:
		s.Status = StatusIdle
	}
	if d := now.Sub(t.lastLoad); !t.lastLoad.IsZero() && d > 0 {
		s.Rate = float64(s.Issued-t.issuedAtLoad) / d.Seconds()
	}
	return s
}
