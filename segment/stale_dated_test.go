package segment_test

import (
	"context"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/segment"
)

// A server that still serves a tag as sequential after the tag was
// deleted by SQL and created again as dated takes none of the dated tag's
// numbers as sequential ones, and writes none away: its first request is
// answered with a number of today, and a new server can still hand out
// the rest of the day's numbers. With a narrow counter, a sequential
// step taken from the dated row would have used up most of the day (4
// digits) or moved max_id into tomorrow's numbers (3 digits).
func TestStaleSequentialLeavesDatedPeriod(t *testing.T) {
	for _, digits := range []int{3, 4} {
		t.Run(strconv.Itoa(digits)+" digits", func(t *testing.T) {
			db := newDatabase(t, defaultDriver())
			ctx := context.Background()
			if _, err := db.store(t).CreateTag(ctx, leafd.Tag{Name: "orders", Step: 1000, MaxID: 1}); err != nil {
				t.Fatal(err)
			}
			cfg := fastConfig()
			stale := newAllocator(t, db.store(t), cfg) // read the tag as sequential
			db.exec(t, "DELETE FROM leaf_alloc WHERE biz_tag = 'orders'")
			if _, err := db.store(t).CreateTag(ctx, leafd.Tag{Name: "orders", Step: 10, MaxID: 1,
				Format: segment.FormatDated, Period: segment.PeriodDay, Digits: digits}); err != nil {
				t.Fatal(err)
			}
			if _, err := newAllocator(t, db.store(t), cfg).Next(ctx, "orders"); err != nil {
				t.Fatal(err)
			}
			scale := int64(math.Pow10(digits))
			today := dateNumber(time.Now().UTC())
			if id, err := stale.Next(ctx, "orders"); err != nil || id/scale != today {
				t.Fatalf("the stale server's first request: %d, %v; want a number of today (%d)", id, err, today)
			}
			// The two servers hold at most two ranges of 10 each.
			other, got, want := newAllocator(t, db.store(t), cfg), int64(0), scale-1-40
			for got < want {
				id, err := other.Next(ctx, "orders")
				if err != nil || id/scale != today {
					t.Fatalf("a new server handed out %d numbers of today, then %d, %v; want %d of the day's %d", got, id, err, want, scale-1)
				}
				got++
			}
		})
	}
}
