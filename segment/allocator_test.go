package segment_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/segment"
)

// Several allocators, each with its own connection pool as separate servers
// have, hammer several tags of one database at once. No ID may be issued
// twice, each caller must see strictly increasing IDs per tag, and every ID
// must lie inside a range the database handed to that allocator.
func TestNoDuplicatesAcrossAllocators(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, db *database) {
		tags := map[string]int64{"order": 7, "pay": 50, "user": 1}
		for name, step := range tags {
			db.addTag(t, name, 1, step)
		}
		const servers, clients, perClient = 4, 6, 300
		type issued struct {
			server int
			ids    map[string][]int64
		}
		stores := make([]*recordingStore, servers)
		allocs := make([]*segment.Allocator, servers)
		handles := make([]map[string]*segment.Handle, servers)
		for i := range servers {
			stores[i] = record(db.store(t))
			cfg := fastConfig()
			cfg.MaxStep = 200 // keep ranges small: many loads, many switches
			// The test is about duplicates, not latency: on a machine
			// loaded by the race detector and other tests, four pools
			// taking turns at one SQLite file may need more than the
			// usual 2s to load a range while requests wait.
			cfg.WaitTimeout = time.Minute
			allocs[i] = newAllocator(t, stores[i], cfg)
			handles[i] = map[string]*segment.Handle{}
			for name := range tags {
				h, err := allocs[i].Handle(name)
				if err != nil {
					t.Fatal(err)
				}
				handles[i][name] = h
			}
		}
		results := make(chan issued, servers*clients)
		var wg sync.WaitGroup
		for s := range servers {
			for c := range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(uint64(s), uint64(c)))
					got := map[string][]int64{}
					var buf []segment.Range
					for range perClient {
						tag := []string{"order", "pay", "user"}[rng.IntN(3)]
						if rng.IntN(4) == 0 {
							var err error
							buf, err = allocs[s].NextN(context.Background(), tag, 1+rng.IntN(40), buf[:0])
							if err != nil {
								t.Errorf("server %d NextN(%s): %v", s, tag, err)
								return
							}
							for _, r := range buf {
								for id := r.Start; id < r.End; id++ {
									got[tag] = append(got[tag], id)
								}
							}
							continue
						}
						// By name, or through a Handle: one sequence either way.
						next := allocs[s].Next
						if rng.IntN(2) == 0 {
							next = func(ctx context.Context, _ string) (int64, error) { return handles[s][tag].Next(ctx) }
						}
						id, err := next(context.Background(), tag)
						if err != nil {
							t.Errorf("server %d Next(%s): %v", s, tag, err)
							return
						}
						got[tag] = append(got[tag], id)
					}
					results <- issued{server: s, ids: got}
				}()
			}
		}
		wg.Wait()
		close(results)
		seen := map[string]map[int64]int{}
		total := 0
		for res := range results {
			for tag, ids := range res.ids {
				if seen[tag] == nil {
					seen[tag] = map[int64]int{}
				}
				for i, id := range ids {
					if i > 0 && id <= ids[i-1] {
						t.Fatalf("server %d tag %s: ID %d after %d: not strictly increasing", res.server, tag, id, ids[i-1])
					}
					if prev, dup := seen[tag][id]; dup {
						t.Fatalf("tag %s: ID %d issued by server %d and server %d", tag, id, prev, res.server)
					}
					if id < 1 || !stores[res.server].owned(tag, id) {
						t.Fatalf("tag %s: ID %d from server %d lies outside every range the database gave it", tag, id, res.server)
					}
					seen[tag][id] = res.server
					total++
				}
			}
		}
		if total < servers*clients*perClient {
			t.Fatalf("only %d IDs issued", total)
		}
	})
}

func TestFirstRangeFollowsLeafArithmetic(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, db *database) {
		db.addTag(t, "order", 1, 1000)
		db.addTag(t, "legacy", -50, 10)
		a := newAllocator(t, db.store(t), fastConfig())
		for _, tc := range []struct {
			tag  string
			want []int64
		}{
			{"order", []int64{1, 2, 3}},
			{"legacy", []int64{1, 2, 3}},
		} {
			for _, want := range tc.want {
				got, err := a.Next(context.Background(), tc.tag)
				if err != nil || got != want {
					t.Fatalf("Next(%s) = %d, %v; want %d", tc.tag, got, err, want)
				}
			}
		}
	})
}

