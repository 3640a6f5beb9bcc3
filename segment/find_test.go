package segment_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/segment"
)

// listedAllocator is an allocator over s that has read the tag list once
// and is not started: no background refresh can list a tag behind the
// test's back, so a tag created afterwards is served only through a lookup.
func listedAllocator(t *testing.T, s segment.Store, cfg segment.Config) *segment.Allocator {
	t.Helper()
	a, err := segment.New(s, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	if err := a.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	return a
}

// lookupStore counts the lookups of tags a real store answers, and can
// slow them down or fail them like an unreachable database.
type lookupStore struct {
	segment.Store
	lookups atomic.Int64
	delay   time.Duration
	down    atomic.Bool
}

func (s *lookupStore) LookupTag(ctx context.Context, name string) (leafd.Tag, error) {
	s.lookups.Add(1)
	time.Sleep(s.delay)
	if s.down.Load() {
		return leafd.Tag{}, leafd.Errorf(leafd.EStoreUnavailable, "injected outage")
	}
	return s.Store.LookupTag(ctx, name)
}

// A tag inserted by SQL after the server read its list, or created through
// another server, is served at the first request for it, not at the next
// tag refresh (an hour away here).
func TestCreatedElsewhereServedAtOnce(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, db *database) {
		a := listedAllocator(t, db.store(t), fastConfig())
		ctx := context.Background()
		db.addTag(t, "by_sql", 1, 10)
		if id, err := a.Next(ctx, "by_sql"); err != nil || id != 1 {
			t.Fatalf("a tag inserted by SQL: %d, %v; want 1 at once", id, err)
		}
		other := db.store(t)
		if _, err := other.CreateTag(ctx, tagRow("by_other", 10)); err != nil {
			t.Fatal(err)
		}
		if id, err := a.Next(ctx, "by_other"); err != nil || id != 1 {
			t.Fatalf("a tag created through another server: %d, %v; want 1 at once", id, err)
		}
		// Found by lookup, then kept by the next refresh.
		if err := a.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		if id, err := a.Next(ctx, "by_sql"); err != nil || id != 2 {
			t.Fatalf("after a refresh: %d, %v; want 2", id, err)
		}
	})
}

// Many requests at once for one tag that is not in memory cost one lookup,
// and every one of them gets a distinct ID.
func TestLookupSingleFlight(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, db *database) {
		s := &lookupStore{Store: db.store(t), delay: 50 * time.Millisecond}
		a := listedAllocator(t, s, fastConfig())
		db.addTag(t, "new", 1, 1000)
		var (
			wg  sync.WaitGroup
			mu  sync.Mutex
			ids = map[int64]bool{}
		)
		for range 50 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				id, err := a.Next(context.Background(), "new")
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					t.Errorf("Next: %v", err)
				} else if ids[id] {
					t.Errorf("ID %d issued twice", id)
				}
				ids[id] = true
			}()
		}
		wg.Wait()
		if n := s.lookups.Load(); n != 1 {
			t.Fatalf("50 concurrent requests for one new tag made %d lookups, want 1", n)
		}
	})
}

// A flood of made-up tag names costs the database a handful of queries,
// never one per request: every request is answered unknown_tag, and the
// answers never tell the user to create a tag they have not checked for.
func TestUnknownTagFloodBounded(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, db *database) {
		s := &lookupStore{Store: db.store(t)}
		cfg := fastConfig()
		a := listedAllocator(t, s, cfg)
		const requests, workers = 3000, 16
		start := time.Now()
		var (
			wg                sync.WaitGroup
			checked, unasked  atomic.Int64
			next              atomic.Int64
			unexpectedMessage atomic.Value
		)
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := next.Add(1)
					if i > requests {
						return
					}
					_, err := a.Next(context.Background(), fmt.Sprintf("made_up_%d", i))
					if code(err) != leafd.EUnknownTag {
						t.Errorf("made-up tag %d: %v, want unknown_tag", i, err)
						return
					}
					switch msg := leafd.ErrorMessage(err); {
					case strings.Contains(msg, "not defined in the store"):
						checked.Add(1)
					case strings.Contains(msg, "retry in a second") && !strings.Contains(msg, "create it"):
						unasked.Add(1)
					default:
						unexpectedMessage.Store(msg)
					}
				}
			}()
		}
		wg.Wait()
		elapsed := time.Since(start)
		if msg := unexpectedMessage.Load(); msg != nil {
			t.Errorf("unexpected unknown_tag message: %s", msg)
		}
		// The bucket holds 5 and refills at 5 per second.
		limit := int64(5 + 5*elapsed.Seconds() + 1)
		n := s.lookups.Load()
		t.Logf("%d requests for distinct made-up tags in %v: %d lookups (%d answered after a lookup, %d from memory)",
			requests, elapsed, n, checked.Load(), unasked.Load())
		if n > limit || checked.Load() != n {
			t.Fatalf("%d lookups for %d made-up tags in %v; want at most %d, each answering one request", n, requests, elapsed, limit)
		}
		if n == 0 {
			t.Fatal("no made-up tag was looked up at all")
		}
	})
}

// A name the store did not have is answered from memory for MissTTL, then
// looked up again: a tag created meanwhile is served once that time passed.
func TestLookupNegativeCache(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, db *database) {
		s := &lookupStore{Store: db.store(t)}
		clock := newFakeClock()
		cfg := fastConfig()
		cfg.Now = clock.Now
		a := listedAllocator(t, s, cfg)
		ctx := context.Background()
		for range 3 {
			if _, err := a.Next(ctx, "ghost"); code(err) != leafd.EUnknownTag {
				t.Fatalf("ghost: %v, want unknown_tag", err)
			}
		}
		if n := s.lookups.Load(); n != 1 {
			t.Fatalf("3 requests for one absent name within MissTTL made %d lookups, want 1", n)
		}
		db.addTag(t, "ghost", 1, 10)
		_, err := a.Next(ctx, "ghost")
		if code(err) != leafd.EUnknownTag {
			t.Fatalf("ghost created within MissTTL of its lookup: %v, want unknown_tag from memory", err)
		}
		// The tag exists now: the answer from memory says when the store
		// was asked and to retry, before it says how to create the tag.
		msg := leafd.ErrorMessage(err)
		retry, create := strings.Index(msg, "if it was just created, retry in a moment"), strings.Index(msg, "create it with")
		if !strings.Contains(msg, "looked up less than 1s ago") || retry < 0 || create < retry {
			t.Errorf("unknown_tag from the negative cache says %q; want when it was looked up, then to retry, before how to create it", msg)
		}
		clock.Advance(time.Second)
		if id, err := a.Next(ctx, "ghost"); err != nil || id != 1 {
			t.Fatalf("ghost once MissTTL passed: %d, %v; want 1", id, err)
		}
		if n := s.lookups.Load(); n != 2 {
			t.Fatalf("lookups = %d, want 2", n)
		}
	})
}

// While the store cannot be asked, a tag that is not in memory is answered
// segment_unavailable, not unknown_tag: it may well exist.
func TestLookupStoreDown(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, db *database) {
		s := &lookupStore{Store: db.store(t)}
		a := listedAllocator(t, s, fastConfig())
		db.addTag(t, "new", 1, 10)
		s.down.Store(true)
		_, err := a.Next(context.Background(), "new")
		if code(err) != leafd.ESegmentUnavailable {
			t.Fatalf("lookup while the store is down: %v, want segment_unavailable", err)
		}
		s.down.Store(false)
		if id, err := a.Next(context.Background(), "new"); err != nil || id != 1 {
			t.Fatalf("once the store answers: %d, %v; want 1", id, err)
		}
	})
}
