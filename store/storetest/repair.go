package storetest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/segment"
	"github.com/leafd/leafd/store"
)

// repair runs RepairTag and checks what every repair must hold: max_id is
// never lowered, the mark is never changed, and the answer says what the
// table says.
func repair(t *testing.T, h *harness, s Store, tag string) store.Repair {
	t.Helper()
	maxBefore, markBefore := h.maxID(tag), h.mark(tag)
	r, err := s.RepairTag(context.Background(), tag)
	if err != nil {
		t.Fatalf("RepairTag(%q): %v", tag, err)
	}
	maxAfter, markAfter := h.maxID(tag), h.mark(tag)
	switch {
	case maxAfter < maxBefore:
		t.Fatalf("RepairTag(%q) lowered max_id from %d to %d", tag, maxBefore, maxAfter)
	case markAfter != markBefore:
		t.Fatalf("RepairTag(%q) changed the high-water mark from %d to %d", tag, markBefore, markAfter)
	case r.Before.Name != tag || r.After.Name != tag:
		t.Fatalf("RepairTag(%q) answered the tags %q and %q", tag, r.Before.Name, r.After.Name)
	case r.Before.MaxID != maxBefore || r.After.MaxID != maxAfter || r.Mark != markBefore:
		t.Fatalf("RepairTag(%q) = %+v; the table holds max_id %d then %d, mark %d", tag, r, maxBefore, maxAfter, markBefore)
	case r.Raised != (maxAfter != maxBefore):
		t.Fatalf("RepairTag(%q) says raised=%v, max_id went from %d to %d", tag, r.Raised, maxBefore, maxAfter)
	}
	return r
}

// RepairTag raises a rewound tag's max_id to its mark, so that the next
// range starts right above every ID issued; it changes nothing on a tag
// that is not rewound (run again, or raised further by hand, or never
// loaded), and refuses unknown and invalid names.
func testRepairTag(t *testing.T, h *harness) {
	s := h.migrated()
	create(t, s, leafd.Tag{Name: "order", MaxID: 1, Step: 100})
	h.allocate(s, "order", 100, segment.Allocation{Start: 1, End: 101, TableStep: 100})
	h.allocate(s, "order", 10, segment.Allocation{Start: 101, End: 111, TableStep: 100})

	if r := repair(t, h, s, "order"); r.Raised || r.Mark != 111 || r.After.MaxID != 111 {
		t.Fatalf("RepairTag of a tag that is not rewound = %+v, want unchanged at 111", r)
	}

	// Rewound by an UPDATE: raised to the mark, and the next range starts
	// there, above the last ID issued (110), from this store and another.
	h.exec("UPDATE leaf_alloc SET max_id = 1 WHERE biz_tag = 'order'")
	wantRewound(t, h, s, "order", 100, 111)
	if r := repair(t, h, s, "order"); !r.Raised || r.Before.MaxID != 1 || r.After.MaxID != 111 || r.Mark != 111 {
		t.Fatalf("RepairTag of a rewound tag = %+v, want raised from 1 to 111", r)
	}
	// Run again: nothing to do, nothing lowered.
	if r := repair(t, h, h.open(), "order"); r.Raised || r.After.MaxID != 111 {
		t.Fatalf("RepairTag run twice = %+v, want unchanged", r)
	}
	h.allocate(h.open(), "order", 100, segment.Allocation{Start: 111, End: 211, TableStep: 100})

	// One below the mark, and below 1: raised to the mark all the same.
	for _, rewound := range []int64{210, 0, -5} {
		h.exec("UPDATE leaf_alloc SET max_id = ? WHERE biz_tag = 'order'", rewound)
		if r := repair(t, h, s, "order"); !r.Raised || r.After.MaxID != 211 {
			t.Fatalf("RepairTag of max_id %d under the mark 211 = %+v, want raised to 211", rewound, r)
		}
	}
	// Raised further than the mark by hand: a repair never lowers it.
	h.exec("UPDATE leaf_alloc SET max_id = 5000 WHERE biz_tag = 'order'")
	if r := repair(t, h, s, "order"); r.Raised || r.After.MaxID != 5000 || r.Mark != 211 {
		t.Fatalf("RepairTag of a tag above its mark = %+v, want unchanged at 5000", r)
	}
	h.allocate(s, "order", 100, segment.Allocation{Start: 5000, End: 5100, TableStep: 100})

	// Deleted and created again by SQL with the default max_id.
	h.exec("DELETE FROM leaf_alloc WHERE biz_tag = 'order'")
	h.exec("INSERT INTO leaf_alloc (biz_tag, max_id, step, description) VALUES ('order', 1, 100, 'again')")
	wantRewound(t, h, s, "order", 100, 5100)
	r := repair(t, h, s, "order")
	if !r.Raised || r.Before.MaxID != 1 || r.After.MaxID != 5100 || r.After.Step != 100 || r.After.Description != "again" {
		t.Fatalf("RepairTag of a tag created again = %+v, want raised from 1 to 5100, step and description kept", r)
	}
	h.allocate(s, "order", 100, segment.Allocation{Start: 5100, End: 5200, TableStep: 100})

	// A tag leafd never loaded has no mark: nothing to repair.
	create(t, s, leafd.Tag{Name: "fresh", MaxID: 7, Step: 10})
	if r := repair(t, h, s, "fresh"); r.Raised || r.Mark != 0 || r.After.MaxID != 7 {
		t.Fatalf("RepairTag of a tag never loaded = %+v, want unchanged without a mark", r)
	}

	_, err := s.RepairTag(context.Background(), "nope")
	wantCode(t, "RepairTag of an unknown tag", err, leafd.EUnknownTag)
	_, err = s.RepairTag(context.Background(), "ORDER")
	wantCode(t, "RepairTag of a name that differs in letter case", err, leafd.EUnknownTag)
	_, err = s.RepairTag(context.Background(), "bad tag!")
	wantCode(t, "RepairTag of an invalid name", err, leafd.EInvalidTag)
}

