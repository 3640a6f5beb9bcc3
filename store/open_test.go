package store_test

import (
	"strings"
	"testing"

	"github.com/leafd/leafd/internal/testkit/testdb"
	"github.com/leafd/leafd/store"
)

// Open knows every engine by its store.driver name, refuses others naming
// the ones it knows, and refuses fallbacks for a file.
func TestOpen(t *testing.T) {
	if got := strings.Join(store.Drivers(), " "); got != "mysql postgres sqlite" {
		t.Fatalf("Drivers() = %s", got)
	}
	for _, c := range []struct{ driver, dsn string }{
		{"sqlite", testdb.SQLite(t)},
		{"mysql", "root@tcp(127.0.0.1:1)/leafd"},
		{"postgres", "postgres://root@127.0.0.1:1/leafd"},
	} {
		s, err := store.Open(c.driver, c.dsn)
		if err != nil {
			t.Fatalf("Open(%s): %v", c.driver, err)
		}
		if s.Driver() != c.driver {
			t.Errorf("Open(%s).Driver() = %s", c.driver, s.Driver())
		}
		if err := store.CheckDSN(c.driver, c.dsn); err != nil {
			t.Errorf("CheckDSN(%s): %v", c.driver, err)
		}
		s.Close()
	}
	for _, f := range []func() error{
		func() error { _, err := store.Open("oracle", "x"); return err },
		func() error { return store.CheckDSN("oracle", "x") },
	} {
		if err := f(); err == nil || !strings.Contains(err.Error(), `"oracle" is not supported: use mysql, postgres, sqlite`) {
			t.Errorf("an unknown driver: %v", err)
		}
	}
	if _, err := store.Open("sqlite", testdb.SQLite(t), store.WithFallbacks("other.db")); err == nil ||
		!strings.Contains(err.Error(), "does not apply to sqlite") {
		t.Errorf("SQLite with fallbacks: %v", err)
	}
}
