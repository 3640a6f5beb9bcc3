package segment

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leafd/leafd"
)

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func mustDated(t *testing.T, period, zone string, digits int) *dated {
	t.Helper()
	d, err := newDated(leafd.Tag{Format: FormatDated, Period: period, Zone: zone, Digits: digits})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// The date number and the end of a period, in zones on both sides of UTC
// and across changes of offset, including ones that skip or repeat
// midnight.
func TestDatedPeriods(t *testing.T) {
	utc := time.UTC
	for _, c := range []struct {
		period, zone string
		at           time.Time
		number       int64
		end          time.Time
	}{
		{PeriodDay, "UTC", time.Date(2026, 11, 27, 23, 59, 59, 999999999, utc), 20261127, time.Date(2026, 11, 28, 0, 0, 0, 0, utc)},
		// 16:00 UTC is already the next day in Shanghai (UTC+8).
		{PeriodDay, "Asia/Shanghai", time.Date(2026, 11, 27, 16, 0, 0, 0, utc), 20261128, time.Date(2026, 11, 28, 16, 0, 0, 0, utc)},
		// 03:00 UTC is still the day before in Los Angeles (UTC-8).
		{PeriodDay, "America/Los_Angeles", time.Date(2026, 11, 28, 3, 0, 0, 0, utc), 20261127, time.Date(2026, 11, 28, 8, 0, 0, 0, utc)},
		// The day clocks move forward has 23 hours in New York.
		{PeriodDay, "America/New_York", time.Date(2026, 3, 8, 5, 0, 0, 0, utc), 20260308, time.Date(2026, 3, 9, 4, 0, 0, 0, utc)},
		// São Paulo skipped midnight on 4 November 2018 (00:00 -03 became
		// 01:00 -02): the 4th began at 03:00 UTC.
		{PeriodDay, "America/Sao_Paulo", time.Date(2018, 11, 3, 12, 0, 0, 0, utc), 20181103, time.Date(2018, 11, 4, 3, 0, 0, 0, utc)},
		// It repeated the hour before midnight on 17 February 2019: the 16th
		// lasted 25 hours.
		{PeriodDay, "America/Sao_Paulo", time.Date(2019, 2, 16, 12, 0, 0, 0, utc), 20190216, time.Date(2019, 2, 17, 3, 0, 0, 0, utc)},
		{PeriodMonth, "Asia/Kolkata", time.Date(2026, 12, 31, 18, 29, 0, 0, utc), 202612, time.Date(2026, 12, 31, 18, 30, 0, 0, utc)},
		{PeriodYear, "Pacific/Kiritimati", time.Date(2026, 12, 31, 9, 59, 0, 0, utc), 2026, time.Date(2026, 12, 31, 10, 0, 0, 0, utc)},
	} {
		d := mustDated(t, c.period, c.zone, 6)
		if got := d.number(c.at); got != c.number {
			t.Errorf("%s %s at %v: number %d, want %d", c.period, c.zone, c.at, got, c.number)
		}
		if got := d.end(c.at); !got.Equal(c.end) {
			t.Errorf("%s %s at %v: end %v, want %v", c.period, c.zone, c.at, got.UTC(), c.end)
		}
		if w := d.window(c.at); w.Floor != c.number*1e6+1 || w.Limit != (c.number+1)*1e6 {
			t.Errorf("%s %s at %v: window %v", c.period, c.zone, c.at, w)
		}
	}
}

// The widest counter of each period keeps the last number of year 9999
// below 2^63; one more digit would not, and is refused naming the widest.
func TestDatedDigits(t *testing.T) {
	for period, want := range map[string]int{PeriodDay: 10, PeriodMonth: 12, PeriodYear: 14} {
		if got := MaxDatedDigits(period); got != want {
			t.Errorf("%s: widest %d, want %d", period, got, want)
		}
		d := mustDated(t, period, "UTC", want)
		last := time.Date(9999, 12, 31, 23, 59, 0, 0, time.UTC)
		if w := d.window(last); w.Limit-1 < w.Floor || w.Limit <= 0 {
			t.Errorf("%s: the last period's window %v overflows", period, w)
		}
		err := ValidateDated(period, "UTC", want+1)
		if leafd.ErrorCode(err) != leafd.EInvalidBody || !strings.Contains(err.Error(), fmt.Sprintf("1 to %d", want)) {
			t.Errorf("%s: digits %d: %v", period, want+1, err)
		}
	}
	for _, c := range []struct {
		period, zone string
		digits       int
	}{{"week", "UTC", 6}, {PeriodDay, "Mars/Olympus", 6}, {PeriodDay, "Local", 6}, {PeriodDay, "UTC", 0}} {
		if err := ValidateDated(c.period, c.zone, c.digits); leafd.ErrorCode(err) != leafd.EInvalidBody {
			t.Errorf("%+v: %v, want invalid_body", c, err)
		}
	}
}

// datedClock is the servers' clock that a test moves by hand.
type datedClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *datedClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *datedClock) set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

