package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/client"
	"github.com/leafd/leafd/internal/testkit/testdb"
	"github.com/leafd/leafd/store"
)

func newClient(tb testing.TB, baseURL string, opts ...client.Option) *client.Client {
	tb.Helper()
	c, err := client.New(baseURL, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

func mustNext(tb testing.TB, c *client.Client, tag string) int64 {
	tb.Helper()
	id, err := c.Next(context.Background(), tag)
	if err != nil {
		tb.Fatal(err)
	}
	return id
}

// TestDirect: without a buffer every call is one request, and the answers
// are the server's IDs, parsed.
func TestDirect(t *testing.T) {
	srv := newLeafd(t, "order")
	c := newClient(t, srv.URL)
	ctx := context.Background()
	if id := mustNext(t, c, "order"); id != 1 {
		t.Fatalf("first ID %d, want 1", id)
	}
	ids, err := c.NextN(ctx, "order", 3)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids, []int64{2, 3, 4}) {
		t.Fatalf("NextN(3) = %v, want [2 3 4]", ids)
	}
	if n := srv.rec.requests.Load(); n != 2 {
		t.Fatalf("server saw %d segment requests, want 2", n)
	}
	sf, err := c.SnowflakeN(ctx, 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(sf) != 5 || !slices.IsSorted(sf) || sf[0] <= 0 || len(slices.Compact(slices.Clone(sf))) != 5 {
		t.Fatalf("SnowflakeN(5) = %v, want 5 ascending positive IDs", sf)
	}
	one, err := c.Snowflake(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if one <= sf[4] {
		t.Fatalf("Snowflake() = %d after %d", one, sf[4])
	}
	// Worker id 1 of the default layout is in bits 12..21.
	if w := (one >> 12) & 1023; w != 1 {
		t.Fatalf("snowflake worker id %d, want 1", w)
	}
}

// TestBufferRefillsInBackground: the buffer is filled by one count=N
// request, serves the next calls from memory, and starts the next refill
// in the background once refillAt×size IDs are left, with no call running.
func TestBufferRefillsInBackground(t *testing.T) {
	srv := newLeafd(t, "order")
	c := newClient(t, srv.URL, client.WithBuffer(10, 0.5))
	var got []int64

	got = append(got, mustNext(t, c, "order"))
	if n := srv.rec.requests.Load(); n != 1 {
		t.Fatalf("after the first Next the server saw %d requests, want 1", n)
	}
	q, _ := url.ParseQuery(srv.rec.allQueries()[0])
	if q.Get("count") != "10" || q.Get("format") != "json" {
		t.Fatalf("refill query %q, want count=10 and format=json", srv.rec.allQueries()[0])
	}
	for range 3 { // 9, 8, 7, then 6 left: above the mark of 5
		got = append(got, mustNext(t, c, "order"))
	}
	if n := srv.rec.requests.Load(); n != 1 {
		t.Fatalf("calls served from memory made %d requests, want still 1", n)
	}
	got = append(got, mustNext(t, c, "order")) // 5 left: the refill starts
	waitFor(t, "the background refill to reach the server", func() bool { return srv.rec.requests.Load() == 2 })
	waitFor(t, "the background refill to be answered", func() bool { return srv.rec.answered.Load() == 2 })
	for range 5 { // 6..10 from the first fill; 11..20 are there or landing
		got = append(got, mustNext(t, c, "order"))
	}
	if n := srv.rec.requests.Load(); n != 2 {
		t.Fatalf("server saw %d requests, want 2", n)
	}
	for range 10 {
		got = append(got, mustNext(t, c, "order"))
	}
	want := make([]int64, 20)
	for i := range want {
		want[i] = int64(i + 1)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("IDs %v, want 1..20 in order", got)
	}
	// 5 left of 11..20 again: a third refill, with nobody asking.
	waitFor(t, "the third refill", func() bool { return srv.rec.requests.Load() == 3 })

	// A batch up to the buffer's size comes from the buffer, ascending.
	ids, err := c.NextN(context.Background(), "order", 7)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids, []int64{21, 22, 23, 24, 25, 26, 27}) {
		t.Fatalf("NextN(7) = %v, want 21..27", ids)
	}
	// A larger one is one request of its own.
	big, err := c.NextN(context.Background(), "order", 11)
	if err != nil {
		t.Fatal(err)
	}
	if len(big) != 11 || !slices.IsSorted(big) || big[0] <= 27 {
		t.Fatalf("NextN(11) = %v", big)
	}
	if !slices.Contains(srv.rec.allQueries(), "format=json&count=11") {
		t.Fatalf("no request for count=11 among %q", srv.rec.allQueries())
	}
}

// TestBufferOneRefillInFlight: callers that find the buffer empty park on
// the one refill in flight (blocked in a select, not spinning) and are all
// served by it.
func TestBufferOneRefillInFlight(t *testing.T) {
	srv := newLeafd(t, "order")
	c := newClient(t, srv.URL, client.WithBuffer(100, 0.1))
	release := srv.rec.hold()
	defer release()

	const callers = 50
	ids := make([]int64, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			ids[i], errs[i] = c.Next(ctx, "order")
		})
	}
	// Parked, and the refill's request arrived (the two need not happen in
	// that order).
	waitFor(t, fmt.Sprintf("%d callers parked on the refill", callers), func() bool {
		return parked() == callers && srv.rec.requests.Load() >= 1
	})
	if n := srv.rec.requests.Load(); n != 1 {
		t.Fatalf("%d parked callers made %d requests, want 1", callers, n)
	}
	release()
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(ids)
	for i, id := range ids {
		if id != int64(i+1) {
			t.Fatalf("IDs %v, want 1..%d each once", ids, callers)
		}
	}
	if n := srv.rec.requests.Load(); n != 1 {
		t.Fatalf("server saw %d requests, want 1 (50 of 100 IDs left, above the mark)", n)
	}
}

