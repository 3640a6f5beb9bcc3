package segment_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/segment"
)

// steppedClock is a server's wall clock: the real one plus an offset that
// a test steps, as ntpd steps a clock (offsets over 128 ms) or an
// operator sets it. Timers, which run on the monotonic clock, do not see
// the steps.
type steppedClock struct{ off atomic.Int64 }

func (c *steppedClock) Now() time.Time { return time.Now().Add(time.Duration(c.off.Load())) }

func (c *steppedClock) set(at time.Time) { c.off.Store(int64(time.Until(at))) }

func (c *steppedClock) step(d time.Duration) { c.off.Add(int64(d)) }

// createDatedTag creates a daily tag "orders" in UTC with step on db.
func createDatedTag(t *testing.T, db *database, step int64) {
	t.Helper()
	if _, err := db.store(t).CreateTag(context.Background(), leafd.Tag{Name: "orders", Step: step, MaxID: 1,
		Format: segment.FormatDated, Period: segment.PeriodDay, Digits: 6}); err != nil {
		t.Fatal(err)
	}
}

// The contract (Dated tags): "In the last minute of a period every request
// reads the server's clock [...] So a number of a period is handed out
// after that period ended by the server's clock only if the server's
// process did not run for most of that minute, or, when the server's clock
// is stepped forward past the period's end, for at most 50 ms after the
// step."
//
// Next (the Leaf route GET /segment/{tag}, gRPC NextSegment with count 1)
// and Handle.Next read no clock on their hot path: they rely on the
// period's timer, whose delay is measured on the monotonic clock when the
// buffer lands. A step of the wall clock forward (ntpd steps any offset
// over 128 ms) therefore delays the end of the old period's numbers on
// this path by the size of the step, while NextN stops within coarseTick.
//
// Both cases run on a real database: a step of 2 h that crosses midnight
// (the old day is served long after the 50 ms the contract allows), and a
// step of 500 ms made a second before midnight (the process runs, its
// clock is right after the step, and yet it hands out the old day's
// numbers after midnight by its own clock).
func TestDatedNextAfterForwardStep(t *testing.T) {
	for _, c := range []struct {
		name         string
		before, step time.Duration // the clock's distance to midnight at the load, the step
		after        time.Duration // how long after midnight (by the stepped clock) Next is asked
		handle       bool
	}{
		{name: "StepOverMidnight", before: 2 * time.Hour, step: 2*time.Hour + 500*time.Millisecond, after: 800 * time.Millisecond},
		{name: "StepOverMidnightHandle", before: 2 * time.Hour, step: 2*time.Hour + 500*time.Millisecond, after: 800 * time.Millisecond, handle: true},
		{name: "StepBeforeMidnight", before: 1500 * time.Millisecond, step: 500 * time.Millisecond, after: 200 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			db := newDatabase(t, defaultDriver())
			createDatedTag(t, db, 1000)
			midnight := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
			clock := &steppedClock{}
			clock.set(midnight.Add(-c.before))
			cfg := fastConfig()
			cfg.Now = clock.Now
			cfg.ClockTolerance = 100 * 365 * 24 * time.Hour // the test's clock is years from the database's
			a := newAllocator(t, db.store(t), cfg)
			ctx := context.Background()
			next := func() int64 {
				t.Helper()
				id, err := a.Next(ctx, "orders")
				if err != nil {
					t.Fatal(err)
				}
				return id
			}
			if c.handle {
				h, err := a.Handle("orders")
				if err != nil {
					t.Fatal(err)
				}
				next = func() int64 {
					t.Helper()
					id, err := h.Next(ctx)
					if err != nil {
						t.Fatal(err)
					}
					return id
				}
			}
			if id := next(); id/1_000_000 != 20261127 {
				t.Fatalf("first number %d, want one of 27 November", id)
			}
			next() // the handle follows the tag after its first, slow, call
			clock.step(c.step)
			target := midnight.Add(c.after)
			time.Sleep(time.Until(target.Add(-time.Duration(clock.off.Load()))))
			now := clock.Now()
			if now.Before(midnight) {
				t.Fatalf("the clock reads %v, before midnight", now)
			}
			if id := next(); id/1_000_000 != 20261128 {
				t.Fatalf("Next handed out %d, a number of 27 November, when the server's clock read %v: %v after midnight, the clock stepped forward by %v",
					id, now, now.Sub(midnight), c.step)
			}
		})
	}
}

// skewedClock is one server's clock: a shared base, which the test moves,
// plus the server's own offset.
type skewedClock struct {
	base *fakeClock
	off  time.Duration
}

func (c skewedClock) Now() time.Time { return c.base.Now().Add(c.off) }

