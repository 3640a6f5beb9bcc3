package segment

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/leafd/leafd"
)

// waitWall waits until the allocator's coarse clock has read at least
// at, as its goroutine does every coarseTick.
func waitWall(t *testing.T, a *Allocator, at time.Time) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); a.wall.Load() < at.UnixMilli(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the coarse clock reads %v, not %v, after 5 s", time.UnixMilli(a.wall.Load()), at)
		}
	}
}

// NextN issues no number of a period after its end by the server's clock:
// in its last minute it reads the clock on every call. The timer that
// covers Next is due only hours later (its delay is measured from the
// test's clock), so only NextN's own check can stop the old day's
// numbers: requests while the clock passes midnight get numbers of a day
// the clock was in during the request, the old day's only before
// midnight, and the new day starts at 000001.
func TestDatedNextNStopsAtPeriodEnd(t *testing.T) {
	midnight := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	clock := &datedClock{now: midnight.Add(-12 * time.Hour)}
	a, _ := newDatedAllocator(t, clock, leafd.Tag{Period: PeriodDay, Digits: 6, Step: 100_000})
	if id := nextOne(t, a); id/1_000_000 != 20261127 {
		t.Fatalf("first number %d", id)
	}
	// The clock comes to the day's last seconds, and the coarse clock sees
	// it: from now on every NextN reads the clock.
	clock.set(midnight.Add(-2 * time.Second))
	waitWall(t, a, midnight.Add(-2*time.Second))

	type issued struct {
		id            int64
		before, after time.Time
	}
	var mu sync.Mutex
	var got []issued
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Add(1)
		go func(n int) {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				before := clock.Now()
				rs, err := a.NextN(context.Background(), "orders", n, nil)
				after := clock.Now()
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				for _, r := range rs {
					for id := r.Start; id < r.End; id++ {
						got = append(got, issued{id, before, after})
					}
				}
				mu.Unlock()
			}
		}(1 + i)
	}
	// The clock runs from 2 s before midnight to 1 s after it, a
	// millisecond at a time.
	for at := midnight.Add(-2 * time.Second); at.Before(midnight.Add(time.Second)); at = at.Add(time.Millisecond) {
		clock.set(at)
		if at.UnixMilli()%50 == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	time.Sleep(10 * time.Millisecond)
	close(stop)
	wg.Wait()

	first, old, fresh := int64(0), 0, 0
	for _, n := range got {
		switch n.id / 1_000_000 {
		case 20261127:
			old++
			if !n.before.Before(midnight) {
				t.Fatalf("number %d of 27 November issued after midnight (request from %v)", n.id, n.before)
			}
		case 20261128:
			fresh++
			if n.after.Before(midnight) {
				t.Fatalf("number %d of 28 November issued before midnight (request until %v)", n.id, n.after)
			}
			if first == 0 || n.id < first {
				first = n.id
			}
		default:
			t.Fatalf("number %d of neither day", n.id)
		}
	}
	if old == 0 || fresh == 0 || first != 20261128000001 {
		t.Fatalf("%d numbers of the old day, %d of the new one, its first %d", old, fresh, first)
	}
}

// After the server's clock steps forward over the end of the period (from
// noon to past midnight), NextN issues the new period's numbers as soon as
// the coarse clock has read the step: within coarseTick.
func TestDatedNextNAfterClockStep(t *testing.T) {
	midnight := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	clock := &datedClock{now: midnight.Add(-12 * time.Hour)}
	a, _ := newDatedAllocator(t, clock, leafd.Tag{Period: PeriodDay, Digits: 6, Step: 100_000})
	if id := nextOne(t, a); id/1_000_000 != 20261127 {
		t.Fatalf("first number %d", id)
	}
	clock.set(midnight.Add(500 * time.Millisecond))
	began := time.Now()
	waitWall(t, a, midnight)
	if lag := time.Since(began); lag > 20*coarseTick {
		t.Logf("the coarse clock took %v to read the step (a loaded machine)", lag)
	}
	for range 5 {
		if id := nextOne(t, a); id/1_000_000 != 20261128 {
			t.Fatalf("number %d issued after the clock stepped past midnight", id)
		}
	}
}

// A tag that is not dated is never watched: NextN reads no clock for it.
func TestSequentialBufferNotWatched(t *testing.T) {
	b := newBuffer(Allocation{Start: 1, End: 11}, 0.1)
	if b.watched(time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC).UnixMilli()) {
		t.Fatal("a sequential tag's buffer is watched")
	}
	b.setPeriod(time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC))
	if b.watched(time.Date(2026, 11, 27, 23, 58, 59, 0, time.UTC).UnixMilli()) ||
		!b.watched(time.Date(2026, 11, 27, 23, 59, 0, 0, time.UTC).UnixMilli()) {
		t.Fatal("a dated buffer is not watched from the last minute of its period on, or before it")
	}
}
