package sqlite_test

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/leafd/leafd/store"
	_ "github.com/leafd/leafd/store/all" // the other engines, which must not read SQLite's DSNs as theirs
)

// SQLite recognises the DSNs written for it, and no other engine does; a
// DSN that another engine reads too is left to store.driver. MaskDSN
// leaves them as they are: they hold no secret.
func TestSQLiteDSNKinds(t *testing.T) {
	for _, dsn := range []string{
		"file:data/leafd.db",
		"file:leafd?mode=rwc",
		"file:x.db?_pragma=foreign_keys(1)",
		":memory:",
		"data/leafd.db",
		"/leafd.db",
		"/var/lib/leafd.SQLITE?_pragma=x",
		"data/leafd.db?_txlock=deferred",
		"leafd.db3",
		"/var/lib/leafd/ids.sqlite3",
		"file:/tmp/x.db?_pragma=busy_timeout(1000)",
	} {
		if got := store.DSNKinds(dsn); !slices.Equal(got, []string{"sqlite"}) {
			t.Errorf("DSNKinds(%q) = %q, want sqlite alone", dsn, got)
		}
		if got := store.MaskDSN(dsn); got != dsn {
			t.Errorf("MaskDSN(%q) = %q, want it as it is", dsn, got)
		}
	}
	// A path, or a DSN of an engine with addresses: store.driver says which.
	const both = "tcp/leaf.db"
	if got := store.DSNKinds(both); !slices.Contains(got, "sqlite") || len(got) != 2 {
		t.Errorf("DSNKinds(%q) = %q, want sqlite and one engine with addresses", both, got)
	}
	if other := store.OtherEngine("sqlite", both); other != "" {
		t.Errorf("OtherEngine(sqlite, %q) = %q, want none: the DSN is SQLite's too", both, other)
	}
	// A name alone is a file's to SQLite: left to store.driver.
	if other := store.OtherEngine("sqlite", "leafd"); other != "" {
		t.Errorf("OtherEngine(sqlite, leafd) = %q, want none", other)
	}
}

// A SQLite DSN given to any other engine is refused by Open and CheckDSN,
// naming both engines, as a first address or a fallback.
func TestOtherEnginesRefuseSQLiteDSN(t *testing.T) {
	const dsn = "file:data/leafd.db"
	for _, driver := range store.Drivers() {
		if driver == "sqlite" {
			continue
		}
		want := "is a SQLite DSN, not a " + store.EngineName(driver) + " one"
		for name, f := range map[string]func() error{
			"Open":     func() error { _, err := store.Open(driver, dsn); return err },
			"CheckDSN": func() error { return store.CheckDSN(driver, dsn) },
		} {
			if err := f(); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s(%s, %q): %v; want %q", name, driver, dsn, err, want)
			}
		}
		if !store.HasAddresses(driver) {
			continue
		}
		if _, err := store.Open(driver, store.ExampleDSN(driver), store.WithFallbacks(dsn)); err == nil ||
			!strings.Contains(err.Error(), "is a SQLite DSN") {
			t.Errorf("a SQLite fallback of a %s store: %v", driver, err)
		}
	}
}

// A DSN that no engine reads as its own but that has the shape of another
// database's address (a URL other than file:, or user:password@host) is
// not a SQLite path either: it is refused, with its password masked,
// where SQLite would have served from a new file in a directory named
// after the password. A path meant that way can be written as a file: URI.
func TestSQLiteRefusesAnAddress(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	for _, dsn := range []string{
		"root:s3cret@localhost:3306/leaf", // MySQL without tcp(…)
		"root@db:3306/leaf",
		"root@localhost/leaf",          // user@host/database
		"postgress://u:s3cret@db/leaf", // a misspelt scheme
		"postgresql:/u:s3cret@db/leaf",
		"mysql:/root:s3cret@db/leaf",
		"ssl-mode=disable host=db password=s3cret dbname=leaf", // keyword=value pairs with a misspelt first keyword
		"\u00a0host=db password=s3cret dbname=leaf",
		"file://root:s3cret@db/leaf", // a file: URI's host is refused too
	} {
		for name, f := range map[string]func() error{
			"Open":     func() error { _, err := store.Open("sqlite", dsn); return err },
			"CheckDSN": func() error { return store.CheckDSN("sqlite", dsn) },
		} {
			if err := f(); err == nil || !strings.Contains(err.Error(), "not a file's path") && !strings.Contains(err.Error(), "names a host") ||
				strings.Contains(err.Error(), "s3cret") {
				t.Errorf("%s(sqlite, %q): %v; want it refused as an address, without the password", name, dsn, err)
			}
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("a refused DSN left %s", e.Name())
	}
	for _, dsn := range []string{"data/leafd@blue/leafd.db", "./leafd@blue/leafd.db", "/leafd@blue/leafd.db", "data/10:30/leafd.db", "file:odd/u:p@h/leafd.db",
		"data/a=b/leafd.db", "data/my leafd.db"} {
		if err := store.CheckDSN("sqlite", dsn); err != nil {
			t.Errorf("CheckDSN(sqlite, %q): %v", dsn, err)
		}
	}
}
