// Package testdb gives tests real, empty databases: a MySQL or PostgreSQL
// database of its own per test on a server found through the environment
// (PostgreSQL's emptied and reused, pgpool.go), and a fresh SQLite file
// per test. Nothing is mocked: leafd's guarantees
// are about what real databases do. Each runs a test on every engine of
// the store's registry, so that no engine is left out by a hand-written
// list, and what tests need to know of an engine's databases is looked up
// by its name (LeafTable, Unreachable, MigrateLock, Addr, WithAddr,
// Missing, WithDatabase, WithLogin, Account, Tables, Respelled, SQL and
// SQLDriver) rather than written in a switch on names.
//
// Environment:
//
//	LEAFD_TEST_MYSQL_DSN=root@tcp(127.0.0.1:3306)/   the MySQL server, a DSN without a database name
//	                                                 (default: that one, when it answers)
//	LEAFD_TEST_REQUIRE_MYSQL=1                       fail, rather than skip, when no MySQL server answers
//	LEAFD_TEST_POSTGRES_DSN=postgres://root@127.0.0.1:5432/postgres?sslmode=disable
//	                                                 the PostgreSQL server, a DSN of a database that
//	                                                 exists, where test databases are created
//	                                                 (default: that one, when it answers)
//	LEAFD_TEST_REQUIRE_POSTGRES=1                    fail, rather than skip, when no PostgreSQL server answers
package testdb

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/jmoiron/sqlx"

	_ "github.com/leafd/leafd/store/all" // the engines a test may open
)

// Each runs f as a subtest named after each engine in drivers, with a
// fresh database of that engine (DSN). Pass store.Drivers(), the registry:
// testdb cannot import store, whose own tests import testdb. An engine
// whose server does not answer is skipped, or fails the subtest under
// LEAFD_TEST_REQUIRE_MYSQL=1 / LEAFD_TEST_REQUIRE_POSTGRES=1.
func Each(t *testing.T, drivers []string, f func(t *testing.T, driver, dsn string)) {
	t.Helper()
	for _, driver := range drivers {
		t.Run(driver, func(t *testing.T) { f(t, driver, DSN(t, driver)) })
	}
}

// DSN returns a fresh, empty database of the engine store.driver names, as
// MySQL, Postgres or SQLite does. It fails the test for an engine testdb
// has no database of.
func DSN(tb testing.TB, driver string) string {
	tb.Helper()
	e, ok := engines[driver]
	if !ok {
		tb.Fatalf("testdb has no database of engine %q: add it to testdb's engines", driver)
	}
	return e.fresh(tb)
}

// SQL returns a plain pool on the database dsn of engine driver, outside
// any store, for a test's own SQL; it is closed when the test ends. Write
// queries with ? placeholders and pass them through its Rebind. Its
// sessions keep times in UTC, as the stores' do, and on SQLite it waits
// for the stores' transactions rather than fail.
func SQL(tb testing.TB, driver, dsn string) *sqlx.DB {
	tb.Helper()
	e, ok := engines[driver]
	if !ok {
		tb.Fatalf("testdb has no database of engine %q: add it to testdb's engines", driver)
	}
	sqlDSN, err := e.sqlDSN(dsn)
	if err != nil {
		tb.Fatalf("%s DSN %q: %v", driver, dsn, err)
	}
	db, err := sqlx.Open(e.sqlDriver, sqlDSN)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

// DefaultMySQLDSN is the server MySQL uses when LEAFD_TEST_MYSQL_DSN is not
// set.
const DefaultMySQLDSN = "root@tcp(127.0.0.1:3306)/"

// reachTimeout bounds the check that a MySQL server answers.
const reachTimeout = 2 * time.Second

// server is the MySQL server of this test process, looked for once.
var server struct {
	once sync.Once
	cfg  *mysql.Config
	db   *sql.DB // the server without a database, to create and drop them
	err  error   // why there is no server; nil when there is one
}

func findServer() {
	dsn := os.Getenv("LEAFD_TEST_MYSQL_DSN")
	if dsn == "" {
		dsn = DefaultMySQLDSN
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		server.err = fmt.Errorf("LEAFD_TEST_MYSQL_DSN %q does not parse: %w", dsn, err)
		return
	}
	cfg.DBName = ""
	admin := cfg.Clone()
	admin.Timeout = reachTimeout
	admin.Logger = &mysql.NopLogger{}
	connector, err := mysql.NewConnector(admin)
	if err != nil {
		server.err = fmt.Errorf("MySQL DSN %q: %w", dsn, err)
		return
	}
	db := sql.OpenDB(connector)
	ctx, cancel := context.WithTimeout(context.Background(), reachTimeout)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		server.err = fmt.Errorf("no MySQL at %s (%v): set LEAFD_TEST_MYSQL_DSN to a server's DSN without a database name, such as %s",
			cfg.Addr, err, DefaultMySQLDSN)
		return
	}
	server.cfg, server.db = cfg, db
}

