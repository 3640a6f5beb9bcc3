package segment_test

import (
	"cmp"
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/segment"
)

// windowStore counts the transactions of dated tags (AllocateIn) that a
// real store runs for an allocator.
type windowStore struct {
	segment.Store
	mu    sync.Mutex
	calls int
}

func (s *windowStore) AllocateIn(ctx context.Context, tag string, step int64, within func(time.Time) (segment.Window, error)) (segment.Allocation, error) {
	s.mu.Lock()
	s.calls++
	s.mu.Unlock()
	return s.Store.AllocateIn(ctx, tag, step, within)
}

func (s *windowStore) allocations() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// createDated creates the dated tag "orders" of one day in UTC.
func createDated(t *testing.T, db *database, digits int, step, maxStep int64) {
	t.Helper()
	if _, err := db.store(t).CreateTag(context.Background(), leafd.Tag{Name: "orders", Step: step, MaxID: 1, MaxStep: maxStep,
		Format: segment.FormatDated, Period: segment.PeriodDay, Digits: digits}); err != nil {
		t.Fatal(err)
	}
}

// settled returns the tag's state once no load is in flight: every range
// the store handed the server is then issued or in its buffers.
func settled(t *testing.T, a *segment.Allocator) segment.TagState {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		st, ok := a.TagState("orders")
		if !ok {
			t.Fatal("the tag is not served")
		}
		if !st.Loading {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatal("a load of the tag is still in flight after 5 s")
		}
	}
}

// A range lease of a dated tag larger than its buffers can carve is taken
// from the database and leaves the buffers as they are: the numbers Next
// hands out and the leases' numbers, with what the buffers still hold,
// are every number of the day up to max_id, each once. (A dated tag's
// loads are capped to 1/64 of what the period has left and to its
// max_step, so a buffer of four such leases never comes: making room for
// one would only drain a buffer per lease, skipping its numbers.)
func TestDatedRangeLeaseKeepsBuffers(t *testing.T) {
	cases := []struct {
		name          string
		digits        int
		step, maxStep int64
		lease         int64
		leases, nexts int
	}{
		// 100,000 is far more than a quarter of 999,999/64.
		{name: "6 digits", digits: 6, step: 100, lease: 100_000, leases: 5, nexts: 150},
		{name: "max_step 1", digits: 6, step: 1, maxStep: 1, lease: 10, leases: 20, nexts: 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			forEachDatabase(t, func(t *testing.T, db *database) {
				createDated(t, db, c.digits, c.step, c.maxStep)
				clock := newFakeClock()
				clock.now = time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
				cfg := fastConfig()
				cfg.Now = clock.Now
				cfg.ClockTolerance = 100 * 365 * 24 * time.Hour // the clock is the test's, years from the database's
				s := &windowStore{Store: db.store(t)}
				a := newAllocator(t, s, cfg)
				ctx := context.Background()

				var pieces []segment.Range // issued: each Next's number, each lease
				for range c.leases {
					for range c.nexts {
						id, err := a.Next(ctx, "orders")
						if err != nil {
							t.Fatal(err)
						}
						pieces = append(pieces, segment.Range{Start: id, End: id + 1})
					}
					before := settled(t, a)
					calls := s.allocations()
					r, valid, err := a.RangeLease(ctx, "orders", c.lease)
					if err != nil {
						t.Fatal(err)
					}
					if r.Len() != c.lease || r.Start/1_000_000 != 20261127 || r.End/1_000_000 != 20261127 || valid != 12*time.Hour-20*time.Millisecond {
						t.Fatalf("lease [%d, %d) valid %v, want %d numbers of 2026-11-27 valid until 20 ms before midnight", r.Start, r.End, valid, c.lease)
					}
					pieces = append(pieces, r)
					after := settled(t, a)
					if got := s.allocations() - calls; got != 1 {
						t.Fatalf("the lease ran %d transactions, want its own alone (no load begun for it)", got)
					}
					if before.Buffers != after.Buffers || before.Current != after.Current {
						t.Fatalf("the lease changed the buffers: %+v (current %d), then %+v (current %d)",
							before.Buffers, before.Current, after.Buffers, after.Current)
					}
				}

				st := settled(t, a)
				held := 0
				for _, b := range st.Buffers {
					if b.Ready {
						pieces = append(pieces, segment.Range{Start: b.Next, End: b.End})
						held++
					}
				}
				if held == 0 {
					t.Fatalf("no buffer holds numbers after the leases: %+v", st.Buffers)
				}
				row, err := db.store(t).LookupTag(ctx, "orders")
				if err != nil {
					t.Fatal(err)
				}
				slices.SortFunc(pieces, func(x, y segment.Range) int { return cmp.Compare(x.Start, y.Start) })
				next := int64(20261127_000001)
				for _, p := range pieces {
					if p.Start != next {
						t.Fatalf("numbers [%d, %d) are skipped or issued twice (next piece [%d, %d))", min(next, p.Start), max(next, p.Start), p.Start, p.End)
					}
					next = p.End
				}
				if next != row.MaxID {
					t.Fatalf("the numbers issued and buffered end at %d, max_id is %d: numbers were skipped", next, row.MaxID)
				}
			})
		})
	}
}

