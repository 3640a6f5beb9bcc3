package segment

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leafd/leafd"
)

// tag is one business tag. bufs.cur is read without a lock on the hot
// path; everything else, and every change of it, is guarded by mu, which
// only the tag's methods take. They never call back into the allocator, so
// mu is never held while the allocator takes a lock.
type tag struct {
	name   string
	bufs   buffers
	opaque *opaque
	// adopted is when Upsert or a lookup made the tag served (zero for one
	// read with the list); spec is its row's format, and opaque how an
	// opaque tag's counters map to IDs. None changes once published.
	adopted time.Time
	spec    tagSpec
	// dom is an opaque tag's domain (domain.go), nil for a sequential tag:
	// set before the tag is published, its fields guarded by mu.
	dom *domain
	// dated is how a dated tag's numbers are made (dated.go), nil for
	// other tags; refused, when set, is why this server serves none of the
	// tag's IDs. Neither changes once published.
	dated   *dated
	refused error
	// allocTurn is held (a token in a channel of one) while a range of
	// the tag is asked of the store and admitted: see Allocator.allocate.
	allocTurn chan struct{}

	mu      sync.Mutex
	removed bool
	load    loadState
	steps   stepState
	count   counters
	per     periodState // a dated tag's (period.go)
}

// buffers is the double buffer: cur serves, next waits its turn.
type buffers struct {
	cur  atomic.Pointer[buffer]
	next *buffer
	pos  int // index of cur in the two-slot view of State
	// retired counts the IDs of the buffers switched away from.
	retired int64
}

// switchNext makes next the current buffer.
func (b *buffers) switchNext() {
	if old := b.cur.Load(); old != nil {
		b.retired += old.size
		b.pos ^= 1
	}
	b.cur.Store(b.next)
	b.next = nil
}

// serving reports whether cur has IDs left.
func (b *buffers) serving() bool {
	cur := b.cur.Load()
	return cur != nil && !cur.exhausted()
}

// taken returns how many IDs the buffers have handed out.
func (b *buffers) taken() int64 {
	n := b.retired
	if cur := b.cur.Load(); cur != nil {
		n += cur.taken()
	}
	return n
}

// reserved returns how many IDs the buffers hold, not yet handed out.
func (b *buffers) reserved() (n int64) {
	for _, buf := range []*buffer{b.cur.Load(), b.next} {
		if buf != nil {
			n += buf.size - buf.taken()
		}
	}
	return n
}

// state returns both slots; loading marks the one the range in flight
// fills: the current slot before the first range (cur is nil and pos has
// not moved), the other one for every later range.
func (b *buffers) state(loading bool) (s [2]BufferState) {
	cur := b.cur.Load()
	if cur != nil {
		s[b.pos] = cur.state()
	}
	if b.next != nil {
		s[1-b.pos] = b.next.state()
	}
	s[b.pos^1].Loading = loading && cur != nil
	s[b.pos].Loading = loading && cur == nil
	return s
}

// loadState is the load of the tag's next range: in flight or not, and
// how the last attempts ended.
type loadState struct {
	loading bool
	since   time.Time // when the load in flight began, by the monotonic clock
	// changed is closed and replaced whenever a load lands or fails for
	// good, or the tag is removed: waiters park on it.
	changed chan struct{}
	// err is the last load failure, nil after a success. finalErr is the
	// last failure that ended a load (unknown tag, exhausted), and finalSeq
	// counts those, so that a waiter knows whether its load failed.
	err, finalErr error
	finalSeq      uint64
}

func (l *loadState) broadcast() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// failed records a failed attempt; a final one ends the load and wakes
// the waiters.
func (l *loadState) failed(err error, final bool) {
	l.err = err
	if final {
		l.loading, l.finalErr = false, err
		l.finalSeq++
		l.broadcast()
	}
}

// stepState is what the step policy sizes the tag's next range from.
type stepState struct {
	// step is the number of IDs of the last range (0 before the first),
	// tableStep the table step last read.
	step, tableStep int64
	// lastLoad is when the last load began, lastPeriod the time between
	// the last two, and issuedAtLoad the IDs issued when the last began.
	lastLoad     time.Time
	lastPeriod   time.Duration
	issuedAtLoad int64
	// starvedAt is when both buffers ran empty (zero while one has IDs),
	// starved the time spent so, which the rate leaves out, and
	// starvedAtLoad what it was when the last load began.
	starvedAt              time.Time
	starved, starvedAtLoad time.Duration
	// nextMin is the smallest step of the next load to begin, room for a
	// range asked of the tag (see makeRoom); 0 for none.
	nextMin int64
}

