package segment_test

import (
	"context"
	"testing"
	"time"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/segment"
)

// A stale sequential server's Store.Allocate on a row created again as
// dated advances max_id by its (sequential) step and commits, although the
// range is then dropped: with a narrow counter the day's window is passed,
// and no server can hand out a number of today any more.
func TestStaleSequentialBurnsDatedPeriod(t *testing.T) {
	db := newDatabase(t, defaultDriver())
	ctx := context.Background()
	if _, err := db.store(t).CreateTag(ctx, leafd.Tag{Name: "orders", Step: 1000, MaxID: 1}); err != nil {
		t.Fatal(err)
	}
	cfg := fastConfig()
	stale := newAllocator(t, db.store(t), cfg)
	db.exec(t, "DELETE FROM leaf_alloc WHERE biz_tag = 'orders'")
	if _, err := db.store(t).CreateTag(ctx, leafd.Tag{Name: "orders", Step: 10, MaxID: 1,
		Format: segment.FormatDated, Period: segment.PeriodDay, Digits: 4}); err != nil {
		t.Fatal(err)
	}
	fresh := newAllocator(t, db.store(t), cfg)
	if _, err := fresh.Next(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	id, err := stale.Next(ctx, "orders")
	t.Logf("stale server: %d, %v", id, err)
	row, _ := db.store(t).LookupTag(ctx, "orders")
	t.Logf("max_id after the stale server's request: %d", row.MaxID)
	other := newAllocator(t, db.store(t), cfg)
	today := dateNumber(time.Now().UTC())
	var got int
	for range 9000 {
		id, err := other.Next(ctx, "orders")
		if err != nil {
			t.Fatalf("after %d numbers of today a new server fails: %v", got, err)
		}
		if id/10_000 != today {
			break
		}
		got++
	}
	if got < 9000 {
		t.Fatalf("a new server handed out only %d numbers of today (of 9999): the stale server's dropped range burned the rest", got)
	}
}

// The same with a counter of 3 digits: the stale server's one load takes
// max_id into tomorrow's window, and today is over for every server.
func TestStaleSequentialEndsDatedDay(t *testing.T) {
	db := newDatabase(t, defaultDriver())
	ctx := context.Background()
	if _, err := db.store(t).CreateTag(ctx, leafd.Tag{Name: "orders", Step: 1000, MaxID: 1}); err != nil {
		t.Fatal(err)
	}
	cfg := fastConfig()
	stale := newAllocator(t, db.store(t), cfg)
	db.exec(t, "DELETE FROM leaf_alloc WHERE biz_tag = 'orders'")
	if _, err := db.store(t).CreateTag(ctx, leafd.Tag{Name: "orders", Step: 10, MaxID: 1,
		Format: segment.FormatDated, Period: segment.PeriodDay, Digits: 3}); err != nil {
		t.Fatal(err)
	}
	fresh := newAllocator(t, db.store(t), cfg)
	if _, err := fresh.Next(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	id, err := stale.Next(ctx, "orders")
	t.Logf("stale server: %d, %v", id, err)
	other := newAllocator(t, db.store(t), cfg)
	if id, err := other.Next(ctx, "orders"); err != nil {
		t.Fatalf("a new server's first number of a dated tag that handed out ~10 numbers of 999 today: %d, %v", id, err)
	}
}