// issuedLease is a range lease as a server answered it, with its clock
// around the request.
type issuedLease struct {
	r             segment.Range
	valid         time.Duration
	before, after time.Time
	server        int
}

// Three servers over one real database whose clocks differ by up to
// 800 ms (within the tolerance) serve a dated tag across midnight, with
// batches (NextN), single IDs (Next) and range leases of every size, some
// carved from the buffers, some taken from the database: no number twice,
// each number dated to a day its server's clock was in during the
// request, and each lease valid no longer than 20 ms before the end of its
// numbers' period by the server's clock, and lying in one period.
func TestDatedMidnightSkewedServersWithLeases(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, db *database) {
		createDatedTag(t, db, 20)
		base := newFakeClock()
		midnight := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
		base.now = midnight.Add(-2 * time.Second)
		offs := []time.Duration{-400 * time.Millisecond, 0, 400 * time.Millisecond}
		var servers []*segment.Allocator
		var clocks []skewedClock
		for _, off := range offs {
			c := skewedClock{base, off}
			cfg := fastConfig()
			cfg.Now = c.Now
			cfg.ClockTolerance = 100 * 365 * 24 * time.Hour // the test's clock is years from the database's
			cfg.MaxStep = 200
			clocks = append(clocks, c)
			servers = append(servers, newAllocator(t, db.store(t), cfg))
		}
		var mu sync.Mutex
		var nums []issuedNumber
		var owner []int
		var leases []issuedLease
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for i := range 9 {
			wg.Add(1)
			go func(k int) {
				defer wg.Done()
				s, c := k%3, clocks[k%3]
				a := servers[s]
				for j := 0; ; j++ {
					select {
					case <-stop:
						return
					default:
					}
					before := c.Now()
					switch k / 3 {
					case 0:
						rs, err := a.NextN(context.Background(), "orders", 1+j%4, nil)
						after := c.Now()
						if err != nil {
							t.Error(err)
							return
						}
						mu.Lock()
						for _, r := range rs {
							for id := r.Start; id < r.End; id++ {
								nums, owner = append(nums, issuedNumber{id, before, after}), append(owner, s)
							}
						}
						mu.Unlock()
					case 1:
						id, err := a.Next(context.Background(), "orders")
						after := c.Now()
						if err != nil {
							t.Error(err)
							return
						}
						mu.Lock()
						nums, owner = append(nums, issuedNumber{id, before, after}), append(owner, s)
						mu.Unlock()
					default:
						size := []int64{1, 3, 7, 40, 300}[j%5]
						r, valid, err := a.RangeLease(context.Background(), "orders", size)
						after := c.Now()
						if err != nil {
							t.Error(err)
							return
						}
						mu.Lock()
						leases = append(leases, issuedLease{r, valid, before, after, s})
						mu.Unlock()
					}
				}
			}(i)
		}
		for range 10 {
			time.Sleep(30 * time.Millisecond)
			base.Advance(500 * time.Millisecond)
		}
		time.Sleep(200 * time.Millisecond)
		close(stop)
		wg.Wait()

		seen := map[int64]string{}
		var newDay int
		check := func(id int64, before, after time.Time, what string) {
			if w, ok := seen[id]; ok {
				t.Fatalf("number %d issued twice: %s and %s", id, w, what)
			}
			seen[id] = what
			day := id / 1_000_000
			if day < dateNumber(before) || day > dateNumber(after) {
				t.Fatalf("%s: number %d dated %d, issued between %v and %v by its server's clock", what, id, day, before, after)
			}
			if day == 20261128 {
				newDay++
			}
		}
		for i, n := range nums {
			check(n.id, n.before, n.after, fmt.Sprintf("ID of server %d", owner[i]))
		}
		for _, l := range leases {
			what := fmt.Sprintf("lease [%d, %d) of server %d valid %v", l.r.Start, l.r.End, l.server, l.valid)
			if l.r.Start/1_000_000 != (l.r.End-1)/1_000_000 {
				t.Fatalf("%s spans two periods", what)
			}
			day := l.r.Start / 1_000_000
			end := midnight
			if day == 20261128 {
				end = midnight.Add(24 * time.Hour)
			}
			if l.valid <= 0 || l.before.Add(l.valid).After(end.Add(-20*time.Millisecond)) {
				t.Fatalf("%s: asked at %v, valid past 20 ms before its period's end %v", what, l.before, end)
			}
			for id := l.r.Start; id < l.r.End; id++ {
				check(id, l.before, l.after, what)
			}
		}
		if newDay == 0 {
			t.Fatalf("no number of the new day among %d numbers and %d leases", len(nums), len(leases))
		}
		t.Logf("%d numbers, %d leases, %d numbers of the new day", len(nums), len(leases), newDay)
	})
}

