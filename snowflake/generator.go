// Package snowflake generates time-ordered 64-bit IDs, time | worker |
// sequence, with worker ids leased from a shared database so that no two
// servers share one, and a watermark recorded ahead of every timestamp
// issued so that neither a clock set back nor a kill -9 and restart can
// issue an ID twice. A fixed worker id (Settings.Fixed) is leased the same
// way; without a store (Settings.Leases nil) it is guarded only against a
// clock that goes back while the generator runs.
package snowflake

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/leafd/leafd"
)

// Settings configures a Generator. The zero value of every field means the
// default given in its comment (those of docs/contract.md section 7).
type Settings struct {
	// Layout splits the ID's bits. Zero: 41/10/12 from Twitter's epoch.
	Layout Layout
	// Leases leases worker ids from the store. Nil: WorkerID is used, with
	// no lease and no protection against another server using it.
	Leases LeaseStore
	// Fixed, with Leases, leases WorkerID alone instead of any free worker
	// id: see Generator.Done for what happens when it is held by another
	// server. False: any free worker id is leased.
	Fixed bool
	// WorkerID is the fixed worker id when Leases is nil or Fixed is set,
	// in 0..2^WorkerBits-1.
	WorkerID int64
	// LeaseTTL is the lifetime of a lease. The generator renews it every
	// third of that, records its watermark LeaseTTL ahead of its clock, and
	// stops issuing if no renewal succeeded for LeaseTTL minus a tenth.
	// Default 30s.
	LeaseTTL time.Duration
	// MaxBackward is how far the clock may be behind the last timestamp
	// issued and still be waited out. Further back, the generator switches
	// to another worker id or refuses. Default 5ms.
	MaxBackward time.Duration
	// WaitTimeout bounds how long one request waits for a lease or a
	// worker id switch. Default 2s.
	WaitTimeout time.Duration
	// MaxBatch is the largest count NextN accepts. Default 10,000.
	MaxBatch int
	// MaxBorrow is how far ahead of the clock the generator may move its
	// logical time when the sequence of a millisecond is used up, instead
	// of waiting for the clock (uid-generator's borrowing, bounded): never
	// past the recorded watermark, and never more than MaxBorrow ahead of
	// the clock reading that issues the ID. One bound for Next and NextN.
	// Zero (the default) borrows nothing. At most 1s and LeaseTTL/10.
	MaxBorrow time.Duration
	// RandomStart starts each millisecond's sequence at a random number
	// below 100 (below the sequence space for small layouts), so that
	// id % n stays balanced at low rates.
	RandomStart bool
	// Owner names this generator in the lease table, at most MaxOwnerLen
	// bytes; a fixed worker id's lease adds FixedOwnerPrefix before it.
	// Default host/pid/random.
	Owner string
	// Now returns the wall clock that timestamps come from; Sleep waits.
	// Defaults time.Now and time.Sleep. Tests move time through them. The
	// lease's own deadlines always run on the monotonic clock, so that a
	// step of the wall clock can neither stretch nor cut a lease. A
	// request's context cuts the default Sleep short, not an injected one.
	Now   func() time.Time
	Sleep func(time.Duration)
	// Logger receives lease changes and clock events. Default
	// slog.Default().
	Logger *slog.Logger
}

// MaxOwnerLen is the longest Settings.Owner: the width of the owner column
// of the lease table, less room for the claim number the generator adds.
const MaxOwnerLen = 108

// Generator issues snowflake IDs. It is safe for concurrent use. Create it
// with New, call Start, and Close it when done.
type Generator struct {
	set settings // never changes after New

	mu     sync.Mutex
	clock  clock
	lease  leaseState
	stats  counters
	keeper keeper
	// changed is closed and replaced at every change; notify, set by a
	// Pool, is called then, with g.mu held.
	changed chan struct{}
	notify  func()
	lastErr error // the last lease failure, nil once a lease is renewed
	// stopped is closed, and fatal set, when the generator gives up for
	// good (see Done).
	stopped         chan struct{}
	fatal           error
	started, closed bool
	ctx             context.Context
	cancel          context.CancelFunc
	wg              sync.WaitGroup
}

