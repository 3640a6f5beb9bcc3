package snowflake_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/internal/testkit/testdb"
	"github.com/leafd/leafd/snowflake"
)

// small is a layout with a 4-bit sequence, so that 16 IDs use up a
// millisecond.
var small = snowflake.Layout{Epoch: snowflake.DefaultEpoch, TimeBits: 41, WorkerBits: 18, SequenceBits: 4}

func TestFixedWorkerIDs(t *testing.T) {
	clock := newStepClock(7 * time.Microsecond)
	g := newGenerator(t, snowflake.Settings{WorkerID: 5, Now: clock.Now, Sleep: clock.Sleep})
	if err := g.Ready(); err != nil {
		t.Fatalf("a fixed worker id is ready at once: %v", err)
	}
	var prev snowflake.ID
	for i := range 20000 {
		id := mustNext(t, g)
		if id <= prev {
			t.Fatalf("ID %d: %d after %d, not increasing", i, id, prev)
		}
		if p := g.Layout().Decode(id); p.WorkerID != 5 {
			t.Fatalf("ID %d decodes to worker %d, want 5", id, p.WorkerID)
		}
		prev = id
	}
}

func TestSequenceOverflowWaitsForNextMillisecond(t *testing.T) {
	clock := newStepClock(time.Microsecond)
	g := newGenerator(t, snowflake.Settings{Layout: small, WorkerID: 1, Now: clock.Now, Sleep: clock.Sleep})
	ids, err := g.NextN(context.Background(), 40, nil)
	if err != nil {
		t.Fatal(err)
	}
	first := small.Decode(ids[0]).UnixMs
	for i, id := range ids {
		p := small.Decode(id)
		wantMs, wantSeq := first+int64(i/16), int64(i%16)
		if p.UnixMs != wantMs || p.Sequence != wantSeq {
			t.Fatalf("ID %d = ms %d seq %d, want ms %d seq %d: overflow must move to the next millisecond",
				i, p.UnixMs-first, p.Sequence, wantMs-first, wantSeq)
		}
	}
}

func TestRandomStart(t *testing.T) {
	clock := newStepClock(1100 * time.Microsecond) // a new millisecond every read
	g := newGenerator(t, snowflake.Settings{WorkerID: 1, RandomStart: true, Now: clock.Now, Sleep: clock.Sleep})
	seen := map[int64]bool{}
	for range 500 {
		seq := g.Layout().Decode(mustNext(t, g)).Sequence
		if seq >= 100 {
			t.Fatalf("first sequence of a millisecond is %d, want below 100", seq)
		}
		seen[seq] = true
	}
	if len(seen) < 50 {
		t.Fatalf("only %d distinct starting sequences in 500 milliseconds: not random", len(seen))
	}
	g2 := newGenerator(t, snowflake.Settings{WorkerID: 2, Now: clock.Now, Sleep: clock.Sleep})
	for range 10 {
		if seq := g2.Layout().Decode(mustNext(t, g2)).Sequence; seq != 0 {
			t.Fatalf("without random_start a millisecond starts at %d, want 0", seq)
		}
	}
}

func TestSmallRollbackWaits(t *testing.T) {
	clock := newStepClock(0)
	g := newGenerator(t, snowflake.Settings{WorkerID: 1, MaxBackward: 5 * time.Millisecond, Now: clock.Now, Sleep: clock.Sleep})
	before := mustNext(t, g)
	clock.Add(-3 * time.Millisecond)
	after := mustNext(t, g)
	if after <= before {
		t.Fatalf("after a 3 ms rollback: %d after %d", after, before)
	}
	if len(clock.slept) == 0 || clock.slept[0] != 3*time.Millisecond {
		t.Fatalf("slept %v, want a wait of 3ms", clock.slept)
	}
	if s := g.State(); s.BackwardEvents != 0 {
		t.Fatalf("a rollback within max_backward counted %d backward events", s.BackwardEvents)
	}
}

