package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/client"
)

// seq returns from, from+1, … to, inclusive.
func seq(from, to int64) []int64 {
	var out []int64
	for id := from; id <= to; id++ {
		out = append(out, id)
	}
	return out
}

// TestRangesRefillInBackground: the first call fetches one lease; the next
// calls make no request; once no more than refillAt×size IDs are left the
// next lease is fetched in the background, and it takes over when the
// first is used up.
func TestRangesRefillInBackground(t *testing.T) {
	srv := newRangeServer(t, newRangeStore("order"))
	c := newClient(t, srv.URL, client.WithRanges(10, 0.5))
	var got []int64
	got = append(got, mustNext(t, c, "order"))
	if n := srv.ranges.Load(); n != 1 {
		t.Fatalf("after the first Next the server saw %d range requests, want 1", n)
	}
	if sizes := srv.allSizes(); !slices.Equal(sizes, []int64{10}) {
		t.Fatalf("range sizes %v, want [10]", sizes)
	}
	for range 3 { // 9, 8, 7, then 6 left: above the mark of 5
		got = append(got, mustNext(t, c, "order"))
	}
	if n := srv.ranges.Load(); n != 1 {
		t.Fatalf("calls served from the lease made %d requests, want still 1", n)
	}
	got = append(got, mustNext(t, c, "order")) // 5 left: the next lease is due
	waitFor(t, "the background fetch to be answered", func() bool { return srv.answered.Load() == 2 })
	for range 15 { // 6..10 from the first lease, 11..20 from the second
		got = append(got, mustNext(t, c, "order"))
	}
	if !slices.Equal(got, seq(1, 20)) {
		t.Fatalf("IDs %v, want 1..20 in order", got)
	}
	// 11..20 is current and past its mark: a third lease, nobody asking.
	waitFor(t, "the third lease", func() bool { return srv.answered.Load() == 3 })
	if n := srv.segments.Load(); n != 0 {
		t.Fatalf("%d requests of GET /segment/{tag}: every ID should come from a lease", n)
	}
}

// TestRangesNextN: a batch is one contiguous run from one lease; when the
// rest of the lease is too short for it, the rest is skipped; a batch
// larger than a lease is one count=n request.
func TestRangesNextN(t *testing.T) {
	srv := newRangeServer(t, newRangeStore("order"))
	c := newClient(t, srv.URL, client.WithRanges(10, 0))
	ctx := context.Background()
	ids, err := c.NextN(ctx, "order", 4)
	if err != nil || !slices.Equal(ids, seq(1, 4)) {
		t.Fatalf("NextN(4) = %v, %v; want 1..4", ids, err)
	}
	ids, err = c.NextN(ctx, "order", 4)
	if err != nil || !slices.Equal(ids, seq(5, 8)) {
		t.Fatalf("NextN(4) = %v, %v; want 5..8", ids, err)
	}
	// 9 and 10 are left: too few for 4, so they are skipped.
	ids, err = c.NextN(ctx, "order", 4)
	if err != nil || !slices.Equal(ids, seq(11, 14)) {
		t.Fatalf("NextN(4) = %v, %v; want 11..14 (9 and 10 skipped)", ids, err)
	}
	if id := mustNext(t, c, "order"); id != 15 {
		t.Fatalf("Next = %d, want 15", id)
	}
	ids, err = c.NextN(ctx, "order", 10) // as large as a lease
	if err != nil || !slices.Equal(ids, seq(21, 30)) {
		t.Fatalf("NextN(10) = %v, %v; want 21..30 (16..20 skipped)", ids, err)
	}
	if n := srv.segments.Load(); n != 0 {
		t.Fatalf("%d count requests, want 0", n)
	}
	big, err := c.NextN(ctx, "order", 11)
	if err != nil || len(big) != 11 || !slices.IsSorted(big) || big[0] <= 30 {
		t.Fatalf("NextN(11) = %v, %v", big, err)
	}
	if n := srv.segments.Load(); n != 1 {
		t.Fatalf("NextN(11) made %d count requests, want 1", n)
	}
}

