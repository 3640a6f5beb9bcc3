package store_test

import (
	"strings"
	"testing"

	"github.com/leafd/leafd/store"
)

// Open knows every registered engine by its store.driver name, refuses
// others naming the ones it knows, and refuses fallbacks for an engine of
// files. (store/all's test says which engines those are.)
func TestOpen(t *testing.T) {
	t.Chdir(t.TempDir()) // an engine of files may make the directory of its example DSN
	if len(store.Drivers()) == 0 {
		t.Fatal("no engine is registered")
	}
	for _, driver := range store.Drivers() {
		dsn := store.ExampleDSN(driver)
		s, err := store.Open(driver, dsn)
		if err != nil {
			t.Fatalf("Open(%s, its example %q): %v", driver, dsn, err)
		}
		if s.Driver() != driver {
			t.Errorf("Open(%s).Driver() = %s", driver, s.Driver())
		}
		if err := store.CheckDSN(driver, dsn); err != nil {
			t.Errorf("CheckDSN(%s, its example %q): %v", driver, dsn, err)
		}
		s.Close()
		if store.HasAddresses(driver) {
			continue
		}
		if _, err := store.Open(driver, dsn, store.WithFallbacks("other.db")); err == nil ||
			!strings.Contains(err.Error(), "does not apply to "+driver) {
			t.Errorf("%s with fallbacks: %v", driver, err)
		}
	}
	want := `"oracle" is not supported: use ` + strings.Join(store.Drivers(), ", ")
	for _, f := range []func() error{
		func() error { _, err := store.Open("oracle", "x"); return err },
		func() error { return store.CheckDSN("oracle", "x") },
	} {
		if err := f(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("an unknown driver: %v, want %q", err, want)
		}
	}
}
