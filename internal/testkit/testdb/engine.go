package testdb

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver of SQL
	_ "modernc.org/sqlite"             // the "sqlite" driver of SQL
)

// engine is what tests know of one engine of store.Drivers, besides how
// it stores IDs: how to get a fresh database of it, and the facts about
// its databases that tests look up by the engine's name (LeafTable,
// Unreachable, MigrateLock, Addr, Missing, WithLogin, Account, Tables)
// instead of switching on names.
type engine struct {
	fresh func(testing.TB) string
	// sqlDriver and sqlDSN are how SQL opens a database of the engine:
	// the database/sql driver, and the DSN it is given for a store's DSN.
	sqlDriver string
	sqlDSN    func(dsn string) (string, error)
	// leafTable is the CREATE TABLE of leaf_alloc as a database that Java
	// Leaf already uses holds it.
	leafTable string
	// unreachable is a DSN in place of dsn where nothing answers.
	unreachable func(dsn string) string
	// holdMigrateLock takes the lock Migrate takes on the database dsn,
	// through raw, SQL's pool on it; nil where the platform lets no test
	// take it.
	holdMigrateLock func(tb testing.TB, raw *sql.DB, dsn string) (release func())
	// addr is the network address of a DSN and withAddr the DSN at another
	// one; nil for an engine of files.
	addr     func(dsn string) (string, error)
	withAddr func(dsn, addr string) (string, error)
	// withDatabase is dsn naming the database name of its server instead,
	// and withLogin dsn logging in as user with password; nil for an
	// engine of files.
	withDatabase func(dsn, name string) (string, error)
	withLogin    func(dsn, user, password string) (string, error)
	// account is the SQL, run on the database dsn, that creates the
	// account user as Account describes it, and the SQL that drops it
	// again; nil for an engine without accounts.
	account func(dsn, user, password string, kind AccountKind) (create, drop []string, err error)
	// tables lists the names of the tables of the database, outside the
	// engine's own catalogue.
	tables string
	// respell is dsn written another way that names the same database.
	respell func(dsn string) (string, error)
}

// missingDatabase is the name of a database that no test creates.
const missingDatabase = "leafd_test_missing_database"

