package segment_test

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/segment"
)

// span is a run of consecutive IDs one caller received: a range, or one ID.
type span struct{ start, end int64 }

// checkDisjoint fails when two spans share an ID.
func checkDisjoint(t *testing.T, spans []span) {
	t.Helper()
	slices.SortFunc(spans, func(a, b span) int { return cmp.Compare(a.start, b.start) })
	for i := 1; i < len(spans); i++ {
		if spans[i].start < spans[i-1].end {
			t.Fatalf("IDs issued twice: [%d, %d) and [%d, %d) overlap", spans[i-1].start, spans[i-1].end, spans[i].start, spans[i].end)
		}
	}
}

// A range is size consecutive IDs, carved from the buffer: the IDs before
// and after it come from the same buffer, below and above it.
func TestRangeFromBuffer(t *testing.T) {
	db := newDatabase(t, defaultDriver())
	db.addTag(t, "order", 1, 1000)
	a := newAllocator(t, db.store(t), fastConfig())
	ctx := context.Background()
	before, err := a.Next(ctx, "order")
	if err != nil {
		t.Fatal(err)
	}
	r, err := a.Range(ctx, "order", 100)
	if err != nil {
		t.Fatal(err)
	}
	if r.Start != before+1 || r.End != r.Start+100 || r.Len() != 100 {
		t.Fatalf("range %+v after ID %d: want [%d, %d)", r, before, before+1, before+101)
	}
	after, err := a.Next(ctx, "order")
	if err != nil {
		t.Fatal(err)
	}
	if after != r.End {
		t.Fatalf("ID after the range is %d, want %d", after, r.End)
	}
}

// Bad sizes and tags that cannot give consecutive IDs are refused with
// their codes, and take nothing from the store.
func TestRangeRefused(t *testing.T) {
	db := newDatabase(t, defaultDriver())
	db.addTag(t, "order", 1, 1000)
	s := db.store(t)
	createOpaque(t, s, "secret", 0)
	cfg := fastConfig()
	cfg.MaxRange = 5000
	cfg.OpaqueKey = testOpaqueKey
	a := newAllocator(t, s, cfg)
	ctx := context.Background()
	for _, size := range []int64{0, -1, 5001} {
		if _, err := a.Range(ctx, "order", size); code(err) != leafd.EInvalidSize {
			t.Errorf("size %d: got %v, want invalid_size", size, err)
		}
	}
	if _, err := a.Range(ctx, "secret", 10); code(err) != leafd.ERangeUnsupported || errors.Is(err, segment.ErrRangeExpires) {
		t.Errorf("opaque tag: got %v, want range_unsupported, not caused by ErrRangeExpires (its ranges would not expire)", err)
	}
	if _, err := a.Range(ctx, "nope", 10); code(err) != leafd.EUnknownTag {
		t.Errorf("unknown tag: got %v, want unknown_tag", err)
	}
	if _, err := a.Range(ctx, "bad tag", 10); code(err) != leafd.EInvalidTag {
		t.Errorf("invalid tag: got %v, want invalid_tag", err)
	}

	strided := newAllocator(t, newStridedStore(1, 4, map[string]int64{"order": 100}), fastConfig())
	if _, err := strided.Range(ctx, "order", 10); code(err) != leafd.ERangeUnsupported {
		t.Errorf("strided tag: got %v, want range_unsupported", err)
	}
	// The tag still serves single IDs.
	if _, err := strided.Next(ctx, "order"); err != nil {
		t.Fatal(err)
	}
}

// A range larger than a quarter of what a buffer may hold is taken from the
// store in a transaction of its own: exactly size IDs, and the buffered IDs
// around it do not overlap it.
func TestRangeDirect(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, db *database) {
		db.addTag(t, "order", 1, 100)
		rec := record(db.store(t))
		cfg := fastConfig()
		cfg.MaxStep = 1000
		a := newAllocator(t, rec, cfg)
		ctx := context.Background()
		first, err := a.Next(ctx, "order")
		if err != nil {
			t.Fatal(err)
		}
		calls := rec.allocations()
		r, err := a.Range(ctx, "order", 5000)
		if err != nil {
			t.Fatal(err)
		}
		if r.Len() != 5000 || r.Stride != 1 {
			t.Fatalf("range %+v: want 5000 consecutive IDs", r)
		}
		if got := rec.allocations(); got != calls+1 {
			t.Fatalf("the store was asked %d times for the range, want once", got-calls)
		}
		if !rec.owned("order", r.Start) || !rec.owned("order", r.End-1) {
			t.Fatalf("range %+v is not one the store handed out", r)
		}
		spans := []span{{first, first + 1}, {r.Start, r.End}}
		for range 300 {
			id, err := a.Next(ctx, "order")
			if err != nil {
				t.Fatal(err)
			}
			spans = append(spans, span{id, id + 1})
		}
		checkDisjoint(t, spans)
		if st, _ := a.TagState("order"); st.Issued < 5301 {
			t.Errorf("state counts %d IDs issued, want at least 5301 (the direct range counts)", st.Issued)
		}
	})
}

