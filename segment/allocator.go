// Package segment implements Leaf's segment mode: IDs served from memory out
// of ranges that a Store hands out, with a double buffer per tag so that the
// next range is loaded in the background before the current one runs out.
//
// The steady-state path of Next is lock-free: an atomic add on the current
// buffer's cursor. Locks are taken only to switch buffers, to start a load and
// to wait for one. A request that finds both buffers empty parks on the
// in-flight load until it lands or the request's deadline (Config.WaitTimeout)
// passes; it never spins.
package segment

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leafd/leafd"
)

// Config tunes an Allocator. The zero value of every field means the default
// given in its comment (the defaults of docs/contract.md section 7).
type Config struct {
	// RefillMin and RefillMax bound how long one range should last; the step
	// is resized to stay inside the window. Defaults 15m and 30m.
	RefillMin, RefillMax time.Duration
	// MaxStep caps the dynamic step (a larger table step still wins).
	// Default 1,000,000.
	MaxStep int64
	// PreloadAt is the fraction of the current range whose use starts the
	// load of the next one, in (0, 1). Default 0.1.
	PreloadAt float64
	// TagRefresh is how often the tag list is re-read. Default 60s.
	TagRefresh time.Duration
	// WaitTimeout bounds how long one request waits for a range when both
	// buffers are empty. Default 2s.
	WaitTimeout time.Duration
	// MaxBatch is the largest count NextN accepts. Default 10,000.
	MaxBatch int
	// MaxRange is the largest size Range accepts. Default 1,000,000.
	MaxRange int64
	// RetryMin and RetryMax bound the backoff between attempts when the
	// store fails. Defaults 50ms and 1s: a request parks at most wait_timeout
	// (2s), so a load must retry well within that once the store is back.
	RetryMin, RetryMax time.Duration
	// LoadTimeout bounds one attempt to load a range, so that a database
	// that hangs (a row lock held, packets silently dropped) is retried like
	// one that fails. Default 10s.
	LoadTimeout time.Duration
	// ClockTolerance is how far this server's clock may differ from the
	// database's for it to load ranges of dated tags (dated.go).
	// Default DefaultClockTolerance.
	ClockTolerance time.Duration
	// OpaqueKey is segment.opaque_key, the master key of opaque tags (see
	// opaque.go); nil refuses every opaque tag.
	OpaqueKey []byte
	// MissLookups bounds how many lookups per second, over all names, the
	// allocator makes in the store for tags that are not in the list it
	// last read (a tag created elsewhere since). Default 5.
	MissLookups int
	// MissTTL is how long a name the store did not have is answered
	// unknown_tag from memory before it is looked up again. Default 1s.
	MissTTL time.Duration
	// Now returns the current time; it measures how long ranges last.
	// Default time.Now.
	Now func() time.Time
	// Logger receives load failures and tag changes. Default slog.Default().
	Logger *slog.Logger
	// OnLoad, when set, is called after every attempt to load a range, with
	// the step asked for, how long the store took and the attempt's error
	// (nil on success). It runs on the load goroutine, never on the path of
	// Next, so it may take a lock or update a metric; it must not block.
	OnLoad func(tag string, step int64, took time.Duration, err error)
}

// The defaults of Config, which are those of the segment.* keys.
const (
	DefaultRefillMin, DefaultRefillMax, DefaultTagRefresh, DefaultWaitTimeout = 15 * time.Minute, 30 * time.Minute, time.Minute, 2 * time.Second
	DefaultMaxStep, DefaultMaxBatch, DefaultMaxRange, DefaultPreloadAt        = 1_000_000, 10_000, 1_000_000, 0.1
)

