package storetest

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/store"
)

// RowLockNamed migrates s, creates a tag, locks its row through raw
// and checks that Allocate fails after about 5 s with store_unavailable
// naming the lock, that the database still answers, and that the tag
// serves once the lock is gone.
func RowLockNamed(t *testing.T, s store.Store, raw *sql.DB) {
	t.Helper()
	ctx := context.Background()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateTag(ctx, leafd.Tag{Name: "t", Step: 10}); err != nil {
		t.Fatal(err)
	}
	tx, err := raw.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.Exec("SELECT max_id FROM leaf_alloc WHERE biz_tag = 't' FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	start := time.Now()
	_, err = s.Allocate(actx, "t", 10)
	took := time.Since(start)
	if leafd.ErrorCode(err) != leafd.EStoreUnavailable || !strings.Contains(leafd.ErrorMessage(err), "locked by another transaction") {
		t.Fatalf("Allocate of a locked row: %v; want store_unavailable naming the lock", err)
	}
	if took < 4*time.Second || took > 9*time.Second {
		t.Fatalf("Allocate of a locked row failed after %v, want the 5 s lock wait", took)
	}
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping while a row is locked: %v", err)
	}
	tx.Rollback()
	if _, err := s.Allocate(ctx, "t", 10); err != nil {
		t.Fatalf("Allocate once the lock is gone: %v", err)
	}
}
