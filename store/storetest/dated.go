package storetest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/segment"
	"github.com/leafd/leafd/store"
)

// The windows of the dated cases: the days 2026-11-27 and 2026-11-28 of a
// tag of two digits, 99 numbers each. The store takes the window within
// answers, whatever the clock says; the allocator makes it of the clock.
var (
	day1 = segment.Window{Floor: 20261127_01, Limit: 20261128_00}
	day2 = segment.Window{Floor: 20261128_01, Limit: 20261129_00}
)

// in returns a within that answers w.
func in(w segment.Window) func(time.Time) (segment.Window, error) {
	return func(time.Time) (segment.Window, error) { return w, nil }
}

// dated is a dated tag of day periods in UTC with two digits.
func dated(name string, step int64) leafd.Tag {
	return leafd.Tag{Name: name, Step: step, Format: segment.FormatDated, Period: segment.PeriodDay, Digits: 2}
}

// allocateIn asks AllocateIn for a range of w and checks it is want.
func (h *harness) allocateIn(s Store, tag string, step int64, w segment.Window, want segment.Allocation) {
	h.t.Helper()
	got, err := s.AllocateIn(context.Background(), tag, step, in(w))
	if err != nil {
		h.t.Fatalf("AllocateIn(%q, %d, %v): %v", tag, step, w, err)
	}
	if got != want {
		h.t.Fatalf("AllocateIn(%q, %d, %v) = %+v, want %+v", tag, step, w, got, want)
	}
}

// unchanged checks that max_id and the mark of tag are maxID and mark:
// what a refused AllocateIn must leave.
func (h *harness) unchanged(what, tag string, maxID, mark int64) {
	h.t.Helper()
	if got := h.maxID(tag); got != maxID {
		h.t.Fatalf("%s: max_id of %q = %d, want %d (unchanged)", what, tag, got, maxID)
	}
	if got := h.mark(tag); got != mark {
		h.t.Fatalf("%s: high-water mark of %q = %d, want %d (unchanged)", what, tag, got, mark)
	}
}

