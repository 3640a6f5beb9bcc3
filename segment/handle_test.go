package segment_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/segment"
)

// A Handle shares its tag's sequence with Allocator.Next, follows the tag
// when it is deleted and created again, and refuses a name that is not a
// tag.
func TestHandle(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, db *database) {
		db.addTag(t, "order", 1, 10)
		a := newAllocator(t, db.store(t), fastConfig())
		ctx := context.Background()
		if _, err := a.Handle("no spaces"); code(err) != leafd.EInvalidTag {
			t.Fatalf("Handle(\"no spaces\"): %v, want invalid_tag", err)
		}
		h, err := a.Handle("order")
		if err != nil {
			t.Fatal(err)
		}
		if h.Tag() != "order" {
			t.Fatalf("Tag() = %q", h.Tag())
		}
		// 25 IDs across three ranges of 10, alternating the two ways in.
		for want := int64(1); want <= 25; want++ {
			var got int64
			if want%2 == 0 {
				got, err = h.Next(ctx)
			} else {
				got, err = a.Next(ctx, "order")
			}
			if err != nil || got != want {
				t.Fatalf("ID %d: got %d, %v", want, got, err)
			}
		}
		rs, err := h.NextN(ctx, 3, nil)
		if err != nil || len(rs) != 1 || rs[0].Start != 26 || rs[0].End != 29 {
			t.Fatalf("NextN(3) = %v, %v; want [26, 29)", rs, err)
		}

		// A handle made before its tag exists serves it once it does.
		later, err := a.Handle("later")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := later.Next(ctx); code(err) != leafd.EUnknownTag {
			t.Fatalf("Next of a tag not created yet: %v, want unknown_tag", err)
		}
		db.addTag(t, "later", 100, 10)
		if err := a.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		if id, err := later.Next(ctx); err != nil || id != 100 {
			t.Fatalf("Next after the tag was created: %d, %v; want 100", id, err)
		}

		// Deleted: unknown_tag, its buffered IDs dropped. Created again
		// above every range handed out (up to 1111 here; lower would be
		// tag_rewound): the handle serves the new tag.
		db.exec(t, "DELETE FROM leaf_alloc WHERE biz_tag = 'order'")
		if err := a.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		if id, err := h.Next(ctx); code(err) != leafd.EUnknownTag {
			t.Fatalf("Next of a deleted tag: %d, %v; want unknown_tag", id, err)
		}
		db.addTag(t, "order", 2000, 10)
		if err := a.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		// IDs of the new row, increasing. Not exactly 2000, 2001, …: a load
		// of the deleted tag still in flight can land on the new row and
		// give its range up (IDs skipped, never handed out).
		last := int64(1999)
		for range 15 {
			id, err := h.Next(ctx)
			if err != nil || id <= last {
				t.Fatalf("Next of the tag created again: %d, %v; want an ID of the new row above %d", id, err, last)
			}
			last = id
		}
	})
}

// The next range starts loading once preload_at of the current one is
// used, whether the IDs go one by one or in batches, and only once.
func TestPreloadOnceAtThePoint(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, db *database) {
		db.addTag(t, "order", 1, 100)
		rec := record(db.store(t))
		cfg := fastConfig()
		cfg.PreloadAt = 0.5
		a := newAllocator(t, rec, cfg)
		ctx := context.Background()
		h, err := a.Handle("order")
		if err != nil {
			t.Fatal(err)
		}
		for i := range 50 { // IDs 1..50: offsets 0..49, before the point
			if _, err := h.Next(ctx); err != nil {
				t.Fatal(i, err)
			}
		}
		time.Sleep(50 * time.Millisecond)
		if n := rec.allocations(); n != 1 {
			t.Fatalf("%d loads before the preload point, want 1", n)
		}
		if _, err := a.Next(ctx, "order"); err != nil { // offset 50: the point
			t.Fatal(err)
		}
		eventually(t, func() bool { return rec.allocations() == 2 }, "the preload after offset 50")
		for range 49 {
			if _, err := h.Next(ctx); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(50 * time.Millisecond)
		if n := rec.allocations(); n != 2 {
			t.Fatalf("%d loads while the first range lasted, want 2", n)
		}
	})
}

// listGate is a store whose next ListTags, once armed, reads the list and
// then waits for the test: a refresh held between its read and its change
// of the tags.
type listGate struct {
	segment.Store
	mu    sync.Mutex
	armed bool
	read  chan struct{} // closed once the held ListTags has read
	go_   chan struct{} // closed to let it return
}

func (g *listGate) ListTags(ctx context.Context) ([]leafd.Tag, error) {
	g.mu.Lock()
	held := g.armed
	g.armed = false
	g.mu.Unlock()
	tags, err := g.Store.ListTags(ctx)
	if held {
		close(g.read)
		<-g.go_
	}
	return tags, err
}

// Two refreshes at once: one reads the list before a tag is created, the
// other after, and the first applies its list last. The newer list is the
// one served: the new tag is not dropped by the older list.
func TestRefreshOlderListLosesToNewer(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, db *database) {
		db.addTag(t, "order", 1, 10)
		g := &listGate{Store: db.store(t), read: make(chan struct{}), go_: make(chan struct{})}
		a := newAllocator(t, g, fastConfig())
		ctx := context.Background()
		g.mu.Lock()
		g.armed = true
		g.mu.Unlock()
		older := make(chan error, 1)
		go func() { older <- a.Refresh(ctx) }()
		<-g.read // the older list, without "later", is read
		db.addTag(t, "later", 100, 10)
		if err := a.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		close(g.go_)
		if err := <-older; err != nil {
			t.Fatal(err)
		}
		served := false
		for _, st := range a.State() {
			served = served || st.Tag == "later"
		}
		if !served {
			t.Fatal("the tag of the newer list is not served: the older list replaced it")
		}
		if id, err := a.Next(ctx, "later"); err != nil || id != 100 {
			t.Fatalf("Next of the tag the newer list has: %d, %v; want 100", id, err)
		}
	})
}