// TestBufferManyGoroutines: many goroutines through one buffered client get
// no ID twice, each sees its IDs strictly increase, and the server sees one
// request per buffer's worth, not one per ID.
func TestBufferManyGoroutines(t *testing.T) {
	srv := newLeafd(t, "order")
	const size = 50
	c := newClient(t, srv.URL, client.WithBuffer(size, 0.3))
	const workers, calls = 16, 300
	seen := make([][]int64, workers)
	var wg sync.WaitGroup
	var failed atomic.Value
	for w := range workers {
		wg.Go(func() {
			ctx := context.Background()
			for i := range calls {
				if i%10 == 9 {
					ids, err := c.NextN(ctx, "order", 3)
					if err != nil {
						failed.Store(err)
						return
					}
					seen[w] = append(seen[w], ids...)
					continue
				}
				id, err := c.Next(ctx, "order")
				if err != nil {
					failed.Store(err)
					return
				}
				seen[w] = append(seen[w], id)
			}
		})
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		t.Fatal(err)
	}
	all := map[int64]int{}
	total := 0
	for w, ids := range seen {
		for i, id := range ids {
			if i > 0 && id <= ids[i-1] {
				t.Fatalf("goroutine %d got %d after %d", w, id, ids[i-1])
			}
			if prev, dup := all[id]; dup {
				t.Fatalf("ID %d handed to goroutines %d and %d", id, prev, w)
			}
			all[id] = w
			total++
		}
	}
	requests := int(srv.rec.requests.Load())
	// Every request fetched size IDs; what was not handed out is at most
	// what one buffer holds plus one refill in flight.
	if requests*size < total || requests*size > total+2*size {
		t.Fatalf("%d IDs handed out with %d requests of %d", total, requests, size)
	}
	for _, q := range srv.rec.allQueries() {
		v, _ := url.ParseQuery(q)
		if v.Get("count") != fmt.Sprint(size) || v.Get("format") != "json" {
			t.Fatalf("a request with query %q: every request should be a refill of %d", q, size)
		}
	}
	for id := range all {
		if id < 1 || id > int64(requests*size) {
			t.Fatalf("ID %d outside the %d IDs fetched", id, requests*size)
		}
	}
}