// settings is Settings with its defaults filled in, and what New derives
// from them.
type settings struct {
	Settings
	seqMask, ttlMs, backMs, borrowMs int64
	leaseful, fixed                  bool // with a LeaseStore; leasing the fixed worker id alone
	// realClock is set when Now is time.Now, whose readings then serve as
	// the monotonic clock too; realSleep when Sleep is time.Sleep, which a
	// request's context can then cut short.
	realClock, realSleep bool
}

// clock is the time and sequence of the last ID issued.
type clock struct {
	lastMs int64 // the last millisecond issued (or the lease's previous watermark)
	seq    int64
	behind bool // the clock is further behind lastMs than MaxBackward
}

// lag returns how far ms is behind the last millisecond issued, beyond the
// lead that borrowing allows.
func (c *clock) lag(ms, borrowMs int64) int64 { return c.lastMs - borrowMs - ms }

// resume goes on past millisecond from, as if its sequence were used up.
func (c *clock) resume(from, seqMask int64) { c.lastMs, c.seq, c.behind = from, seqMask, false }

// leaseState is the worker id held and the bounds of its lease.
type leaseState struct {
	worker  int64 // -1 while no lease is held
	held    *Lease
	limitMs int64 // the recorded watermark: no millisecond after it is issued
	// until is the local end of the lease (zero for a fixed worker id) and
	// renewAt when to renew it, both on the monotonic clock.
	until, renewAt        time.Time
	wantSwitch, wantRenew bool  // asks of the keeper: another worker id, a renewal
	installs              int64 // leases installed: a batch sees a worker id change while it waits
}

// install makes held the lease, its watermark recorded at limitMs, claimed
// by a store call that began at sent.
func (l *leaseState) install(held *Lease, limitMs int64, sent time.Time, ttl time.Duration) {
	l.held, l.worker, l.limitMs, l.wantSwitch = held, held.WorkerID, limitMs, false
	l.installs++
	l.extend(sent, ttl)
}

// drop forgets a lease that another server took over.
func (l *leaseState) drop() { l.held, l.worker, l.limitMs, l.until = nil, -1, 0, time.Time{} }

// due returns the lease, and whether the keeper is to renew it (due or
// asked) and to switch away from it: a switch is wanted while the clock is
// too far behind, even with no request to notice it (never for a fixed
// worker id), and no longer once it caught up.
func (l *leaseState) due(behind, fixed bool) (held *Lease, renew, switching bool) {
	if behind && l.held != nil && !fixed {
		l.wantSwitch = true
	} else if !behind {
		l.wantSwitch = false
	}
	return l.held, l.held != nil && (l.wantRenew || !time.Now().Before(l.renewAt)), l.wantSwitch
}

// extend moves the lease's local deadlines on from sent, when the store
// call that claimed or renewed it began.
func (l *leaseState) extend(sent time.Time, ttl time.Duration) {
	l.until, l.renewAt = sent.Add(ttl-ttl/10), sent.Add(ttl/3)
	l.wantRenew = false
}

// lapsed reports whether the lease no longer covers now: past the
// watermark, or run out by the monotonic clock, so that a step of the wall
// clock cannot stretch it (wall is the reading of Now just taken).
func (l *leaseState) lapsed(wall time.Time, realClock bool) bool {
	if wall.UnixMilli() > l.limitMs {
		return true
	}
	if l.until.IsZero() {
		return false
	}
	if !realClock {
		wall = time.Now()
	}
	return !wall.Before(l.until)
}

// counters are what State reports of the generator's history.
type counters struct {
	issued, backward, renewals int64
	// borrowed counts the milliseconds taken ahead of the clock; maxLead
	// is the largest lead of the logical time over the clock so far.
	borrowed, maxLead int64
}

// borrow counts one ID issued in a millisecond borrowed lead ms ahead of
// the clock.
func (c *counters) borrow(lead int64) {
	c.borrowed++
	c.maxLead = max(c.maxLead, lead)
	c.issued++
}

// keeper is what the lease keeper alone touches, besides wake.
type keeper struct {
	wake     chan struct{} // requests signal the keeper through it
	failures int           // consecutive failed store calls
	claims   int64         // claims made, for the per-claim owner
}