func TestLargeRollbackFixedWorkerRefuses(t *testing.T) {
	clock := newStepClock(0)
	g := newGenerator(t, snowflake.Settings{WorkerID: 1, Now: clock.Now, Sleep: clock.Sleep})
	before := mustNext(t, g)
	clock.Add(-time.Second)
	for range 3 {
		_, err := g.Next(context.Background())
		wantCode(t, err, leafd.ESnowflakeUnavailable)
	}
	if err := g.Ready(); err == nil {
		t.Fatal("Ready while the clock is a second behind")
	}
	if s := g.State(); s.BackwardEvents != 1 {
		t.Fatalf("BackwardEvents = %d, want 1 for one rollback", s.BackwardEvents)
	}
	clock.Add(time.Second + time.Millisecond)
	if after := mustNext(t, g); after <= before {
		t.Fatalf("after the clock caught up: %d after %d", after, before)
	}
}

// A request whose context ends while it waits (for the next millisecond,
// for a clock that went back, for the lease) stops waiting then, with
// snowflake_unavailable caused by ctx's error, and no ID.
func TestWaitEndsWithContext(t *testing.T) {
	t.Run("Sequence", func(t *testing.T) {
		// A clock that stands still: the sequence of its millisecond is
		// used up after 16 IDs, and the 17th would wait for ever. The
		// request is cancelled once the wait has begun.
		clock := newStepClock(0)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var reads atomic.Int64
		now := func() time.Time {
			if reads.Add(1) == 1000 {
				cancel()
			}
			return clock.Now()
		}
		g := newGenerator(t, snowflake.Settings{Layout: small, WorkerID: 1, Now: now, Sleep: clock.Sleep})
		done := make(chan error, 1)
		go func() {
			ids, err := g.NextN(ctx, 40, nil)
			if ids != nil {
				err = fmt.Errorf("%d IDs with the error %w", len(ids), err)
			}
			done <- err
		}()
		select {
		case err := <-done:
			wantEnded(t, err, context.Canceled)
		case <-time.After(10 * time.Second):
			t.Fatal("NextN still waits for the next millisecond 10s after its request was cancelled")
		}
	})
	t.Run("ClockBehindInjectedSleep", func(t *testing.T) {
		clock := newStepClock(0)
		g := newGenerator(t, snowflake.Settings{WorkerID: 1, Now: clock.Now, Sleep: clock.Sleep})
		mustNext(t, g)
		clock.Add(-3 * time.Millisecond)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := g.Next(ctx)
		wantEnded(t, err, context.Canceled)
		if len(clock.slept) != 0 {
			t.Fatalf("slept %v for a request already cancelled", clock.slept)
		}
	})
	// On synctest's fake time, where the wait's length is exact.
	t.Run("ClockBehind", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			clock := newStepClock(0)
			g := newGenerator(t, snowflake.Settings{Layout: bubbleLayout, WorkerID: 1, MaxBackward: time.Second, Now: clock.Now})
			mustNext(t, g)
			clock.Add(-900 * time.Millisecond) // waited out, by sleeping 900ms
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
			defer cancel()
			start := time.Now()
			_, err := g.Next(ctx)
			wantEnded(t, err, context.DeadlineExceeded)
			if waited := time.Since(start); waited != 10*time.Millisecond {
				t.Fatalf("waited %v for the clock, want the request's 10ms", waited)
			}
		})
	})
	t.Run("Lease", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			// Not started: no worker id is ever leased.
			g, err := snowflake.New(snowflake.Settings{Layout: bubbleLayout, Leases: &faultyLeases{}, Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
			defer cancel()
			start := time.Now()
			_, err = g.Next(ctx)
			wantEnded(t, err, context.DeadlineExceeded)
			if waited := time.Since(start); waited != 10*time.Millisecond {
				t.Fatalf("waited %v for a lease, want the request's 10ms (WaitTimeout is 2s)", waited)
			}
		})
	})
}

