package storetest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/segment"
)

// mark reads a tag's high-water mark by SQL; 0 when it has none.
func (h *harness) mark(tag string) int64 {
	h.t.Helper()
	var v int64
	err := h.db.Raw.QueryRow(h.db.Raw.Rebind("SELECT COALESCE(MAX(max_id), 0) FROM leafd_tag_highwater WHERE biz_tag = ?"), tag).Scan(&v)
	if err != nil {
		h.t.Fatalf("read the high-water mark of %q: %v", tag, err)
	}
	return v
}

// wantRewound checks that Allocate of tag is refused with tag_rewound, that
// the message gives the statement that repairs it, and that nothing was
// written: max_id and the mark are as they were.
func wantRewound(t *testing.T, h *harness, s Store, tag string, step, repairTo int64) {
	t.Helper()
	maxID, mark := h.maxID(tag), h.mark(tag)
	a, err := s.Allocate(context.Background(), tag, step)
	if err == nil {
		t.Fatalf("Allocate(%q, %d) of a rewound tag = %+v, want tag_rewound", tag, step, a)
	}
	wantCode(t, "Allocate of a rewound tag", err, leafd.ETagRewound)
	msg := leafd.ErrorMessage(err)
	for _, want := range []string{"rewound", "deleted and created again", fmt.Sprintf("UPDATE leaf_alloc SET max_id = %d WHERE biz_tag = '%s'", repairTo, tag)} {
		if !strings.Contains(msg, want) {
			t.Fatalf("tag_rewound message %q does not say %q", msg, want)
		}
	}
	if got := h.maxID(tag); got != maxID {
		t.Fatalf("max_id of %q changed from %d to %d by a refused Allocate", tag, maxID, got)
	}
	if got := h.mark(tag); got != mark {
		t.Fatalf("high-water mark of %q changed from %d to %d by a refused Allocate", tag, mark, got)
	}
}

// An operator lowers max_id by hand: every range that starts below the end
// of one already handed out is refused, by this store and by a new one on
// the same database (the mark is in the database, not in memory); once
// max_id is raised to the mark, allocation goes on from there.
func testRewoundByUpdate(t *testing.T, h *harness) {
	s := h.migrated()
	create(t, s, leafd.Tag{Name: "order", MaxID: 1, Step: 100})
	h.allocate(s, "order", 100, segment.Allocation{Start: 1, End: 101, TableStep: 100})
	h.allocate(s, "order", 10, segment.Allocation{Start: 101, End: 111, TableStep: 100})
	if got := h.mark("order"); got != 111 {
		t.Fatalf("high-water mark = %d after ranges up to 111, want 111", got)
	}

	h.exec("UPDATE leaf_alloc SET max_id = 1 WHERE biz_tag = 'order'")
	wantRewound(t, h, s, "order", 100, 111)
	// A step that would reach past the mark is refused all the same: the
	// range would start at 1.
	wantRewound(t, h, s, "order", 1000, 111)
	// One below the mark: the range would start at 110, which was issued.
	h.exec("UPDATE leaf_alloc SET max_id = 110 WHERE biz_tag = 'order'")
	wantRewound(t, h, s, "order", 5, 111)
	// The mark survives the store: a new one (a restarted server) refuses too.
	wantRewound(t, h, h.open(), "order", 100, 111)
	// A max_id below 1 counts as 1, and is refused like 1.
	h.exec("UPDATE leaf_alloc SET max_id = -5 WHERE biz_tag = 'order'")
	wantRewound(t, h, s, "order", 100, 111)

	// The repair the message gives: the next range starts at the mark.
	h.exec("UPDATE leaf_alloc SET max_id = 111 WHERE biz_tag = 'order'")
	h.allocate(s, "order", 100, segment.Allocation{Start: 111, End: 211, TableStep: 100})
	// Raised further than needed: fine, it only skips IDs.
	h.exec("UPDATE leaf_alloc SET max_id = 5000 WHERE biz_tag = 'order'")
	h.allocate(h.open(), "order", 100, segment.Allocation{Start: 5000, End: 5100, TableStep: 100})
	if got := h.mark("order"); got != 5100 {
		t.Fatalf("high-water mark = %d, want 5100", got)
	}
}

// An operator deletes a tag and creates it again by SQL with the default
// max_id of 1: its mark outlives the row, and the new row is refused until
// its max_id is at or above the mark. Created again through CreateTag, its
// max_id starts at the mark (or above it, if asked), and it allocates at
// once.
func testRewoundByRecreate(t *testing.T, h *harness) {
	s := h.migrated()
	create(t, s, leafd.Tag{Name: "pay", MaxID: 1, Step: 50})
	h.allocate(s, "pay", 50, segment.Allocation{Start: 1, End: 51, TableStep: 50})
	h.allocate(s, "pay", 50, segment.Allocation{Start: 51, End: 101, TableStep: 50})

	h.exec("DELETE FROM leaf_alloc WHERE biz_tag = 'pay'")
	_, err := s.Allocate(context.Background(), "pay", 50)
	wantCode(t, "Allocate of a deleted tag", err, leafd.EUnknownTag)
	if got := h.mark("pay"); got != 101 {
		t.Fatalf("high-water mark = %d after the tag's row was deleted, want 101 (kept)", got)
	}
	// Created again by SQL, as an operator would, and through CreateTag.
	h.insert("pay", 1, 50)
	wantRewound(t, h, s, "pay", 50, 101)
	h.exec("DELETE FROM leaf_alloc WHERE biz_tag = 'pay'")
	if got := create(t, s, leafd.Tag{Name: "pay", Step: 50}); got.MaxID != 101 {
		t.Fatalf("CreateTag of a tag deleted at its mark 101 = %+v, want max_id 101", got)
	}
	h.allocate(h.open(), "pay", 50, segment.Allocation{Start: 101, End: 151, TableStep: 50})

	// Created again above the mark: it goes on from there.
	h.exec("DELETE FROM leaf_alloc WHERE biz_tag = 'pay'")
	create(t, s, leafd.Tag{Name: "pay", MaxID: 1000, Step: 50})
	h.allocate(s, "pay", 50, segment.Allocation{Start: 1000, End: 1050, TableStep: 50})

	// Another tag is not concerned by this one's mark.
	create(t, s, leafd.Tag{Name: "other", MaxID: 1, Step: 50})
	h.allocate(s, "other", 50, segment.Allocation{Start: 1, End: 51, TableStep: 50})
}