// A batch larger than the step spans several ranges and still comes back
// ascending, unique and of exactly the size asked for.
func TestBatchSpansBuffers(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, db *database) {
		db.addTag(t, "small", 1, 10)
		cfg := fastConfig()
		cfg.MaxStep = 10
		a := newAllocator(t, db.store(t), cfg)
		if _, err := a.Next(context.Background(), "small"); err != nil {
			t.Fatal(err)
		}
		rs, err := a.NextN(context.Background(), "small", 25, nil)
		if err != nil {
			t.Fatal(err)
		}
		var ids []int64
		for _, r := range rs {
			for id := r.Start; id < r.End; id++ {
				ids = append(ids, id)
			}
		}
		if len(ids) != 25 || !slices.IsSorted(ids) || len(slices.Compact(slices.Clone(ids))) != 25 {
			t.Fatalf("NextN(25) = %v", ids)
		}
		if ids[0] != 2 || ids[24] != 26 {
			t.Fatalf("NextN(25) = %d..%d, want 2..26", ids[0], ids[24])
		}
		for _, n := range []int{0, -1, 10001} {
			if _, err := a.NextN(context.Background(), "small", n, nil); code(err) != leafd.EInvalidCount {
				t.Errorf("NextN(%d): %v, want invalid_count", n, err)
			}
		}
	})
}

// A tag inserted by SQL is served after a refresh; a deleted one stops, and
// its buffered IDs are dropped.
func TestTagRefresh(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, db *database) {
		db.addTag(t, "order", 1, 100)
		cfg := fastConfig()
		cfg.TagRefresh = 20 * time.Millisecond
		a := newAllocator(t, db.store(t), cfg)
		if _, err := a.Next(context.Background(), "fresh"); code(err) != leafd.EUnknownTag {
			t.Fatalf("Next(fresh) before insert: %v, want unknown_tag", err)
		}
		db.addTag(t, "fresh", 1, 100)
		eventually(t, func() bool {
			_, err := a.Next(context.Background(), "fresh")
			return err == nil
		}, "a tag inserted by SQL is served after tag_refresh")

		db.exec(t, "DELETE FROM leaf_alloc WHERE biz_tag = ?", "fresh")
		eventually(t, func() bool {
			_, err := a.Next(context.Background(), "fresh")
			return code(err) == leafd.EUnknownTag
		}, "a tag deleted by SQL stops being served")

		// A store that suddenly lists no tags at all is not believed.
		db.exec(t, "DELETE FROM leaf_alloc")
		if err := a.Refresh(context.Background()); err != nil {
			t.Fatal(err)
		}
		if _, ok := a.TagState("order"); !ok {
			t.Fatal("an empty tag list dropped every tag")
		}
	})
}

// The step grows under fast consumption and shrinks when it slows, never
// leaving [table step, max_step].
func TestStepAdapts(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, db *database) {
		const table, maxStep = 10, 2000
		db.addTag(t, "t", 1, table)
		clock := newFakeClock()
		cfg := fastConfig()
		cfg.Now = clock.Now
		cfg.MaxStep = maxStep
		cfg.RefillMin, cfg.RefillMax = time.Second, 2*time.Second
		a := newAllocator(t, db.store(t), cfg)

		// drive takes n IDs, moving the clock by gap before each.
		var lastLoads int64
		drive := func(n int, gap time.Duration) (steps []int64) {
			for range n {
				clock.Advance(gap)
				if _, err := a.Next(context.Background(), "t"); err != nil {
					t.Fatal(err)
				}
				st, _ := a.TagState("t")
				if st.Loads != lastLoads {
					lastLoads = st.Loads
					steps = append(steps, st.Step)
				}
				if st.Step < table || st.Step > maxStep {
					t.Fatalf("step %d outside [%d, %d]", st.Step, table, maxStep)
				}
			}
			return steps
		}
		// 1000 IDs/s: a range should hold ~1500.
		fast := drive(6000, time.Millisecond)
		if len(fast) < 2 || fast[len(fast)-1] < 1000 {
			t.Fatalf("steps under fast consumption %v: did not grow toward 1500", fast)
		}
		// 10 IDs/s: a range should hold ~15. It takes the two buffered
		// ranges and a few shrinking ones to get there.
		slow := drive(4000, 100*time.Millisecond)
		if len(slow) < 2 || slow[len(slow)-1] > 40 {
			t.Fatalf("steps under slow consumption %v: did not shrink", slow)
		}
	})
}

