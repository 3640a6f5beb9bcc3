package store_test

import (
	"strings"
	"testing"

	"github.com/leafd/leafd/store"
)

// What no engine reads as written for it is no engine's. (Each engine's
// package checks that it, and it alone, reads its own DSNs, and that
// MaskDSN hides their passwords.)
func TestDSNKindsNone(t *testing.T) {
	for _, dsn := range []string{"leafd", "", "not a dsn", "data/leafd", "/leaf"} {
		if got := store.DSNKinds(dsn); len(got) != 0 {
			t.Errorf("DSNKinds(%q) = %q, want none", dsn, got)
		}
	}
}

// Every engine reads its example DSN, which messages suggest, as its own
// and no other engine does; and each of the others refuses it, naming
// both engines.
func TestExampleDSNs(t *testing.T) {
	for _, driver := range store.Drivers() {
		dsn := store.ExampleDSN(driver)
		if got := store.DSNKinds(dsn); len(got) != 1 || got[0] != driver {
			t.Errorf("DSNKinds(%q), the example of %s, = %q; want %s alone", dsn, driver, got, driver)
		}
		for _, other := range store.Drivers() {
			if other == driver {
				continue
			}
			want := "is a " + store.EngineName(driver) + " DSN, not a " + store.EngineName(other) + " one"
			if err := store.CheckDSN(other, dsn); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("CheckDSN(%s, %q): %v, want %q", other, dsn, err, want)
			}
		}
	}
}
