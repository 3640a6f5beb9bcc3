package storetest

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/segment"
)

// UpdateTag finds its row by the exact name: on MySQL, whose default
// collation compares "ORDER" and "order" equal, a PATCH of "ORDER" must not
// change "order", as it cannot on SQLite. The unknown_tag answer names the
// tag that was probably meant.
func testUpdateTagExactCase(t *testing.T, h *harness) {
	s := h.migrated()
	ctx := context.Background()
	create(t, s, leafd.Tag{Name: "order", MaxID: 1, Step: 100, Description: "orders"})
	step, desc := int64(5), "changed"
	for _, name := range []string{"ORDER", "Order"} {
		_, _, err := s.UpdateTag(ctx, name, leafd.TagUpdate{Step: &step, Description: &desc})
		wantCode(t, "UpdateTag("+name+") with only \"order\" in the store", err, leafd.EUnknownTag)
		if msg := leafd.ErrorMessage(err); !strings.Contains(msg, `differs only in letter case, "order"`) {
			t.Fatalf("UpdateTag(%s): message %q does not name the tag \"order\"", name, msg)
		}
	}
	got, err := s.LookupTag(ctx, "order")
	if err != nil || got.Step != 100 || got.Description != "orders" {
		t.Fatalf("order after updates of other names = %+v, %v; want it unchanged", got, err)
	}
	_, _, err = s.UpdateTag(ctx, "nope", leafd.TagUpdate{Step: &step})
	if msg := leafd.ErrorMessage(err); leafd.ErrorCode(err) != leafd.EUnknownTag || strings.Contains(msg, "letter case") {
		t.Fatalf("UpdateTag(nope) = %v: want the plain unknown_tag", err)
	}

	// A table that holds both names (SQLite, filled by SQL or before
	// leafd refused such pairs; MySQL's primary key refuses the second):
	// each is changed alone.
	if _, err := h.db.Raw.Exec("INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('Order', 1, 7)"); err != nil {
		t.Logf("this database takes \"Order\" and \"order\" for one key: %v", err)
		return
	}
	_, up, err := s.UpdateTag(ctx, "Order", leafd.TagUpdate{Step: &step})
	if err != nil || up.Name != "Order" || up.Step != 5 {
		t.Fatalf("UpdateTag(Order) with both rows = %+v, %v", up, err)
	}
	if got, err := s.LookupTag(ctx, "order"); err != nil || got.Step != 100 {
		t.Fatalf("order after an update of Order = %+v, %v; want step 100", got, err)
	}
}

// CreateTag refuses a name that differs from an existing tag's only in
// letter case, on every engine: MySQL's default collation would take the
// two for one tag, and a table made on SQLite must move to MySQL. The
// tag_exists message names the existing tag.
func testCreateTagCaseTwin(t *testing.T, h *harness) {
	s := h.migrated()
	ctx := context.Background()
	create(t, s, leafd.Tag{Name: "order", MaxID: 1, Step: 100})
	for _, name := range []string{"Order", "ORDER", "oRdEr"} {
		_, err := s.CreateTag(ctx, leafd.Tag{Name: name, MaxID: 1, Step: 10})
		wantCode(t, "CreateTag("+name+") with \"order\" in the store", err, leafd.ETagExists)
		if msg := leafd.ErrorMessage(err); !strings.Contains(msg, `a tag that differs only in letter case, "order", exists`) {
			t.Fatalf("CreateTag(%s): message %q does not name the tag \"order\"", name, msg)
		}
	}
	_, err := s.CreateTag(ctx, leafd.Tag{Name: "order", MaxID: 1, Step: 10})
	wantCode(t, "CreateTag(order) again", err, leafd.ETagExists)
	if msg := leafd.ErrorMessage(err); !strings.Contains(msg, `tag "order" already exists`) {
		t.Fatalf("CreateTag(order) again: message %q", msg)
	}
	// Names that differ by more than case are other tags.
	create(t, s, leafd.Tag{Name: "order_", MaxID: 1, Step: 1})
	create(t, s, leafd.Tag{Name: "Orders", MaxID: 1, Step: 1})
	// Short names, long ones, letters late: each twin is found.
	for _, c := range [][2]string{{"t2", "T2"}, {"9-x", "9-X"}, {"12.ab:cd-ef_gh", "12.AB:cD-Ef_gH"}, {"abcdefghij", "abcdefghiJ"}} {
		create(t, s, leafd.Tag{Name: c[0], MaxID: 1, Step: 1})
		_, err := s.CreateTag(ctx, leafd.Tag{Name: c[1], MaxID: 1, Step: 1})
		wantCode(t, "CreateTag("+c[1]+") with "+c[0]+" in the store", err, leafd.ETagExists)
		if msg := leafd.ErrorMessage(err); !strings.Contains(msg, `letter case, "`+c[0]+`"`) {
			t.Fatalf("CreateTag(%s): message %q does not name %q", c[1], msg, c[0])
		}
	}
	names, err := s.TagNames(ctx)
	if want := []string{"12.ab:cd-ef_gh", "9-x", "Orders", "abcdefghij", "order", "order_", "t2"}; err != nil || !slices.Equal(names, want) {
		t.Fatalf("TagNames = %q, %v; want %q", names, err, want)
	}
	if got, err := s.LookupTag(ctx, "order"); err != nil || got.Step != 100 {
		t.Fatalf("order after the refused creations = %+v, %v; want it unchanged", got, err)
	}
}