// Several stores allocate many tags at once, each tag's first mark
// inserted concurrently with the others' (no deadlock, no error), then a
// tag is rewound while they go on: from then on that tag is refused to
// every store until it is repaired, and no range of any tag overlaps
// another.
func testRewoundConcurrently(t *testing.T, h *harness) {
	const stores, tags, rounds = 4, 12, 6
	first := h.migrated()
	names := make([]string, tags)
	for i := range names {
		names[i] = fmt.Sprintf("t%02d", i)
		create(t, first, leafd.Tag{Name: names[i], MaxID: 1, Step: 10})
	}
	ss := []Store{first}
	for range stores - 1 {
		ss = append(ss, h.open())
	}
	var (
		mu     sync.Mutex
		ranges = map[string][]segment.Allocation{}
	)
	run := func(rewound string) {
		var wg sync.WaitGroup
		for i, s := range ss {
			for g := range 3 {
				wg.Go(func() {
					for n := range rounds {
						name := names[(i*7+g*3+n)%tags]
						a, err := s.Allocate(context.Background(), name, 10)
						if name == rewound {
							if leafd.ErrorCode(err) != leafd.ETagRewound {
								t.Errorf("store %d: Allocate(%q) of the rewound tag = %+v, %v; want tag_rewound", i, name, a, err)
							}
							continue
						}
						if err != nil {
							t.Errorf("store %d: Allocate(%q): %v", i, name, err)
							return
						}
						mu.Lock()
						ranges[name] = append(ranges[name], a)
						mu.Unlock()
					}
				})
			}
		}
		wg.Wait()
	}
	run("")
	if t.Failed() {
		return
	}
	h.exec("UPDATE leaf_alloc SET max_id = 1 WHERE biz_tag = 't03'")
	run("t03")
	if t.Failed() {
		return
	}
	for name, rs := range ranges {
		seen := map[int64]bool{}
		var top int64
		for _, r := range rs {
			for id := r.Start; id < r.End; id++ {
				if seen[id] {
					t.Fatalf("tag %s: ID %d handed out twice", name, id)
				}
				seen[id] = true
			}
			top = max(top, r.End)
		}
		if got := h.mark(name); got != top {
			t.Fatalf("tag %s: high-water mark %d, but the ranges end at %d", name, got, top)
		}
	}
}

// A database that Java Leaf used before leafd: the tags have no marks yet.
// The first range of each is allowed and sets the mark; a rewind after that
// is refused.
func testHighWaterMarkOfLeafTable(t *testing.T, h *harness) {
	h.exec(h.db.LeafTable)
	h.exec("INSERT INTO leaf_alloc (biz_tag, max_id, step, description) VALUES ('leaf-segment-test', 5001, 2000, 'Leaf')")
	s := h.migrated()
	if got := h.mark("leaf-segment-test"); got != 0 {
		t.Fatalf("a tag never loaded by leafd has the mark %d, want none", got)
	}
	h.allocate(s, "leaf-segment-test", 2000, segment.Allocation{Start: 5001, End: 7001, TableStep: 2000})
	// Java Leaf, beside leafd, moves max_id on without a mark: fine.
	h.exec("UPDATE leaf_alloc SET max_id = max_id + 2000 WHERE biz_tag = 'leaf-segment-test'")
	h.allocate(s, "leaf-segment-test", 2000, segment.Allocation{Start: 9001, End: 11001, TableStep: 2000})
	h.exec("UPDATE leaf_alloc SET max_id = 5001 WHERE biz_tag = 'leaf-segment-test'")
	wantRewound(t, h, s, "leaf-segment-test", 2000, 11001)
}

// A database upgraded without its migrations (no leafd_tag_highwater): no
// range is handed out unchecked; the error names the table and says to
// migrate, and nothing is written.
func testHighWaterTableMissing(t *testing.T, h *harness) {
	s := h.migrated()
	h.insert("t", 1, 10)
	h.exec("DROP TABLE leafd_tag_highwater")
	a, err := s.Allocate(context.Background(), "t", 10)
	if err == nil {
		t.Fatalf("Allocate without the high-water table = %+v, want an error", a)
	}
	if !strings.Contains(err.Error(), "leafd_tag_highwater is missing: run `leafd migrate`") {
		t.Fatalf("Allocate without the high-water table: %v", err)
	}
	if got := h.maxID("t"); got != 1 {
		t.Fatalf("max_id = %d after a refused Allocate, want 1", got)
	}
}
