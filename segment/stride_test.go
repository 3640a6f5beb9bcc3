package segment_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/segment"
)

// stridedStore stands in for one slot of a sharded store: slot k of S
// hands out only IDs ≡ k (mod S), so a range of step IDs is Start,
// Start+S, … below Start+step*S. It keeps its rows in memory: no store of
// today hands out strided ranges, and the subject here is the allocator's
// arithmetic over them, not a database.
type stridedStore struct {
	slot, slots int64

	mu     sync.Mutex
	steps  map[string]int64 // the table step of each tag
	next   map[string]int64 // where the tag's next range starts
	asked  []int64          // every step asked for, in order
	ranges map[string][]segment.Allocation
	// bad, when set, is handed out instead of the next range.
	bad *segment.Allocation
}

var _ segment.Store = (*stridedStore)(nil)

// AllocateIn is refused, as a sharded store refuses dated tags.
func (s *stridedStore) AllocateIn(context.Context, string, int64, func(time.Time) (segment.Window, error)) (segment.Allocation, error) {
	return segment.Allocation{}, errors.New("a strided store serves no dated tag")
}

func newStridedStore(slot, slots int64, steps map[string]int64) *stridedStore {
	return &stridedStore{slot: slot, slots: slots, steps: steps,
		next: map[string]int64{}, ranges: map[string][]segment.Allocation{}}
}

func (s *stridedStore) Allocate(ctx context.Context, tag string, step int64) (segment.Allocation, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	table, ok := s.steps[tag]
	if !ok {
		return segment.Allocation{}, leafd.UnknownTagError(tag)
	}
	s.asked = append(s.asked, step)
	if s.bad != nil {
		a := *s.bad
		s.bad = nil
		return a, nil
	}
	start := s.next[tag]
	if start == 0 {
		start = s.slot // the slot's first ID above 0
		if start == 0 {
			start = s.slots
		}
	}
	a := segment.Allocation{Start: start, End: start + step*s.slots, Stride: s.slots, TableStep: table}
	s.next[tag] = a.End
	s.ranges[tag] = append(s.ranges[tag], a)
	return a, nil
}

func (s *stridedStore) Ping(context.Context) error { return nil }

func (s *stridedStore) ListTags(ctx context.Context) ([]leafd.Tag, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []leafd.Tag
	for name, step := range s.steps {
		out = append(out, tagRow(name, step))
	}
	return out, nil
}

func (s *stridedStore) LookupTag(ctx context.Context, name string) (leafd.Tag, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	step, ok := s.steps[name]
	if !ok {
		return leafd.Tag{}, leafd.UnknownTagError(name)
	}
	return tagRow(name, step), nil
}

// startAt makes the tag's next range start at id.
func (s *stridedStore) startAt(tag string, id int64) {
	s.mu.Lock()
	s.next[tag] = id
	s.mu.Unlock()
}

// owned reports whether id is an ID of a range the store handed out.
func (s *stridedStore) owned(tag string, id int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range s.ranges[tag] {
		if id >= a.Start && id < a.End && (id-a.Start)%a.Stride == 0 {
			return true
		}
	}
	return false
}

func (s *stridedStore) askedSteps() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int64(nil), s.asked...)
}

// ids lists the IDs of rs, checking each range's stride.
func ids(t *testing.T, rs []segment.Range, stride int64) []int64 {
	t.Helper()
	var out []int64
	for _, r := range rs {
		if r.Stride != stride {
			t.Fatalf("range %+v: stride %d, want %d", r, r.Stride, stride)
		}
		n := int64(0)
		for id := r.Start; id < r.End; id += r.Stride {
			out = append(out, id)
			n++
		}
		if n != r.Len() || (r.End-r.Start)%r.Stride != 0 {
			t.Fatalf("range %+v holds %d IDs, Len says %d", r, n, r.Len())
		}
	}
	return out
}