func (c *Config) setDefaults() error {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.RefillMin, DefaultRefillMin)
	def(&c.RefillMax, DefaultRefillMax)
	def(&c.TagRefresh, DefaultTagRefresh)
	def(&c.WaitTimeout, DefaultWaitTimeout)
	def(&c.RetryMin, 50*time.Millisecond)
	def(&c.RetryMax, time.Second)
	def(&c.LoadTimeout, 10*time.Second)
	def(&c.MissTTL, time.Second)
	def(&c.ClockTolerance, DefaultClockTolerance)
	if c.MissLookups == 0 {
		c.MissLookups = 5
	}
	if c.MaxStep == 0 {
		c.MaxStep = DefaultMaxStep
	}
	if c.PreloadAt == 0 {
		c.PreloadAt = DefaultPreloadAt
	}
	if c.MaxBatch == 0 {
		c.MaxBatch = DefaultMaxBatch
	}
	if c.MaxRange == 0 {
		c.MaxRange = DefaultMaxRange
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	switch {
	case c.RefillMin < 0 || c.RefillMax <= c.RefillMin:
		return fmt.Errorf("segment: refill window %v..%v is empty", c.RefillMin, c.RefillMax)
	case c.MaxStep < 1:
		return fmt.Errorf("segment: max step %d is below 1", c.MaxStep)
	case c.PreloadAt < 0 || c.PreloadAt >= 1:
		return fmt.Errorf("segment: preload fraction %v is outside [0, 1)", c.PreloadAt)
	case c.MaxBatch < 1:
		return fmt.Errorf("segment: max batch %d is below 1", c.MaxBatch)
	case c.MaxRange < 1:
		return fmt.Errorf("segment: max range %d is below 1", c.MaxRange)
	case c.MissLookups < 1:
		return fmt.Errorf("segment: miss lookups %d is below 1", c.MissLookups)
	case c.TagRefresh < 0 || c.WaitTimeout < 0 || c.RetryMin <= 0 || c.RetryMax < c.RetryMin || c.LoadTimeout < 0 || c.MissTTL < 0 || c.ClockTolerance < 0:
		return errors.New("segment: durations must be positive")
	}
	return nil
}

// Allocator hands out segment IDs for every tag of a Store. It is safe for
// concurrent use. Create it with New, call Start, and Close it when done.
type Allocator struct {
	store  Store
	cfg    Config
	policy stepPolicy
	log    *slog.Logger

	tags      atomic.Pointer[map[string]*tag]
	refreshMu sync.Mutex // serialises changes of tags
	listAsked time.Time  // when the tag list in tags was asked for; guarded by refreshMu
	finder    *finder
	// pingMu guards the last ping of the store that Ready made, which
	// is reused for a second: probes may come often.
	pingMu   sync.Mutex
	pingAt   time.Time
	pingErr  error
	listed   chan struct{}
	listOnce sync.Once
	// issued holds the end of the highest range loaded per tag name, so
	// that a rewound tag is refused even by a store without a mark.
	issued issuedMarks
	// wall is the coarse clock of dated tags: the server's clock in Unix
	// ms, read every coarseTick once a dated tag is loaded (period.go).
	wall       atomic.Int64
	coarseOnce sync.Once

	ctx    context.Context
	cancel context.CancelFunc
	// life guards closed and wg.Add against Close's wg.Wait.
	life   sync.RWMutex
	closed bool
	wg     sync.WaitGroup
}

// New returns an Allocator over store. It returns an error if cfg holds an
// invalid value. It reads nothing yet: Start does.
func New(store Store, cfg Config) (*Allocator, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	a := &Allocator{
		store:  store,
		cfg:    cfg,
		policy: stepPolicy{refillMin: cfg.RefillMin, refillMax: cfg.RefillMax, maxStep: cfg.MaxStep},
		log:    cfg.Logger,
		listed: make(chan struct{}),
		finder: newFinder(cfg.MissLookups, cfg.MissTTL),
		ctx:    ctx,
		cancel: cancel,
	}
	empty := map[string]*tag{}
	a.tags.Store(&empty)
	a.readWall()
	return a, nil
}

// Start begins reading the tag list: at once, then every TagRefresh. While
// the store cannot be reached it retries with backoff; requests meanwhile
// wait up to WaitTimeout and then fail with segment_unavailable.
func (a *Allocator) Start() {
	a.goroutine(a.refreshLoop)
}

// Close stops the background work and waits for it. IDs left in the buffers
// are dropped: they are never issued, by this server or any other.
func (a *Allocator) Close() error {
	a.life.Lock()
	a.closed = true
	a.life.Unlock()
	a.cancel()
	a.wg.Wait()
	return nil
}

// goroutine runs f in a goroutine that Close waits for, unless the
// allocator is closed. It reports whether f was started.
func (a *Allocator) goroutine(f func()) bool {
	a.life.RLock()
	defer a.life.RUnlock()
	if a.closed {
		return false
	}
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		f()
	}()
	return true
}

