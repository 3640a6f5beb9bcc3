package store

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/internal/testkit/faultdriver"
	"github.com/leafd/leafd/internal/testkit/testdb"
	"github.com/leafd/leafd/segment"
	"github.com/leafd/leafd/snowflake"
)

// These tests put failures of the connection at the steps of leafd's
// transactions through the fault-injecting driver
// (internal/testkit/faultdriver), against the real databases of the
// tests, and compare what the store returned with what the database
// holds. (An engine's own errors are injected by its package's tests.)

// openFaulty opens a store of engine driver on dsn through the
// fault-injecting driver, with opts, and returns it with its faults.
func openFaulty(t *testing.T, driver, dsn string, opts ...Option) (*db, *faultdriver.Faults) {
	t.Helper()
	f := &faultdriver.Faults{}
	s, err := openDB(driver, dsn, append(opts, func(o *options) { o.connector = f.Wrap })...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, f
}

// wantCommitted fails t unless a is want and is what the database holds:
// max_id and the high-water mark are its end.
func wantCommitted(t *testing.T, a segment.Allocation, maxID, mark int64, want segment.Allocation) {
	t.Helper()
	if a != want || maxID != a.End || mark != a.End {
		t.Fatalf("returned %+v, the database holds max_id %d and high-water mark %d; want %+v, both its end", a, maxID, mark, want)
	}
}

// wantNothingWritten fails t unless the tag's row is as created (max_id 1)
// and has no high-water mark.
func wantNothingWritten(t *testing.T, maxID, mark int64) {
	t.Helper()
	if maxID != 1 || mark != 0 {
		t.Fatalf("max_id %d, high-water mark %d after a failed allocation; want 1 and none", maxID, mark)
	}
}

// readMark returns tag's high-water mark, 0 when it has none.
func readMark(t *testing.T, raw *sqlx.DB, tag string) int64 {
	t.Helper()
	var v int64
	err := raw.QueryRow(raw.Rebind("SELECT max_id FROM leafd_tag_highwater WHERE biz_tag = ?"), tag).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// testClaim is a claim of one of 64 worker ids for owner, as of now.
func testClaim(owner string) snowflake.Claim {
	now := time.Now().UnixMilli()
	return snowflake.Claim{Owner: owner, Workers: 64, TTL: time.Minute, NowMs: now, WatermarkMs: now}
}

// heldBy returns the worker ids whose row has owner.
func heldBy(t *testing.T, raw *sqlx.DB, owner string) []int64 {
	t.Helper()
	var ids []int64
	if err := raw.Select(&ids, raw.Rebind("SELECT worker_id FROM leaf_worker WHERE owner = ? ORDER BY worker_id"), owner); err != nil {
		t.Fatal(err)
	}
	return ids
}

// A COMMIT whose answer is lost (the connection is cut after the server
// committed) hands out nothing: the range it committed is never used, the
// next allocation gets the one after it. With a fallback address the
// allocation moves on at once, as a fresh transaction, and returns that
// next range itself. A claim whose COMMIT answer is lost is not repeated
// (it would hold a second worker id). On every engine reached over
// connections that can be cut.
func TestCommitOutcomeUnknown(t *testing.T) {
	testdb.Each(t, FallbackDrivers(), func(t *testing.T, driver, dsn string) {
		ctx := context.Background()
		raw := testdb.SQL(t, driver, dsn)
		single, f1 := openFaulty(t, driver, dsn)
		pair, f2 := openFaulty(t, driver, dsn, WithFallbacks(dsn), WithLogger(testLogger(t)))
		if err := single.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		mustExec(t, raw, "INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('t', 1, 10), ('u', 1, 10), ('v', 1, 10)")

		t.Run("AfterCommit", func(t *testing.T) {
			f1.Reset()
			f1.Inject(faultdriver.Commit, faultdriver.ErrLoseAfterCommit, 1)
			a, err := single.Allocate(ctx, "t", 10)
			if code := leafd.ErrorCode(err); code != leafd.EStoreUnavailable {
				t.Fatalf("Allocate whose COMMIT answer was lost = %+v, %v (code %q); want store_unavailable", a, err, code)
			}
			if n := f1.Count(faultdriver.Begin); n != 1 {
				t.Fatalf("%d attempts, want 1", n)
			}
			// It did commit: [1, 11) is spent, and never handed out.
			if maxID, mark := readMaxID(t, raw, "t"), readMark(t, raw, "t"); maxID != 11 || mark != 11 {
				t.Fatalf("max_id %d, mark %d; want the lost COMMIT's 11", maxID, mark)
			}
			a, err = single.Allocate(ctx, "t", 10)
			if err != nil {
				t.Fatal(err)
			}
			wantCommitted(t, a, readMaxID(t, raw, "t"), readMark(t, raw, "t"), segment.Allocation{Start: 11, End: 21, TableStep: 10})
			f1.CheckTransactions(t)
		})

		t.Run("BeforeCommit", func(t *testing.T) {
			f1.Reset()
			f1.Inject(faultdriver.Commit, faultdriver.ErrLoseBeforeCommit, 1)
			if _, err := single.Allocate(ctx, "u", 10); leafd.ErrorCode(err) != leafd.EStoreUnavailable {
				t.Fatalf("Allocate whose connection was cut before COMMIT: %v, want store_unavailable", err)
			}
			wantNothingWritten(t, readMaxID(t, raw, "u"), readMark(t, raw, "u"))
		})

		t.Run("AfterCommitWithFallback", func(t *testing.T) {
			f2.Reset()
			f2.Inject(faultdriver.Commit, faultdriver.ErrLoseAfterCommit, 1)
			a, err := pair.Allocate(ctx, "v", 10)
			if err != nil {
				t.Fatal(err)
			}
			if n := f2.Count(faultdriver.Begin); n != 2 {
				t.Fatalf("%d attempts, want 2", n)
			}
			wantCommitted(t, a, readMaxID(t, raw, "v"), readMark(t, raw, "v"), segment.Allocation{Start: 11, End: 21, TableStep: 10})
			f2.CheckTransactions(t)
		})

		t.Run("ClaimNotRepeated", func(t *testing.T) {
			f2.Reset()
			f2.Inject(faultdriver.Commit, faultdriver.ErrLoseAfterCommit, 1)
			claim := testClaim("test/lost-commit")
			if l, err := pair.ClaimWorker(ctx, claim); err == nil {
				t.Fatalf("ClaimWorker whose COMMIT answer was lost = %+v, want an error", l)
			}
			if n := f2.Count(faultdriver.Begin); n != 1 {
				t.Fatalf("%d attempts, want 1: a claim is not repeated after its COMMIT's answer was lost", n)
			}
			if held := heldBy(t, raw, claim.Owner); len(held) != 1 {
				t.Fatalf("the database has %q on %v; want the one worker id the lost COMMIT took", claim.Owner, held)
			}
		})
	})
}
