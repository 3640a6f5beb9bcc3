package store

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/internal/testkit/faultproxy"
	"github.com/leafd/leafd/internal/testkit/testdb"
	"github.com/leafd/leafd/segment"
)

// testLogger logs to the test's output: shown with -v or when it fails.
func testLogger(t *testing.T) *slog.Logger { return slog.New(slog.NewTextHandler(t.Output(), nil)) }

// clusterOf returns a migrated store of engine driver whose addresses are
// proxies to one real database, dsn, so that each address can be taken
// away on its own.
func clusterOf(t *testing.T, n int, driver, dsn string) (*db, []*faultproxy.Proxy) {
	t.Helper()
	var proxies []*faultproxy.Proxy
	var dsns []string
	for range n {
		p := faultproxy.New(t, testdb.Addr(t, driver, dsn))
		proxies = append(proxies, p)
		dsns = append(dsns, testdb.WithAddr(t, driver, dsn, p.Addr()))
	}
	return openMigrated(t, driver, dsns[0], WithFallbacks(dsns[1:]...), WithLogger(testLogger(t))), proxies
}

func wantAddress(t *testing.T, s *db, index int, switches int64, name string) {
	t.Helper()
	a := s.Address()
	if a.Index != index || a.Switches != switches || a.Name != name || a.Count < 2 {
		t.Fatalf("Address() = %+v, want index %d (%s) after %d switches", a, index, name, switches)
	}
}

// The first address goes away: the next allocation is served through the
// second at once, the switch is counted, and once the first serves again
// the store moves back to it. Every range is new.
func TestFailoverMovesOnAndBack(t *testing.T) {
	testdb.Each(t, FallbackDrivers(), func(t *testing.T, driver, dsn string) {
		s, proxies := clusterOf(t, 3, driver, dsn)
		raw := testdb.SQL(t, driver, dsn)
		mustExec(t, raw, "INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('t', 1, 10)")
		wantAddress(t, s, 0, 0, proxies[0].Addr())
		mustAllocate(t, s, "t", 10, segment.Allocation{Start: 1, End: 11, TableStep: 10})

		proxies[0].Down()
		mustAllocate(t, s, "t", 10, segment.Allocation{Start: 11, End: 21, TableStep: 10})
		wantAddress(t, s, 1, 1, proxies[1].Addr())
		if a := s.Address(); a.LastSwitch.IsZero() || !strings.Contains(a.LastSwitchReason, proxies[0].Addr()) {
			t.Fatalf("Address() = %+v: want the time of the switch and a reason naming %s", a, proxies[0].Addr())
		}

		// The second goes too: the third serves.
		proxies[1].Down()
		mustAllocate(t, s, "t", 10, segment.Allocation{Start: 21, End: 31, TableStep: 10})
		wantAddress(t, s, 2, 2, proxies[2].Addr())

		// The first is back: the store returns to it at its next check.
		proxies[0].Up()
		s.cluster.setRetryFirst(20 * time.Millisecond)
		deadline := time.Now().Add(10 * time.Second)
		for s.Address().Index != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("still on %+v 10s after the first address came back", s.Address())
			}
			time.Sleep(10 * time.Millisecond)
		}
		wantAddress(t, s, 0, 3, proxies[0].Addr())
		// The connections to the third address are no longer used: cutting it
		// does not disturb the store.
		proxies[2].Down()
		mustAllocate(t, s, "t", 10, segment.Allocation{Start: 31, End: 41, TableStep: 10})
		if got := readMaxID(t, raw, "t"); got != 41 {
			t.Fatalf("max_id = %d, want 41", got)
		}
	})
}

// No address serves: the store reports store_unavailable naming every
// address, and serves again as soon as one of them does.
func TestFailoverNoneServes(t *testing.T) {
	testdb.Each(t, FallbackDrivers(), func(t *testing.T, driver, dsn string) {
		s, proxies := clusterOf(t, 2, driver, dsn)
		raw := testdb.SQL(t, driver, dsn)
		mustExec(t, raw, "INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('t', 1, 10)")
		for _, p := range proxies {
			p.Down()
		}
		_, err := s.Allocate(context.Background(), "t", 10)
		if code := leafd.ErrorCode(err); code != leafd.EStoreUnavailable {
			t.Fatalf("Allocate with no address serving: %v (code %q), want store_unavailable", err, code)
		}
		for _, p := range proxies {
			if !strings.Contains(err.Error(), p.Addr()) {
				t.Errorf("the error %q does not name the address %s", err, p.Addr())
			}
		}
		proxies[1].Up()
		mustAllocate(t, s, "t", 10, segment.Allocation{Start: 1, End: 11, TableStep: 10})
		if a := s.Address(); a.Index != 1 {
			t.Fatalf("Address() = %+v, want the second address, the one that serves", a)
		}
	})
}

