package snowflake_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/snowflake"
)

// waitDone waits until g has stopped for good and returns why.
func waitDone(tb testing.TB, g *snowflake.Generator) error {
	tb.Helper()
	select {
	case <-g.Done():
	case <-time.After(10 * time.Second):
		tb.Fatalf("the generator did not stop within 10s (ready: %v)", g.Ready())
	}
	err := g.Err()
	if err == nil {
		tb.Fatal("Done is closed but Err is nil")
	}
	if _, err := g.Next(context.Background()); leafd.ErrorCode(err) != leafd.ESnowflakeUnavailable {
		tb.Fatalf("Next after Done: %v, want snowflake_unavailable", err)
	}
	if g.Ready() == nil {
		tb.Fatal("Ready after Done")
	}
	return err
}

// notDone fails if g has stopped for good.
func notDone(tb testing.TB, g *snowflake.Generator) {
	tb.Helper()
	select {
	case <-g.Done():
		tb.Fatalf("the generator stopped: %v", g.Err())
	default:
	}
}

// A second generator (server) with the same fixed worker id over one
// database refuses to start, naming the holder and when its lease ends,
// while the first keeps issuing; the same for a fixed worker id that a
// leasing generator holds. Once the first is closed, the id can be had.
func TestFixedWorkerHeldRefuses(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, db *leaseDB) {
		a := newGenerator(t, snowflake.Settings{Leases: db.store(t), Fixed: true, WorkerID: 7, Owner: "server-a",
			LeaseTTL: 2 * time.Second})
		waitReady(t, a)
		if st := a.State(); st.WorkerID != 7 || st.Source != "static" || st.LeaseUntil.IsZero() {
			t.Fatalf("state of the fixed generator: %+v, want worker id 7, static, with a lease", st)
		}
		if p := a.Layout().Decode(mustNext(t, a)); p.WorkerID != 7 {
			t.Fatalf("issued under worker id %d, want 7", p.WorkerID)
		}
		b := newGenerator(t, snowflake.Settings{Leases: db.store(t), Fixed: true, WorkerID: 7, Owner: "server-b",
			LeaseTTL: 2 * time.Second})
		err := waitDone(t, b)
		var held *snowflake.HeldError
		if !errors.As(err, &held) || !errors.Is(err, snowflake.ErrWorkerHeld) || held.Owner != "fixed:server-a#1" {
			t.Fatalf("the second server's error: %v, want a *snowflake.HeldError naming fixed:server-a#1", err)
		}
		if msg := err.Error(); !strings.Contains(msg, "snowflake.worker_id 7") || !strings.Contains(msg, "fixed:server-a#1") ||
			!strings.Contains(msg, " until ") {
			t.Fatalf("the refusal says %q: it must name the key, the holder and when its lease ends", msg)
		}
		mustNext(t, a)
		if err := a.Ready(); err != nil {
			t.Fatalf("the first server is no longer ready: %v", err)
		}

		// A fixed worker id leased by an auto generator.
		auto := newGenerator(t, snowflake.Settings{Leases: db.store(t), Owner: "server-c", LeaseTTL: 2 * time.Second})
		waitReady(t, auto)
		w := auto.State().WorkerID
		if w == 7 {
			t.Fatal("a leasing generator took fixed worker id 7")
		}
		d := newGenerator(t, snowflake.Settings{Leases: db.store(t), Fixed: true, WorkerID: w, Owner: "server-d"})
		err = waitDone(t, d)
		if !errors.As(err, &held) || held.Owner != "server-c#1" {
			t.Fatalf("fixed over a leased id: %v, want a *snowflake.HeldError naming server-c#1", err)
		}

		// After a clean stop the fixed id is free for the next server.
		a.Close()
		e := newGenerator(t, snowflake.Settings{Leases: db.store(t), Fixed: true, WorkerID: 7, Owner: "server-e"})
		waitReady(t, e)
		notDone(t, e)
		if p := e.Layout().Decode(mustNext(t, e)); p.WorkerID != 7 {
			t.Fatalf("issued under worker id %d, want 7", p.WorkerID)
		}
	})
}

// Two servers with distinct fixed worker ids and two leasing ones share a
// database under load: the leasing ones keep off the fixed ids, and no ID
// is issued twice.
func TestFixedAndLeasedWorkersNoDuplicates(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, db *leaseDB) {
		// Fixed ids 0 and 1 are the ones a leasing server would take first.
		f0 := newGenerator(t, snowflake.Settings{Leases: db.store(t), Fixed: true, WorkerID: 0, LeaseTTL: 2 * time.Second})
		f1 := newGenerator(t, snowflake.Settings{Leases: db.store(t), Fixed: true, WorkerID: 1, LeaseTTL: 2 * time.Second})
		waitReady(t, f0)
		waitReady(t, f1)
		a1 := newGenerator(t, snowflake.Settings{Leases: db.store(t), LeaseTTL: 2 * time.Second})
		a2 := newGenerator(t, snowflake.Settings{Leases: db.store(t), LeaseTTL: 2 * time.Second})
		waitReady(t, a1)
		waitReady(t, a2)
		workers := map[int64]bool{}
		for _, g := range []*snowflake.Generator{f0, f1, a1, a2} {
			workers[g.State().WorkerID] = true
		}
		if len(workers) != 4 || !workers[0] || !workers[1] {
			t.Fatalf("worker ids %v, want 0 and 1 (fixed) and two others", workers)
		}
		hammer(t, []*snowflake.Generator{f0, f1, a1, a2}, 4, 3000)
		for _, g := range []*snowflake.Generator{f0, f1} {
			notDone(t, g)
		}
	})
}