// bubbleLayout has its epoch before 2000, when synctest's fake time begins.
var bubbleLayout = snowflake.Layout{Epoch: time.Date(1999, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli(), TimeBits: 41, WorkerBits: 10, SequenceBits: 12}

// wantEnded checks that err is how a request whose context ended fails.
func wantEnded(tb testing.TB, err, cause error) {
	tb.Helper()
	wantCode(tb, err, leafd.ESnowflakeUnavailable)
	if !errors.Is(err, cause) || !strings.Contains(leafd.ErrorMessage(err), "(the request ended)") {
		tb.Fatalf("error %v: want it caused by %v, saying the request ended", err, cause)
	}
}

func TestBatchLimits(t *testing.T) {
	g := newGenerator(t, snowflake.Settings{WorkerID: 1, MaxBatch: 100})
	for _, n := range []int{0, -1, 101} {
		_, err := g.NextN(context.Background(), n, nil)
		wantCode(t, err, leafd.EInvalidCount)
	}
	ids, err := g.NextN(context.Background(), 100, nil)
	if err != nil || len(ids) != 100 {
		t.Fatalf("NextN(100) = %d IDs, %v", len(ids), err)
	}
	for i := 1; i < len(ids); i++ {
		if ids[i] <= ids[i-1] {
			t.Fatalf("batch not ascending at %d", i)
		}
	}
}

func TestNewRejectsBadSettings(t *testing.T) {
	now := time.Now().UnixMilli()
	for _, c := range []struct {
		name string
		set  snowflake.Settings
		want error
		says string // what the message must name: the setting and what to use
	}{
		{"WorkerIDTooLarge", snowflake.Settings{WorkerID: 1024}, snowflake.ErrInvalidWorkerID, "snowflake.worker_id is out of range (got 1024): use 0 to 1023"},
		{"WorkerIDNegative", snowflake.Settings{WorkerID: -1}, snowflake.ErrInvalidWorkerID, "use 0 to 1023"},
		{"FixedWorkerIDOutsideLayout", snowflake.Settings{Layout: small, WorkerID: 1 << 18, Leases: &faultyLeases{}, Fixed: true},
			snowflake.ErrInvalidWorkerID, "(snowflake.worker_bits 18)"},
		{"BadLayout", snowflake.Settings{Layout: snowflake.Layout{TimeBits: 40, WorkerBits: 10, SequenceBits: 12}},
			snowflake.ErrInvalidBits, "must add up to 63"},
		{"EpochFuture", snowflake.Settings{Layout: snowflake.Layout{Epoch: now + 3_600_000, TimeBits: 41, WorkerBits: 10, SequenceBits: 12}},
			snowflake.ErrEpochFuture, "snowflake.epoch"},
		{"LayoutExpired", snowflake.Settings{Layout: snowflake.Layout{Epoch: snowflake.DefaultEpoch, TimeBits: 10, WorkerBits: 41, SequenceBits: 12}},
			snowflake.ErrLayoutExpired, "snowflake.time_bits"},
		{"LeaseTTLTooShort", snowflake.Settings{LeaseTTL: 5 * time.Millisecond}, snowflake.ErrInvalidLeaseTTL, "snowflake.lease_ttl is too short (got 5ms): use at least 10ms"},
		{"LeaseTTLNegative", snowflake.Settings{LeaseTTL: -time.Second}, snowflake.ErrInvalidLeaseTTL, "use at least 10ms"},
		{"OwnerTooLong", snowflake.Settings{Owner: strings.Repeat("o", snowflake.MaxOwnerLen+1)}, snowflake.ErrInvalidOwner, "longer than 108 bytes"},
		{"MaxBackwardTooLong", snowflake.Settings{MaxBackward: 2 * time.Second}, snowflake.ErrInvalidMaxBackward, "snowflake.max_backward is out of range (got 2s): use 1ms to 1s"},
		{"MaxBackwardTooShort", snowflake.Settings{MaxBackward: time.Microsecond}, snowflake.ErrInvalidMaxBackward, "use 1ms to 1s"},
		{"WaitTimeoutNegative", snowflake.Settings{WaitTimeout: -time.Second}, snowflake.ErrInvalidWaitTimeout, "or 0 for the default, 2s"},
		{"MaxBatchNegative", snowflake.Settings{MaxBatch: -1}, snowflake.ErrInvalidMaxBatch, "or 0 for the default, 10,000"},
		{"MaxBorrowNegative", snowflake.Settings{MaxBorrow: -time.Millisecond}, snowflake.ErrInvalidMaxBorrow, "snowflake.max_borrow is out of range (got -1ms): use 0 (off) to 1s"},
		{"MaxBorrowTooLong", snowflake.Settings{MaxBorrow: 2 * time.Second}, snowflake.ErrInvalidMaxBorrow, "use 0 (off) to 1s"},
		{"MaxBorrowAboveLeaseTTL", snowflake.Settings{MaxBorrow: 200 * time.Millisecond, LeaseTTL: time.Second}, snowflake.ErrInvalidMaxBorrow,
			"at most a tenth of snowflake.lease_ttl (1s)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.set.Logger = quiet
			g, err := snowflake.New(c.set)
			if err == nil {
				g.Close()
				t.Fatal("New accepted it")
			}
			if !errors.Is(err, c.want) {
				t.Fatalf("New = %v, want errors.Is %v", err, c.want)
			}
			if !strings.Contains(err.Error(), c.says) {
				t.Fatalf("New = %q, want it to say %q", err, c.says)
			}
		})
	}
	// A leased worker id needs no WorkerID: zero settings are the defaults.
	for _, s := range []snowflake.Settings{{}, {Leases: &faultyLeases{}, WorkerID: 5000}} {
		s.Logger = quiet
		g, err := snowflake.New(s)
		if err != nil {
			t.Fatalf("New(%+v) = %v", s, err)
		}
		g.Close()
	}
}

