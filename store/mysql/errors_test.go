package mysql_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/internal/testkit/testdb"
	"github.com/leafd/leafd/store/internal/engine"
	"github.com/leafd/leafd/store/internal/testhook"
	"github.com/leafd/leafd/store/storetest"
)

// These tests provoke every cause of store_unavailable that one MySQL
// server can be brought to give, and word the others from the errors the
// driver would return (storetest.WantUnavailable says what every message
// must hold). The causes of the network and the context, whatever the
// engine, are store's tests'.

func randomName(prefix string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

func TestMySQLErrorsProvoked(t *testing.T) {
	ctx := context.Background()
	const password = storetest.Password

	t.Run("Refused", func(t *testing.T) {
		// Nothing listens on port 1.
		s := openStore(t, "leafd:"+password+"@tcp(127.0.0.1:1)/leafd?timeout=500ms")
		storetest.WantUnavailable(t, s.Ping(ctx), "cannot be reached at 127.0.0.1:1", "connection refused",
			"check the address in store.dsn and that the database server runs")
		storetest.WantUnavailable(t, s.Migrate(ctx), "connection refused")
	})

	// An address that does not answer, or a host name that does not
	// resolve, is checked with the driver's errors built in
	// TestMySQLErrorsWorded and store's TestErrorsWorded: a test here
	// sends nothing beyond this machine.

	t.Run("UnknownDatabase", func(t *testing.T) {
		cfg := mysqlConfig(t, testdb.MySQL(t))
		cfg.DBName = randomName("leafd_test_missing_")
		s := openStore(t, cfg.FormatDSN())
		err := s.Migrate(ctx)
		storetest.WantUnavailable(t, err, "database "+cfg.DBName+" does not exist", "create it with CREATE DATABASE "+cfg.DBName)
		_, err = s.ListTags(ctx)
		storetest.WantUnavailable(t, err, "CREATE DATABASE "+cfg.DBName)
	})

	t.Run("AccessDenied", func(t *testing.T) {
		cfg := mysqlConfig(t, testdb.MySQL(t))
		admin := openRaw(t, cfg.FormatDSN())
		user := randomName("leafd_err_")
		exec(t, admin, fmt.Sprintf("CREATE USER '%s'@'%%' IDENTIFIED BY 'right-%s'", user, password))
		t.Cleanup(func() { _, _ = admin.Exec(fmt.Sprintf("DROP USER IF EXISTS '%s'@'%%'", user)) })

		// The password is wrong: 1045.
		wrong := cfg.Clone()
		wrong.User, wrong.Passwd = user, password
		s := openStore(t, wrong.FormatDSN())
		err := s.Ping(ctx)
		storetest.WantUnavailable(t, err, "the database refused the login", user, "check the user and password in store.dsn")
		if strings.Contains(leafd.ErrorMessage(err), "right-") {
			t.Errorf("message %q shows a password", leafd.ErrorMessage(err))
		}

		// The password is right, and the user may not use the database: 1044.
		right := wrong.Clone()
		right.Passwd = "right-" + password
		s = openStore(t, right.FormatDSN())
		err = s.Ping(ctx)
		storetest.WantUnavailable(t, err, "may not use the database", cfg.DBName, "GRANT")
		if strings.Contains(err.Error(), "right-") {
			t.Errorf("error %q shows a password", err)
		}
	})

	t.Run("LockWaitTimeout", func(t *testing.T) {
		cfg := mysqlConfig(t, testdb.MySQL(t))
		cfg.Params = map[string]string{"innodb_lock_wait_timeout": "1"}
		s := openMigrated(t, cfg.FormatDSN())
		raw := openRaw(t, cfg.FormatDSN())
		exec(t, raw, "INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('t', 1, 10)")
		tx, err := raw.Begin()
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		if _, err := tx.Exec("SELECT max_id FROM leaf_alloc WHERE biz_tag = 't' FOR UPDATE"); err != nil {
			t.Fatal(err)
		}
		_, err = s.Allocate(ctx, "t", 10)
		storetest.WantUnavailable(t, err, "the row is locked by another transaction (lock wait timeout)", "retry once the lock is released")
		if err := s.Ping(ctx); err != nil {
			t.Fatalf("Ping while the row is locked: %v", err)
		}
	})

	t.Run("ReadOnly", func(t *testing.T) {
		// Every session of this DSN is read-only (SET tx_read_only = 1 at
		// connect), as every session of a replica is: the server itself
		// refuses the UPDATE (error 1792), with no other test disturbed.
		cfg := mysqlConfig(t, testdb.MySQL(t))
		s := openMigrated(t, cfg.FormatDSN())
		if _, err := s.CreateTag(ctx, leafd.Tag{Name: "t", Step: 10}); err != nil {
			t.Fatal(err)
		}
		ro := cfg.Clone()
		ro.Params = map[string]string{"tx_read_only": "1"}
		s = openStore(t, ro.FormatDSN())
		_, err := s.Allocate(ctx, "t", 10)
		storetest.WantUnavailable(t, err, "the database refuses writes (read-only, a replica)", "point store.dsn at the primary")
		if code := leafd.ErrorCode(err); code != leafd.EStoreUnavailable {
			t.Errorf("code of %v is %q, want %s", err, code, leafd.EStoreUnavailable)
		}
	})

	t.Run("DeadlockRetriedOut", func(t *testing.T) {
		// Every attempt is aborted as a deadlock victim would be: the
		// database rolls the transaction back, and the error is the
		// server's own.
		s := openMigrated(t, testdb.MySQL(t))
		if _, err := s.CreateTag(ctx, leafd.Tag{Name: "t", Step: 10}); err != nil {
			t.Fatal(err)
		}
		attempts := 0
		beforeCommit(s, func(context.Context, *sqlx.Tx) error {
			attempts++
			return mysqlErr(1213, "40001", "Deadlock found when trying to get lock; try restarting transaction")
		})
		_, err := s.Allocate(ctx, "t", 10)
		storetest.WantUnavailable(t, err, "the database kept aborting the transaction (deadlock or certification conflict)",
			fmt.Sprintf("retried %d times", testhook.MaxAttempts-1), "try again")
		if attempts != testhook.MaxAttempts {
			t.Errorf("%d attempts, want %d", attempts, testhook.MaxAttempts)
		}
	})
}

// The causes one server cannot be brought to give in a test (it would have
// to be a replica, shut down, or out of connections, under every other
// test) are worded from the errors the driver returns for them.
func TestMySQLErrorsWorded(t *testing.T) {
	// A store that is never connected: only its words are asked.
	s := testhook.Migrator(openStore(t, "root@tcp(10.0.0.7:3306)/leafd")).(engine.Migrator)
	for _, c := range []struct {
		name  string
		err   error
		class engine.Class
		want  []string
	}{
		{"ReadOnly1290", mysqlErr(1290, "", "The MariaDB server is running with the --read-only option so it cannot execute this statement"),
			engine.ClassUnavailable, []string{"the database refuses writes (read-only, a replica)", "point store.dsn at the primary or add it to store.fallback_dsns"}},
		{"ReadOnly1836", mysqlErr(1836, "", "Running in read-only mode"),
			engine.ClassUnavailable, []string{"refuses writes", "store.fallback_dsns"}},
		{"ReadOnly1792", mysqlErr(1792, "", "Cannot execute statement in a READ ONLY transaction."),
			engine.ClassUnavailable, []string{"refuses writes", "store.fallback_dsns"}},
		{"TooManyConnections", mysqlErr(1040, "", "Too many connections"),
			engine.ClassUnavailable, []string{"too many connections", "raise max_connections"}},
		{"ShuttingDown", mysqlErr(1053, "", "Server shutdown in progress"),
			engine.ClassUnavailable, []string{"shutting down", "retry once it is back"}},
		{"GaleraNotSynced", mysqlErr(1047, "", "WSREP has not yet prepared node for application use"),
			engine.ClassUnavailable, []string{"Galera node is not synced", "store.fallback_dsns"}},
		{"GroupReplicationOffline", mysqlErr(3100, "", "Error on observer while running replication hook 'before_commit'."),
			engine.ClassUnavailable, []string{"Group Replication member is not online", "store.fallback_dsns"}},
		{"AccessDenied", mysqlErr(1045, "", "Access denied for user 'leafd'@'10.0.0.9' (using password: YES)"),
			engine.ClassUnavailable, []string{"refused the login", "'leafd'@'10.0.0.9'", "check the user and password in store.dsn"}},
		{"UnknownDatabase", mysqlErr(1049, "", "Unknown database 'leafd'"),
			engine.ClassUnavailable, []string{"database leafd does not exist", "CREATE DATABASE leafd"}},
		{"UnknownDatabaseOddName", mysqlErr(1049, "", "Unknown database 'leaf-d'"),
			engine.ClassUnavailable, []string{"CREATE DATABASE `leaf-d`"}},
		{"Deadlock", mysqlErr(1213, "", "Deadlock found when trying to get lock; try restarting transaction"),
			engine.ClassRetry, []string{"kept aborting the transaction (deadlock or certification conflict)"}},
		{"GroupReplicationConflict", mysqlErr(3101, "", "Plugin instructed the server to rollback the current transaction."),
			engine.ClassRetry, []string{"deadlock or certification conflict"}},
		{"SerializationFailure", mysqlErr(1, "40001", "serialization failure"),
			engine.ClassRetry, []string{"deadlock or certification conflict"}},
		{"Killed", mysqlErr(1927, "", "Connection was killed"),
			engine.ClassUnavailable, []string{"killed the connection"}},
		{"ConnectionLost", mysql.ErrInvalidConn,
			engine.ClassUnavailable, []string{"closed the connection", "retry"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := s.Class(c.err); got != c.class {
				t.Fatalf("class = %d, want %d", got, c.class)
			}
			storetest.WantUnavailable(t, s.Wrap(c.err, "allocate \"t\""), c.want...)
		})
	}

	// An error that is none of these is not store_unavailable, and keeps
	// the operation's name for the log.
	err := s.Wrap(mysqlErr(1146, "", "Table 'leafd.leaf_alloc' doesn't exist"), "list tags")
	if code := leafd.ErrorCode(err); code != leafd.EInternal || !strings.Contains(err.Error(), "list tags") {
		t.Fatalf("a missing table: %v (code %q), want an internal error naming the operation", err, code)
	}
}