// TestRangesManyGoroutines: many goroutines through one client with small
// leases, so that refills and swaps happen all the time, get no ID twice,
// each sees its IDs strictly increase, and every ID is from a lease.
func TestRangesManyGoroutines(t *testing.T) {
	for _, tc := range []struct {
		name     string
		size     int64
		refillAt float64
	}{
		{"Size1", 1, 0},
		{"Size7", 7, 0.5},
		{"Size50", 50, 0.3},
		{"Size1000", 1000, 0.9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newRangeServer(t, newRangeStore("order", "pay"))
			c := newClient(t, srv.URL, client.WithRanges(tc.size, tc.refillAt))
			const workers, calls = 16, 400
			seen := make([][]int64, workers)
			var wg sync.WaitGroup
			var failed atomic.Value
			for w := range workers {
				wg.Go(func() {
					ctx := context.Background()
					for i := range calls {
						if w%4 == 3 { // another tag beside, through the same client
							if _, err := c.Next(ctx, "pay"); err != nil {
								failed.Store(err)
								return
							}
						}
						if i%10 == 9 {
							n := int(min(3, tc.size))
							ids, err := c.NextN(ctx, "order", n)
							if err != nil {
								failed.Store(err)
								return
							}
							if ids[n-1]-ids[0] != int64(n-1) {
								failed.Store(fmt.Errorf("NextN(%d) = %v: not one contiguous run", n, ids))
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
			for w, ids := range seen {
				for i, id := range ids {
					if i > 0 && id <= ids[i-1] {
						t.Fatalf("goroutine %d got %d after %d", w, id, ids[i-1])
					}
					if prev, dup := all[id]; dup {
						t.Fatalf("ID %d handed to goroutines %d and %d", id, prev, w)
					}
					all[id] = w
				}
			}
			srv.st.mu.Lock()
			fetched := srv.st.next["order"] - 1
			srv.st.mu.Unlock()
			for id := range all {
				if id < 1 || id > fetched {
					t.Fatalf("ID %d outside the %d IDs leased", id, fetched)
				}
			}
			if n := srv.segments.Load(); n != 0 {
				t.Fatalf("%d count requests, want 0", n)
			}
		})
	}
}

// TestRangesFailover: two servers share one store; the first fails every
// range request from the second on. The background fetch moves on to the
// second server within the same refill: no call fails, no ID twice, and
// the client stays on the second server.
func TestRangesFailover(t *testing.T) {
	for _, tc := range []struct {
		name string
		fail func(a *rangeServer)
	}{
		{"SegmentUnavailable", func(a *rangeServer) {
			a.setFail(func(w http.ResponseWriter, r *http.Request) bool {
				writeError(w, 503, leafd.ESegmentUnavailable, "no range could be loaded")
				return true
			})
		}},
		{"Stopped", func(a *rangeServer) { a.Close() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := newRangeStore("order")
			a, b := newRangeServer(t, st), newRangeServer(t, st)
			c := newClient(t, a.URL, client.WithFailover(b.URL), client.WithRanges(100, 0.5))
			const workers, calls = 8, 500
			var (
				done     atomic.Int64
				wg       sync.WaitGroup
				mu       sync.Mutex
				ids      = map[int64]bool{}
				failures []error
			)
			// Each worker makes a third of its calls, waits for the
			// failure, then makes the rest: the calls after it need far
			// more IDs than the client holds, so they must fail over.
			failed := make(chan struct{})
			for range workers {
				wg.Go(func() {
					for i := range calls {
						if i == calls/3 {
							<-failed
						}
						id, err := c.Next(context.Background(), "order")
						mu.Lock()
						switch {
						case err != nil:
							failures = append(failures, err)
						case ids[id]:
							failures = append(failures, fmt.Errorf("ID %d handed out twice", id))
						default:
							ids[id] = true
						}
						mu.Unlock()
						done.Add(1)
					}
				})
			}
			waitFor(t, "a third of the calls", func() bool { return done.Load() >= workers*(calls/3) })
			tc.fail(a)
			close(failed)
			wg.Wait()
			for _, err := range failures {
				t.Error(err)
			}
			if t.Failed() {
				return
			}
			if len(ids) != workers*calls {
				t.Fatalf("%d IDs for %d calls", len(ids), workers*calls)
			}
			if b.answered.Load() == 0 {
				t.Fatal("the second server leased nothing: no failover happened")
			}
			// Later leases come from b alone.
			before := a.ranges.Load()
			for range 300 {
				mustNext(t, c, "order")
			}
			if n := a.ranges.Load() - before; n != 0 {
				t.Fatalf("after the failover %d range requests went to the failing server", n)
			}
		})
	}
}

// TestRangesRetry: a fetch that every server fails is tried again a
// bounded number of rounds with a backoff, then fails the callers waiting
// for it; a definite error (unknown_tag) is not tried again and keeps no
// state for the tag; invalid_size is the answer as it is.
func TestRangesRetry(t *testing.T) {
	t.Run("AllFail", func(t *testing.T) {
		st := newRangeStore("order")
		a, b := newRangeServer(t, st), newRangeServer(t, st)
		var down atomic.Bool
		down.Store(true)
		fail := func(w http.ResponseWriter, r *http.Request) bool {
			if !down.Load() {
				return false
			}
			writeError(w, 503, leafd.ESegmentUnavailable, "no range could be loaded")
			return true
		}
		a.setFail(fail)
		b.setFail(fail)
		c := newClient(t, a.URL, client.WithFailover(b.URL), client.WithRanges(100, 0.2))
		start := time.Now()
		_, err := c.Next(context.Background(), "order")
		if !errors.Is(err, client.ErrSegmentUnavailable) {
			t.Fatalf("Next error %v, want segment_unavailable", err)
		}
		if na, nb := a.ranges.Load(), b.ranges.Load(); na != 3 || nb != 3 {
			t.Fatalf("the servers saw %d and %d range requests, want 3 rounds over both", na, nb)
		}
		if d := time.Since(start); d < 100*time.Millisecond {
			t.Fatalf("three rounds took %v: no backoff between them", d)
		}
		// The servers are back: the next call fetches again at once (a
		// caller with no lease does not wait for the backoff).
		down.Store(false)
		if id := mustNext(t, c, "order"); id != 1 {
			t.Fatalf("Next = %d after the servers came back, want 1", id)
		}
	})

	t.Run("BackgroundBackoff", func(t *testing.T) {
		srv := newRangeServer(t, newRangeStore("order"))
		c := newClient(t, srv.URL, client.WithRanges(1000, 0.9))
		mustNext(t, c, "order") // the first lease; at 900 left the next is due
		var failing atomic.Int64
		srv.setFail(func(w http.ResponseWriter, r *http.Request) bool {
			failing.Add(1)
			writeError(w, 503, leafd.ESegmentUnavailable, "no range could be loaded")
			return true
		})
		for range 500 { // past the mark: the background fetch fails
			mustNext(t, c, "order")
		}
		waitFor(t, "the failing fetch's three rounds", func() bool { return failing.Load() >= 3 })
		time.Sleep(250 * time.Millisecond) // past the backoff after one or two failed fetches
		// 500 calls past the mark while the fetch failed made one fetch
		// (three rounds) and maybe one more after its backoff, not one per
		// call.
		if n := failing.Load(); n > 6 {
			t.Fatalf("%d range requests while failing, want at most 6: no backoff", n)
		}
		srv.setFail(nil)
		for range 499 { // the rest of the lease, and the next one by then
			mustNext(t, c, "order")
		}
		waitFor(t, "a fetch after the backoff", func() bool { return srv.answered.Load() == 2 })
		if id := mustNext(t, c, "order"); id != 1001 {
			t.Fatalf("Next = %d, want 1001 from the second lease", id)
		}
	})

	t.Run("UnknownTag", func(t *testing.T) {
		srv := newRangeServer(t, newRangeStore("order"))
		c := newClient(t, srv.URL, client.WithFailover(refusedURL(t)), client.WithRanges(100, 0.2))
		for range 2 {
			before := srv.ranges.Load()
			_, err := c.Next(context.Background(), "nope")
			if !errors.Is(err, client.ErrUnknownTag) {
				t.Fatalf("Next error %v, want unknown_tag", err)
			}
			if n := srv.ranges.Load() - before; n != 1 {
				t.Fatalf("%d range requests, want 1: an unknown tag is definite", n)
			}
		}
		if _, err := c.NextN(context.Background(), "nope", 3); !errors.Is(err, client.ErrUnknownTag) {
			t.Fatalf("NextN error %v, want unknown_tag", err)
		}
		if _, err := c.Next(context.Background(), "bad/tag"); !errors.Is(err, client.ErrInvalidTag) {
			t.Fatalf("Next error %v, want invalid_tag", err)
		}
	})

	t.Run("TagDeleted", func(t *testing.T) {
		// A tag that stops existing while a lease of it is held: the fetch
		// of the next lease answers unknown_tag, and the rest of the lease
		// is dropped.
		st := newRangeStore("order")
		srv := newRangeServer(t, st)
		c := newClient(t, srv.URL, client.WithRanges(10, 0.5))
		mustNext(t, c, "order")
		st.mu.Lock()
		delete(st.next, "order")
		st.mu.Unlock()
		for want := int64(2); want <= 5; want++ { // the 5th fetches the next lease
			if id := mustNext(t, c, "order"); id != want {
				t.Fatalf("Next = %d, want %d", id, want)
			}
		}
		waitFor(t, "unknown_tag instead of the rest of the lease", func() bool {
			_, err := c.Next(context.Background(), "order")
			return errors.Is(err, client.ErrUnknownTag)
		})
		if _, err := c.Next(context.Background(), "order"); !errors.Is(err, client.ErrUnknownTag) {
			t.Fatalf("Next error %v, want unknown_tag", err)
		}
	})

	t.Run("InvalidSize", func(t *testing.T) {
		st := newRangeStore("order")
		st.maxRange = 50
		srv := newRangeServer(t, st)
		c := newClient(t, srv.URL, client.WithRanges(100, 0.2))
		_, err := c.Next(context.Background(), "order")
		if !errors.Is(err, client.ErrInvalidSize) || !strings.Contains(err.Error(), "from 1 to 50") {
			t.Fatalf("Next error %v, want invalid_size naming the limit", err)
		}
	})
}

// TestRangesUnsupported: a tag the server does not lease in ranges
// (range_unsupported) is served from the ID buffer when WithBuffer is
// given, else by a request per call; the client remembers it and asks for
// no more ranges of that tag, while other tags keep their leases.
func TestRangesUnsupported(t *testing.T) {
	for _, tc := range []struct {
		name     string
		opts     []client.Option
		requests int64 // count requests for 10 Next and one NextN(3)
	}{
		{"Plain", nil, 11},
		{"Buffered", []client.Option{client.WithBuffer(20, 0.1)}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := newRangeStore("order")
			st.opaque["secret"] = 0
			srv := newRangeServer(t, st)
			c := newClient(t, srv.URL, append([]client.Option{client.WithRanges(100, 0.2)}, tc.opts...)...)
			ctx := context.Background()
			var got []int64
			for range 10 {
				got = append(got, mustNext(t, c, "secret"))
			}
			ids, err := c.NextN(ctx, "secret", 3)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, ids...)
			if !slices.IsSorted(ids) {
				t.Fatalf("NextN(3) = %v, want them ascending", ids)
			}
			if slices.Sort(got); len(slices.Compact(got)) != 13 {
				t.Fatalf("IDs %v, want 13 distinct", got)
			}
			if n := srv.ranges.Load(); n != 1 {
				t.Fatalf("%d range requests for the opaque tag, want 1: range_unsupported is remembered", n)
			}
			if n := srv.segments.Load(); n != tc.requests {
				t.Fatalf("%d count requests, want %d", n, tc.requests)
			}
			// A sequential tag of the same client is leased.
			if id := mustNext(t, c, "order"); id != 1 {
				t.Fatalf("Next(order) = %d, want 1", id)
			}
			if n := srv.ranges.Load(); n != 2 {
				t.Fatalf("%d range requests, want 2", n)
			}
		})
	}

	t.Run("OldServer", func(t *testing.T) {
		restore := client.SetRangeProbeAfter(200 * time.Millisecond)
		defer restore()
		srv := newRangeServer(t, newRangeStore("order"))
		srv.mu.Lock()
		srv.noRoute = true
		srv.mu.Unlock()
		c := newClient(t, srv.URL, client.WithRanges(100, 0.2))
		for want := int64(1); want <= 5; want++ {
			if id := mustNext(t, c, "order"); id != want {
				t.Fatalf("Next = %d, want %d", id, want)
			}
		}
		if r, s := srv.ranges.Load(), srv.segments.Load(); r != 1 || s != 5 {
			t.Fatalf("%d range and %d count requests, want 1 and 5", r, s)
		}
		// The server learns ranges; after the probe interval the client
		// leases again.
		srv.mu.Lock()
		srv.noRoute = false
		srv.mu.Unlock()
		time.Sleep(250 * time.Millisecond)
		if id := mustNext(t, c, "order"); id != 6 {
			t.Fatalf("Next = %d, want 6", id)
		}
		if id := mustNext(t, c, "order"); id != 7 {
			t.Fatalf("Next = %d, want 7", id)
		}
		if r, s := srv.ranges.Load(), srv.segments.Load(); r != 2 || s != 5 {
			t.Fatalf("%d range and %d count requests, want 2 and 5", r, s)
		}
	})
}

// TestRangesContextDeadline: a caller that finds both leases empty waits
// for the fetch until its context ends, and returns then with the
// context's error, whether the server hangs or is held; the fetch goes on
// for the next callers.
func TestRangesContextDeadline(t *testing.T) {
	t.Run("Hanging", func(t *testing.T) {
		c, err := client.New(refusedURL(t), client.WithFailover(hangingServer(t)), client.WithRanges(100, 0.2))
		if err != nil {
			t.Fatal(err)
		}
		for name, call := range map[string]func(context.Context) error{
			"Next":  func(ctx context.Context) error { _, err := c.Next(ctx, "order"); return err },
			"NextN": func(ctx context.Context) error { _, err := c.NextN(ctx, "order", 5); return err },
		} {
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			start := time.Now()
			err := call(ctx)
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("%s: error %v, want the context's deadline", name, err)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("%s returned after %v", name, d)
			}
		}
		closed := make(chan struct{})
		go func() { c.Close(); close(closed) }()
		select {
		case <-closed:
		case <-time.After(5 * time.Second):
			t.Fatal("Close waited for a fetch stuck on a server that does not answer")
		}
	})

	t.Run("Held", func(t *testing.T) {
		srv := newRangeServer(t, newRangeStore("order"))
		c := newClient(t, srv.URL, client.WithRanges(10, 0))
		for range 9 {
			mustNext(t, c, "order")
		}
		release := srv.hold()
		defer release()
		mustNext(t, c, "order") // the 10th starts the next fetch, held
		waitFor(t, "the fetch of the second lease", func() bool { return srv.ranges.Load() == 2 })
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		_, err := c.Next(ctx, "order")
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Next error %v, want the context's deadline", err)
		}
		release()
		if id := mustNext(t, c, "order"); id != 11 {
			t.Fatalf("Next = %d, want 11 from the fetch that went on", id)
		}
		if n := srv.ranges.Load(); n != 2 {
			t.Fatalf("%d range requests, want 2: the caller that gave up started none", n)
		}
	})
}

// TestRangesCloseDuringRefill: Close while a fetch is in flight cancels
// it, wakes the callers waiting for it with ErrClosed, drops the lease
// held, and makes every later call ErrClosed without a request.
func TestRangesCloseDuringRefill(t *testing.T) {
	srv := newRangeServer(t, newRangeStore("order"))
	c, err := client.New(srv.URL, client.WithRanges(10, 0.5))
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		mustNext(t, c, "order")
	}
	// The second fetch comes due as the lease passes half (a claim of 5
	// or 6) and starts in the background: hold the server first, so that
	// the fetch cannot be answered before the hold whatever the timing.
	release := srv.hold()
	defer release()
	mustNext(t, c, "order") // 5
	mustNext(t, c, "order") // 6
	waitFor(t, "the held fetch", func() bool { return srv.ranges.Load() == 2 })
	for range 4 {
		mustNext(t, c, "order") // 7..10
	}
	waiting := make(chan error, 3)
	for range 3 {
		go func() {
			_, err := c.Next(context.Background(), "order")
			waiting <- err
		}()
	}
	waitFor(t, "three callers waiting", func() bool { return waitingForLease() == 3 })
	closed := make(chan struct{})
	go func() { c.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return while a fetch was held")
	}
	for range 3 {
		if err := <-waiting; !errors.Is(err, client.ErrClosed) {
			t.Fatalf("a waiting caller got %v, want ErrClosed", err)
		}
	}
	requests := srv.ranges.Load()
	if _, err := c.Next(context.Background(), "order"); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("Next after Close: %v", err)
	}
	if _, err := c.NextN(context.Background(), "order", 3); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("NextN after Close: %v", err)
	}
	if _, err := c.Next(context.Background(), "pay"); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("Next of a new tag after Close: %v", err)
	}
	release()
	if n := srv.ranges.Load(); n != requests {
		t.Fatalf("%d range requests after Close", n-requests)
	}
	if n := srv.answered.Load(); n != 1 {
		t.Fatalf("%d ranges answered, want 1: Close should have cancelled the held fetch", n)
	}
}

