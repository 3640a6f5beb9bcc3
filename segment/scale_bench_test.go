package segment_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/segment"
	"github.com/leafd/leafd/store"
)

// The cost of many tags: memory per tag, the periodic re-read of the tag
// list, and start-up, at the 10,000 tags a deployment must hold. Each
// benchmark reports its own unit with b.ReportMetric; the set-up (filling
// the table) is outside the timer, so that CI's -benchtime 100x stays short.
//
// LEAFD_BENCH_LARGE=1 adds 100,000 tags to the refresh benchmarks; it is
// off by default because filling MySQL with them takes several seconds.

// scaleTags is the number of tags a deployment must hold.
const scaleTags = 10_000

// scaleSizes returns the table sizes the refresh benchmarks run at.
func scaleSizes() []int {
	if os.Getenv("LEAFD_BENCH_LARGE") == "1" {
		return []int{scaleTags, 100_000}
	}
	return []int{scaleTags}
}

// scaleName is the name of the i-th tag of a scale table.
func scaleName(i int) string { return fmt.Sprintf("scale%06d", i) }

// memStore is a segment.Store held in memory: it hands out consecutive
// ranges of any tag it lists, with no database under it, so that what the
// allocator itself keeps per tag can be measured alone.
type memStore struct {
	mu     sync.Mutex
	names  []string
	maxIDs map[string]int64
	step   int64
}

func newMemStore(n int, step int64) *memStore {
	s := &memStore{maxIDs: make(map[string]int64, n), step: step}
	for i := range n {
		name := scaleName(i)
		s.names = append(s.names, name)
		s.maxIDs[name] = 1
	}
	return s
}

func (s *memStore) Allocate(_ context.Context, tag string, step int64) (segment.Allocation, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	maxID, ok := s.maxIDs[tag]
	if !ok {
		return segment.Allocation{}, leafd.Errorf(leafd.EUnknownTag, "tag %q is not defined", tag)
	}
	s.maxIDs[tag] = maxID + step
	return segment.Allocation{Start: maxID, End: maxID + step, TableStep: s.step}, nil
}

// AllocateIn is not needed: the scale benchmarks serve no dated tag.
func (s *memStore) AllocateIn(context.Context, string, int64, func(time.Time) (segment.Window, error)) (segment.Allocation, error) {
	return segment.Allocation{}, errors.New("memStore serves no dated tag")
}

// Ping answers: the store is in memory.
func (s *memStore) Ping(context.Context) error { return nil }

// ListTags returns fresh copies of the names, as a database driver does:
// the allocator keeps the names of the tags it serves, and that memory is
// the allocator's.
func (s *memStore) ListTags(context.Context) ([]leafd.Tag, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tags := make([]leafd.Tag, len(s.names))
	for i, name := range s.names {
		tags[i] = leafd.Tag{Name: strings.Clone(name), MaxID: s.maxIDs[name], Step: s.step}
	}
	return tags, nil
}

// LookupTag answers the look-up of one tag by name.
func (s *memStore) LookupTag(_ context.Context, name string) (leafd.Tag, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	maxID, ok := s.maxIDs[name]
	if !ok {
		return leafd.Tag{}, leafd.Errorf(leafd.EUnknownTag, "tag %q is not defined", name)
	}
	return leafd.Tag{Name: strings.Clone(name), MaxID: maxID, Step: s.step}, nil
}

var _ segment.Store = (*memStore)(nil)

