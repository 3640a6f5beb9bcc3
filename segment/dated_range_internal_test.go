package segment

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leafd/leafd"
)

// A range lease of a dated tag lies within one period, carved from a
// buffer or taken from the store, and is valid until periodMargin before
// that period ends by the server's clock; near the end a request waits for
// the next period, whose range starts its counter. Range, whose callers
// cannot say how long a range lasts, still refuses the tag.
func TestDatedRangeLease(t *testing.T) {
	midnight := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	clock := &datedClock{now: midnight.Add(-time.Second)}
	a, _ := newDatedAllocator(t, clock, leafd.Tag{Period: PeriodDay, Digits: 6, Step: 100})
	ctx := context.Background()
	day := func(id int64) int64 { return id / 1_000_000 }
	within := func(r Range, want int64) {
		t.Helper()
		if r.Start >= r.End || day(r.Start) != want || day(r.End-1) != want {
			t.Fatalf("range [%d, %d) is not within day %d", r.Start, r.End, want)
		}
	}

	if _, err := a.Range(ctx, "orders", 5); leafd.ErrorCode(err) != leafd.ERangeUnsupported || !errors.Is(err, ErrRangeExpires) {
		t.Fatalf("Range of a dated tag: %v, want range_unsupported caused by ErrRangeExpires", err)
	}
	r, valid, err := a.RangeLease(ctx, "orders", 5) // carved from a buffer of 100
	if err != nil {
		t.Fatal(err)
	}
	within(r, 20261127)
	if r.End-r.Start != 5 || valid != time.Second-periodMargin {
		t.Fatalf("carved range [%d, %d) valid %v, want 5 numbers valid %v", r.Start, r.End, valid, time.Second-periodMargin)
	}
	r, valid, err = a.RangeLease(ctx, "orders", 500) // over a quarter of the buffers: from the store
	if err != nil {
		t.Fatal(err)
	}
	within(r, 20261127)
	if r.End-r.Start != 500 || valid != time.Second-periodMargin {
		t.Fatalf("direct range [%d, %d) valid %v", r.Start, r.End, valid)
	}

	// In the period's last periodMargin both kinds wait for the next day.
	for _, size := range []int64{5, 500} {
		clock := &datedClock{now: midnight.Add(-time.Second)}
		a, _ := newDatedAllocator(t, clock, leafd.Tag{Period: PeriodDay, Digits: 6, Step: 100})
		nextOne(t, a)
		clock.set(midnight.Add(-periodMargin / 2))
		go func() {
			time.Sleep(30 * time.Millisecond)
			clock.set(midnight.Add(time.Millisecond))
		}()
		r, valid, err := a.RangeLease(ctx, "orders", size)
		if err != nil {
			t.Fatal(err)
		}
		within(r, 20261128)
		if want := 24*time.Hour - time.Millisecond - periodMargin; valid != want {
			t.Fatalf("size %d: the new day's range valid %v, want %v", size, valid, want)
		}
	}
}

// A direct range of a dated tag is clipped to what its period has left:
// never a number of the next period.
func TestDatedRangeLeaseClippedToPeriod(t *testing.T) {
	clock := &datedClock{now: time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)}
	a, _ := newDatedAllocator(t, clock, leafd.Tag{Period: PeriodDay, Digits: 2, Step: 1})
	ctx := context.Background()
	r, valid, err := a.RangeLease(ctx, "orders", 90)
	if err != nil {
		t.Fatal(err)
	}
	// The first number went to the buffer of one that the request loaded.
	if r.Start != 2026112702 || r.End != 2026112792 || valid != 12*time.Hour-periodMargin {
		t.Fatalf("first range [%d, %d) valid %v", r.Start, r.End, valid)
	}
	r, _, err = a.RangeLease(ctx, "orders", 90)
	if err != nil {
		t.Fatal(err)
	}
	// The first range began no load (a dated tag makes no room for its
	// ranges), so the day's last numbers follow it.
	if r.Start != 2026112792 || r.End != 2026112800 {
		t.Fatalf("the day's last numbers: [%d, %d), want [2026112792, 2026112800)", r.Start, r.End)
	}
	if _, _, err := a.RangeLease(ctx, "orders", 90); leafd.ErrorCode(err) != leafd.EPeriodExhausted {
		t.Fatalf("a range of a full day: %v", err)
	}
}