// MaxBatch returns the largest count NextN accepts.
func (a *Allocator) MaxBatch() int { return a.cfg.MaxBatch }

// MaxRange returns the largest size Range accepts.
func (a *Allocator) MaxRange() int64 { return a.cfg.MaxRange }

// RefillWindow returns how long one range should last, at least and at
// most: the window the step is resized to stay inside.
func (a *Allocator) RefillWindow() (lo, hi time.Duration) {
	return a.cfg.RefillMin, a.cfg.RefillMax
}

// Next returns the next ID of tag.
//
// Errors (codes): unknown_tag when the tag is not in the table;
// segment_unavailable when both buffers are empty and no range could be
// loaded within WaitTimeout (or ctx ended first); tag_exhausted when the tag's
// next range would pass 2^63-1; tag_rewound when it would start at or below
// an ID already issued (the store's high-water mark, or this allocator's).
func (a *Allocator) Next(ctx context.Context, name string) (int64, error) {
	t := (*a.tags.Load())[name]
	if id, ok, preload := t.takeOne(); ok {
		if preload != nil {
			a.preload(t, preload)
		}
		if t.opaque != nil {
			return t.opaque.id(t.name, id)
		}
		return id, nil
	}
	return a.nextSlow(ctx, name)
}

// nextSlow is Next when the current buffer is empty or absent: it switches
// buffers or waits for a load, as NextN does.
func (a *Allocator) nextSlow(ctx context.Context, name string) (int64, error) {
	var one [1]Range
	rs, err := a.NextN(ctx, name, 1, one[:0])
	if err != nil {
		return 0, err
	}
	return rs[0].Start, nil
}

// NextN reserves n IDs of tag and appends them to dst as ascending,
// non-overlapping ranges, with the stride of a strided store; for an
// opaque tag each ID is a range of its own, in no order. On error the IDs
// reserved are dropped (never issued) and dst is returned unchanged.
//
// Errors are those of Next, plus invalid_count when n is outside
// 1..MaxBatch.
func (a *Allocator) NextN(ctx context.Context, name string, n int, dst []Range) ([]Range, error) {
	if n < 1 || n > a.cfg.MaxBatch {
		return dst, leafd.Errorf(leafd.EInvalidCount, "count %d is out of range: use 1 to %d", n, a.cfg.MaxBatch)
	}
	t, err := a.lookup(ctx, name)
	if err != nil {
		return dst, err
	}
	var w refillWait
	defer w.stop()
	out, remaining := dst, int64(n)
	var until time.Time // the end of the period of the IDs taken (dated tags)
	replaced := 0
	for remaining > 0 {
		if b := t.bufs.cur.Load(); b != nil && (!b.watched(a.wall.Load()) || t.periodOpen(b, a.cfg.Now)) {
			if t.dated != nil && !b.until.Equal(until) {
				// A batch never spans two periods: what it took of the
				// last one is given up.
				out, remaining, until = out[:len(dst)], int64(n), b.until
			}
			if r, off, got := b.take(remaining); got != 0 {
				out = append(out, r)
				remaining -= got
				if off+got > b.preloadAt && !b.preloaded.Load() {
					a.preload(t, b)
				}
				continue
			}
		}
		// The current buffer is used up: switch to the next, or wait for
		// the load of one.
		if err := a.awaitRefill(ctx, t, &w); err != nil {
			nt := a.replacement(t)
			if nt == nil || replaced == maxReplaced {
				return dst, err
			}
			// Served anew under its name (recreated): what was taken of
			// the old one is dropped, the batch begins again, with a
			// wait of its own.
			t, out, remaining, until = nt, dst, int64(n), time.Time{}
			w.stop()
			w = refillWait{}
			replaced++
		}
	}
	if t.opaque != nil {
		// One range per ID, mapped: an opaque batch is not ascending.
		out, err = t.opaque.mapRanges(t.name, dst, out[len(dst):])
		if err != nil {
			return dst, t.failed(err)
		}
	}
	return out, nil
}

// preload starts the load of b's successor, once per buffer.
func (a *Allocator) preload(t *tag, b *buffer) {
	if ls, ok := t.beginPreload(b, a.cfg.Now, a.policy); ok {
		a.startLoad(t, ls)
	}
}

