package segment_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
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

// syncWriter is a log destination that the test reads while the
// allocator writes.
type syncWriter struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// A server whose clock is more than segment.clock_tolerance (1 s) ahead
// of or behind a real database's loads no range of a dated tag: requests
// get segment_unavailable saying how far off the clock is, the tag's state
// and the log say the same, nothing is taken from the period, and a
// server with a right clock then starts the day at 1.
func TestDatedClockSkewOnEachDatabase(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, db *database) {
		s := db.store(t)
		if _, err := s.CreateTag(context.Background(), leafd.Tag{Name: "orders", Step: 10, MaxID: 1,
			Format: segment.FormatDated, Period: segment.PeriodDay, Zone: "America/New_York", Digits: 6}); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			off time.Duration
			way string
		}{{3 * time.Second, "ahead of"}, {-time.Hour, "behind"}} {
			var log syncWriter
			cfg := fastConfig()
			cfg.Logger = slog.New(slog.NewTextHandler(&log, nil))
			cfg.Now = func() time.Time { return time.Now().Add(c.off) }
			a := newAllocator(t, db.store(t), cfg)
			_, err := a.NextN(context.Background(), "orders", 1, nil)
			msg := leafd.ErrorMessage(err)
			if leafd.ErrorCode(err) != leafd.ESegmentUnavailable || !strings.Contains(msg, c.way+" the database's") ||
				!strings.Contains(msg, "segment.clock_tolerance (1s)") {
				t.Fatalf("clock %v off: %v (code %q), want segment_unavailable saying it is %s the database's", c.off, err, leafd.ErrorCode(err), c.way)
			}
			if st, _ := a.TagState("orders"); st.Err == nil || !strings.Contains(st.Err.Error(), c.way+" the database's") {
				t.Fatalf("clock %v off: the tag's state says %v", c.off, st.Err)
			}
			if l := log.String(); !strings.Contains(l, "level=WARN") || !strings.Contains(l, "tag=orders") || !strings.Contains(l, c.way+" the database's") {
				t.Fatalf("clock %v off: the log does not say why: %q", c.off, l)
			}
		}
		var maxID int64
		if err := db.raw.QueryRow("SELECT max_id FROM leaf_alloc WHERE biz_tag = 'orders'").Scan(&maxID); err != nil {
			t.Fatal(err)
		}
		if maxID != 1 {
			t.Fatalf("max_id %d after the refusals: a range was taken", maxID)
		}
		ny, err := time.LoadLocation("America/New_York")
		if err != nil {
			t.Fatal(err)
		}
		a := newAllocator(t, db.store(t), fastConfig())
		before := time.Now()
		id, err := a.Next(context.Background(), "orders")
		after := time.Now()
		if err != nil {
			t.Fatal(err)
		}
		if d := id / 1_000_000; id%1_000_000 != 1 || d < dateNumber(before.In(ny)) || d > dateNumber(after.In(ny)) {
			t.Fatalf("the right clock's first number is %d, want today in New York followed by 000001", id)
		}
	})
}