// TestRangesCloseDropsLeases: the IDs of the leases a client holds at
// Close are never handed out: the next client starts past them.
func TestRangesCloseDropsLeases(t *testing.T) {
	srv := newRangeServer(t, newRangeStore("order"))
	c := newClient(t, srv.URL, client.WithRanges(10, 0.5))
	for range 6 {
		mustNext(t, c, "order") // 1..6; the next lease, 11..20, is fetched
	}
	waitFor(t, "the second lease", func() bool { return srv.answered.Load() == 2 })
	c.Close()
	if _, err := c.Next(context.Background(), "order"); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("Next after Close: %v", err)
	}
	if id := mustNext(t, newClient(t, srv.URL, client.WithRanges(10, 0.5)), "order"); id != 21 {
		t.Fatalf("the next client got %d, want 21 (7..20 were dropped)", id)
	}
}

// TestRangesCloseConcurrent: Close in the middle of many goroutines'
// calls: every call gets an ID or ErrClosed, no ID twice, and Close
// returns.
func TestRangesCloseConcurrent(t *testing.T) {
	srv := newRangeServer(t, newRangeStore("order"))
	c, err := client.New(srv.URL, client.WithRanges(5, 0.4))
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		seen  = map[int64]bool{}
		bad   []error
		calls atomic.Int64
	)
	for range 8 {
		wg.Go(func() {
			for {
				id, err := c.Next(context.Background(), "order")
				calls.Add(1)
				mu.Lock()
				switch {
				case errors.Is(err, client.ErrClosed):
					mu.Unlock()
					return
				case err != nil:
					bad = append(bad, err)
				case seen[id]:
					bad = append(bad, fmt.Errorf("ID %d twice", id))
				default:
					seen[id] = true
				}
				mu.Unlock()
			}
		})
	}
	waitFor(t, "some calls", func() bool { return calls.Load() > 2000 })
	c.Close()
	wg.Wait()
	for _, err := range bad {
		t.Error(err)
	}
}

