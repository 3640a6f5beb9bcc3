package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/snowflake"
	"github.com/leafd/leafd/store/internal/engine"
)

// The cases of the snowflake worker id leases (snowflake.LeaseStore) over
// the table leaf_worker.

// dbNowSQL reads the database's clock in Unix milliseconds as the engine
// driver does; "" for an engine that is not registered.
func dbNowSQL(driver string) string {
	d, ok := engine.Lookup(driver)
	if !ok {
		return ""
	}
	return "SELECT " + d.NowMs
}

// clockSlack is how far apart two readings of time that should agree may
// be: the database's clock and Go's, or a lease's expiry and the one
// expected from the database's clock read around the call.
const clockSlack = 2 * time.Second

// workerRow is one row of leaf_worker as read by SQL.
type workerRow struct {
	owner        string
	leaseUntilMs int64
	watermarkMs  int64
}

// worker reads the row of worker id id by SQL; the row must exist.
func (h *harness) worker(id int64) workerRow {
	h.t.Helper()
	var r workerRow
	err := h.db.Raw.QueryRow(h.db.Raw.Rebind("SELECT owner, lease_until_ms, watermark_ms FROM leaf_worker WHERE worker_id = ?"), id).
		Scan(&r.owner, &r.leaseUntilMs, &r.watermarkMs)
	if err != nil {
		h.t.Fatalf("read the row of worker id %d: %v", id, err)
	}
	return r
}

// workerCount counts the rows of leaf_worker.
func (h *harness) workerCount() int {
	h.t.Helper()
	var n int
	if err := h.db.Raw.QueryRow("SELECT COUNT(*) FROM leaf_worker").Scan(&n); err != nil {
		h.t.Fatalf("count the rows of leaf_worker: %v", err)
	}
	return n
}

// expire ends the lease of worker id id by SQL, as if its owner had
// stopped renewing long ago.
func (h *harness) expire(id int64) {
	h.t.Helper()
	h.exec("UPDATE leaf_worker SET lease_until_ms = 0 WHERE worker_id = ?", id)
}

// dbNowMs reads the database's clock, in Unix milliseconds, the way s's
// driver does.
func (h *harness) dbNowMs(s Store) int64 {
	h.t.Helper()
	query := dbNowSQL(s.Driver())
	if query == "" {
		h.t.Fatalf("no SQL to read the clock of driver %q", s.Driver())
	}
	var ms int64
	if err := h.db.Raw.QueryRow(query).Scan(&ms); err != nil {
		h.t.Fatalf("%s: %v", query, err)
	}
	return ms
}

