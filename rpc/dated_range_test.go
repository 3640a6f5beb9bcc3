package rpc_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/internal/testkit/testdb"
	leafdv1 "github.com/leafd/leafd/proto/leafd/v1"
	"github.com/leafd/leafd/rpc"
	"github.com/leafd/leafd/segment"
	"github.com/leafd/leafd/store"
)

// SegmentRange of a dated tag, asked with expiring (the caller honours
// valid_ms), leases numbers of the current period and says in valid_ms how
// long they may be handed out: until 20 ms before the period ends by the
// server's clock (here an injected one, an hour before midnight). Asked
// without expiring, it is FAILED_PRECONDITION range_unsupported, saying to
// set expiring or to ask NextSegment. A sequential tag's range has no
// valid_ms, with expiring or without.
func TestSegmentRangeDated(t *testing.T) {
	testdb.Each(t, store.Drivers(), func(t *testing.T, driver, dsn string) {
		s := newStoreOn(t, driver, dsn, map[string]int64{"plain": 100})
		if _, err := s.CreateTag(context.Background(), leafd.Tag{Name: "orders", Step: 100, MaxID: 1,
			Format: segment.FormatDated, Period: segment.PeriodDay, Digits: 6}); err != nil {
			t.Fatal(err)
		}
		// The database's clock is the real one: the server's is set to an
		// hour before midnight today, as long as that lies within the
		// tolerance of the real clock.
		now := time.Now().UTC()
		midnight := time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, time.UTC)
		a := startAllocator(t, s, segment.Config{MaxRange: 5000, ClockTolerance: 48 * time.Hour,
			Now: func() time.Time { return midnight.Add(-time.Hour) }})
		c := serve(t, rpc.Config{Segment: a}).client
		day := int64(now.Year())*10000 + int64(now.Month())*100 + int64(now.Day())

		for _, size := range []int64{10, 5000} {
			_, err := c.SegmentRange(ctx(t), &leafdv1.SegmentRangeRequest{Tag: "orders", Size: size})
			msg := wantError(t, "SegmentRange of a dated tag without expiring", err, codes.FailedPrecondition, leafd.ERangeUnsupported)
			if !strings.Contains(msg, "expiring: true") || !strings.Contains(msg, "valid_ms") || !strings.Contains(msg, "NextSegment") {
				t.Fatalf("SegmentRange of a dated tag without expiring: %q, want it to name expiring: true, valid_ms and NextSegment", msg)
			}
		}
		for _, size := range []int64{10, 5000} { // carved, and from the store
			r, err := c.SegmentRange(ctx(t), &leafdv1.SegmentRangeRequest{Tag: "orders", Size: size, Expiring: true})
			if err != nil {
				t.Fatal(err)
			}
			if r.GetStart()/1_000_000 != day || (r.GetEnd()-1)/1_000_000 != day || r.GetEnd()-r.GetStart() != size {
				t.Fatalf("range %v: want %d numbers of %d", r, size, day)
			}
			if want := (time.Hour - 20*time.Millisecond).Milliseconds(); r.GetValidMs() != want {
				t.Fatalf("valid_ms %d, want %d", r.GetValidMs(), want)
			}
		}
		for _, expiring := range []bool{false, true} {
			r, err := c.SegmentRange(ctx(t), &leafdv1.SegmentRangeRequest{Tag: "plain", Size: 10, Expiring: expiring})
			if err != nil || r.GetValidMs() != 0 || r.GetEnd()-r.GetStart() != 10 {
				t.Fatalf("range of a sequential tag (expiring %v): %v, %v; want 10 IDs without valid_ms", expiring, r, err)
			}
		}
	})
}
