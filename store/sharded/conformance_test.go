package sharded_test

import (
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/leafd/leafd/internal/testkit/testdb"
	"github.com/leafd/leafd/store"
	"github.com/leafd/leafd/store/sharded"
	"github.com/leafd/leafd/store/storetest"
)

// The sharded stores of the conformance suite: conformanceShards databases
// each, conformanceSlots slots.
const (
	conformanceShards = 2
	conformanceSlots  = 4
)

// TestShardedConformance runs the conformance suite against the sharded
// store, over fresh databases of every engine.
func TestShardedConformance(t *testing.T) {
	forEachDriver(t, store.Drivers(), func(t *testing.T, driver string) {
		t.Parallel() // the engines at once: each case creates databases
		storetest.RunSharded(t, func(t *testing.T) *storetest.Database {
			dsns := shardDSNs(t, driver, conformanceShards)
			raws := make([]*sqlx.DB, len(dsns))
			gone := make([]string, len(dsns))
			for i, dsn := range dsns {
				raws[i], gone[i] = testdb.SQL(t, driver, dsn), testdb.Unreachable(driver, dsn)
			}
			open := func(dsns []string) (storetest.Store, error) {
				return sharded.Open(driver, dsns, sharded.Options{Slots: conformanceSlots, Logger: quiet})
			}
			return &storetest.Database{
				Open:            func() (storetest.Store, error) { return open(dsns) },
				OpenUnreachable: func() (storetest.Store, error) { return open(gone) },
				Raw:             raws[0],
				LeafTable:       testdb.LeafTable(driver),
				AfterLayoutRead: sharded.AfterLayoutRead,
				// Migrate takes the first database's lock first.
				HoldMigrateLock: testdb.MigrateLock(driver, dsns[0]),
				Shards:          &storetest.Shards{Raw: raws, Slots: conformanceSlots},
			}
		})
	})
}
