package mysql_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/leafd/leafd/internal/testkit/testdb"
	"github.com/leafd/leafd/store"
	"github.com/leafd/leafd/store/internal/engine"
	"github.com/leafd/leafd/store/internal/testhook"
	"github.com/leafd/leafd/store/mysql"
)

// migrator opens a migrated store of dsn, as its engine's Migrate sees it.
func migrator(t *testing.T, dsn string) engine.Migrator {
	t.Helper()
	s, err := store.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return testhook.Migrator(s).(engine.Migrator)
}

func exec(t *testing.T, db *sql.DB, query string, args ...any) {
	t.Helper()
	if _, err := db.Exec(query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// A lock row left by a server that died while migrating is taken once it
// expires; one held by a live server is waited for, and the error names
// it and says that the row expires on its own.
func TestLockRowExpiry(t *testing.T) {
	ctx := context.Background()
	m := migrator(t, testdb.MySQL(t))
	raw := m.DB().DB
	exec(t, raw, mysql.CreateLockTableSQL)
	exec(t, raw, "DELETE FROM leafd_lock")
	exec(t, raw, "INSERT INTO leafd_lock (name, holder, expires_ms) VALUES (?, 'crashed-server/1/x', 1)", mysql.MigrateLock)
	release, err := mysql.TakeLockRow(ctx, m)
	if err != nil {
		t.Fatalf("take a lock row that has expired: %v", err)
	}
	var holder string
	if err := raw.QueryRow("SELECT holder FROM leafd_lock WHERE name = ?", mysql.MigrateLock).Scan(&holder); err != nil || !strings.Contains(holder, "/") || strings.HasPrefix(holder, "crashed-server") {
		t.Fatalf("lock row held by %q, %v; want this process", holder, err)
	}
	release()
	if err := raw.QueryRow("SELECT holder FROM leafd_lock WHERE name = ?", mysql.MigrateLock).Scan(&holder); err != nil || holder != "" {
		t.Fatalf("lock row held by %q, %v after release; want it free", holder, err)
	}

	exec(t, raw, "UPDATE leafd_lock SET holder = 'live-server/2/y', expires_ms = "+mysql.NowMs+" + 600000")
	const wait = 300 * time.Millisecond
	defer mysql.SetLockRowWait(wait)()
	start := time.Now()
	_, err = mysql.TakeLockRow(ctx, m)
	if err == nil || !strings.Contains(err.Error(), "live-server/2/y holds it") || !strings.Contains(err.Error(), "expires on its own") {
		t.Fatalf("take the lock row another server holds: %v; want an error naming the holder", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("gave up after %v, want about %v", d, wait)
	}
}
