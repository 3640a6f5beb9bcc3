package sqlite_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/internal/testkit/testdb"
	"github.com/leafd/leafd/segment"
	"github.com/leafd/leafd/store"
	"github.com/leafd/leafd/store/internal/engine"
	"github.com/leafd/leafd/store/internal/testhook"
	"github.com/leafd/leafd/store/storetest"
)

// openStore opens a store of dsn; it is closed when the test ends.
func openStore(t *testing.T, dsn string) store.Store {
	t.Helper()
	s, err := store.Open("sqlite", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
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

// SQLite refuses the COMMIT (a deferred foreign key is violated when the
// transaction ends): Allocate hands out nothing, the row is unchanged, and
// the connection is clean for the next Allocate.
func TestSQLiteCommitFailsNoRange(t *testing.T) {
	dsn := testdb.SQLite(t)
	s := openStore(t, dsn+"?_pragma=foreign_keys(1)")
	testhook.Migrator(s).(engine.Migrator).DB().SetMaxOpenConns(1) // the next Allocate reuses the connection
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	raw := testdb.SQL(t, "sqlite", dsn).DB
	mustExec(t, raw, "CREATE TABLE parent (id INTEGER PRIMARY KEY)")
	mustExec(t, raw, "CREATE TABLE child (parent_id INTEGER REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED)")
	mustExec(t, raw, "INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('t', 1, 10)")

	testhook.BeforeCommit(s, func(ctx context.Context, tx *sqlx.Tx) error {
		_, err := tx.ExecContext(ctx, "INSERT INTO child VALUES (42)")
		return err
	})
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
	testhook.BeforeCommit(s, nil)
	if got, err := s.Allocate(context.Background(), "t", 10); err != nil || got != (segment.Allocation{Start: 1, End: 11, TableStep: 10}) {
		t.Fatalf("Allocate after the failed COMMIT = %+v, %v; want [1, 11)", got, err)
	}
}

// The causes of store_unavailable that SQLite can be brought to give.
func TestSQLiteErrorsProvoked(t *testing.T) {
	ctx := context.Background()

	t.Run("CannotOpen", func(t *testing.T) {
		// A directory where the file should be.
		s := openStore(t, t.TempDir())
		storetest.WantUnavailable(t, s.Ping(ctx), "cannot be opened", "names a file, not a directory")
	})

	t.Run("BusyRetriedOut", func(t *testing.T) {
		dsn := testdb.SQLite(t)
		s := openStore(t, dsn+"?_pragma=busy_timeout(20)")
		if err := s.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := s.CreateTag(ctx, leafd.Tag{Name: "t", Step: 10}); err != nil {
			t.Fatal(err)
		}
		testhook.RetryFor(s, 300*time.Millisecond)
		// Another connection holds the write lock throughout.
		raw, err := sql.Open("sqlite", dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer raw.Close()
		conn, err := raw.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
			t.Fatal(err)
		}
		defer conn.ExecContext(ctx, "ROLLBACK")
		_, err = s.Allocate(ctx, "t", 10)
		storetest.WantUnavailable(t, err, "the SQLite file stayed locked by another connection or process (busy)", "retried", "see what else writes the file")
	})
}