// MySQL returns the DSN, in the format of github.com/go-sql-driver/mysql,
// of a new, empty database named leafd_test_<8 hex digits> that is dropped
// when the test ends. When no server answers within 2 seconds it skips the
// test, or fails it if LEAFD_TEST_REQUIRE_MYSQL=1. The server is looked for
// once per test process.
func MySQL(tb testing.TB) string {
	tb.Helper()
	server.once.Do(findServer)
	if server.err != nil {
		if os.Getenv("LEAFD_TEST_REQUIRE_MYSQL") == "1" {
			tb.Fatalf("%v (LEAFD_TEST_REQUIRE_MYSQL=1)", server.err)
		}
		tb.Skip(server.err)
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := "leafd_test_" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := server.db.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		tb.Fatalf("create the test database %s: %v", name, err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := server.db.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name); err != nil {
			tb.Errorf("drop the test database %s: %v", name, err)
		}
	})
	cfg := server.cfg.Clone()
	cfg.DBName = name
	return cfg.FormatDSN()
}

// SQLite returns a file: DSN, without parameters, to a new SQLite file in
// the test's temporary directory. The file does not exist yet.
func SQLite(tb testing.TB) string {
	tb.Helper()
	return "file:" + filepath.Join(tb.TempDir(), "leafd.db")
}

// DefaultPostgresDSN is the server Postgres uses when
// LEAFD_TEST_POSTGRES_DSN is not set.
const DefaultPostgresDSN = "postgres://root@127.0.0.1:5432/postgres?sslmode=disable"

// pgServer is the PostgreSQL server of this test process, looked for once.
var pgServer struct {
	once sync.Once
	cfg  *pgx.ConnConfig
	db   *sql.DB // the server's admin database, to create and drop others
	err  error   // why there is no server; nil when there is one
	mu   sync.Mutex
	pool pgPool // this process's test databases (pgpool.go)
}

func findPostgres() {
	dsn := os.Getenv("LEAFD_TEST_POSTGRES_DSN")
	if dsn == "" {
		dsn = DefaultPostgresDSN
	}
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		pgServer.err = fmt.Errorf("LEAFD_TEST_POSTGRES_DSN: %w", err)
		return
	}
	cfg.ConnectTimeout = reachTimeout
	db := stdlib.OpenDB(*cfg)
	ctx, cancel := context.WithTimeout(context.Background(), reachTimeout)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		pgServer.err = fmt.Errorf("no PostgreSQL at %s:%d (%v): set LEAFD_TEST_POSTGRES_DSN to a server's DSN, such as %s",
			cfg.Host, cfg.Port, err, DefaultPostgresDSN)
		return
	}
	pool, err := startPool(ctx, db)
	if err != nil {
		db.Close()
		pgServer.err = fmt.Errorf("PostgreSQL at %s:%d: %w", cfg.Host, cfg.Port, err)
		return
	}
	pgServer.cfg, pgServer.db, pgServer.pool = cfg, db, pool
}

// Postgres returns the DSN, a postgres:// URL, of an empty database named
// leafd_test_<8 hex digits>_<n>, which is emptied and kept for another test
// when this one ends (pgpool.go). When no server answers within 2 seconds
// it skips the test, or fails it if LEAFD_TEST_REQUIRE_POSTGRES=1. The
// server is looked for once per test process.
func Postgres(tb testing.TB) string {
	tb.Helper()
	pgServer.once.Do(findPostgres)
	if pgServer.err != nil {
		if os.Getenv("LEAFD_TEST_REQUIRE_POSTGRES") == "1" {
			tb.Fatalf("%v (LEAFD_TEST_REQUIRE_POSTGRES=1)", pgServer.err)
		}
		tb.Skip(pgServer.err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	name, err := pgAcquire(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { pgRelease(name) })
	u := url.URL{
		Scheme:   "postgres",
		Host:     net.JoinHostPort(pgServer.cfg.Host, strconv.Itoa(int(pgServer.cfg.Port))),
		Path:     "/" + name,
		RawQuery: "sslmode=disable",
	}
	if pgServer.cfg.Password != "" {
		u.User = url.UserPassword(pgServer.cfg.User, pgServer.cfg.Password)
	} else {
		u.User = url.User(pgServer.cfg.User)
	}
	return u.String()
}