func TestClosedGeneratorRefuses(t *testing.T) {
	g := newGenerator(t, snowflake.Settings{WorkerID: 1})
	mustNext(t, g)
	g.Close()
	_, err := g.Next(context.Background())
	wantCode(t, err, leafd.ESnowflakeUnavailable)
}

// Start after Close starts no lease keeper: one could claim a worker id
// that nothing would release, with Close no longer waiting for it.
func TestStartAfterClose(t *testing.T) {
	t.Run("Fixed", func(t *testing.T) {
		g, err := snowflake.New(snowflake.Settings{WorkerID: 1, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		g.Close()
		if err := g.Start(); !errors.Is(err, snowflake.ErrClosed) {
			t.Fatalf("Start after Close = %v, want ErrClosed", err)
		}
	})
	t.Run("Leased", func(t *testing.T) {
		db := &leaseDB{driver: defaultDriver(), dsn: testdb.DSN(t, defaultDriver())}
		s := db.store(t)
		if err := s.Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
		leases := &faultyLeases{LeaseStore: s}
		g, err := snowflake.New(snowflake.Settings{Leases: leases, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		g.Close()
		for range 20 {
			if err := g.Start(); !errors.Is(err, snowflake.ErrClosed) {
				t.Fatalf("Start after Close = %v, want ErrClosed", err)
			}
		}
		g.Close() // waits for any keeper Start left running
		if n := leases.claims.Load(); n != 0 {
			t.Fatalf("%d claims after Close", n)
		}
	})
	t.Run("Again", func(t *testing.T) {
		g := newGenerator(t, snowflake.Settings{WorkerID: 1})
		if err := g.Start(); err != nil {
			t.Fatalf("a second Start = %v, want nil", err)
		}
	})
}

// Three generators leasing from one database get three distinct worker
// ids, and together issue no ID twice.
func TestLeasedWorkersAreDistinct(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, db *leaseDB) {
		const n = 3
		gens := make([]*snowflake.Generator, n)
		for i := range gens {
			gens[i] = newGenerator(t, snowflake.Settings{Leases: db.store(t), LeaseTTL: 2 * time.Second})
		}
		workers := map[int64]int{}
		for i, g := range gens {
			waitReady(t, g)
			w := g.State().WorkerID
			if j, dup := workers[w]; dup {
				t.Fatalf("generators %d and %d both lease worker id %d", j, i, w)
			}
			workers[w] = i
		}
		hammer(t, gens, 4, 3000)
	})
}

// hammer has clients goroutines per generator take perClient IDs each, in
// batches and one by one, and fails on any duplicate or any client seeing
// IDs out of order.
func hammer(t *testing.T, gens []*snowflake.Generator, clients, perClient int) {
	t.Helper()
	var (
		mu   sync.Mutex
		seen = map[snowflake.ID]string{}
		wg   sync.WaitGroup
	)
	for gi, g := range gens {
		for c := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				who := fmt.Sprintf("generator %d client %d", gi, c)
				rng := rand.New(rand.NewPCG(uint64(gi), uint64(c)))
				var got []snowflake.ID
				for len(got) < perClient {
					var err error
					if rng.IntN(4) == 0 {
						got, err = g.NextN(context.Background(), 1+rng.IntN(50), got)
					} else {
						var id snowflake.ID
						id, err = g.Next(context.Background())
						got = append(got, id)
					}
					if err != nil {
						t.Errorf("%s: %v", who, err)
						return
					}
				}
				mu.Lock()
				defer mu.Unlock()
				for i, id := range got {
					if id <= 0 || (i > 0 && id <= got[i-1]) {
						t.Errorf("%s: ID %d after %d", who, id, got[max(i-1, 0)])
						return
					}
					if other, dup := seen[id]; dup {
						t.Errorf("ID %d issued to %s and %s", id, other, who)
						return
					}
					seen[id] = who
				}
			}()
		}
	}
	wg.Wait()
}

