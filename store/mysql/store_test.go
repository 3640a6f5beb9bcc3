package mysql_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"github.com/leafd/leafd/internal/testkit/faultdriver"
	"github.com/leafd/leafd/segment"
	"github.com/leafd/leafd/snowflake"
	"github.com/leafd/leafd/store"
	"github.com/leafd/leafd/store/internal/engine"
	"github.com/leafd/leafd/store/internal/testhook"
)

// What the tests of the MySQL store share: stores of a test database, a
// plain pool on it, and the hooks into a store of package store.

// openStore opens a store of dsn with opts; it is closed when the test
// ends.
func openStore(t *testing.T, dsn string, opts ...store.Option) store.Store {
	t.Helper()
	s, err := store.Open("mysql", dsn, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// openMigrated is openStore on a migrated database.
func openMigrated(t *testing.T, dsn string, opts ...store.Option) store.Store {
	t.Helper()
	s := openStore(t, dsn, opts...)
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

// openFaulty opens a store of dsn through the fault-injecting driver, with
// opts, and returns it with its faults.
func openFaulty(t *testing.T, dsn string, opts ...store.Option) (store.Store, *faultdriver.Faults) {
	t.Helper()
	f := &faultdriver.Faults{}
	return openStore(t, dsn, append(opts, testhook.WithConnector(f.Wrap).(store.Option))...), f
}

// beforeCommit makes s run f between the SELECT and the COMMIT of each
// Allocate (nil: nothing).
func beforeCommit(s store.Store, f func(ctx context.Context, tx *sqlx.Tx) error) {
	testhook.BeforeCommit(s, f)
}

// pool is s's own connection pool.
func pool(s store.Store) *sqlx.DB { return testhook.Migrator(s).(engine.Migrator).DB() }

// openRaw opens a plain pool on dsn, outside any store; it is closed when
// the test ends.
func openRaw(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	raw, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	return raw
}

// mysqlConfig returns the configuration of a fresh test database.
func mysqlConfig(t *testing.T, dsn string) *mysql.Config {
	t.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// mysqlErr is the error a MySQL-family server answers with.
func mysqlErr(number uint16, state, message string) *mysql.MySQLError {
	e := &mysql.MySQLError{Number: number, Message: message}
	copy(e.SQLState[:], state)
	return e
}

func readMaxID(t *testing.T, db *sql.DB, tag string) int64 {
	t.Helper()
	var v int64
	if err := db.QueryRow("SELECT max_id FROM leaf_alloc WHERE biz_tag = ?", tag).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
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

func mustAllocate(t *testing.T, s store.Store, tag string, step int64, want segment.Allocation) {
	t.Helper()
	got, err := s.Allocate(context.Background(), tag, step)
	if err != nil || got != want {
		t.Fatalf("Allocate(%q, %d) = %+v, %v; want %+v", tag, step, got, err, want)
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
