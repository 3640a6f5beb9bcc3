package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/leafd/leafd"
)

// Range leases (WithRanges): each tag is served from a run of consecutive
// IDs that one GET /segment/{tag}/range?size=N (SegmentRange over gRPC)
// reserved for this client,
// handed out by one atomic add per ID. A second lease is fetched in the
// background once the first passes its mark, and is swapped in when the
// first is used up: a double buffer like the server's.

// rangeSlots is the size of the cache that Next looks a tag up in before
// the map of all tags: a power of two.
const rangeSlots = 64

// Bounds of a range refill: a refill asks every base URL in turn, and does
// so up to rangeAttempts times, backing off between rounds, while the
// answers are ones another try may change (a 5xx, a network error). Tags
// that the servers answer not_found for (servers too old for range leases)
// try ranges again after rangeProbeAfter.
const rangeAttempts = 3

var rangeProbeAfter = time.Minute // a variable for the tests

// lease is a run of IDs base+1 … base+n. taken counts the IDs claimed so
// far: a claim of k adds k and owns base+taken-k+1 … base+taken if taken is
// then at most n. taken only grows, past n too, so a lease once used up
// stays used up and a claim never gets an ID twice; counting from 0 rather
// than from the first ID keeps it far from overflow.
type lease struct {
	taken atomic.Int64
	base  int64 // the first ID minus 1
	n     int64 // IDs in the lease; 0 for a tag's empty lease
	// mark is the claim (value of taken) from which a claim takes the slow
	// path: a claim below it is at most n and needs nothing else. It is
	// due, the claim from which the next lease is due (no more than
	// refillAt×size IDs left), until that fetch starts; then n+1, so that
	// the rest of the lease is served by the fast path too; and due again
	// if the fetch fails.
	mark atomic.Int64
	due  int64
	// expires, when not 0, is the c.clock() from which none of the
	// lease's IDs may be handed out: a dated tag's lease, valid for the
	// server's valid_ms from when its request was sent. The mark of such
	// a lease stays 0, so that every claim takes the slow path, which
	// reads the clock.
	expires int64
	// A lease is 64 bytes, allocated 64-byte aligned: what a claim
	// reads and writes is one cache line.
	_ [64 - 6*8]byte
}

// rangeTag is the lease state of one tag.
type rangeTag struct {
	tag string
	cur atomic.Pointer[lease] // the lease claims are made on
	// pending is set while a refill is in flight or spare holds the next
	// lease: a claim past the mark has nothing to start then.
	pending atomic.Bool
	// retryAt is the c.clock() before which no background refill starts
	// after a failed one (0: none failed). A claim that finds both leases
	// empty does not wait for it.
	retryAt atomic.Int64
	// fallback is set for a tag whose IDs the servers do not lease
	// (range_unsupported): its IDs come from the ID buffer or plain
	// requests. probeAt, if not 0, is the c.clock() at which ranges are
	// tried again (after a not_found: a server without the range route).
	fallback atomic.Bool
	probeAt  atomic.Int64

	mu     sync.Mutex // guards what follows, and the starting of refills
	spare  *lease     // the next lease, fetched and not yet current
	refill *refill    // the refill in flight, or nil
	// failures counts refills that failed in a row.
	failures int
	// gone is set when the tag left c.ranges (Close, or a definite error
	// such as unknown_tag with no lease left): callers look it up again.
	gone  bool
	empty lease // the lease of a tag with none: n 0, so every claim fails
}

// errFallback tells Next and NextN to serve a tag without ranges.
var errFallback = errors.New("leafd client: the tag is not served in ranges")

// errGone tells a claim to look its tag up again.
var errGone = errors.New("leafd client: the tag's lease state was dropped")