// startLoad runs a load that t began on a goroutine of its own; when the
// allocator is closed and none can start, it tells t so.
func (a *Allocator) startLoad(t *tag, ls loadStart) {
	if !a.goroutine(func() { a.load(t, ls) }) {
		t.loadNotStarted()
	}
}

// load asks the store for a range of step IDs, retrying with backoff while
// the store fails, until it succeeds, fails for good, the tag is removed or
// the allocator closes.
func (a *Allocator) load(t *tag, ls loadStart) {
	step := ls.step
	backoff := a.cfg.RetryMin
	if t.refused != nil {
		// Refused on this server: no range is taken for it.
		t.loadFailed(t.refused, true)
		return
	}
	if t.dated != nil {
		a.startCoarseClock()
	}
	spent := 0
	for attempt := 1; ; attempt++ {
		if t.dated != nil {
			a.readWall() // the period's range lands with a fresh coarse clock
		}
		alloc, until, took, err := a.allocate(a.ctx, t, step, false)
		if t.dated != nil {
			var wait time.Duration
			if err, wait = a.periodOutcome(t, until, err); wait > 0 {
				if !a.sleep(wait) {
					t.loadFailed(a.ctx.Err(), true)
					return
				}
				attempt--
				continue
			}
		}
		if a.cfg.OnLoad != nil && a.ctx.Err() == nil {
			a.cfg.OnLoad(t.name, step, took, err)
		}
		if err == nil {
			stride := alloc.Stride
			alloc, err = t.fitDomain(alloc)
			if errors.Is(err, errSlotSpent) && int64(spent) < stride {
				spent++ // the store's next slot may still hold IDs: ask it at once
				continue
			}
		}
		if err == nil {
			b := newBuffer(alloc, a.cfg.PreloadAt)
			if t.dated != nil {
				b.setPeriod(until)
			}
			recovered, done := t.loaded(b, alloc.TableStep, ls, a.cfg.Now)
			if !done {
				// The period closed meanwhile: load one of the next.
				attempt--
				continue
			}
			if recovered {
				a.log.Info("segment: range load recovered", "tag", t.name, "start", alloc.Start)
			}
			return
		}
		final := a.ctx.Err() != nil || finalCode(err)
		if leafd.ErrorCode(err) == leafd.ETagRewound && t.rewoundFirst(err) {
			// Loud: IDs would have been issued twice, and only an operator
			// can repair it. Once per tag until a load succeeds.
			a.log.Error("segment: tag rewound; refusing to issue its IDs again", "tag", t.name, "step", step, "err", err)
		}
		if !t.loadFailed(err, final) || final {
			return
		}
		if attempt == 1 || attempt%20 == 0 {
			a.log.Warn("segment: range load failed; retrying", "tag", t.name, "step", step, "attempt", attempt, "err", err)
		}
		// Full jitter keeps many servers from retrying in lockstep.
		if !a.sleep(backoff/2 + rand.N(backoff/2+1)) {
			t.loadFailed(a.ctx.Err(), true)
			return
		}
		backoff = min(2*backoff, a.cfg.RetryMax)
	}
}