// AllocateIn raises a max_id below the window to its floor, hands out
// ranges in it, clips the last one at its limit, then answers
// period_exhausted with nothing written; the next window starts at its
// own floor. The table step is read as Allocate reads it.
func testDatedAllocate(t *testing.T, h *harness) {
	s := h.migrated()
	ctx := context.Background()
	create(t, s, dated("d", 10))
	h.allocateIn(s, "d", 10, day1, segment.Allocation{Start: day1.Floor, End: day1.Floor + 10, TableStep: 10})
	h.allocateIn(s, "d", 1, day1, segment.Allocation{Start: day1.Floor + 10, End: day1.Floor + 11, TableStep: 10})
	// Up to 3 numbers before the limit, then 10 asked and 3 given.
	upTo := day1.Limit - 3 - (day1.Floor + 11)
	h.allocateIn(s, "d", upTo, day1, segment.Allocation{Start: day1.Floor + 11, End: day1.Limit - 3, TableStep: 10})
	h.allocateIn(s, "d", 10, day1, segment.Allocation{Start: day1.Limit - 3, End: day1.Limit, TableStep: 10})
	for _, step := range []int64{1, 10, leafd.MaxID} {
		a, err := s.AllocateIn(ctx, "d", step, in(day1))
		if err == nil {
			t.Fatalf("AllocateIn(d, %d) of a window used up = %+v, want period_exhausted", step, a)
		}
		wantCode(t, "AllocateIn of a window used up", err, leafd.EPeriodExhausted)
		h.unchanged("period_exhausted", "d", day1.Limit, day1.Limit)
	}
	// The next day starts at its first number; a step wider than the
	// whole window gets the window.
	h.allocateIn(s, "d", 5, day2, segment.Allocation{Start: day2.Floor, End: day2.Floor + 5, TableStep: 10})
	h.allocateIn(h.open(), "d", leafd.MaxID, day2, segment.Allocation{Start: day2.Floor + 5, End: day2.Limit, TableStep: 10})
	// A window that lies below max_id (a server behind the others at
	// midnight) gets nothing below the numbers already issued, and is told
	// that a later period began.
	_, err := s.AllocateIn(ctx, "d", 1, in(day1))
	if !errors.Is(err, segment.ErrLaterPeriod) {
		t.Fatalf("AllocateIn of a window below max_id: %v, want segment.ErrLaterPeriod", err)
	}
	h.unchanged("a window below max_id", "d", day2.Limit, day2.Limit)
	// Allocate, which serves sequential and opaque tags, takes none of a
	// dated tag's numbers: a server that still serves the tag as
	// sequential (it was created again as dated since) writes nothing.
	if a, err := s.Allocate(ctx, "d", 10); !errors.Is(err, segment.ErrDatedRow) {
		t.Fatalf("Allocate of a dated tag = %+v, %v; want segment.ErrDatedRow", a, err)
	}
	h.unchanged("Allocate of a dated tag", "d", day2.Limit, day2.Limit)

	// A share bounds a range to that part of the room left, read in the
	// transaction: 99 numbers left, 1/8 of them; then 87, 1/8; at least 1.
	create(t, s, dated("share", 10))
	shared := day1
	shared.Share = 8
	h.allocateIn(s, "share", 50, shared, segment.Allocation{Start: day1.Floor, End: day1.Floor + 12, TableStep: 10})
	h.allocateIn(s, "share", 50, shared, segment.Allocation{Start: day1.Floor + 12, End: day1.Floor + 22, TableStep: 10})
	h.allocateIn(s, "share", day1.Limit-day1.Floor-22-3, day1, segment.Allocation{Start: day1.Floor + 22, End: day1.Limit - 3, TableStep: 10})
	h.allocateIn(s, "share", 50, shared, segment.Allocation{Start: day1.Limit - 3, End: day1.Limit - 2, TableStep: 10})

	// A sequential tag's Allocate is not concerned.
	create(t, s, leafd.Tag{Name: "seq", Step: 10})
	h.allocate(s, "seq", 10, segment.Allocation{Start: 1, End: 11, TableStep: 10})

	_, err = s.AllocateIn(ctx, "nope", 10, in(day1))
	wantCode(t, "AllocateIn of a missing tag", err, leafd.EUnknownTag)
	for _, step := range []int64{0, -1} {
		if a, err := s.AllocateIn(ctx, "d", step, in(day2)); err == nil {
			t.Fatalf("AllocateIn with step %d = %+v, want an error", step, a)
		}
	}
}

// within gets the database's clock, close to this machine's, and its
// error ends the transaction with nothing written, returned as it is.
func testDatedWithin(t *testing.T, h *harness) {
	s := h.migrated()
	ctx := context.Background()
	create(t, s, dated("d", 10))
	h.allocateIn(s, "d", 10, day1, segment.Allocation{Start: day1.Floor, End: day1.Floor + 10, TableStep: 10})

	var dbNow time.Time
	before := time.Now()
	a, err := s.AllocateIn(ctx, "d", 10, func(now time.Time) (segment.Window, error) {
		dbNow = now
		return day1, nil
	})
	after := time.Now()
	if err != nil || a.Start != day1.Floor+10 {
		t.Fatalf("AllocateIn = %+v, %v", a, err)
	}
	if dbNow.Before(before.Add(-3*time.Second)) || dbNow.After(after.Add(3*time.Second)) {
		t.Fatalf("within was given %v as the database's clock, this machine's is %v to %v", dbNow.UTC(), before.UTC(), after.UTC())
	}

	coded := leafd.Errorf(leafd.ESegmentUnavailable, "the clocks differ")
	plain := errors.New("no window")
	for _, want := range []error{coded, plain} {
		calls := 0
		a, err := s.AllocateIn(ctx, "d", 10, func(time.Time) (segment.Window, error) {
			calls++
			return segment.Window{}, want
		})
		if err != want || calls != 1 {
			t.Fatalf("AllocateIn whose within fails with %v = %+v, %v after %d calls; want that error as it is, one call", want, a, err, calls)
		}
		h.unchanged("within failed", "d", day1.Floor+20, day1.Floor+20)
	}
}

