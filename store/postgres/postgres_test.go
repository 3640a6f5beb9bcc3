package postgres_test

import (
	"context"
	"strings"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver of the raw pools

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/internal/testkit/testdb"
	"github.com/leafd/leafd/segment"
	"github.com/leafd/leafd/store"
)

// migratedPostgres opens a store on a fresh, migrated database.
func migratedPostgres(t *testing.T) (store.Store, string) {
	t.Helper()
	dsn := testdb.Postgres(t)
	s, err := store.Open("postgres", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s, dsn
}

// A session that refuses writes (as a standby's do) is left for the next
// address of store.fallback_dsns, and the store says where it is.
func TestPostgresFallbackLeavesReadOnly(t *testing.T) {
	_, dsn := migratedPostgres(t)
	// The same database, through an address whose sessions are read-only.
	readOnly := dsn + "&default_transaction_read_only=on"
	s, err := store.Open("postgres", readOnly, store.WithFallbacks(dsn))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if _, err := s.CreateTag(ctx, leafd.Tag{Name: "t", Step: 10}); err != nil {
		t.Fatalf("CreateTag with the first address read-only: %v", err)
	}
	a, err := s.Allocate(ctx, "t", 10)
	if err != nil || a != (segment.Allocation{Start: 1, End: 11, TableStep: 10}) {
		t.Fatalf("Allocate = %+v, %v", a, err)
	}
	addr := s.Address()
	if addr.Index != 1 || addr.Count != 2 || addr.Switches < 1 || !strings.Contains(addr.LastSwitchReason, "read-only") {
		t.Fatalf("Address = %+v, want the second of two, moved for read-only", addr)
	}

	// With no address that accepts writes, the error says so.
	only, err := store.Open("postgres", readOnly, store.WithFallbacks(readOnly))
	if err != nil {
		t.Fatal(err)
	}
	defer only.Close()
	_, err = only.Allocate(ctx, "t", 10)
	if leafd.ErrorCode(err) != leafd.EStoreUnavailable || !strings.Contains(leafd.ErrorMessage(err), "refuses writes") {
		t.Fatalf("Allocate with every address read-only: %v; want store_unavailable saying it refuses writes", err)
	}
}

// A database that does not exist is named, with the statement that
// creates it.
func TestPostgresMissingDatabase(t *testing.T) {
	dsn := testdb.Postgres(t)
	missing := strings.Replace(dsn, "/leafd_test_", "/leafd_missing_", 1)
	s, err := store.Open("postgres", missing)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	err = s.Migrate(context.Background())
	if leafd.ErrorCode(err) != leafd.EStoreUnavailable || !strings.Contains(leafd.ErrorMessage(err), "CREATE DATABASE leafd_missing_") {
		t.Fatalf("Migrate of a missing database: %v; want store_unavailable with CREATE DATABASE", err)
	}
	if strings.Contains(err.Error(), "cannot be reached") {
		t.Fatalf("the error blames the network: %v", err)
	}
}

func TestOpenPostgresBadDSN(t *testing.T) {
	for _, c := range []struct{ name, dsn, want string }{
		{"Empty", "", "empty"},
		{"NotADSN", "postgres://root@[::1/leafd", "does not parse"},
		{"NoDatabase", "postgres://root@127.0.0.1:5432", "names no database"},
		{"Password", "postgres://root:s3cret-pw@[::1/leafd", "does not parse"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("PGDATABASE", "")
			err := store.CheckDSN("postgres", c.dsn)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("CheckDSN(%q) = %v, want it to say %q", c.dsn, err, c.want)
			}
			if strings.Contains(err.Error(), "s3cret-pw") {
				t.Fatalf("the error shows the password: %v", err)
			}
			if s, err := store.Open("postgres", c.dsn); err == nil {
				s.Close()
				t.Fatalf("Open(%q) succeeded", c.dsn)
			}
		})
	}
}
