package storetest

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/snowflake"
	"github.com/leafd/leafd/store/internal/engine"
	"github.com/leafd/leafd/store/internal/testhook"
)

// The cases of the snowflake layout recorded with the worker id leases
// (leafd_snowflake_layout): worker id n of two layouts issues overlapping
// IDs, so a store leases worker ids under one layout only.

// otherLayout is a valid layout that differs from the default in every
// part.
var otherLayout = snowflake.Layout{Epoch: 1_600_000_000_000, TimeBits: 40, WorkerBits: 11, SequenceBits: 12}

// recordedLayout reads the recorded layout by SQL; ok is false when there
// is none.
func (h *harness) recordedLayout() (l snowflake.Layout, by string, ok bool) {
	h.t.Helper()
	rows, err := h.db.Raw.Query("SELECT epoch_ms, time_bits, worker_bits, sequence_bits, recorded_by FROM leafd_snowflake_layout")
	if err != nil {
		h.t.Fatalf("read leafd_snowflake_layout: %v", err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		n++
		if err := rows.Scan(&l.Epoch, &l.TimeBits, &l.WorkerBits, &l.SequenceBits, &by); err != nil {
			h.t.Fatalf("read leafd_snowflake_layout: %v", err)
		}
	}
	if err := rows.Err(); err != nil {
		h.t.Fatalf("read leafd_snowflake_layout: %v", err)
	}
	if n > 1 {
		h.t.Fatalf("leafd_snowflake_layout has %d rows, want at most one", n)
	}
	return l, by, n == 1
}

// wantLayoutRecorded checks the recorded layout and who recorded it.
func (h *harness) wantLayoutRecorded(want snowflake.Layout, by string) {
	h.t.Helper()
	got, gotBy, ok := h.recordedLayout()
	if !ok || got != want || gotBy != by {
		h.t.Fatalf("recorded layout %+v by %q (recorded: %v), want %+v by %q", got, gotBy, ok, want, by)
	}
}

// wantLayoutMismatch checks that err refuses the layout own because
// recorded (by owner by) is recorded, and that its message names both
// with the configuration keys.
func wantLayoutMismatch(t *testing.T, err error, own, recorded snowflake.Layout, by string) {
	t.Helper()
	var m *snowflake.LayoutMismatchError
	if !errors.As(err, &m) || !errors.Is(err, snowflake.ErrLayoutMismatch) {
		t.Fatalf("got %v (code %q), want a *snowflake.LayoutMismatchError", err, leafd.ErrorCode(err))
	}
	if m.Own != own || m.Recorded != recorded || m.RecordedBy != by {
		t.Fatalf("mismatch %+v, want own %+v and recorded %+v by %q", m, own, recorded, by)
	}
	msg := err.Error()
	for _, want := range []string{
		"snowflake.epoch " + itoa(own.Epoch), "snowflake.epoch " + itoa(recorded.Epoch),
		"snowflake.time_bits " + itoa(int64(own.TimeBits)), "snowflake.time_bits " + itoa(int64(recorded.TimeBits)),
		"snowflake.worker_bits", "snowflake.sequence_bits", by,
	} {
		if !strings.Contains(msg, want) {
			t.Fatalf("message %q does not name %q", msg, want)
		}
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// The first claim records its layout; claims of the same layout, leased
// or fixed, are accepted; another layout, or only another epoch, is
// refused, naming both, and writes nothing. The zero layout is the
// default one.
func testSnowflakeLayout(t *testing.T, h *harness) {
	s := h.migrated()
	other := h.open()
	ctx := context.Background()
	now := nowMs()
	if _, _, ok := h.recordedLayout(); ok {
		t.Fatal("a fresh database has a recorded layout")
	}
	c := snowflake.Claim{Owner: "a#1", Workers: 4, TTL: time.Hour, NowMs: now, WatermarkMs: now + 3000, Layout: otherLayout}
	claim(t, s, c, snowflake.Lease{WorkerID: 0, Owner: "a#1"})
	h.wantLayoutRecorded(otherLayout, "a#1")

	c.Owner = "b#1"
	claim(t, other, c, snowflake.Lease{WorkerID: 1, Owner: "b#1"})
	claimFixed(t, other, snowflake.FixedClaim{WorkerID: 3, Owner: "fixed:c#1", TTL: time.Hour, NowMs: now,
		WatermarkMs: now + 3000, Layout: otherLayout}, snowflake.Lease{WorkerID: 3, Owner: "fixed:c#1"})

	epochOnly := otherLayout
	epochOnly.Epoch++
	for _, own := range []snowflake.Layout{{}, epochOnly, {Epoch: otherLayout.Epoch, TimeBits: 41, WorkerBits: 10, SequenceBits: 12}} {
		rows := h.workerCount()
		c := snowflake.Claim{Owner: "d#1", Workers: 4, TTL: time.Hour, NowMs: now, WatermarkMs: now + 3000, Layout: own}
		_, err := other.ClaimWorker(ctx, c)
		if own == (snowflake.Layout{}) {
			own = snowflake.DefaultLayout()
		}
		wantLayoutMismatch(t, err, own, otherLayout, "a#1")
		_, err = other.ClaimFixedWorker(ctx, snowflake.FixedClaim{WorkerID: 2, Owner: "fixed:d#1", TTL: time.Hour,
			NowMs: now, WatermarkMs: now + 3000, Layout: own})
		wantLayoutMismatch(t, err, own, otherLayout, "a#1")
		if n := h.workerCount(); n != rows {
			t.Fatalf("refused claims changed leaf_worker from %d to %d rows", rows, n)
		}
	}
	h.wantLayoutRecorded(otherLayout, "a#1")
}

// A database whose leases predate the record (leaf_worker rows written by
// an older leafd, no recorded layout) gets the layout of the first claim
// after the migration, whichever worker id it takes; others are refused
// from then on.
func testSnowflakeLayoutOfOlderLeases(t *testing.T, h *harness) {
	s := h.migrated()
	now := nowMs()
	h.exec("INSERT INTO leaf_worker (worker_id, owner, lease_until_ms, watermark_ms) VALUES (0, 'old#1', 0, ?)", now-1000)
	h.exec("INSERT INTO leaf_worker (worker_id, owner, lease_until_ms, watermark_ms) VALUES (1, 'fixed:', 0, ?)", now-1000)
	claimFixed(t, s, snowflake.FixedClaim{WorkerID: 1, Owner: "fixed:a#1", TTL: time.Hour, NowMs: now, WatermarkMs: now + 3000},
		snowflake.Lease{WorkerID: 1, Owner: "fixed:a#1", PrevWatermarkMs: now - 1000})
	h.wantLayoutRecorded(snowflake.DefaultLayout(), "fixed:a#1")
	_, err := s.ClaimWorker(context.Background(), snowflake.Claim{Owner: "b#1", Workers: 4, TTL: time.Hour, NowMs: now,
		WatermarkMs: now + 3000, Layout: otherLayout})
	wantLayoutMismatch(t, err, otherLayout, snowflake.DefaultLayout(), "fixed:a#1")
	if r := h.worker(0); r.owner != "old#1" {
		t.Fatalf("the refused claim took worker id 0: %+v", r)
	}
}

// Two servers with different layouts claim at once on a database with no
// record: each claim is held after it read that there is none and before
// it writes (where the engine lets the second get that far while the
// first is held), then both go on. Exactly one records its layout and
// leases; the other is refused, naming both, and holds nothing.
func testSnowflakeLayoutRace(t *testing.T, h *harness) {
	hold := h.db.AfterLayoutRead
	if hold == nil {
		hold = func(s Store, f func()) { testhook.AfterLayoutRead(s, f) }
	}
	for _, fixed := range []bool{false, true} {
		name := "Claims"
		if fixed {
			name = "ClaimAndFixed"
		}
		t.Run(name, func(t *testing.T) {
			h := &harness{t: t, db: h.db}
			a := h.migrated()
			b := h.open()
			h.exec("DELETE FROM leaf_worker")
			h.exec("DELETE FROM leafd_snowflake_layout")
			// Where the engine is gapLocked both claims must get past their
			// read before either writes (see LayoutRace).
			if interleaved := LayoutRace(t, a, b, hold, fixed); !interleaved && gapLocked(a.Driver()) {
				t.Fatal("the second claim did not read the record while the first was held, though the engine's locking reads of missing rows do not block each other")
			}
			if n := h.workerCount(); n != 1 {
				t.Fatalf("leaf_worker has %d rows after the race, want the winner's alone", n)
			}
		})
	}
}

// LayoutRace runs the forced race of two claims with different layouts on
// stores a and b of one database (or one deployment) with no recorded
// layout and no worker rows: a's claim is held by afterLayoutRead (the
// hook of store tests) after it read that no layout is recorded; then b
// claims, and is held there too if it gets that far while a is held; then
// both go on. With fixed, b claims a fixed worker id. Exactly one claim
// must win and the other be refused with a *snowflake.LayoutMismatchError
// naming the winner's layout. It returns whether b got past its read
// while a was held (engines that serialise claims block it before).
func LayoutRace(t *testing.T, a, b Store, afterLayoutRead func(Store, func()), fixed bool) (interleaved bool) {
	t.Helper()
	now := nowMs()
	layouts := [2]snowflake.Layout{snowflake.DefaultLayout(), otherLayout}
	owners := [2]string{"a#1", "fixed:b#1"}
	if !fixed {
		owners[1] = "b#1"
	}
	arrived := make(chan int, 8)
	release := make(chan struct{})
	for i, s := range []Store{a, b} {
		first := true // touched by the one claim of s alone
		afterLayoutRead(s, func() {
			select {
			case arrived <- i:
			default: // retries after the outcome is settled
			}
			if first {
				first = false
				<-release
			}
		})
		t.Cleanup(func() { afterLayoutRead(s, nil) })
	}
	var leases [2]snowflake.Lease
	var errs [2]error
	done := make(chan int, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	go func() {
		leases[0], errs[0] = a.ClaimWorker(ctx, snowflake.Claim{Owner: owners[0], Workers: 4, TTL: time.Hour,
			NowMs: now, WatermarkMs: now + 3000, Layout: layouts[0]})
		done <- 0
	}()
	select {
	case i := <-arrived:
		if i != 0 {
			t.Fatalf("claim %d arrived first", i)
		}
	case i := <-done:
		t.Fatalf("claim %d ended (%v) before it read the recorded layout", i, errs[i])
	case <-ctx.Done():
		t.Fatal("the first claim did not read the recorded layout within 30 s")
	}
	go func() {
		if fixed {
			leases[1], errs[1] = b.ClaimFixedWorker(ctx, snowflake.FixedClaim{WorkerID: 2, Owner: owners[1], TTL: time.Hour,
				NowMs: now, WatermarkMs: now + 3000, Layout: layouts[1]})
		} else {
			leases[1], errs[1] = b.ClaimWorker(ctx, snowflake.Claim{Owner: owners[1], Workers: 4, TTL: time.Hour,
				NowMs: now, WatermarkMs: now + 3000, Layout: layouts[1]})
		}
		done <- 1
	}()
	// b either reaches its read too (both have then seen no record), or
	// waits for a's locks: a wait tells them apart, and either way the
	// outcome below must hold. Where the engine is gapLocked b gets there,
	// so it is given longer, lest a slow machine hide the interleaving.
	wait := time.Second
	if gapLocked(a.Driver()) {
		wait = 10 * time.Second
	}
	select {
	case i := <-arrived:
		interleaved = i == 1
	case i := <-done:
		t.Fatalf("claim %d ended (%v) while the first was held", i, errs[i])
	case <-time.After(wait):
	}
	close(release)
	<-done
	<-done
	t.Logf("second claim read the record while the first was held: %v; results: %v, %v", interleaved, errs[0], errs[1])
	won := -1
	for i, err := range errs {
		if err == nil {
			if won >= 0 {
				t.Fatalf("both claims leased: %+v and %+v, with layouts %+v and %+v", leases[0], leases[1], layouts[0], layouts[1])
			}
			won = i
		}
	}
	if won < 0 {
		t.Fatalf("neither claim leased: %v; %v", errs[0], errs[1])
	}
	lost := 1 - won
	wantLayoutMismatch(t, errs[lost], layouts[lost], layouts[won], owners[won])
	if leases[won].Owner != owners[won] {
		t.Fatalf("the winner's lease %+v, want owner %q", leases[won], owners[won])
	}
	// The refused server is refused again, and the winner's layout still
	// accepted: the record is the winner's.
	_, err := b.ClaimWorker(ctx, snowflake.Claim{Owner: "c#1", Workers: 4, TTL: time.Hour, NowMs: now, WatermarkMs: now + 3000,
		Layout: layouts[lost]})
	wantLayoutMismatch(t, err, layouts[lost], layouts[won], owners[won])
	return interleaved
}

// A layout record edited or deleted by hand while leases are held: their
// renewals fail with snowflake.ErrLeaseLost, leased or fixed, so that the
// servers stop issuing under them and claim again (refused under another
// record, recording theirs again where none is), rather than issue beside a
// server that another layout let in. A lease whose layout is recorded
// renews.
func testSnowflakeLayoutChangedUnderLease(t *testing.T, h *harness) {
	s := h.migrated()
	ctx := context.Background()
	now := nowMs()
	a := claim(t, s, snowflake.Claim{Owner: "a#1", Workers: 4, TTL: time.Hour, NowMs: now, WatermarkMs: now + 3000, Layout: otherLayout},
		snowflake.Lease{WorkerID: 0, Owner: "a#1"})
	f := claimFixed(t, s, snowflake.FixedClaim{WorkerID: 3, Owner: "fixed:f#1", TTL: time.Hour, NowMs: now, WatermarkMs: now + 3000,
		Layout: otherLayout}, snowflake.Lease{WorkerID: 3, Owner: "fixed:f#1"})
	for _, l := range []snowflake.Lease{a, f} {
		if err := s.RenewWorker(ctx, l, time.Hour, now+4000); err != nil {
			t.Fatalf("RenewWorker(%+v) under its recorded layout: %v", l, err)
		}
	}
	h.exec("UPDATE leafd_snowflake_layout SET epoch_ms = epoch_ms + 1")
	for _, l := range []snowflake.Lease{a, f} {
		wantLeaseLost(t, "RenewWorker after the recorded epoch was edited", s.RenewWorker(ctx, l, time.Hour, now+5000))
	}
	h.exec("DELETE FROM leafd_snowflake_layout")
	for _, l := range []snowflake.Lease{a, f} {
		wantLeaseLost(t, "RenewWorker after the record was deleted", s.RenewWorker(ctx, l, time.Hour, now+5000))
	}
	if r := h.worker(0); r.watermarkMs != now+4000 {
		t.Fatalf("refused renewals moved the watermark: %+v", r)
	}
}

// gapLocked reports whether driver's claims of worker ids interleave: its
// locking reads of missing rows take gap locks that do not block each other
// (a row-locking SELECT, and no claim lock to serialise the claims), as
// MySQL's do.
func gapLocked(driver string) bool {
	d, ok := engine.Lookup(driver)
	return ok && d.LockSuffix != "" && d.ClaimLock == ""
}