// starve marks the tag starved from at, unless it is already.
func (s *stepState) starve(at time.Time) {
	if s.starvedAt.IsZero() {
		s.starvedAt = at
	}
}

// fed ends a starvation, at now.
func (s *stepState) fed(now time.Time) {
	if !s.starvedAt.IsZero() {
		s.starved += now.Sub(s.starvedAt)
		s.starvedAt = time.Time{}
	}
}

// starvedUntil returns the time spent with both buffers empty, up to now.
func (s *stepState) starvedUntil(now time.Time) time.Duration {
	d := s.starved
	if !s.starvedAt.IsZero() {
		d += now.Sub(s.starvedAt)
	}
	return d
}

// begin returns the start of a load at now, issued IDs in, with the step
// p chooses from the rate since the last load began (at least nextMin,
// which it clears, and at most limit).
func (s *stepState) begin(now time.Time, issued int64, p stepPolicy, limit int64) loadStart {
	starved := s.starvedUntil(now)
	// The time the tag had nothing to serve is left out: requests that
	// waited were wanted all the same. Before the first load step is 0 and
	// the policy answers the table step.
	period := now.Sub(s.lastLoad)
	if d := starved - s.starvedAtLoad; d > 0 {
		// A tag starved all along is wanted faster than anything measured.
		period = max(period-d, time.Millisecond)
	}
	step := min(max(p.next(s.step, s.tableStep, issued-s.issuedAtLoad, period), s.nextMin), limit)
	s.nextMin = 0
	return loadStart{step: step, at: now, issued: issued, starved: starved}
}

// landed records a range of size IDs loaded as ls began, with the table
// step read with it. The policy measures ranges in IDs, which for a
// strided range is not its width End-Start.
func (s *stepState) landed(ls loadStart, size, tableStep int64) {
	if !s.lastLoad.IsZero() {
		s.lastPeriod = ls.at.Sub(s.lastLoad)
	}
	s.lastLoad, s.issuedAtLoad, s.starvedAtLoad = ls.at, ls.issued, ls.starved
	s.step, s.tableStep = size, tableStep
}

// counters are the tag's counts that State reports.
type counters struct {
	direct            int64 // IDs of ranges taken from the store directly (Range)
	loads, loadErrors int64
	// waits counts requests that had to wait for a load, failedRequests
	// requests that failed. Both are counted by requests without mu.
	waits, failedRequests atomic.Int64
}

// newTag returns a tag whose table step is tableStep. adopted is when
// Upsert or a lookup made it served; zero for a tag read with the list.
func newTag(name string, tableStep int64, adopted time.Time) *tag {
	t := &tag{name: name, adopted: adopted, allocTurn: make(chan struct{}, 1)}
	t.steps.tableStep, t.load.changed = tableStep, make(chan struct{})
	return t
}

// setRow takes what the tag's row, read again, says of its table step
// and of how far its counter went.
func (t *tag) setRow(row leafd.Tag) {
	t.mu.Lock()
	t.steps.tableStep = row.Step
	if t.dom != nil {
		t.dom.top = max(t.dom.top, row.MaxID-1)
	}
	t.per.top = max(t.per.top, row.MaxID-1)
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
	if t.per.timer != nil {
		t.per.timer.Stop()
	}
	t.bufs.cur.Store(nil)
	t.bufs.next = nil
	t.load.broadcast()
}

// takeOne is the hot path of Allocator.Next and Handle.Next: one ID from
// the current buffer of t (nil: no such tag), or false for the slow path.
// preload is set for the one caller that took the buffer's preload point,
// which starts the next load: no atomic read on every other call. A dated
// tag always takes the slow path, NextN's, which compares the clock with
// the end of the buffer's period (period.go): this path reads no clock.
//
// takeOne must stay inlinable (go build -gcflags=-m ./segment): a call
// would be a third of the cost of Next.
func (t *tag) takeOne() (id int64, ok bool, preload *buffer) {
	if t == nil || t.dated != nil {
		return 0, false, nil
	}
	b := t.bufs.cur.Load()
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
	// ready is nil when the tag switched buffers: take again. Else it is
	// closed once the load in flight ends, and finalSeq is for finalSince.
	ready    <-chan struct{}
	finalSeq uint64
	load     loadStart // the load this request began, when begun
	begun    bool
}