// recordingStore notes the names the allocator asks the store about.
type recordingStore struct {
	segment.Store
	mu                sync.Mutex
	allocated, looked []string
}

func (r *recordingStore) Allocate(ctx context.Context, tag string, step int64) (segment.Allocation, error) {
	r.mu.Lock()
	r.allocated = append(r.allocated, tag)
	r.mu.Unlock()
	return r.Store.Allocate(ctx, tag, step)
}

func (r *recordingStore) AllocateIn(ctx context.Context, tag string, step int64, within func(time.Time) (segment.Window, error)) (segment.Allocation, error) {
	r.mu.Lock()
	r.allocated = append(r.allocated, tag)
	r.mu.Unlock()
	return r.Store.AllocateIn(ctx, tag, step, within)
}

func (r *recordingStore) LookupTag(ctx context.Context, name string) (leafd.Tag, error) {
	r.mu.Lock()
	r.looked = append(r.looked, name)
	r.mu.Unlock()
	return r.Store.LookupTag(ctx, name)
}

// Allocate finds its row with the collation's "=", which on MySQL ignores
// case: Allocate("ORDER") would advance "order". The allocator never asks
// it so, on either of its paths: the tag list (ListTags, each row's own
// name) and the lookup of a name not in it (LookupTag, exact). A request
// for "ORDER" when only "order" exists is unknown_tag, and Allocate sees
// only names of rows.
func testAllocatorExactCase(t *testing.T, h *harness) {
	s := h.migrated()
	ctx := context.Background()
	h.insert("order", 1, 10)
	rec := &recordingStore{Store: s}
	a, err := segment.New(rec, segment.Config{WaitTimeout: 5 * time.Second, TagRefresh: time.Hour,
		MissLookups: 100, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"ORDER", "Order"} {
		_, err := a.Next(ctx, name)
		wantCode(t, "Next("+name+") with only \"order\" in the store", err, leafd.EUnknownTag)
	}
	if got := h.maxID("order"); got != 1 {
		t.Fatalf("max_id of order = %d after requests for ORDER and Order, want 1: they reached its row", got)
	}
	// A tag the list has not read yet is found by lookup, exactly.
	h.insert("pay", 1, 10)
	_, err = a.Next(ctx, "PAY")
	wantCode(t, "Next(PAY) with only \"pay\" in the store", err, leafd.EUnknownTag)
	for _, name := range []string{"pay", "order"} {
		if id, err := a.Next(ctx, name); err != nil || !h.firstID(id) {
			t.Fatalf("Next(%s) = %d, %v; want 1 (on a sharded store, 1 to S)", name, id, err)
		}
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, name := range rec.allocated {
		if name != "order" && name != "pay" {
			t.Fatalf("the allocator called Allocate(%q): a name no row has exactly", name)
		}
	}
	for _, name := range []string{"ORDER", "Order", "PAY"} {
		if !slices.Contains(rec.looked, name) {
			t.Fatalf("the allocator did not look %s up in the store (lookups: %q): the case proves nothing", name, rec.looked)
		}
	}
}