// Errors of New besides those of Layout.Validate. Each names the setting
// it is about (its configuration key where it has one); New wraps it with
// the value given and what to use instead.
var (
	ErrInvalidWorkerID    = errors.New("snowflake.worker_id is out of range")
	ErrInvalidLeaseTTL    = errors.New("snowflake.lease_ttl is too short")
	ErrInvalidOwner       = errors.New("snowflake: the owner is too long")
	ErrInvalidMaxBackward = errors.New("snowflake.max_backward is out of range")
	ErrInvalidWaitTimeout = errors.New("snowflake: the wait timeout is negative")
	ErrInvalidMaxBatch    = errors.New("snowflake: the largest batch is negative")
	ErrInvalidMaxBorrow   = errors.New("snowflake.max_borrow is out of range")
)

// The defaults of Settings that are those of snowflake.lease_ttl and snowflake.max_backward.
const DefaultLeaseTTL, DefaultMaxBackward = 30 * time.Second, 5 * time.Millisecond

// ErrClosed is what Start returns once Close has been called.
var ErrClosed = errors.New("snowflake: the generator is closed")

// New returns a Generator. With a fixed worker id it can issue at once;
// with Leases it issues once Start has claimed a worker id.
//
// Errors, each wrapped with the value at fault (check them with errors.Is):
// ErrInvalidBits, ErrEpochFuture or ErrLayoutExpired for a bad layout;
// ErrInvalidWorkerID for a fixed worker id outside the layout;
// ErrInvalidLeaseTTL for a LeaseTTL below 10ms; ErrInvalidOwner for an
// Owner longer than MaxOwnerLen; ErrInvalidMaxBackward for a MaxBackward
// outside 1ms..1s; ErrInvalidWaitTimeout or ErrInvalidMaxBatch for a
// negative WaitTimeout or MaxBatch; ErrInvalidMaxBorrow for a MaxBorrow
// outside 0..1s or above LeaseTTL/10.
func New(s Settings) (*Generator, error) {
	set, err := newSettings(s)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	g := &Generator{set: set, lease: leaseState{worker: -1}, changed: make(chan struct{}),
		keeper: keeper{wake: make(chan struct{}, 1)}, stopped: make(chan struct{}), ctx: ctx, cancel: cancel}
	if !set.leaseful {
		g.lease.worker, g.lease.limitMs = s.WorkerID, 1<<63-1
	}
	return g, nil
}

// newSettings fills in the defaults of s and checks it; see New.
func newSettings(s Settings) (settings, error) {
	set := settings{realClock: s.Now == nil, realSleep: s.Sleep == nil, leaseful: s.Leases != nil, fixed: s.Leases != nil && s.Fixed}
	if set.realClock {
		s.Now = time.Now
	}
	if set.realSleep {
		s.Sleep = time.Sleep
	}
	if s.Logger == nil {
		s.Logger = slog.Default()
	}
	if s.LeaseTTL == 0 {
		s.LeaseTTL = DefaultLeaseTTL
	}
	if s.MaxBackward == 0 {
		s.MaxBackward = DefaultMaxBackward
	}
	if s.WaitTimeout == 0 {
		s.WaitTimeout = 2 * time.Second
	}
	if s.MaxBatch == 0 {
		s.MaxBatch = 10_000
	}
	if s.Owner == "" {
		s.Owner = defaultOwner()
	}
	s.Layout = s.Layout.orDefault()
	if err := s.Layout.Validate(s.Now()); err != nil {
		return set, err
	}
	switch {
	case (s.Leases == nil || s.Fixed) && (s.WorkerID < 0 || s.WorkerID >= s.Layout.Workers()):
		return set, fmt.Errorf("%w (got %d): use 0 to %d (snowflake.worker_bits %d)",
			ErrInvalidWorkerID, s.WorkerID, s.Layout.Workers()-1, s.Layout.WorkerBits)
	case s.LeaseTTL < 10*time.Millisecond:
		return set, fmt.Errorf("%w (got %v): use at least 10ms (1s in the configuration)", ErrInvalidLeaseTTL, s.LeaseTTL)
	case len(s.Owner) > MaxOwnerLen:
		return set, fmt.Errorf("%w: %q is longer than %d bytes", ErrInvalidOwner, s.Owner[:32]+"…", MaxOwnerLen)
	case s.MaxBackward < time.Millisecond || s.MaxBackward > time.Second:
		return set, fmt.Errorf("%w (got %v): use 1ms to 1s", ErrInvalidMaxBackward, s.MaxBackward)
	case s.WaitTimeout < 0:
		return set, fmt.Errorf("%w (got %v): use a positive duration, or 0 for the default, 2s", ErrInvalidWaitTimeout, s.WaitTimeout)
	case s.MaxBatch < 0:
		return set, fmt.Errorf("%w (got %d): use a positive count, or 0 for the default, 10,000", ErrInvalidMaxBatch, s.MaxBatch)
	case s.MaxBorrow < 0 || s.MaxBorrow > time.Second || s.MaxBorrow > s.LeaseTTL/10:
		return set, fmt.Errorf("%w (got %v): use 0 (off) to 1s, and at most a tenth of snowflake.lease_ttl (%v)",
			ErrInvalidMaxBorrow, s.MaxBorrow, s.LeaseTTL)
	}
	set.Settings, set.seqMask = s, s.Layout.Sequences()-1
	set.ttlMs, set.backMs, set.borrowMs = s.LeaseTTL.Milliseconds(), s.MaxBackward.Milliseconds(), s.MaxBorrow.Milliseconds()
	return set, nil
}

