package sqlite

import (
	"context"
	"database/sql"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leafd/leafd/store"
	"github.com/leafd/leafd/store/internal/engine"
	"github.com/leafd/leafd/store/internal/testhook"
)

func TestParseSQLiteDSN(t *testing.T) {
	for _, c := range []struct {
		name, dsn, path string
		query           url.Values
	}{
		{"BarePath", "data/leafd.db", "data/leafd.db", url.Values{}},
		{"BarePathParams", "data/leafd.db?_txlock=deferred", "data/leafd.db", url.Values{"_txlock": {"deferred"}}},
		{"FileURI", "file:data/leafd.db", "data/leafd.db", url.Values{}},
		{"FileURIParams", "file:/var/lib/leafd.db?_pragma=busy_timeout(5)&_pragma=foreign_keys(1)",
			"/var/lib/leafd.db", url.Values{"_pragma": {"busy_timeout(5)", "foreign_keys(1)"}}},
		{"FileURIEmptyHost", "file:///var/lib/leafd.db", "/var/lib/leafd.db", url.Values{}},
		{"FileURILocalhost", "file://localhost/var/lib/leafd.db", "/var/lib/leafd.db", url.Values{}},
		{"FileURIEscaped", "file:my%20data/a%23b.db", "my data/a#b.db", url.Values{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			path, query, err := parseDSN(c.dsn)
			if err != nil {
				t.Fatal(err)
			}
			if path != c.path || query.Encode() != c.query.Encode() {
				t.Fatalf("parseDSN(%q) = %q, %v; want %q, %v", c.dsn, path, query, c.path, c.query)
			}
		})
	}
	for _, dsn := range []string{"", ":memory:", "file::memory:", "file:x.db?mode=memory", "file:/x.db?vfs=memdb",
		"file://otherhost/x.db", "file:x.db?a=%zz", "file:x%zz.db",
		// SQLite takes the last mode.
		"file:x.db?mode=rwc&mode=memory", "x.db?mode=rwc&m%6fde=memory",
		// SQLite ignores what follows a NUL (%00) in a path, key or value:
		// a temporary database, one in memory, another file.
		"file:%00x.db", "file:x.db?mode=memory%00", "file:x.db?mode=memory%00x", "x.db?mode%00x=memory", "data/x\x00.db"} {
		if path, _, err := parseDSN(dsn); err == nil {
			t.Errorf("parseDSN(%q) = %q, want an error", dsn, path)
		}
	}
}

// OpenSQLite creates the file's directory, and its connections run with
// the settings it promises, unless the DSN sets them itself.
func TestOpenSQLiteSettings(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name, dsn   string
		busyTimeout int
	}{
		{"Defaults", filepath.Join(dir, "a", "b", "leafd.db"), 250},
		{"OddName", filepath.Join(dir, "c", "odd #%.db"), 250},
		{"OwnBusyTimeout", "file:" + filepath.Join(dir, "d", "leafd.db") + "?_pragma=busy_timeout(1234)", 1234},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := store.Open("sqlite", c.dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if _, err := os.Stat(filepath.Dir(testhook.Migrator(s).(engine.Migrator).Addr())); err != nil {
				t.Fatalf("the directory was not created: %v", err)
			}
			ctx := context.Background()
			if err := s.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(testhook.Migrator(s).(engine.Migrator).Addr()); err != nil {
				t.Fatalf("the database file is not where the DSN says: %v", err)
			}
			var (
				journal           string
				busy, synchronous int
			)
			for query, dest := range map[string]any{
				"PRAGMA journal_mode": &journal,
				"PRAGMA busy_timeout": &busy,
				"PRAGMA synchronous":  &synchronous,
			} {
				if err := testhook.Migrator(s).(engine.Migrator).DB().QueryRowContext(ctx, query).Scan(dest); err != nil {
					t.Fatalf("%s: %v", query, err)
				}
			}
			if journal != "wal" || busy != c.busyTimeout || synchronous != 2 {
				t.Fatalf("journal_mode %s, busy_timeout %d, synchronous %d; want wal, %d, 2 (FULL)",
					journal, busy, synchronous, c.busyTimeout)
			}
		})
	}
}