// Several stores allocate one tag while repairs run from several stores at
// once: first with nobody rewinding the tag, when every repair must find
// nothing to do and no load may be refused (a repair that lowered max_id
// under a load that committed meanwhile would make the next one
// tag_rewound); then while the tag is rewound and repaired again and again.
// Every range starts above every ID of the ranges handed out before it was
// asked for, and no ID is handed out twice.
func testRepairUnderLoad(t *testing.T, h *harness) {
	const stores, rounds = 3, 6
	first := h.migrated()
	create(t, first, leafd.Tag{Name: "order", MaxID: 1, Step: 10})
	ss := []Store{first}
	for range stores - 1 {
		ss = append(ss, h.open())
	}
	var (
		mu     sync.Mutex
		ranges []segment.Allocation
		top    atomic.Int64 // the highest End of a range handed out so far
		raised atomic.Int64
	)
	run := func(rewinds int) {
		var (
			stop atomic.Bool
			wg   sync.WaitGroup
			// gate lets the rewind wait for the stores' calls in flight
			// and go before the next: a file database would otherwise
			// starve it of its write lock under nine busy writers. The
			// stores' own repairs still run among the allocations.
			gate sync.RWMutex
		)
		// Deferred, so that a Fatal of this goroutine (h.exec) still stops
		// and waits for the others before the test ends: an Errorf of
		// theirs after it would panic and hide the Fatal's message.
		defer func() {
			stop.Store(true)
			wg.Wait()
		}()
		for i, s := range ss {
			for g := range 2 {
				wg.Go(func() {
					for n := 0; !stop.Load() || n < 20; n++ {
						before := top.Load()
						gate.RLock()
						a, err := s.Allocate(context.Background(), "order", int64(1+(i+g+n)%10))
						gate.RUnlock()
						switch {
						case leafd.ErrorCode(err) == leafd.ETagRewound && rewinds > 0:
							continue
						case err != nil:
							t.Errorf("store %d: Allocate: %v", i, err)
							return
						case a.Start < before:
							t.Errorf("store %d: range %+v starts below %d, the end of a range handed out before it was asked for", i, a, before)
							return
						}
						for {
							if old := top.Load(); a.End <= old || top.CompareAndSwap(old, a.End) {
								break
							}
						}
						mu.Lock()
						ranges = append(ranges, a)
						mu.Unlock()
					}
				})
			}
			// Repairs from every store at once, whether or not the tag
			// is rewound: most find nothing to do, and must change
			// nothing.
			wg.Go(func() {
				for n := 0; !stop.Load() || n < 5; n++ {
					gate.RLock()
					r, err := s.RepairTag(context.Background(), "order")
					gate.RUnlock()
					switch {
					case err != nil:
						t.Errorf("store %d: RepairTag: %v", i, err)
						return
					case r.After.MaxID < r.Before.MaxID || (r.Raised && r.After.MaxID != r.Mark) || (!r.Raised && r.After.MaxID != r.Before.MaxID):
						t.Errorf("store %d: RepairTag = %+v", i, r)
						return
					case r.Raised && rewinds == 0:
						t.Errorf("store %d: RepairTag raised max_id of a tag nobody rewound: %+v", i, r)
						return
					case r.Raised:
						raised.Add(1)
					}
				}
			})
		}
		for range rewinds {
			func() {
				gate.Lock()
				defer gate.Unlock()
				h.exec("UPDATE leaf_alloc SET max_id = 1 WHERE biz_tag = 'order'")
			}()
			if _, err := first.RepairTag(context.Background(), "order"); err != nil {
				t.Errorf("RepairTag: %v", err)
			}
		}
	}
	run(0)
	if t.Failed() {
		return
	}
	run(rounds)
	if t.Failed() {
		return
	}
	seen := map[int64]bool{}
	for _, r := range ranges {
		for id := r.Start; id < r.End; id++ {
			if seen[id] {
				t.Fatalf("ID %d handed out twice among %d ranges", id, len(ranges))
			}
			seen[id] = true
		}
	}
	if got, m := h.maxID("order"), h.mark("order"); got < m {
		t.Fatalf("max_id %d is left below the mark %d after the last repair", got, m)
	}
	t.Logf("%d ranges, %d IDs, none twice; %d repairs under load raised max_id", len(ranges), len(seen), raised.Load())
}
