package http_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
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

// repairBody is the answer of POST /api/tags/{tag}/repair.
type repairBody struct {
	Tag           string `json:"tag"`
	MaxID         string `json:"max_id"`
	Step          int64  `json:"step"`
	UpdateTime    string `json:"update_time"`
	Repaired      bool   `json:"repaired"`
	RaisedFrom    string `json:"raised_from"`
	HighWaterMark string `json:"high_water_mark"`
}

func decodeRepair(t *testing.T, r response) repairBody {
	t.Helper()
	decodeTag(t, r) // the tag as the other admin routes answer it
	var b repairBody
	if err := json.Unmarshal([]byte(r.body), &b); err != nil {
		t.Fatalf("body %q: %v", r.body, err)
	}
	return b
}

// A tag rewound by an UPDATE, and one deleted and created again, are
// refused with tag_rewound whose message names the repair action first and
// the SQL second; POST /api/tags/{tag}/repair raises max_id to the mark
// (200, raised_from), logs it at WARN with the caller, and the tag serves
// from the mark on without an ID issued twice. Repairing again changes
// nothing (200, repaired false). Unknown and invalid tags, and requests
// without the token, are refused; nothing is lowered.
func TestRepairTag(t *testing.T) {
	forEachDriver(t, func(t *testing.T, driver, dsn string) {
		s := openAdminStore(t, driver, dsn)
		a := startAllocator(t, s, segment.Config{MaxStep: 100, WaitTimeout: time.Second, TagRefresh: time.Hour,
			MissTTL: time.Millisecond, Logger: quiet})
		var logs syncBuffer
		hs := httptest.NewServer(leafhttp.New(leafhttp.Config{
			Segment: a, Tags: s, AdminToken: token, MaxStep: 5000, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		}).Handler())
		t.Cleanup(hs.Close)
		srv := hs.URL
		raw := openRaw(t, driver, dsn)
		exec := func(q string) {
			t.Helper()
			if _, err := raw.Exec(q); err != nil {
				t.Fatal(err)
			}
		}
		mark := func(tag string) int64 {
			t.Helper()
			var m int64
			if err := raw.QueryRow("SELECT max_id FROM leafd_tag_highwater WHERE biz_tag = '" + tag + "'").Scan(&m); err != nil {
				t.Fatal(err)
			}
			return m
		}
		maxID := func(tag string) int64 {
			t.Helper()
			var m int64
			if err := raw.QueryRow("SELECT max_id FROM leaf_alloc WHERE biz_tag = '" + tag + "'").Scan(&m); err != nil {
				t.Fatal(err)
			}
			return m
		}
		issued := map[string]bool{}
		last := map[string]int64{}
		// record checks an ID of tag: never issued twice, only growing.
		record := func(tag, f string) int64 {
			t.Helper()
			id, err := strconv.ParseInt(f, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			if key := tag + "/" + f; issued[key] || id <= last[tag] {
				t.Fatalf("tag %s: ID %d issued twice or out of order (last %d)", tag, id, last[tag])
			}
			issued[tag+"/"+f], last[tag] = true, id
			return id
		}
		// take asks for n IDs and returns the first.
		take := func(tag string, n int) (first int64) {
			t.Helper()
			r := do(t, "GET", srv+"/segment/"+tag+"?count="+strconv.Itoa(n))
			if r.status != 200 {
				t.Fatalf("GET /segment/%s = %d %s", tag, r.status, r.body)
			}
			for i, f := range strings.Fields(r.body) {
				if id := record(tag, f); i == 0 {
					first = id
				}
			}
			return first
		}
		// rewound drains the tag's buffers until it answers tag_rewound,
		// and checks the message.
		rewound := func(tag string) {
			t.Helper()
			for range 1000 { // at most two ranges of segment.max_step (100) buffered
				r := do(t, "GET", srv+"/segment/"+tag)
				if r.status == 200 {
					record(tag, strings.TrimSpace(r.body)) // buffered before the rewind: fine
					continue
				}
				if r.status != 503 || errorCode(t, r) != leafd.ETagRewound {
					t.Fatalf("GET of the rewound tag %s = %d %s, want 503 tag_rewound", tag, r.status, r.body)
				}
				action := strings.Index(r.body, "POST /api/tags/"+tag+"/repair")
				sqlAt := strings.Index(r.body, "UPDATE leaf_alloc SET max_id = ")
				if action < 0 || sqlAt < action || !strings.Contains(r.body, "leafd tag repair "+tag) {
					t.Fatalf("tag_rewound message %s: want the repair action first, then the SQL", r.body)
				}
				return
			}
			t.Fatalf("tag %s was never refused after its rewind", tag)
		}
		for _, tag := range []string{"order", "pay"} {
			if r := authed(t, "POST", srv+"/api/tags", `{"tag":"`+tag+`","step":10}`); r.status != 201 {
				t.Fatalf("POST /api/tags = %d %s", r.status, r.body)
			}
		}
		take("order", 25)
		take("pay", 5)

		// Not rewound: 200, nothing changed (a preload may move max_id on
		// meanwhile, never the repair).
		before := maxID("order")
		r := authed(t, "POST", srv+"/api/tags/order/repair", "")
		if b := decodeRepair(t, r); r.status != 200 || b.Repaired || b.RaisedFrom != "" || b.MaxID != b.HighWaterMark || b.Tag != "order" || maxID("order") < before {
			t.Fatalf("repair of a tag that is not rewound = %d %s, want 200 unchanged (max_id was %d)", r.status, r.body, before)
		}

		exec("UPDATE leaf_alloc SET max_id = 1 WHERE biz_tag = 'order'")
		rewound("order")
		m := mark("order")
		if r := send(t, "POST", srv+"/api/tags/order/repair", ""); r.status != 401 || errorCode(t, r) != leafd.EUnauthorized {
			t.Fatalf("repair without the token = %d %s, want 401", r.status, r.body)
		}
		if got := maxID("order"); got != 1 {
			t.Fatalf("a refused repair changed max_id to %d", got)
		}
		r = authed(t, "POST", srv+"/api/tags/order/repair", "")
		b := decodeRepair(t, r)
		if r.status != 200 || !b.Repaired || b.RaisedFrom != "1" || b.MaxID != strconv.FormatInt(m, 10) || b.HighWaterMark != b.MaxID || b.Step != 10 {
			t.Fatalf("repair of a rewound tag = %d %s, want 200 raised from 1 to %d", r.status, r.body, m)
		}
		if got := maxID("order"); got != m {
			t.Fatalf("max_id %d after the repair, want the mark %d", got, m)
		}
		want := fmt.Sprintf(`level=WARN msg="admin: tag repaired" tag=order old_max_id=1 max_id=%d high_water_mark=%d by=127.0.0.1`, m, m)
		if !strings.Contains(logs.String(), want) {
			t.Fatalf("admin log %q does not hold %q", logs.String(), want)
		}
		if first := take("order", 30); first != m {
			t.Fatalf("after the repair the first ID is %d, want the mark %d", first, m)
		}
		// Again: nothing to do, nothing lowered.
		now := maxID("order")
		r = authed(t, "POST", srv+"/api/tags/order/repair", "")
		if b := decodeRepair(t, r); r.status != 200 || b.Repaired || b.MaxID != b.HighWaterMark || maxID("order") < now {
			t.Fatalf("second repair = %d %s, want 200 unchanged (max_id was %d)", r.status, r.body, now)
		}

		// Deleted, and created again by SQL with max_id 1.
		exec("DELETE FROM leaf_alloc WHERE biz_tag = 'pay'")
		if err := a.Refresh(context.Background()); err != nil {
			t.Fatal(err)
		}
		if r := authed(t, "POST", srv+"/api/tags/pay/repair", ""); r.status != 404 || errorCode(t, r) != leafd.EUnknownTag {
			t.Fatalf("repair of a deleted tag = %d %s, want 404 unknown_tag", r.status, r.body)
		}
		exec("INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('pay', 1, 10)")
		rewound("pay")
		m = mark("pay")
		r = authed(t, "POST", srv+"/api/tags/pay/repair", "")
		if b := decodeRepair(t, r); r.status != 200 || !b.Repaired || b.RaisedFrom != "1" || b.MaxID != strconv.FormatInt(m, 10) {
			t.Fatalf("repair of a tag created again = %d %s, want 200 raised from 1 to %d", r.status, r.body, m)
		}
		if first := take("pay", 5); first != m {
			t.Fatalf("after the repair the first ID of pay is %d, want the mark %d", first, m)
		}

		for path, code := range map[string]string{
			"/api/tags/nope/repair":  leafd.EUnknownTag,
			"/api/tags/ORDER/repair": leafd.EUnknownTag,
			"/api/tags/a%20b/repair": leafd.EInvalidTag,
		} {
			if r := authed(t, "POST", srv+path, ""); errorCode(t, r) != code {
				t.Errorf("POST %s = %d %s, want %s", path, r.status, r.body, code)
			}
		}
		if r := authed(t, "GET", srv+"/api/tags/order/repair", ""); r.status != 405 {
			t.Errorf("GET of the repair route = %d %s, want 405", r.status, r.body)
		}
	})
}

// onlyTags is a store of the admin routes that keeps no high-water marks,
// and says so.
type onlyTags struct{ leafhttp.Tags }

func (onlyTags) RepairTag(context.Context, string) (store.Repair, error) {
	return store.Repair{}, leafd.Errorf(leafd.ERangeUnsupported,
		"this server's store keeps no high-water marks: there is nothing to repair; raise max_id by SQL if you must")
}

// Without the admin token configured the route is switched off; a store
// that cannot repair answers 409 range_unsupported, saying so.
func TestRepairTagRefused(t *testing.T) {
	s := openAdminStore(t, store.DefaultDriver(), testdb.DSN(t, store.DefaultDriver()))
	off := httptest.NewServer(leafhttp.New(leafhttp.Config{Tags: s, Logger: quiet}).Handler())
	t.Cleanup(off.Close)
	if r := authed(t, "POST", off.URL+"/api/tags/order/repair", ""); r.status != 403 || errorCode(t, r) != leafd.EAdminDisabled {
		t.Fatalf("repair with the admin routes off = %d %s, want 403 admin_disabled", r.status, r.body)
	}
	if _, err := s.CreateTag(context.Background(), leafd.Tag{Name: "order", MaxID: 1, Step: 10}); err != nil {
		t.Fatal(err)
	}
	plain := httptest.NewServer(leafhttp.New(leafhttp.Config{Tags: onlyTags{s}, AdminToken: token, Logger: quiet}).Handler())
	t.Cleanup(plain.Close)
	r := authed(t, "POST", plain.URL+"/api/tags/order/repair", "")
	if r.status != 409 || errorCode(t, r) != leafd.ERangeUnsupported || !strings.Contains(r.body, "no high-water marks") {
		t.Fatalf("repair on a store without marks = %d %s, want 409 range_unsupported", r.status, r.body)
	}
}
