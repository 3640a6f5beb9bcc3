package http_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/internal/testkit/testdb"
)

// insertRow adds a leaf_alloc row by SQL, as an operator of a Leaf
// database would, past the checks of the store.
func insertRow(tb testing.TB, driver, dsn, name string, maxID, step int64) {
	tb.Helper()
	db := testdb.SQL(tb, driver, dsn)
	if _, err := db.Exec(db.Rebind("INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES (?, ?, ?)"), name, maxID, step); err != nil {
		tb.Fatalf("insert %q: %v", name, err)
	}
}

// A Leaf row named with dots only (".", "..") cannot be asked for in a
// URL: clients drop such path segments (/segment/.. is sent as /). It stays
// in the table and in the list, and every route that names it answers
// invalid_tag, as for a Leaf row with any other name leafd refuses; POST
// refuses to create one.
func TestTagOfDotsOnly(t *testing.T) {
	forEachDriver(t, func(t *testing.T, driver, dsn string) {
		srv := newAdminServer(t, driver, dsn, token)
		insertRow(t, driver, dsn, "..", 1, 10)
		insertRow(t, driver, dsn, ".", 1, 10)
		if err := srv.alloc.Refresh(context.Background()); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{".", "..", "..."} {
			if r := do(t, "GET", srv.url+"/segment/"+name); r.status != 400 || errorCode(t, r) != leafd.EInvalidTag ||
				!strings.Contains(r.body, "dots only") {
				t.Fatalf("GET /segment/%s = %d %q, want 400 invalid_tag saying why", name, r.status, r.body)
			}
			if r := do(t, "GET", srv.url+"/api/segment/get/"+name); r.status != 500 || !strings.HasPrefix(r.body, "invalid_tag: ") {
				t.Fatalf("GET /api/segment/get/%s = %d %q, want 500 invalid_tag", name, r.status, r.body)
			}
			if r := authed(t, "PATCH", srv.url+"/api/tags/"+name, `{"step":5}`); r.status != 400 || errorCode(t, r) != leafd.EInvalidTag {
				t.Fatalf("PATCH /api/tags/%s = %d %q, want 400 invalid_tag", name, r.status, r.body)
			}
			if r := authed(t, "POST", srv.url+"/api/tags", `{"tag":"`+name+`"}`); r.status != 400 || errorCode(t, r) != leafd.EInvalidTag {
				t.Fatalf("POST of tag %q = %d %q, want 400 invalid_tag", name, r.status, r.body)
			}
		}
		r := authed(t, "GET", srv.url+"/api/tags", "")
		var list struct {
			Tags []struct {
				Tag   string `json:"tag"`
				MaxID string `json:"max_id"`
				Step  int64  `json:"step"`
			} `json:"tags"`
		}
		if err := json.Unmarshal([]byte(r.body), &list); err != nil || len(list.Tags) != 2 ||
			list.Tags[0].Tag != "." || list.Tags[1].Tag != ".." || list.Tags[1].MaxID != "1" || list.Tags[1].Step != 10 {
			t.Fatalf("GET /api/tags = %d %q: the rows stay listed, untouched", r.status, r.body)
		}
	})
}

// Tag names are exact on every engine: where MySQL's default collation
// takes "T2" for "t2", PATCH /api/tags/T2 is 404 as on SQLite, never a
// change of t2, and POST of "T2" is refused, naming t2, rather than kept
// as a second tag on SQLite.
func TestTagNamesExact(t *testing.T) {
	forEachDriver(t, func(t *testing.T, driver, dsn string) {
		srv := newAdminServer(t, driver, dsn, token)
		if r := authed(t, "POST", srv.url+"/api/tags", `{"tag":"t2","step":50}`); r.status != 201 {
			t.Fatalf("POST t2 = %d %q", r.status, r.body)
		}
		r := authed(t, "PATCH", srv.url+"/api/tags/T2", `{"step":7}`)
		if r.status != 404 || errorCode(t, r) != leafd.EUnknownTag || !strings.Contains(r.body, `letter case, \"t2\"`) {
			t.Fatalf("PATCH /api/tags/T2 = %d %q, want 404 unknown_tag naming t2", r.status, r.body)
		}
		r = authed(t, "POST", srv.url+"/api/tags", `{"tag":"T2"}`)
		if r.status != 409 || errorCode(t, r) != leafd.ETagExists ||
			!strings.Contains(r.body, `a tag that differs only in letter case, \"t2\", exists; tag names are compared without case on MySQL`) {
			t.Fatalf("POST T2 = %d %q, want 409 tag_exists naming t2", r.status, r.body)
		}
		if r := do(t, "GET", srv.url+"/segment/T2"); r.status != 404 || errorCode(t, r) != leafd.EUnknownTag {
			t.Fatalf("GET /segment/T2 = %d %q, want 404 unknown_tag", r.status, r.body)
		}
		if r := do(t, "GET", srv.url+"/segment/t2"); r.status != 200 || r.body != "1\n" {
			t.Fatalf("GET /segment/t2 = %d %q, want its first ID", r.status, r.body)
		}
		tags, err := srv.store.ListTags(context.Background())
		if err != nil || len(tags) != 1 || tags[0].Name != "t2" || tags[0].Step != 50 {
			t.Fatalf("tags after the requests for T2 = %+v, %v; want t2 alone, step 50", tags, err)
		}
	})
}
