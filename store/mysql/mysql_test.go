package mysql_test

import (
	"context"
	"database/sql"
	"strings"
	"sync"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/internal/testkit/testdb"
	"github.com/leafd/leafd/store"
	"github.com/leafd/leafd/store/storetest"
)

// leafTable is leaf_alloc exactly as Meituan Leaf's README creates it.
const leafTable = `CREATE TABLE leaf_alloc (
  biz_tag     VARCHAR(128) NOT NULL DEFAULT '',
  max_id      BIGINT       NOT NULL DEFAULT 1,
  step        INT          NOT NULL,
  description VARCHAR(256) DEFAULT NULL,
  update_time TIMESTAMP    NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
  PRIMARY KEY (biz_tag)
) ENGINE=InnoDB`

// unreachableMySQL is an address where nothing listens, with a dial
// timeout short enough for a test.
const unreachableMySQL = "root@tcp(127.0.0.1:1)/leafd?timeout=500ms"

func TestMySQL(t *testing.T) {
	storetest.Run(t, func(t *testing.T) *storetest.Database {
		dsn := testdb.MySQL(t)
		cfg, err := mysql.ParseDSN(dsn)
		if err != nil {
			t.Fatal(err)
		}
		// The raw pool writes times in UTC too, as the stores read them.
		cfg.Params = map[string]string{"time_zone": "'+00:00'"}
		raw, err := sqlx.Open("mysql", cfg.FormatDSN())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { raw.Close() })
		return &storetest.Database{
			Open:            func() (storetest.Store, error) { return store.Open("mysql", dsn) },
			OpenUnreachable: func() (storetest.Store, error) { return store.Open("mysql", unreachableMySQL) },
			Raw:             raw,
			LeafTable:       leafTable,
			HoldMigrateLock: func(t *testing.T) func() { return holdNamedLock(t, raw.DB, "leafd_migrate") },
		}
	})
}

// A row locked by another transaction fails an allocation of that tag
// within the session's lock wait timeout that leafd sets (5 s, inside the
// allocator's 10 s load timeout), with an error that names the lock, not an
// unreachable database; the database still answers.
func TestMySQLRowLockNamed(t *testing.T) {
	dsn := testdb.MySQL(t)
	s, err := store.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	raw, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	storetest.RowLockNamed(t, s, raw)
}

func TestOpenMySQLBadDSN(t *testing.T) {
	for _, c := range []struct{ name, dsn, want string }{
		{"NotADSN", "not a dsn ::", "does not parse"},
		{"Empty", "", "empty"},
		{"NoDatabase", "root@tcp(127.0.0.1:3306)/", "names no database"},
		{"BadParam", "root@tcp(127.0.0.1:3306)/leafd?parseTime=maybe", "does not parse"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := store.Open("mysql", c.dsn)
			if err == nil {
				s.Close()
				t.Fatalf("OpenMySQL(%q) succeeded", c.dsn)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("OpenMySQL(%q): %v, want it to say %q", c.dsn, err, c.want)
			}
		})
	}
}

// holdNamedLock takes a MySQL named lock on a connection of its own and
// returns the function that releases it (once, however often it is called).
func holdNamedLock(t *testing.T, raw *sql.DB, name string) (release func()) {
	t.Helper()
	ctx := context.Background()
	conn, err := raw.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got int
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, 5)", name).Scan(&got); err != nil || got != 1 {
		t.Fatalf("GET_LOCK(%q) = %d, %v", name, got, err)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			if _, err := conn.ExecContext(ctx, "DO RELEASE_LOCK(?)", name); err != nil {
				t.Errorf("RELEASE_LOCK(%q): %v", name, err)
			}
			conn.Close()
		})
	}
	t.Cleanup(release)
	return release
}

// leafTableUTF8 is leaf_alloc as Leaf's scripts/leaf_alloc.sql creates it:
// CHARSET=utf8, three bytes a character at most.
const leafTableUTF8 = leafTable + ` DEFAULT CHARSET=utf8`

// A description with a 4-byte UTF-8 character (an emoji), on a table made
// by Leaf's own DDL, is refused as invalid_body naming the column's
// character set and the ALTER that widens it, on creation and on update;
// once the table is widened, it is stored.
func TestMySQLDescriptionCharset(t *testing.T) {
	dsn := testdb.MySQL(t)
	raw, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.Exec(leafTableUTF8); err != nil {
		t.Fatal(err)
	}
	s, err := store.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	const rocket = "launch \U0001F680"
	refused := func(what string, err error) {
		t.Helper()
		msg := leafd.ErrorMessage(err)
		if leafd.ErrorCode(err) != leafd.EInvalidBody || !strings.Contains(msg, "character set is utf8") ||
			!strings.Contains(msg, "ALTER TABLE leaf_alloc CONVERT TO CHARACTER SET utf8mb4") {
			t.Fatalf("%s: %v (code %q), want invalid_body naming the character set and the ALTER", what, err, leafd.ErrorCode(err))
		}
	}
	_, err = s.CreateTag(ctx, leafd.Tag{Name: "order", Step: 10, Description: rocket})
	refused("CreateTag with an emoji", err)
	if _, err := s.CreateTag(ctx, leafd.Tag{Name: "order", Step: 10, Description: "plain é"}); err != nil {
		t.Fatal(err)
	}
	desc := rocket
	_, _, err = s.UpdateTag(ctx, "order", leafd.TagUpdate{Description: &desc})
	refused("UpdateTag with an emoji", err)

	if _, err := raw.Exec("ALTER TABLE leaf_alloc CONVERT TO CHARACTER SET utf8mb4"); err != nil {
		t.Fatal(err)
	}
	if _, got, err := s.UpdateTag(ctx, "order", leafd.TagUpdate{Description: &desc}); err != nil || got.Description != rocket {
		t.Fatalf("UpdateTag with an emoji after the ALTER = %+v, %v", got, err)
	}
}
