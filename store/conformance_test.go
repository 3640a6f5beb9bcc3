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
