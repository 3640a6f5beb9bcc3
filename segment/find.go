package segment

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/leafd/leafd"
)

// finder holds the state of the lookups, in the store, of tags that are not
// in the list the allocator last read, so that a tag created by SQL, by
// `leafd tag add` or through another server is served within a moment
// instead of at the next tag refresh. A flood of made-up names must still
// cost the database almost nothing, hence three bounds:
//
//   - one lookup per name at a time: concurrent requests for a name share
//     the one in flight;
//   - a short negative cache: a name found absent is answered unknown_tag
//     from memory for MissTTL;
//   - a token bucket over all names: at most MissLookups lookups per
//     second (and a burst of as many); a request beyond that is answered
//     from memory at once.
type finder struct {
	rate float64       // lookups per second, and the bucket's size
	ttl  time.Duration // how long a name found absent stays so

	mu       sync.Mutex
	tokens   float64
	filled   time.Time // when tokens was last topped up
	inflight map[string]*findCall
	absent   map[string]time.Time // name → until when it is known absent
}

// findCall is one lookup in flight, shared by every request for its name.
// t and err are set before done is closed.
type findCall struct {
	done chan struct{}
	t    *tag
	err  error
}

// absentSweepAt is the size of the negative cache above which expired
// entries are swept on insertion. The token bucket bounds how fast it can
// grow, so the sweep is rare and the map small.
const absentSweepAt = 1024

func newFinder(rate int, ttl time.Duration) *finder {
	return &finder{
		rate: float64(rate), ttl: ttl,
		tokens:   float64(rate),
		inflight: map[string]*findCall{},
		absent:   map[string]time.Time{},
	}
}

// find looks up a tag that was not in the tag map, within the finder's
// bounds, and serves it from then on if the store has it. It returns the
// tag; unknown_tag when the store has no such row (now, or within the last
// MissTTL) or when no lookup could be spent on it; tag_conflict when the
// store refuses the tag, its definitions disagreeing; segment_unavailable
// when the store could not be asked or ctx ended first.
//
// The lookup runs on a goroutine of the allocator's, not the request's: a
// client that gives up must not fail the others that wait for the same
// name, and each request waits only as long as its own ctx allows.
func (a *Allocator) find(ctx context.Context, name string) (*tag, error) {
	f := a.finder
	f.mu.Lock()
	// A lookup that ended since the caller missed the map adopted its tag
	// before it left inflight: seen here, under f.mu, or not at all.
	if t := (*a.tags.Load())[name]; t != nil {
		f.mu.Unlock()
		return t, nil
	}
	now := a.cfg.Now()
	if until, ok := f.absent[name]; ok {
		if now.Before(until) {
			f.mu.Unlock()
			// The store may have the tag by now: say when it was
			// asked, and do not tell the caller to create a tag that
			// may exist.
			return nil, leafd.Errorf(leafd.EUnknownTag,
				"tag %q was not in the store when it was looked up less than %s ago; if it was just created, retry in a moment, "+
					"otherwise create it with POST /api/tags or leafd tag add", name, f.ttl)
		}
		delete(f.absent, name)
	}
	c := f.inflight[name]
	if c == nil {
		if !f.takeLocked(now) {
			f.mu.Unlock()
			return nil, leafd.Errorf(leafd.EUnknownTag,
				"tag %q is not among the tags this server serves, and too many unknown tags are asked for to look it up now; if it was just created, retry in a second", name)
		}
		c = &findCall{done: make(chan struct{})}
		if !a.goroutine(func() { a.lookUp(name, c) }) {
			f.mu.Unlock()
			return nil, leafd.Errorf(leafd.ESegmentUnavailable, "tag %q cannot be looked up: the server is shutting down", name)
		}
		f.inflight[name] = c
	}
	f.mu.Unlock()
	select {
	case <-c.done:
		return c.t, c.err
	case <-ctx.Done():
		return nil, leafd.Errorf(leafd.ESegmentUnavailable, "the request ended while tag %q was looked up in the store", name)
	}
}

// lookUp asks the store for name, adopts the tag if it is there, and ends
// the call c.
func (a *Allocator) lookUp(name string, c *findCall) {
	ctx, cancel := context.WithTimeout(a.ctx, a.cfg.WaitTimeout)
	row, err := a.store.LookupTag(ctx, name)
	cancel()
	absent := false
	switch {
	case err == nil:
		c.t = a.adopt(row, false)
	case leafd.ErrorCode(err) == leafd.EUnknownTag:
		c.err, absent = unknownTag(name), true
	case leafd.ErrorCode(err) == leafd.ETagConflict:
		c.err = err // the store answered: the tag's records disagree
	default:
		c.err = leafd.Wrap(leafd.ESegmentUnavailable, err, fmt.Sprintf(
			"tag %q is not among the tags this server has read, and the store could not be asked for it; retry later", name))
	}
	f := a.finder
	f.mu.Lock()
	delete(f.inflight, name)
	if absent {
		now := a.cfg.Now()
		if len(f.absent) >= absentSweepAt {
			for n, until := range f.absent {
				if !now.Before(until) {
					delete(f.absent, n)
				}
			}
		}
		f.absent[name] = now.Add(f.ttl)
	}
	f.mu.Unlock()
	close(c.done)
}

// takeLocked spends one token of the bucket, refilled at rate per second
// up to rate, and reports whether there was one. The caller holds f.mu.
func (f *finder) takeLocked(now time.Time) bool {
	if d := now.Sub(f.filled); d > 0 {
		f.tokens = min(f.rate, f.tokens+d.Seconds()*f.rate)
	}
	f.filled = now
	if f.tokens < 1 {
		return false
	}
	f.tokens--
	return true
}

// forget drops name from the negative cache: it was just created through
// this server.
func (f *finder) forget(name string) {
	f.mu.Lock()
	delete(f.absent, name)
	f.mu.Unlock()
}
