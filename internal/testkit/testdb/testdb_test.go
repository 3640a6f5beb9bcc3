package testdb_test

import (
	"database/sql"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

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
