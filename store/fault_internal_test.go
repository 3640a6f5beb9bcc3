package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/internal/testkit/testdb"
	"github.com/leafd/leafd/segment"
	"github.com/leafd/leafd/snowflake"
	"github.com/leafd/leafd/store/internal/engine"
)

// These tests put the errors of engines that cannot run here (TiDB, Percona
// XtraDB Cluster, Vitess), and every error of the error table, at every step
// of leafd's transactions through the fault-injecting driver, against the
// real MariaDB of the tests, and compare what the store returned with what
// the database holds.

// tidbCodes are TiDB's own error numbers with a message as TiDB words them,
// and whether leafd runs the whole transaction again (true) or gives up.
// The expectations are written here, not read from the error table, so that
// a change of the table that changes them fails.
var tidbCodes = []struct {
	number uint16
	msg    string
	retry  bool
}{
	{8002, "[tikv:8002]can not retry select for update statement", true},
	{8005, "Write Conflict, txnStartTS is stale", true},
	{8022, "Error: KV error safe to retry [try again later]", true},
	{8027, "Information schema is out of date: schema failed to update in 1 lease, please make sure TiDB can connect to TiKV", true},
	{8028, "Information schema is changed during the execution of the statement [try again later]", true},
	{9001, "PD server timeout", true},
	{9002, "TiKV server timeout", true},
	{9003, "TiKV server is busy", true},
	{9004, "Resolve lock timeout", true},
	{9005, "Region is unavailable", true},
	{9007, "Write conflict, txnStartTS=451, conflictStartTS=450, conflictCommitTS=452, key={tableID=62, handle=1} primary={} [try again later]", true},
	{8004, "Transaction is too large, size: 104857600", false},
	{9006, "GC life time is shorter than transaction duration", false},
}

// retryBound bounds the time a transaction that every attempt fails takes
// to fail: maxAttempts attempts, with at most backoffMax between two, and
// room for a loaded machine.
const retryBound = 5 * time.Second

// TestTiDBCodesInTable: the error table says of TiDB's codes what tidbCodes
// says.
func TestTiDBCodesInTable(t *testing.T) {
	classify := lookup("mysql").Classify
	for _, c := range tidbCodes {
		if got := classify(mysqlErr(c.number, "HY000", c.msg)).Class == engine.ClassRetry; got != c.retry {
			t.Errorf("%d: retried %v in the error table, want %v", c.number, got, c.retry)
		}
	}
}

// allocSteps are the steps of an allocation's transaction, in order.
var allocSteps = []string{stepBegin, stepUpdate, stepSelect, stepMark, stepCommit}

