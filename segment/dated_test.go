package segment_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/segment"
)

// issuedNumber is a number and the servers' clock around its request.
type issuedNumber struct {
	id            int64
	before, after time.Time
}

// Three servers over one real database serve a dated tag while their
// clock passes midnight in its zone: no number twice, each dated to a day
// the clock was in during its request, and the new day's counter starting
// at 1. East of UTC (Shanghai, UTC+8), west of it (Los Angeles, UTC-8),
// and where daylight saving time began at midnight (São Paulo on 4
// November 2018: 00:00 -03 became 01:00 -02, so the 4th began at 01:00).
func TestDatedMidnightSeveralServers(t *testing.T) {
	for _, c := range []struct {
		zone   string
		y      int
		m      time.Month
		d      int
		newDay int64
	}{
		{"Asia/Shanghai", 2026, 11, 27, 20261128},
		{"America/Los_Angeles", 2026, 11, 27, 20261128},
		{"America/Sao_Paulo", 2018, 11, 3, 20181104},
	} {
		t.Run(c.zone, func(t *testing.T) {
			loc, err := time.LoadLocation(c.zone)
			if err != nil {
				t.Fatal(err)
			}
			midnightSeveralServers(t, c.zone, time.Date(c.y, c.m, c.d, 23, 59, 58, 0, loc), c.newDay)
		})
	}
}

// midnightSeveralServers runs TestDatedMidnightSeveralServers in zone,
// the servers' clock starting at start, 2 s before newDay begins.
func midnightSeveralServers(t *testing.T, zone string, start time.Time, newDay int64) {
	forEachDatabase(t, func(t *testing.T, db *database) {
		loc := start.Location()
		clock := newFakeClock()
		clock.now = start
		if _, err := db.store(t).CreateTag(context.Background(), leafd.Tag{Name: "orders", Step: 5, MaxID: 1,
			Format: segment.FormatDated, Period: segment.PeriodDay, Zone: zone, Digits: 6}); err != nil {
			t.Fatal(err)
		}
		cfg := fastConfig()
		cfg.Now = clock.Now
		cfg.ClockTolerance = 100 * 365 * 24 * time.Hour // the clock is the test's, years from the database's
		var servers []*segment.Allocator
		for range 3 {
			servers = append(servers, newAllocator(t, db.store(t), cfg))
		}

		var mu sync.Mutex
		var issued []issuedNumber
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for i := range 6 {
			wg.Add(1)
			go func(a *segment.Allocator, n int) {
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
							issued = append(issued, issuedNumber{id, before, after})
						}
					}
					mu.Unlock()
				}
			}(servers[i%3], 1+i%4)
		}
		for range 8 {
			time.Sleep(20 * time.Millisecond)
			clock.Advance(500 * time.Millisecond)
		}
		// Until numbers of the new day came, however slow the machine.
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			mu.Lock()
			n := len(issued)
			reached := n > 0 && issued[n-1].id/1_000_000 == newDay
			mu.Unlock()
			if reached {
				break
			}
		}
		close(stop)
		wg.Wait()

		seen := map[int64]bool{}
		first := int64(0)
		for _, n := range issued {
			if seen[n.id] {
				t.Fatalf("number %d issued twice", n.id)
			}
			seen[n.id] = true
			day := n.id / 1_000_000
			lo, hi := dateNumber(n.before.In(loc)), dateNumber(n.after.In(loc))
			if day < lo || day > hi {
				t.Fatalf("number %d dated %d, issued between %v and %v", n.id, day, n.before.In(loc), n.after.In(loc))
			}
			if day == newDay && (first == 0 || n.id < first) {
				first = n.id
			}
		}
		if first != newDay*1_000_000+1 {
			t.Fatalf("the first number of the new day is %d, want %d000001 (%d numbers issued)", first, newDay, len(issued))
		}
	})
}

func dateNumber(t time.Time) int64 {
	y, m, d := t.Date()
	return int64(y)*10000 + int64(m)*100 + int64(d)
}
