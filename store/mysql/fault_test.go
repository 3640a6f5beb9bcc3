package mysql_test

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/internal/testkit/faultdriver"
	"github.com/leafd/leafd/internal/testkit/testdb"
	"github.com/leafd/leafd/segment"
	"github.com/leafd/leafd/store"
	"github.com/leafd/leafd/store/internal/engine"
	"github.com/leafd/leafd/store/internal/testhook"
	"github.com/leafd/leafd/store/storetest"
)

// These tests put the errors of MySQL-family engines that cannot run here
// (TiDB, Percona XtraDB Cluster, Vitess), and every MySQL row of the error
// table, at every step of leafd's transactions through the fault-injecting
// driver (internal/testkit/faultdriver), against the real MariaDB of the
// tests, and compare what the store returned with what the database holds.

// clock is the step of a worker id's claim that reads MySQL's clock.
var clock = faultdriver.Step{Name: "clock", Is: func(op faultdriver.Op) bool {
	return op.Kind == "query" && strings.HasPrefix(strings.TrimSpace(op.Query), "SELECT CAST(UNIX_TIMESTAMP")
}}

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
// to fail: testhook.MaxAttempts attempts, with at most the store's longest
// backoff between two, and room for a loaded machine.
const retryBound = 5 * time.Second

// dialect is MySQL's, as registered.
func dialect(t *testing.T) *engine.Dialect {
	t.Helper()
	d, ok := engine.Lookup("mysql")
	if !ok {
		t.Fatal("the mysql engine is not registered")
	}
	return d
}

// TestTiDBCodesInTable: the error table says of TiDB's codes what tidbCodes
// says.
func TestTiDBCodesInTable(t *testing.T) {
	classify := dialect(t).Classify
	for _, c := range tidbCodes {
		if got := classify(mysqlErr(c.number, "HY000", c.msg)).Class == engine.ClassRetry; got != c.retry {
			t.Errorf("%d: retried %v in the error table, want %v", c.number, got, c.retry)
		}
	}
}

// allocSteps are the steps of an allocation's transaction, in order.
var allocSteps = []faultdriver.Step{faultdriver.Begin, faultdriver.Update, faultdriver.Select, faultdriver.Mark, faultdriver.Commit}

// TestTiDBErrorsAllocate: every TiDB code at every step of an allocation,
// once and on every attempt. A range returned is exactly the one the
// database committed (max_id and the high-water mark are its end, and only
// one attempt committed); a code retried on every attempt ends in
// store_unavailable after MaxAttempts attempts, each from its BEGIN, within
// retryBound, having written nothing; a code given up on is tried once.
func TestTiDBErrorsAllocate(t *testing.T) {
	maxAttempts := testhook.MaxAttempts
	for _, c := range tidbCodes {
		t.Run(strconv.Itoa(int(c.number)), func(t *testing.T) {
			t.Parallel()
			dsn := testdb.MySQL(t)
			raw := openRaw(t, dsn)
			s, f := openFaulty(t, dsn)
			if err := s.Migrate(context.Background()); err != nil {
				t.Fatal(err)
			}
			injected := mysqlErr(c.number, "HY000", c.msg)
			for i, step := range allocSteps {
				for _, times := range []int{1, -1} {
					tag := fmt.Sprintf("s%d_%d", i, times+1)
					t.Run(fmt.Sprintf("%s/times=%d", step, times), func(t *testing.T) {
						exec(t, raw, "INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES (?, 1, 10)", tag)
						f.Reset()
						f.Inject(step, injected, times)
						start := time.Now()
						a, err := s.Allocate(context.Background(), tag, 10)
						elapsed := time.Since(start)
						attempts := f.Count(faultdriver.Begin)
						f.CheckTransactions(t)
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
						if commits := f.Count(faultdriver.Commit); commits > attempts {
							t.Errorf("%d COMMITs for %d attempts", commits, attempts)
						}
					})
				}
			}
		})
	}
}

// claimSteps are the steps of a worker id's claim, in order.
var claimSteps = []faultdriver.Step{faultdriver.Begin, clock, faultdriver.Rows, faultdriver.Layout, faultdriver.Claim, faultdriver.Commit}