// checkSlot fails unless every ID is ≡ slot (mod slots), was handed out by
// s and is above the one before it.
func checkSlot(t *testing.T, s *stridedStore, tag string, got []int64) {
	t.Helper()
	for i, id := range got {
		if id%s.slots != s.slot {
			t.Fatalf("ID %d is %d mod %d, want %d", id, id%s.slots, s.slots, s.slot)
		}
		if !s.owned(tag, id) {
			t.Fatalf("ID %d is in no range the store handed out", id)
		}
		if i > 0 && id <= got[i-1] {
			t.Fatalf("ID %d after %d: not increasing", id, got[i-1])
		}
	}
}

func TestAllocationCount(t *testing.T) {
	for _, c := range []struct {
		a           segment.Allocation
		count, last int64
	}{
		{segment.Allocation{Start: 1, End: 11}, 10, 10},
		{segment.Allocation{Start: 1, End: 11, Stride: 1}, 10, 10},
		{segment.Allocation{Start: 3, End: 43, Stride: 4}, 10, 39},
		{segment.Allocation{Start: 7, End: 8, Stride: 1}, 1, 7},
		{segment.Allocation{Start: 5, End: 1029, Stride: 1024}, 1, 5},
	} {
		if got := c.a.Count(); got != c.count {
			t.Errorf("%+v.Count() = %d, want %d", c.a, got, c.count)
		}
		if got := c.a.Last(); got != c.last {
			t.Errorf("%+v.Last() = %d, want %d", c.a, got, c.last)
		}
		r := segment.Range{Start: c.a.Start, End: c.a.End, Stride: c.a.Stride}
		if got := r.Len(); got != c.count {
			t.Errorf("%+v.Len() = %d, want %d", r, got, c.count)
		}
	}
}

// Next, one ID at a time across many ranges: every ID in the slot, each
// above the one before, none skipped within a range.
func TestStridedNext(t *testing.T) {
	s := newStridedStore(3, 4, map[string]int64{"order": 5})
	a := newAllocator(t, s, fastConfig())
	h, err := a.Handle("order")
	if err != nil {
		t.Fatal(err)
	}
	var got []int64
	for i := range 200 {
		next := a.Next
		if i%2 == 1 {
			next = func(ctx context.Context, _ string) (int64, error) { return h.Next(ctx) }
		}
		id, err := next(context.Background(), "order")
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, id)
	}
	checkSlot(t, s, "order", got)
	// The store hands this slot consecutive ranges, so nothing is skipped.
	for i, id := range got {
		if want := 3 + 4*int64(i); id != want {
			t.Fatalf("ID %d is %d, want %d", i, id, want)
		}
	}
}

// NextN batches span range boundaries: each range comes with its stride,
// the IDs ascend across ranges, and their count is the count asked for.
func TestStridedNextN(t *testing.T) {
	s := newStridedStore(2, 8, map[string]int64{"order": 7})
	cfg := fastConfig()
	cfg.MaxStep = 7 // every range 7 IDs: batches span several
	a := newAllocator(t, s, cfg)
	var all []int64
	for _, n := range []int{1, 13, 3, 30, 5, 7, 22} {
		rs, err := a.NextN(context.Background(), "order", n, nil)
		if err != nil {
			t.Fatal(err)
		}
		got := ids(t, rs, 8)
		if len(got) != n {
			t.Fatalf("NextN(%d) gave %d IDs: %v", n, len(got), rs)
		}
		for i := 1; i < len(rs); i++ {
			if rs[i].Start <= rs[i-1].End-rs[i-1].Stride {
				t.Fatalf("NextN(%d): range %+v starts at or below the last ID of %+v", n, rs[i], rs[i-1])
			}
		}
		all = append(all, got...)
	}
	checkSlot(t, s, "order", all)
}