// TestFailover: two servers share one database; one is stopped in the
// middle of the traffic. No call fails, no ID is handed out twice, and the
// client stays on the server that works.
func TestFailover(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []client.Option
	}{
		{"Direct", nil},
		{"Buffered", []client.Option{client.WithBuffer(20, 0.5)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dsn := testdb.DSN(t, store.DefaultDriver())
			storeA, storeB := openStore(t, dsn), openStore(t, dsn)
			createTag(t, storeA, "order", 100)
			a := newServer(t, storeA, modes{segment: true, snowflake: true, workerID: 1})
			b := newServer(t, storeB, modes{segment: true, snowflake: true, workerID: 2})
			tr := &countingTransport{base: http.DefaultTransport.(*http.Transport).Clone()}
			opts := append([]client.Option{client.WithFailover(b.URL), client.WithHTTPClient(&http.Client{Transport: tr})}, tc.opts...)
			c := newClient(t, a.URL, opts...)

			const workers, calls = 8, 150
			var (
				done     atomic.Int64
				wg       sync.WaitGroup
				mu       sync.Mutex
				segIDs   = map[int64]bool{}
				sfIDs    = map[int64]bool{}
				failures []error
			)
			for range workers {
				wg.Go(func() {
					ctx := context.Background()
					for i := range calls {
						var (
							id  int64
							err error
							m   = segIDs
						)
						if i%5 == 4 {
							id, err = c.Snowflake(ctx)
							m = sfIDs
						} else {
							id, err = c.Next(ctx, "order")
						}
						mu.Lock()
						switch {
						case err != nil:
							failures = append(failures, err)
						case m[id]:
							failures = append(failures, fmt.Errorf("ID %d handed out twice", id))
						default:
							m[id] = true
						}
						mu.Unlock()
						done.Add(1)
					}
				})
			}
			waitFor(t, "a third of the calls", func() bool { return done.Load() >= workers*calls/3 })
			a.Close() // refuses connections from now on
			wg.Wait()
			for _, err := range failures {
				t.Error(err)
			}
			if t.Failed() {
				return
			}
			if len(segIDs)+len(sfIDs) != workers*calls {
				t.Fatalf("%d IDs for %d calls", len(segIDs)+len(sfIDs), workers*calls)
			}
			if b.rec.requests.Load() == 0 {
				t.Fatal("the second server got no segment request: no failover happened")
			}
			// The client stays on b: 20 more calls are 20 round trips to
			// b and none to a.
			beforeA, beforeB := tr.count(a.URL, "/snowflake"), tr.count(b.URL, "/snowflake")
			for range 20 {
				if _, err := c.Snowflake(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			if da, db := tr.count(a.URL, "/snowflake")-beforeA, tr.count(b.URL, "/snowflake")-beforeB; da != 0 || db != 20 {
				t.Fatalf("after the failover, 20 calls made %d round trips to the stopped server and %d to the live one; want 0 and 20", da, db)
			}
		})
	}
}

// TestFailoverOnServerErrors: a 5xx that another server may not give is
// asked again of the next URL; a definite answer (every 4xx, tag_exhausted,
// period_exhausted) is not.
func TestFailoverOnServerErrors(t *testing.T) {
	live := newLeafd(t, "order")
	for _, tc := range []struct {
		name      string
		status    int
		body      string
		failover  bool
		wantCode  string
		wantTotal int64 // requests the live server sees
	}{
		{"SegmentUnavailable", 503, `{"error":{"code":"segment_unavailable","message":"no IDs"}}`, true, "", 1},
		{"NotReady", 503, `{"error":{"code":"not_ready","message":"starting"}}`, true, "", 1},
		{"Internal", 500, `{"error":{"code":"internal","message":"internal error; see the server log"}}`, true, "", 1},
		{"ProxyPage", 502, `<html>Bad Gateway</html>`, true, "", 1},
		{"TagExhausted", 503, `{"error":{"code":"tag_exhausted","message":"the end"}}`, false, leafd.ETagExhausted, 0},
		{"PeriodExhausted", 503, `{"error":{"code":"period_exhausted","message":"the day is full"}}`, false, leafd.EPeriodExhausted, 0},
		{"UnknownTag", 404, `{"error":{"code":"unknown_tag","message":"no such tag"}}`, false, leafd.EUnknownTag, 0},
		{"InvalidCount", 400, `{"error":{"code":"invalid_count","message":"bad count"}}`, false, leafd.EInvalidCount, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var hits atomic.Int64
			bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				hits.Add(1)
				w.Header().Set("Content-Type", "application/json; charset=utf-8")
				w.WriteHeader(tc.status)
				fmt.Fprint(w, tc.body)
			}))
			defer bad.Close()
			before := live.rec.requests.Load()
			c := newClient(t, bad.URL, client.WithFailover(live.URL))
			id, err := c.Next(context.Background(), "order")
			if hits.Load() != 1 {
				t.Fatalf("the failing server got %d requests, want 1", hits.Load())
			}
			if got := live.rec.requests.Load() - before; got != tc.wantTotal {
				t.Fatalf("the live server got %d requests, want %d", got, tc.wantTotal)
			}
			if tc.failover {
				if err != nil || id < 1 {
					t.Fatalf("Next = %d, %v; want an ID from the second server", id, err)
				}
				return
			}
			var e *client.Error
			if !errors.As(err, &e) || e.Code != tc.wantCode || e.Status != tc.status {
				t.Fatalf("Next error %v, want %s with status %d", err, tc.wantCode, tc.status)
			}
		})
	}

	t.Run("AllFail", func(t *testing.T) {
		bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(503)
			fmt.Fprint(w, `{"error":{"code":"segment_unavailable","message":"no IDs buffered"}}`)
		}))
		defer bad.Close()
		c := newClient(t, bad.URL, client.WithFailover(refusedURL(t)))
		_, err := c.Next(context.Background(), "order")
		if !errors.Is(err, client.ErrSegmentUnavailable) {
			t.Fatalf("Next error %v, want segment_unavailable among the failures", err)
		}
		if !strings.Contains(err.Error(), "none of 2 base URLs answered") || !strings.Contains(err.Error(), "refused") {
			t.Fatalf("error %q should name both failures", err)
		}
	})
}

