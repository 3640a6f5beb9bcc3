// Package testdb gives tests real, empty databases: a fresh MySQL database
// per test on a server found through the environment, and a fresh SQLite
// file per test. Nothing is mocked: leafd's guarantees are about what real
// databases do.
//
// Environment:
//
//	LEAFD_TEST_MYSQL_DSN=root@tcp(127.0.0.1:3306)/   the server, a DSN without a database name
//	                                                 (default: that one, when it answers)
//	LEAFD_TEST_REQUIRE_MYSQL=1                       fail, rather than skip, when no server answers
package testdb

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

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
