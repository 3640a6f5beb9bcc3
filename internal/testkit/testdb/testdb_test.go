package testdb_test

import (
	"context"
	"database/sql"
	"net"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/internal/testkit/testdb"
	"github.com/leafd/leafd/store"
)

// Each test gets its own empty database, and it is gone when the test ends.
func TestMySQL(t *testing.T) {
	var name string
	var admin *sql.DB
	t.Run("Fresh", func(t *testing.T) {
		dsn := testdb.MySQL(t)
		cfg, err := mysql.ParseDSN(dsn)
		if err != nil {
			t.Fatal(err)
		}
		name = cfg.DBName
		if !regexp.MustCompile(`^leafd_test_[0-9a-f]{8}$`).MatchString(name) {
			t.Fatalf("database name %q", name)
		}
		if other, _ := mysql.ParseDSN(testdb.MySQL(t)); other.DBName == name {
			t.Fatal("two calls returned the same database")
		}
		db, err := sql.Open("mysql", dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var tables int
		if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE()").Scan(&tables); err != nil {
			t.Fatal(err)
		}
		if tables != 0 {
			t.Fatalf("a fresh database has %d tables", tables)
		}
		if _, err := db.Exec("CREATE TABLE t (n INT)"); err != nil {
			t.Fatal(err)
		}
		cfg.DBName = ""
		if admin, err = sql.Open("mysql", cfg.FormatDSN()); err != nil {
			t.Fatal(err)
		}
	})
	if admin == nil {
		return // skipped
	}
	defer admin.Close()
	var n int
	if err := admin.QueryRow("SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = ?", name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("database %s still exists after its test", name)
	}
}