// TestTiDBErrorsClaimWorker: every TiDB code at every step of a worker
// id's claim (whose SELECT … FOR UPDATE is what 8002 is about), once and on
// every attempt, then at the renewal. A lease returned is held in the
// database by its owner and no other row is; a claim that fails holds
// nothing; retries and their bound are those of an allocation.
func TestTiDBErrorsClaimWorker(t *testing.T) {
	maxAttempts := testhook.MaxAttempts
	for _, c := range tidbCodes {
		t.Run(strconv.Itoa(int(c.number)), func(t *testing.T) {
			t.Parallel()
			dsn := testdb.MySQL(t)
			raw := openRaw(t, dsn)
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
						f.Reset()
						f.Inject(step, injected, times)
						start := time.Now()
						l, err := s.ClaimWorker(ctx, claim)
						elapsed := time.Since(start)
						attempts := f.Count(faultdriver.Begin)
						f.CheckTransactions(t)
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
				f.Reset()
				l, err := s.ClaimWorker(ctx, claim)
				if err != nil {
					t.Fatal(err)
				}
				for _, times := range []int{1, -1} {
					f.Reset()
					f.Inject(faultdriver.Renew, injected, times)
					err := s.RenewWorker(ctx, l, time.Minute, claim.WatermarkMs+1)
					attempts := f.Count(faultdriver.Renew)
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

// TestErrorTableAllocate: every MySQL row of the error table, injected at
// an allocation's UPDATE on every attempt, is tried as its class says —
// MaxAttempts times when retried, twice when the store has a fallback
// address and the node does not serve, once otherwise — and answered with
// the row's words.
func TestErrorTableAllocate(t *testing.T) {
	d := dialect(t)
	dsn := testdb.MySQL(t)
	raw := openRaw(t, dsn)
	single, f1 := openFaulty(t, dsn)
	// Two addresses of one database: a node that does not serve is left
	// for the other.
	pair, f2 := openFaulty(t, dsn, store.WithFallbacks(dsn), store.WithLogger(slog.New(slog.NewTextHandler(t.Output(), nil))))
	if err := single.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range d.Rows {
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
			s    store.Store
			f    *faultdriver.Faults
		}{{"single", single, f1}, {"fallback", pair, f2}} {
			n++
			tag := fmt.Sprintf("r%d", n)
			t.Run(fmt.Sprintf("%s/%s/%s", r.Code, r.Match, c.name), func(t *testing.T) {
				exec(t, raw, "INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES (?, 1, 10)", tag)
				c.f.Reset()
				c.f.Inject(faultdriver.Update, injected, -1)
				start := time.Now()
				_, err := c.s.Allocate(context.Background(), tag, 10)
				elapsed := time.Since(start)
				attempts := c.f.Count(faultdriver.Begin)
				want := 1
				switch {
				case r.Class == engine.ClassRetry:
					want = testhook.MaxAttempts
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
					v := r.Verdict(msg, "", "", d.Pool.MaxOpen)
					storetest.WantUnavailable(t, err, v.Cause, v.Hint)
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

// TiDB checks uniqueness at COMMIT in optimistic transactions: another
// server's claim of the same worker id fails this claim's COMMIT with 1062,
// and the claim starts again; a tag created meanwhile makes CreateTag's
// COMMIT fail so, which is tag_exists.
func TestDuplicateAtCommit(t *testing.T) {
	ctx := context.Background()
	dsn := testdb.MySQL(t)
	raw := openRaw(t, dsn)
	s, f := openFaulty(t, dsn)
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	dup := mysqlErr(1062, "23000", "Duplicate entry '0' for key 'PRIMARY'")

	f.Reset()
	f.Inject(faultdriver.Commit, dup, 1)
	claim := testClaim("test/dup-at-commit")
	l, err := s.ClaimWorker(ctx, claim)
	if err != nil || f.Count(faultdriver.Begin) != 2 {
		t.Fatalf("ClaimWorker = %+v, %v after %d attempts; want a lease after 2", l, err, f.Count(faultdriver.Begin))
	}
	if held := heldBy(t, raw, claim.Owner); len(held) != 1 || held[0] != l.WorkerID {
		t.Fatalf("lease of worker id %d; the database has %q on %v", l.WorkerID, claim.Owner, held)
	}

	f.Reset()
	f.Inject(faultdriver.Commit, dup, 1)
	_, err = s.CreateTag(ctx, leafd.Tag{Name: "order", Step: 10})
	if code := leafd.ErrorCode(err); code != leafd.ETagExists {
		t.Fatalf("CreateTag whose COMMIT hit the key: %v (code %q), want tag_exists", err, code)
	}
	var n int
	if err := raw.QueryRow("SELECT COUNT(*) FROM leaf_alloc WHERE biz_tag = 'order'").Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d rows of the tag (%v) after a COMMIT that failed, want none", n, err)
	}
}