// loadStart is a load's step, and what the next load measures the rate
// from: when it began, and the IDs issued and time starved by then.
type loadStart struct {
	step    int64
	at      time.Time
	issued  int64
	starved time.Duration
}

// ranOut is the slow path of a request whose buffer is used up or absent:
// it switches to the next buffer if ready, else marks the tag starved and
// begins a load unless one is in flight. now is read under mu, so that
// recorded times stay in order. Errors: unknown_tag when the tag was removed.
func (t *tag) ranOut(now func() time.Time, p stepPolicy) (refill, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.removed {
		return refill{}, unknownTag(t.name)
	}
	if t.bufs.serving() {
		return refill{}, nil // another request switched buffers meanwhile
	}
	at := now()
	if err := t.refusalLocked(at); err != nil {
		return refill{}, err
	}
	if t.bufs.next != nil {
		t.switchLocked(at)
		return refill{}, nil
	}
	if t.bufs.cur.Load() != nil {
		// Starved: the buffers ran out. (Before the first range the tag
		// was never serving, and the first range's rate is not measured.)
		t.steps.starve(at)
	}
	r := refill{ready: t.load.changed, finalSeq: t.load.finalSeq}
	r.load, r.begun = t.beginLoadLocked(at, p)
	return r, nil
}

// beginPreload begins the load of b's successor, once per buffer, unless
// the tag has moved on from b or has its next range already.
func (t *tag) beginPreload(b *buffer, now func() time.Time, p stepPolicy) (loadStart, bool) {
	if !b.preloaded.CompareAndSwap(false, true) {
		return loadStart{}, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.bufs.next != nil || t.bufs.cur.Load() != b {
		return loadStart{}, false
	}
	return t.beginLoadLocked(now(), p)
}

// beginLoadLocked marks a load in flight, with the step p chooses; false
// when one is in flight already or the tag is removed. t.mu is held.
func (t *tag) beginLoadLocked(now time.Time, p stepPolicy) (loadStart, bool) {
	if t.load.loading || t.removed {
		return loadStart{}, false
	}
	t.load.loading, t.load.since = true, time.Now()
	limit := t.domainCapLocked()
	if t.dated != nil {
		limit = t.datedCapLocked(now)
	}
	return t.steps.begin(now, t.issuedLocked(), p, limit), true
}

// loadNotStarted undoes beginLoadLocked for a load that could not start:
// the allocator is closed.
func (t *tag) loadNotStarted() {
	t.mu.Lock()
	t.load.loading = false
	t.mu.Unlock()
}

// loaded ends the load begun as ls: b, its range (read with tableStep),
// becomes the next buffer, or the current one when that is used up, and
// waiters are woken. It reports whether the previous attempt had failed,
// and done: false for a range of a dated tag whose period is closing by
// now, which it gives up (the load goes on, for the next period).
func (t *tag) loaded(b *buffer, tableStep int64, ls loadStart, now func() time.Time) (recovered, done bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.dated != nil && !t.removed {
		// Checked under mu, with the timer that closes the period: a
		// range installed after it fired would serve Next past the end.
		at := now()
		if closing(b.until, at) {
			return false, false
		}
		t.closeBeforeLocked(b.until)
	}
	t.load.loading = false
	if t.removed {
		return false, true
	}
	recovered, t.load.err = t.load.err != nil, nil
	t.steps.landed(ls, b.size, tableStep)
	if t.dom != nil {
		t.dom.top, t.dom.stride = b.id(b.size-1), b.stride
	}
	if t.dated != nil {
		t.landedDated(b, now())
	}
	t.count.loads++
	t.bufs.next = b
	if !t.bufs.serving() {
		t.switchLocked(now())
	}
	t.load.broadcast()
	return recovered, true
}

// loadFailed records a failed load attempt (a final one wakes the waiters,
// who fail with err), and reports whether to retry: not once removed.
func (t *tag) loadFailed(err error, final bool) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.removed {
		t.load.loading = false
		return false
	}
	if !errors.Is(err, context.Canceled) {
		t.count.loadErrors++
	}
	t.load.failed(err, final)
	return true
}

// rewoundFirst reports whether err, a tag_rewound failure, is the first of
// a run: the last load did not already fail so.
func (t *tag) rewoundFirst(err error) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return leafd.ErrorCode(t.load.err) != leafd.ETagRewound
}