// Requests that find both buffers empty wait for the one load in flight
// instead of each starting their own, and the load is not repeated.
func TestOneLoadInFlight(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, db *database) {
		db.addTag(t, "t", 1, 100_000)
		s := record(db.store(t))
		s.set(func(r *recordingStore) { r.delay = 100 * time.Millisecond })
		a := newAllocator(t, s, fastConfig())
		var wg sync.WaitGroup
		var failed atomic.Int64
		for range 50 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := a.Next(context.Background(), "t"); err != nil {
					failed.Add(1)
				}
			}()
		}
		wg.Wait()
		if failed.Load() != 0 {
			t.Fatalf("%d requests failed", failed.Load())
		}
		if n := s.allocations(); n != 1 {
			t.Fatalf("50 waiting requests caused %d range loads, want 1", n)
		}
		if st, _ := a.TagState("t"); st.Waits == 0 {
			t.Fatal("waiting requests were not counted")
		}
	})
}

// While the store is down, IDs keep flowing from the buffers. Once they run
// out, requests fail with segment_unavailable within wait_timeout, and the
// allocator recovers by itself when the store answers again.
func TestStoreOutage(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, db *database) {
		db.addTag(t, "t", 1, 100)
		s := record(db.store(t))
		cfg := fastConfig()
		cfg.WaitTimeout = 100 * time.Millisecond
		cfg.MaxStep = 100
		a := newAllocator(t, s, cfg)
		// Load both buffers: 200 IDs buffered.
		if _, err := a.NextN(context.Background(), "t", 20, nil); err != nil {
			t.Fatal(err)
		}
		eventually(t, func() bool { st, _ := a.TagState("t"); return st.Buffers[1-st.Current].Ready }, "next buffer loaded")

		s.set(func(r *recordingStore) { r.down = true })
		// A short outage: what is buffered is served without a failure.
		// 180 IDs are left; 150 of them are taken, so 30 stay buffered.
		for i := range 150 {
			if _, err := a.Next(context.Background(), "t"); err != nil {
				t.Fatalf("request %d during a short outage: %v", i, err)
			}
		}
		if err := a.Ready(); err != nil {
			t.Fatalf("Ready with IDs buffered: %v", err)
		}
		// A long outage: the buffers run dry.
		start := time.Now()
		var err error
		for range 100 {
			if _, err = a.Next(context.Background(), "t"); err != nil {
				break
			}
		}
		if code(err) != leafd.ESegmentUnavailable {
			t.Fatalf("after the buffers ran out: %v, want segment_unavailable", err)
		}
		// Bounded by wait_timeout, with room for a machine loaded by the
		// race detector and other tests.
		if waited := time.Since(start); waited > 5*time.Second {
			t.Fatalf("failing took %v, wait_timeout is %v", waited, cfg.WaitTimeout)
		}
		if a.Ready() == nil {
			t.Fatal("Ready while a requested tag is empty and cannot load")
		}
		s.set(func(r *recordingStore) { r.down = false })
		eventually(t, func() bool {
			_, err := a.Next(context.Background(), "t")
			return err == nil
		}, "recovery after the outage")
		if err := a.Ready(); err != nil {
			t.Fatalf("Ready after recovery: %v", err)
		}
	})
}

