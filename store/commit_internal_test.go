package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/internal/testkit/testdb"
	"github.com/leafd/leafd/segment"
)

// These tests reach between Allocate's SELECT and its COMMIT (beforeCommit)
// to make a real database fail the transaction there.

func openRaw(t *testing.T, driver, dsn string) *sql.DB {
	t.Helper()
	raw, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	return raw
}

func mustExec(t *testing.T, db *sql.DB, query string, args ...any) {
	t.Helper()
	if _, err := db.Exec(query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

func readMaxID(t *testing.T, db *sql.DB, tag string) int64 {
	t.Helper()
	var v int64
	if err := db.QueryRow("SELECT max_id FROM leaf_alloc WHERE biz_tag = ?", tag).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func mustAllocate(t *testing.T, s *db, tag string, step int64, want segment.Allocation) {
	t.Helper()
	got, err := s.Allocate(context.Background(), tag, step)
	if err != nil || got != want {
		t.Fatalf("Allocate(%q, %d) = %+v, %v; want %+v", tag, step, got, err, want)
	}
}

func openMigratedMySQL(t *testing.T, dsn string) *db {
	t.Helper()
	s, err := openDB("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

// The connection dies between the UPDATE and the COMMIT: the COMMIT fails,
// Allocate hands out nothing and reports store_unavailable, and the server
// has rolled the transaction back.
func TestMySQLCommitFailsNoRange(t *testing.T) {
	dsn := testdb.MySQL(t)
	raw := openRaw(t, "mysql", dsn)
	s := openMigratedMySQL(t, dsn)
	mustExec(t, raw, "INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('t', 1, 10)")

	s.beforeCommit = func(ctx context.Context, tx *sqlx.Tx) error {
		var id int64
		if err := tx.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
			return err
		}
		_, err := raw.ExecContext(ctx, fmt.Sprintf("KILL %d", id))
		return err
	}
	a, err := s.Allocate(context.Background(), "t", 10)
	if err == nil {
		t.Fatalf("Allocate whose COMMIT failed returned %+v", a)
	}
	if code := leafd.ErrorCode(err); code != leafd.EStoreUnavailable {
		t.Fatalf("Allocate whose COMMIT failed: %v (code %q), want store_unavailable", err, code)
	}
	if got := readMaxID(t, raw, "t"); got != 1 {
		t.Fatalf("max_id = %d after a failed COMMIT, want 1", got)
	}
	s.beforeCommit = nil
	mustAllocate(t, s, "t", 10, segment.Allocation{Start: 1, End: 11, TableStep: 10})
}

// A real InnoDB deadlock aborts Allocate's first attempt: the store retries
// and the range it returns is the only one written.
func TestMySQLDeadlockRetried(t *testing.T) {
	dsn := testdb.MySQL(t)
	raw := openRaw(t, "mysql", dsn)
	s := openMigratedMySQL(t, dsn)
	mustExec(t, raw, "INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('t', 1, 10), ('u', 1, 10)")
	mustExec(t, raw, "CREATE TABLE ballast (n INT PRIMARY KEY)")

	ctx := context.Background()
	other, err := raw.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Rollback()
	// The other transaction is the heavier one, so that InnoDB chooses
	// Allocate's as the deadlock victim.
	for i := range 200 {
		if _, err := other.Exec("INSERT INTO ballast VALUES (?)", i); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := other.Exec("UPDATE leaf_alloc SET step = step WHERE biz_tag = 'u'"); err != nil {
		t.Fatal(err)
	}

	var attempts, victims atomic.Int32
	otherDone := make(chan error, 1)
	s.beforeCommit = func(ctx context.Context, tx *sqlx.Tx) error {
		if attempts.Add(1) > 1 {
			return nil
		}
		// Allocate holds t; the other transaction now waits for t ...
		go func() {
			_, err := other.Exec("UPDATE leaf_alloc SET step = step WHERE biz_tag = 't'")
			if err == nil {
				err = other.Rollback()
			}
			otherDone <- err
		}()
		waitForLockWait(t, raw)
		// ... and Allocate asks for u: a deadlock.
		_, err := tx.ExecContext(ctx, "UPDATE leaf_alloc SET step = step WHERE biz_tag = 'u'")
		var me *mysql.MySQLError
		if errors.As(err, &me) && me.Number == 1213 {
			victims.Add(1)
		}
		return err
	}
	mustAllocate(t, s, "t", 10, segment.Allocation{Start: 1, End: 11, TableStep: 10})
	if err := <-otherDone; err != nil {
		t.Fatalf("the other transaction: %v", err)
	}
	if victims.Load() != 1 || attempts.Load() != 2 {
		t.Fatalf("%d attempts, %d deadlock victims; want 2 attempts after 1 deadlock", attempts.Load(), victims.Load())
	}
	if got := readMaxID(t, raw, "t"); got != 11 {
		t.Fatalf("max_id = %d, want 11", got)
	}
}

// waitForLockWait returns once some transaction of the database's server
// waits for a lock, or after 10 seconds. Either way the deadlock follows:
// should the other transaction ask for its lock only after Allocate asked
// for its own, InnoDB still picks the lighter transaction, Allocate's, as
// the victim; the wait only makes the usual order the likely one. (Under
// the load of a whole CI run, the poll once saw no waiting transaction for
// 10 s while one was waiting.)
func waitForLockWait(t *testing.T, raw *sql.DB) {
	deadline := time.Now().Add(10 * time.Second)
	var err error
	for time.Now().Before(deadline) {
		var n int
		err = raw.QueryRow("SELECT COUNT(*) FROM information_schema.innodb_trx WHERE trx_state = 'LOCK WAIT'").Scan(&n)
		if err == nil && n > 0 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("no transaction seen waiting for the lock within 10s (last poll error: %v); going on", err)
}

// The session time zone is UTC whatever the DSN asked for.
func TestMySQLSessionUTC(t *testing.T) {
	cfg, err := mysql.ParseDSN(testdb.MySQL(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Params = map[string]string{"time_zone": "'+05:00'"}
	s, err := openDB("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var tz string
	if err := s.x.QueryRow("SELECT @@session.time_zone").Scan(&tz); err != nil {
		t.Fatal(err)
	}
	if tz != "+00:00" {
		t.Fatalf("session time_zone = %q, want +00:00", tz)
	}
}

// SQLite refuses the COMMIT (a deferred foreign key is violated when the
// transaction ends): Allocate hands out nothing, the row is unchanged, and
// the connection is clean for the next Allocate.
func TestSQLiteCommitFailsNoRange(t *testing.T) {
	dsn := testdb.SQLite(t)
	s, err := openDB("sqlite", dsn+"?_pragma=foreign_keys(1)")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.x.SetMaxOpenConns(1) // the next Allocate reuses the connection
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	raw := openRaw(t, "sqlite", dsn+"?_pragma=busy_timeout(10000)")
	mustExec(t, raw, "CREATE TABLE parent (id INTEGER PRIMARY KEY)")
	mustExec(t, raw, "CREATE TABLE child (parent_id INTEGER REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED)")
	mustExec(t, raw, "INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('t', 1, 10)")

	s.beforeCommit = func(ctx context.Context, tx *sqlx.Tx) error {
		_, err := tx.ExecContext(ctx, "INSERT INTO child VALUES (42)")
		return err
	}
	a, err := s.Allocate(context.Background(), "t", 10)
	if err == nil {
		t.Fatalf("Allocate whose COMMIT failed returned %+v", a)
	}
	if !strings.Contains(err.Error(), "FOREIGN KEY constraint failed") {
		t.Fatalf("Allocate: %v, want the COMMIT's foreign key error", err)
	}
	if got := readMaxID(t, raw, "t"); got != 1 {
		t.Fatalf("max_id = %d after a failed COMMIT, want 1", got)
	}
	s.beforeCommit = nil
	mustAllocate(t, s, "t", 10, segment.Allocation{Start: 1, End: 11, TableStep: 10})
}