// WithRanges serves Next and NextN (for up to size IDs) from range leases:
// runs of size consecutive IDs per tag that the server reserves for this
// client alone (GET /segment/{tag}/range?size=size, or SegmentRange over
// gRPC). A call served from a lease is one atomic add, with no lock and no
// request. As soon as no more than refillAt×size IDs of the current lease
// are left, the next lease is fetched in the background, and it takes over
// when the current one is used up; callers that find both empty wait for
// that fetch (at most one per tag is in flight) until it lands or their
// context ends. refillAt means what it means in WithBuffer: the fraction
// left, not used.
//
// size must be at least 1 and at most the servers' segment.max_range
// (default 1,000,000), or every fetch fails with invalid_size. refillAt is
// in [0, 1); 0 fetches the next lease when the current one is used up. A
// tag holds at most two leases.
//
// A batch of NextN is one contiguous run of IDs from one lease; when the
// rest of the current lease is too short for it, that rest is skipped. A
// batch larger than size is one GET /segment/{tag}?count=n (NextSegment).
//
// A dated tag's lease lies within one period and expires with it: the
// server says for how long it may be used (valid_ms, until 20 ms before
// the period ends by the server's clock), and the client counts that from
// when it sent the request, on its monotonic clock, so that the network's
// delay only shortens it. Past that, none of the lease's IDs is handed
// out: the rest is skipped and the next lease is fetched. Calls on such a
// lease read the clock (no longer one atomic add alone). Near the end of
// its period's numbers a lease may be shorter than size.
//
// Tags the servers do not lease in ranges (range_unsupported: opaque tags,
// tags of a sharded store), and every tag of servers without the range
// route (not_found; over gRPC UNIMPLEMENTED; tried again after a minute),
// are served as without WithRanges: from the buffer of WithBuffer if it is
// given too, else by a request per call.
//
// The IDs of one lease strictly increase across all goroutines, and
// leases from one server usually follow one another; but a lease the
// server took from its database directly (a size over a quarter of its
// buffers) lies above the IDs it buffers, so the next lease may start
// below it: IDs from leases are trend-increasing, like IDs across
// servers. A call
// served from memory does not look at its context. Close drops the leases:
// their IDs are skipped, never handed out, as leafd skips the IDs in its
// own buffers at shutdown.
func WithRanges(size int64, refillAt float64) Option {
	return func(s *settings) { s.rangeSize, s.rangeRefillAt, s.ranged = size, refillAt, true }
}

// slot returns the cache slot of tag: a few bytes of it, no hash of the
// whole name.
func (c *Client) slot(tag string) *atomic.Pointer[rangeTag] {
	h := uint(len(tag))
	if len(tag) > 0 {
		h += uint(tag[len(tag)-1])*5 + uint(tag[0])*3
	}
	return &c.slots[h%rangeSlots]
}

// same reports whether s was made with the very string tag (its address
// and length): true on every call of a program that names its tag by a
// constant, and found without a call of memequal. Other strings of the
// same tag are compared in Client.next.
func (s *rangeTag) same(tag string) bool {
	return unsafe.StringData(s.tag) == unsafe.StringData(tag) && len(s.tag) == len(tag)
}

// rangeTag returns the lease state of tag, made on first use, and puts it
// in the tag's cache slot.
func (c *Client) rangeTag(tag string) (*rangeTag, error) {
	v, ok := c.ranges.Load(tag)
	if !ok {
		if err := c.check(tag); err != nil {
			return nil, err
		}
		s := &rangeTag{tag: tag}
		s.cur.Store(&s.empty)
		c.mu.Lock()
		if c.closed.Load() {
			c.mu.Unlock()
			return nil, ErrClosed
		}
		v, _ = c.ranges.LoadOrStore(tag, s)
		c.mu.Unlock()
	}
	s := v.(*rangeTag)
	c.slot(tag).Store(s)
	return s, nil
}

// nextRange is Next with WithRanges past its fast path: s and l are the
// tag's state and lease the fast path found and o its claim on l, or s is
// nil.
func (c *Client) nextRange(ctx context.Context, tag string, s *rangeTag, l *lease, o int64) (int64, error) {
	id, err := c.claim(ctx, tag, s, l, o, 1)
	if err == errFallback {
		return c.nextUnranged(ctx, tag)
	}
	return id, err
}