// The tag's next range would pass 2^63-1: the error is tag_exhausted, and no
// ID past the end is ever issued.
func TestTagExhausted(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, db *database) {
		db.addTag(t, "end", leafd.MaxID-15, 10)
		cfg := fastConfig()
		cfg.MaxStep = 10
		a := newAllocator(t, db.store(t), cfg)
		var last int64
		for {
			id, err := a.Next(context.Background(), "end")
			if err != nil {
				if code(err) != leafd.ETagExhausted {
					t.Fatalf("after %d: %v, want tag_exhausted", last, err)
				}
				break
			}
			if id <= last {
				t.Fatalf("ID %d after %d", id, last)
			}
			last = id
		}
		if last != leafd.MaxID-6 {
			t.Fatalf("last ID %d, want %d (the last full range)", last, leafd.MaxID-6)
		}
		// An exhausted tag is the tag's end, not the server's: the server
		// stays ready for its other tags.
		if err := a.Ready(); err != nil {
			t.Fatalf("Ready with one tag exhausted: %v", err)
		}
	})
}

func TestUnknownAndInvalidTags(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, db *database) {
		db.addTag(t, "order", 1, 10)
		a := newAllocator(t, db.store(t), fastConfig())
		for _, tc := range []struct{ tag, code string }{
			{"nope", leafd.EUnknownTag},
			{"bad/tag", leafd.EInvalidTag},
			{"", leafd.EInvalidTag},
		} {
			if _, err := a.Next(context.Background(), tc.tag); code(err) != tc.code {
				t.Errorf("Next(%q) = %v, want %s", tc.tag, err, tc.code)
			}
		}
	})
}

// Before the tag list was ever read (the store is down at start), requests
// wait up to wait_timeout and get segment_unavailable, not unknown_tag.
func TestStoreDownAtStart(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, db *database) {
		db.addTag(t, "order", 1, 10)
		s := &listFailingStore{Store: db.store(t)}
		s.failing.Store(true)
		cfg := fastConfig()
		cfg.WaitTimeout = 50 * time.Millisecond
		a, err := segment.New(s, cfg)
		if err != nil {
			t.Fatal(err)
		}
		a.Start()
		defer a.Close()
		if _, err := a.Next(context.Background(), "order"); code(err) != leafd.ESegmentUnavailable {
			t.Fatalf("Next before the tag list: %v, want segment_unavailable", err)
		}
		if a.Ready() == nil {
			t.Fatal("Ready before the tag list was read")
		}
		s.failing.Store(false)
		eventually(t, func() bool {
			_, err := a.Next(context.Background(), "order")
			return err == nil
		}, "serving once the store answers")
	})
}

type listFailingStore struct {
	segment.Store
	failing atomic.Bool
}

func (s *listFailingStore) ListTags(ctx context.Context) ([]leafd.Tag, error) {
	if s.failing.Load() {
		return nil, fmt.Errorf("injected: database unreachable")
	}
	return s.Store.ListTags(ctx)
}

func eventually(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A tag created through this server is served at once, without a lookup or
// the next refresh; a table step changed through it applies to the next
// range load.
func TestUpsertServesAtOnce(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, db *database) {
		s := db.store(t)
		// Not started: a started allocator reads the tag list at once in
		// the background, which could list the tag before Upsert does.
		a, err := segment.New(s, fastConfig())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Close() })
		ctx := context.Background()
		if err := a.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := s.CreateTag(ctx, tagRow("new", 10)); err != nil {
			t.Fatal(err)
		}
		a.Upsert(leafd.Tag{Name: "new", Step: 10})
		if id, err := a.Next(ctx, "new"); err != nil || id != 1 {
			t.Fatalf("after Upsert: %d, %v; want 1", id, err)
		}
		if err := a.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		if st, ok := a.TagState("new"); !ok || st.MinStep != 10 {
			t.Fatalf("after a refresh: %+v, %v", st, ok)
		}
		a.Upsert(leafd.Tag{Name: "new", Step: 500})
		if st, _ := a.TagState("new"); st.MinStep != 500 {
			t.Fatalf("table step after Upsert = %d, want 500", st.MinStep)
		}
	})
}