// newDatedAllocator serves one dated tag "orders" of a store in memory,
// with the clock given; the database's clock is that one too.
func newDatedAllocator(t *testing.T, clock *datedClock, row leafd.Tag) (*Allocator, *memStore) {
	t.Helper()
	row.Name, row.Format = "orders", FormatDated
	if row.MaxID == 0 {
		row.MaxID = 1
	}
	if row.Step == 0 {
		row.Step = 10
	}
	s := &memStore{rows: map[string]leafd.Tag{"orders": row}, dbNow: clock.Now}
	a, err := New(s, Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), TagRefresh: time.Hour,
		Now: clock.Now, RetryMin: time.Millisecond, RetryMax: 5 * time.Millisecond, WaitTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a, s
}

func nextOne(t *testing.T, a *Allocator) int64 {
	t.Helper()
	rs, err := a.NextN(context.Background(), "orders", 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	return rs[0].Start
}

// The first number of a day is its date and 000001; numbers go on from
// there, and at midnight in the tag's zone the counter starts at 1 again,
// for NextN and, once the old period was given up, for Next.
func TestDatedPeriodChange(t *testing.T) {
	sh := mustZone(t, "Asia/Shanghai")
	clock := &datedClock{now: time.Date(2026, 11, 27, 23, 59, 0, 0, sh)}
	a, _ := newDatedAllocator(t, clock, leafd.Tag{Period: PeriodDay, Zone: "Asia/Shanghai", Digits: 6})
	ctx := context.Background()
	if id := nextOne(t, a); id != 20261127000001 {
		t.Fatalf("first number %d, want 20261127000001", id)
	}
	for want := int64(20261127000002); want < 20261127000006; want++ {
		if id, err := a.Next(ctx, "orders"); err != nil || id != want {
			t.Fatalf("Next = %d, %v; want %d", id, err, want)
		}
	}
	clock.set(time.Date(2026, 11, 28, 0, 0, 0, 0, sh))
	rs, err := a.NextN(ctx, "orders", 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || rs[0].Start != 20261128000001 || rs[0].End != 20261128000004 {
		t.Fatalf("the new day's first batch %+v, want 20261128000001..3", rs)
	}
	if id, err := a.Next(ctx, "orders"); err != nil || id != 20261128000004 {
		t.Fatalf("Next after midnight = %d, %v", id, err)
	}
}

// The timer of the period gives the buffers up periodMargin before it
// ends, so that a tag nobody asks for holds none of its numbers after it;
// and Next's hot path, which reads no clock, serves no dated tag: it takes
// NextN's path, which compares the clock with the period's end
// (TestDatedNextAfterForwardStep).
func TestDatedTimerClosesPeriod(t *testing.T) {
	clock := &datedClock{now: time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)}
	a, _ := newDatedAllocator(t, clock, leafd.Tag{Period: PeriodDay, Digits: 6})
	nextOne(t, a)
	tg := (*a.tags.Load())["orders"]
	if id, ok, _ := tg.takeOne(); ok {
		t.Fatalf("the hot path, which reads no clock, issued %d of a dated tag", id)
	}
	until := time.Now().Add(periodMargin + 30*time.Millisecond)
	tg.mu.Lock()
	tg.bufs.cur.Load().setPeriod(until)
	tg.armLocked(until, time.Now())
	tg.mu.Unlock()
	if tg.bufs.cur.Load().exhausted() {
		t.Fatal("the buffer holds nothing before its period closes")
	}
	// The timer is due 30 ms from now; a loaded machine may run it late.
	for deadline := time.Now().Add(5 * time.Second); !tg.bufs.cur.Load().exhausted(); {
		if time.Now().After(deadline) {
			t.Fatal("the period's timer did not give the buffer up")
		}
		time.Sleep(time.Millisecond)
	}
}

// A server whose clock differs from the database's by more than the
// tolerance loads no range, says why at once, asks the database again only
// a second later, and writes nothing.
func TestDatedClockSkewRefused(t *testing.T) {
	clock := &datedClock{now: time.Now()}
	a, s := newDatedAllocator(t, clock, leafd.Tag{Period: PeriodDay, Digits: 6})
	var reads int
	var mu sync.Mutex
	s.dbNow = func() time.Time {
		mu.Lock()
		reads++
		mu.Unlock()
		return time.Now().Add(time.Hour)
	}
	for range 3 {
		_, err := a.NextN(context.Background(), "orders", 1, nil)
		if msg := leafd.ErrorMessage(err); leafd.ErrorCode(err) != leafd.ESegmentUnavailable || !strings.Contains(msg, "behind the database's") {
			t.Fatalf("skewed clock: %v", err)
		}
	}
	if reads != 1 {
		t.Fatalf("the database's clock was read %d times in a second, want 1", reads)
	}
	clock.set(time.Now().Add(clockRecheck))
	a.NextN(context.Background(), "orders", 1, nil)
	if reads != 2 {
		t.Fatalf("the clocks were not compared again after a second (%d reads)", reads)
	}
	if st, _ := a.TagState("orders"); st.Err == nil || !strings.Contains(st.Err.Error(), "behind the database's") {
		t.Fatalf("the tag's state does not say why: %v", st.Err)
	}
	if got := s.rows["orders"].MaxID; got != 1 {
		t.Fatalf("max_id %d: a range was taken", got)
	}
}

// A period whose counter is full answers period_exhausted, from memory
// until the period ends, and the next period starts at 1 again.
func TestDatedPeriodExhausted(t *testing.T) {
	clock := &datedClock{now: time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)}
	a, s := newDatedAllocator(t, clock, leafd.Tag{Period: PeriodDay, Digits: 2})
	seen := map[int64]bool{}
	for range 99 {
		id := nextOne(t, a)
		if seen[id] || id < 2026112701 || id > 2026112799 {
			t.Fatalf("number %d repeated or outside the day", id)
		}
		seen[id] = true
	}
	_, err := a.NextN(context.Background(), "orders", 1, nil)
	if leafd.ErrorCode(err) != leafd.EPeriodExhausted || !strings.Contains(err.Error(), "2026-11-27") || !strings.Contains(err.Error(), "99") {
		t.Fatalf("the 100th number of the day: %v", err)
	}
	max := s.rows["orders"].MaxID
	if _, err := a.NextN(context.Background(), "orders", 1, nil); leafd.ErrorCode(err) != leafd.EPeriodExhausted || s.rows["orders"].MaxID != max {
		t.Fatalf("asked again: %v, max_id %d then %d", err, max, s.rows["orders"].MaxID)
	}
	clock.set(time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC))
	if id := nextOne(t, a); id != 2026112801 {
		t.Fatalf("the next day's first number %d", id)
	}
}

