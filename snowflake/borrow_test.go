package snowflake_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/snowflake"
)

// Borrowing (Settings.MaxBorrow): when the sequence of a millisecond is
// used up, the generator may take the next millisecond before the clock
// reaches it, at most MaxBorrow ahead of the clock and never past the
// recorded watermark.

// burst is a layout with a 4-bit sequence (16 IDs a millisecond), so that
// any loop outruns the clock, and room for leased worker ids.
var burst = snowflake.Layout{Epoch: snowflake.DefaultEpoch, TimeBits: 49, WorkerBits: 10, SequenceBits: 4}

// readClock is a stepClock that remembers its last reading: with a fixed
// worker id and no store, only requests read the clock, and the last
// reading before an ID is returned is the one that issued it.
type readClock struct {
	*stepClock
	last atomic.Int64
}

func (c *readClock) Now() time.Time {
	t := c.stepClock.Now()
	c.last.Store(t.UnixMilli())
	return t
}

// Every ID's millisecond is at most MaxBorrow ahead of the clock reading
// that issued it; a burst reaches that bound and no further; with
// MaxBorrow 0 no ID is ahead of its clock and nothing is borrowed.
func TestBorrowBounded(t *testing.T) {
	for _, borrow := range []time.Duration{0, time.Millisecond, 5 * time.Millisecond} {
		t.Run(borrow.String(), func(t *testing.T) {
			clock := &readClock{stepClock: newStepClock(time.Microsecond)}
			g := newGenerator(t, snowflake.Settings{Layout: small, WorkerID: 1, MaxBorrow: borrow, Now: clock.Now, Sleep: clock.Sleep})
			bMs := borrow.Milliseconds()
			var prev snowflake.ID
			maxLead := int64(-1)
			for i := range 3000 {
				id := mustNext(t, g)
				lead := small.Decode(id).UnixMs - clock.last.Load()
				if lead > bMs {
					t.Fatalf("ID %d is %d ms ahead of the clock that issued it, max_borrow %v", i, lead, borrow)
				}
				if id <= prev {
					t.Fatalf("ID %d: %d after %d, not increasing", i, id, prev)
				}
				prev, maxLead = id, max(maxLead, lead)
			}
			// Batches, under the same bound.
			for range 20 {
				ids, err := g.NextN(context.Background(), 100, nil)
				if err != nil {
					t.Fatal(err)
				}
				for i, id := range ids {
					// The clock only moves forward here: the last reading is
					// at or after the one that issued each ID.
					if lead := small.Decode(id).UnixMs - clock.last.Load(); lead > bMs {
						t.Fatalf("batch ID %d is %d ms ahead of the clock, max_borrow %v", i, lead, borrow)
					}
					if id <= prev {
						t.Fatalf("batch ID %d: %d after %d, not increasing", i, id, prev)
					}
					prev = id
				}
			}
			if maxLead != bMs {
				t.Fatalf("largest lead %d ms, want the bound %d ms: 16 IDs a millisecond outrun a clock read every 1µs", maxLead, bMs)
			}
			s := g.State()
			if s.MaxLeadMs != bMs || s.MaxBorrow != borrow || s.LeadMs > bMs {
				t.Fatalf("State: max lead %d ms, lead %d ms, max_borrow %v; want max lead %d, lead at most that, max_borrow %v",
					s.MaxLeadMs, s.LeadMs, s.MaxBorrow, bMs, borrow)
			}
			if (s.BorrowedMs > 0) != (borrow > 0) {
				t.Fatalf("State: %d ms borrowed with max_borrow %v", s.BorrowedMs, borrow)
			}
			if borrow == 0 && s.LeadMs != 0 {
				t.Fatalf("State: lead %d ms with borrowing off", s.LeadMs)
			}
		})
	}
}