// TestTypedErrors: the server's error answers arrive as *client.Error with
// status, code and message, matched by errors.Is and IsCode.
func TestTypedErrors(t *testing.T) {
	srv := newLeafd(t, "order")
	ctx := context.Background()

	check := func(t *testing.T, err error, sentinel *client.Error, status int, msg string) {
		t.Helper()
		var e *client.Error
		if !errors.As(err, &e) {
			t.Fatalf("error %v (%T) is not a *client.Error", err, err)
		}
		if e.Status != status || e.Code != sentinel.Code || !strings.Contains(e.Message, msg) {
			t.Fatalf("error %+v, want status %d, code %s, a message with %q", e, status, sentinel.Code, msg)
		}
		if !errors.Is(err, sentinel) || !client.IsCode(err, sentinel.Code) || client.Code(err) != sentinel.Code {
			t.Fatalf("errors.Is / IsCode / Code do not match %s on %v", sentinel.Code, err)
		}
		if errors.Is(err, client.ErrTagExhausted) || client.IsCode(err, "") {
			t.Fatalf("%v matches another code", err)
		}
	}

	for _, tc := range []struct {
		name string
		opts []client.Option
	}{{"Direct", nil}, {"Buffered", []client.Option{client.WithBuffer(10, 0.2)}}} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t, srv.URL, tc.opts...)
			t.Run("UnknownTag", func(t *testing.T) {
				before := srv.rec.requests.Load()
				_, err := c.Next(ctx, "nope")
				check(t, err, client.ErrUnknownTag, 404, `tag "nope"`)
				if srv.rec.requests.Load() == before {
					t.Fatal("the answer did not come from the server")
				}
				// The next call asks again (no stale buffer is kept).
				before = srv.rec.requests.Load()
				_, err = c.Next(ctx, "nope")
				check(t, err, client.ErrUnknownTag, 404, `tag "nope"`)
				if srv.rec.requests.Load() == before {
					t.Fatal("the second answer did not come from the server")
				}
			})
			t.Run("InvalidCount", func(t *testing.T) {
				before := srv.rec.requests.Load()
				_, err := c.NextN(ctx, "order", 10001) // segment.max_batch is 10000
				check(t, err, client.ErrInvalidCount, 400, "from 1 to 10000")
				if srv.rec.requests.Load() != before+1 {
					t.Fatal("the answer did not come from the server")
				}
				_, err = c.SnowflakeN(ctx, 10001)
				check(t, err, client.ErrInvalidCount, 400, "from 1 to 10000")
				_, err = c.NextN(ctx, "order", 0) // found by the client
				check(t, err, client.ErrInvalidCount, 400, "at least 1")
			})
			t.Run("InvalidTag", func(t *testing.T) {
				before := srv.rec.requests.Load()
				_, err := c.Next(ctx, "bad/tag")
				check(t, err, client.ErrInvalidTag, 400, "is not valid")
				if srv.rec.requests.Load() != before {
					t.Fatal("a tag the server would refuse was sent")
				}
			})
		})
	}

	t.Run("ModeDisabled", func(t *testing.T) {
		s := openStore(t, testdb.DSN(t, store.DefaultDriver()))
		createTag(t, s, "order", 1000)
		segOnly := newServer(t, s, modes{segment: true})
		sfOnly := newServer(t, s, modes{snowflake: true, workerID: 3})
		_, err := newClient(t, segOnly.URL).Snowflake(ctx)
		check(t, err, client.ErrModeDisabled, 404, "snowflake mode is switched off")
		_, err = newClient(t, sfOnly.URL).Next(ctx, "order")
		check(t, err, client.ErrModeDisabled, 404, "segment mode is switched off")
		_, err = newClient(t, sfOnly.URL, client.WithBuffer(5, 0)).Next(ctx, "order")
		check(t, err, client.ErrModeDisabled, 404, "segment mode is switched off")
	})

	t.Run("Format", func(t *testing.T) {
		e := &client.Error{Status: 404, Code: "unknown_tag", Message: "tag \"x\" is not defined"}
		if got, want := e.Error(), `leafd: unknown_tag (HTTP 404): tag "x" is not defined`; got != want {
			t.Fatalf("Error() = %q, want %q", got, want)
		}
		if !errors.Is(e, &client.Error{Code: "unknown_tag", Status: 404}) || errors.Is(e, &client.Error{Code: "unknown_tag", Status: 400}) {
			t.Fatal("a sentinel with a status should match that status only")
		}
	})
}