// engines is the tests' one list of engines: Each, DSN and the look-ups
// below fail for an engine of store.Drivers missing here.
var engines = map[string]engine{
	"mysql": {
		fresh:     MySQL,
		sqlDriver: "mysql",
		sqlDSN: func(dsn string) (string, error) {
			cfg, err := mysql.ParseDSN(dsn)
			if err != nil {
				return "", err
			}
			if cfg.Params == nil {
				cfg.Params = map[string]string{}
			}
			cfg.Params["time_zone"] = "'+00:00'"
			return cfg.FormatDSN(), nil
		},
		leafTable: mysqlLeafTable,
		// The connect timeout is short enough for a test.
		unreachable: func(string) string { return "root@tcp(127.0.0.1:1)/leafd?timeout=500ms" },
		holdMigrateLock: func(tb testing.TB, raw *sql.DB, _ string) func() {
			const name = "leafd_migrate" // the named lock of MySQL's Migrate
			return holdOn(tb, raw, func(ctx context.Context, c *sql.Conn) error {
				var got int
				if err := c.QueryRowContext(ctx, "SELECT GET_LOCK(?, 5)", name).Scan(&got); err != nil || got != 1 {
					return fmt.Errorf("GET_LOCK(%q) = %d, %v", name, got, err)
				}
				return nil
			}, func(ctx context.Context, c *sql.Conn) error {
				_, err := c.ExecContext(ctx, "DO RELEASE_LOCK(?)", name)
				return err
			})
		},
		addr: func(dsn string) (string, error) {
			cfg, err := mysql.ParseDSN(dsn)
			if err != nil {
				return "", err
			}
			return cfg.Addr, nil
		},
		withAddr: func(dsn, addr string) (string, error) {
			cfg, err := mysql.ParseDSN(dsn)
			if err != nil {
				return "", err
			}
			cfg.Addr, cfg.Timeout = addr, 500*time.Millisecond
			return cfg.FormatDSN(), nil
		},
		withDatabase: func(dsn, name string) (string, error) {
			cfg, err := mysql.ParseDSN(dsn)
			if err != nil {
				return "", err
			}
			cfg.DBName = name
			return cfg.FormatDSN(), nil
		},
		withLogin: func(dsn, user, password string) (string, error) {
			cfg, err := mysql.ParseDSN(dsn)
			if err != nil {
				return "", err
			}
			cfg.User, cfg.Passwd = user, password
			return cfg.FormatDSN(), nil
		},
		account: func(dsn, user, password string, kind AccountKind) (create, drop []string, err error) {
			cfg, err := mysql.ParseDSN(dsn)
			if err != nil {
				return nil, nil, err
			}
			account := "'" + user + "'@'%'"
			drop = []string{"DROP USER IF EXISTS " + account}
			switch kind {
			case Refused:
				// Another password than the one the test logs in with.
				return []string{"CREATE USER " + account + " IDENTIFIED BY " + sqlString("not-"+password)}, drop, nil
			case Reader:
				return []string{
					"CREATE USER " + account + " IDENTIFIED BY " + sqlString(password),
					"GRANT SELECT ON `" + cfg.DBName + "`.* TO " + account,
				}, drop, nil
			}
			return nil, nil, fmt.Errorf("no account of kind %d", kind)
		},
		tables: "SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE()",
		respell: func(dsn string) (string, error) {
			cfg, err := mysql.ParseDSN(dsn)
			if err != nil {
				return "", err
			}
			cfg.ReadTimeout += time.Hour // a bound no test reaches
			return cfg.FormatDSN(), nil
		},
	},
	"postgres": {
		fresh:     Postgres,
		sqlDriver: "pgx",
		sqlDSN:    func(dsn string) (string, error) { return withParam(dsn, "timezone", "UTC"), nil },
		leafTable: pgLeafTable,
		// The connect timeout is short enough for a test.
		unreachable: func(string) string {
			return "postgres://root@127.0.0.1:1/leafd?sslmode=disable&connect_timeout=1"
		},
		holdMigrateLock: func(tb testing.TB, raw *sql.DB, _ string) func() {
			const key int64 = 0x6c656166645f6d67 // the advisory lock of PostgreSQL's Migrate
			return holdOn(tb, raw, func(ctx context.Context, c *sql.Conn) error {
				_, err := c.ExecContext(ctx, "SELECT pg_advisory_lock($1)", key)
				return err
			}, func(ctx context.Context, c *sql.Conn) error {
				_, err := c.ExecContext(ctx, "SELECT pg_advisory_unlock($1)", key)
				return err
			})
		},
		addr: func(dsn string) (string, error) {
			u, err := url.Parse(dsn)
			if err != nil {
				return "", err
			}
			return u.Host, nil
		},
		withAddr: func(dsn, addr string) (string, error) {
			u, err := url.Parse(dsn)
			if err != nil {
				return "", err
			}
			u.Host = addr
			return withParam(u.String(), "connect_timeout", "1"), nil
		},
		withDatabase: func(dsn, name string) (string, error) {
			u, err := url.Parse(dsn)
			if err != nil {
				return "", err
			}
			u.Path = "/" + name
			return u.String(), nil
		},
		withLogin: func(dsn, user, password string) (string, error) {
			u, err := url.Parse(dsn)
			if err != nil {
				return "", err
			}
			u.User = url.UserPassword(user, password)
			return u.String(), nil
		},
		account: func(_, user, password string, kind AccountKind) (create, drop []string, err error) {
			// DROP OWNED takes away the default privileges Reader's has.
			drop = []string{"DROP OWNED BY " + user, "DROP ROLE IF EXISTS " + user}
			switch kind {
			case Refused:
				// A role that may not log in: a server may trust local
				// clients whatever their password, as a test server's
				// pg_hba.conf often does.
				return []string{"CREATE ROLE " + user + " NOLOGIN PASSWORD " + sqlString(password)}, drop, nil
			case Reader:
				return []string{
					"CREATE ROLE " + user + " LOGIN PASSWORD " + sqlString(password),
					// Before PostgreSQL 15 anyone may create tables in public.
					"REVOKE CREATE ON SCHEMA public FROM PUBLIC",
					"GRANT SELECT ON ALL TABLES IN SCHEMA public TO " + user,
					// The tables the test's own account makes later, too.
					"ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT ON TABLES TO " + user,
				}, drop, nil
			}
			return nil, nil, fmt.Errorf("no account of kind %d", kind)
		},
		tables: "SELECT table_name FROM information_schema.tables WHERE table_schema NOT IN ('pg_catalog', 'information_schema')",
		respell: func(dsn string) (string, error) {
			return withParam(dsn, "application_name", "leafd_test_respelled"), nil
		},
	},
	"sqlite": {
		fresh:     SQLite,
		sqlDriver: "sqlite",
		// SQL waits for the stores' transactions rather than fail.
		sqlDSN:    func(dsn string) (string, error) { return withParam(dsn, "_pragma", "busy_timeout(10000)"), nil },
		leafTable: sqliteLeafTable,
		// A directory where the file should be: SQLite cannot open it.
		unreachable: func(dsn string) string { return filepath.Dir(sqliteFile(dsn)) },
		holdMigrateLock: func() func(testing.TB, *sql.DB, string) func() {
			if !canLockFile {
				return nil
			}
			return func(tb testing.TB, _ *sql.DB, dsn string) func() {
				return lockFile(tb, sqliteFile(dsn)+".migrate.lock") // what SQLite's Migrate flocks
			}
		}(),
		tables: "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'",
		// The file's path alone, or as a file: URI.
		respell: func(dsn string) (string, error) {
			if path, ok := strings.CutPrefix(dsn, "file:"); ok {
				return path, nil
			}
			return "file:" + dsn, nil
		},
	},
}

