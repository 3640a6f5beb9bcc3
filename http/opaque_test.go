package http_test

import (
	"encoding/json"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leafd/leafd"
	leafhttp "github.com/leafd/leafd/http"
	"github.com/leafd/leafd/internal/testkit/testdb"
	"github.com/leafd/leafd/segment"
	"github.com/leafd/leafd/store"
)

// opaqueServer is an admin server whose allocator and admin routes have
// key as segment.opaque_key (nil: none).
func opaqueServer(t *testing.T, driver, dsn string, key []byte) string {
	t.Helper()
	s := openAdminStore(t, driver, dsn)
	a := startAllocator(t, s, segment.Config{MaxStep: 100, WaitTimeout: 5 * time.Second, TagRefresh: time.Hour, Logger: quiet, OpaqueKey: key})
	srv := httptest.NewServer(leafhttp.New(leafhttp.Config{
		Segment: a, Tags: s, AdminToken: token, MaxStep: 5000, Logger: quiet, OpaqueKey: key,
	}).Handler())
	t.Cleanup(srv.Close)
	return srv.URL
}

// An opaque tag made through the admin API serves IDs that are not its
// counter, in every answer shape; the admin decode route maps them back to
// their positions; a server with another key refuses the tag.
func TestOpaqueTagOverHTTP(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	driver := store.DefaultDriver()
	dsn := testdb.DSN(t, driver)
	url := opaqueServer(t, driver, dsn, key)

	r := authed(t, "POST", url+"/api/tags", `{"tag":"user","step":10,"format":"opaque","digits":9}`)
	if r.status != 201 || !strings.Contains(r.body, `"format":"opaque"`) || !strings.Contains(r.body, `"digits":9`) {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	r = send(t, "GET", url+"/segment/user?count=5&format=json", "")
	var batch struct{ IDs []string }
	if err := json.Unmarshal([]byte(r.body), &batch); r.status != 200 || err != nil || len(batch.IDs) != 5 {
		t.Fatalf("batch: %d %s", r.status, r.body)
	}
	one := send(t, "GET", url+"/segment/user", "")
	leaf := send(t, "GET", url+"/api/segment/get/user", "")
	ids := append(batch.IDs, strings.TrimSpace(one.body), strings.TrimSpace(leaf.body))
	seen := map[string]bool{}
	for i, raw := range ids {
		id, err := strconv.ParseInt(raw, 10, 64)
		if err != nil || id < 1 || id > 999_999_999 || seen[raw] {
			t.Fatalf("ID %d %q: not a distinct ID of 9 digits at most", i, raw)
		}
		seen[raw] = true
		d := authed(t, "GET", url+"/api/tags/user/decode/"+raw, "")
		var got struct{ Position string }
		if err := json.Unmarshal([]byte(d.body), &got); d.status != 200 || err != nil || got.Position != strconv.Itoa(i+1) {
			t.Fatalf("decode %s: %d %s, want position %d", raw, d.status, d.body, i+1)
		}
	}
	if ids[0] == "1" && ids[1] == "2" {
		t.Fatalf("the opaque IDs are the counter: %v", ids)
	}

	// /api/state shows how much of the domain is gone (the 7 IDs issued)
	// and buffered (what its buffers hold).
	var st struct {
		Segment struct {
			Tags []map[string]any
		}
	}
	r = send(t, "GET", url+"/api/state?tag=user", "")
	if err := json.Unmarshal([]byte(r.body), &st); err != nil || len(st.Segment.Tags) != 1 {
		t.Fatalf("state: %d %s", r.status, r.body)
	}
	tag := st.Segment.Tags[0]
	buffered := 0.0
	for _, b := range tag["buffers"].([]any) {
		b := b.(map[string]any)
		buffered += b["size"].(float64) - b["used"].(float64)
	}
	if tag["domain"] != 999_999_999.0 || tag["domain_used"] != 7.0 || tag["domain_reserved"] != buffered {
		t.Fatalf("state of the opaque tag: %s, want domain 999999999, domain_used 7, domain_reserved %v", r.body, buffered)
	}
	authed(t, "POST", url+"/api/tags", `{"tag":"plain"}`)
	if r := send(t, "GET", url+"/api/state?tag=plain", ""); strings.Contains(r.body, `"domain`) {
		t.Fatalf("state of a sequential tag: %s, want no domain", r.body)
	}

	for _, c := range []struct{ body, want string }{
		{`{"tag":"a","format":"secret"}`, "format"},
		{`{"tag":"a","digits":9}`, "opaque or dated tag only"},
		{`{"tag":"a","format":"opaque","digits":3}`, "digits 3 is out of range"},
	} {
		if r := authed(t, "POST", url+"/api/tags", c.body); r.status != 400 || !strings.Contains(r.body, c.want) {
			t.Errorf("POST %s: %d %s, want 400 saying %q", c.body, r.status, r.body, c.want)
		}
	}
	if r := authed(t, "GET", url+"/api/tags/user/decode/0", ""); r.status != 400 || !strings.Contains(r.body, "invalid_id") {
		t.Errorf("decode 0: %d %s", r.status, r.body)
	}

	// No key on this server: opaque tags cannot be created, and the one
	// that exists is refused.
	plain := opaqueServer(t, driver, dsn, nil)
	if r := authed(t, "POST", plain+"/api/tags", `{"tag":"other","format":"opaque"}`); r.status != 400 || !strings.Contains(r.body, "segment.opaque_key") {
		t.Errorf("create without a key: %d %s", r.status, r.body)
	}
	other := opaqueServer(t, driver, dsn, []byte("another key, sixteen bytes or more"))
	for _, u := range []string{plain, other} {
		if r := send(t, "GET", u+"/segment/user", ""); r.status != 503 || !strings.Contains(r.body, "opaque_key_mismatch") {
			t.Errorf("a server with another key: %d %s, want 503 opaque_key_mismatch", r.status, r.body)
		}
	}
}

// An opaque tag deleted by SQL and created again through POST /api/tags:
// as it was (format and digits), it is created above every counter it
// used, and its IDs never repeat those it issued; as sequential or with
// other digits, it is refused with 409 tag_conflict, never 500, and the
// server that took the request keeps no definition of its own.
func TestOpaqueTagRecreated(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	driver := store.DefaultDriver()
	dsn := testdb.DSN(t, driver)
	url := opaqueServer(t, driver, dsn, key)
	raw := openRaw(t, driver, dsn)

	seen := map[string]bool{}
	take := func(n int) {
		t.Helper()
		r := send(t, "GET", url+"/segment/user?count="+strconv.Itoa(n), "")
		if r.status != 200 {
			t.Fatalf("GET /segment/user = %d %s", r.status, r.body)
		}
		for _, id := range strings.Fields(r.body) {
			if seen[id] {
				t.Fatalf("ID %s issued twice", id)
			}
			seen[id] = true
		}
	}
	const opaque = `{"tag":"user","step":10,"format":"opaque","digits":6}`
	if r := authed(t, "POST", url+"/api/tags", opaque); r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	take(25)
	if _, err := raw.Exec("DELETE FROM leaf_alloc WHERE biz_tag = 'user'"); err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{`{"tag":"user","step":10}`, `{"tag":"user","step":10,"format":"opaque","digits":7}`} {
		r := authed(t, "POST", url+"/api/tags", body)
		if r.status != 409 || errorCode(t, r) != leafd.ETagConflict || !strings.Contains(r.body, "pick a new name") {
			t.Fatalf("POST %s of a deleted opaque tag = %d %s, want 409 tag_conflict", body, r.status, r.body)
		}
	}
	r := authed(t, "POST", url+"/api/tags", opaque)
	var created struct{ MaxID, Format string }
	if err := json.Unmarshal([]byte(r.body), &created); r.status != 201 || err != nil || created.Format != "opaque" || created.MaxID == "1" {
		t.Fatalf("POST of the deleted tag as it was = %d %s, want 201 opaque above its mark", r.status, r.body)
	}
	take(100) // past the buffers held from before, into ranges above the mark
	if r := send(t, "GET", url+"/segment/user", ""); r.status != 200 || len(strings.TrimSpace(r.body)) > 6 {
		t.Fatalf("GET after the tag was created again = %d %s, want an opaque ID of 6 digits at most", r.status, r.body)
	}
}