// A max_id lowered within a period, or below the period's floor once it
// handed out numbers, is tag_rewound, with nothing written.
func testDatedRewound(t *testing.T, h *harness) {
	s := h.migrated()
	create(t, s, dated("d", 10))
	h.allocateIn(s, "d", 20, day1, segment.Allocation{Start: day1.Floor, End: day1.Floor + 20, TableStep: 10})
	for _, lowered := range []int64{day1.Floor + 5, 1} {
		h.exec("UPDATE leaf_alloc SET max_id = ? WHERE biz_tag = 'd'", lowered)
		a, err := s.AllocateIn(context.Background(), "d", 10, in(day1))
		if err == nil {
			t.Fatalf("AllocateIn after max_id was lowered to %d = %+v, want tag_rewound", lowered, a)
		}
		wantCode(t, fmt.Sprintf("AllocateIn after max_id was lowered to %d", lowered), err, leafd.ETagRewound)
		h.unchanged("tag_rewound", "d", lowered, day1.Floor+20)
	}
	// The next period starts above every number issued: no repair needed.
	h.allocateIn(s, "d", 10, day2, segment.Allocation{Start: day2.Floor, End: day2.Floor + 10, TableStep: 10})
}

// A dated tag keeps its period, zone, digits and max_step through its
// creation, the lookup, the list and an update of its step; specs that do
// not make a dated tag, and a dated tag's fields on another format, are
// invalid_body and create nothing.
func testDatedTag(t *testing.T, h *harness) {
	s := h.migrated()
	ctx := context.Background()
	want := leafd.Tag{Name: "bill", Step: 10, Format: "dated", Period: "day", Zone: "Asia/Shanghai", Digits: 6, MaxStep: 1}
	same := func(what string, got leafd.Tag) {
		t.Helper()
		if got.Format != want.Format || got.Period != want.Period || got.Zone != want.Zone || got.Digits != want.Digits ||
			got.MaxStep != want.MaxStep || got.KeyFingerprint != "" {
			t.Fatalf("%s: %+v, want %+v's format", what, got, want)
		}
	}
	same("CreateTag", create(t, s, want))
	got, err := s.LookupTag(ctx, "bill")
	if err != nil {
		t.Fatal(err)
	}
	same("LookupTag", got)
	step := int64(20)
	old, updated, err := s.UpdateTag(ctx, "bill", leafd.TagUpdate{Step: &step})
	if err != nil {
		t.Fatal(err)
	}
	same("UpdateTag's old", old)
	same("UpdateTag's new", updated)
	monthly := leafd.Tag{Name: "month", Step: 10, Format: "dated", Period: "month", Digits: 12}
	create(t, s, monthly)
	tags, err := s.ListTags(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(tags) != 2 {
		t.Fatalf("ListTags = %+v, want bill and month", tags)
	}
	same("ListTags", tags[0])
	if m := tags[1]; m.Format != "dated" || m.Period != "month" || m.Zone != "" || m.Digits != 12 || m.MaxStep != 0 {
		t.Fatalf("ListTags' month = %+v, want %+v's format", m, monthly)
	}

	const fp = "0123456789abcdef"
	for _, c := range []struct {
		tag  leafd.Tag
		says string
	}{
		{leafd.Tag{Format: "dated", Period: "week", Digits: 6}, `period "week" is not known`},
		{leafd.Tag{Format: "dated", Digits: 6}, `period "" is not known`},
		{leafd.Tag{Format: "dated", Period: "day", Zone: "Mars/Olympus", Digits: 6}, "not a time zone"},
		{leafd.Tag{Format: "dated", Period: "day", Zone: "Local", Digits: 6}, "not a time zone"},
		{leafd.Tag{Format: "dated", Period: "day", Zone: "localtime", Digits: 6}, "not a time zone"},
		{leafd.Tag{Format: "dated", Period: "day", Zone: "posix/Asia/Shanghai", Digits: 6}, "not a time zone"},
		{leafd.Tag{Format: "dated", Period: "day", Digits: 6, MaxID: 20261127000001}, "max_id does not apply"},
		{leafd.Tag{Format: "dated", Period: "day", Digits: 11}, "use 1 to 10"},
		{leafd.Tag{Format: "dated", Period: "month", Digits: 13}, "use 1 to 12"},
		{leafd.Tag{Format: "dated", Period: "year", Digits: 15}, "use 1 to 14"},
		{leafd.Tag{Format: "dated", Period: "day", Digits: 0}, "use 1 to 10"},
		{leafd.Tag{Format: "dated", Period: "day", Digits: 6, MaxStep: -1}, "max_step -1"},
		{leafd.Tag{Format: "dated", Period: "day", Digits: 6, MaxStep: store.MaxTableStep + 1}, "max_step"},
		{leafd.Tag{Format: "dated", Period: "day", Digits: 6, KeyFingerprint: fp}, "no key"},
		{leafd.Tag{Period: "day"}, "dated tag only"},
		{leafd.Tag{Zone: "UTC"}, "dated tag only"},
		{leafd.Tag{MaxStep: 5}, "dated tag only"},
		{leafd.Tag{Format: "opaque", Digits: 9, KeyFingerprint: fp, Period: "day"}, "dated tag only"},
		{leafd.Tag{Format: "daily"}, "sequential, opaque or dated"},
	} {
		bad := c.tag
		bad.Name, bad.Step = "bad", 10
		_, err := s.CreateTag(ctx, bad)
		wantCode(t, fmt.Sprintf("CreateTag(%+v)", bad), err, leafd.EInvalidBody)
		if msg := leafd.ErrorMessage(err); !strings.Contains(msg, c.says) {
			t.Fatalf("CreateTag(%+v): message %q does not say %q", bad, msg, c.says)
		}
		if _, err := s.LookupTag(ctx, "bad"); leafd.ErrorCode(err) != leafd.EUnknownTag {
			t.Fatalf("LookupTag after a refused CreateTag(%+v) = %v, want unknown_tag", bad, err)
		}
	}
}

// A dated tag deleted and created again with its spec continues above
// every number it issued; with another period, zone or width, or as
// another format, it is tag_conflict and nothing is written. Its max_step
// is what the new creation asks: it caps steps, it makes no ID.
func testDatedRecreate(t *testing.T, h *harness) {
	s := h.migrated()
	ctx := context.Background()
	tag := leafd.Tag{Name: "bill", Step: 10, Format: "dated", Period: "day", Zone: "Asia/Shanghai", Digits: 2, MaxStep: 5}
	create(t, s, tag)
	h.allocateIn(s, "bill", 10, day1, segment.Allocation{Start: day1.Floor, End: day1.Floor + 10, TableStep: 10})
	h.exec("DELETE FROM leaf_alloc WHERE biz_tag = 'bill'")

	const had = `was a dated tag of day periods in Asia/Shanghai with 2 digits ("format":"dated","period":"day","zone":"Asia/Shanghai","digits":2)`
	for _, other := range []leafd.Tag{
		{Format: "dated", Period: "month", Zone: "Asia/Shanghai", Digits: 2},
		{Format: "dated", Period: "day", Zone: "UTC", Digits: 2},
		{Format: "dated", Period: "day", Zone: "Asia/Shanghai", Digits: 3},
		{},
		{Format: "opaque", Digits: 9, KeyFingerprint: "0123456789abcdef"},
	} {
		other.Name, other.Step = "bill", 10
		_, err := s.CreateTag(ctx, other)
		wantCode(t, fmt.Sprintf("CreateTag(%+v) of a dated tag deleted", other), err, leafd.ETagConflict)
		if msg := leafd.ErrorMessage(err); !strings.Contains(msg, had) {
			t.Fatalf("CreateTag(%+v): message %q does not say it %s", other, msg, had)
		}
		if _, err := s.LookupTag(ctx, "bill"); leafd.ErrorCode(err) != leafd.EUnknownTag {
			t.Fatalf("LookupTag after a refused CreateTag(%+v) = %v, want unknown_tag", other, err)
		}
	}
	tag.MaxStep = 0
	got := create(t, s, tag)
	if got.MaxID != day1.Floor+10 || got.Format != "dated" || got.Period != "day" || got.Zone != "Asia/Shanghai" || got.Digits != 2 || got.MaxStep != 0 {
		t.Fatalf("the dated tag created again = %+v, want max_id %d, its spec and max_step 0", got, day1.Floor+10)
	}
	h.allocateIn(s, "bill", 10, day1, segment.Allocation{Start: day1.Floor + 10, End: day1.Floor + 20, TableStep: 10})

	// A sequential tag that issued IDs cannot come back dated: its IDs
	// would be numbers of its past.
	create(t, s, leafd.Tag{Name: "seq", Step: 10})
	h.allocate(s, "seq", 10, segment.Allocation{Start: 1, End: 11, TableStep: 10})
	h.exec("DELETE FROM leaf_alloc WHERE biz_tag = 'seq'")
	_, err := s.CreateTag(ctx, dated("seq", 10))
	wantCode(t, "a sequential tag created again as dated", err, leafd.ETagConflict)
}

// Stores (standing in for servers) allocate from one window at once until
// it is used up, across its end: the ranges are disjoint, lie in the
// window, and cover it; the last are clipped at its limit, and every
// goroutine then gets period_exhausted.
func testDatedConcurrent(t *testing.T, h *harness) {
	const (
		stores     = 3
		goroutines = 4
	)
	first := h.migrated()
	create(t, first, dated("d", 1))
	w := segment.Window{Floor: 1001, Limit: 1401} // 400 numbers: many loads meet the end
	var (
		mu     sync.Mutex
		ranges []segment.Allocation
		wg     sync.WaitGroup
	)
	steps := []int64{1, 7, 30}
	for i := range stores {
		s := first
		if i > 0 {
			s = h.open()
		}
		for g := range goroutines {
			wg.Go(func() {
				conflicts := 0 // in a row
				for n := 0; ; n++ {
					step := steps[(i+g+n)%len(steps)]
					a, err := s.AllocateIn(context.Background(), "d", step, in(w))
					if leafd.ErrorCode(err) == leafd.EPeriodExhausted {
						return
					}
					if h.db.Conflicts && leafd.ErrorCode(err) == leafd.EStoreUnavailable && conflicts < 100 {
						conflicts++
						continue // conflicts past the store's retries: the allocator retries too
					}
					conflicts = 0
					if err != nil {
						t.Errorf("store %d: AllocateIn(d, %d): %v", i, step, err)
						return
					}
					if a.Count() < 1 || a.Count() > step || a.Start < w.Floor || a.End > w.Limit {
						t.Errorf("store %d: AllocateIn(d, %d) = %+v, want 1 to %d IDs in %v", i, step, a, step, w)
						return
					}
					mu.Lock()
					ranges = append(ranges, a)
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	slices.SortFunc(ranges, func(a, b segment.Allocation) int { return cmp.Compare(a.Start, b.Start) })
	next := w.Floor
	for _, r := range ranges {
		if r.Start != next {
			t.Fatalf("range %+v follows %d: a gap or an overlap", r, next)
		}
		next = r.End
	}
	if next != w.Limit {
		t.Fatalf("the ranges end at %d, want the window's limit %d", next, w.Limit)
	}
	h.unchanged("the window used up", "d", w.Limit, w.Limit)
}

// A sharded store serves no dated tag: CreateTag refuses one, and
// AllocateIn refuses a tag made by SQL, both saying why.
func testDatedSharded(t *testing.T, h *harness) {
	s := h.migrated()
	ctx := context.Background()
	_, err := s.CreateTag(ctx, dated("d", 10))
	wantCode(t, "CreateTag of a dated tag in a sharded store", err, leafd.EInvalidBody)
	if msg := leafd.ErrorMessage(err); !strings.Contains(msg, "sharded store") {
		t.Fatalf("CreateTag of a dated tag in a sharded store: message %q does not say why", msg)
	}
	if _, err := s.LookupTag(ctx, "d"); leafd.ErrorCode(err) != leafd.EUnknownTag {
		t.Fatalf("LookupTag after a refused CreateTag = %v, want unknown_tag", err)
	}
	h.insert("d", 1, 10)
	called := false
	a, err := s.AllocateIn(ctx, "d", 10, func(time.Time) (segment.Window, error) {
		called = true
		return day1, nil
	})
	if err == nil || called {
		t.Fatalf("AllocateIn in a sharded store = %+v, %v (within called: %v), want an error before any window", a, err, called)
	}
	wantCode(t, "AllocateIn in a sharded store", err, leafd.ERangeUnsupported)
	if msg := leafd.ErrorMessage(err); !strings.Contains(msg, "sharded store") {
		t.Fatalf("AllocateIn in a sharded store: message %q does not say why", msg)
	}
	h.wantBase("d", 1)
}