// sleep waits d, and reports false if the allocator closed meanwhile.
func (a *Allocator) sleep(d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-a.ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

// replacement returns the tag served under t's name in t's place once t
// was removed, nil when none is. A request whose tag is replaced while it
// waits (at most maxReplaced times) goes on with the new one.
func (a *Allocator) replacement(t *tag) *tag {
	if !t.isRemoved() {
		return nil
	}
	// adopt removes t, then publishes its successor, under refreshMu.
	a.refreshMu.Lock()
	defer a.refreshMu.Unlock()
	if nt := (*a.tags.Load())[t.name]; nt != t && nt != nil && !nt.isRemoved() {
		return nt
	}
	return nil
}

const maxReplaced = 2

// lookup finds a tag. Before the tag list was first read it waits for that,
// up to WaitTimeout. A tag that is not in the list is looked up in the
// store (see finder) and served from then on if it is there.
func (a *Allocator) lookup(ctx context.Context, name string) (*tag, error) {
	if t := (*a.tags.Load())[name]; t != nil {
		return t, nil
	}
	if err := leafd.ValidateTag(name); err != nil {
		return nil, err
	}
	select {
	case <-a.listed:
	default:
		timer := time.NewTimer(a.cfg.WaitTimeout)
		defer timer.Stop()
		select {
		case <-a.listed:
		case <-timer.C:
			return nil, leafd.Errorf(leafd.ESegmentUnavailable, "the tag list could not be read from the store yet; retry later")
		case <-ctx.Done():
			return nil, leafd.Errorf(leafd.ESegmentUnavailable, "the request ended while waiting for the tag list")
		}
	}
	if t := (*a.tags.Load())[name]; t != nil {
		return t, nil
	}
	return a.find(ctx, name)
}

// unknownTag is the error for a tag the store was found not to have.
func unknownTag(name string) error { return leafd.UnknownTagError(name) }

func (a *Allocator) unavailable(t *tag, why string) error {
	msg := fmt.Sprintf("tag %q has no IDs buffered and %s; retry later", t.name, why)
	return leafd.Wrap(leafd.ESegmentUnavailable, t.lastErr(), msg)
}

// Refresh reads the tag list from the store now: new tags are served from
// then on, deleted ones stop and their buffered IDs are dropped. A list with
// no tags at all, while some were served, is ignored with a warning (as Leaf
// does), since it is far more likely a broken database than a deliberate
// deletion of every tag. Of two refreshes at once, the list asked for last
// is the one served, whichever is read first.
func (a *Allocator) Refresh(ctx context.Context) error {
	asked := time.Now()
	rows, err := a.store.ListTags(ctx)
	if err != nil {
		return err
	}
	a.refreshMu.Lock()
	defer a.refreshMu.Unlock()
	if asked.Before(a.listAsked) {
		return nil // a list asked for after this one was applied first: it is newer
	}
	old := *a.tags.Load()
	if len(rows) == 0 && len(old) > 0 {
		a.log.Warn("segment: the store lists no tags; keeping the ones served", "tags", len(old))
		return nil
	}
	a.listAsked = asked
	m := make(map[string]*tag, len(rows))
	var added, deleted []string
	for _, row := range rows {
		t := old[row.Name]
		switch {
		case t == nil:
			t = a.newTag(row, time.Time{})
			added = append(added, row.Name)
		case t.spec != specOf(row) && t.adopted.After(asked):
			// Adopted after the list was read (recreated, Upsert): the
			// row read is older than the tag served.
		case t.spec != specOf(row):
			// Its format changed (created again as another format): served
			// anew, its buffers dropped.
			t.remove()
			t = a.newTag(row, time.Time{})
		default:
			t.setRow(row)
		}
		m[row.Name] = t
	}
	for name, t := range old {
		if m[name] == nil && t.adopted.After(asked) && !t.isRemoved() {
			m[name] = t // created through this server after the list was read
		} else if m[name] == nil {
			t.remove()
			deleted = append(deleted, name)
		}
	}
	a.tags.Store(&m)
	if !a.Listed() {
		a.log.Info("segment: tag list read", "tags", len(m))
	} else {
		a.logTags("segment: serving new tag", added)
		a.logTags("segment: tag deleted from the store; no longer served", deleted)
	}
	a.listOnce.Do(func() { close(a.listed) })
	return nil
}

// logTagsMax is how many tags a refresh names one by one in the log; past
// that it logs how many more there were, so that a bulk import of
// thousands of tags is a few lines, not thousands.
const logTagsMax = 10

func (a *Allocator) logTags(msg string, names []string) {
	for i, name := range names {
		if i == logTagsMax {
			a.log.Info(msg, "more_tags", len(names)-i)
			return
		}
		a.log.Info(msg, "tag", name)
	}
}

// Upsert makes the allocator serve tag t at once, with its step as the
// table step it last read (and its format), without waiting for the next
// refresh: the server through which a tag is created or changed serves the
// change at once.
// Other servers serve a new tag at its first request (see find) and see a
// changed step at their next refresh.
func (a *Allocator) Upsert(t leafd.Tag) {
	a.finder.forget(t.Name)
	a.adopt(t, true)
}

// adopt serves the tag of row, with its step as the table step last read,
// from now on, and returns it. A tag served under another format is
// replaced. A tag that is served already keeps its table step
// unless update is set. A tag adopted after a Refresh read its list is kept
// by that Refresh.
func (a *Allocator) adopt(row leafd.Tag, update bool) *tag {
	a.refreshMu.Lock()
	defer a.refreshMu.Unlock()
	name, tableStep := row.Name, row.Step
	old := *a.tags.Load()
	if t := old[name]; t != nil && t.spec == specOf(row) {
		if update {
			t.setRow(row)
		}
		return t
	} else if t != nil {
		t.remove()
	}
	t := a.newTag(row, time.Now())
	m := make(map[string]*tag, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	m[name] = t
	a.tags.Store(&m)
	a.log.Info("segment: serving new tag", "tag", name, "step", tableStep)
	return t
}

// newTag returns a tag of row, mapping its IDs when it is opaque.
func (a *Allocator) newTag(row leafd.Tag, adopted time.Time) *tag {
	t := newTag(row.Name, row.Step, adopted)
	t.spec = specOf(row)
	t.per.top = max(row.MaxID-1, 0)
	switch t.spec.format {
	case FormatOpaque:
		t.opaque = newOpaque(row.Name, t.spec, a.cfg.OpaqueKey)
		t.refused = t.opaque.err
		t.dom = &domain{n: OpaqueDomain(t.spec.digits), top: max(row.MaxID-1, 0), stride: 1}
	case FormatDated:
		var err error
		if t.dated, err = newDated(row); err != nil {
			t.refused = leafd.Wrap(leafd.ETagConflict, err, fmt.Sprintf(
				"tag %q is dated, and its record cannot be served: %s", row.Name, leafd.ErrorMessage(err)))
		}
	}
	return t
}

func (a *Allocator) refreshLoop() {
	backoff := a.cfg.RetryMin
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-a.ctx.Done():
			return
		case <-timer.C:
		}
		wait := a.cfg.TagRefresh
		if err := a.Refresh(a.ctx); err != nil {
			a.log.Warn("segment: reading the tag list failed", "err", err)
			if !a.Listed() {
				wait, backoff = backoff, min(2*backoff, a.cfg.RetryMax)
			}
		}
		timer.Reset(wait)
	}
}