// A clock that steps back after a burst: the borrowed lead is not taken
// for a clock behind, a step within max_backward beyond it is waited out,
// and a larger one is refused with a fixed worker id (the contract's rule,
// measured from the borrowed lead).
func TestBorrowThenSmallAndLargeRollback(t *testing.T) {
	clock := newStepClock(time.Microsecond)
	g := newGenerator(t, snowflake.Settings{Layout: small, WorkerID: 1, MaxBorrow: 5 * time.Millisecond,
		MaxBackward: 5 * time.Millisecond, Now: clock.Now, Sleep: clock.Sleep})
	ids, err := g.NextN(context.Background(), 16*20, nil)
	if err != nil {
		t.Fatal(err)
	}
	before := ids[len(ids)-1]
	if s := g.State(); s.LeadMs < 4 {
		t.Fatalf("after a burst the lead is %d ms, want about 5", s.LeadMs)
	}
	clock.Add(-3 * time.Millisecond)
	after := mustNext(t, g)
	if after <= before {
		t.Fatalf("after a 3 ms rollback: %d after %d", after, before)
	}
	if len(clock.slept) != 1 || clock.slept[0] > 3*time.Millisecond {
		t.Fatalf("slept %v, want one wait of at most 3ms (the step beyond the lead)", clock.slept)
	}
	if s := g.State(); s.BackwardEvents != 0 {
		t.Fatalf("a rollback within max_backward beyond the lead counted %d backward events", s.BackwardEvents)
	}
	clock.Add(-time.Second)
	_, err = g.Next(context.Background())
	wantCode(t, err, leafd.ESnowflakeUnavailable)
	if s := g.State(); s.BackwardEvents != 1 {
		t.Fatalf("BackwardEvents = %d, want 1", s.BackwardEvents)
	}
	clock.Add(time.Second)
	if last := mustNext(t, g); last <= after {
		t.Fatalf("after the clock caught up: %d after %d", last, after)
	}
}

// committed is a LeaseStore that remembers the largest watermark it has
// committed (claimed or renewed), once the store call has returned.
type committed struct {
	*faultyLeases
	wm atomic.Int64
}

func (c *committed) raise(wm int64) {
	for {
		old := c.wm.Load()
		if wm <= old || c.wm.CompareAndSwap(old, wm) {
			return
		}
	}
}

func (c *committed) ClaimWorker(ctx context.Context, cl snowflake.Claim) (snowflake.Lease, error) {
	l, err := c.faultyLeases.ClaimWorker(ctx, cl)
	if err == nil {
		c.raise(cl.WatermarkMs)
	}
	return l, err
}

func (c *committed) RenewWorker(ctx context.Context, l snowflake.Lease, ttl time.Duration, wm int64) error {
	err := c.faultyLeases.RenewWorker(ctx, l, ttl, wm)
	if err == nil {
		c.raise(wm)
	}
	return err
}

// Every ID borrowed is at or before the watermark committed when it is
// issued: with renewals cut off and the clock moved to just before the
// watermark, borrowing stops at the watermark and the generator answers
// 503 instead of passing it.
func TestBorrowNeverPassesWatermark(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, db *leaseDB) {
		const ttl, borrow = 2 * time.Second, 50 * time.Millisecond
		clock := &shiftClock{}
		leases := &committed{faultyLeases: &faultyLeases{LeaseStore: db.store(t)}}
		g := newGenerator(t, snowflake.Settings{Layout: burst, Leases: leases, LeaseTTL: ttl, MaxBorrow: borrow,
			WaitTimeout: 50 * time.Millisecond, Now: clock.Now, Sleep: clock.Sleep})
		waitReady(t, g)
		worker := g.State().WorkerID
		// Bursts under a live lease: every ID within the committed
		// watermark, the recorded one, and max_borrow of the clock.
		var maxMs int64
		for range 5 {
			ids, err := g.NextN(context.Background(), 1000, nil)
			if err != nil {
				t.Fatal(err)
			}
			wm, now := leases.wm.Load(), clock.Now().UnixMilli()
			for _, id := range ids {
				ms := burst.Decode(id).UnixMs
				if ms > wm || ms > now+borrow.Milliseconds() {
					t.Fatalf("ID at %d: committed watermark %d, clock %d + max_borrow %v", ms, wm, now, borrow)
				}
				maxMs = max(maxMs, ms)
			}
			if rec := db.watermark(t, worker); maxMs > rec {
				t.Fatalf("issued up to %d, recorded watermark %d", maxMs, rec)
			}
		}
		if s := g.State(); s.BorrowedMs == 0 || s.MaxLeadMs > borrow.Milliseconds() {
			t.Fatalf("State after bursts: borrowed %d ms, max lead %d ms; want some, at most %v", s.BorrowedMs, s.MaxLeadMs, borrow)
		}
		// No more renewals; the clock 20 ms before the watermark.
		leases.broken.Store(true)
		time.Sleep(100 * time.Millisecond) // a renewal in flight has ended
		wm := leases.wm.Load()
		clock.Shift(time.UnixMilli(wm).Add(-20 * time.Millisecond).Sub(clock.Now()))
		var (
			top  int64
			fail error
		)
		for end := time.Now().Add(time.Second); time.Now().Before(end) && fail == nil; {
			// One at a time: a batch that fails drops what it took.
			id, err := g.Next(context.Background())
			if err != nil {
				fail = err
				break
			}
			top = max(top, burst.Decode(id).UnixMs)
		}
		if top > wm {
			t.Fatalf("issued at %d, past the committed watermark %d", top, wm)
		}
		if top != wm {
			t.Fatalf("borrowing stopped at %d, before the watermark %d that it could reach", top, wm)
		}
		wantCode(t, fail, leafd.ESnowflakeUnavailable)
	})
}

