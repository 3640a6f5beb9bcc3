package store

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"testing"
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
			path, query, err := parseSQLiteDSN(c.dsn)
			if err != nil {
				t.Fatal(err)
			}
			if path != c.path || query.Encode() != c.query.Encode() {
				t.Fatalf("parseSQLiteDSN(%q) = %q, %v; want %q, %v", c.dsn, path, query, c.path, c.query)
			}
		})
	}
	for _, dsn := range []string{"", ":memory:", "file::memory:", "file:x.db?mode=memory", "file:/x.db?vfs=memdb",
		"file://otherhost/x.db", "file:x.db?a=%zz", "file:x%zz.db"} {
		if path, _, err := parseSQLiteDSN(dsn); err == nil {
			t.Errorf("parseSQLiteDSN(%q) = %q, want an error", dsn, path)
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
			s, err := OpenSQLite(c.dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if _, err := os.Stat(filepath.Dir(s.path)); err != nil {
				t.Fatalf("the directory was not created: %v", err)
			}
			ctx := context.Background()
			if err := s.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(s.path); err != nil {
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
				if err := s.x.QueryRowContext(ctx, query).Scan(dest); err != nil {
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
