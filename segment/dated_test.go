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
// clock passes midnight in Shanghai: no number twice, each dated to a day
// the clock was in during its request, and the new day's counter starting
// at 1.
func TestDatedMidnightSeveralServers(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, db *database) {
		sh, err := time.LoadLocation("Asia/Shanghai")
		if err != nil {
			t.Fatal(err)
		}
		clock := newFakeClock()
		clock.now = time.Date(2026, 11, 27, 23, 59, 58, 0, sh)
		if _, err := db.store(t).CreateTag(context.Background(), leafd.Tag{Name: "orders", Step: 5, MaxID: 1,
			Format: segment.FormatDated, Period: segment.PeriodDay, Zone: "Asia/Shanghai", Digits: 6}); err != nil {
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
			newDay := n > 0 && issued[n-1].id/1_000_000 == 20261128
			mu.Unlock()
			if newDay {
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
			lo, hi := dateNumber(n.before.In(sh)), dateNumber(n.after.In(sh))
			if day < lo || day > hi {
				t.Fatalf("number %d dated %d, issued between %v and %v", n.id, day, n.before.In(sh), n.after.In(sh))
			}
			if day == 20261128 && (first == 0 || n.id < first) {
				first = n.id
			}
		}
		if first != 20261128000001 {
			t.Fatalf("the first number of the new day is %d, want 20261128000001 (%d numbers issued)", first, len(issued))
		}
	})
}

func dateNumber(t time.Time) int64 {
	y, m, d := t.Date()
	return int64(y)*10000 + int64(m)*100 + int64(d)
}