// failed counts a request for the tag that failed with err, and returns err.
func (t *tag) failed(err error) error {
	t.count.failedRequests.Add(1)
	return err
}

// finalSince returns the failure that ended a load after the waiter read
// seq, or nil if none did.
func (t *tag) finalSince(seq uint64) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.load.finalSeq == seq {
		return nil
	}
	if leafd.ErrorCode(t.load.finalErr) == leafd.EInternal {
		return leafd.Wrap(leafd.ESegmentUnavailable, t.load.finalErr, "tag \""+t.name+"\": the server is shutting down")
	}
	return t.load.finalErr
}

// lastErr returns the last load failure, nil after a success.
func (t *tag) lastErr() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.load.err
}

// dry reports whether the tag has no IDs buffered while its load fails for
// a reason that may pass, or has been in flight for longer than hung.
func (t *tag) dry(hung time.Duration) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	empty := t.bufs.next == nil && !t.bufs.serving()
	failing := t.load.err != nil && !finalCode(t.load.err)
	stuck := t.load.loading && time.Since(t.load.since) > hung
	return empty && (failing || stuck)
}

// switchLocked makes next the current buffer, as of now, which ends a
// starvation.
func (t *tag) switchLocked(now time.Time) {
	t.bufs.switchNext()
	t.steps.fed(now)
}

// makeRoom moves the tag towards a buffer of at least step IDs, for a
// range its current buffer b is too small to carve (Range): it drains b
// and switches to a ready next buffer (retry: look again), or begins a
// load of at least step IDs, which the caller starts when begun.
func (t *tag) makeRoom(b *buffer, step int64, now func() time.Time, p stepPolicy) (retry bool, ls loadStart, begun bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.removed {
		return false, loadStart{}, false
	}
	if t.bufs.cur.Load() != b {
		return true, loadStart{}, false // another request switched meanwhile
	}
	if t.bufs.next != nil {
		b.drain()
		t.switchLocked(now())
		return true, loadStart{}, false
	}
	t.steps.nextMin = max(t.steps.nextMin, step)
	ls, begun = t.beginLoadLocked(now(), p)
	return false, ls, begun
}

// addDirect counts n IDs of a range taken from the store directly: they
// are issued, and the step policy measures them.
func (t *tag) addDirect(n int64) {
	t.mu.Lock()
	t.count.direct += n
	t.mu.Unlock()
}

func (t *tag) issuedLocked() int64 { return t.bufs.taken() + t.count.direct }

func (t *tag) state(now time.Time) TagState {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := TagState{
		Tag: t.name, Step: t.steps.step, MinStep: t.steps.tableStep, Current: t.bufs.pos,
		Loading: t.load.loading, Buffers: t.bufs.state(t.load.loading),
		LastLoad: t.steps.lastLoad, LastPeriod: t.steps.lastPeriod, Issued: t.issuedLocked(),
		Loads: t.count.loads, Waits: t.count.waits.Load(), Errors: t.count.failedRequests.Load(),
		LoadErrors: t.count.loadErrors, Err: t.load.err,
	}
	if t.dom != nil {
		s.Domain = t.dom.n
		s.DomainUsed, s.DomainReserved = t.domainLocked()
	}
	if d := t.dated; d != nil {
		w := d.window(now)
		s.Period, s.PeriodEnd, s.PeriodCapacity = d.label(now), d.end(now), d.capacity()
		if t.per.top >= w.Floor {
			s.PeriodUsed = max(min(t.per.top, w.Limit-1)-w.Floor+1-t.bufs.reserved(), 0)
		}
	}
	switch cur := t.bufs.cur.Load(); {
	case t.load.err != nil:
		s.Status = StatusFailing
	case !t.steps.starvedAt.IsZero() || (t.load.loading && cur == nil):
		// Starved, or asked for before its first range arrived.
		s.Status = StatusWaiting
	case t.load.loading:
		s.Status = StatusLoading
	case t.bufs.next != nil || t.bufs.serving():
		s.Status = StatusServing
	default:
		s.Status = StatusIdle
	}
	if d := now.Sub(t.steps.lastLoad); !t.steps.lastLoad.IsZero() && d > 0 {
		s.Rate = float64(s.Issued-t.steps.issuedAtLoad) / d.Seconds()
	}
	return s
}