// mysqlLeafTable is leaf_alloc exactly as Meituan Leaf's README creates it.
const mysqlLeafTable = `CREATE TABLE leaf_alloc (
  biz_tag     VARCHAR(128) NOT NULL DEFAULT '',
  max_id      BIGINT       NOT NULL DEFAULT 1,
  step        INT          NOT NULL,
  description VARCHAR(256) DEFAULT NULL,
  update_time TIMESTAMP    NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
  PRIMARY KEY (biz_tag)
) ENGINE=InnoDB`

// pgLeafTable is leaf_alloc as a PostgreSQL port of Leaf creates it:
// Leaf's columns, without leafd's collation and trigger.
const pgLeafTable = `CREATE TABLE leaf_alloc (
  biz_tag     VARCHAR(128) NOT NULL DEFAULT '',
  max_id      BIGINT       NOT NULL DEFAULT 1,
  step        INT          NOT NULL,
  description VARCHAR(256) DEFAULT NULL,
  update_time TIMESTAMP    NOT NULL DEFAULT CURRENT_TIMESTAMP,
  PRIMARY KEY (biz_tag)
)`

// sqliteLeafTable is leaf_alloc as someone other than leafd would create it
// in SQLite, which Leaf does not run on: Leaf's columns, without leafd's
// trigger and CHECK.
const sqliteLeafTable = pgLeafTable

// lookup returns the engine driver; it panics for an engine testdb lacks,
// as a test that asks for one is wrong whatever the database answers.
func lookup(driver string) engine {
	e, ok := engines[driver]
	if !ok {
		panic(fmt.Sprintf("testdb has no engine %q: add it to testdb's engines", driver))
	}
	return e
}

// SQLDriver is the database/sql driver name with which SQL opens a
// database of engine driver ("pgx" for "postgres"), for code that opens
// its own pool without a test at hand.
func SQLDriver(driver string) string { return lookup(driver).sqlDriver }

// LeafTable is the CREATE TABLE of leaf_alloc of engine driver as a
// database that Java Leaf already uses holds it: Leaf's README on MySQL,
// a PostgreSQL port of Leaf's on PostgreSQL, and for SQLite, which Leaf
// does not run on, the same columns; never what leafd's migration adds.
func LeafTable(driver string) string { return lookup(driver).leafTable }

// Unreachable is a DSN of engine driver in place of the database dsn that
// no store can reach, failing within about a second: an address where
// nothing listens, or for SQLite a directory where the file should be.
func Unreachable(driver, dsn string) string { return lookup(driver).unreachable(dsn) }

// MigrateLock returns the function that takes the lock Migrate takes on
// the database dsn of engine driver from outside any store, as another
// server migrating would (a named lock, an advisory lock, the flock of the
// SQLite file's sibling), and returns the function that releases it, once
// however often it is called and at the latest when the test ends. It is
// nil where the platform lets no test take the lock (SQLite outside Unix),
// as storetest.Database.HoldMigrateLock expects.
func MigrateLock(driver, dsn string) func(t *testing.T) (release func()) {
	hold := lookup(driver).holdMigrateLock
	if hold == nil {
		return nil
	}
	return func(t *testing.T) func() {
		t.Helper()
		return hold(t, SQL(t, driver, dsn).DB, dsn)
	}
}