// A fixed worker id whose lease is taken over while the server runs (after
// it expired, say) stops issuing, like a lost lease, and serves again under
// the same id once it is free, above what it issued before.
func TestFixedWorkerLostStopsIssuing(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, db *leaseDB) {
		g := newGenerator(t, snowflake.Settings{Leases: db.store(t), Fixed: true, WorkerID: 3, LeaseTTL: 300 * time.Millisecond,
			WaitTimeout: 20 * time.Millisecond})
		waitReady(t, g)
		before := mustNext(t, g)
		db.exec(t, "UPDATE leaf_worker SET owner = 'thief', lease_until_ms = ? WHERE worker_id = 3", time.Now().Add(time.Hour).UnixMilli())
		deadline := time.Now().Add(5 * time.Second)
		for {
			_, err := g.Next(context.Background())
			if err != nil {
				wantCode(t, err, leafd.ESnowflakeUnavailable)
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("still issuing 5s after its fixed worker id was taken over")
			}
			time.Sleep(5 * time.Millisecond)
		}
		if g.Ready() == nil {
			t.Fatal("ready without its fixed worker id")
		}
		if w := g.State().WorkerID; w != -1 {
			t.Fatalf("worker id %d after losing it, want -1", w)
		}
		notDone(t, g) // not fatal while running: it waits for the id

		// The thief goes away.
		db.exec(t, "UPDATE leaf_worker SET owner = '', lease_until_ms = 0 WHERE worker_id = 3")
		waitReady(t, g)
		after := mustNext(t, g)
		if p := g.Layout().Decode(after); p.WorkerID != 3 || after <= before {
			t.Fatalf("after getting worker id 3 back: ID %d (worker %d), want worker 3 and above %d", after, p.WorkerID, before)
		}
	})
}

// The watermark protects a fixed worker id across restarts: a server whose
// clock is behind the id's record by less than a lease waits until its
// clock has passed it, and issues nothing at or before it; one behind by
// more refuses to start.
func TestFixedWorkerWatermarkAhead(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, db *leaseDB) {
		const ttl = 2 * time.Second
		a := newGenerator(t, snowflake.Settings{Leases: db.store(t), Fixed: true, WorkerID: 2, LeaseTTL: ttl})
		waitReady(t, a)
		mustNext(t, a)
		a.Close() // released with its watermark at the last millisecond issued
		wm := db.watermark(t, 2)

		// Restarted with the clock 400 ms behind: it waits.
		clock := &shiftClock{}
		clock.Shift(time.Duration(wm-time.Now().UnixMilli())*time.Millisecond - 400*time.Millisecond)
		b := newGenerator(t, snowflake.Settings{Leases: db.store(t), Fixed: true, WorkerID: 2, LeaseTTL: ttl,
			WaitTimeout: 20 * time.Millisecond, Now: clock.Now, Sleep: clock.Sleep})
		if err := b.Ready(); err == nil {
			t.Fatal("ready at once with its clock behind the watermark")
		}
		waitReady(t, b)
		notDone(t, b)
		if p := b.Layout().Decode(mustNext(t, b)); p.WorkerID != 2 || p.UnixMs <= wm {
			t.Fatalf("issued at %d under worker id %d, not after the watermark %d", p.UnixMs, p.WorkerID, wm)
		}
		b.Close()

		// Restarted with the clock an hour behind: it refuses.
		wm = db.watermark(t, 2)
		clock = &shiftClock{}
		clock.Shift(-time.Hour)
		c := newGenerator(t, snowflake.Settings{Leases: db.store(t), Fixed: true, WorkerID: 2, LeaseTTL: ttl,
			Now: clock.Now, Sleep: clock.Sleep})
		err := waitDone(t, c)
		var ahead *snowflake.WatermarkAheadError
		if !errors.As(err, &ahead) || ahead.WatermarkMs != wm {
			t.Fatalf("restart an hour behind: %v, want a *snowflake.WatermarkAheadError at %d", err, wm)
		}
		if got := db.watermark(t, 2); got != wm {
			t.Fatalf("the refused restart moved the watermark from %d to %d", wm, got)
		}
	})
}

// Without a store a fixed worker id is neither recorded nor refused: the
// generator is ready at once and never stops by itself.
func TestUnprotectedFixedWorker(t *testing.T) {
	g := newGenerator(t, snowflake.Settings{WorkerID: 9})
	if err := g.Ready(); err != nil {
		t.Fatal(err)
	}
	mustNext(t, g)
	notDone(t, g)
	if st := g.State(); st.Source != "static" || !st.LeaseUntil.IsZero() {
		t.Fatalf("state %+v, want static with no lease", st)
	}
}
