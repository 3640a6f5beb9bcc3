package sqlite_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/leafd/leafd/internal/testkit/testdb"
	"github.com/leafd/leafd/store"
	"github.com/leafd/leafd/store/storetest"
)

// sqliteLeafTable is leaf_alloc as someone other than leafd would create it
// in SQLite: Leaf's columns, without leafd's trigger and CHECK.
const sqliteLeafTable = `CREATE TABLE leaf_alloc (
  biz_tag     VARCHAR(128) NOT NULL DEFAULT '',
  max_id      BIGINT       NOT NULL DEFAULT 1,
  step        INT          NOT NULL,
  description VARCHAR(256) DEFAULT NULL,
  update_time TIMESTAMP    NOT NULL DEFAULT CURRENT_TIMESTAMP,
  PRIMARY KEY (biz_tag)
)`

// holdMigrateLock takes the migration lock of the SQLite file dbFile from
// outside the store, where the platform lets a test do so.
var holdMigrateLock func(t *testing.T, dbFile string) (release func())

func TestSQLite(t *testing.T) {
	storetest.Run(t, func(t *testing.T) *storetest.Database {
		dsn := testdb.SQLite(t)
		file := strings.TrimPrefix(dsn, "file:")
		raw, err := sqlx.Open("sqlite", dsn+"?_pragma=busy_timeout(10000)")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { raw.Close() })
		db := &storetest.Database{
			Open: func() (storetest.Store, error) { return store.Open("sqlite", dsn) },
			OpenUnreachable: func() (storetest.Store, error) {
				// A directory where the file should be: SQLite cannot open it.
				return store.Open("sqlite", filepath.Dir(file))
			},
			Raw:       raw,
			LeafTable: sqliteLeafTable,
		}
		if holdMigrateLock != nil {
			db.HoldMigrateLock = func(t *testing.T) func() { return holdMigrateLock(t, file) }
		}
		return db
	})
}
