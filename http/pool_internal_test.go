package http

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/internal/testkit/testdb"
	"github.com/leafd/leafd/segment"
	"github.com/leafd/leafd/store"
)

// quiet is a logger that writes nothing.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// wideAllocator starts an allocator over a fresh SQLite store holding the
// tag "wide", whose IDs have 19 digits (the widest answers) and whose step
// serves any batch up to maxBatch (0: the default) from one range.
func wideAllocator(t *testing.T, maxBatch int) *segment.Allocator {
	t.Helper()
	s, err := store.Open(store.DefaultDriver(), testdb.DSN(t, store.DefaultDriver()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx := context.Background()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateTag(ctx, leafd.Tag{Name: "wide", MaxID: 1_000_000_000_000_000_000, Step: 10_000_000}); err != nil {
		t.Fatal(err)
	}
	a, err := segment.New(s, segment.Config{MaxStep: 10_000_000, MaxBatch: maxBatch, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	if err := a.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	a.Start()
	return a
}

// A batch of the default max_batch leaves its buffer, one chunk of its
// answer, in the pool for the next; a batch ten times larger, written in
// chunks too, leaves nothing larger, however often it is asked for.
// The handler runs on the test's goroutine, so that the pool hands the
// buffer it just put back to the Get that follows (unless the race
// detector's pool drops it, as it does at random; hence the rounds).
func TestBatchBufferPoolCapped(t *testing.T) {
	a := wideAllocator(t, 10*pooledBatch)
	h := New(Config{Segment: a, Logger: quiet}).Handler()
	batch := func(n int) {
		t.Helper()
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/segment/wide?format=json&count="+strconv.Itoa(n), nil))
		if w.Code != http.StatusOK || w.Body.Len() < 22*n {
			t.Fatalf("GET count=%d = %d, %d bytes", n, w.Code, w.Body.Len())
		}
	}

	kept := 0
	for range 10 {
		batch(pooledBatch)
		buf := bufPool.Get().(*batchBuf)
		if cap(buf.b) == answerChunk {
			kept++
		}
		bufPool.Put(buf)
	}
	if kept == 0 {
		t.Errorf("no buffer of a batch of %d IDs was kept in the pool in 10 rounds", pooledBatch)
	}

	for range 10 {
		batch(10 * pooledBatch)
		buf := bufPool.Get().(*batchBuf)
		if cap(buf.b) > maxPooledBytes || cap(buf.ranges) > maxPooledRanges {
			t.Fatalf("the pool kept a buffer of %d bytes and %d ranges after a batch of %d IDs; the caps are %d and %d",
				cap(buf.b), cap(buf.ranges), 10*pooledBatch, maxPooledBytes, maxPooledRanges)
		}
	}
}