// Ranges, batches and single IDs asked concurrently of three allocators
// over one database never share an ID; direct ranges and loads of the same
// tag on one server never trip the rewind check.
func TestRangeConcurrentNoOverlap(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, db *database) {
		db.addTag(t, "order", 1, 200)
		cfg := fastConfig()
		cfg.MaxStep = 2000
		ctx := context.Background()
		var mu sync.Mutex
		var spans []span
		var wg sync.WaitGroup
		for range 3 {
			a := newAllocator(t, db.store(t), cfg)
			for w := range 4 {
				wg.Go(func() {
					var local []span
					defer func() {
						mu.Lock()
						spans = append(spans, local...)
						mu.Unlock()
					}()
					for i := range 150 {
						switch (w + i) % 4 {
						case 0:
							// 600 > 2000/4: taken from the store directly.
							size := int64(1 + (i*37)%100)
							if i%8 == 0 {
								size = 600
							}
							r, err := a.Range(ctx, "order", size)
							if err != nil {
								t.Error(err)
								return
							}
							if r.Len() != size {
								t.Errorf("range %+v holds %d IDs, want %d", r, r.Len(), size)
								return
							}
							local = append(local, span{r.Start, r.End})
						case 1:
							rs, err := a.NextN(ctx, "order", 50, nil)
							if err != nil {
								t.Error(err)
								return
							}
							for _, r := range rs {
								local = append(local, span{r.Start, r.End})
							}
						default:
							id, err := a.Next(ctx, "order")
							if err != nil {
								t.Error(err)
								return
							}
							local = append(local, span{id, id + 1})
						}
					}
				})
			}
		}
		wg.Wait()
		checkDisjoint(t, spans)
	})
}

// A tag served by ranges alone grows its buffers to hold four ranges: the
// first ranges come from the store while a larger buffer loads, later ones
// from buffers loaded in the background; no request waits for the store
// for long.
func TestRangeOnlyTagGrowsStep(t *testing.T) {
	db := newDatabase(t, defaultDriver())
	db.addTag(t, "order", 1, 10)
	rec := record(db.store(t))
	a := newAllocator(t, rec, fastConfig())
	ctx := context.Background()
	var spans []span
	for range 200 {
		r, err := a.Range(ctx, "order", 1000)
		if err != nil {
			t.Fatal(err)
		}
		if r.Len() != 1000 {
			t.Fatalf("range %+v holds %d IDs", r, r.Len())
		}
		spans = append(spans, span{r.Start, r.End})
	}
	checkDisjoint(t, spans)
	st, _ := a.TagState("order")
	if st.Step < 4000 {
		t.Errorf("step is %d after 200 ranges of 1000, want at least 4000", st.Step)
	}
	// 200 ranges of 1000 in buffers of at least 4000, each loaded in the
	// background: far fewer transactions than ranges, and far fewer
	// waits.
	if n := rec.allocations(); n > 100 {
		t.Errorf("%d transactions for 200 ranges", n)
	}
	if st.Waits > 10 {
		t.Errorf("%d requests waited for the store", st.Waits)
	}
}

// A direct range honours its context, and a store that fails answers
// segment_unavailable with what to do; nothing is issued.
func TestRangeDirectStoreDown(t *testing.T) {
	db := newDatabase(t, defaultDriver())
	db.addTag(t, "order", 1, 100)
	rec := record(db.store(t))
	cfg := fastConfig()
	cfg.MaxStep = 1000
	a := newAllocator(t, rec, cfg)
	ctx := context.Background()
	if _, err := a.Next(ctx, "order"); err != nil {
		t.Fatal(err)
	}
	rec.set(func(r *recordingStore) { r.down = true })
	_, err := a.Range(ctx, "order", 900)
	if code(err) != leafd.ESegmentUnavailable {
		t.Fatalf("got %v, want segment_unavailable", err)
	}
	rec.set(func(r *recordingStore) { r.down = false; r.delay = time.Second })
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err = a.Range(short, "order", 900)
	if code(err) != leafd.ESegmentUnavailable {
		t.Fatalf("got %v, want segment_unavailable", err)
	}
	// Buffered IDs still serve meanwhile.
	if _, err := a.Next(ctx, "order"); err != nil {
		t.Fatal(err)
	}
}