// A dated tag's range lease, like a request for a number, is refused from
// memory while the tag's refusal holds: once its day is full, and for a
// second after the server's clock was found too far from the database's.
// The database is asked once, not at the callers' pace, and the clock is
// logged once.
func TestDatedRangeLeaseRefusedFromMemory(t *testing.T) {
	t.Run("period exhausted", func(t *testing.T) {
		forEachDatabase(t, func(t *testing.T, db *database) {
			createDated(t, db, 2, 1, 0)
			clock := newFakeClock()
			clock.now = time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
			cfg := fastConfig()
			cfg.Now = clock.Now
			cfg.ClockTolerance = 100 * 365 * 24 * time.Hour
			s := &windowStore{Store: db.store(t)}
			a := newAllocator(t, s, cfg)
			ctx := context.Background()
			// The first lease loads the buffer of one (2026112701), then
			// takes [02, 92); the second the day's last eight.
			for _, want := range []segment.Range{{Start: 2026112702, End: 2026112792}, {Start: 2026112792, End: 2026112800}} {
				r, _, err := a.RangeLease(ctx, "orders", 90)
				if err != nil || r.Start != want.Start || r.End != want.End {
					t.Fatalf("lease [%d, %d), %v; want [%d, %d)", r.Start, r.End, err, want.Start, want.End)
				}
			}
			if _, _, err := a.RangeLease(ctx, "orders", 90); code(err) != leafd.EPeriodExhausted {
				t.Fatalf("a lease of a full day: %v", err)
			}
			calls := s.allocations()
			for range 5 {
				if _, _, err := a.RangeLease(ctx, "orders", 90); code(err) != leafd.EPeriodExhausted || !strings.Contains(err.Error(), "2026-11-27") {
					t.Fatalf("a lease of a full day, asked again: %v", err)
				}
			}
			if got := s.allocations() - calls; got != 0 {
				t.Fatalf("leases of a full day ran %d transactions, want none", got)
			}
			// The buffer was left as it was: its number is still issued.
			if id, err := a.Next(ctx, "orders"); err != nil || id != 2026112701 {
				t.Fatalf("Next = %d, %v; want the buffered 2026112701", id, err)
			}
		})
	})
	t.Run("clock skew", func(t *testing.T) {
		forEachDatabase(t, func(t *testing.T, db *database) {
			createDated(t, db, 6, 10, 0)
			var mu sync.Mutex
			var frozen time.Time // zero: the real clock, as the database's
			var log syncWriter
			cfg := fastConfig()
			cfg.Logger = slog.New(slog.NewTextHandler(&log, nil))
			cfg.Now = func() time.Time {
				mu.Lock()
				defer mu.Unlock()
				if frozen.IsZero() {
					return time.Now()
				}
				return frozen
			}
			s := &windowStore{Store: db.store(t)}
			a := newAllocator(t, s, cfg)
			ctx := context.Background()
			if _, err := a.Next(ctx, "orders"); err != nil {
				t.Fatal(err)
			}
			settled(t, a)
			// The server's clock now stays an hour behind the database's:
			// its refusal holds (for clockRecheck by its own clock).
			mu.Lock()
			frozen = time.Now().Add(-time.Hour)
			mu.Unlock()
			calls := s.allocations()
			for i := range 6 {
				_, _, err := a.RangeLease(ctx, "orders", 1000)
				if code(err) != leafd.ESegmentUnavailable || !strings.Contains(leafd.ErrorMessage(err), "behind the database's") {
					t.Fatalf("lease %d with the clock an hour off: %v", i, err)
				}
			}
			if got := s.allocations() - calls; got != 1 {
				t.Fatalf("6 leases with the clock off ran %d transactions, want 1", got)
			}
			if n := strings.Count(log.String(), "level=WARN"); n != 1 {
				t.Fatalf("the clock was logged %d times, want once: %q", n, log.String())
			}
		})
	})
}
