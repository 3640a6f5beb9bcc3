package http_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/leafd/leafd"
	leafhttp "github.com/leafd/leafd/http"
	"github.com/leafd/leafd/internal/testkit/testdb"
	"github.com/leafd/leafd/segment"
	"github.com/leafd/leafd/store"
	"github.com/leafd/leafd/store/sharded"
)

// Over a sharded store of two databases: POST /api/tags of a tag that
// only store.shards[1] has is 409 tag_exists (store.shards[0] is not given
// a second definition); a tag the two define differently is 409
// tag_conflict on its ID route, never served in either definition.
func TestShardedTagOverHTTP(t *testing.T) {
	driver := store.DefaultDriver()
	dsns := []string{testdb.DSN(t, driver), testdb.DSN(t, driver)}
	s, err := sharded.Open(driver, dsns, sharded.Options{Slots: 4, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx := context.Background()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	plain := make([]store.Store, 2)
	for i, dsn := range dsns {
		if plain[i], err = store.Open(driver, dsn); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { plain[i].Close() })
	}
	key := []byte("0123456789abcdef0123456789abcdef")
	a := startAllocator(t, s, segment.Config{MaxStep: 100, WaitTimeout: 5 * time.Second, TagRefresh: time.Hour,
		MissTTL: time.Millisecond, Logger: quiet, OpaqueKey: key})
	hs := httptest.NewServer(leafhttp.New(leafhttp.Config{
		Segment: a, Tags: s, AdminToken: token, MaxStep: 5000, Logger: quiet, OpaqueKey: key,
	}).Handler())
	t.Cleanup(hs.Close)

	fp := segment.KeyFingerprint(key, "late")
	if _, err := plain[1].CreateTag(ctx, leafd.Tag{Name: "late", Step: 10, Format: "opaque", KeyFingerprint: fp}); err != nil {
		t.Fatal(err)
	}
	r := authed(t, "POST", hs.URL+"/api/tags", `{"tag":"late","step":10}`)
	if r.status != 409 || errorCode(t, r) != leafd.ETagExists {
		t.Fatalf("POST of a tag store.shards[1] alone has = %d %s, want 409 tag_exists", r.status, r.body)
	}

	if _, err := plain[0].CreateTag(ctx, leafd.Tag{Name: "split", Step: 10}); err != nil {
		t.Fatal(err)
	}
	if _, err := plain[1].CreateTag(ctx, leafd.Tag{Name: "split", Step: 10, Format: "opaque", KeyFingerprint: segment.KeyFingerprint(key, "split")}); err != nil {
		t.Fatal(err)
	}
	r = send(t, "GET", hs.URL+"/segment/split", "")
	if r.status != 409 || errorCode(t, r) != leafd.ETagConflict || !strings.Contains(r.body, "defined differently") {
		t.Fatalf("GET /segment/split of a tag defined differently = %d %s, want 409 tag_conflict", r.status, r.body)
	}
}
