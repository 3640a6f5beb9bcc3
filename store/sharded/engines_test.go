package sharded_test

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"testing"

	"github.com/jmoiron/sqlx"
)

// What the conformance suite needs of each engine's databases, as the
// engines' own tests in package store give it.

// leafTable is leaf_alloc exactly as Meituan Leaf's README creates it.
const leafTable = `CREATE TABLE leaf_alloc (
  biz_tag     VARCHAR(128) NOT NULL DEFAULT '',
  max_id      BIGINT       NOT NULL DEFAULT 1,
  step        INT          NOT NULL,
  description VARCHAR(256) DEFAULT NULL,
  update_time TIMESTAMP    NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
  PRIMARY KEY (biz_tag)
) ENGINE=InnoDB`

// pgLeafTable and sqliteLeafTable are leaf_alloc as a PostgreSQL port of
// Leaf, or someone other than leafd in SQLite, creates it: Leaf's columns.
const (
	pgLeafTable = `CREATE TABLE leaf_alloc (
  biz_tag     VARCHAR(128) NOT NULL DEFAULT '',
  max_id      BIGINT       NOT NULL DEFAULT 1,
  step        INT          NOT NULL,
  description VARCHAR(256) DEFAULT NULL,
  update_time TIMESTAMP    NOT NULL DEFAULT CURRENT_TIMESTAMP,
  PRIMARY KEY (biz_tag)
)`
	sqliteLeafTable = pgLeafTable
)

// Addresses where nothing listens, with timeouts short enough for a test.
const (
	unreachableMySQL    = "root@tcp(127.0.0.1:1)/leafd?timeout=500ms"
	unreachablePostgres = "postgres://root@127.0.0.1:1/leafd?sslmode=disable&connect_timeout=1"
)

// holdMigrateLock takes the migration lock of the SQLite file dbFile from
// outside the store, where the platform lets a test do so.
var holdMigrateLock func(t *testing.T, dbFile string) (release func())

// openRawPostgres is a plain pool on dsn, in UTC as the stores read times.
func openRawPostgres(t *testing.T, dsn string) *sqlx.DB {
	t.Helper()
	raw, err := sqlx.Open("pgx", dsn+"&timezone=UTC")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	return raw
}

// holdOn runs lock on a connection of its own and returns the function
// that runs unlock and closes it (once, however often it is called).
func holdOn(t *testing.T, raw *sql.DB, lock func(context.Context, *sql.Conn) error, unlock func(context.Context, *sql.Conn) error) (release func()) {
	t.Helper()
	ctx := context.Background()
	conn, err := raw.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := lock(ctx, conn); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			if err := unlock(ctx, conn); err != nil {
				t.Error(err)
			}
			conn.Close()
		})
	}
	t.Cleanup(release)
	return release
}

// holdNamedLock takes a MySQL named lock from outside the store.
func holdNamedLock(t *testing.T, raw *sql.DB, name string) (release func()) {
	return holdOn(t, raw, func(ctx context.Context, c *sql.Conn) error {
		var got int
		if err := c.QueryRowContext(ctx, "SELECT GET_LOCK(?, 5)", name).Scan(&got); err != nil || got != 1 {
			return fmt.Errorf("GET_LOCK(%q) = %d, %v", name, got, err)
		}
		return nil
	}, func(ctx context.Context, c *sql.Conn) error {
		_, err := c.ExecContext(ctx, "DO RELEASE_LOCK(?)", name)
		return err
	})
}

// pgMigrateLock is the key of the advisory lock PostgreSQL's Migrate takes.
const pgMigrateLock int64 = 0x6c656166645f6d67

// holdAdvisoryLock takes leafd's PostgreSQL migration lock from outside
// the store.
func holdAdvisoryLock(t *testing.T, raw *sqlx.DB) (release func()) {
	return holdOn(t, raw.DB, func(ctx context.Context, c *sql.Conn) error {
		_, err := c.ExecContext(ctx, "SELECT pg_advisory_lock($1)", pgMigrateLock)
		return err
	}, func(ctx context.Context, c *sql.Conn) error {
		_, err := c.ExecContext(ctx, "SELECT pg_advisory_unlock($1)", pgMigrateLock)
		return err
	})
}