// TestStrictIDs: an answer is taken only if it is exactly what leafd
// writes; anything else is an error and no ID is handed out.
func TestStrictIDs(t *testing.T) {
	for _, tc := range []struct {
		name, contentType, body string
		n                       int
		ok                      bool
	}{
		{"Valid", "application/json", `{"tag":"order","ids":["1","9223372036854775807"]}`, 2, true},
		{"Number", "application/json", `{"tag":"order","ids":[1,2]}`, 2, false},
		{"Plus", "application/json", `{"tag":"order","ids":["+1"]}`, 1, false},
		{"Negative", "application/json", `{"tag":"order","ids":["-1"]}`, 1, false},
		{"Zero", "application/json", `{"tag":"order","ids":["0"]}`, 1, false},
		{"LeadingZero", "application/json", `{"tag":"order","ids":["01"]}`, 1, false},
		{"Overflow", "application/json", `{"tag":"order","ids":["9223372036854775808"]}`, 1, false},
		{"Fraction", "application/json", `{"tag":"order","ids":["1.5"]}`, 1, false},
		{"Exponent", "application/json", `{"tag":"order","ids":["1e3"]}`, 1, false},
		{"Space", "application/json", `{"tag":"order","ids":[" 1"]}`, 1, false},
		{"Empty", "application/json", `{"tag":"order","ids":[""]}`, 1, false},
		{"TooFew", "application/json", `{"tag":"order","ids":["1"]}`, 2, false},
		{"TooMany", "application/json", `{"tag":"order","ids":["1","2","3"]}`, 2, false},
		{"Descending", "application/json", `{"tag":"order","ids":["2","1"]}`, 2, true}, // an opaque tag's batch: sorted
		{"Twice", "application/json", `{"tag":"order","ids":["2","2"]}`, 2, false},
		{"TwiceUnordered", "application/json", `{"tag":"order","ids":["3","1","3"]}`, 3, false},
		{"OtherTag", "application/json", `{"tag":"pay","ids":["1"]}`, 1, false},
		{"NoTag", "application/json", `{"ids":["1"]}`, 1, false},
		{"NullIDs", "application/json", `{"tag":"order","ids":null}`, 1, false},
		{"NotJSON", "application/json", `1`, 1, false},
		{"PlainText", "text/plain; charset=utf-8", "1\n", 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tc.contentType)
				fmt.Fprint(w, tc.body)
			}))
			defer srv.Close()
			c := newClient(t, srv.URL)
			ids, err := c.NextN(context.Background(), "order", tc.n)
			if tc.ok {
				if err != nil || len(ids) != tc.n || !slices.IsSorted(ids) {
					t.Fatalf("NextN = %v, %v; want %d IDs, ascending", ids, err, tc.n)
				}
				return
			}
			if err == nil || ids != nil {
				t.Fatalf("NextN = %v, %v; want an error and no IDs", ids, err)
			}
			if client.Code(err) != "" {
				t.Fatalf("a malformed answer became the server error %v", err)
			}
		})
	}
}

