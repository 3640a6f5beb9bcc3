package all_test

import (
	"strings"
	"testing"

	"github.com/leafd/leafd/store"
	_ "github.com/leafd/leafd/store/all"
)

// Importing the package registers every engine leafd has, under the names
// store.driver takes.
func TestEveryEngineRegistered(t *testing.T) {
	if got := strings.Join(store.Drivers(), " "); got != "mysql postgres sqlite" {
		t.Fatalf("Drivers() = %s, want mysql postgres sqlite", got)
	}
	if got := store.DefaultDriver(); got != "sqlite" {
		t.Errorf("DefaultDriver() = %q, want sqlite", got)
	}
	// The default store.dsn, docs/contract.md's and the shipped config.yaml's.
	if got := store.ExampleDSN(store.DefaultDriver()); got != "file:data/leafd.db" {
		t.Errorf("the default engine's example DSN = %q, want file:data/leafd.db", got)
	}
}
