package snowflake

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leafd/leafd"
)

// MaxPoolWorkers is the most worker ids one Pool holds
// (snowflake.workers).
const MaxPoolWorkers = 16

// ErrInvalidWorkers is what NewPool returns, wrapped, for a number of
// worker ids outside 1..MaxPoolWorkers, or above one with a fixed worker
// id or without leases.
var ErrInvalidWorkers = errors.New("snowflake.workers is out of range")

// Pool issues IDs under several worker ids at once, each held by a
// Generator of its own: one worker id issues at most 2^SequenceBits IDs a
// millisecond, k of them k times that.
//
// A request is served by the generators in turn; one that would have to
// wait passes the request on to the next, first without borrowing time and
// then with it, and it waits only when none can issue at once. A batch is
// sorted, so that it is ascending; consecutive requests are in order only
// to the millisecond (within MaxBorrow), as across servers. A Pool of one
// worker id behaves exactly as its Generator.
type Pool struct {
	gens []*Generator
	turn atomic.Uint32
	// changed is closed and replaced whenever a generator's lease or state
	// changes (Generator.broadcastLocked), so that a request that found no
	// worker id able to issue waits for any of them.
	mu      sync.Mutex
	changed chan struct{}
}

// NewPool returns a Pool of workers generators with the settings s, which
// lease workers distinct worker ids. More than one needs s.Leases, and no
// fixed worker id. With s.Owner set, each generator's owner is s.Owner
// followed by /1, /2, …; without it, one default owner is made for the
// process and numbered the same way, so that the lease table shows which
// leases belong together.
//
// Errors: those of New, and ErrInvalidWorkers (wrapped) for workers
// outside 1..MaxPoolWorkers or more than the layout has, or above one
// without leases or with a fixed worker id.
func NewPool(s Settings, workers int) (*Pool, error) {
	l := s.Layout.orDefault()
	switch {
	case workers < 1 || workers > MaxPoolWorkers:
		return nil, fmt.Errorf("%w (got %d): use 1 to %d", ErrInvalidWorkers, workers, MaxPoolWorkers)
	case workers > 1 && (s.Leases == nil || s.Fixed):
		return nil, fmt.Errorf("%w (got %d): more than one worker id needs snowflake.worker_id: auto, "+
			"so that each is leased; use 1 with a fixed worker id", ErrInvalidWorkers, workers)
	case int64(workers) > l.Workers():
		return nil, fmt.Errorf("%w (got %d): the layout has %d worker ids (snowflake.worker_bits %d)",
			ErrInvalidWorkers, workers, l.Workers(), l.WorkerBits)
	}
	p := &Pool{gens: make([]*Generator, workers), changed: make(chan struct{})}
	owner := s.Owner
	if owner == "" && workers > 1 {
		owner = defaultOwner()
	}
	if suffix := len("/" + strconv.Itoa(workers)); workers > 1 && len(owner)+suffix > MaxOwnerLen {
		return nil, fmt.Errorf("%w: %q is longer than %d bytes with /1 to /%d after it, for %d worker ids: use at most %d bytes",
			ErrInvalidOwner, owner[:32]+"…", MaxOwnerLen, workers, workers, MaxOwnerLen-suffix)
	}
	for i := range p.gens {
		si := s
		if workers > 1 {
			si.Owner = owner + "/" + strconv.Itoa(i+1)
		}
		g, err := New(si)
		if err != nil {
			return nil, err
		}
		if workers > 1 {
			g.notify = p.notify
		}
		p.gens[i] = g
	}
	return p, nil
}

// notify wakes the requests waiting for any generator (see Pool.changed).
// It runs with a generator's g.mu held: p.mu is never held while taking
// a g.mu.
func (p *Pool) notify() {
	p.mu.Lock()
	close(p.changed)
	p.changed = make(chan struct{})
	p.mu.Unlock()
}

// watch returns the channel the next change closes.
func (p *Pool) watch() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.changed
}

// Workers returns the number of worker ids the pool holds when all are
// leased.
func (p *Pool) Workers() int { return len(p.gens) }

// Layout returns the pool's layout.
func (p *Pool) Layout() Layout { return p.gens[0].Layout() }

