package client_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/client"
	leafhttp "github.com/leafd/leafd/http"
	"github.com/leafd/leafd/internal/testkit/testdb"
	"github.com/leafd/leafd/rpc"
	"github.com/leafd/leafd/segment"
)

// A dated tag's range lease is used only while it is valid: the server's
// clock (injected, running with the real one) starts 400 ms before
// midnight, so each lease it gives before midnight is valid for less than
// 380 ms. The clients (over HTTP and gRPC) ask for leases of 100,000
// numbers and take a few a millisecond, so a client that used a lease
// past its validity would hand out numbers of the old day after
// midnight: every number of the old day comes from a call that began
// before midnight by the server's clock, the new day's come after it, and
// none comes twice.
func TestDatedRangeLeaseExpires(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, testdb.SQLite(t))
	if _, err := s.CreateTag(ctx, leafd.Tag{Name: "orders", Step: 100, MaxID: 1,
		Format: segment.FormatDated, Period: segment.PeriodDay, Digits: 6}); err != nil {
		t.Fatal(err)
	}
	midnight := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	t0 := time.Now()
	serverNow := func() time.Time { return midnight.Add(-400 * time.Millisecond).Add(time.Since(t0)) }
	a, err := segment.New(s, segment.Config{WaitTimeout: time.Second, TagRefresh: time.Hour, Logger: quiet,
		Now: serverNow, ClockTolerance: 100 * 365 * 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	a.Start()
	t.Cleanup(func() { a.Close() })
	hs := httptest.NewServer(leafhttp.New(leafhttp.Config{Segment: a, Logger: quiet}).Handler())
	t.Cleanup(hs.Close)
	addr, _ := serveGRPC(t, rpc.Config{Segment: a, Logger: quiet})

	hc, err := client.New(hs.URL, client.WithRanges(100_000, 0.5))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hc.Close() })
	gc, err := client.NewGRPC(addr, client.WithRanges(100_000, 0.5))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gc.Close() })

	// The answer's validity: until 20 ms before midnight, from the answer.
	// The server leases a dated tag's range only to a client that says it
	// honours valid_ms (expiring), which both transports do.
	for name, c := range map[string]*client.Client{"http": hc, "grpc": gc} {
		sent := serverNow()
		_, n, valid, err := c.FetchRangeValid(ctx, "orders", 10)
		if err != nil || n != 10 {
			t.Fatalf("%s: a range of the dated tag: %d numbers, %v", name, n, err)
		}
		if hi := midnight.Add(-20 * time.Millisecond).Sub(sent); valid <= 0 || valid > hi || valid < hi-200*time.Millisecond {
			t.Fatalf("%s: valid_ms %v, want about %v", name, valid, hi)
		}
	}

	seen := map[int64]string{}
	var old, fresh int
	for serverNow().Before(midnight.Add(300 * time.Millisecond)) {
		for name, c := range map[string]*client.Client{"http": hc, "grpc": gc} {
			before := serverNow()
			ids, err := c.NextN(ctx, "orders", 2)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			id, err := c.Next(ctx, "orders")
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			after := serverNow()
			for _, id := range append(ids, id) {
				if by, ok := seen[id]; ok {
					t.Fatalf("%s: %d came twice (first to %s)", name, id, by)
				}
				seen[id] = name
				switch id / 1_000_000 {
				case 20261127:
					old++
					if !before.Before(midnight) {
						t.Fatalf("%s: %d of 27 November handed out by a call that began at %v", name, id, before)
					}
				case 20261128:
					fresh++
					if after.Before(midnight) {
						t.Fatalf("%s: %d of 28 November handed out before midnight", name, id)
					}
				default:
					t.Fatalf("%s: %d of neither day", name, id)
				}
			}
		}
		time.Sleep(time.Millisecond)
	}
	if old == 0 || fresh == 0 {
		t.Fatalf("%d numbers of the old day and %d of the new one: want both", old, fresh)
	}
}
