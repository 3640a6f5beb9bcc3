package mysql_test

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
	"github.com/leafd/leafd/store"
	"github.com/leafd/leafd/store/internal/engine"
)

// These tests reach between Allocate's SELECT and its COMMIT (beforeCommit)
// to make a real MySQL fail the transaction there.

// The connection dies between the UPDATE and the COMMIT: the COMMIT fails,
// Allocate hands out nothing and reports store_unavailable, and the server
// has rolled the transaction back.
func TestMySQLCommitFailsNoRange(t *testing.T) {
	dsn := testdb.MySQL(t)
	raw := openRaw(t, dsn)
	s := openMigrated(t, dsn)
	exec(t, raw, "INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('t', 1, 10)")

	beforeCommit(s, func(ctx context.Context, tx *sqlx.Tx) error {
		var id int64
		if err := tx.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
			return err
		}
		_, err := raw.ExecContext(ctx, fmt.Sprintf("KILL %d", id))
		return err
	})
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
	beforeCommit(s, nil)
	mustAllocate(t, s, "t", 10, segment.Allocation{Start: 1, End: 11, TableStep: 10})
}

// A real InnoDB deadlock aborts Allocate's first attempt: the store retries
// and the range it returns is the only one written.
func TestMySQLDeadlockRetried(t *testing.T) {
	dsn := testdb.MySQL(t)
	raw := openRaw(t, dsn)
	s := openMigrated(t, dsn)
	exec(t, raw, "INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('t', 1, 10), ('u', 1, 10)")
	exec(t, raw, "CREATE TABLE ballast (n INT PRIMARY KEY)")

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
	beforeCommit(s, func(ctx context.Context, tx *sqlx.Tx) error {
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
	})
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
	cfg := mysqlConfig(t, testdb.MySQL(t))
	cfg.Params = map[string]string{"time_zone": "'+05:00'"}
	s := openStore(t, cfg.FormatDSN())
	var tz string
	if err := pool(s).QueryRow("SELECT @@session.time_zone").Scan(&tz); err != nil {
		t.Fatal(err)
	}
	if tz != "+00:00" {
		t.Fatalf("session time_zone = %q, want +00:00", tz)
	}
}

func TestMySQLDialectCheck(t *testing.T) {
	d, _ := engine.Lookup("mysql")
	for _, dsn := range []string{"", "not a dsn", "root@tcp(127.0.0.1:3306)/"} {
		if err := d.Check(dsn); err == nil {
			t.Errorf("CheckMySQLDSN(%q) = nil, want an error", dsn)
		}
	}
	for _, dsn := range []string{"root@tcp(127.0.0.1:3306)/leafd", "root@tcp(127.0.0.1:3306)/leafd?charset=utf8mb4,utf8"} {
		if err := d.Check(dsn); err != nil {
			t.Errorf("CheckMySQLDSN(%q): %v", dsn, err)
		}
	}
	// Quoting arguments into SQL is not safe in these character sets.
	if err := d.Check("root@tcp(127.0.0.1:3306)/leafd?charset=gbk"); err == nil || !strings.Contains(err.Error(), "charset=gbk") {
		t.Errorf("CheckMySQLDSN with charset=gbk: %v, want an error naming it", err)
	}
	_, err := store.Open("mysql", "root@tcp(127.0.0.1:3306)/leafd", store.WithFallbacks("root@tcp(127.0.0.1:3307)/"))
	if err == nil || !strings.Contains(err.Error(), "fallback address 0") {
		t.Errorf("Open with a fallback naming no database: %v, want an error naming fallback address 0", err)
	}
}

// goose's version table without its first row, as servers that migrate at
// once through different Galera nodes can leave it (GET_LOCK holds on one
// node only): Migrate puts the row back instead of failing for good.
func TestMigrateHealsEmptyVersionTable(t *testing.T) {
	dsn := testdb.MySQL(t)
	s := openMigrated(t, dsn)
	raw := openRaw(t, dsn)
	exec(t, raw, "INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('t', 1, 10)")
	exec(t, raw, "DELETE FROM goose_db_version")
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatalf("Migrate with an empty version table: %v", err)
	}
	var zero int
	if err := raw.QueryRow("SELECT COUNT(*) FROM goose_db_version WHERE version_id = 0").Scan(&zero); err != nil || zero != 1 {
		t.Fatalf("version 0 rows: %d, %v; want 1", zero, err)
	}
	// The rows are as they were, and the migrations ran again harmlessly.
	mustAllocate(t, s, "t", 10, segment.Allocation{Start: 1, End: 11, TableStep: 10})
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatalf("Migrate once more: %v", err)
	}
}