// TestContextDeadline: when no server answers, every call returns at its
// context's deadline, buffered or not, with the deadline in the error; and
// Close does not wait for the stuck refill.
func TestContextDeadline(t *testing.T) {
	for _, tc := range []struct {
		name     string
		buffered bool
		failover bool // a refused URL first, then the hanging one
	}{
		{"Direct", false, false},
		{"Buffered", true, false},
		{"FailoverToHanging", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := hangingServer(t)
			var opts []client.Option
			if tc.buffered {
				opts = append(opts, client.WithBuffer(100, 0.2))
			}
			if tc.failover {
				opts = append(opts, client.WithFailover(base))
				base = refusedURL(t)
			}
			c, err := client.New(base, opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			calls := map[string]func(context.Context) error{
				"Next": func(ctx context.Context) error { _, err := c.Next(ctx, "order"); return err },
				"NextN": func(ctx context.Context) error {
					_, err := c.NextN(ctx, "order", 5)
					return err
				},
				"Snowflake": func(ctx context.Context) error { _, err := c.Snowflake(ctx); return err },
			}
			for name, call := range calls {
				ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
				errc := make(chan error, 1)
				go func() { errc <- call(ctx) }()
				select {
				case err := <-errc:
					if !errors.Is(err, context.DeadlineExceeded) {
						t.Errorf("%s: error %v, want the context's deadline", name, err)
					}
				case <-time.After(10 * time.Second):
					t.Fatalf("%s ignored its context's deadline", name)
				}
				cancel()
			}
			closed := make(chan struct{})
			go func() { c.Close(); close(closed) }()
			select {
			case <-closed:
			case <-time.After(5 * time.Second):
				t.Fatal("Close waited for a refill stuck on a server that does not answer")
			}
		})
	}
}