// A worker id held by a live generator is never taken: with two worker ids
// and two live generators, a third gets none and answers 503.
func TestLiveLeaseNotTaken(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, db *leaseDB) {
		two := snowflake.Layout{Epoch: snowflake.DefaultEpoch, TimeBits: 41, WorkerBits: 1, SequenceBits: 21}
		// A lease long enough that a renewal delayed by a busy machine (it
		// may be two thirds of the lease late) does not let c in.
		const ttl = 1500 * time.Millisecond
		a := newGenerator(t, snowflake.Settings{Layout: two, Leases: db.store(t), LeaseTTL: ttl})
		b := newGenerator(t, snowflake.Settings{Layout: two, Leases: db.store(t), LeaseTTL: ttl})
		waitReady(t, a)
		waitReady(t, b)
		c := newGenerator(t, snowflake.Settings{Layout: two, Leases: db.store(t), LeaseTTL: ttl,
			WaitTimeout: 50 * time.Millisecond})
		// Two lease lifetimes and more: a and b renew, so c never gets one.
		for end := time.Now().Add(2*ttl + 200*time.Millisecond); time.Now().Before(end); {
			_, err := c.Next(context.Background())
			wantCode(t, err, leafd.ESnowflakeUnavailable)
			mustNext(t, a)
			mustNext(t, b)
		}
		if err := c.Ready(); err == nil {
			t.Fatal("c is ready without a worker id")
		}
		// Once a stops (and releases), c gets its worker id.
		wa := a.State().WorkerID
		a.Close()
		waitReady(t, c)
		if w := c.State().WorkerID; w != wa {
			t.Fatalf("c leased worker id %d, want %d released by a", w, wa)
		}
	})
}

// A server that cannot renew its lease stops issuing before the lease
// ends, and resumes once the database answers again.
func TestUnrenewedLeaseStopsIssuing(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, db *leaseDB) {
		leases := &faultyLeases{LeaseStore: db.store(t)}
		const ttl = 400 * time.Millisecond
		g := newGenerator(t, snowflake.Settings{Leases: leases, LeaseTTL: ttl, WaitTimeout: 20 * time.Millisecond})
		waitReady(t, g)
		mustNext(t, g)
		leases.broken.Store(true)
		// The last renewal was sent before start, so the lease runs out
		// before start+TTL: no call begun after that may get an ID. (When
		// the test notices that issuing stopped is not asserted: a busy
		// machine can delay that by any amount.)
		start := time.Now()
		for {
			called := time.Now()
			_, err := g.Next(context.Background())
			if err != nil {
				wantCode(t, err, leafd.ESnowflakeUnavailable)
				break
			}
			if late := called.Sub(start); late > ttl {
				t.Fatalf("issued an ID in a call begun %v after renewals stopped; the lease is %v", late, ttl)
			}
			time.Sleep(time.Millisecond)
		}
		if g.Ready() == nil {
			t.Fatal("Ready while the lease cannot be renewed")
		}
		leases.broken.Store(false)
		waitReady(t, g)
		mustNext(t, g)
	})
}

