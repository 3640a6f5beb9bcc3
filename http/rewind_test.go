package http_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leafd/leafd"
	leafhttp "github.com/leafd/leafd/http"
	"github.com/leafd/leafd/internal/testkit/testdb"
	leafmetrics "github.com/leafd/leafd/metrics"
	"github.com/leafd/leafd/segment"
)

// A tag deleted and created again by SQL with max_id 1, as a Leaf user
// would, is refused with 503 tag_rewound, whose message gives the UPDATE that repairs it, on the
// native and the Leaf route alike; the tag shows failing with the cause in
// /api/state, /metrics counts the refusal, and the server stays ready.
// After the UPDATE of the message the tag serves from the high-water mark
// on. No ID is issued twice.
func TestRewoundTagRecreated(t *testing.T) {
	forEachDriver(t, func(t *testing.T, driver, dsn string) {
		s := openAdminStore(t, driver, dsn)
		m := leafmetrics.New()
		a := startAllocator(t, s, segment.Config{MaxStep: 100, WaitTimeout: time.Second, TagRefresh: time.Hour,
			MissTTL: time.Millisecond, Logger: quiet, OnLoad: m.ObserveLoad})
		hs := httptest.NewServer(leafhttp.New(leafhttp.Config{
			Segment: a, Tags: s, AdminToken: token, MaxStep: 5000, Logger: quiet, Metrics: m,
		}).Handler())
		t.Cleanup(hs.Close)
		srv := hs.URL
		raw := openRaw(t, driver, dsn)

		issued := map[int64]bool{}
		take := func(n int) (first int64) {
			t.Helper()
			r := do(t, "GET", srv+"/segment/order?count="+strconv.Itoa(n))
			if r.status != 200 {
				t.Fatalf("GET /segment/order = %d %s", r.status, r.body)
			}
			for i, f := range strings.Fields(r.body) {
				id, err := strconv.ParseInt(f, 10, 64)
				if err != nil {
					t.Fatal(err)
				}
				if issued[id] {
					t.Fatalf("ID %d issued twice", id)
				}
				issued[id] = true
				if i == 0 {
					first = id
				}
			}
			return first
		}
		for _, tag := range []string{"order", "other"} { // a refresh that lists no tag at all is ignored
			if r := authed(t, "POST", srv+"/api/tags", `{"tag":"`+tag+`","step":10}`); r.status != 201 {
				t.Fatalf("POST /api/tags = %d %s", r.status, r.body)
			}
		}
		take(25) // IDs 1..25 from ranges up to 31 (the first range and a preload)
		if _, err := raw.Exec("DELETE FROM leaf_alloc WHERE biz_tag = 'order'"); err != nil {
			t.Fatal(err)
		}
		if err := a.Refresh(context.Background()); err != nil {
			t.Fatal(err)
		}
		if r := do(t, "GET", srv+"/segment/order"); r.status != 404 {
			t.Fatalf("GET of a deleted tag = %d %s, want 404", r.status, r.body)
		}
		if _, err := raw.Exec("INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('order', 1, 10)"); err != nil {
			t.Fatal(err)
		}
		// The tag list read again, as every tag_refresh does: the 404 above
		// left the name in the lookup's 1 s negative cache.
		if err := a.Refresh(context.Background()); err != nil {
			t.Fatal(err)
		}
		var mark int64
		if err := raw.QueryRow("SELECT max_id FROM leafd_tag_highwater WHERE biz_tag = 'order'").Scan(&mark); err != nil {
			t.Fatal(err)
		}
		repair := "UPDATE leaf_alloc SET max_id = " + strconv.FormatInt(mark, 10) + " WHERE biz_tag = 'order'"

		r := do(t, "GET", srv+"/segment/order")
		if r.status != 503 || errorCode(t, r) != leafd.ETagRewound || !strings.Contains(r.body, repair) {
			t.Fatalf("GET of the re-created tag = %d %s, want 503 tag_rewound saying %q", r.status, r.body, repair)
		}
		if r := do(t, "GET", srv+"/api/segment/get/order"); r.status != 500 || !strings.HasPrefix(r.body, "tag_rewound: ") {
			t.Fatalf("Leaf route = %d %s, want 500 tag_rewound", r.status, r.body)
		}
		if r := do(t, "GET", srv+"/readyz"); r.status != 200 {
			t.Fatalf("/readyz with a rewound tag = %d %s, want 200", r.status, r.body)
		}
		var state struct {
			Segment struct {
				Tags []struct {
					Tag, State, Error string
				} `json:"tags"`
			} `json:"segment"`
		}
		if err := json.Unmarshal([]byte(do(t, "GET", srv+"/api/state?tag=order").body), &state); err != nil {
			t.Fatal(err)
		}
		if ts := state.Segment.Tags; len(ts) != 1 || ts[0].State != "failing" || !strings.Contains(ts[0].Error, "rewound") {
			t.Fatalf("/api/state of the rewound tag: %+v", ts)
		}
		if body := do(t, "GET", srv+"/metrics").body; !regexp.MustCompile(`(?m)^leafd_segment_rewound_total [1-9]`).MatchString(body) {
			t.Fatalf("/metrics does not count the refusal:\n%s", body)
		}

		if _, err := raw.Exec(repair); err != nil {
			t.Fatal(err)
		}
		if first := take(30); first != mark {
			t.Fatalf("after the repair the first ID is %d, want the mark %d", first, mark)
		}
	})
}

// openRaw opens a plain connection pool to the test's database, for the
// SQL an operator would run beside leafd (on SQLite waiting for the file's
// lock rather than failing at once).
func openRaw(t *testing.T, driver, dsn string) *sql.DB {
	t.Helper()
	return testdb.SQL(t, driver, dsn).DB
}