// TestClose: Close stops the refill in flight, makes the IDs the buffer
// held unreachable, wakes parked callers with ErrClosed, and no request is
// sent after it.
func TestClose(t *testing.T) {
	srv := newLeafd(t, "order")
	c, err := client.New(srv.URL, client.WithBuffer(10, 0.5))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for want := int64(1); want <= 5; want++ { // the 5th call leaves 5: refill
		release := func() {}
		if want == 5 {
			release = srv.rec.hold()
		}
		defer release()
		if id := mustNext(t, c, "order"); id != want {
			t.Fatalf("ID %d, want %d", id, want)
		}
	}
	waitFor(t, "the refill to reach the server", func() bool { return srv.rec.requests.Load() == 2 })
	// Drain 6..10, then one more caller parks on the held refill.
	for want := int64(6); want <= 10; want++ {
		if id := mustNext(t, c, "order"); id != want {
			t.Fatalf("ID %d, want %d", id, want)
		}
	}
	parkedErr := make(chan error, 1)
	go func() {
		_, err := c.Next(ctx, "order")
		parkedErr <- err
	}()
	waitFor(t, "a caller parked on the refill", func() bool { return parked() == 1 })

	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-parkedErr; !errors.Is(err, client.ErrClosed) {
		t.Fatalf("the parked caller got %v, want ErrClosed", err)
	}
	requests := srv.rec.requests.Load()
	if _, err := c.Next(ctx, "order"); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("Next after Close: %v, want ErrClosed", err)
	}
	if _, err := c.NextN(ctx, "order", 20); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("NextN after Close: %v, want ErrClosed", err)
	}
	if _, err := c.Snowflake(ctx); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("Snowflake after Close: %v, want ErrClosed", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if n := srv.rec.requests.Load(); n != requests || n != 2 {
		t.Fatalf("server saw %d requests, want 2 and none after Close", n)
	}
	if n := srv.rec.answered.Load(); n != 1 {
		t.Fatalf("the held refill was answered (%d answers): Close should have cancelled it", n)
	}
}

// TestClosedBufferDropsIDs: IDs a buffer holds at Close are never handed
// out, by this client or any other: the next client of the server starts
// past them.
func TestClosedBufferDropsIDs(t *testing.T) {
	srv := newLeafd(t, "order")
	c := newClient(t, srv.URL, client.WithBuffer(10, 0))
	if id := mustNext(t, c, "order"); id != 1 {
		t.Fatalf("ID %d, want 1", id)
	}
	c.Close()
	if _, err := c.Next(context.Background(), "order"); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("Next after Close: %v", err)
	}
	if id := mustNext(t, newClient(t, srv.URL), "order"); id != 11 {
		t.Fatalf("next client got %d, want 11 (2..10 were dropped)", id)
	}
}

// TestNewRefuses: New names what is wrong with its arguments.
func TestNewRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		base string
		opts []client.Option
		want string
	}{
		{"Relative", "leafd:8080", nil, "not valid"},
		{"Scheme", "ftp://leafd", nil, "not valid"},
		{"NoHost", "http://", nil, "not valid"},
		{"Query", "http://leafd/?x=1", nil, "not valid"},
		{"BadFailover", "http://a", []client.Option{client.WithFailover("b")}, `"b"`},
		{"NilHTTPClient", "http://a", []client.Option{client.WithHTTPClient(nil)}, "nil"},
		{"SizeZero", "http://a", []client.Option{client.WithBuffer(0, 0.5)}, "below 1"},
		{"RefillAtOne", "http://a", []client.Option{client.WithBuffer(10, 1)}, "outside [0, 1)"},
		{"RefillAtNegative", "http://a", []client.Option{client.WithBuffer(10, -0.1)}, "outside [0, 1)"},
		{"RefillTimeout", "http://a", []client.Option{client.WithRefillTimeout(0)}, "not positive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := client.New(tc.base, tc.opts...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New = %v, %v; want an error with %q", c, err, tc.want)
			}
		})
	}
	// A path prefix and a trailing slash are fine.
	srv := newLeafd(t, "order")
	mux := http.NewServeMux()
	mux.Handle("/leafd/", http.StripPrefix("/leafd", srv.Config.Handler))
	prefixed := httptest.NewServer(mux)
	defer prefixed.Close()
	if id := mustNext(t, newClient(t, prefixed.URL+"/leafd/"), "order"); id != 1 {
		t.Fatalf("through a path prefix: ID %d, want 1", id)
	}
}
