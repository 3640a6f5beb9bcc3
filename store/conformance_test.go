package store_test

import (
	"testing"

	"github.com/leafd/leafd/internal/testkit/testdb"
	"github.com/leafd/leafd/store"
	"github.com/leafd/leafd/store/storetest"
)

// TestConformance runs the conformance suite against every registered
// engine, each case on a fresh database of its own. (The sharded store runs
// it in store/sharded.)
func TestConformance(t *testing.T) {
	for _, driver := range store.Drivers() {
		t.Run(driver, func(t *testing.T) {
			t.Parallel() // the engines at once: each case has a database of its own
			storetest.Run(t, func(t *testing.T) *storetest.Database {
				dsn := testdb.DSN(t, driver)
				return &storetest.Database{
					Open:            func() (storetest.Store, error) { return store.Open(driver, dsn) },
					OpenUnreachable: func() (storetest.Store, error) { return store.Open(driver, testdb.Unreachable(driver, dsn)) },
					Raw:             testdb.SQL(t, driver, dsn),
					LeafTable:       testdb.LeafTable(driver),
					HoldMigrateLock: testdb.MigrateLock(driver, dsn),
				}
			})
		})
	}
}

// A row locked by another transaction fails an allocation of that tag
// within the lock wait every engine with row locks gets from leafd (5 s:
// MySQL's innodb_lock_wait_timeout, PostgreSQL's lock_timeout, unless the
// DSN sets them), with an error that names the lock, not an unreachable
// database; the database still answers. (An engine of files locks the
// file: storetest's RowLockedNoRange covers it.)
func TestRowLockNamed(t *testing.T) {
	testdb.Each(t, store.FallbackDrivers(), func(t *testing.T, driver, dsn string) {
		t.Parallel() // each waits out a lock
		s, err := store.Open(driver, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		storetest.RowLockNamed(t, s, testdb.SQL(t, driver, dsn).DB)
	})
}
