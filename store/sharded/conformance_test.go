package sharded_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

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
	forEachShardDriver(t, func(t *testing.T, driver string) {
		t.Parallel() // the engines at once: each case creates databases
		e, ok := conformanceEngines[driver]
		if !ok {
			t.Fatalf("engine %q has no entry in conformanceEngines", driver)
		}
		storetest.RunSharded(t, func(t *testing.T) *storetest.Database {
			dsns := shardDSNs(t, driver, conformanceShards)
			raws := make([]*sqlx.DB, len(dsns))
			gone := make([]string, len(dsns))
			for i, dsn := range dsns {
				raws[i], gone[i] = e.raw(t, dsn), e.unreachable(dsn)
			}
			open := func(dsns []string) (storetest.Store, error) {
				return sharded.Open(driver, dsns, sharded.Options{Slots: conformanceSlots, Logger: quiet})
			}
			return &storetest.Database{
				Open:            func() (storetest.Store, error) { return open(dsns) },
				OpenUnreachable: func() (storetest.Store, error) { return open(gone) },
				Raw:             raws[0],
				LeafTable:       e.leafTable,
				AfterLayoutRead: sharded.AfterLayoutRead,
				// Migrate takes the first database's lock first.
				HoldMigrateLock: e.holdMigrateLock(raws[0], dsns[0]),
				Shards:          &storetest.Shards{Raw: raws, Slots: conformanceSlots},
			}
		})
	})
}

// conformanceEngines holds, by engine, what the conformance suite needs of
// its databases besides their DSNs, as each engine's own test gives it.
var conformanceEngines = map[string]struct {
	leafTable string
	// raw opens a plain pool on dsn, writing times in UTC as the stores
	// read them, closed when the test ends.
	raw func(t *testing.T, dsn string) *sqlx.DB
	// unreachable is a DSN in place of dsn where nothing answers.
	unreachable func(dsn string) string
	// holdMigrateLock returns the HoldMigrateLock of a database; nil when
	// the platform lets no test take it.
	holdMigrateLock func(raw *sqlx.DB, dsn string) func(t *testing.T) func()
}{
	"sqlite": {
		leafTable: sqliteLeafTable,
		raw: func(t *testing.T, dsn string) *sqlx.DB {
			return closed(t, sqlx.MustOpen("sqlite", dsn+"?_pragma=busy_timeout(10000)"))
		},
		// A directory where the file should be: SQLite cannot open it.
		unreachable: func(dsn string) string { return filepath.Dir(strings.TrimPrefix(dsn, "file:")) },
		holdMigrateLock: func(_ *sqlx.DB, dsn string) func(t *testing.T) func() {
			if holdMigrateLock == nil {
				return nil
			}
			return func(t *testing.T) func() { return holdMigrateLock(t, strings.TrimPrefix(dsn, "file:")) }
		},
	},
	"mysql": {
		leafTable: leafTable,
		raw: func(t *testing.T, dsn string) *sqlx.DB {
			cfg, err := mysql.ParseDSN(dsn)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Params = map[string]string{"time_zone": "'+00:00'"}
			return closed(t, sqlx.MustOpen("mysql", cfg.FormatDSN()))
		},
		unreachable: func(string) string { return unreachableMySQL },
		holdMigrateLock: func(raw *sqlx.DB, _ string) func(t *testing.T) func() {
			return func(t *testing.T) func() { return holdNamedLock(t, raw.DB, "leafd_migrate") }
		},
	},
	"postgres": {
		leafTable:   pgLeafTable,
		raw:         openRawPostgres,
		unreachable: func(string) string { return unreachablePostgres },
		holdMigrateLock: func(raw *sqlx.DB, _ string) func(t *testing.T) func() {
			return func(t *testing.T) func() { return holdAdvisoryLock(t, raw) }
		},
	},
}

// closed closes raw when the test ends.
func closed(t *testing.T, raw *sqlx.DB) *sqlx.DB {
	t.Cleanup(func() { raw.Close() })
	return raw
}