func TestSQLite(t *testing.T) {
	dsn := testdb.SQLite(t)
	path, ok := strings.CutPrefix(dsn, "file:")
	if !ok || strings.Contains(dsn, "?") {
		t.Fatalf("SQLite DSN %q: want file:PATH without parameters", dsn)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("the file of a fresh SQLite DSN exists: %v", err)
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("CREATE TABLE t (n INT)"); err != nil {
		t.Fatal(err)
	}
	if testdb.SQLite(t) == dsn {
		t.Fatal("two calls returned the same file")
	}
}

// Each test gets its own empty PostgreSQL database, dropped when it ends.
func TestPostgres(t *testing.T) {
	var name string
	t.Run("Fresh", func(t *testing.T) {
		dsn := testdb.Postgres(t)
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatal(err)
		}
		name = strings.TrimPrefix(u.Path, "/")
		if !regexp.MustCompile(`^leafd_test_[0-9a-f]{8}$`).MatchString(name) {
			t.Fatalf("database name %q", name)
		}
		if other := testdb.Postgres(t); other == dsn {
			t.Fatal("two calls returned the same database")
		}
		db, err := sql.Open("pgx", dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var tables int
		if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = 'public'").Scan(&tables); err != nil {
			t.Fatal(err)
		}
		if tables != 0 {
			t.Fatalf("a fresh database has %d tables", tables)
		}
		if _, err := db.Exec("CREATE TABLE t (n INT)"); err != nil {
			t.Fatal(err)
		}
	})
	if name == "" {
		return // skipped
	}
	admin, err := sql.Open("pgx", testdb.DefaultPostgresDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	var n int
	if err := admin.QueryRow("SELECT COUNT(*) FROM pg_database WHERE datname = $1", name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("database %s still exists after its test", name)
	}
}

// Each gives every engine of the registry a fresh database of its own, and
// SQL opens it for the test's own SQL.
func TestEach(t *testing.T) {
	var ran []string
	seen := map[string]bool{}
	testdb.Each(t, store.Drivers(), func(t *testing.T, driver, dsn string) {
		ran = append(ran, driver)
		if seen[dsn] {
			t.Fatalf("%s: DSN %q given twice", driver, dsn)
		}
		seen[dsn] = true
		db := testdb.SQL(t, driver, dsn)
		if _, err := db.Exec("CREATE TABLE t (n INT)"); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(db.Rebind("INSERT INTO t (n) VALUES (?)"), 42); err != nil {
			t.Fatal(err)
		}
		var n int
		if err := db.QueryRow(db.Rebind("SELECT n FROM t WHERE n = ?"), 42).Scan(&n); err != nil || n != 42 {
			t.Fatalf("read back %d, %v", n, err)
		}
	})
	if want := store.Drivers(); strings.Join(ran, " ") != strings.Join(want, " ") {
		t.Fatalf("Each ran %v, want every engine of %v", ran, want)
	}
}

// What testdb tells of each engine holds on a fresh database of it: Leaf's
// leaf_alloc creates there and takes Leaf's rows, a store on Unreachable
// does not reach anything, MigrateLock keeps a store's Migrate waiting
// until it is released, WithAddr reaches the database at its own
// address and not at another, Missing reaches none, Tables lists
// leaf_alloc, and Account's accounts are refused or may only read.
func TestEngines(t *testing.T) {
	testdb.Each(t, store.Drivers(), func(t *testing.T, driver, dsn string) {
		ctx := context.Background()
		raw := testdb.SQL(t, driver, dsn)
		if _, err := raw.Exec(testdb.LeafTable(driver)); err != nil {
			t.Fatalf("Leaf's leaf_alloc: %v", err)
		}
		if _, err := raw.Exec(raw.Rebind("INSERT INTO leaf_alloc (biz_tag, max_id, step, description) VALUES (?, 5001, 2000, 'Leaf')"), "leaf"); err != nil {
			t.Fatalf("a row of Leaf's: %v", err)
		}

		// Before any Migrate.
		t.Run("Tables", func(t *testing.T) {
			if got := testdb.Tables(t, driver, dsn); len(got) != 1 || got[0] != "leaf_alloc" {
				t.Fatalf("Tables = %q, want leaf_alloc alone", got)
			}
		})

		t.Run("Unreachable", func(t *testing.T) {
			s, err := store.Open(driver, testdb.Unreachable(driver, dsn))
			if err != nil {
				t.Fatalf("open a store on Unreachable: %v", err)
			}
			defer s.Close()
			start := time.Now()
			if err := s.Ping(ctx); leafd.ErrorCode(err) != leafd.EStoreUnavailable {
				t.Fatalf("Ping of Unreachable: %v, want store_unavailable", err)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("Ping of Unreachable took %v", d)
			}
		})

		t.Run("MigrateLock", func(t *testing.T) {
			hold := testdb.MigrateLock(driver, dsn)
			if hold == nil {
				t.Skipf("this platform lets no test take %s's migration lock", driver)
			}
			s, err := store.Open(driver, dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			release := hold(t)
			wait, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			defer cancel()
			if err := s.Migrate(wait); err == nil {
				t.Fatal("Migrate succeeded while the lock was held")
			}
			release()
			release() // a second release does nothing
			if err := s.Migrate(ctx); err != nil {
				t.Fatalf("Migrate once the lock was released: %v", err)
			}
			if tag, err := s.LookupTag(ctx, "leaf"); err != nil || tag.MaxID != 5001 {
				t.Fatalf("Leaf's row after Migrate: %+v, %v", tag, err)
			}
		})

		t.Run("Addr", func(t *testing.T) {
			if !store.HasAddresses(driver) {
				t.Skipf("%s has no network address", driver)
			}
			addr := testdb.Addr(t, driver, dsn)
			if _, _, err := net.SplitHostPort(addr); err != nil {
				t.Fatalf("Addr = %q: %v", addr, err)
			}
			same := testdb.SQL(t, driver, testdb.WithAddr(t, driver, dsn, addr))
			var n int
			if err := same.QueryRow("SELECT COUNT(*) FROM leaf_alloc").Scan(&n); err != nil || n != 1 {
				t.Fatalf("the database through WithAddr of its own address: %d rows, %v", n, err)
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			nothing := ln.Addr().String()
			ln.Close()
			if err := testdb.SQL(t, driver, testdb.WithAddr(t, driver, dsn, nothing)).Ping(); err == nil {
				t.Fatalf("WithAddr of %s, where nothing listens, reached a database", nothing)
			}
			if err := testdb.SQL(t, driver, testdb.Missing(t, driver, dsn)).Ping(); err == nil {
				t.Fatal("Missing reached a database")
			}
		})

		t.Run("Account", func(t *testing.T) {
			if !store.HasAddresses(driver) {
				t.Skipf("%s has no accounts", driver)
			}
			const password = "test-pw"
			refused := testdb.Account(t, driver, dsn, password, testdb.Refused)
			if err := testdb.SQL(t, driver, testdb.WithLogin(t, driver, dsn, refused, password)).Ping(); err == nil {
				t.Fatalf("the Refused account %s logged in", refused)
			}
			reader := testdb.SQL(t, driver, testdb.WithLogin(t, driver, dsn, testdb.Account(t, driver, dsn, password, testdb.Reader), password))
			var n int
			if err := reader.QueryRow("SELECT COUNT(*) FROM leaf_alloc").Scan(&n); err != nil || n != 1 {
				t.Fatalf("the Reader reads leaf_alloc: %d rows, %v", n, err)
			}
			if _, err := raw.Exec("CREATE TABLE later (n INT)"); err != nil {
				t.Fatal(err)
			}
			if err := reader.QueryRow("SELECT COUNT(*) FROM later").Scan(&n); err != nil || n != 0 {
				t.Fatalf("the Reader reads a table made after it: %d rows, %v", n, err)
			}
			for _, q := range []string{"CREATE TABLE mine (n INT)", "INSERT INTO later (n) VALUES (1)", "UPDATE leaf_alloc SET step = 1"} {
				if _, err := reader.Exec(q); err == nil {
					t.Errorf("the Reader may %s", q)
				}
			}
		})
	})
}

// SQL's sessions keep times in UTC, as the stores' do: a timestamp
// written as the current time reads back within a minute of it in UTC.
func TestSQLInUTC(t *testing.T) {
	testdb.Each(t, store.Drivers(), func(t *testing.T, driver, dsn string) {
		raw := testdb.SQL(t, driver, dsn)
		if _, err := raw.Exec("CREATE TABLE t (at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP, n INT)"); err != nil {
			t.Fatal(err)
		}
		if _, err := raw.Exec("INSERT INTO t (n) VALUES (1)"); err != nil {
			t.Fatal(err)
		}
		var at string
		if err := raw.QueryRow("SELECT CAST(at AS CHAR(19)) FROM t").Scan(&at); err != nil {
			t.Fatal(err)
		}
		got, err := time.Parse(time.DateTime, at)
		if err != nil {
			t.Fatalf("CURRENT_TIMESTAMP as text %q: %v", at, err)
		}
		if d := time.Since(got); d < -time.Minute || d > time.Minute {
			t.Fatalf("CURRENT_TIMESTAMP %q is %v from now in UTC", at, d)
		}
	})
}