// waitDBPast waits until the database's clock is past ms.
func (h *harness) waitDBPast(s Store, ms int64) {
	h.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for h.dbNowMs(s) <= ms {
		if time.Now().After(deadline) {
			h.t.Fatalf("the database's clock did not pass %d within 5 s", ms)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// wantLeaseUntil checks that the lease of worker id id ends ttl after the
// database's clock as read at before and after (around the call that set
// it), and ttl after Go's clock now, which catches a database clock read
// in the wrong time zone.
func (h *harness) wantLeaseUntil(id, before, after int64, ttl time.Duration) {
	h.t.Helper()
	got := h.worker(id).leaseUntilMs
	slack := clockSlack.Milliseconds()
	if lo, hi := before+ttl.Milliseconds()-slack, after+ttl.Milliseconds()+slack; got < lo || got > hi {
		h.t.Fatalf("worker id %d: lease_until_ms = %d, want the database's now (%d..%d) + %v, within %v",
			id, got, before, after, ttl, clockSlack)
	}
	if d := got - (nowMs() + ttl.Milliseconds()); d < -slack || d > slack {
		h.t.Fatalf("worker id %d: lease_until_ms = %d is %d ms away from Go's now + %v", id, got, d, ttl)
	}
}

func nowMs() int64 { return time.Now().UnixMilli() }

// claim leases a worker id and checks the lease against want.
func claim(t *testing.T, s snowflake.LeaseStore, c snowflake.Claim, want snowflake.Lease) snowflake.Lease {
	t.Helper()
	l, err := s.ClaimWorker(context.Background(), c)
	if err != nil {
		t.Fatalf("ClaimWorker(%+v): %v (code %q)", c, err, leafd.ErrorCode(err))
	}
	if want.Layout == (snowflake.Layout{}) {
		want.Layout = c.Layout
		if want.Layout == (snowflake.Layout{}) {
			want.Layout = snowflake.DefaultLayout()
		}
	}
	if l != want {
		t.Fatalf("ClaimWorker(%+v) = %+v, want %+v", c, l, want)
	}
	return l
}

// noFreeWorker checks that c is refused with snowflake.ErrNoFreeWorker.
func noFreeWorker(t *testing.T, s snowflake.LeaseStore, c snowflake.Claim) {
	t.Helper()
	l, err := s.ClaimWorker(context.Background(), c)
	if !errors.Is(err, snowflake.ErrNoFreeWorker) {
		t.Fatalf("ClaimWorker(%+v) = %+v, %v (code %q); want snowflake.ErrNoFreeWorker", c, l, err, leafd.ErrorCode(err))
	}
}

// wantLeaseLost checks that err is snowflake.ErrLeaseLost.
func wantLeaseLost(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, snowflake.ErrLeaseLost) {
		t.Fatalf("%s: %v (code %q), want snowflake.ErrLeaseLost", what, err, leafd.ErrorCode(err))
	}
}

// wantRow checks the row of worker id id, leaving lease_until_ms unchecked
// when leaseUntilMs is -1.
func (h *harness) wantRow(id int64, owner string, leaseUntilMs, watermarkMs int64) {
	h.t.Helper()
	r := h.worker(id)
	if r.owner != owner || r.watermarkMs != watermarkMs || (leaseUntilMs != -1 && r.leaseUntilMs != leaseUntilMs) {
		h.t.Fatalf("worker id %d: row %+v, want owner %q, lease_until_ms %d, watermark_ms %d",
			id, r, owner, leaseUntilMs, watermarkMs)
	}
}

// Worker ids are leased lowest first, and one never leased before comes
// with a previous watermark of 0.
func testClaimLowestFirst(t *testing.T, h *harness) {
	stores := []Store{h.migrated(), h.open(), h.open()}
	now := nowMs()
	for i, owner := range []string{"server-a", "server-b", "server-c"} {
		id := int64(i)
		wm := now + 3000 + id
		claim(t, stores[i], snowflake.Claim{Owner: owner, Workers: 1024, TTL: time.Minute, NowMs: now, WatermarkMs: wm},
			snowflake.Lease{WorkerID: id, Owner: owner, PrevWatermarkMs: 0})
		h.wantRow(id, owner, -1, wm)
	}
	if n := h.workerCount(); n != 3 {
		t.Fatalf("leaf_worker has %d rows after three claims, want 3", n)
	}
}

// A lease whose owner keeps renewing it is never taken, even after the
// lifetime it was first claimed for.
func testClaimLiveLeaseNotTaken(t *testing.T, h *harness) {
	s := h.migrated()
	other := h.open()
	ctx := context.Background()
	now := nowMs()
	a := claim(t, s, snowflake.Claim{Owner: "a", Workers: 2, TTL: 300 * time.Millisecond, NowMs: now, WatermarkMs: now + 3000},
		snowflake.Lease{WorkerID: 0, Owner: "a"})
	b := claim(t, s, snowflake.Claim{Owner: "b", Workers: 2, TTL: time.Minute, NowMs: now, WatermarkMs: now + 3000},
		snowflake.Lease{WorkerID: 1, Owner: "b"})
	firstUntil := h.worker(a.WorkerID).leaseUntilMs
	if err := s.RenewWorker(ctx, a, time.Minute, now+4000); err != nil {
		t.Fatalf("RenewWorker(%+v): %v", a, err)
	}
	// The third claimant's clock is far past both watermarks: only the
	// leases stand in its way.
	c := snowflake.Claim{Owner: "c", Workers: 2, TTL: time.Minute, NowMs: now + 60_000, WatermarkMs: now + 63_000}
	noFreeWorker(t, other, c)
	if err := s.RenewWorker(ctx, b, time.Minute, now+4000); err != nil {
		t.Fatalf("RenewWorker(%+v): %v", b, err)
	}
	// Past the end of a's first lifetime, the renewal holds it.
	h.waitDBPast(s, firstUntil)
	noFreeWorker(t, other, c)
	h.wantRow(0, "a", -1, now+4000)
	h.wantRow(1, "b", -1, now+4000)
	if n := h.workerCount(); n != 2 {
		t.Fatalf("leaf_worker has %d rows, want 2: a refused claim wrote one", n)
	}
}

// A lease that has expired by the database's clock is taken by another
// owner, who learns the old watermark; the old owner can then neither renew
// nor release it.
func testClaimExpiredLease(t *testing.T, h *harness) {
	s := h.migrated()
	other := h.open()
	ctx := context.Background()
	now := nowMs()

	// Expired by SQL.
	wmA := now + 3000
	a := claim(t, s, snowflake.Claim{Owner: "a", Workers: 2, TTL: time.Hour, NowMs: now, WatermarkMs: wmA},
		snowflake.Lease{WorkerID: 0, Owner: "a"})
	h.expire(0)
	wmB := wmA + 3001
	claim(t, other, snowflake.Claim{Owner: "b", Workers: 2, TTL: time.Hour, NowMs: wmA + 1, WatermarkMs: wmB},
		snowflake.Lease{WorkerID: 0, Owner: "b", PrevWatermarkMs: wmA})
	row := h.worker(0)
	wantLeaseLost(t, "RenewWorker by the old owner", s.RenewWorker(ctx, a, time.Hour, wmB+1000))
	wantLeaseLost(t, "ReleaseWorker by the old owner", s.ReleaseWorker(ctx, a, wmB+1000))
	h.wantRow(0, "b", row.leaseUntilMs, wmB)

	// Expired by waiting out a short lifetime on the database's clock.
	wmC := now + 100
	c := claim(t, s, snowflake.Claim{Owner: "c", Workers: 2, TTL: 400 * time.Millisecond, NowMs: now, WatermarkMs: wmC},
		snowflake.Lease{WorkerID: 1, Owner: "c"})
	d := snowflake.Claim{Owner: "d", Workers: 2, TTL: time.Hour, NowMs: wmC + 1, WatermarkMs: wmC + 3000}
	noFreeWorker(t, other, d)
	h.waitDBPast(s, h.worker(1).leaseUntilMs)
	claim(t, other, d, snowflake.Lease{WorkerID: 1, Owner: "d", PrevWatermarkMs: wmC})
	row = h.worker(1)
	wantLeaseLost(t, "RenewWorker by the owner whose lease ran out", s.RenewWorker(ctx, c, time.Hour, wmC+5000))
	wantLeaseLost(t, "ReleaseWorker by the owner whose lease ran out", s.ReleaseWorker(ctx, c, wmC+5000))
	h.wantRow(1, "d", row.leaseUntilMs, wmC+3000)
}

// A worker id recorded at or ahead of the claimant's clock is not claimed,
// however long ago its lease ended; once the claimant's clock is past the
// watermark it is.
func testClaimWatermarkAhead(t *testing.T, h *harness) {
	s := h.migrated()
	other := h.open()
	now := nowMs()
	high, low := now+5000, now+1000
	claim(t, s, snowflake.Claim{Owner: "a", Workers: 2, TTL: time.Hour, NowMs: now, WatermarkMs: high},
		snowflake.Lease{WorkerID: 0, Owner: "a"})
	h.expire(0)
	for _, clock := range []int64{now, high - 1, high} {
		noFreeWorker(t, other, snowflake.Claim{Owner: "b", Workers: 1, TTL: time.Hour, NowMs: clock, WatermarkMs: clock + 3000})
	}
	h.wantRow(0, "a", 0, high)
	// With a second worker id, that one is claimed instead.
	claim(t, other, snowflake.Claim{Owner: "b", Workers: 2, TTL: time.Hour, NowMs: now, WatermarkMs: low},
		snowflake.Lease{WorkerID: 1, Owner: "b"})
	h.expire(1)
	// Both have expired: the lower id is ahead of the clock, the higher not.
	claim(t, other, snowflake.Claim{Owner: "c", Workers: 2, TTL: time.Hour, NowMs: low + 1, WatermarkMs: low + 3000},
		snowflake.Lease{WorkerID: 1, Owner: "c", PrevWatermarkMs: low})
	h.wantRow(0, "a", 0, high)
	// A clock past the watermark claims it.
	claim(t, other, snowflake.Claim{Owner: "d", Workers: 1, TTL: time.Hour, NowMs: high + 1, WatermarkMs: high + 3000},
		snowflake.Lease{WorkerID: 0, Owner: "d", PrevWatermarkMs: high})
	h.wantRow(0, "d", -1, high+3000)
}

// RenewWorker extends the lease from the database's clock and raises the
// watermark, never lowering it.
func testRenewWorker(t *testing.T, h *harness) {
	s := h.migrated()
	ctx := context.Background()
	// The claimant's clock is half an hour ahead: its leases still run from
	// the database's clock.
	now := nowMs() + 30*time.Minute.Milliseconds()
	before := h.dbNowMs(s)
	l := claim(t, s, snowflake.Claim{Owner: "a", Workers: 4, TTL: 10 * time.Second, NowMs: now, WatermarkMs: now + 3000},
		snowflake.Lease{WorkerID: 0, Owner: "a"})
	h.wantLeaseUntil(0, before, h.dbNowMs(s), 10*time.Second)

	renew := func(ttl time.Duration, wm, want int64) {
		t.Helper()
		before := h.dbNowMs(s)
		if err := s.RenewWorker(ctx, l, ttl, wm); err != nil {
			t.Fatalf("RenewWorker(%+v, %v, %d): %v (code %q)", l, ttl, wm, err, leafd.ErrorCode(err))
		}
		after := h.dbNowMs(s)
		h.wantRow(0, "a", -1, want)
		h.wantLeaseUntil(0, before, after, ttl)
	}
	renew(time.Hour, now+6000, now+6000)   // raised
	renew(time.Hour, now+6000, now+6000)   // the same again, at once: still held
	renew(2*time.Hour, now+4000, now+6000) // not lowered, but extended
	renew(time.Minute, now+7000, now+7000) // a shorter lifetime shortens it

	// Not the owner's: nothing changes.
	row := h.worker(0)
	wantLeaseLost(t, "RenewWorker by another owner",
		s.RenewWorker(ctx, snowflake.Lease{WorkerID: 0, Owner: "b"}, time.Hour, now+9000))
	wantLeaseLost(t, "RenewWorker of a worker id never leased",
		s.RenewWorker(ctx, snowflake.Lease{WorkerID: 3, Owner: "a"}, time.Hour, now+9000))
	h.wantRow(0, "a", row.leaseUntilMs, now+7000)
	if n := h.workerCount(); n != 1 {
		t.Fatalf("leaf_worker has %d rows, want 1", n)
	}

	// A claim of a row that exists runs from the database's clock too.
	if err := s.ReleaseWorker(ctx, l, now+8000); err != nil {
		t.Fatal(err)
	}
	before = h.dbNowMs(s)
	claim(t, s, snowflake.Claim{Owner: "b", Workers: 4, TTL: 20 * time.Second, NowMs: now + 8001, WatermarkMs: now + 11_000},
		snowflake.Lease{WorkerID: 0, Owner: "b", PrevWatermarkMs: now + 8000})
	h.wantLeaseUntil(0, before, h.dbNowMs(s), 20*time.Second)
}

// The database's clock, as the suite reads it, is Unix time: it agrees with
// Go's, whatever the session's time zone.
func testDatabaseClock(t *testing.T, h *harness) {
	s := h.migrated()
	check := func(what string, db int64) {
		t.Helper()
		if d := db - nowMs(); d < -clockSlack.Milliseconds() || d > clockSlack.Milliseconds() {
			t.Fatalf("%s: the database's clock reads %d, %d ms away from Go's", what, db, d)
		}
	}
	check("the suite's session", h.dbNowMs(s))
	// A session time zone other than UTC (MySQL's time_zone, PostgreSQL's
	// TIME ZONE; an embedded file has none) changes nothing.
	ctx := context.Background()
	conn, err := h.db.Raw.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	setZone := func(zone string) error {
		_, err := conn.ExecContext(ctx, "SET time_zone = '"+zone+"'")
		if err != nil {
			_, err = conn.ExecContext(ctx, "SET TIME ZONE '"+zone+"'")
		}
		return err
	}
	if setZone("+00:00") != nil {
		return
	}
	for _, zone := range []string{"+09:00", "-07:00", "SYSTEM", "LOCAL"} {
		if err := setZone(zone); err != nil {
			if zone == "SYSTEM" || zone == "LOCAL" {
				continue // the other engine's word for the server's own zone
			}
			t.Fatalf("set the session time zone %s: %v", zone, err)
		}
		var ms int64
		if err := conn.QueryRowContext(ctx, dbNowSQL(s.Driver())).Scan(&ms); err != nil {
			t.Fatal(err)
		}
		check("time zone "+zone, ms)
	}
	if err := setZone("+00:00"); err != nil {
		t.Fatal(err)
	}
}

// ReleaseWorker records the watermark and ends the lease at once, so that
// another owner whose clock is past the watermark claims the id at once.
func testReleaseWorker(t *testing.T, h *harness) {
	s := h.migrated()
	other := h.open()
	ctx := context.Background()
	now := nowMs()
	a := claim(t, s, snowflake.Claim{Owner: "a", Workers: 4, TTL: time.Hour, NowMs: now, WatermarkMs: now + 3000},
		snowflake.Lease{WorkerID: 0, Owner: "a"})
	claim(t, other, snowflake.Claim{Owner: "b", Workers: 4, TTL: time.Hour, NowMs: now, WatermarkMs: now + 3000},
		snowflake.Lease{WorkerID: 1, Owner: "b"})

	row := h.worker(0)
	wantLeaseLost(t, "ReleaseWorker by another owner",
		other.ReleaseWorker(ctx, snowflake.Lease{WorkerID: 0, Owner: "b"}, now+9000))
	wantLeaseLost(t, "ReleaseWorker of a worker id never leased",
		s.ReleaseWorker(ctx, snowflake.Lease{WorkerID: 3, Owner: "a"}, now+9000))
	h.wantRow(0, "a", row.leaseUntilMs, now+3000)

	released := now + 4000
	if err := s.ReleaseWorker(ctx, a, released); err != nil {
		t.Fatalf("ReleaseWorker(%+v, %d): %v (code %q)", a, released, err, leafd.ErrorCode(err))
	}
	if r := h.worker(0); r.watermarkMs != released || r.leaseUntilMs > h.dbNowMs(s) {
		t.Fatalf("after ReleaseWorker(%d): row %+v, want watermark_ms %d and lease_until_ms in the past", released, r, released)
	}
	wantLeaseLost(t, "ReleaseWorker again", s.ReleaseWorker(ctx, a, released+1000))
	wantLeaseLost(t, "RenewWorker after ReleaseWorker", s.RenewWorker(ctx, a, time.Hour, released+1000))
	if r := h.worker(0); r.watermarkMs != released || r.leaseUntilMs > h.dbNowMs(s) {
		t.Fatalf("the released row changed to %+v", r)
	}
	// A clock not past the watermark does not claim it ...
	noFreeWorker(t, other, snowflake.Claim{Owner: "c", Workers: 1, TTL: time.Hour, NowMs: released, WatermarkMs: released + 3000})
	// ... one past it does, at once.
	claim(t, other, snowflake.Claim{Owner: "c", Workers: 4, TTL: time.Hour, NowMs: released + 1, WatermarkMs: released + 3000},
		snowflake.Lease{WorkerID: 0, Owner: "c", PrevWatermarkMs: released})
	h.wantRow(0, "c", -1, released+3000)
	h.wantRow(1, "b", -1, now+3000)
}

// claimConcurrently runs each claim on its own store, all at once, and
// returns the leases and errors by claim.
func claimConcurrently(stores []Store, claims []snowflake.Claim) ([]snowflake.Lease, []error) {
	leases := make([]snowflake.Lease, len(claims))
	errs := make([]error, len(claims))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, c := range claims {
		wg.Go(func() {
			<-start
			leases[i], errs[i] = stores[i].ClaimWorker(context.Background(), c)
		})
	}
	close(start)
	wg.Wait()
	return leases, errs
}

// wantClaims checks the outcome of concurrent claims: the first wantOK
// worker ids leased once each, to the owner that asked, and every other
// claim refused with snowflake.ErrNoFreeWorker.
func (h *harness) wantClaims(claims []snowflake.Claim, leases []snowflake.Lease, errs []error, wantOK int) {
	h.t.Helper()
	var ids []int64
	refused := 0
	for i, err := range errs {
		switch {
		case err == nil:
			if leases[i].Owner != claims[i].Owner {
				h.t.Errorf("claim %d: lease %+v for owner %q", i, leases[i], claims[i].Owner)
			}
			ids = append(ids, leases[i].WorkerID)
		case errors.Is(err, snowflake.ErrNoFreeWorker):
			refused++
		default:
			h.t.Errorf("claim %d: %v (code %q)", i, err, leafd.ErrorCode(err))
		}
	}
	if h.t.Failed() {
		h.t.FailNow()
	}
	slices.Sort(ids)
	want := make([]int64, wantOK)
	for i := range want {
		want[i] = int64(i)
	}
	if !slices.Equal(ids, want) || refused != len(claims)-wantOK {
		h.t.Fatalf("%d concurrent claims leased worker ids %v and %d were refused; want %v and %d",
			len(claims), ids, refused, want, len(claims)-wantOK)
	}
	for i, l := range leases {
		if errs[i] == nil {
			if r := h.worker(l.WorkerID); r.owner != l.Owner || r.watermarkMs != claims[i].WatermarkMs {
				h.t.Fatalf("worker id %d: row %+v, leased by %+v", l.WorkerID, r, claims[i])
			}
		}
	}
}

// openStores returns n stores on the migrated database, as n servers.
func (h *harness) openStores(n int) []Store {
	stores := []Store{h.migrated()}
	for len(stores) < n {
		stores = append(stores, h.open())
	}
	return stores
}

func concurrentClaims(n int, workers, nowMs int64) []snowflake.Claim {
	claims := make([]snowflake.Claim, n)
	for i := range claims {
		claims[i] = snowflake.Claim{Owner: fmt.Sprintf("server-%02d", i), Workers: workers, TTL: time.Hour,
			NowMs: nowMs, WatermarkMs: nowMs + 3000 + int64(i)}
	}
	return claims
}

// Servers claiming at once each get a worker id of their own; when there
// are fewer ids than servers, the others are told so. First on an empty
// table (every claim inserts), then on released rows (every claim updates).
func testConcurrentClaims(t *testing.T, h *harness) {
	stores := h.openStores(16)
	now := nowMs()
	claims := concurrentClaims(16, 64, now)
	leases, errs := claimConcurrently(stores, claims)
	h.wantClaims(claims, leases, errs, 16)

	released := now + 10_000
	for i, l := range leases {
		if err := stores[i].ReleaseWorker(context.Background(), l, released); err != nil {
			t.Fatalf("ReleaseWorker(%+v): %v", l, err)
		}
	}
	claims = concurrentClaims(12, 8, released+1)
	leases, errs = claimConcurrently(stores, claims)
	h.wantClaims(claims, leases, errs, 8)
	for i, l := range leases {
		if errs[i] == nil && l.PrevWatermarkMs != released {
			t.Fatalf("lease %+v of a released worker id, want PrevWatermarkMs %d", l, released)
		}
	}
}

// Twelve servers claim at once on an empty table with eight worker ids.
func testConcurrentClaimsScarce(t *testing.T, h *harness) {
	stores := h.openStores(12)
	claims := concurrentClaims(12, 8, nowMs())
	leases, errs := claimConcurrently(stores, claims)
	h.wantClaims(claims, leases, errs, 8)
	if n := h.workerCount(); n != 8 {
		t.Fatalf("leaf_worker has %d rows, want 8", n)
	}
}

// Migrating again keeps the leases and watermarks.
func testMigrateTwiceKeepsWorkers(t *testing.T, h *harness) {
	s := h.migrated()
	ctx := context.Background()
	now := nowMs()
	a := claim(t, s, snowflake.Claim{Owner: "a", Workers: 2, TTL: time.Hour, NowMs: now, WatermarkMs: now + 3000},
		snowflake.Lease{WorkerID: 0, Owner: "a"})
	b := claim(t, s, snowflake.Claim{Owner: "b", Workers: 2, TTL: time.Hour, NowMs: now, WatermarkMs: now + 3000},
		snowflake.Lease{WorkerID: 1, Owner: "b"})
	released := now + 5000
	if err := s.ReleaseWorker(ctx, b, released); err != nil {
		t.Fatal(err)
	}
	rowA := h.worker(0)
	for range 2 {
		if err := s.Migrate(ctx); err != nil {
			t.Fatalf("migrate again: %v", err)
		}
	}
	if err := h.open().Migrate(ctx); err != nil {
		t.Fatalf("migrate from a second store: %v", err)
	}
	if n := h.workerCount(); n != 2 {
		t.Fatalf("leaf_worker has %d rows after migrating again, want 2", n)
	}
	h.wantRow(0, "a", rowA.leaseUntilMs, now+3000)
	h.wantRow(1, "", -1, released)
	if err := s.RenewWorker(ctx, a, time.Hour, now+4000); err != nil {
		t.Fatalf("RenewWorker after migrating again: %v", err)
	}
	noFreeWorker(t, s, snowflake.Claim{Owner: "c", Workers: 2, TTL: time.Hour, NowMs: released, WatermarkMs: released + 3000})
	claim(t, s, snowflake.Claim{Owner: "c", Workers: 2, TTL: time.Hour, NowMs: released + 1, WatermarkMs: released + 3000},
		snowflake.Lease{WorkerID: 1, Owner: "c", PrevWatermarkMs: released})
}

// claimFixed leases a fixed worker id and checks the lease against want.
func claimFixed(t *testing.T, s snowflake.LeaseStore, c snowflake.FixedClaim, want snowflake.Lease) snowflake.Lease {
	t.Helper()
	l, err := s.ClaimFixedWorker(context.Background(), c)
	if err != nil {
		t.Fatalf("ClaimFixedWorker(%+v): %v (code %q)", c, err, leafd.ErrorCode(err))
	}
	if want.Layout == (snowflake.Layout{}) {
		want.Layout = c.Layout
		if want.Layout == (snowflake.Layout{}) {
			want.Layout = snowflake.DefaultLayout()
		}
	}
	if l != want {
		t.Fatalf("ClaimFixedWorker(%+v) = %+v, want %+v", c, l, want)
	}
	return l
}

// fixedHeld checks that c is refused with a *snowflake.HeldError naming
// owner, and returns it.
func fixedHeld(t *testing.T, s snowflake.LeaseStore, c snowflake.FixedClaim, owner string) *snowflake.HeldError {
	t.Helper()
	l, err := s.ClaimFixedWorker(context.Background(), c)
	var held *snowflake.HeldError
	if !errors.As(err, &held) || !errors.Is(err, snowflake.ErrWorkerHeld) {
		t.Fatalf("ClaimFixedWorker(%+v) = %+v, %v (code %q); want a *snowflake.HeldError", c, l, err, leafd.ErrorCode(err))
	}
	if held.WorkerID != c.WorkerID || held.Owner != owner || held.LeaseUntilMs < held.NowMs {
		t.Fatalf("ClaimFixedWorker(%+v): %+v, want worker id %d held by %q with a live lease", c, held, c.WorkerID, owner)
	}
	return held
}

// fixedAhead checks that c is refused with a *snowflake.WatermarkAheadError
// that reports watermark.
func fixedAhead(t *testing.T, s snowflake.LeaseStore, c snowflake.FixedClaim, watermark int64) {
	t.Helper()
	l, err := s.ClaimFixedWorker(context.Background(), c)
	var ahead *snowflake.WatermarkAheadError
	if !errors.As(err, &ahead) || !errors.Is(err, snowflake.ErrWatermarkAhead) {
		t.Fatalf("ClaimFixedWorker(%+v) = %+v, %v (code %q); want a *snowflake.WatermarkAheadError", c, l, err, leafd.ErrorCode(err))
	}
	if *ahead != (snowflake.WatermarkAheadError{WorkerID: c.WorkerID, WatermarkMs: watermark, NowMs: c.NowMs}) {
		t.Fatalf("ClaimFixedWorker(%+v): %+v, want watermark %d", c, ahead, watermark)
	}
}

func fixedClaim(id int64, owner string, nowMs int64) snowflake.FixedClaim {
	return snowflake.FixedClaim{WorkerID: id, Owner: snowflake.FixedOwnerPrefix + owner, TTL: time.Hour,
		NowMs: nowMs, WatermarkMs: nowMs + 3000}
}

// A fixed worker id is recorded in leaf_worker under a fixed owner, from
// the database's clock, renewed like a lease and released with its
// watermark, keeping the fixed prefix as its owner. A restart whose clock is
// not past the watermark is refused; one past it gets the id back.
func testClaimFixedWorker(t *testing.T, h *harness) {
	s := h.migrated()
	other := h.open()
	ctx := context.Background()
	now := nowMs()
	before := h.dbNowMs(s)
	c := snowflake.FixedClaim{WorkerID: 5, Owner: "fixed:a#1", TTL: 10 * time.Second, NowMs: now, WatermarkMs: now + 3000}
	a := claimFixed(t, s, c, snowflake.Lease{WorkerID: 5, Owner: "fixed:a#1"})
	h.wantRow(5, "fixed:a#1", -1, now+3000)
	h.wantLeaseUntil(5, before, h.dbNowMs(s), 10*time.Second)
	if n := h.workerCount(); n != 1 {
		t.Fatalf("leaf_worker has %d rows after one fixed claim, want 1", n)
	}
	if err := s.RenewWorker(ctx, a, time.Hour, now+6000); err != nil {
		t.Fatalf("RenewWorker(%+v): %v", a, err)
	}
	h.wantRow(5, "fixed:a#1", -1, now+6000)

	released := now + 4000 // the last millisecond issued
	if err := s.ReleaseWorker(ctx, a, released); err != nil {
		t.Fatalf("ReleaseWorker(%+v): %v", a, err)
	}
	h.wantRow(5, snowflake.FixedOwnerPrefix, 0, released)
	wantLeaseLost(t, "RenewWorker after ReleaseWorker", s.RenewWorker(ctx, a, time.Hour, released+1000))
	wantLeaseLost(t, "RenewWorker by the bare fixed prefix",
		s.RenewWorker(ctx, snowflake.Lease{WorkerID: 5, Owner: snowflake.FixedOwnerPrefix}, time.Hour, released+1000))

	// A restart with its clock at or behind the watermark is refused and
	// writes nothing.
	fixedAhead(t, other, fixedClaim(5, "b#1", released), released)
	fixedAhead(t, other, fixedClaim(5, "b#1", released-60_000), released)
	h.wantRow(5, snowflake.FixedOwnerPrefix, 0, released)
	// One past it gets the worker id, learning the watermark.
	claimFixed(t, other, fixedClaim(5, "b#2", released+1), snowflake.Lease{WorkerID: 5, Owner: "fixed:b#2", PrevWatermarkMs: released})
	h.wantRow(5, "fixed:b#2", -1, released+3001)

	// An owner without the fixed prefix is refused before any SQL.
	if _, err := s.ClaimFixedWorker(ctx, snowflake.FixedClaim{WorkerID: 6, Owner: "c", TTL: time.Hour, NowMs: now}); err == nil ||
		errors.Is(err, snowflake.ErrWorkerHeld) {
		t.Fatalf("ClaimFixedWorker with owner %q: %v, want a refusal of the owner", "c", err)
	}
}

// A fixed worker id held by a live server, fixed or leasing, is refused
// with its owner and the end of its lease, and the row is left alone; once
// that lease has expired, the fixed server takes the id, learning its
// watermark.
func testClaimFixedWorkerHeld(t *testing.T, h *harness) {
	s := h.migrated()
	other := h.open()
	now := nowMs()

	// Held by a fixed server.
	claimFixed(t, s, fixedClaim(3, "a#1", now), snowflake.Lease{WorkerID: 3, Owner: "fixed:a#1"})
	row := h.worker(3)
	held := fixedHeld(t, other, fixedClaim(3, "b#1", now+60_000), "fixed:a#1")
	if held.LeaseUntilMs != row.leaseUntilMs {
		t.Fatalf("HeldError %+v, want the row's lease_until_ms %d", held, row.leaseUntilMs)
	}
	if msg := held.Error(); !strings.Contains(msg, "fixed:a#1") || !strings.Contains(msg, "worker id 3") {
		t.Fatalf("HeldError says %q: it must name the worker id and the owner", msg)
	}
	h.wantRow(3, "fixed:a#1", row.leaseUntilMs, now+3000)

	// Held by a leasing server.
	claim(t, s, snowflake.Claim{Owner: "auto-1", Workers: 2, TTL: time.Hour, NowMs: now, WatermarkMs: now + 5000},
		snowflake.Lease{WorkerID: 0, Owner: "auto-1"})
	fixedHeld(t, other, fixedClaim(0, "c#1", now+60_000), "auto-1")
	h.wantRow(0, "auto-1", -1, now+5000)

	// Expired (its server crashed): taken, with the old watermark.
	h.expire(0)
	fixedAhead(t, other, fixedClaim(0, "c#2", now+5000), now+5000)
	claimFixed(t, other, fixedClaim(0, "c#3", now+5001), snowflake.Lease{WorkerID: 0, Owner: "fixed:c#3", PrevWatermarkMs: now + 5000})
	h.wantRow(0, "fixed:c#3", -1, now+8001)
	h.expire(3)
	claimFixed(t, other, fixedClaim(3, "b#2", now+3001), snowflake.Lease{WorkerID: 3, Owner: "fixed:b#2", PrevWatermarkMs: now + 3000})
}

// A leasing server never takes a fixed worker id, live, released or
// expired: it stays its fixed server's.
func testClaimSkipsFixedWorker(t *testing.T, h *harness) {
	s := h.migrated()
	other := h.open()
	ctx := context.Background()
	now := nowMs()
	f0 := claimFixed(t, s, fixedClaim(0, "a#1", now), snowflake.Lease{WorkerID: 0, Owner: "fixed:a#1"})
	claimFixed(t, s, fixedClaim(2, "b#1", now), snowflake.Lease{WorkerID: 2, Owner: "fixed:b#1"})
	late := now + 60_000 // past every watermark: only ownership stands in the way
	claim(t, other, snowflake.Claim{Owner: "auto-1", Workers: 4, TTL: time.Hour, NowMs: late, WatermarkMs: late + 3000},
		snowflake.Lease{WorkerID: 1, Owner: "auto-1"})
	claim(t, other, snowflake.Claim{Owner: "auto-2", Workers: 4, TTL: time.Hour, NowMs: late, WatermarkMs: late + 3000},
		snowflake.Lease{WorkerID: 3, Owner: "auto-2"})
	noFreeWorker(t, other, snowflake.Claim{Owner: "auto-3", Workers: 4, TTL: time.Hour, NowMs: late, WatermarkMs: late + 3000})

	// Released and expired fixed worker ids are not taken either.
	if err := s.ReleaseWorker(ctx, f0, now+1000); err != nil {
		t.Fatal(err)
	}
	h.expire(2)
	noFreeWorker(t, other, snowflake.Claim{Owner: "auto-3", Workers: 4, TTL: time.Hour, NowMs: late, WatermarkMs: late + 3000})
	h.wantRow(0, snowflake.FixedOwnerPrefix, 0, now+1000)
	h.wantRow(2, "fixed:b#1", 0, now+3000)
	// The next id up is.
	claim(t, other, snowflake.Claim{Owner: "auto-3", Workers: 5, TTL: time.Hour, NowMs: late, WatermarkMs: late + 3000},
		snowflake.Lease{WorkerID: 4, Owner: "auto-3"})
}

// Servers claiming one fixed worker id at once: one gets it, every other
// is told who holds it.
func testConcurrentFixedClaims(t *testing.T, h *harness) {
	stores := h.openStores(8)
	now := nowMs()
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		won    []string
		others []error
	)
	start := make(chan struct{})
	for i, s := range stores {
		wg.Go(func() {
			<-start
			l, err := s.ClaimFixedWorker(context.Background(), fixedClaim(7, fmt.Sprintf("s%d#1", i), now))
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				won = append(won, l.Owner)
			} else {
				others = append(others, err)
			}
		})
	}
	close(start)
	wg.Wait()
	if len(won) != 1 {
		t.Fatalf("%d servers got fixed worker id 7 at once: %v (others: %v)", len(won), won, others)
	}
	for _, err := range others {
		var held *snowflake.HeldError
		if !errors.As(err, &held) || held.Owner != won[0] {
			t.Fatalf("a refused claim: %v (code %q), want a *snowflake.HeldError naming %s", err, leafd.ErrorCode(err), won[0])
		}
	}
	h.wantRow(7, won[0], -1, now+3000)
}
