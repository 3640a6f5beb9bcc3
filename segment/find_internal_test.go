package segment

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leafd/leafd"
)

// memStore is a store in memory, for the tests that need to hold the
// allocator's own locks (which the external tests cannot reach).
type memStore struct {
	mu      sync.Mutex
	rows    map[string]leafd.Tag
	lookups atomic.Int64
	delay   time.Duration
	// dbNow is the database's clock that AllocateIn reads: time.Now when
	// nil.
	dbNow func() time.Time
}

func (s *memStore) Allocate(_ context.Context, name string, step int64) (Allocation, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.rows[name]
	if !ok {
		return Allocation{}, leafd.Errorf(leafd.EUnknownTag, "no tag %q", name)
	}
	r.MaxID += step
	s.rows[name] = r
	return Allocation{Start: r.MaxID - step, End: r.MaxID, TableStep: r.Step}, nil
}

// AllocateIn raises a max_id below the window's floor to it and clips
// the range at its limit, as the stores of package store do.
func (s *memStore) AllocateIn(_ context.Context, name string, step int64, within func(time.Time) (Window, error)) (Allocation, error) {
	now := time.Now
	if s.dbNow != nil {
		now = s.dbNow
	}
	w, err := within(now())
	if err != nil {
		return Allocation{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.rows[name]
	if !ok {
		return Allocation{}, leafd.Errorf(leafd.EUnknownTag, "no tag %q", name)
	}
	start := max(r.MaxID, w.Floor)
	if start > w.Limit {
		return Allocation{}, ErrLaterPeriod
	}
	if start == w.Limit {
		return Allocation{}, leafd.Errorf(leafd.EPeriodExhausted, "tag %q has no number left below %d", name, w.Limit)
	}
	r.MaxID = min(start+step, w.Limit)
	s.rows[name] = r
	return Allocation{Start: start, End: r.MaxID, TableStep: r.Step}, nil
}

func (s *memStore) Ping(context.Context) error { return nil }

func (s *memStore) ListTags(context.Context) ([]leafd.Tag, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []leafd.Tag
	for _, r := range s.rows {
		out = append(out, r)
	}
	return out, nil
}

func (s *memStore) LookupTag(ctx context.Context, name string) (leafd.Tag, error) {
	s.lookups.Add(1)
	select {
	case <-time.After(s.delay):
	case <-ctx.Done():
		return leafd.Tag{}, ctx.Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.rows[name]; ok {
		return r, nil
	}
	return leafd.Tag{}, leafd.Errorf(leafd.EUnknownTag, "no tag %q", name)
}

func newMemAllocator(t *testing.T, s Store) *Allocator {
	t.Helper()
	a, err := New(s, Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), TagRefresh: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

// While a refresh holds the tag map (here: its lock held by the test), a
// lookup that found its tag cannot publish it yet; requests for the tag
// meanwhile share that lookup instead of spending the bucket on more and
// being told the tag is unknown.
func TestLookupSharedUntilAdopted(t *testing.T) {
	s := &memStore{rows: map[string]leafd.Tag{"old": {Name: "old", MaxID: 1, Step: 10}}}
	a := newMemAllocator(t, s)
	s.mu.Lock()
	s.rows["new"] = leafd.Tag{Name: "new", MaxID: 1, Step: 10}
	s.mu.Unlock()

	a.refreshMu.Lock()
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := a.Next(context.Background(), "new")
			errs <- err
		}()
		time.Sleep(5 * time.Millisecond)
	}
	a.refreshMu.Unlock()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("a request for a tag being adopted: %v", err)
		}
	}
	if n := s.lookups.Load(); n != 1 {
		t.Fatalf("20 requests for one new tag made %d lookups, want 1", n)
	}
}

// The request that starts a lookup waits no longer than its own deadline,
// and the lookup goes on for the others. It runs on synctest's fake clock:
// the store's half-second lookup takes no real time, and how long the
// request waited is exact, however loaded the machine.
func TestLookupOwnerKeepsItsDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &memStore{rows: map[string]leafd.Tag{}, delay: 500 * time.Millisecond}
		a := newMemAllocator(t, s)
		s.mu.Lock()
		s.rows["new"] = leafd.Tag{Name: "new", MaxID: 1, Step: 10} // created after the list was read
		s.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := a.Next(ctx, "new")
		if leafd.ErrorCode(err) != leafd.ESegmentUnavailable {
			t.Fatalf("a request whose deadline passed during the lookup: %v, want segment_unavailable", err)
		}
		if d := time.Since(start); d != 50*time.Millisecond {
			t.Fatalf("the request waited %v, its deadline was 50ms", d)
		}
		if id, err := a.Next(context.Background(), "new"); err != nil || id != 1 {
			t.Fatalf("the next request: %d, %v; want 1", id, err)
		}
		if d := time.Since(start); d != s.delay {
			t.Fatalf("the next request was answered %v after the first began, want %v: when the one lookup ended", d, s.delay)
		}
		if n := s.lookups.Load(); n != 1 {
			t.Fatalf("lookups = %d, want 1: the second request shares the first's", n)
		}
	})
}

// Ready pings the store at most once a second however often it is asked,
// and again once that second has passed (on synctest's fake clock, so that
// a stalled machine cannot make the first hundred calls span a second).
func TestReadyPingsAtMostOnceASecond(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &pingStore{memStore: memStore{rows: map[string]leafd.Tag{"t": {Name: "t", MaxID: 1, Step: 10}}}}
		a := newMemAllocator(t, s)
		tg := (*a.tags.Load())["t"]
		tg.loadFailed(leafd.Errorf(leafd.EStoreUnavailable, "injected"), false) // asked for, dry, failing
		for range 100 {
			if err := a.Ready(); err != nil {
				t.Fatalf("Ready with the store answering its ping: %v", err)
			}
		}
		if n := s.pings.Load(); n != 1 {
			t.Fatalf("100 calls of Ready made %d pings, want 1", n)
		}
		time.Sleep(time.Second)
		if err := a.Ready(); err != nil {
			t.Fatalf("Ready a second later: %v", err)
		}
		if n := s.pings.Load(); n != 2 {
			t.Fatalf("Ready a second after the first ping made %d pings in all, want 2", n)
		}
	})
}

type pingStore struct {
	memStore
	pings atomic.Int64
}

func (s *pingStore) Ping(context.Context) error {
	s.pings.Add(1)
	return nil
}