// The DSN parameters that let two processes sharing the file hold its write
// lock at once (and so take the same range), or let a crash lose a
// committed range, are refused, naming the parameter. For those that break
// the lock, the test first shows that they do: two connections opened as
// OpenSQLite would open them both begin a write transaction.
func TestSQLiteRefusesUnsafeParams(t *testing.T) {
	for _, c := range []struct {
		name, param string
		// other is the second connection's parameter when the first's is
		// shown to break the lock; "-" when it is not shown.
		other string
	}{
		{"NoLocks", "vfs=unix-none", "vfs=unix-none"},
		{"NoLock", "nolock=1", "nolock=1"},
		// SQLite reads a number as C does, hexadecimal too.
		{"NoLockHex", "nolock=0x1", "nolock=0x1"},
		{"ImmutableHex", "immutable=0x01", "-"},
		// Dot-file locks are not seen by the default VFS's POSIX locks
		// (and the dot-file VFS cannot use WAL, so the file is in rollback
		// mode here).
		{"DotFileBesideDefault", "vfs=unix-dotfile&_pragma=journal_mode(DELETE)", "_pragma=journal_mode(DELETE)"},
		{"Exclusive", "vfs=unix-excl", "-"},
		{"Immutable", "immutable=yes", "-"},
		{"JournalOff", "_pragma=journal_mode(OFF)", "-"},
		{"JournalMemory", "_journal_mode=MEMORY", "-"},
		{"SynchronousOff", "_pragma=synchronous = off", "-"},
		{"SynchronousNormal", "_sync=NORMAL", "-"},
		{"SchemaSynchronous", "_pragma=main.synchronous('0')", "-"},
		{"TwoStatements", "_pragma=foreign_keys(1)%3BPRAGMA synchronous=OFF", "-"},
		// SQLite reads no, false and 7 (8 levels wrap to 0) as OFF, and
		// on, yes and any word it does not know as NORMAL.
		{"SynchronousNo", "_pragma=synchronous(no)", "-"},
		{"SynchronousSeven", "_pragma=synchronous(7)", "-"},
		{"SynchronousOn", "_pragma=synchronous = on", "-"},
		{"SynchronousUnknown", "_pragma=synchronous(fast)", "-"},
		// A comment or a quoted name hides the pragma from a loose reading;
		// SQLite skips the comment.
		{"CommentInName", "_pragma=synchronous/**/=off", "-"},
		{"CommentBeforeValue", "_pragma=journal_mode/**/(off)", "-"},
		{"CommentAfterValue", "_pragma=journal_mode=off--x", "-"},
		{"QuotedName", `_pragma="synchronous"=off`, "-"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "leafd.db")
			if c.other != "-" {
				if !bothWrite(t, path, c.param, c.other) {
					t.Fatalf("%s and %s do not both hold the write lock: no reason to refuse %s", c.param, c.other, c.param)
				}
			}
			dsn := "file:" + path + "?" + c.param
			// The message names the parameter after the DSN, and says why.
			first, _ := url.QueryUnescape(strings.Split(c.param, "&")[0])
			want := " sets " + first + ": "
			if _, err := store.Open("sqlite", dsn); err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("Open(%q): %v; want an error with %q", dsn, err, want)
			}
			if err := store.CheckDSN("sqlite", dsn); err == nil {
				t.Fatalf("CheckDSN(%q) accepts it", dsn)
			}
		})
	}
	// What is safe stays accepted.
	for _, param := range []string{"vfs=unix", "nolock=0", "immutable=off", "_pragma=synchronous(EXTRA)", "_sync=FULL",
		"_pragma=journal_mode(DELETE)", "_journal=wal", "_pragma=foreign_keys(1)", "_txlock=exclusive",
		"_pragma=main.synchronous = 'full'", "_pragma=synchronous(2)", "_pragma=cache_size(-2000)", "_pragma=journal_mode"} {
		dsn := "file:" + filepath.Join(t.TempDir(), "leafd.db") + "?" + param
		if _, _, err := parseDSN(dsn); err != nil {
			t.Errorf("parseDSN(%q): %v", dsn, err)
		}
	}
}

// bothWrite opens the file at path twice, with the parameters a and b and
// leafd's own settings, and reports whether both connections begin an
// IMMEDIATE transaction (take the write lock) at once.
func bothWrite(t *testing.T, path, a, b string) bool {
	t.Helper()
	ctx := context.Background()
	var conns []*sql.Conn
	for _, param := range []string{a, b} {
		q, err := url.ParseQuery(param)
		if err != nil {
			t.Fatal(err)
		}
		db, err := sql.Open("sqlite", driverDSN(path, q))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		conn, err := db.Conn(ctx)
		if err != nil {
			t.Fatalf("open %s: %v", param, err)
		}
		t.Cleanup(func() { conn.Close() })
		if _, err := conn.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS t (x)"); err != nil {
			t.Fatalf("%s: %v", param, err)
		}
		conns = append(conns, conn)
	}
	if _, err := conns[0].ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatalf("the first connection (%s) cannot begin: %v", a, err)
	}
	_, err := conns[1].ExecContext(ctx, "BEGIN IMMEDIATE")
	return err == nil
}