// TestTiDBErrorsAllocate: every TiDB code at every step of an allocation,
// once and on every attempt. A range returned is exactly the one the
// database committed (max_id and the high-water mark are its end, and only
// one attempt committed); a code retried on every attempt ends in
// store_unavailable after maxAttempts attempts, each from its BEGIN, within
// retryBound, having written nothing; a code given up on is tried once.
func TestTiDBErrorsAllocate(t *testing.T) {
	for _, c := range tidbCodes {
		t.Run(strconv.Itoa(int(c.number)), func(t *testing.T) {
			t.Parallel()
			dsn := testdb.MySQL(t)
			raw := openRaw(t, "mysql", dsn)
			s, f := openFaulty(t, dsn)
			if err := s.Migrate(context.Background()); err != nil {
				t.Fatal(err)
			}
			injected := mysqlErr(c.number, "HY000", c.msg)
			for i, step := range allocSteps {
				for _, times := range []int{1, -1} {
					tag := fmt.Sprintf("s%d_%d", i, times+1)
					t.Run(fmt.Sprintf("%s/times=%d", step, times), func(t *testing.T) {
						mustExec(t, raw, "INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES (?, 1, 10)", tag)
						f.reset()
						f.inject(step, injected, times)
						start := time.Now()
						a, err := s.Allocate(context.Background(), tag, 10)
						elapsed := time.Since(start)
						attempts := f.count(stepBegin)
						f.checkTransactions(t)
						maxID, mark := readMaxID(t, raw, tag), readMark(t, raw, tag)
						switch {
						case c.retry && times == 1:
							if err != nil || attempts != 2 {
								t.Fatalf("Allocate = %+v, %v after %d attempts; want a range after 2", a, err, attempts)
							}
							wantCommitted(t, a, maxID, mark, segment.Allocation{Start: 1, End: 11, TableStep: 10})
						case c.retry:
							if code := leafd.ErrorCode(err); code != leafd.EStoreUnavailable || attempts != maxAttempts {
								t.Fatalf("Allocate = %+v, %v (code %q) after %d attempts; want store_unavailable after %d", a, err, code, attempts, maxAttempts)
							}
							if !strings.Contains(leafd.ErrorMessage(err), fmt.Sprintf("retried %d times", maxAttempts-1)) {
								t.Errorf("message %q does not say how often it was retried", leafd.ErrorMessage(err))
							}
							if elapsed > retryBound {
								t.Errorf("%d attempts took %v, more than %v", attempts, elapsed, retryBound)
							}
							wantNothingWritten(t, maxID, mark)
						default:
							if err == nil || leafd.ErrorCode(err) == leafd.EStoreUnavailable || attempts != 1 {
								t.Fatalf("Allocate = %+v, %v (code %q) after %d attempts; want an internal error after 1", a, err, leafd.ErrorCode(err), attempts)
							}
							wantNothingWritten(t, maxID, mark)
						}
						if commits := f.count(stepCommit); commits > attempts {
							t.Errorf("%d COMMITs for %d attempts", commits, attempts)
						}
					})
				}
			}
		})
	}
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
func readMark(t *testing.T, db *sql.DB, tag string) int64 {
	t.Helper()
	var v int64
	err := db.QueryRow("SELECT max_id FROM leafd_tag_highwater WHERE biz_tag = ?", tag).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// claimSteps are the steps of a worker id's claim, in order.
var claimSteps = []string{stepBegin, stepClock, stepRows, stepLayout, stepClaim, stepCommit}

// TestTiDBErrorsClaimWorker: every TiDB code at every step of a worker
// id's claim (whose SELECT … FOR UPDATE is what 8002 is about), once and on
// every attempt, then at the renewal. A lease returned is held in the
// database by its owner and no other row is; a claim that fails holds
// nothing; retries and their bound are those of an allocation.
func TestTiDBErrorsClaimWorker(t *testing.T) {
	for _, c := range tidbCodes {
		t.Run(strconv.Itoa(int(c.number)), func(t *testing.T) {
			t.Parallel()
			dsn := testdb.MySQL(t)
			raw := openRaw(t, "mysql", dsn)
			s, f := openFaulty(t, dsn)
			ctx := context.Background()
			if err := s.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			injected := mysqlErr(c.number, "HY000", c.msg)
			for i, step := range claimSteps {
				for _, times := range []int{1, -1} {
					t.Run(fmt.Sprintf("%s/times=%d", step, times), func(t *testing.T) {
						claim := testClaim(fmt.Sprintf("test/%d/%d/%d", c.number, i, times))
						f.reset()
						f.inject(step, injected, times)
						start := time.Now()
						l, err := s.ClaimWorker(ctx, claim)
						elapsed := time.Since(start)
						attempts := f.count(stepBegin)
						f.checkTransactions(t)
						held := heldBy(t, raw, claim.Owner)
						switch {
						case c.retry && times == 1:
							if err != nil || attempts != 2 {
								t.Fatalf("ClaimWorker = %+v, %v after %d attempts; want a lease after 2", l, err, attempts)
							}
							if len(held) != 1 || held[0] != l.WorkerID {
								t.Fatalf("lease of worker id %d; the database has %q on %v", l.WorkerID, claim.Owner, held)
							}
							// Released, so that the next claim takes the
							// same worker id through its UPDATE.
							if err := s.ReleaseWorker(ctx, l, 1); err != nil {
								t.Fatal(err)
							}
						case c.retry:
							if code := leafd.ErrorCode(err); code != leafd.EStoreUnavailable || attempts != maxAttempts {
								t.Fatalf("ClaimWorker = %+v, %v (code %q) after %d attempts; want store_unavailable after %d", l, err, code, attempts, maxAttempts)
							}
							if elapsed > retryBound {
								t.Errorf("%d attempts took %v, more than %v", attempts, elapsed, retryBound)
							}
						default:
							if err == nil || leafd.ErrorCode(err) == leafd.EStoreUnavailable || attempts != 1 {
								t.Fatalf("ClaimWorker = %+v, %v (code %q) after %d attempts; want an internal error after 1", l, err, leafd.ErrorCode(err), attempts)
							}
						}
						if err != nil && len(held) != 0 {
							t.Fatalf("a failed claim left %q on worker ids %v", claim.Owner, held)
						}
					})
				}
			}

			t.Run("renew", func(t *testing.T) {
				claim := testClaim(fmt.Sprintf("test/%d/renew", c.number))
				f.reset()
				l, err := s.ClaimWorker(ctx, claim)
				if err != nil {
					t.Fatal(err)
				}
				for _, times := range []int{1, -1} {
					f.reset()
					f.inject(stepRenew, injected, times)
					err := s.RenewWorker(ctx, l, time.Minute, claim.WatermarkMs+1)
					attempts := f.count(stepRenew)
					switch {
					case c.retry && times == 1:
						if err != nil || attempts != 2 {
							t.Fatalf("RenewWorker = %v after %d attempts; want success after 2", err, attempts)
						}
					case c.retry:
						if leafd.ErrorCode(err) != leafd.EStoreUnavailable || attempts != maxAttempts {
							t.Fatalf("RenewWorker = %v after %d attempts; want store_unavailable after %d", err, attempts, maxAttempts)
						}
					default:
						if err == nil || attempts != 1 {
							t.Fatalf("RenewWorker = %v after %d attempts; want an error after 1", err, attempts)
						}
					}
				}
			})
		})
	}
}

// testClaim is a claim of one of 64 worker ids for owner, as of now.
func testClaim(owner string) snowflake.Claim {
	now := time.Now().UnixMilli()
	return snowflake.Claim{Owner: owner, Workers: 64, TTL: time.Minute, NowMs: now, WatermarkMs: now}
}

// heldBy returns the worker ids whose row has owner.
func heldBy(t *testing.T, db *sql.DB, owner string) []int64 {
	t.Helper()
	rows, err := db.Query("SELECT worker_id FROM leaf_worker WHERE owner = ? ORDER BY worker_id", owner)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return ids
}

// TestErrorTableAllocate: every MySQL-family row of the error table,
// injected at an allocation's UPDATE on every attempt, is tried as its
// class says — maxAttempts times when retried, twice when the store has a
// fallback address and the node does not serve, once otherwise — and
// answered with the row's words.
func TestErrorTableAllocate(t *testing.T) {
	dsn := testdb.MySQL(t)
	raw := openRaw(t, "mysql", dsn)
	single, f1 := openFaulty(t, dsn)
	// Two addresses of one database: a node that does not serve is left
	// for the other.
	pair, f2 := openFaulty(t, dsn, WithFallbacks(dsn), WithLogger(testLogger(t)))
	if err := single.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range errorRows() {
		if r.engine != "mysql" {
			continue
		}
		number, state := 0, "HY000"
		if s, ok := strings.CutPrefix(r.Code, "SQLSTATE "); ok {
			number, state = 1, s // a number no row names
		} else {
			number, _ = strconv.Atoi(r.Code)
		}
		msg := "injected " + r.Name
		if r.Match != "" {
			msg = "injected: " + r.Match + " " + r.Name
		}
		injected := mysqlErr(uint16(number), state, msg)
		for _, c := range []struct {
			name string
			s    *db
			f    *faults
		}{{"single", single, f1}, {"fallback", pair, f2}} {
			n++
			tag := fmt.Sprintf("r%d", n)
			t.Run(fmt.Sprintf("%s/%s/%s", r.Code, r.Match, c.name), func(t *testing.T) {
				mustExec(t, raw, "INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES (?, 1, 10)", tag)
				c.f.reset()
				c.f.inject(stepUpdate, injected, -1)
				start := time.Now()
				_, err := c.s.Allocate(context.Background(), tag, 10)
				elapsed := time.Since(start)
				attempts := c.f.count(stepBegin)
				want := 1
				switch {
				case r.Class == engine.ClassRetry:
					want = maxAttempts
				case r.Class == engine.ClassUnavailable && c.name == "fallback":
					want = 2
				}
				if err == nil || attempts != want {
					t.Fatalf("Allocate: %v after %d attempts, want an error after %d", err, attempts, want)
				}
				if elapsed > retryBound {
					t.Errorf("%d attempts took %v, more than %v", attempts, elapsed, retryBound)
				}
				switch r.Class {
				case engine.ClassRetry, engine.ClassUnavailable, engine.ClassLocked:
					v := r.Verdict(msg, "", "", lookup("mysql").Pool.MaxOpen)
					wantMessage(t, err, v.Cause, v.Hint)
				default:
					if code := leafd.ErrorCode(err); code != leafd.EInternal || !strings.Contains(err.Error(), msg) {
						t.Fatalf("Allocate: %v (code %q), want an internal error with the server's message", err, code)
					}
				}
				wantNothingWritten(t, readMaxID(t, raw, tag), readMark(t, raw, tag))
			})
		}
	}
}

// A COMMIT whose answer is lost (the connection is cut after the server
// committed) hands out nothing: the range it committed is never used, the
// next allocation gets the one after it. With a fallback address the
// allocation moves on at once, as a fresh transaction, and returns that
// next range itself. A claim whose COMMIT answer is lost is not repeated
// (it would hold a second worker id).
func TestCommitOutcomeUnknown(t *testing.T) {
	ctx := context.Background()
	dsn := testdb.MySQL(t)
	raw := openRaw(t, "mysql", dsn)
	single, f1 := openFaulty(t, dsn)
	pair, f2 := openFaulty(t, dsn, WithFallbacks(dsn), WithLogger(testLogger(t)))
	if err := single.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	mustExec(t, raw, "INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('t', 1, 10), ('u', 1, 10), ('v', 1, 10)")

	t.Run("AfterCommit", func(t *testing.T) {
		f1.reset()
		f1.inject(stepCommit, errLoseAfterCommit, 1)
		a, err := single.Allocate(ctx, "t", 10)
		if code := leafd.ErrorCode(err); code != leafd.EStoreUnavailable {
			t.Fatalf("Allocate whose COMMIT answer was lost = %+v, %v (code %q); want store_unavailable", a, err, code)
		}
		if n := f1.count(stepBegin); n != 1 {
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
		f1.checkTransactions(t)
	})

	t.Run("BeforeCommit", func(t *testing.T) {
		f1.reset()
		f1.inject(stepCommit, errLoseBeforeCommit, 1)
		if _, err := single.Allocate(ctx, "u", 10); leafd.ErrorCode(err) != leafd.EStoreUnavailable {
			t.Fatalf("Allocate whose connection was cut before COMMIT: %v, want store_unavailable", err)
		}
		wantNothingWritten(t, readMaxID(t, raw, "u"), readMark(t, raw, "u"))
	})

	t.Run("AfterCommitWithFallback", func(t *testing.T) {
		f2.reset()
		f2.inject(stepCommit, errLoseAfterCommit, 1)
		a, err := pair.Allocate(ctx, "v", 10)
		if err != nil {
			t.Fatal(err)
		}
		if n := f2.count(stepBegin); n != 2 {
			t.Fatalf("%d attempts, want 2", n)
		}
		wantCommitted(t, a, readMaxID(t, raw, "v"), readMark(t, raw, "v"), segment.Allocation{Start: 11, End: 21, TableStep: 10})
		f2.checkTransactions(t)
	})

	t.Run("ClaimNotRepeated", func(t *testing.T) {
		f2.reset()
		f2.inject(stepCommit, errLoseAfterCommit, 1)
		claim := testClaim("test/lost-commit")
		if l, err := pair.ClaimWorker(ctx, claim); err == nil {
			t.Fatalf("ClaimWorker whose COMMIT answer was lost = %+v, want an error", l)
		}
		if n := f2.count(stepBegin); n != 1 {
			t.Fatalf("%d attempts, want 1: a claim is not repeated after its COMMIT's answer was lost", n)
		}
		if held := heldBy(t, raw, claim.Owner); len(held) != 1 {
			t.Fatalf("the database has %q on %v; want the one worker id the lost COMMIT took", claim.Owner, held)
		}
	})
}

// TiDB checks uniqueness at COMMIT in optimistic transactions: another
// server's claim of the same worker id fails this claim's COMMIT with 1062,
// and the claim starts again; a tag created meanwhile makes CreateTag's
// COMMIT fail so, which is tag_exists.
func TestDuplicateAtCommit(t *testing.T) {
	ctx := context.Background()
	dsn := testdb.MySQL(t)
	raw := openRaw(t, "mysql", dsn)
	s, f := openFaulty(t, dsn)
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	dup := mysqlErr(1062, "23000", "Duplicate entry '0' for key 'PRIMARY'")

	f.reset()
	f.inject(stepCommit, dup, 1)
	claim := testClaim("test/dup-at-commit")
	l, err := s.ClaimWorker(ctx, claim)
	if err != nil || f.count(stepBegin) != 2 {
		t.Fatalf("ClaimWorker = %+v, %v after %d attempts; want a lease after 2", l, err, f.count(stepBegin))
	}
	if held := heldBy(t, raw, claim.Owner); len(held) != 1 || held[0] != l.WorkerID {
		t.Fatalf("lease of worker id %d; the database has %q on %v", l.WorkerID, claim.Owner, held)
	}

	f.reset()
	f.inject(stepCommit, dup, 1)
	_, err = s.CreateTag(ctx, leafd.Tag{Name: "order", Step: 10})
	if code := leafd.ErrorCode(err); code != leafd.ETagExists {
		t.Fatalf("CreateTag whose COMMIT hit the key: %v (code %q), want tag_exists", err, code)
	}
	var n int
	if err := raw.QueryRow("SELECT COUNT(*) FROM leaf_alloc WHERE biz_tag = 'order'").Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d rows of the tag (%v) after a COMMIT that failed, want none", n, err)
	}
}