// A burst that borrows, then a restart of the same (fixed) worker id over
// the same store, after a clean Close or a kill -9 (the store cut off, so
// that nothing is released, and the lease expired): nothing is issued
// twice, and the new run's IDs come after every borrowed millisecond.
func TestBorrowRestartIssuesNothingTwice(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, db *leaseDB) {
		for i, kill := range []bool{false, true} {
			name := map[bool]string{false: "Close", true: "Kill"}[kill]
			t.Run(name, func(t *testing.T) {
				worker := int64(3 + i)
				const ttl, borrow = time.Second, 50 * time.Millisecond
				settings := func(l snowflake.LeaseStore) snowflake.Settings {
					return snowflake.Settings{Layout: burst, Leases: l, Fixed: true, WorkerID: worker, LeaseTTL: ttl, MaxBorrow: borrow}
				}
				leases := &faultyLeases{LeaseStore: db.store(t)}
				g := newGenerator(t, settings(leases))
				waitReady(t, g)
				issued := map[snowflake.ID]bool{}
				var oldMax int64
				for range 4 {
					ids, err := g.NextN(context.Background(), 1000, nil)
					if err != nil {
						t.Fatal(err)
					}
					for _, id := range ids {
						issued[id] = true
						oldMax = max(oldMax, burst.Decode(id).UnixMs)
					}
				}
				s := g.State()
				if s.BorrowedMs == 0 || oldMax <= time.Now().UnixMilli() {
					t.Fatalf("the burst borrowed %d ms and reached %d, clock %d: want it ahead", s.BorrowedMs, oldMax, time.Now().UnixMilli())
				}
				if kill {
					leases.broken.Store(true)
				}
				g.Close()
				if kill {
					db.exec(t, "UPDATE leaf_worker SET lease_until_ms = 0 WHERE worker_id = ?", worker)
				}
				if rec := db.watermark(t, worker); rec < oldMax {
					t.Fatalf("recorded watermark %d below the last borrowed millisecond %d", rec, oldMax)
				}
				h := newGenerator(t, settings(db.store(t)))
				waitReady(t, h)
				ids, err := h.NextN(context.Background(), 1000, nil)
				if err != nil {
					t.Fatal(err)
				}
				for _, id := range ids {
					p := burst.Decode(id)
					if issued[id] {
						t.Fatalf("ID %d issued twice", id)
					}
					if p.WorkerID != worker {
						t.Fatalf("restarted on worker id %d, want %d", p.WorkerID, worker)
					}
					if p.UnixMs <= oldMax {
						t.Fatalf("after the restart an ID at %d, not after the borrowed %d", p.UnixMs, oldMax)
					}
				}
			})
		}
	})
}

// A clock that jumps back far after a burst makes a leasing generator
// switch worker id; the old one is released with the last (borrowed)
// millisecond issued under it, so that no one reissues it.
func TestBorrowThenRollbackSwitchesWorker(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, db *leaseDB) {
		clock := &shiftClock{}
		g := newGenerator(t, snowflake.Settings{Layout: burst, Leases: db.store(t), LeaseTTL: 2 * time.Second,
			MaxBorrow: 50 * time.Millisecond, Now: clock.Now, Sleep: clock.Sleep})
		waitReady(t, g)
		issued := map[snowflake.ID]bool{}
		var last snowflake.Parts
		for range 3 {
			ids, err := g.NextN(context.Background(), 1000, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range ids {
				issued[id] = true
			}
			last = burst.Decode(ids[len(ids)-1])
		}
		clock.Shift(-10 * time.Second)
		ids, err := g.NextN(context.Background(), 1000, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			if p := burst.Decode(id); issued[id] || p.WorkerID == last.WorkerID {
				t.Fatalf("after a 10 s rollback: ID %d (worker %d), issued before or under the old worker id %d", id, p.WorkerID, last.WorkerID)
			}
		}
		deadline := time.Now().Add(5 * time.Second)
		for db.watermark(t, last.WorkerID) != last.UnixMs {
			if time.Now().After(deadline) {
				t.Fatalf("old worker id's watermark %d, want the last borrowed millisecond %d", db.watermark(t, last.WorkerID), last.UnixMs)
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
}