// claim takes k consecutive IDs of tag from its leases and returns the
// first. s, l and o are a claim already made (o on lease l of s), or s is
// nil. It returns errFallback for a tag not served in ranges.
func (c *Client) claim(ctx context.Context, tag string, s *rangeTag, l *lease, o, k int64) (int64, error) {
	for {
		if l != nil && o <= l.n {
			if l.expires == 0 || c.clock() < l.expires {
				if o >= l.due {
					c.pastMark(s)
				}
				return l.base + o - k + 1, nil
			}
			// The lease's period is over (valid_ms): none of its IDs
			// more, and the next lease takes over.
			l.taken.Add(l.n + 1)
		}
		if c.closed.Load() {
			return 0, ErrClosed
		}
		if s == nil {
			var err error
			if s, err = c.rangeTag(tag); err != nil {
				return 0, err
			}
		} else if l != nil {
			switch err := c.awaitLease(ctx, s, l); err {
			case nil:
			case errGone:
				s = nil
				l = nil
				continue
			default:
				return 0, err
			}
		}
		l = s.cur.Load()
		o = l.taken.Add(k)
	}
}

// pastMark starts the background fetch of the next lease of s unless one
// is in flight or held, or the last one failed too recently.
func (c *Client) pastMark(s *rangeTag) {
	if s.pending.Load() {
		return
	}
	if at := s.retryAt.Load(); at != 0 && c.clock() < at {
		return
	}
	s.mu.Lock()
	if !s.pending.Load() && !s.gone && !s.fallback.Load() {
		c.startRangeRefill(s)
	}
	s.mu.Unlock()
}