// A dated tag's step stays within its largest step and a small share of
// what the period has left; a range lease is refused.
func TestDatedStepAndRange(t *testing.T) {
	clock := &datedClock{now: time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)}
	a, _ := newDatedAllocator(t, clock, leafd.Tag{Period: PeriodDay, Digits: 6, Step: 100_000})
	tg := (*a.tags.Load())["orders"]
	tg.mu.Lock()
	c := tg.datedCapLocked(clock.Now())
	tg.mu.Unlock()
	if c != 999_999/domainShare {
		t.Fatalf("cap %d at the start of the day, want %d", c, 999_999/domainShare)
	}
	if _, err := a.Range(context.Background(), "orders", 10); leafd.ErrorCode(err) != leafd.ERangeUnsupported {
		t.Fatalf("range of a dated tag: %v", err)
	}

	b, _ := newDatedAllocator(t, clock, leafd.Tag{Period: PeriodDay, Digits: 6, Step: 1, MaxStep: 1})
	for want := int64(20261127000001); want <= 20261127000005; want++ {
		if id := nextOne(t, b); id != want {
			t.Fatalf("max_step 1: %d, want %d", id, want)
		}
	}
	if st, _ := b.TagState("orders"); st.Step != 1 {
		t.Fatalf("max_step 1: step %d", st.Step)
	}
}

// The state of a dated tag names its period and how much of it is used.
func TestDatedState(t *testing.T) {
	clock := &datedClock{now: time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)}
	a, _ := newDatedAllocator(t, clock, leafd.Tag{Period: PeriodDay, Digits: 4, Step: 10})
	for range 3 {
		nextOne(t, a)
	}
	st, _ := a.TagState("orders")
	if st.Period != "2026-11-27" || st.PeriodCapacity != 9999 || !st.PeriodEnd.Equal(time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("state %+v", st)
	}
	if st.PeriodUsed != 3 {
		t.Fatalf("used %d of the period after 3 numbers (buffers %+v)", st.PeriodUsed, st.Buffers)
	}
}