// MaxBatch returns the largest count NextN accepts.
func (p *Pool) MaxBatch() int { return p.gens[0].MaxBatch() }

// Start starts every generator's lease keeper (Generator.Start).
//
// Errors: ErrClosed after Close.
func (p *Pool) Start() error {
	for _, g := range p.gens {
		if err := g.Start(); err != nil {
			return err
		}
	}
	return nil
}

// Close closes every generator at once (Generator.Close), each releasing
// its lease with its watermark.
func (p *Pool) Close() error {
	var wg sync.WaitGroup
	for _, g := range p.gens {
		wg.Go(func() { _ = g.Close() })
	}
	wg.Wait()
	return nil
}

// Done and Err are those of the pool's first generator: a fixed worker
// id, which a Pool holds alone, stops for good (Generator.Done), and so
// does another layout recorded in the store, which every generator of the
// pool meets at its first claim.
func (p *Pool) Done() <-chan struct{} { return p.gens[0].Done() }

// Err is Generator.Err of the pool's only generator; see Done.
func (p *Pool) Err() error { return p.gens[0].Err() }

// Ready returns nil when at least one worker id can issue now, and the
// first generator's not_ready error otherwise. It asks every generator,
// so that each looks for another worker id when its clock is behind.
func (p *Pool) Ready() error {
	var first error
	ready := false
	for i, g := range p.gens {
		err := g.Ready()
		if err == nil {
			ready = true
		} else if i == 0 {
			first = err
		}
	}
	if ready {
		return nil
	}
	return first
}

// first returns the index of the generator a request tries first.
func (p *Pool) first() int {
	return int(p.turn.Add(1) % uint32(len(p.gens)))
}

// Next returns a new ID: see Generator.Next for its errors.
func (p *Pool) Next(ctx context.Context) (ID, error) {
	if len(p.gens) == 1 {
		return p.gens[0].Next(ctx)
	}
	start := p.first()
	for _, borrow := range [2]bool{false, true} {
		for i := range p.gens {
			if id, ok := p.gens[(start+i)%len(p.gens)].tryNext(borrow); ok {
				return id, nil
			}
		}
	}
	var one [1]ID
	ids, err := p.wait(ctx, start, 1, one[:0], one[:0], 0)
	if err != nil {
		return 0, err
	}
	return ids[0], nil
}

// NextN appends n new IDs to dst, ascending: see Generator.NextN for its
// errors. On error the IDs already taken are dropped (never issued) and
// dst is returned unchanged.
func (p *Pool) NextN(ctx context.Context, n int, dst []ID) ([]ID, error) {
	if len(p.gens) == 1 {
		return p.gens[0].NextN(ctx, n, dst)
	}
	if n < 1 || n > p.MaxBatch() {
		return dst, leafd.Errorf(leafd.EInvalidCount, "count %d is out of range: use 1 to %d", n, p.MaxBatch())
	}
	start := p.first()
	out, pieces, err := p.fill(start, n, dst, dst)
	if err == nil {
		out, err = p.wait(ctx, start, n, dst, out, pieces)
	}
	if err != nil {
		return dst, err
	}
	return out, nil
}

// fill appends to out what the generators can issue at once, from start
// on, until out holds n IDs after dst: first without borrowing, then with
// it. pieces counts the generators that gave some. err is set when every
// generator failed (it is then the first one's error): closed, or the
// clock outside the layout, which no waiting mends.
func (p *Pool) fill(start, n int, dst, out []ID) (_ []ID, pieces int, err error) {
	for _, borrow := range [2]bool{false, true} {
		failed := 0
		for i := 0; i < len(p.gens) && len(out)-len(dst) < n; i++ {
			before := len(out)
			var e error
			out, e = p.gens[(start+i)%len(p.gens)].take(n-(before-len(dst)), borrow, out)
			if len(out) > before {
				pieces++
			}
			if e != nil {
				if failed == 0 {
					err = e
				}
				failed++
			}
		}
		if failed < len(p.gens) {
			err = nil
		}
	}
	return out, pieces, err
}