// awaitLease is called when a claim found lease l of s used up. It makes
// the next lease current if one is held, or waits for the refill in flight
// (starting one if none is) until it lands or ctx ends. nil means: claim
// again.
func (c *Client) awaitLease(ctx context.Context, s *rangeTag, l *lease) error {
	if s.fallback.Load() {
		at := s.probeAt.Load()
		if at == 0 || c.clock() < at {
			return errFallback
		}
		// Time to see whether the servers lease ranges now.
		s.fallback.Store(false)
	}
	s.mu.Lock()
	if s.gone {
		s.mu.Unlock()
		if c.closed.Load() {
			return ErrClosed
		}
		return errGone
	}
	if s.cur.Load() != l {
		s.mu.Unlock()
		return nil // another caller moved on to the next lease
	}
	if s.spare != nil {
		s.cur.Store(s.spare)
		s.spare = nil
		s.pending.Store(false)
		s.mu.Unlock()
		return nil
	}
	r := s.refill
	if r == nil {
		r = c.startRangeRefill(s)
		if r == nil {
			s.mu.Unlock()
			return ErrClosed
		}
	}
	s.mu.Unlock()
	select {
	case <-r.done:
		switch {
		case c.closed.Load():
			return ErrClosed
		case s.fallback.Load():
			return errFallback
		}
		return r.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// startRangeRefill starts the fetch of the next lease of s in the
// background, unless the client is closed (nil then). s.mu is held: Close
// takes it after setting closed, so a refill started here is one Close
// waits for.
func (c *Client) startRangeRefill(s *rangeTag) *refill {
	if c.closed.Load() {
		return nil
	}
	r := &refill{done: make(chan struct{})}
	s.refill = r
	s.pending.Store(true)
	if cur := s.cur.Load(); cur.n > 0 && cur.expires == 0 {
		cur.mark.Store(cur.n + 1) // nothing to start until it is used up
	}
	c.wg.Add(1)
	go c.runRangeRefill(s, r)
	return r
}

// runRangeRefill fetches a lease for s on the client's context, bounded
// by the refill timeout, and makes it current if the current one is used
// up, or holds it as the spare.
func (c *Client) runRangeRefill(s *rangeTag, r *refill) {
	defer c.wg.Done()
	ctx, cancel := context.WithTimeout(c.ctx, c.refillTimeout)
	l, err := c.fetchLease(ctx, s.tag)
	cancel()
	if err != nil {
		err = fmt.Errorf("leafd client: fetching a range of tag %q: %w", s.tag, err)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	s.refill = nil
	switch {
	case s.gone || c.closed.Load():
		// Closed while the request was in flight: the lease is dropped.
		err = ErrClosed
	case err == nil:
		s.failures = 0
		s.retryAt.Store(0)
		if cur := s.cur.Load(); cur.taken.Load() >= cur.n {
			s.cur.Store(l)
			s.pending.Store(false)
		} else {
			s.spare = l // pending stays set until it is swapped in
		}
	default:
		s.failures++
		s.retryAt.Store(c.clock() + int64(backoff(s.failures)))
		s.pending.Store(false)
		if cur := s.cur.Load(); cur.n > 0 && cur.expires == 0 {
			cur.mark.Store(cur.due) // past it, calls try again after the backoff
		}
		var e *Error
		if !errors.As(err, &e) {
			break
		}
		switch cur := s.cur.Load(); {
		case e.Code == leafd.ERangeUnsupported:
			s.probeAt.Store(0)
			s.fallback.Store(true)
		case e.Code == leafd.ENotFound:
			s.probeAt.Store(c.clock() + int64(rangeProbeAfter))
			s.fallback.Store(true)
		case e.Code == leafd.EUnknownTag || (e.definite() && cur.taken.Load() >= cur.n):
			// Keep no state for an unknown tag, so that made-up tags do not
			// pile up in the map; nor its lease: the tag stopped existing,
			// and one created again under its name starts over.
			s.gone = true
			s.cur.Store(&s.empty)
			c.ranges.CompareAndDelete(s.tag, s)
			c.slot(s.tag).CompareAndSwap(s, nil)
		}
	}
	r.err = err
	close(r.done)
}

// fetchLease fetches one lease of c.rangeSize IDs of tag, asking every
// base URL in turn, up to rangeAttempts rounds while the failures are not
// definite.
func (c *Client) fetchLease(ctx context.Context, tag string) (*lease, error) {
	for attempt := 1; ; attempt++ {
		sent := c.clock()
		start, n, valid, err := c.t.segmentRange(ctx, tag, c.rangeSize)
		if err == nil {
			l := &lease{base: start - 1, n: n, due: n - min(c.rangeLow, n-1)}
			if valid > 0 {
				// Valid from the answer on the server; measured from the
				// sending here, so that the network's delay shortens it.
				l.expires = sent + int64(valid)
			} else {
				l.mark.Store(l.due)
			}
			return l, nil
		}
		var e *Error
		if (errors.As(err, &e) && e.definite()) || attempt == rangeAttempts || ctx.Err() != nil {
			return nil, err
		}
		t := time.NewTimer(backoff(attempt))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, err
		}
	}
}

// nextNRange is NextN from the leases, for n up to the lease size.
func (c *Client) nextNRange(ctx context.Context, tag string, n int) ([]int64, error) {
	first, err := c.claim(ctx, tag, nil, nil, 0, int64(n))
	if err == errFallback {
		return c.nextNUnranged(ctx, tag, n)
	}
	if err != nil {
		return nil, err
	}
	out := make([]int64, n)
	for i := range out {
		out[i] = first + int64(i)
	}
	return out, nil
}

// dropRanges empties every lease for Close: their IDs are never handed
// out.
func (c *Client) dropRanges() {
	c.ranges.Range(func(_, v any) bool {
		s := v.(*rangeTag)
		s.mu.Lock()
		s.gone = true
		s.cur.Store(&s.empty)
		s.spare = nil
		s.mu.Unlock()
		return true
	})
	for i := range c.slots {
		c.slots[i].Store(nil)
	}
}

// clock is the time since New on the monotonic clock, in nanoseconds.
func (c *Client) clock() int64 { return int64(time.Since(c.epoch)) }