// Addr is the host:port of the database dsn of engine driver, an engine
// reached at network addresses (store.HasAddresses); it fails the test for
// one that is not, or a DSN that does not parse.
func Addr(tb testing.TB, driver, dsn string) string {
	tb.Helper()
	e := lookup(driver)
	if e.addr == nil {
		tb.Fatalf("engine %s has no network address", driver)
	}
	a, err := e.addr(dsn)
	if err != nil {
		tb.Fatalf("%s DSN %q: %v", driver, dsn, err)
	}
	return a
}

// WithAddr is the database dsn of engine driver reached at addr instead,
// a fault proxy's say, with a connect timeout of at most 1 s so that a
// proxy that is down fails a connection soon; it fails the test as Addr
// does.
func WithAddr(tb testing.TB, driver, dsn, addr string) string {
	tb.Helper()
	e := lookup(driver)
	if e.withAddr == nil {
		tb.Fatalf("engine %s has no network address", driver)
	}
	out, err := e.withAddr(dsn, addr)
	if err != nil {
		tb.Fatalf("%s DSN %q: %v", driver, dsn, err)
	}
	return out
}

// Missing is the database dsn of engine driver, an engine reached at
// network addresses, with its name changed to one of a database that does
// not exist: its server answers, and refuses the connection. It fails the
// test as Addr does.
func Missing(tb testing.TB, driver, dsn string) string {
	tb.Helper()
	return WithDatabase(tb, driver, dsn, missingDatabase)
}

// WithDatabase is the database dsn of engine driver, an engine reached at
// network addresses, naming the database name on the same server instead,
// written as it is (spaces, capitals). It fails the test as Addr does.
func WithDatabase(tb testing.TB, driver, dsn, name string) string {
	tb.Helper()
	e := lookup(driver)
	if e.withDatabase == nil {
		tb.Fatalf("engine %s has no server", driver)
	}
	out, err := e.withDatabase(dsn, name)
	if err != nil {
		tb.Fatalf("%s DSN %q: %v", driver, dsn, err)
	}
	return out
}

// WithLogin is the database dsn of engine driver, an engine reached at
// network addresses, logging in as user with password instead. It fails
// the test as Addr does.
func WithLogin(tb testing.TB, driver, dsn, user, password string) string {
	tb.Helper()
	e := lookup(driver)
	if e.withLogin == nil {
		tb.Fatalf("engine %s has no accounts", driver)
	}
	out, err := e.withLogin(dsn, user, password)
	if err != nil {
		tb.Fatalf("%s DSN %q: %v", driver, dsn, err)
	}
	return out
}

// Respelled is the database dsn of engine driver written another way,
// which a store opens as the same database: for a test that the same
// database is known under two DSNs. It fails the test for a DSN that does
// not parse.
func Respelled(tb testing.TB, driver, dsn string) string {
	tb.Helper()
	out, err := lookup(driver).respell(dsn)
	if err != nil {
		tb.Fatalf("%s DSN %q: %v", driver, dsn, err)
	}
	if out == dsn {
		tb.Fatalf("%s DSN %q: written another way, it is the same", driver, dsn)
	}
	return out
}

// Tables returns the names of the tables of the database dsn of engine
// driver, those of the engine's own catalogue left out.
func Tables(tb testing.TB, driver, dsn string) []string {
	tb.Helper()
	var names []string
	if err := SQL(tb, driver, dsn).Select(&names, lookup(driver).tables); err != nil {
		tb.Fatalf("the tables of %s: %v", driver, err)
	}
	return names
}

// withParam adds the query parameter key=value, written as it is, to a
// URL-like DSN (a postgres:// URL, a file: name).
func withParam(dsn, key, value string) string {
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	return dsn + sep + key + "=" + value
}

// sqliteFile is the path of the file of a SQLite DSN.
func sqliteFile(dsn string) string {
	path, _, _ := strings.Cut(strings.TrimPrefix(dsn, "file:"), "?")
	return path
}

// holdOn runs lock on a connection of its own from db and returns the
// function that runs unlock and gives the connection back, once however
// often it is called and at the latest when the test ends.
func holdOn(tb testing.TB, db *sql.DB, lock, unlock func(context.Context, *sql.Conn) error) (release func()) {
	tb.Helper()
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	if err := lock(ctx, conn); err != nil {
		conn.Close()
		tb.Fatal(err)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			if err := unlock(ctx, conn); err != nil {
				tb.Error(err)
			}
			conn.Close()
		})
	}
	tb.Cleanup(release)
	return release
}