// A sequential tag that no server ever loaded has no past (no format row,
// no mark), so once its row is deleted by SQL it may be created again in
// another format through POST /api/tags (store.CreateTag). A server that
// read the tag list before (every server does, every segment.tag_refresh)
// still holds the sequential tag until its next refresh, and serves it at
// its next request: Store.Allocate on the new row, its raw counters as
// IDs.
//
// For a dated tag that hands out numbers 1, 2, 3, … that are no date, and
// numbers of a period with no end (served after midnight); for an opaque
// tag it hands out raw counters while the other servers hand out their
// images under the tag's bijection, which land among them: the same ID
// twice.
func TestStaleSequentialServesRecreatedTag(t *testing.T) {
	for _, format := range []string{segment.FormatDated, segment.FormatOpaque} {
		t.Run(format, func(t *testing.T) {
			forEachDatabase(t, func(t *testing.T, db *database) { staleSequential(t, db, format) })
		})
	}
}

func staleSequential(t *testing.T, db *database, format string) {
	ctx := context.Background()
	if _, err := db.store(t).CreateTag(ctx, leafd.Tag{Name: "orders", Step: 1000, MaxID: 1}); err != nil {
		t.Fatal(err)
	}
	cfg := fastConfig()
	cfg.OpaqueKey = []byte("0123456789abcdef0123456789abcdef")
	stale := newAllocator(t, db.store(t), cfg) // read the list with the sequential tag
	db.exec(t, "DELETE FROM leaf_alloc WHERE biz_tag = 'orders'")
	def := leafd.Tag{Name: "orders", Step: 1000, MaxID: 1, Format: format, Digits: 6}
	if format == segment.FormatDated {
		def.Period = segment.PeriodDay
	} else {
		def.KeyFingerprint = segment.KeyFingerprint(cfg.OpaqueKey, "orders")
	}
	if _, err := db.store(t).CreateTag(ctx, def); err != nil {
		t.Fatalf("creating the tag again as %s: %v", format, err)
	}
	fresh := newAllocator(t, db.store(t), cfg)
	ids := func(a *segment.Allocator, n int) []int64 {
		t.Helper()
		var out []int64
		for len(out) < n {
			rs, err := a.NextN(ctx, "orders", 100, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rs {
				for id := r.Start; id < r.End; id += r.Stride {
					out = append(out, id)
				}
			}
		}
		return out
	}
	if format == segment.FormatDated {
		for _, a := range []*segment.Allocator{stale, fresh} {
			before := dateNumber(time.Now().UTC())
			id := ids(a, 1)[0]
			if day := id / 1_000_000; day < before || day > dateNumber(time.Now().UTC()) {
				t.Fatalf("a server handed out %d for the dated tag, not a number of today (%d)", id, before)
			}
		}
		return
	}
	seen := map[int64]bool{}
	for _, id := range ids(fresh, 5000) {
		seen[id] = true
	}
	for _, id := range ids(stale, 5000) {
		if seen[id] {
			t.Fatalf("ID %d of the opaque tag handed out twice: by the server that serves it opaque and by the one that still holds it sequential", id)
		}
		seen[id] = true
	}
}

// A range lease is the first request of the stale server: the range the
// store hands out from the row created again is dropped, and the lease is
// answered as the tag is now, opaque (no ranges), not with raw counters.
func TestStaleSequentialRangeOfRecreatedTag(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, db *database) {
		ctx := context.Background()
		if _, err := db.store(t).CreateTag(ctx, leafd.Tag{Name: "orders", Step: 1000, MaxID: 1}); err != nil {
			t.Fatal(err)
		}
		cfg := fastConfig()
		cfg.OpaqueKey = []byte("0123456789abcdef0123456789abcdef")
		stale := newAllocator(t, db.store(t), cfg)
		db.exec(t, "DELETE FROM leaf_alloc WHERE biz_tag = 'orders'")
		if _, err := db.store(t).CreateTag(ctx, leafd.Tag{Name: "orders", Step: 1000, MaxID: 1, Format: segment.FormatOpaque,
			Digits: 6, KeyFingerprint: segment.KeyFingerprint(cfg.OpaqueKey, "orders")}); err != nil {
			t.Fatal(err)
		}
		r, err := stale.Range(ctx, "orders", 10)
		if code(err) != leafd.ERangeUnsupported {
			t.Fatalf("Range of a tag created again as opaque = %+v, %v; want range_unsupported", r, err)
		}
	})
}
