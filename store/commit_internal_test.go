package store

import (
	"context"
	"errors"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/leafd/leafd/internal/testkit/testdb"
	"github.com/leafd/leafd/segment"
)

// What the tests of this package that reach into a store share: a
// migrated store of a test database, and the test's own SQL on it
// (testdb.SQL, written with '?' and rebound).

func openMigrated(t *testing.T, driver, dsn string, opts ...Option) *db {
	t.Helper()
	s, err := openDB(driver, dsn, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

func mustExec(t *testing.T, raw *sqlx.DB, query string, args ...any) {
	t.Helper()
	if _, err := raw.Exec(raw.Rebind(query), args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

func readMaxID(t *testing.T, raw *sqlx.DB, tag string) int64 {
	t.Helper()
	var v int64
	if err := raw.QueryRow(raw.Rebind("SELECT max_id FROM leaf_alloc WHERE biz_tag = ?"), tag).Scan(&v); err != nil {
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

// The database aborts Allocate's transaction at COMMIT for a retry, as
// Galera and Group Replication report a certification conflict: this
// store's UPDATE and SELECT ran, another server's transaction on the same
// row won. The range this transaction read must never be handed out: the
// retry reads the row as the winner left it. (Which of an engine's errors
// ask for a retry is its error table's, tested in its package.)
func TestAbortedAtCommitRetried(t *testing.T) {
	testdb.Each(t, Drivers(), func(t *testing.T, driver, dsn string) {
		s := openMigrated(t, driver, dsn)
		raw := testdb.SQL(t, driver, dsn)
		mustExec(t, raw, "INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('t', 1, 10)")
		attempts := 0
		var seen []int64
		s.beforeCommit = func(ctx context.Context, tx *sqlx.Tx) error {
			attempts++
			var maxID int64
			if err := tx.QueryRowContext(ctx, "SELECT max_id FROM leaf_alloc WHERE biz_tag = 't'").Scan(&maxID); err != nil {
				return err
			}
			seen = append(seen, maxID)
			if attempts > 1 {
				return nil
			}
			// The database aborts this transaction; the other server's
			// write of the same row is what it now holds.
			if err := tx.Rollback(); err != nil {
				return err
			}
			if _, err := raw.ExecContext(ctx, "UPDATE leaf_alloc SET max_id = max_id + 10 WHERE biz_tag = 't'"); err != nil {
				return err
			}
			return Retry(errors.New("certification failure at COMMIT"))
		}
		got, err := s.Allocate(context.Background(), "t", 10)
		if err != nil {
			t.Fatal(err)
		}
		// The other server got [1, 11); this one, after the retry, [11, 21).
		if want := (segment.Allocation{Start: 11, End: 21, TableStep: 10}); got != want {
			t.Fatalf("Allocate = %+v after a conflict at COMMIT, want %+v (max_id read by each attempt: %v)", got, want, seen)
		}
		if attempts != 2 || seen[0] != 11 {
			t.Fatalf("attempts %d, max_id read by each %v: want 2 attempts, the first reading 11", attempts, seen)
		}
		if max := readMaxID(t, raw, "t"); max != 21 {
			t.Fatalf("max_id = %d, want 21", max)
		}
	})
}