// defaultOwner names this process and generator: host, pid and a random
// suffix, so that a restarted process never passes for its predecessor.
func defaultOwner() string {
	host, _ := os.Hostname()
	if len(host) > 64 {
		host = host[:64]
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// Layout returns the generator's layout.
func (g *Generator) Layout() Layout { return g.set.Layout }

// MaxBatch returns the largest count NextN accepts.
func (g *Generator) MaxBatch() int { return g.set.MaxBatch }

// Start begins leasing a worker id, when the generator uses leases (see
// keep). Calling it again does nothing. Errors: ErrClosed after Close.
func (g *Generator) Start() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		// The keeper would find its context cancelled, but might still
		// claim a worker id first, and Close no longer waits for it.
		return ErrClosed
	}
	if !g.set.leaseful || g.started {
		return nil
	}
	g.started = true
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		g.keep()
	}()
	return nil
}

// Done is closed when the generator has stopped issuing for good, and Err
// then says why: the store records another layout (a *LayoutMismatchError),
// or, at the first claim of a fixed worker id, another server holds a live
// lease on it (a *HeldError) or its watermark is more than LeaseTTL ahead
// of the clock (a *WatermarkAheadError). A server should then not start.
func (g *Generator) Done() <-chan struct{} { return g.stopped }

// Err returns why Done was closed, wrapping a *LayoutMismatchError, a
// *HeldError or a *WatermarkAheadError, and nil while it is not.
func (g *Generator) Err() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.fatal
}

// Close stops issuing and the lease keeper, and releases the lease with a
// watermark at the last timestamp issued, so that another server may claim
// the worker id once its clock has passed that.
func (g *Generator) Close() error {
	g.mu.Lock()
	g.closed = true
	g.broadcastLocked()
	g.mu.Unlock()
	g.cancel()
	g.wg.Wait()
	return nil
}

// Next returns a new ID.
//
// Errors: snowflake_unavailable when no worker id is leased, the lease
// could not be renewed, the clock is more than MaxBackward behind and no
// other worker id can be had within WaitTimeout, the generator is closed
// or has stopped (Done), or ctx ends while Next waits (ctx's error is then
// its cause, for errors.Is).
func (g *Generator) Next(ctx context.Context) (ID, error) {
	if id, ok := g.tryNext(true); ok {
		return id, nil
	}
	var one [1]ID
	ids, err := g.NextN(ctx, 1, one[:0])
	if err != nil {
		return 0, err
	}
	return ids[0], nil
}

