package client_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/client"
	leafhttp "github.com/leafd/leafd/http"
	"github.com/leafd/leafd/internal/testkit/testdb"
	"github.com/leafd/leafd/segment"
	"github.com/leafd/leafd/store"
)

// TestRangesLeafd runs range leases against real leafd HTTP servers over
// one SQLite database: two clients with leases and one without, many
// goroutines each, get no ID twice; an opaque tag answers
// range_unsupported and is served from the ID buffer instead. It is
// skipped while the server does not serve GET /segment/{tag}/range.
func TestRangesLeafd(t *testing.T) { testdb.Each(t, store.Drivers(), testRangesLeafd) }

func testRangesLeafd(t *testing.T, driver, dsn string) {
	key := []byte("0123456789abcdef0123456789abcdef")
	storeA, storeB := openShared(t, driver, dsn)
	createTag(t, storeA, "order", 1000)
	// The opaque tag's step is larger than the test uses, so that no batch
	// spans two of a server's buffers: such a batch comes back short
	// (segment.Allocator.NextN maps an opaque batch's ranges into the
	// slice it reads them from), which is not what this test is about.
	if _, err := storeA.CreateTag(context.Background(), leafd.Tag{Name: "user", Step: 10_000, MaxID: 1,
		Format: segment.FormatOpaque, KeyFingerprint: segment.KeyFingerprint(key, "user")}); err != nil {
		t.Fatal(err)
	}
	var urls []string
	var recs []*recorder
	for _, s := range []store.Store{storeA, storeB} {
		a, err := segment.New(s, segment.Config{WaitTimeout: time.Second, TagRefresh: time.Hour, Logger: quiet, OpaqueKey: key})
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Refresh(context.Background()); err != nil {
			t.Fatal(err)
		}
		a.Start()
		t.Cleanup(func() { a.Close() })
		rec := &recorder{h: leafhttp.New(leafhttp.Config{Segment: a, Logger: quiet}).Handler()}
		urls = append(urls, newRangeServerFor(t, rec))
		recs = append(recs, rec)
	}

	res, err := http.Get(urls[0] + "/segment/order/range?size=1")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Skipf("the server answers GET /segment/order/range with HTTP %d: range leases are not served yet", res.StatusCode)
	}

	ranged1 := newClient(t, urls[0], client.WithFailover(urls[1]), client.WithRanges(500, 0.5), client.WithBuffer(50, 0.2))
	ranged2 := newClient(t, urls[1], client.WithFailover(urls[0]), client.WithRanges(37, 0.1))
	plain := newClient(t, urls[0], client.WithFailover(urls[1]))
	clients := []*client.Client{ranged1, ranged2, plain}

	const workers, calls = 6, 300
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		seen     = map[string]map[int64]bool{"order": {}, "user": {}}
		failures []error
	)
	for w := range workers {
		c := clients[w%len(clients)]
		wg.Go(func() {
			ctx := context.Background()
			for i := range calls {
				tag := "order"
				if i%7 == 6 {
					tag = "user"
				}
				var ids []int64
				var err error
				if i%5 == 4 {
					ids, err = c.NextN(ctx, tag, 4)
				} else {
					var id int64
					id, err = c.Next(ctx, tag)
					ids = []int64{id}
				}
				mu.Lock()
				if err != nil {
					failures = append(failures, fmt.Errorf("%s: %w", tag, err))
					ids = nil
				}
				for _, id := range ids {
					if seen[tag][id] {
						failures = append(failures, fmt.Errorf("%s: ID %d handed out twice", tag, id))
					}
					seen[tag][id] = true
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, err := range failures {
		t.Error(err)
	}
	var sizes, counts []string
	for _, rec := range recs {
		for _, q := range rec.allQueries() {
			v, _ := url.ParseQuery(q)
			if v.Has("size") {
				sizes = append(sizes, v.Get("size"))
			} else {
				counts = append(counts, v.Get("count"))
			}
		}
	}
	if !slices.Contains(sizes, "500") || !slices.Contains(sizes, "37") {
		t.Fatalf("range requests of sizes %v, want some of 500 and 37", sizes)
	}
	// The opaque tag: ranged1 serves it from its ID buffer (count=50).
	if !slices.Contains(counts, "50") {
		t.Fatalf("segment requests with counts %q, want the buffer's refills of 50", counts)
	}
	if len(seen["user"]) < workers*calls/10 {
		t.Fatalf("%d IDs of the opaque tag", len(seen["user"]))
	}
}
