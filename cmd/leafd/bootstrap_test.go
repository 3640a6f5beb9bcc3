package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/leafd/leafd/internal/config"
	"github.com/leafd/leafd/internal/testkit/testdb"
	"github.com/leafd/leafd/store"
	"github.com/leafd/leafd/store/sharded"
)

// A server with store.dsn alone on a database of store.shards stops once
// that database answers, with store.migrate true or false, also when it
// did not answer at start-up (whose check then passes it over): serving
// it alone would hand out its slots' IDs again.
func TestBootstrapRefusesShardAlone(t *testing.T) {
	ctx := context.Background()
	driver := store.DefaultDriver()
	dsns := []string{testdb.DSN(t, driver), testdb.DSN(t, driver)}
	sh, err := sharded.Open(driver, dsns, sharded.Options{Slots: 4})
	if err != nil {
		t.Fatal(err)
	}
	err = sh.Migrate(ctx)
	sh.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, migrate := range []bool{true, false} {
		cfg := config.Default()
		cfg.Store.Migrate = migrate
		db, err := store.Open(driver, dsns[1])
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		err = bootstrap(ctx, cfg, db, nil, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if !errors.Is(err, sharded.ErrMismatch) {
			t.Fatalf("store.migrate %v: bootstrap over store.shards[1] alone: %v, want a mismatch", migrate, err)
		}
	}
}