// Many callers at once, by Next and NextN, over ranges small enough to
// switch buffers often: no ID twice, every one in the slot, and each
// caller's IDs ascending.
func TestStridedConcurrent(t *testing.T) {
	s := newStridedStore(5, 16, map[string]int64{"order": 50})
	cfg := fastConfig()
	cfg.MaxStep = 200
	a := newAllocator(t, s, cfg)
	const callers, calls = 8, 400
	got := make([][]int64, callers)
	var wg sync.WaitGroup
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(c), 1))
			for range calls {
				if rng.IntN(2) == 0 {
					id, err := a.Next(context.Background(), "order")
					if err != nil {
						t.Error(err)
						return
					}
					got[c] = append(got[c], id)
					continue
				}
				rs, err := a.NextN(context.Background(), "order", 1+rng.IntN(30), nil)
				if err != nil {
					t.Error(err)
					return
				}
				for _, r := range rs {
					for id := r.Start; id < r.End; id += r.Stride {
						got[c] = append(got[c], id)
					}
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	seen := map[int64]int{}
	var all []int64
	for c, g := range got {
		checkSlot(t, s, "order", g)
		for _, id := range g {
			if other, dup := seen[id]; dup {
				t.Fatalf("ID %d issued to caller %d and to caller %d", id, other, c)
			}
			seen[id] = c
		}
		all = append(all, g...)
	}
	st, _ := a.TagState("order")
	if st.Issued != int64(len(all)) {
		t.Errorf("Issued = %d, want the %d IDs handed out", st.Issued, len(all))
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	t.Logf("%d IDs from %d to %d in %d ranges", len(all), all[0], all[len(all)-1], len(s.askedSteps()))
}

// waitLoads waits until tag has loaded n ranges.
func waitLoads(t *testing.T, a *segment.Allocator, tag string, n int64) segment.TagState {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, _ := a.TagState(tag)
		if st.Loads >= n && !st.Loading {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("tag %q loaded %d ranges, want %d", tag, st.Loads, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// State shows a strided buffer by its IDs: Next is the next ID it would
// give, Stride its stride, Issued and Step count IDs.
func TestStridedState(t *testing.T) {
	s := newStridedStore(3, 4, map[string]int64{"order": 10})
	cfg := fastConfig()
	cfg.MaxStep = 10 // the step stays 10, whatever the rate
	a := newAllocator(t, s, cfg)
	if _, err := a.NextN(context.Background(), "order", 7, nil); err != nil {
		t.Fatal(err)
	}
	st := waitLoads(t, a, "order", 2) // the 2nd ID started the preload
	cur, next := st.Buffers[st.Current], st.Buffers[1-st.Current]
	if want := (segment.BufferState{Start: 3, End: 43, Next: 31, Stride: 4, Ready: true}); cur != want {
		t.Errorf("current buffer %+v, want %+v", cur, want)
	}
	if want := (segment.BufferState{Start: 43, End: 83, Next: 43, Stride: 4, Ready: true}); next != want {
		t.Errorf("next buffer %+v, want %+v", next, want)
	}
	if st.Issued != 7 || st.Step != 10 {
		t.Errorf("Issued %d, Step %d; want 7 and 10", st.Issued, st.Step)
	}
	// Use the current buffer up and one more: Next of the old one is its End.
	if _, err := a.NextN(context.Background(), "order", 4, nil); err != nil {
		t.Fatal(err)
	}
	st, _ = a.TagState("order")
	if cur := st.Buffers[st.Current]; cur.Start != 43 || cur.Next != 47 {
		t.Errorf("current buffer %+v, want Start 43, Next 47", cur)
	}
	if st.Issued != 11 {
		t.Errorf("Issued %d, want 11", st.Issued)
	}
}

// The step policy counts IDs: a range of 100 IDs 4 apart is 100 IDs, not
// the 400 of its width. 91 IDs in a second predict that 100 last 1.1 s,
// below the window of 10 to 20 s, so the step grows to what lasts 15 s,
// 1,365, capped at ten times 100. Counting the width, the range would last
// 4.4 s and the step become 1,365.
func TestStridedStepCountsIDs(t *testing.T) {
	s := newStridedStore(1, 4, map[string]int64{"order": 100})
	clock := newFakeClock()
	cfg := fastConfig()
	cfg.RefillMin, cfg.RefillMax = 10*time.Second, 20*time.Second
	cfg.PreloadAt = 0.9
	cfg.Now = clock.Now
	a := newAllocator(t, s, cfg)
	if _, err := a.NextN(context.Background(), "order", 90, nil); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	if _, err := a.Next(context.Background(), "order"); err != nil { // offset 90: the preload
		t.Fatal(err)
	}
	st := waitLoads(t, a, "order", 2)
	if got := s.askedSteps(); len(got) != 2 || got[0] != 100 || got[1] != 1000 {
		t.Fatalf("steps asked %v, want [100 1000]", got)
	}
	if st.Step != 1000 {
		t.Errorf("Step = %d, want 1000", st.Step)
	}
	if next := st.Buffers[1-st.Current]; next.Start != 401 || next.End != 4401 || next.Stride != 4 {
		t.Errorf("next buffer %+v, want [401, 4401) by 4", next)
	}
}

// The in-memory rewind check compares a new range with the last ID of the
// previous one, not its End: a strided range ends a stride past its last ID,
// and a range starting in that gap holds no ID issued before.
func TestStridedRewind(t *testing.T) {
	cfg := fastConfig()
	cfg.MaxStep = 5
	cfg.PreloadAt = 0.9 // the preload starts at the 5th ID of 5
	for _, c := range []struct {
		start  int64
		refuse bool
	}{
		{18, false}, // above the last ID, 17, below End, 21
		{21, false}, // at End
		{17, true},  // the last ID
		{13, true},  // below it
	} {
		t.Run(fmt.Sprint(c.start), func(t *testing.T) {
			s := newStridedStore(1, 4, map[string]int64{"order": 5})
			a := newAllocator(t, s, cfg)
			rs, err := a.NextN(context.Background(), "order", 4, nil) // 1, 5, 9, 13
			if err != nil {
				t.Fatal(err)
			}
			s.startAt("order", c.start)
			more, err := a.NextN(context.Background(), "order", 1, nil) // 17, and the preload
			if err != nil {
				t.Fatal(err)
			}
			if got := ids(t, append(rs, more...), 4); fmt.Sprint(got) != "[1 5 9 13 17]" {
				t.Fatalf("first range %v, want 1 to 17", got)
			}
			if !c.refuse {
				id, err := a.Next(context.Background(), "order") // the second range's first ID
				if err != nil || id != c.start {
					t.Fatalf("Next = %d, %v; want %d", id, err, c.start)
				}
				return
			}
			// The preload of the second range is refused. (A request that
			// comes after that refusal begins another load, which the
			// store answers above the dropped range: so the refusal is
			// read from the tag's state, which a request may or may not
			// have seen, depending on timing.)
			deadline := time.Now().Add(5 * time.Second)
			for {
				st, _ := a.TagState("order")
				if err = st.Err; code(err) == leafd.ETagRewound || time.Now().After(deadline) {
					break
				}
				time.Sleep(time.Millisecond)
			}
			if code(err) != leafd.ETagRewound {
				t.Fatalf("load error %v; want tag_rewound", err)
			}
			if msg := leafd.ErrorMessage(err); !strings.Contains(msg, "up to 17") {
				t.Errorf("message %q does not name the last ID issued, 17", msg)
			}
		})
	}
}

// A range whose width is not a multiple of its stride, or that holds no ID,
// is not served: the load fails as a store failure and retries.
func TestStridedMalformedRange(t *testing.T) {
	for _, bad := range []segment.Allocation{
		{Start: 1, End: 11, Stride: 4, TableStep: 5},
		{Start: 1, End: 1, Stride: 4, TableStep: 5},
		{Start: 1, End: 11, Stride: -1, TableStep: 5},
	} {
		s := newStridedStore(1, 4, map[string]int64{"order": 5})
		s.bad = &bad
		a := newAllocator(t, s, fastConfig())
		// The retry gets a good range: 1, 5, …, 17.
		rs, err := a.NextN(context.Background(), "order", 5, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := ids(t, rs, 4); got[0] != 1 || got[4] != 17 {
			t.Fatalf("%+v: IDs %v, want 1 to 17", bad, got)
		}
		if st, _ := a.TagState("order"); st.LoadErrors != 1 {
			t.Errorf("%+v: LoadErrors = %d, want 1", bad, st.LoadErrors)
		}
	}
}

// anyOrderStore is a stridedStore whose tags are opaque and which hands
// their ranges out in any order (segment.AnyOrderStore), as sharded.Store
// does.
type anyOrderStore struct{ *stridedStore }

var _ segment.AnyOrderStore = anyOrderStore{}

func (s anyOrderStore) AllocateAnyOrder(ctx context.Context, tag string, step int64) (segment.Allocation, error) {
	return s.Allocate(ctx, tag, step)
}

func opaqueRow(t leafd.Tag) leafd.Tag {
	t.Format, t.KeyFingerprint = segment.FormatOpaque, segment.KeyFingerprint(testOpaqueKey, t.Name)
	return t
}

func (s anyOrderStore) ListTags(ctx context.Context) ([]leafd.Tag, error) {
	rows, err := s.stridedStore.ListTags(ctx)
	for i := range rows {
		rows[i] = opaqueRow(rows[i])
	}
	return rows, err
}

func (s anyOrderStore) LookupTag(ctx context.Context, name string) (leafd.Tag, error) {
	row, err := s.stridedStore.LookupTag(ctx, name)
	return opaqueRow(row), err
}

// The ranges of an opaque tag, asked of an AnyOrderStore, need only lie
// above the IDs of their own residue: a range of another slot below the
// last ID is served (none of its IDs can have been issued), one of the
// same slot at or below its last ID is refused as rewound.
func TestAnyOrderRewind(t *testing.T) {
	cfg := fastConfig()
	cfg.MaxStep = 5
	cfg.PreloadAt = 0.9 // the preload starts at the 5th ID of 5
	cfg.OpaqueKey = testOpaqueKey
	perm, err := segment.NewPerm(segment.TagKey(testOpaqueKey, "order"), segment.OpaqueDomain(0))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		start  int64
		refuse bool
	}{
		{2, false},  // another residue, below the last ID, 17
		{18, false}, // another residue, above it
		{21, false}, // the same residue, above it
		{17, true},  // the last ID
		{13, true},  // the same residue, below it
	} {
		t.Run(fmt.Sprint(c.start), func(t *testing.T) {
			s := anyOrderStore{newStridedStore(1, 4, map[string]int64{"order": 5})}
			a := newAllocator(t, s, cfg)
			rs, err := a.NextN(context.Background(), "order", 4, nil) // 1, 5, 9, 13
			if err != nil {
				t.Fatal(err)
			}
			s.startAt("order", c.start)
			more, err := a.NextN(context.Background(), "order", 1, nil) // 17, and the preload
			if err != nil {
				t.Fatal(err)
			}
			var got []int64
			for _, r := range append(rs, more...) {
				got = append(got, perm.Unmap(r.Start))
			}
			if fmt.Sprint(got) != "[1 5 9 13 17]" {
				t.Fatalf("first range's counters %v, want 1 to 17", got)
			}
			if !c.refuse {
				id, err := a.Next(context.Background(), "order") // the second range's first ID
				if err != nil {
					t.Fatalf("Next: %v; want counter %d", err, c.start)
				}
				if got := perm.Unmap(id); got != c.start {
					t.Fatalf("Next = counter %d; want %d", got, c.start)
				}
				return
			}
			deadline := time.Now().Add(5 * time.Second)
			for {
				st, _ := a.TagState("order")
				if err = st.Err; code(err) == leafd.ETagRewound || time.Now().After(deadline) {
					break
				}
				time.Sleep(time.Millisecond)
			}
			if code(err) != leafd.ETagRewound {
				t.Fatalf("load error %v; want tag_rewound", err)
			}
		})
	}
}