// wait completes out to n IDs after dst when fill could not: it waits on
// a generator that is ready (whose millisecond is merely used up, or whose
// clock is a little behind), or, while none is, for any of them to
// change; WaitTimeout in all. Then it sorts what several pieces made.
func (p *Pool) wait(ctx context.Context, start, n int, dst, out []ID, pieces int) ([]ID, error) {
	var deadline *time.Timer
	var until time.Time
	defer func() {
		if deadline != nil {
			deadline.Stop()
		}
	}()
	for len(out)-len(dst) < n {
		changed := p.watch()
		// Fill again after taking the channel: a change made in between
		// is then not waited for in vain.
		var more int
		var err error
		if out, more, err = p.fill(start, n, dst, out); err != nil {
			return dst, err
		}
		pieces += more
		if len(out)-len(dst) == n {
			break
		}
		if g := p.ready(start); g != nil {
			gctx := ctx
			if !until.IsZero() {
				// What was waited for any worker id counts in WaitTimeout.
				var cancel context.CancelFunc
				gctx, cancel = context.WithDeadline(ctx, until)
				defer cancel()
			}
			before := len(out)
			if out, err = g.NextN(gctx, n-(len(out)-len(dst)), out); err != nil {
				return dst, err
			}
			if len(out) > before {
				pieces++
			}
			break
		}
		if deadline == nil {
			wt := p.gens[0].set.WaitTimeout
			deadline, until = time.NewTimer(wt), time.Now().Add(wt)
		}
		select {
		case <-changed:
		case <-deadline.C:
			return dst, p.stuck(start)
		case <-ctx.Done():
			return dst, p.gens[start].ended(ctx, "no worker id of this server can issue")
		}
	}
	if pieces > 1 {
		// Each piece is ascending, but a piece under one worker id may lie
		// above the next piece under another.
		slices.Sort(out[len(dst):])
	}
	return out, nil
}

// ready returns the first generator from start that can issue now or
// after a short wait of its own, or nil.
func (p *Pool) ready(start int) *Generator {
	for i := range p.gens {
		if g := p.gens[(start+i)%len(p.gens)]; g.Ready() == nil {
			return g
		}
	}
	return nil
}

// stuck is the error of a request that waited WaitTimeout for any worker
// id to issue: snowflake_unavailable, with why the first one it tried
// cannot.
func (p *Pool) stuck(start int) error {
	why := "no worker id can issue"
	var e *leafd.Error
	if err := p.gens[start].Ready(); errors.As(err, &e) {
		why = strings.TrimPrefix(e.Message, "snowflake: ")
	}
	return p.gens[start].unavailable(fmt.Sprintf("none of the %d worker ids of this server can issue (%s; waited %v)",
		len(p.gens), why, p.gens[start].set.WaitTimeout))
}

// State returns a snapshot of the pool: that of its one generator, or for
// several the sum of their counters, the largest last millisecond and
// lead, the earliest lease end, the lowest worker id and all of them in
// WorkerIDs, and the first error.
func (p *Pool) State() State {
	if len(p.gens) == 1 {
		return p.gens[0].State()
	}
	var s State
	s.WorkerID = -1
	for i, g := range p.gens {
		gs := g.State()
		if i == 0 {
			s.Source, s.MaxBorrow = gs.Source, gs.MaxBorrow
		}
		s.WorkerIDs = append(s.WorkerIDs, gs.WorkerIDs...)
		if !gs.LeaseUntil.IsZero() && (s.LeaseUntil.IsZero() || gs.LeaseUntil.Before(s.LeaseUntil)) {
			s.LeaseUntil = gs.LeaseUntil
		}
		s.LastMs = max(s.LastMs, gs.LastMs)
		s.BackwardEvents += gs.BackwardEvents
		s.Issued += gs.Issued
		s.Renewals += gs.Renewals
		s.LeadMs = max(s.LeadMs, gs.LeadMs)
		s.MaxLeadMs = max(s.MaxLeadMs, gs.MaxLeadMs)
		s.BorrowedMs += gs.BorrowedMs
		if s.Err == nil {
			s.Err = gs.Err
		}
	}
	slices.Sort(s.WorkerIDs)
	if len(s.WorkerIDs) > 0 {
		s.WorkerID = s.WorkerIDs[0]
	}
	return s
}