// A lease taken over (here by SQL, as a server would after the lease
// expired) is noticed at the next renewal: the generator stops using that
// worker id and leases another.
func TestLostLeaseSwitchesWorker(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, db *leaseDB) {
		g := newGenerator(t, snowflake.Settings{Leases: db.store(t), LeaseTTL: 300 * time.Millisecond})
		waitReady(t, g)
		w := g.State().WorkerID
		db.exec(t, "UPDATE leaf_worker SET owner = 'thief' WHERE worker_id = ?", w)
		deadline := time.Now().Add(5 * time.Second)
		for g.State().WorkerID == w || g.Ready() != nil {
			if time.Now().After(deadline) {
				t.Fatalf("still on worker id %d (or not ready) 5s after losing its lease", w)
			}
			time.Sleep(5 * time.Millisecond)
		}
		if p := g.Layout().Decode(mustNext(t, g)); p.WorkerID == w {
			t.Fatalf("issued under worker id %d after losing its lease", w)
		}
	})
}

// A clock that jumps back further than max_backward makes a leasing
// generator switch to a worker id whose watermark is behind the clock; the
// old worker id is released with the last timestamp issued under it.
func TestLargeRollbackSwitchesWorker(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, db *leaseDB) {
		clock := &shiftClock{}
		g := newGenerator(t, snowflake.Settings{Leases: db.store(t), LeaseTTL: 2 * time.Second, Now: clock.Now, Sleep: clock.Sleep})
		waitReady(t, g)
		l := g.Layout()
		before := mustNext(t, g)
		old := l.Decode(before)
		clock.Shift(-10 * time.Second)
		after := mustNext(t, g)
		p := l.Decode(after)
		if p.WorkerID == old.WorkerID {
			t.Fatalf("after a 10 s rollback still issuing under worker id %d", p.WorkerID)
		}
		if p.UnixMs >= old.UnixMs {
			t.Fatalf("the new ID's time %d is not behind the old %d: the clock was not moved", p.UnixMs, old.UnixMs)
		}
		if s := g.State(); s.BackwardEvents != 1 {
			t.Fatalf("BackwardEvents = %d, want 1", s.BackwardEvents)
		}
		// Released with the last timestamp issued under it (the keeper
		// releases right after switching).
		deadline := time.Now().Add(5 * time.Second)
		for db.watermark(t, old.WorkerID) != old.UnixMs {
			if time.Now().After(deadline) {
				t.Fatalf("old worker id's watermark %d, want the last timestamp issued %d", db.watermark(t, old.WorkerID), old.UnixMs)
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
}

// With no other worker id free, a large rollback cannot be escaped: the
// generator answers 503 until the clock is past the last timestamp again,
// keeps renewing the lease it has meanwhile (here for longer than the
// lease lasts), and then issues at once under the same worker id.
func TestLargeRollbackWithoutFreeWorkerRefuses(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, db *leaseDB) {
		two := snowflake.Layout{Epoch: snowflake.DefaultEpoch, TimeBits: 41, WorkerBits: 1, SequenceBits: 21}
		const ttl = 600 * time.Millisecond
		clock := &shiftClock{}
		// Another server holds the other worker id.
		other := newGenerator(t, snowflake.Settings{Layout: two, Leases: db.store(t), LeaseTTL: ttl})
		waitReady(t, other)
		g := newGenerator(t, snowflake.Settings{Layout: two, Leases: db.store(t), LeaseTTL: ttl,
			WaitTimeout: 300 * time.Millisecond, Now: clock.Now, Sleep: clock.Sleep})
		waitReady(t, g)
		before := mustNext(t, g)
		renewals := g.State().Renewals
		clock.Shift(-time.Hour)
		for end := time.Now().Add(5 * ttl / 2); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
			_, err := g.Next(context.Background())
			wantCode(t, err, leafd.ESnowflakeUnavailable)
		}
		if got := g.State().Renewals - renewals; got < 3 {
			t.Fatalf("%d lease renewals in %v of a %v lease while waiting for a free worker id; want it kept", got, 5*ttl/2, ttl)
		}
		clock.Shift(time.Hour)
		after, err := g.Next(context.Background())
		if err != nil {
			t.Fatalf("the clock caught up but Next failed (was the lease kept?): %v", err)
		}
		if after <= before || two.Decode(after).WorkerID != two.Decode(before).WorkerID {
			t.Fatalf("after the clock caught up: %d (worker %d) after %d (worker %d)",
				after, two.Decode(after).WorkerID, before, two.Decode(before).WorkerID)
		}
	})
}