// A server whose clock is a moment behind the others' finds, at midnight,
// that they took numbers of the new day already: it issues no more of the
// old day, waits for its own clock, and then serves the new day above
// theirs.
func TestDatedServerBehindAtMidnight(t *testing.T) {
	ahead := &datedClock{now: time.Date(2026, 11, 28, 0, 0, 0, 500_000_000, time.UTC)}
	a, s := newDatedAllocator(t, ahead, leafd.Tag{Period: PeriodDay, Digits: 6})
	behind := &datedClock{now: time.Date(2026, 11, 27, 23, 59, 59, 500_000_000, time.UTC)}
	b, err := New(s, Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), TagRefresh: time.Hour,
		Now: behind.Now, RetryMin: time.Millisecond, RetryMax: 5 * time.Millisecond, WaitTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if id := nextOne(t, a); id != 20261128000001 {
		t.Fatalf("the server ahead: %d", id)
	}
	go func() {
		time.Sleep(100 * time.Millisecond)
		behind.set(time.Date(2026, 11, 28, 0, 0, 0, 100_000_000, time.UTC))
	}()
	id := nextOne(t, b)
	if id <= 20261128000001 || id/1_000_000 != 20261128 {
		t.Fatalf("the server behind issued %d", id)
	}
	if st, _ := b.TagState("orders"); st.LoadErrors != 0 {
		t.Fatalf("waiting for the period counted as %d load errors: %v", st.LoadErrors, st.Err)
	}
}

// A range of a period that closed while it was being loaded is given up
// when it lands, not installed past the timer that closed the period; one
// of a later period gives up the buffers of earlier ones; and a period
// closed early (its timer fired) is armed again by its next range.
func TestDatedLoadedAgainstTheTimer(t *testing.T) {
	clock := &datedClock{now: time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)}
	a, _ := newDatedAllocator(t, clock, leafd.Tag{Period: PeriodDay, Digits: 6})
	nextOne(t, a)
	tg := (*a.tags.Load())["orders"]
	day1 := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	buf := func(start int64, until time.Time) *buffer {
		b := newBuffer(Allocation{Start: start, End: start + 10}, 0.1)
		b.setPeriod(until)
		return b
	}

	clock.set(day1.Add(-periodMargin / 2))
	tg.mu.Lock()
	tg.load.loading = true
	tg.mu.Unlock()
	if _, done := tg.loaded(buf(20261127500001, day1), 10, loadStart{}, clock.Now); done {
		t.Fatal("a range of a closing period was installed")
	}
	if cur := tg.bufs.cur.Load(); cur.until.Equal(day1) && cur.start == 20261127500001 {
		t.Fatal("the closing period's range serves")
	}

	clock.set(day1.Add(time.Minute))
	cur := tg.bufs.cur.Load()
	if _, done := tg.loaded(buf(20261128000001, day1.Add(24*time.Hour)), 10, loadStart{}, clock.Now); !done {
		t.Fatal("a range of the new period was not installed")
	}
	if !cur.exhausted() {
		t.Fatal("the old period's buffer still serves after a range of the next one landed")
	}

	tg.closePeriod(day1.Add(24 * time.Hour)) // as a timer that fired early would
	tg.mu.Lock()
	tg.load.loading = true
	tg.mu.Unlock()
	clock.set(day1.Add(2 * time.Minute))
	if _, done := tg.loaded(buf(20261128000011, day1.Add(24*time.Hour)), 10, loadStart{}, clock.Now); !done {
		t.Fatal("a range of the period was not installed")
	}
	tg.mu.Lock()
	armed := tg.per.armed && tg.per.timerFor.Equal(day1.Add(24*time.Hour))
	tg.mu.Unlock()
	if !armed {
		t.Fatal("the period's timer, fired once, was not armed again for its next range")
	}
}

// A max_id past the server's period is waited out for as long as two
// clocks within the tolerance can differ; past that the load fails with a
// reason that /api/state shows, instead of waiting in silence.
func TestDatedMaxIDAhead(t *testing.T) {
	clock := &datedClock{now: time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)}
	a, s := newDatedAllocator(t, clock, leafd.Tag{Period: PeriodDay, Digits: 6, MaxID: 20261230000001})
	a.cfg.ClockTolerance = 10 * time.Millisecond
	go func() {
		for range 40 {
			time.Sleep(5 * time.Millisecond)
			clock.set(clock.Now().Add(5 * time.Millisecond))
		}
	}()
	_, err := a.NextN(context.Background(), "orders", 1, nil)
	if leafd.ErrorCode(err) != leafd.ESegmentUnavailable {
		t.Fatalf("a max_id a month ahead: %v", err)
	}
	st, _ := a.TagState("orders")
	if st.Err == nil || !strings.Contains(leafd.ErrorMessage(st.Err), "set by hand") {
		t.Fatalf("the tag's state does not say why: %v", st.Err)
	}
	if got := s.rows["orders"].MaxID; got != 20261230000001 {
		t.Fatalf("max_id %d: something was taken", got)
	}
}
