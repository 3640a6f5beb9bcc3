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
// change of cur, is guarded by mu.
type tag struct {
	name string
	cur  atomic.Pointer[buffer]
	// adopted is when Upsert or a lookup made the tag served (zero for a
	// tag read with the list); it is set before the tag is published and
	// never changes.
	adopted time.Time

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
	loads         int64
	loadErrors    int64
	// waits counts requests that had to wait for a load, failedRequests
	// requests that failed. Both are counted by requests without mu.
	waits          atomic.Int64
	failedRequests atomic.Int64
}

func newTag(name string) *tag {
	return &tag{name: name, changed: make(chan struct{})}
}

func (t *tag) setTableStep(step int64) {
	t.mu.Lock()
	t.tableStep = step
	t.mu.Unlock()
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

func (t *tag) issuedLocked() int64 {
	n := t.retired
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
	if b := t.cur.Load(); b != nil {
		s.Buffers[t.pos] = BufferState{Start: b.start, End: b.start + b.size, Next: b.start + b.taken(), Ready: !b.exhausted()}
	}
	if b := t.next; b != nil {
		s.Buffers[1-t.pos] = BufferState{Start: b.start, End: b.start + b.size, Next: b.start, Ready: true}
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