// waitingForLease counts goroutines blocked in a select inside the
// client's wait for a lease, read from the goroutine dump.
func waitingForLease() int {
	return countBlocked("leafd/client.(*Client).awaitLease(")
}

// TestStrictRanges: a range answer is taken only if it is exactly what
// leafd writes; anything else is an error and no ID is handed out.
func TestStrictRanges(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		ok         bool
		first      int64
	}{
		{"Valid", `{"tag":"order","start":"1001","end":"1011"}`, true, 1001},
		{"Shorter", `{"tag":"order","start":"1001","end":"1002"}`, false, 0},
		{"LastID", `{"tag":"order","start":"9223372036854775798","end":"9223372036854775808"}`, true, 9223372036854775798},
		{"Longer", `{"tag":"order","start":"1001","end":"1012"}`, false, 0},
		{"Empty", `{"tag":"order","start":"1001","end":"1001"}`, false, 0},
		{"Backwards", `{"tag":"order","start":"1001","end":"1000"}`, false, 0},
		{"Numbers", `{"tag":"order","start":1001,"end":1011}`, false, 0},
		{"Zero", `{"tag":"order","start":"0","end":"10"}`, false, 0},
		{"LeadingZero", `{"tag":"order","start":"01","end":"10"}`, false, 0},
		{"Sign", `{"tag":"order","start":"+1","end":"10"}`, false, 0},
		{"EndPastMax", `{"tag":"order","start":"9223372036854775800","end":"9223372036854775809"}`, false, 0},
		{"OtherTag", `{"tag":"pay","start":"1","end":"11"}`, false, 0},
		{"NoTag", `{"start":"1","end":"11"}`, false, 0},
		{"NoEnd", `{"tag":"order","start":"1"}`, false, 0},
		{"IDList", `{"tag":"order","ids":["1"]}`, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newRangeServer(t, newRangeStore())
			srv.setFail(func(w http.ResponseWriter, r *http.Request) bool {
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprint(w, tc.body)
				return true
			})
			c := newClient(t, srv.URL, client.WithRanges(10, 0))
			id, err := c.Next(context.Background(), "order")
			if tc.ok {
				if err != nil || id != tc.first {
					t.Fatalf("Next = %d, %v; want %d", id, err, tc.first)
				}
				return
			}
			if err == nil || client.Code(err) != "" {
				t.Fatalf("Next = %d, %v; want a malformed-answer error", id, err)
			}
		})
	}
}