// A server killed at any moment (here: its store cut off, so that it can
// neither renew nor release, as after kill -9) and restarted with its clock
// behind never reissues a time range of its worker id: the watermark it had
// recorded was ahead of everything it issued.
func TestCrashRestartWithClockBehind(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, db *leaseDB) {
		one := snowflake.Layout{Epoch: snowflake.DefaultEpoch, TimeBits: 42, WorkerBits: 1, SequenceBits: 20}
		const ttl = time.Second
		rng := rand.New(rand.NewPCG(7, 7))
		issued := map[snowflake.ID]bool{}
		lastMs := map[int64]int64{} // worker id → last ms issued under it
		for round := range 4 {
			floor := maps.Clone(lastMs) // what earlier runs reached
			clock := &shiftClock{}
			leases := &faultyLeases{LeaseStore: db.store(t)}
			g := newGenerator(t, snowflake.Settings{Layout: one, Leases: leases, LeaseTTL: ttl,
				WaitTimeout: 20 * time.Millisecond, Now: clock.Now, Sleep: clock.Sleep})
			// Restarted with the clock behind the last run's IDs.
			clock.Shift(-time.Duration(100+rng.IntN(400)) * time.Millisecond)
			deadline := time.Now().Add(10 * time.Second)
			for g.Ready() != nil {
				if time.Now().After(deadline) {
					t.Fatalf("round %d: no worker id after 10s: %v", round, g.Ready())
				}
				time.Sleep(5 * time.Millisecond)
			}
			for end := time.Now().Add(time.Duration(20+rng.IntN(80)) * time.Millisecond); time.Now().Before(end); {
				id, err := g.Next(context.Background())
				if err != nil {
					continue
				}
				p := one.Decode(id)
				if issued[id] {
					t.Fatalf("round %d: ID %d issued twice", round, id)
				}
				if f, used := floor[p.WorkerID]; used && p.UnixMs <= f {
					// Not after what a previous run of this worker id
					// reached: that range may collide.
					t.Fatalf("round %d: worker id %d issued at %d, not after %d issued by a previous run",
						round, p.WorkerID, p.UnixMs, f)
				}
				issued[id] = true
				lastMs[p.WorkerID] = max(lastMs[p.WorkerID], p.UnixMs)
			}
			// kill -9: nothing reaches the database any more; then the
			// lease runs out by the database's clock.
			leases.broken.Store(true)
			g.Close()
			db.exec(t, "UPDATE leaf_worker SET lease_until_ms = 0")
		}
	})
}

// A clock outside the layout (before the epoch, or past the time bits)
// gives 503, never a zero, negative or wrapped-around ID.
func TestClockOutsideLayout(t *testing.T) {
	clock := newStepClock(time.Microsecond)
	// 11 time bits: 2048 ms from an epoch one second ago.
	short := snowflake.Layout{Epoch: clock.Now().UnixMilli() - 1000, TimeBits: 11, WorkerBits: 40, SequenceBits: 12}
	g := newGenerator(t, snowflake.Settings{Layout: short, WorkerID: 1, Now: clock.Now, Sleep: clock.Sleep})
	if id := mustNext(t, g); id <= 0 {
		t.Fatalf("ID %d inside the layout", id)
	}
	clock.Add(2 * time.Second) // past the 2048 ms
	_, err := g.Next(context.Background())
	wantCode(t, err, leafd.ESnowflakeUnavailable)
	if g.Ready() == nil {
		t.Fatal("Ready with the clock past the layout")
	}

	forEachDatabase(t, func(t *testing.T, db *leaseDB) {
		clock := &shiftClock{}
		g := newGenerator(t, snowflake.Settings{Leases: db.store(t), LeaseTTL: 2 * time.Second,
			WaitTimeout: 50 * time.Millisecond, Now: clock.Now, Sleep: clock.Sleep})
		waitReady(t, g)
		mustNext(t, g)
		// Back to before Twitter's epoch: a fresh worker id could be leased,
		// but no ID may come of it.
		clock.Shift(-time.Since(time.UnixMilli(snowflake.DefaultEpoch)) - time.Hour)
		for range 20 {
			if id, err := g.Next(context.Background()); err == nil {
				t.Fatalf("issued %d with the clock before the epoch", id)
			} else {
				wantCode(t, err, leafd.ESnowflakeUnavailable)
			}
		}
	})
}