// NextN appends n new IDs to dst, ascending. On error the IDs already
// generated are dropped (never issued) and dst is returned unchanged.
//
// Errors are those of Next, plus invalid_count when n is outside
// 1..MaxBatch.
func (g *Generator) NextN(ctx context.Context, n int, dst []ID) ([]ID, error) {
	if n < 1 || n > g.set.MaxBatch {
		return dst, leafd.Errorf(leafd.EInvalidCount, "count %d is out of range: use 1 to %d", n, g.set.MaxBatch)
	}
	out := dst
	var deadline *time.Timer
	defer func() {
		if deadline != nil {
			deadline.Stop()
		}
	}()
	g.mu.Lock()
	leases := g.lease.installs
	for len(out)-len(dst) < n {
		if g.lease.installs != leases {
			// The worker id changed while this batch waited: what it took
			// under the old one may lie above what comes next. Drop it (it
			// was never handed out) so that the batch stays ascending.
			out, leases = out[:len(dst)], g.lease.installs
		}
		id, w, err := g.nextLocked(true)
		if err != nil {
			g.mu.Unlock()
			return dst, err
		}
		if w.zero() {
			out = g.runLocked(n-(len(out)-len(dst))-1, append(out, id))
			continue
		}
		g.mu.Unlock()
		switch {
		case w.spin != 0:
			if !g.set.spin(ctx, w.spin) {
				return dst, g.ended(ctx, "the IDs of this millisecond are used up")
			}
		case w.sleep > 0:
			if !g.set.sleep(ctx, w.sleep) {
				return dst, g.ended(ctx, w.why)
			}
		default:
			if deadline == nil {
				deadline = time.NewTimer(g.set.WaitTimeout)
			}
			select {
			case <-w.ch:
			case <-deadline.C:
				return dst, g.unavailable(w.why + fmt.Sprintf(" (waited %v)", g.set.WaitTimeout))
			case <-ctx.Done():
				return dst, g.ended(ctx, w.why)
			}
		}
		g.mu.Lock()
	}
	g.mu.Unlock()
	return out, nil
}

// tryNext issues one ID if it can do so without waiting, borrowing time
// only if borrow is set.
func (g *Generator) tryNext(borrow bool) (ID, bool) {
	g.mu.Lock()
	id, w, err := g.nextLocked(borrow)
	g.mu.Unlock()
	return id, err == nil && w.zero()
}

// take appends to dst, ascending, up to n IDs it can issue without
// waiting (borrowing only if borrow is set), and stops at the first wait
// or error: a Pool then goes on under another worker id.
func (g *Generator) take(n int, borrow bool, dst []ID) ([]ID, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for start := len(dst); len(dst)-start < n; {
		id, w, err := g.nextLocked(borrow)
		if err != nil {
			return dst, err
		}
		if !w.zero() {
			break
		}
		dst = g.runLocked(n-len(dst)+start-1, append(dst, id))
	}
	return dst, nil
}

// runLocked appends up to n more IDs of the millisecond of the ID just
// issued, while its sequence lasts: what let nextLocked issue that ID holds
// for these too (under g.mu the clock only moved on). Reading the clock once
// per millisecond, not per ID, makes a batch several times faster.
func (g *Generator) runLocked(n int, dst []ID) []ID {
	k := min(int64(n), g.set.seqMask-g.clock.seq)
	for range k {
		g.clock.seq++
		dst = append(dst, g.set.Layout.ID(g.clock.lastMs, g.lease.worker, g.clock.seq))
	}
	g.stats.issued += max(k, 0)
	return dst
}

// wait is what nextLocked asks its caller to do before trying again: spin
// until the clock has left millisecond spin, sleep, or wait on ch for the
// lease keeper; why is what the request waits for.
type wait struct {
	spin  int64
	sleep time.Duration
	ch    <-chan struct{}
	why   string
}

func (w wait) zero() bool { return w.spin == 0 && w.sleep == 0 && w.ch == nil }

// spin waits for the clock to leave millisecond ms, whose sequence is used
// up (a sleep would overshoot), and reports false if ctx ends first.
func (s *settings) spin(ctx context.Context, ms int64) bool {
	for spins := 1; s.Now().UnixMilli() == ms; spins++ {
		if spins%64 == 0 {
			if ctx.Err() != nil {
				return false
			}
			runtime.Gosched()
		}
	}
	return true
}

