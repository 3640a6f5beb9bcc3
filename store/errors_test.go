package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/internal/testkit/testdb"
	"github.com/leafd/leafd/store/internal/engine"
)

// These tests provoke every cause of store_unavailable that one database
// server can be brought to give, and word the others from the errors the
// driver would return. Each message names the cause and the next step,
// never the password, and says nothing of buffers: that is the serving
// path's to say.

// testPassword is the password of the DSNs below; no message may show it.
const testPassword = "s3cret-Pa55word"

// wantMessage checks that err is store_unavailable and that its message,
// and its whole text with the cause, hold every one of want and neither the
// password nor the serving path's words.
func wantMessage(t *testing.T, err error, want ...string) {
	t.Helper()
	if code := leafd.ErrorCode(err); code != leafd.EStoreUnavailable {
		t.Fatalf("error %v: code %q, want store_unavailable", err, code)
	}
	msg := leafd.ErrorMessage(err)
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("message %q does not say %q", msg, w)
		}
	}
	for _, text := range []string{msg, err.Error()} {
		if strings.Contains(text, testPassword) {
			t.Errorf("%q shows the password", text)
		}
		if strings.Contains(text, "served from buffers") {
			t.Errorf("%q speaks of buffers", text)
		}
	}
}

// mysqlConfig returns the configuration of a fresh test database.
func mysqlConfig(t *testing.T) *mysql.Config {
	t.Helper()
	cfg, err := mysql.ParseDSN(testdb.MySQL(t))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func openMySQLOrFail(t *testing.T, dsn string) *db {
	t.Helper()
	s, err := openDB("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func randomName(prefix string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

func TestMySQLErrorsProvoked(t *testing.T) {
	ctx := context.Background()

	t.Run("Refused", func(t *testing.T) {
		// Nothing listens on port 1.
		s := openMySQLOrFail(t, "leafd:"+testPassword+"@tcp(127.0.0.1:1)/leafd?timeout=500ms")
		wantMessage(t, s.Ping(ctx), "cannot be reached at 127.0.0.1:1", "connection refused",
			"check the address in store.dsn and that the database server runs")
		wantMessage(t, s.Migrate(ctx), "connection refused")
	})

	// An address that does not answer, or a host name that does not
	// resolve, is checked with the driver's errors built in
	// TestMySQLErrorsWorded: a test here sends nothing beyond this machine.

	t.Run("UnknownDatabase", func(t *testing.T) {
		cfg := mysqlConfig(t)
		cfg.DBName = randomName("leafd_test_missing_")
		s := openMySQLOrFail(t, cfg.FormatDSN())
		err := s.Migrate(ctx)
		wantMessage(t, err, "database "+cfg.DBName+" does not exist", "create it with CREATE DATABASE "+cfg.DBName)
		_, err = s.ListTags(ctx)
		wantMessage(t, err, "CREATE DATABASE "+cfg.DBName)
	})

	t.Run("AccessDenied", func(t *testing.T) {
		cfg := mysqlConfig(t)
		admin := openRaw(t, "mysql", cfg.FormatDSN())
		user := randomName("leafd_err_")
		mustExec(t, admin, fmt.Sprintf("CREATE USER '%s'@'%%' IDENTIFIED BY 'right-%s'", user, testPassword))
		t.Cleanup(func() { _, _ = admin.Exec(fmt.Sprintf("DROP USER IF EXISTS '%s'@'%%'", user)) })

		// The password is wrong: 1045.
		wrong := cfg.Clone()
		wrong.User, wrong.Passwd = user, testPassword
		s := openMySQLOrFail(t, wrong.FormatDSN())
		err := s.Ping(ctx)
		wantMessage(t, err, "the database refused the login", user, "check the user and password in store.dsn")
		if strings.Contains(leafd.ErrorMessage(err), "right-") {
			t.Errorf("message %q shows a password", leafd.ErrorMessage(err))
		}

		// The password is right, and the user may not use the database: 1044.
		right := wrong.Clone()
		right.Passwd = "right-" + testPassword
		s = openMySQLOrFail(t, right.FormatDSN())
		err = s.Ping(ctx)
		wantMessage(t, err, "may not use the database", cfg.DBName, "GRANT")
		if strings.Contains(err.Error(), "right-") {
			t.Errorf("error %q shows a password", err)
		}
	})

	t.Run("LockWaitTimeout", func(t *testing.T) {
		cfg := mysqlConfig(t)
		cfg.Params = map[string]string{"innodb_lock_wait_timeout": "1"}
		s := openMigratedMySQL(t, cfg.FormatDSN())
		raw := openRaw(t, "mysql", cfg.FormatDSN())
		mustExec(t, raw, "INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('t', 1, 10)")
		tx, err := raw.Begin()
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		if _, err := tx.Exec("SELECT max_id FROM leaf_alloc WHERE biz_tag = 't' FOR UPDATE"); err != nil {
			t.Fatal(err)
		}
		_, err = s.Allocate(ctx, "t", 10)
		wantMessage(t, err, "the row is locked by another transaction (lock wait timeout)", "retry once the lock is released")
		if err := s.Ping(ctx); err != nil {
			t.Fatalf("Ping while the row is locked: %v", err)
		}
	})

	t.Run("ReadOnly", func(t *testing.T) {
		// Every session of this DSN is read-only (SET tx_read_only = 1 at
		// connect), as every session of a replica is: the server itself
		// refuses the UPDATE (error 1792), with no other test disturbed.
		cfg := mysqlConfig(t)
		s := openMigratedMySQL(t, cfg.FormatDSN())
		if _, err := s.CreateTag(ctx, leafd.Tag{Name: "t", Step: 10}); err != nil {
			t.Fatal(err)
		}
		ro := cfg.Clone()
		ro.Params = map[string]string{"tx_read_only": "1"}
		s = openMySQLOrFail(t, ro.FormatDSN())
		_, err := s.Allocate(ctx, "t", 10)
		wantMessage(t, err, "the database refuses writes (read-only, a replica)", "point store.dsn at the primary")
		if code := leafd.ErrorCode(err); code != leafd.EStoreUnavailable {
			t.Errorf("code of %v is %q, want %s", err, code, leafd.EStoreUnavailable)
		}
	})

	t.Run("DeadlockRetriedOut", func(t *testing.T) {
		// Every attempt is aborted as a deadlock victim would be: the
		// database rolls the transaction back, and the error is the
		// server's own.
		s := openMigratedMySQL(t, mysqlConfig(t).FormatDSN())
		if _, err := s.CreateTag(ctx, leafd.Tag{Name: "t", Step: 10}); err != nil {
			t.Fatal(err)
		}
		attempts := 0
		s.beforeCommit = func(context.Context, *sqlx.Tx) error {
			attempts++
			return &mysql.MySQLError{Number: 1213, SQLState: [5]byte{'4', '0', '0', '0', '1'},
				Message: "Deadlock found when trying to get lock; try restarting transaction"}
		}
		_, err := s.Allocate(ctx, "t", 10)
		wantMessage(t, err, "the database kept aborting the transaction (deadlock or certification conflict)",
			fmt.Sprintf("retried %d times", maxAttempts-1), "try again")
		if attempts != maxAttempts {
			t.Errorf("%d attempts, want %d", attempts, maxAttempts)
		}
	})
}

func TestSQLiteErrorsProvoked(t *testing.T) {
	ctx := context.Background()

	t.Run("CannotOpen", func(t *testing.T) {
		// A directory where the file should be.
		s, err := openDB("sqlite", t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		wantMessage(t, s.Ping(ctx), "cannot be opened", "names a file, not a directory")
	})

	t.Run("BusyRetriedOut", func(t *testing.T) {
		dsn := testdb.SQLite(t)
		s, err := openDB("sqlite", dsn+"?_pragma=busy_timeout(20)")
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if err := s.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := s.CreateTag(ctx, leafd.Tag{Name: "t", Step: 10}); err != nil {
			t.Fatal(err)
		}
		d := *s.dialect // this store's alone
		d.RetryFor = 300 * time.Millisecond
		s.dialect = &d
		// Another connection holds the write lock throughout.
		raw := openRaw(t, "sqlite", dsn)
		conn, err := raw.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
			t.Fatal(err)
		}
		defer conn.ExecContext(ctx, "ROLLBACK")
		_, err = s.Allocate(ctx, "t", 10)
		wantMessage(t, err, "the SQLite file stayed locked by another connection or process (busy)", "retried", "see what else writes the file")
	})
}

// The causes one server cannot be brought to give in a test (it would have
// to be a replica, shut down, or out of connections, under every other
// test) are worded from the errors the driver returns for them.
func TestMySQLErrorsWorded(t *testing.T) {
	s := &db{dialect: lookup("mysql")}
	addr := &net.TCPAddr{IP: net.IPv4(10, 0, 0, 7), Port: 3306}
	dial := func(errno syscall.Errno) error {
		return &net.OpError{Op: "dial", Net: "tcp", Addr: addr, Err: os.NewSyscallError("connect", errno)}
	}
	for _, c := range []struct {
		name  string
		err   error
		class engine.Class
		want  []string
	}{
		{"ReadOnly1290", &mysql.MySQLError{Number: 1290, Message: "The MariaDB server is running with the --read-only option so it cannot execute this statement"},
			engine.ClassUnavailable, []string{"the database refuses writes (read-only, a replica)", "point store.dsn at the primary or add it to store.fallback_dsns"}},
		{"ReadOnly1836", &mysql.MySQLError{Number: 1836, Message: "Running in read-only mode"},
			engine.ClassUnavailable, []string{"refuses writes", "store.fallback_dsns"}},
		{"ReadOnly1792", &mysql.MySQLError{Number: 1792, Message: "Cannot execute statement in a READ ONLY transaction."},
			engine.ClassUnavailable, []string{"refuses writes", "store.fallback_dsns"}},
		{"ReadOnlyProbe", fmt.Errorf("10.0.0.7:3306: %w", &engine.Refusal{Reason: "the server is read-only", Verdict: engine.ReadOnly}),
			engine.ClassUnavailable, []string{"refuses writes", "point store.dsn at the primary"}},
		{"TooManyConnections", &mysql.MySQLError{Number: 1040, Message: "Too many connections"},
			engine.ClassUnavailable, []string{"too many connections", "raise max_connections"}},
		{"ShuttingDown", &mysql.MySQLError{Number: 1053, Message: "Server shutdown in progress"},
			engine.ClassUnavailable, []string{"shutting down", "retry once it is back"}},
		{"GaleraNotSynced", &mysql.MySQLError{Number: 1047, Message: "WSREP has not yet prepared node for application use"},
			engine.ClassUnavailable, []string{"Galera node is not synced", "store.fallback_dsns"}},
		{"GaleraProbe", fmt.Errorf("10.0.0.7:3306: %w", &engine.Refusal{Reason: "not synced", Verdict: engine.Verdict{Class: engine.ClassUnavailable, Cause: "the Galera node is not synced"}}),
			engine.ClassUnavailable, []string{"Galera node is not synced"}},
		{"GroupReplicationOffline", &mysql.MySQLError{Number: 3100, Message: "Error on observer while running replication hook 'before_commit'."},
			engine.ClassUnavailable, []string{"Group Replication member is not online", "store.fallback_dsns"}},
		{"AccessDenied", &mysql.MySQLError{Number: 1045, Message: "Access denied for user 'leafd'@'10.0.0.9' (using password: YES)"},
			engine.ClassUnavailable, []string{"refused the login", "'leafd'@'10.0.0.9'", "check the user and password in store.dsn"}},
		{"UnknownDatabase", &mysql.MySQLError{Number: 1049, Message: "Unknown database 'leafd'"},
			engine.ClassUnavailable, []string{"database leafd does not exist", "CREATE DATABASE leafd"}},
		{"UnknownDatabaseOddName", &mysql.MySQLError{Number: 1049, Message: "Unknown database 'leaf-d'"},
			engine.ClassUnavailable, []string{"CREATE DATABASE `leaf-d`"}},
		{"Deadlock", &mysql.MySQLError{Number: 1213, Message: "Deadlock found when trying to get lock; try restarting transaction"},
			engine.ClassRetry, []string{"kept aborting the transaction (deadlock or certification conflict)"}},
		{"GroupReplicationConflict", &mysql.MySQLError{Number: 3101, Message: "Plugin instructed the server to rollback the current transaction."},
			engine.ClassRetry, []string{"deadlock or certification conflict"}},
		{"SerializationFailure", &mysql.MySQLError{Number: 1, SQLState: [5]byte{'4', '0', '0', '0', '1'}, Message: "serialization failure"},
			engine.ClassRetry, []string{"deadlock or certification conflict"}},
		{"Killed", &mysql.MySQLError{Number: 1927, Message: "Connection was killed"},
			engine.ClassUnavailable, []string{"killed the connection"}},
		{"ConnectionLost", mysql.ErrInvalidConn,
			engine.ClassUnavailable, []string{"closed the connection", "retry"}},
		{"Refused", dial(syscall.ECONNREFUSED),
			engine.ClassUnavailable, []string{"cannot be reached at 10.0.0.7:3306", "connection refused", "check the address in store.dsn and that the database server runs"}},
		{"NoRoute", dial(syscall.EHOSTUNREACH),
			engine.ClassUnavailable, []string{"cannot be reached at 10.0.0.7:3306", "no route", "check the address in store.dsn and the network"}},
		{"DialTimeout", dial(syscall.ETIMEDOUT),
			engine.ClassUnavailable, []string{"cannot be reached at 10.0.0.7:3306", "dial timeout", "timeout= in store.dsn"}},
		{"UnknownHost", &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "leafd-db.example", IsNotFound: true}},
			engine.ClassUnavailable, []string{`the host name "leafd-db.example" does not resolve`, "check the host in store.dsn"}},
		{"Reset", &net.OpError{Op: "read", Net: "tcp", Addr: addr, Err: os.NewSyscallError("read", syscall.ECONNRESET)},
			engine.ClassUnavailable, []string{"connection to the database at 10.0.0.7:3306 was reset"}},
		{"Deadline", fmt.Errorf("query: %w", context.DeadlineExceeded),
			engine.ClassUnavailable, []string{"did not answer in time"}},
		{"Canceled", fmt.Errorf("query: %w", context.Canceled),
			engine.ClassUnavailable, []string{"cancelled before the database answered"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := s.class(c.err); got != c.class {
				t.Fatalf("class = %d, want %d", got, c.class)
			}
			wantMessage(t, s.Wrap(c.err, "allocate \"t\""), c.want...)
		})
	}

	// An error that is none of these is not store_unavailable, and keeps
	// the operation's name for the log.
	err := s.Wrap(&mysql.MySQLError{Number: 1146, Message: "Table 'leafd.leaf_alloc' doesn't exist"}, "list tags")
	if code := leafd.ErrorCode(err); code != leafd.EInternal || !strings.Contains(err.Error(), "list tags") {
		t.Fatalf("a missing table: %v (code %q), want an internal error naming the operation", err, code)
	}
}

// No store message anywhere speaks of buffers: one-shot commands print
// them too.
func TestStoreMessagesSayNothingOfBuffers(t *testing.T) {
	err := filepath.WalkDir(".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return err
		}
		b, err := os.ReadFile(name)
		if err != nil {
			return err
		}
		if strings.Contains(string(b), "from buffers") {
			t.Errorf("%s speaks of serving from buffers", name)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var ro *retriedOut
	if !errors.As(&retriedOut{err: sql.ErrConnDone, tries: 2}, &ro) || !errors.Is(ro, sql.ErrConnDone) {
		t.Fatal("retriedOut does not unwrap to its cause")
	}
}