// TestRangesQuery: the fetch is GET /segment/{tag}/range?size=N&expiring=true
// (the client honours valid_ms) with Accept: application/json, under the
// base URL's path prefix.
func TestRangesQuery(t *testing.T) {
	var (
		mu  sync.Mutex
		got []string
	)
	srv := newRangeServer(t, newRangeStore("order"))
	srv.setFail(func(w http.ResponseWriter, r *http.Request) bool {
		mu.Lock()
		got = append(got, r.URL.String()+" "+r.Header.Get("Accept"))
		mu.Unlock()
		return false
	})
	mux := http.NewServeMux()
	mux.Handle("/leafd/", http.StripPrefix("/leafd", srv.Config.Handler))
	prefixed := newRangeServerFor(t, mux)
	c := newClient(t, prefixed+"/leafd/", client.WithRanges(1234, 0.2))
	if id := mustNext(t, c, "order"); id != 1 {
		t.Fatalf("Next = %d, want 1", id)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0] != "/segment/order/range?size=1234&expiring=true application/json" {
		t.Fatalf("requests %q", got)
	}
	u, _ := url.Parse(strings.Fields(got[0])[0])
	if u.Query().Get("size") != "1234" || u.Query().Get("expiring") != "true" {
		t.Fatalf("size %q, expiring %q", u.Query().Get("size"), u.Query().Get("expiring"))
	}
}