// An address whose server answers but refuses the connection (here: the
// database is missing there, as on a node not yet provisioned) is passed
// over like one that cannot be reached.
func TestFailoverRefusingAddressSkipped(t *testing.T) {
	testdb.Each(t, FallbackDrivers(), func(t *testing.T, driver, dsn string) {
		s := openMigrated(t, driver, testdb.Missing(t, driver, dsn), WithFallbacks(dsn), WithLogger(testLogger(t)))
		if a := s.Address(); a.Index != 1 || a.Switches != 1 {
			t.Fatalf("Address() = %+v, want the second address after one switch", a)
		}
	})
}

// Many allocations run while the addresses are taken away and given back
// in turn: the ranges handed out never overlap, whichever address each
// came through.
func TestFailoverConcurrentNoOverlap(t *testing.T) {
	testdb.Each(t, FallbackDrivers(), func(t *testing.T, driver, dsn string) {
		s, proxies := clusterOf(t, 3, driver, dsn)
		raw := testdb.SQL(t, driver, dsn)
		mustExec(t, raw, "INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('t', 1, 7)")
		s.cluster.setRetryFirst(100 * time.Millisecond)

		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		var (
			mu     sync.Mutex
			ranges []segment.Allocation
			fails  int
			wg     sync.WaitGroup
		)
		for range 8 {
			wg.Go(func() {
				for ctx.Err() == nil {
					a, err := s.Allocate(ctx, "t", 7)
					mu.Lock()
					if err != nil {
						fails++
					} else {
						ranges = append(ranges, a)
					}
					mu.Unlock()
				}
			})
		}
		// Take each address away in turn, never all at once, each for long
		// enough that the store moves, and gives each back for long
		// enough that new connections open (a PostgreSQL backend takes
		// tens of milliseconds to start).
		for i := 0; ctx.Err() == nil; i++ {
			p := proxies[i%len(proxies)]
			p.Down()
			time.Sleep(200 * time.Millisecond)
			p.Up()
			time.Sleep(300 * time.Millisecond)
		}
		wg.Wait()

		if len(ranges) < 50 {
			t.Fatalf("only %d ranges in 3s (%d failures)", len(ranges), fails)
		}
		slices.SortFunc(ranges, func(a, b segment.Allocation) int { return int(a.Start - b.Start) })
		for i := 1; i < len(ranges); i++ {
			if ranges[i].Start < ranges[i-1].End {
				t.Fatalf("ranges overlap: %+v and %+v", ranges[i-1], ranges[i])
			}
		}
		if max := readMaxID(t, raw, "t"); ranges[len(ranges)-1].End > max {
			t.Fatalf("a range ends at %d, past max_id %d", ranges[len(ranges)-1].End, max)
		}
		a := s.Address()
		if a.Switches < 3 {
			t.Fatalf("Address() = %+v: want several switches", a)
		}
		t.Logf("%d ranges, %d failed attempts (a connection cut mid-transaction), %d switches", len(ranges), fails, a.Switches)
	})
}

// The checks of the first address fall on the top of each minute, the same
// moment for every server of a fleet whose clocks agree.
func TestRetryFirstAtTheTopOfTheMinute(t *testing.T) {
	at := time.Date(2026, 11, 23, 12, 34, 56, 500_000_000, time.UTC)
	if got := untilNextMultiple(at, time.Minute); got != 3500*time.Millisecond {
		t.Fatalf("untilNextMultiple(12:34:56.5, 1m) = %v, want 3.5s", got)
	}
	if got := untilNextMultiple(at.Truncate(time.Minute), time.Minute); got != time.Minute {
		t.Fatalf("untilNextMultiple at the top of a minute = %v, want 1m", got)
	}
}

// setRetryFirst changes how often the first address is checked (tests).
func (f *failover) setRetryFirst(d time.Duration) {
	f.cancel()
	<-f.done
	f.retryFirst = d
	f.ctx, f.cancel = context.WithCancel(context.Background())
	f.done = make(chan struct{})
	go f.retryFirstLoop()
}