// A batch that waits across a worker id switch (the clock went back while
// it was being filled) still comes out ascending.
func TestBatchAscendingAcrossSwitch(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, db *leaseDB) {
		var reads atomic.Int64
		var back atomic.Int64
		now := func() time.Time {
			if reads.Add(1) == 300 {
				back.Store(int64(10 * time.Second)) // mid-batch
			}
			return time.Now().Add(-time.Duration(back.Load()))
		}
		// 16 IDs a millisecond: a batch reads the clock once a
		// millisecond, so 5000 IDs take more than 300 reads.
		l := snowflake.Layout{TimeBits: 49, WorkerBits: 10, SequenceBits: 4}
		g := newGenerator(t, snowflake.Settings{Layout: l, Leases: db.store(t), LeaseTTL: 2 * time.Second, Now: now})
		waitReady(t, g)
		before := g.State().WorkerID
		ids, err := g.NextN(context.Background(), 5000, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := 1; i < len(ids); i++ {
			if ids[i] <= ids[i-1] {
				t.Fatalf("batch not ascending at %d: %d after %d (worker %d after %d)", i, ids[i], ids[i-1],
					g.Layout().Decode(ids[i]).WorkerID, g.Layout().Decode(ids[i-1]).WorkerID)
			}
		}
		if w := g.State().WorkerID; w == before || reads.Load() < 300 {
			t.Fatalf("the clock step did not happen mid-batch (worker %d before, %d after, %d reads)", before, w, reads.Load())
		}
	})
}

// Requests cannot hurry the keeper past its backoff: with the database
// down and many clients, the store sees a handful of claims, not one per
// request. The second of load runs on synctest's fake time: it takes no
// real time, and the count does not depend on how busy the machine is.
func TestKeeperBacksOffUnderLoad(t *testing.T) {
	db := &leaseDB{driver: defaultDriver(), dsn: testdb.DSN(t, defaultDriver())}
	s := db.store(t)
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	synctest.Test(t, func(t *testing.T) {
		leases := &faultyLeases{LeaseStore: s}
		leases.broken.Store(true)
		g := newGenerator(t, snowflake.Settings{Layout: bubbleLayout, Leases: leases, LeaseTTL: 2 * time.Second,
			WaitTimeout: 5 * time.Millisecond})
		var wg sync.WaitGroup
		var requests atomic.Int64
		for range 32 {
			wg.Go(func() {
				for end := time.Now().Add(time.Second); time.Now().Before(end); {
					_, err := g.Next(context.Background())
					wantCode(t, err, leafd.ESnowflakeUnavailable)
					requests.Add(1)
				}
			})
		}
		wg.Wait()
		// Backoff from 50 ms doubling up to 200 ms: about ten claims a second.
		if n := leases.claims.Load(); n > 30 {
			t.Fatalf("%d claims in 1 s for %d requests: requests defeat the backoff", n, requests.Load())
		}
		// The database is back (the default engine's, a local file, which a synctest
		// bubble may wait on): the keeper claims a worker id.
		leases.broken.Store(false)
		waitReady(t, g)
	})
}

// Readiness probes alone, with no request, get a generator whose clock went
// back onto another worker id.
func TestReadyProbeSwitchesWorker(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, db *leaseDB) {
		clock := &shiftClock{}
		g := newGenerator(t, snowflake.Settings{Leases: db.store(t), LeaseTTL: 2 * time.Second, Now: clock.Now, Sleep: clock.Sleep})
		waitReady(t, g)
		mustNext(t, g)
		before := g.State().WorkerID
		clock.Shift(-time.Minute)
		waitReady(t, g) // only Ready is called
		if w := g.State().WorkerID; w == before {
			t.Fatalf("ready again on worker id %d, the one whose time is ahead", w)
		}
	})
}
