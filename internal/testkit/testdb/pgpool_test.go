package testdb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// A database of an ended process is taken over by the next process that
// needs one, emptied first; one of a process still running is left alone.
func TestPostgresOrphansTakenOver(t *testing.T) {
	Postgres(t) // skips without a server
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	exec := func(q string) {
		t.Helper()
		if _, err := pgServer.db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exists := func(name string) bool {
		t.Helper()
		var n int
		if err := pgServer.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM pg_database WHERE datname = $1", name).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	}
	tables := func(name string) (n int) {
		t.Helper()
		if err := withDatabase(ctx, name, func(c *pgx.Conn) error {
			return c.QueryRow(ctx, "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = 'public'").Scan(&n)
		}); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// The orphan: a database of this pool with a table in it, renamed to
	// a token no session holds, as an ended process leaves it.
	name, err := pgAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := withDatabase(ctx, name, func(c *pgx.Conn) error {
		_, err := c.Exec(ctx, "CREATE TABLE leaf_alloc (biz_tag TEXT)")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	orphan := "leafd_test_" + hex.EncodeToString(b[:]) + "_0"
	exec("ALTER DATABASE " + name + " RENAME TO " + orphan)
	// A database of this process that is not in its pool: a test's.
	inUse := pgNewName()
	exec("CREATE DATABASE " + inUse)
	t.Cleanup(func() { _, _ = pgServer.db.Exec("DROP DATABASE IF EXISTS " + inUse) })
	// A database of another process, which runs: its session is open.
	_, _ = rand.Read(b[:])
	otherToken := hex.EncodeToString(b[:])
	otherLease, err := pgServer.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer otherLease.Close()
	if _, err := otherLease.ExecContext(ctx, "SET application_name = '"+pgPoolApp+otherToken+"'"); err != nil {
		t.Fatal(err)
	}
	otherDB := "leafd_test_" + otherToken + "_0"
	exec("CREATE DATABASE " + otherDB)
	t.Cleanup(func() { _, _ = pgServer.db.Exec("DROP DATABASE IF EXISTS " + otherDB) })

	// Take orphans until there are none: another test process may take
	// this one first, and either way it must go.
	for {
		name := adoptOrphan(ctx)
		if name == "" {
			break
		}
		if n := tables(name); n != 0 {
			t.Errorf("a database taken over has %d tables", n)
		}
		pgRelease(name)
	}
	if exists(orphan) {
		t.Errorf("the database %s of an ended process was not taken over", orphan)
	}
	if !exists(inUse) {
		t.Errorf("the database %s of this process, which is running, was taken over", inUse)
	}
	if !exists(otherDB) {
		t.Errorf("the database %s of another process, which is running, was taken over", otherDB)
	}
}