// Listed reports whether the tag list has been read at least once.
func (a *Allocator) Listed() bool {
	select {
	case <-a.listed:
		return true
	default:
		return false
	}
}

// Ready returns nil when the allocator can serve, and a not_ready error
// saying why otherwise: before the tag list was first read, or while a tag
// asked for is dry (empty, its load failing or in flight for longer than
// WaitTimeout) and the store does not answer a ping. A tag dry for a reason
// of its own (a row lock, deleted, exhausted, rewound) is reported on its
// own (State, the log): the other tags serve.
func (a *Allocator) Ready() error {
	if !a.Listed() {
		return leafd.Errorf(leafd.ENotReady, "segment: the tag list has not been read from the store yet")
	}
	dry := a.dryTag()
	if dry == "" {
		return nil
	}
	err := a.ping()
	if err == nil {
		return nil
	}
	return leafd.Errorf(leafd.ENotReady, "segment: tag %q has no IDs buffered and the store does not answer: %s", dry, leafd.ErrorMessage(err))
}

// ping returns the outcome of pinging the store, at most a second old: one
// caller pings, with a timeout of a second, while the others wait for it.
func (a *Allocator) ping() error {
	a.pingMu.Lock()
	defer a.pingMu.Unlock()
	if !a.pingAt.IsZero() && time.Since(a.pingAt) < time.Second {
		return a.pingErr
	}
	ctx, cancel := context.WithTimeout(a.ctx, time.Second)
	a.pingErr = a.store.Ping(ctx)
	cancel()
	a.pingAt = time.Now()
	return a.pingErr
}

// dryTag returns the name of a tag that was asked for and has no IDs,
// while its load fails or has been in flight for longer than WaitTimeout;
// "" if there is none. A tag that is exhausted, rewound, or gone from the
// table, does not count: no server could serve it.
func (a *Allocator) dryTag() string {
	for _, t := range *a.tags.Load() {
		if t.dry(a.cfg.WaitTimeout) {
			return t.name
		}
	}
	return ""
}

// finalCode reports whether err ends a load for good: retrying cannot help
// (a dated tag's server with a clock too far off retries at a request a
// second later: refuse).
func finalCode(err error) bool {
	if errors.Is(err, errClockSkew) {
		return true
	}
	switch leafd.ErrorCode(err) {
	case leafd.EUnknownTag, leafd.ETagExhausted, leafd.ETagRewound, leafd.EOpaqueKeyMismatch, leafd.EPeriodExhausted,
		leafd.ERangeUnsupported: // a dated tag on a sharded store
		return true
	}
	return false
}

