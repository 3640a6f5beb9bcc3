package http_test

import (
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leafd/leafd"
	leafhttp "github.com/leafd/leafd/http"
	"github.com/leafd/leafd/internal/testkit/testdb"
	"github.com/leafd/leafd/segment"
	"github.com/leafd/leafd/store"
)

type rangeBody struct {
	Tag, Start, End string
}

func getRange(t *testing.T, url string) (rangeBody, int64, int64) {
	t.Helper()
	r := do(t, "GET", url)
	if r.status != http.StatusOK || !strings.HasPrefix(r.contentType, "application/json") {
		t.Fatalf("GET %s: %d %s %q", url, r.status, r.contentType, r.body)
	}
	var b rangeBody
	dec := json.NewDecoder(strings.NewReader(r.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		t.Fatalf("GET %s: %q: %v", url, r.body, err)
	}
	start, err1 := strconv.ParseInt(b.Start, 10, 64)
	end, err2 := strconv.ParseInt(b.End, 10, 64)
	if err1 != nil || err2 != nil || start < 1 || end <= start {
		t.Fatalf("GET %s: %q is not a range", url, r.body)
	}
	return b, start, end
}

// A range is [start, end) as decimal strings, size IDs wide; the IDs
// around it do not overlap it.
func TestSegmentRange(t *testing.T) {
	srv, _ := newServer(t, map[string]int64{"order": 1})
	before := do(t, "GET", srv.URL+"/segment/order")
	b, start, end := getRange(t, srv.URL+"/segment/order/range?size=2")
	if b.Tag != "order" || end-start != 2 {
		t.Fatalf("range %+v: want 2 IDs of order", b)
	}
	if strings.TrimSpace(before.body) != strconv.FormatInt(start-1, 10) {
		t.Fatalf("ID before the range is %s, range starts at %d", before.body, start)
	}
	// Larger than what the buffers hold (max_step 10): from the store.
	_, s2, e2 := getRange(t, srv.URL+"/segment/order/range?size=100&format=json")
	if e2-s2 != 100 || s2 < end {
		t.Fatalf("second range [%d, %d) after [%d, %d)", s2, e2, start, end)
	}
	// expiring=true changes nothing for a tag whose ranges never expire:
	// the next range, without valid_ms (getRange refuses unknown fields).
	_, s3, e3 := getRange(t, srv.URL+"/segment/order/range?expiring=true&size=2")
	if e3-s3 != 2 || s3 < end || (s3 < e2 && e3 > s2) {
		t.Fatalf("range [%d, %d) with expiring=true overlaps [%d, %d) or [%d, %d)", s3, e3, start, end, s2, e2)
	}
	after := do(t, "GET", srv.URL+"/segment/order")
	if id, _ := strconv.ParseInt(strings.TrimSpace(after.body), 10, 64); id < end || (id >= s2 && id < e2) || (id >= s3 && id < e3) {
		t.Fatalf("ID %d after the ranges overlaps one", id)
	}
	if r := do(t, "HEAD", srv.URL+"/segment/order/range?size=5"); r.status != http.StatusOK || r.body != "" {
		t.Fatalf("HEAD: %d %q", r.status, r.body)
	}
}

func TestSegmentRangeErrors(t *testing.T) {
	srv, _ := newServer(t, map[string]int64{"order": 1})
	for _, c := range []struct {
		path   string
		status int
		code   string
	}{
		{"/segment/order/range", 400, leafd.EInvalidSize},
		{"/segment/order/range?size=", 400, leafd.EInvalidSize},
		{"/segment/order/range?size=0", 400, leafd.EInvalidSize},
		{"/segment/order/range?size=-3", 400, leafd.EInvalidSize},
		{"/segment/order/range?size=+3", 400, leafd.EInvalidSize},
		{"/segment/order/range?size=1.5", 400, leafd.EInvalidSize},
		{"/segment/order/range?size=abc", 400, leafd.EInvalidSize},
		{"/segment/order/range?size=1000001", 400, leafd.EInvalidSize},
		{"/segment/order/range?size=3&size=3", 400, leafd.EInvalidSize},
		{"/segment/order/range?size=3;x=1", 400, leafd.EInvalidQuery},
		{"/segment/order/range?size=%zz", 400, leafd.EInvalidQuery},
		// expiring is exactly true, once.
		{"/segment/order/range?size=3&expiring=false", 400, leafd.EInvalidQuery},
		{"/segment/order/range?size=3&expiring=1", 400, leafd.EInvalidQuery},
		{"/segment/order/range?size=3&expiring=TRUE", 400, leafd.EInvalidQuery},
		{"/segment/order/range?size=3&expiring=true%20", 400, leafd.EInvalidQuery},
		{"/segment/order/range?size=3&expiring=", 400, leafd.EInvalidQuery},
		{"/segment/order/range?size=3&expiring", 400, leafd.EInvalidQuery},
		{"/segment/order/range?size=3&expiring=%zz", 400, leafd.EInvalidQuery},
		{"/segment/order/range?size=3&expiring=true&expiring=true", 400, leafd.EInvalidQuery},
		{"/segment/order/range?size=3&expiring=true;x=1", 400, leafd.EInvalidQuery},
		{"/segment/order/range?size=3&Expiring=true", 400, leafd.EInvalidQuery},
		{"/segment/nope/range?size=3", 404, leafd.EUnknownTag},
		{"/segment/a%20b/range?size=3", 400, leafd.EInvalidTag},
		{"/segment/order/range?size=3", 405, leafd.EMethodNotAllowed},
	} {
		method := "GET"
		if c.status == 405 {
			method = "POST"
		}
		r := do(t, method, srv.URL+c.path)
		if r.status != c.status || errorCode(t, r) != c.code {
			t.Errorf("%s %s: %d %q, want %d %s", method, c.path, r.status, r.body, c.status, c.code)
		}
	}
	off := httptest.NewServer(leafhttp.New(leafhttp.Config{Logger: quiet}).Handler())
	defer off.Close()
	if r := do(t, "GET", off.URL+"/segment/order/range?size=3"); r.status != 404 || errorCode(t, r) != leafd.EModeDisabled {
		t.Errorf("segment off: %d %q", r.status, r.body)
	}
}

// A tag whose IDs are not consecutive answers 409 range_unsupported, and
// says what to use instead.
func TestSegmentRangeStrided(t *testing.T) {
	srv, _ := newSlotServer(t)
	r := do(t, "GET", srv.URL+"/segment/order/range?size=3")
	if r.status != http.StatusConflict || errorCode(t, r) != leafd.ERangeUnsupported || !strings.Contains(r.body, "count=N") {
		t.Fatalf("strided tag: %d %q", r.status, r.body)
	}
}

// Ranges, batches and single IDs asked concurrently of two servers over one
// database never share an ID.
func TestSegmentRangeTwoServers(t *testing.T) {
	driver := store.DefaultDriver()
	dsn := testdb.DSN(t, driver)
	var urls []string
	for i := range 2 {
		s, err := store.Open(driver, dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		if err := s.Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			if _, err := s.CreateTag(context.Background(), leafd.Tag{Name: "order", MaxID: 1, Step: 50}); err != nil {
				t.Fatal(err)
			}
		}
		a := startAllocator(t, s, segment.Config{MaxStep: 400, WaitTimeout: 10 * time.Second, Logger: quiet})
		srv := httptest.NewServer(leafhttp.New(leafhttp.Config{Segment: a, Logger: quiet}).Handler())
		t.Cleanup(srv.Close)
		urls = append(urls, srv.URL)
	}
	type span struct{ start, end int64 }
	var mu sync.Mutex
	var spans []span
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Go(func() {
			url := urls[w%2]
			for i := range 60 {
				var got []span
				switch (w + i) % 3 {
				case 0:
					size := 1 + (w*31+i*7)%150 // up to 150 > 400/4: some from the store
					_, s, e := getRange(t, url+"/segment/order/range?size="+strconv.Itoa(size))
					if e-s != int64(size) {
						t.Errorf("range [%d, %d) is not %d IDs", s, e, size)
					}
					got = append(got, span{s, e})
				case 1:
					r := do(t, "GET", url+"/segment/order?count=20")
					for _, f := range strings.Fields(r.body) {
						id, err := strconv.ParseInt(f, 10, 64)
						if err != nil {
							t.Errorf("batch answered %q", r.body)
							return
						}
						got = append(got, span{id, id + 1})
					}
				default:
					r := do(t, "GET", url+"/segment/order")
					id, err := strconv.ParseInt(strings.TrimSpace(r.body), 10, 64)
					if err != nil {
						t.Errorf("single answered %d %q", r.status, r.body)
						return
					}
					got = append(got, span{id, id + 1})
				}
				mu.Lock()
				spans = append(spans, got...)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.SortFunc(spans, func(a, b span) int { return cmp.Compare(a.start, b.start) })
	for i := 1; i < len(spans); i++ {
		if spans[i].start < spans[i-1].end {
			t.Fatalf("IDs issued twice: [%d, %d) and [%d, %d)", spans[i-1].start, spans[i-1].end, spans[i].start, spans[i].end)
		}
	}
}