// sleep waits d, at most MaxBackward, for a clock that went back to catch
// up, and reports false if ctx ends first. An injected Sleep cannot be cut
// short: ctx is then checked before and after it.
func (s *settings) sleep(ctx context.Context, d time.Duration) bool {
	if ctx.Err() != nil {
		return false
	}
	if !s.realSleep {
		s.Sleep(d)
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// nextLocked issues one ID, or says what to wait for, or fails. It takes
// the next millisecond early, within MaxBorrow, only if borrow is set. The
// caller holds g.mu.
func (g *Generator) nextLocked(borrow bool) (ID, wait, error) {
	for {
		if g.closed {
			return 0, wait{}, g.unavailableLocked("the server is shutting down")
		}
		if g.fatal != nil {
			return 0, wait{}, leafd.Wrap(leafd.ESnowflakeUnavailable, g.fatal, "snowflake IDs cannot be issued: the fixed worker id cannot be used")
		}
		if g.lease.worker < 0 {
			g.signal()
			return 0, wait{ch: g.changed, why: "no worker id is leased yet"}, nil
		}
		now := g.set.Now()
		ms := now.UnixMilli()
		// With borrowing, lastMs may lead the clock by up to borrowMs: only
		// a lead beyond that is a clock behind (with borrowMs 0, any lead).
		if behind := g.clock.lag(ms, g.set.borrowMs); behind > 0 {
			if behind <= g.set.backMs {
				return 0, wait{sleep: time.Duration(behind) * time.Millisecond, why: "the clock went back; waiting for it to catch up"}, nil
			}
			if !g.clock.behind {
				g.clock.behind = true
				g.stats.backward++
				g.set.Logger.Warn("snowflake: the clock went back", "behind_ms", behind, "worker_id", g.lease.worker)
			}
			why := fmt.Sprintf("the clock is %d ms behind the last ID issued (snowflake.max_backward is %v)", behind, g.set.MaxBackward)
			if ms <= g.set.Layout.Epoch {
				why = fmt.Sprintf("the clock, %s, is not after snowflake.epoch", formatMs(ms))
			}
			if !g.set.leaseful || g.set.fixed {
				return 0, wait{}, g.unavailableLocked(why + "; waiting for it to catch up")
			}
			g.lease.wantSwitch = true
			g.signal()
			return 0, wait{ch: g.changed, why: why + "; no other worker id could be leased"}, nil
		}
		g.clock.behind = false
		if ms <= g.set.Layout.Epoch || ms > g.set.Layout.Epoch+g.set.Layout.maxTime() {
			// Outside the layout: an ID would be zero, negative or wrapped
			// onto an earlier one. The clock is wrong, or the layout has run
			// out; neither waiting nor another worker id helps.
			g.set.Logger.Error("snowflake: the clock is outside the layout; not issuing", "clock", formatMs(ms),
				"epoch", formatMs(g.set.Layout.Epoch), "layout_end", g.set.Layout.End().Format(time.RFC3339))
			return 0, wait{}, g.unavailableLocked(fmt.Sprintf("the clock, %s, is outside the ID layout (snowflake.epoch to %s)",
				formatMs(ms), g.set.Layout.End().Format(time.RFC3339)))
		}
		if g.lease.lapsed(now, g.set.realClock) {
			g.lease.wantRenew = true
			g.signal()
			return 0, wait{ch: g.changed, why: "the worker id lease could not be renewed"}, nil
		}
		if ms <= g.clock.lastMs {
			if g.clock.seq < g.set.seqMask {
				g.clock.seq++
				g.stats.issued++
				return g.set.Layout.ID(g.clock.lastMs, g.lease.worker, g.clock.seq), wait{}, nil
			}
			// The millisecond lastMs is used up: borrow the next one if it
			// is within MaxBorrow of the clock, within the layout and
			// covered by the recorded watermark; else wait as without
			// borrowing.
			next := g.clock.lastMs + 1
			if !borrow || next > ms+g.set.borrowMs || next > g.set.Layout.Epoch+g.set.Layout.maxTime() {
				return 0, wait{spin: ms}, nil
			}
			if next > g.lease.limitMs {
				g.lease.wantRenew = true
				g.signal()
				return 0, wait{ch: g.changed, why: "the worker id lease could not be renewed"}, nil
			}
			g.clock.lastMs, g.clock.seq = next, g.set.startSeq()
			g.stats.borrow(next - ms)
			return g.set.Layout.ID(next, g.lease.worker, g.clock.seq), wait{}, nil
		}
		g.clock.lastMs, g.clock.seq = ms, g.set.startSeq()
		g.stats.issued++
		return g.set.Layout.ID(ms, g.lease.worker, g.clock.seq), wait{}, nil
	}
}

func (s *settings) startSeq() int64 {
	if !s.RandomStart {
		return 0
	}
	return mrand.Int64N(min(100, s.seqMask+1))
}

func (g *Generator) broadcastLocked() {
	close(g.changed)
	g.changed = make(chan struct{})
	if g.notify != nil {
		g.notify()
	}
}

func (g *Generator) unavailable(why string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.unavailableLocked(why)
}

func (g *Generator) unavailableLocked(why string) error {
	return leafd.Wrap(leafd.ESnowflakeUnavailable, g.lastErr, "snowflake IDs cannot be issued now: "+why+"; retry later")
}

// ended is the error of a request whose ctx ended while it waited for why:
// unavailable, as the segment allocator answers such a request, with ctx's
// error as the cause (and the last lease failure, if any, after it).
func (g *Generator) ended(ctx context.Context, why string) error {
	g.mu.Lock()
	last := g.lastErr
	g.mu.Unlock()
	cause := ctx.Err()
	if last != nil {
		cause = fmt.Errorf("%w; the last lease failure: %w", cause, last)
	}
	return leafd.Wrap(leafd.ESnowflakeUnavailable, cause, "snowflake IDs cannot be issued now: "+why+" (the request ended); retry later")
}

// Ready returns nil when the generator can issue IDs now, and a not_ready
// error saying why otherwise.
func (g *Generator) Ready() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.set.Now()
	switch {
	case g.closed:
		return leafd.Errorf(leafd.ENotReady, "snowflake: the generator is closed")
	case g.fatal != nil:
		return leafd.Errorf(leafd.ENotReady, "snowflake: the fixed worker id cannot be used")
	case g.lease.worker < 0:
		return leafd.Errorf(leafd.ENotReady, "snowflake: no worker id is leased")
	case g.lease.lapsed(now, g.set.realClock):
		return leafd.Errorf(leafd.ENotReady, "snowflake: the worker id lease could not be renewed")
	case now.UnixMilli() <= g.set.Layout.Epoch || now.UnixMilli() > g.set.Layout.Epoch+g.set.Layout.maxTime():
		return leafd.Errorf(leafd.ENotReady, "snowflake: the clock is outside the ID layout")
	case g.clock.lag(now.UnixMilli(), g.set.borrowMs) > g.set.backMs:
		if g.set.leaseful && !g.set.fixed {
			// Probes alone must get the keeper to look for another worker
			// id: a balancer that gates traffic on /readyz sends no request.
			g.lease.wantSwitch = true
			g.signal()
		}
		return leafd.Errorf(leafd.ENotReady, "snowflake: the clock is %d ms behind the last ID issued", g.clock.lag(now.UnixMilli(), g.set.borrowMs))
	}
	return nil
}

// State is a snapshot of the generator, as the dashboard shows it.
type State struct {
	// WorkerID is -1 while no worker id is held; for a Pool, the lowest
	// worker id held.
	WorkerID int64
	// WorkerIDs lists the worker ids held, ascending: one at most for a
	// Generator, up to Pool's workers for a Pool.
	WorkerIDs []int64
	// Source is "lease" or "static".
	Source string
	// LeaseUntil is when the generator stops issuing unless it renews
	// (zero for a fixed worker id without a store).
	LeaseUntil time.Time
	// LastMs is the Unix millisecond of the last ID issued.
	LastMs int64
	// BackwardEvents counts the times the clock was found behind the last
	// timestamp by more than MaxBackward.
	BackwardEvents int64
	// Issued counts IDs; Renewals counts successful lease renewals.
	Issued, Renewals int64
	// MaxBorrow is Settings.MaxBorrow (0: borrowing off). LeadMs is how
	// far the last ID's millisecond is ahead of the clock now (0 when it
	// is not, and always 0 with borrowing off), MaxLeadMs the largest lead
	// a borrow made, BorrowedMs the milliseconds borrowed in all.
	MaxBorrow                     time.Duration
	LeadMs, MaxLeadMs, BorrowedMs int64
	// Err is the last lease failure, nil once the lease is renewed.
	Err error
}

// State returns a snapshot of the generator.
func (g *Generator) State() State {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := State{WorkerID: g.lease.worker, Source: "static", LeaseUntil: g.lease.until, LastMs: g.clock.lastMs,
		BackwardEvents: g.stats.backward, Issued: g.stats.issued, Renewals: g.stats.renewals, Err: g.lastErr,
		MaxBorrow: g.set.MaxBorrow, MaxLeadMs: g.stats.maxLead, BorrowedMs: g.stats.borrowed}
	if g.set.borrowMs > 0 {
		// Only with borrowing on, so that State reads no clock otherwise.
		s.LeadMs = max(0, g.clock.lastMs-g.set.Now().UnixMilli())
	}
	if g.set.leaseful && !g.set.fixed {
		s.Source = "lease"
	}
	if g.lease.worker >= 0 {
		s.WorkerIDs = []int64{g.lease.worker}
	}
	return s
}