// TestRangesNewRefuses: New names a bad range size or refill mark.
func TestRangesNewRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  client.Option
		want string
	}{
		{"SizeZero", client.WithRanges(0, 0.5), "range size 0 is below 1"},
		{"RefillAtOne", client.WithRanges(10, 1), "outside [0, 1)"},
		{"RefillAtNegative", client.WithRanges(10, -0.1), "outside [0, 1)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := client.New("http://a", tc.opt)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New = %v, %v; want an error with %q", c, err, tc.want)
			}
		})
	}
}

// TestRangesTagInAnotherString: a tag named by a new string on every call
// (read from a request, say), not by a constant, is served from the same
// lease.
func TestRangesTagInAnotherString(t *testing.T) {
	srv := newRangeServer(t, newRangeStore("order"))
	c := newClient(t, srv.URL, client.WithRanges(100, 0.2))
	for want := int64(1); want <= 50; want++ {
		tag := string([]byte("order")) // a new string each time
		if id := mustNext(t, c, tag); id != want {
			t.Fatalf("Next = %d, want %d", id, want)
		}
		if want%2 == 0 {
			mustNext(t, c, "order") // and the constant in between
			want++
		}
	}
	if n := srv.ranges.Load(); n != 1 {
		t.Fatalf("%d range requests, want 1", n)
	}
}

// TestLeaseIsOneCacheLine: a lease fills its 64-byte size class, so that
// the counter and the bounds a claim reads share one cache line.
func TestLeaseIsOneCacheLine(t *testing.T) {
	if client.LeaseSize != 64 {
		t.Fatalf("a lease is %d bytes, want 64", client.LeaseSize)
	}
}
