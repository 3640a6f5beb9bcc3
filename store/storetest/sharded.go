package storetest

import (
	"context"
	"testing"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/segment"
)

// wantBase checks that tag's max_id is base in every database of the
// sharded store: it is the tag's base, which loads do not move.
func (h *harness) wantBase(tag string, base int64) {
	h.t.Helper()
	for i, raw := range h.db.Shards.Raw {
		var v int64
		if err := raw.QueryRow(raw.Rebind("SELECT max_id FROM leaf_alloc WHERE biz_tag = ?"), tag).Scan(&v); err != nil {
			h.t.Fatalf("store.shards[%d]: read max_id of %q: %v", i, tag, err)
		}
		if v != base {
			h.t.Fatalf("store.shards[%d]: max_id of %q is %d, want its base %d", i, tag, v, base)
		}
	}
}

// loadSharded loads n ranges of tag, taking the stores in turn, and checks
// each against what docs/contract.md ("Independent databases") promises of
// a sharded store: step IDs strided by S at or above the base, each store's
// above the last it handed out, none handed out twice.
func loadSharded(t *testing.T, h *harness, stores []Store, tag string, base, tableStep int64, n int) {
	t.Helper()
	S := h.db.Shards.Slots
	seen := map[int64]bool{}
	last := make([]int64, len(stores))
	for i := range n {
		s, step := i%len(stores), int64(1+i%7)
		a, err := stores[s].Allocate(context.Background(), tag, step)
		if err != nil {
			t.Fatalf("store %d: Allocate(%q, %d): %v", s, tag, step, err)
		}
		if a.Stride != S || a.Count() != step || a.End-a.Start != step*S || a.TableStep != tableStep ||
			a.Start < base || a.Start <= last[s] {
			t.Fatalf("store %d: Allocate(%q, %d) = %+v after its IDs up to %d: want %d IDs strided by %d from %d on, table step %d",
				s, tag, step, a, last[s], step, S, base, tableStep)
		}
		for id := a.Start; id < a.End; id += a.Stride {
			if seen[id] {
				t.Fatalf("ID %d of %q handed out twice", id, tag)
			}
			seen[id] = true
		}
		last[s] = a.Last()
	}
}

// On a sharded store leaf_alloc.max_id is the tag's base: ranges from two
// stores are strided, never overlap, and start at or above it; neither
// loads nor an update move it in any database; and RepairTag, with no
// high-water mark to repair to, is range_unsupported (docs/contract.md,
// "Independent databases").
func testShardedBase(t *testing.T, h *harness) {
	s := h.migrated()
	ctx := context.Background()
	create(t, s, leafd.Tag{Name: "order", MaxID: 77, Step: 100})
	loadSharded(t, h, []Store{s, h.open()}, "order", 77, 100, 6*int(h.db.Shards.Slots))
	h.wantBase("order", 77)

	step := int64(2500)
	old, got, err := s.UpdateTag(ctx, "order", leafd.TagUpdate{Step: &step})
	if err != nil || old.MaxID != 77 || got.MaxID != 77 || got.Step != 2500 {
		t.Fatalf("UpdateTag = %+v, %+v, %v; want the step changed and max_id 77", old, got, err)
	}
	h.wantBase("order", 77)
	h.allocate(s, "order", 10, segment.Allocation{Start: 1, End: 11, TableStep: 2500})

	_, err = s.RepairTag(ctx, "order")
	wantCode(t, "RepairTag on a sharded store", err, leafd.ERangeUnsupported)
	_, err = s.RepairTag(ctx, "nope")
	wantCode(t, "RepairTag of an unknown tag", err, leafd.EUnknownTag)
}

// A database that Java Leaf used becomes the first of a sharded store: its
// tag is copied to every database and continues above its max_id, which
// stays its base (docs/shards.md, "Growing from one database to several").
func testShardedLeafTable(t *testing.T, h *harness) {
	h.exec(h.db.LeafTable)
	h.exec("INSERT INTO leaf_alloc (biz_tag, max_id, step, description) VALUES ('leaf-segment-test', 5001, 2000, 'Leaf')")
	s := h.migrated()
	h.wantBase("leaf-segment-test", 5001)
	loadSharded(t, h, []Store{s, h.open()}, "leaf-segment-test", 5001, 2000, 3*int(h.db.Shards.Slots))
	tags, err := s.ListTags(context.Background())
	if err != nil || len(tags) != 1 || tags[0].Description != "Leaf" || tags[0].MaxID != 5001 {
		t.Fatalf("ListTags after growing Leaf's database into store.shards = %+v, %v", tags, err)
	}
	h.wantBase("leaf-segment-test", 5001)
}