// liveHeap returns the bytes of live heap objects after a full collection.
func liveHeap() int64 {
	runtime.GC()
	runtime.GC() // a second cycle frees what the first one's finalizers released
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// BenchmarkScaleMemoryPerTag measures the heap an Allocator keeps per tag,
// over 10,000 tags of an in-memory store (no database driver, no pool):
// idle is a tag listed and never asked for; active is a tag with one range
// in each buffer (the current one being served, the next one loaded). The
// measure is taken on three allocators built before the timed loop, whose
// body is empty: memory does not depend on b.N, and building 10,000 tags
// and 20,000 loads b.N times would only make CI's -benchtime 100x slow.
// ns/op is suppressed.
func BenchmarkScaleMemoryPerTag(b *testing.B) {
	ctx := context.Background()
	const step, builds = 1000, 3
	store := newMemStore(scaleTags, step)
	cfg := fastConfig()
	cfg.PreloadAt = 0.1
	// Enough IDs to pass the preload mark, so that the next range loads.
	take := int(float64(step)*cfg.PreloadAt) + 1
	var idle, active int64
	for range builds {
		before := liveHeap()
		a, err := segment.New(store, cfg)
		if err != nil {
			b.Fatal(err)
		}
		if err := a.Refresh(ctx); err != nil {
			b.Fatal(err)
		}
		listed := liveHeap()
		var buf []segment.Range
		for _, name := range store.names {
			if buf, err = a.NextN(ctx, name, take, buf[:0]); err != nil {
				b.Fatal(err)
			}
		}
		waitBothBuffers(b, a, store.names)
		loaded := liveHeap()
		idle += listed - before
		active += loaded - before
		runtime.KeepAlive(a)
		a.Close()
	}
	for b.Loop() {
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(float64(idle)/float64(builds*scaleTags), "idle-B/tag")
	b.ReportMetric(float64(active)/float64(builds*scaleTags), "active-B/tag")
}

// waitBothBuffers waits until every tag has a range in each buffer and no
// load in flight.
func waitBothBuffers(tb testing.TB, a *segment.Allocator, names []string) {
	tb.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for _, name := range names {
		for {
			st, ok := a.TagState(name)
			if !ok {
				tb.Fatalf("tag %s is not served", name)
			}
			if !st.Loading && st.Buffers[0].Ready && st.Buffers[1].Ready {
				break
			}
			if time.Now().After(deadline) {
				tb.Fatalf("tag %s: both buffers not loaded after 30s: %+v", name, st)
			}
			time.Sleep(time.Millisecond)
		}
	}
}

// scaleDatabase opens a fresh, migrated database of driver holding n tags,
// inserted by SQL in batches, and returns a store over it.
func scaleDatabase(b *testing.B, driver string, n int) store.Store {
	b.Helper()
	db := newDatabase(b, driver)
	if err := insertScaleTags(db.raw, 0, n); err != nil {
		b.Fatal(err)
	}
	return db.store(b)
}

// insertScaleTags inserts the tags scaleName(from) up to scaleName(to-1),
// 1,000 rows a statement, in one transaction.
func insertScaleTags(raw *sqlx.DB, from, to int) error {
	tx, err := raw.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	const batch = 1000
	for lo := from; lo < to; lo += batch {
		hi := min(lo+batch, to)
		var q strings.Builder
		args := make([]any, 0, 3*(hi-lo))
		q.WriteString("INSERT INTO leaf_alloc (biz_tag, max_id, step, description) VALUES ")
		for i := lo; i < hi; i++ {
			if i > lo {
				q.WriteByte(',')
			}
			q.WriteString("(?, 1, ?, ?)")
			args = append(args, scaleName(i), 1000, "scale benchmark")
		}
		if _, err := tx.Exec(raw.Rebind(q.String()), args...); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// BenchmarkScaleRefresh measures one Allocator.Refresh, the re-read of the
// whole tag list every tag_refresh, when nothing changed since the last
// one: the steady state. mem is the allocator's own share, plus the copy
// of the list that the in-memory store builds (a slice and 10,000 names,
// about 1.1 MB); each engine of store.Drivers reads every row from a real
// database instead. B/op is what one refresh allocates, all of it garbage
// afterwards.
func BenchmarkScaleRefresh(b *testing.B) {
	ctx := context.Background()
	for _, driver := range append([]string{"mem"}, store.Drivers()...) {
		for _, n := range scaleSizes() {
			b.Run(fmt.Sprintf("%s/%d", driver, n), func(b *testing.B) {
				var s segment.Store
				if driver == "mem" {
					s = newMemStore(n, 1000)
				} else {
					s = scaleDatabase(b, driver, n)
				}
				a, err := segment.New(s, fastConfig())
				if err != nil {
					b.Fatal(err)
				}
				defer a.Close()
				if err := a.Refresh(ctx); err != nil { // the tags are new only once
					b.Fatal(err)
				}
				b.ReportAllocs()
				for b.Loop() {
					if err := a.Refresh(ctx); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/refresh")
			})
		}
	}
}

// BenchmarkScaleStartup measures start-up over a real database holding
// 10,000 tags: from New and Start to Listed (the first read of the list),
// and to the first ID of one tag, asked for right after Start (it waits
// for the list, then for its first range).
func BenchmarkScaleStartup(b *testing.B) {
	ctx := context.Background()
	for _, driver := range store.Drivers() {
		b.Run(fmt.Sprintf("%s/%d", driver, scaleTags), func(b *testing.B) {
			s := scaleDatabase(b, driver, scaleTags)
			cfg := fastConfig()
			var toListed, toFirstID time.Duration
			for b.Loop() {
				a, err := segment.New(s, cfg)
				if err != nil {
					b.Fatal(err)
				}
				start := time.Now()
				a.Start()
				firstID := make(chan error, 1)
				go func() {
					_, err := a.Next(ctx, scaleName(scaleTags/2))
					toFirstID += time.Since(start)
					firstID <- err
				}()
				for !a.Listed() {
					time.Sleep(50 * time.Microsecond)
				}
				toListed += time.Since(start)
				if err := <-firstID; err != nil {
					b.Fatal(err)
				}
				a.Close()
			}
			n := float64(b.N)
			b.ReportMetric(float64(toListed.Microseconds())/n/1000, "ms-to-listed")
			b.ReportMetric(float64(toFirstID.Microseconds())/n/1000, "ms-to-first-id")
		})
	}
}