// BufferState describes one buffer of a tag. Its IDs are Start,
// Start+Stride, … below End (End is exclusive); Next is the ID the buffer
// would give next, End once it is used up. A buffer that is neither Ready
// nor Loading is empty: used up, or never loaded. It holds
// (End-Start)/Stride IDs, of which (Next-Start)/Stride are used.
type BufferState struct {
	Start, End, Next int64
	// Stride is the distance between consecutive IDs: 1 for a contiguous
	// range, more for a strided one (Allocation.Stride), 0 for a buffer
	// never loaded.
	Stride int64
	Ready  bool
	// Loading is set on the buffer the range in flight will fill.
	Loading bool
}

// TagState is a snapshot of one tag, as the dashboard shows it.
type TagState struct {
	Tag string
	// Step is the number of IDs of the last range loaded (for a strided
	// range less than its width End-Start); MinStep the table step.
	Step, MinStep int64
	// Current is the index in Buffers of the buffer IDs come from.
	Current int
	Loading bool
	Buffers [2]BufferState
	// LastLoad is when the last range load began; LastPeriod the time
	// between the last two loads.
	LastLoad   time.Time
	LastPeriod time.Duration
	// Rate is IDs per second since the last load.
	Rate float64
	// Issued counts the IDs handed out since the tag was first served.
	Issued int64
	// Loads counts ranges loaded; Waits counts requests that had to wait.
	Loads, Waits int64
	// Errors counts requests for the tag that failed (segment_unavailable,
	// tag_exhausted, or the tag deleted meanwhile); LoadErrors counts failed
	// attempts to load a range, each retry included.
	Errors, LoadErrors int64
	// Domain is the largest ID of an opaque tag (its domain is 1 to
	// Domain), 0 for a sequential tag. DomainUsed counts the IDs of the
	// domain that are gone, as far as this server knows: those below the
	// last ID of its last range (or the row's max_id before it loaded one),
	// handed out by any server or given up by one that stopped, less
	// DomainReserved, the IDs in this server's buffers not issued yet.
	Domain, DomainUsed, DomainReserved int64
	// Period is the period of a dated tag now, as people write it
	// (2026-11-27, 2026-11 or 2026), "" for other tags; PeriodEnd is when
	// it ends. PeriodCapacity is the numbers a period holds, PeriodUsed
	// those of this period gone as far as this server knows (handed to any
	// server, less the ones in its own buffers not issued yet).
	Period                     string
	PeriodEnd                  time.Time
	PeriodCapacity, PeriodUsed int64
	// Err is the last load failure, nil once a load succeeded.
	Err error
	// Status sums the tag up, for filtering and sorting many tags.
	Status Status
}

// Status sums up what a tag is doing, so that a dashboard or a script can
// put the tags in trouble first among thousands.
type Status string

// The statuses of a tag, from the most to the least urgent.
const (
	// StatusFailing: the last attempt to load a range failed (the load
	// retries unless the failure is final: unknown tag, exhausted, rewound).
	StatusFailing Status = "failing"
	// StatusWaiting: requests found both buffers empty and wait for the
	// load in flight.
	StatusWaiting Status = "waiting"
	// StatusLoading: a range load is in flight while IDs are still served.
	StatusLoading Status = "loading"
	// StatusServing: IDs are buffered and nothing is in flight.
	StatusServing Status = "serving"
	// StatusIdle: nothing buffered and nothing in flight: the tag was not
	// asked for since the server started, or not since its IDs ran out.
	StatusIdle Status = "idle"
)

// Statuses lists every Status, most urgent first.
var Statuses = []Status{StatusFailing, StatusWaiting, StatusLoading, StatusServing, StatusIdle}

// State returns a snapshot of every tag, sorted by name.
func (a *Allocator) State() []TagState {
	tags := *a.tags.Load()
	out := make([]TagState, 0, len(tags))
	now := a.cfg.Now()
	for _, t := range tags {
		out = append(out, t.state(now))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Tag < out[j].Tag })
	return out
}

// TagState returns a snapshot of one tag and whether it is served.
func (a *Allocator) TagState(name string) (TagState, bool) {
	t := (*a.tags.Load())[name]
	if t == nil {
		return TagState{}, false
	}
	return t.state(a.cfg.Now()), true
}
