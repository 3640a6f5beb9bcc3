package http_test

import (
	"context"
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
	"github.com/leafd/leafd/store/sharded"
)

// datedJSON is a tag as the admin routes answer it, with the fields of a
// dated tag; Has records which keys the answer holds.
type datedJSON struct {
	Tag, Format, Period, Zone string
	Digits                    int
	MaxStep                   int64 `json:"max_step"`
	Has                       map[string]bool
}

func decodeDated(t *testing.T, raw []byte) datedJSON {
	t.Helper()
	var d datedJSON
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s is not a tag: %v", raw, err)
	}
	if err := json.Unmarshal(raw, &keys); err != nil {
		t.Fatal(err)
	}
	d.Has = map[string]bool{}
	for k := range keys {
		d.Has[k] = true
	}
	return d
}

// A dated tag made through POST /api/tags is answered and listed with its
// period, zone, digits and max_step; its zone and max_step are left out
// when they are the defaults (UTC, segment.max_step), and digits is 6 when
// not given. Its first ID is the date of today in its zone followed by
// 000001; its ranges are checked by checkDatedRange.
func TestDatedTagOverHTTP(t *testing.T) {
	srv := newAdminServer(t, store.DefaultDriver(), testdb.DSN(t, store.DefaultDriver()), token)
	r := authed(t, "POST", srv.url+"/api/tags",
		`{"tag":"orders","format":"dated","period":"day","zone":"Asia/Shanghai","max_step":50}`)
	if r.status != 201 {
		t.Fatalf("POST of a dated tag = %d %s", r.status, r.body)
	}
	got := decodeDated(t, []byte(r.body))
	if got.Format != "dated" || got.Period != "day" || got.Zone != "Asia/Shanghai" || got.Digits != 6 || got.MaxStep != 50 {
		t.Fatalf("POST answered %s, want format dated, period day, zone Asia/Shanghai, digits 6, max_step 50", r.body)
	}
	r = authed(t, "POST", srv.url+"/api/tags", `{"tag":"monthly","format":"dated","period":"month","digits":4}`)
	if got := decodeDated(t, []byte(r.body)); r.status != 201 || got.Digits != 4 || got.Has["zone"] || got.Has["max_step"] {
		t.Fatalf("POST of a dated tag in UTC = %d %s, want digits 4, no zone and no max_step", r.status, r.body)
	}
	authed(t, "POST", srv.url+"/api/tags", `{"tag":"plain"}`)

	r = authed(t, "GET", srv.url+"/api/tags", "")
	var list struct{ Tags []json.RawMessage }
	if err := json.Unmarshal([]byte(r.body), &list); err != nil || len(list.Tags) != 3 {
		t.Fatalf("GET /api/tags = %d %s", r.status, r.body)
	}
	byName := map[string]datedJSON{}
	for _, raw := range list.Tags {
		d := decodeDated(t, raw)
		byName[d.Tag] = d
	}
	if o := byName["orders"]; o.Format != "dated" || o.Period != "day" || o.Zone != "Asia/Shanghai" || o.Digits != 6 || o.MaxStep != 50 {
		t.Errorf("GET /api/tags shows orders as %+v", o)
	}
	if m := byName["monthly"]; m.Period != "month" || m.Digits != 4 || m.Has["zone"] || m.Has["max_step"] {
		t.Errorf("GET /api/tags shows monthly as %+v", m)
	}
	for _, k := range []string{"digits", "period", "zone", "max_step"} {
		if byName["plain"].Has[k] {
			t.Errorf("GET /api/tags shows the sequential tag plain with %q: %s", k, r.body)
		}
	}

	// The first ID: today's date in Shanghai and counter 1. Midnight may
	// pass during the request: either day's date will do.
	shanghai, err := time.LoadLocation("Asia/Shanghai")
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now().In(shanghai).Format("20060102")
	r = do(t, "GET", srv.url+"/segment/orders")
	after := time.Now().In(shanghai).Format("20060102")
	if id := strings.TrimSpace(r.body); r.status != 200 || id != before+"000001" && id != after+"000001" {
		t.Fatalf("GET /segment/orders = %d %q, want %s000001", r.status, r.body, after)
	}
	checkDatedRange(t, srv.url, shanghai)
}

// checkDatedRange checks GET /segment/orders/range of the dated tag orders
// (day, in loc) and of the sequential tag plain. Without expiring=true the
// dated tag's range is 409 range_unsupported, saying to send it or to ask
// for count=N, and a bad value of it is 400 invalid_query; with it, the
// range holds today's numbers, with valid_ms until 20 ms before the day
// ends by the clock. The sequential tag's range has no valid_ms, with
// expiring=true or without.
func checkDatedRange(t *testing.T, url string, loc *time.Location) {
	t.Helper()
	r := do(t, "GET", url+"/segment/orders/range?size=10")
	var e struct {
		Error struct{ Code, Message string }
	}
	_ = json.Unmarshal([]byte(r.body), &e)
	if r.status != 409 || e.Error.Code != leafd.ERangeUnsupported ||
		!strings.Contains(e.Error.Message, "expiring=true") || !strings.Contains(e.Error.Message, "valid_ms") ||
		!strings.Contains(e.Error.Message, "/segment/orders?count=N") {
		t.Fatalf("GET /segment/orders/range without expiring=true = %d %s, want 409 range_unsupported naming expiring=true, valid_ms and count=N", r.status, r.body)
	}
	for _, q := range []string{"size=10&expiring=false", "size=10&expiring=yes", "size=10&expiring=true&expiring=true"} {
		if r := do(t, "GET", url+"/segment/orders/range?"+q); r.status != 400 || errorCode(t, r) != leafd.EInvalidQuery {
			t.Fatalf("GET /segment/orders/range?%s = %d %s, want 400 invalid_query", q, r.status, r.body)
		}
	}
	before := time.Now().In(loc)
	r = do(t, "GET", url+"/segment/orders/range?size=10&expiring=true")
	after := time.Now().In(loc)
	var got struct {
		Tag, Start, End string
		ValidMS         *int64 `json:"valid_ms"`
	}
	if err := json.Unmarshal([]byte(r.body), &got); r.status != 200 || err != nil || got.ValidMS == nil {
		t.Fatalf("GET /segment/orders/range?size=10&expiring=true = %d %s, want a range with valid_ms", r.status, r.body)
	}
	start, _ := strconv.ParseInt(got.Start, 10, 64)
	end, _ := strconv.ParseInt(got.End, 10, 64)
	day := func(t time.Time) int64 { y, m, d := t.Date(); return int64(y)*10000 + int64(m)*100 + int64(d) }
	if end-start != 10 || start/1_000_000 != (end-1)/1_000_000 || start/1_000_000 < day(before) || start/1_000_000 > day(after) {
		t.Fatalf("GET /segment/orders/range = %s: not 10 numbers of today", r.body)
	}
	y, m, d := after.Date()
	if start/1_000_000 == day(before) {
		y, m, d = before.Date()
	}
	end0 := time.Date(y, m, d+1, 0, 0, 0, 0, loc) // the end of the range's day
	hi := end0.Sub(before) - 20*time.Millisecond
	lo := end0.Sub(after) - 20*time.Millisecond - time.Millisecond
	if v := time.Duration(*got.ValidMS) * time.Millisecond; v < max(lo, time.Millisecond) || v > hi {
		t.Fatalf("valid_ms %d, want between %v and %v (20 ms before the end of the day)", *got.ValidMS, lo, hi)
	}
	for _, q := range []string{"size=10", "size=10&expiring=true"} {
		r = do(t, "GET", url+"/segment/plain/range?"+q)
		if r.status != 200 || strings.Contains(r.body, "valid_ms") {
			t.Fatalf("GET /segment/plain/range?%s = %d %s, want a range without valid_ms", q, r.status, r.body)
		}
	}
}

// A POST /api/tags body of a dated tag is refused, before the store is
// asked, when its fields do not make a tag that can be served, or name a
// field of a dated tag for another format.
func TestDatedTagRefused(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{`{"tag":"o","format":"dated"}`, `a dated tag needs a period: add "period":"day", "month" or "year"`},
		{`{"tag":"o","format":"dated","period":"week"}`, `period "week" is not known`},
		{`{"tag":"o","format":"dated","period":"day","zone":"Mars/Olympus"}`, `zone "Mars/Olympus" is not a time zone`},
		{`{"tag":"o","format":"dated","period":"day","zone":"Local"}`, `zone "Local" is not a time zone`},
		{`{"tag":"o","format":"dated","period":"day","digits":11}`, "use 1 to 10"},
		{`{"tag":"o","format":"dated","period":"month","digits":13}`, "use 1 to 12"},
		{`{"tag":"o","format":"dated","period":"year","digits":0}`, "use 1 to 14"},
		{`{"tag":"o","format":"dated","period":"day","max_step":0}`, "max_step 0 is out of range: use 1 to 5000"},
		{`{"tag":"o","format":"dated","period":"day","max_step":5001}`, "max_step 5001 is out of range: use 1 to 5000"},
		{`{"tag":"o","format":"dated","period":"day","max_step":"1"}`, `"max_step" must be a whole number from 1 to 5000, not a string`},
		{`{"tag":"o","format":"dated","period":1}`, `"period" must be a string: day, month or year, not a number`},
		{`{"tag":"o","period":"day"}`, `period, zone and max_step apply to a dated tag only`},
		{`{"tag":"o","format":"opaque","zone":"UTC"}`, `period, zone and max_step apply to a dated tag only`},
		{`{"tag":"o","format":"sequential","max_step":1}`, `period, zone and max_step apply to a dated tag only`},
		{`{"tag":"o","format":"daily"}`, `format "daily" is not known: use sequential (the default), opaque or dated`},
	} {
		_, err := leafhttp.ParseCreateTag(strings.NewReader(c.body), 5000)
		if leafd.ErrorCode(err) != leafd.EInvalidBody || !strings.Contains(leafd.ErrorMessage(err), c.want) {
			t.Errorf("%s: %v, want invalid_body saying %q", c.body, err, c.want)
		}
	}
	// The largest counters each period allows, and a year's tag in UTC.
	for _, c := range []struct {
		body string
		want leafd.Tag
	}{
		{`{"tag":"o","format":"dated","period":"day","digits":10,"max_step":1}`,
			leafd.Tag{Name: "o", Step: 1000, MaxID: 1, Format: "dated", Period: "day", Digits: 10, MaxStep: 1}},
		{`{"tag":"o","format":"dated","period":"month","digits":12,"zone":"America/New_York"}`,
			leafd.Tag{Name: "o", Step: 1000, MaxID: 1, Format: "dated", Period: "month", Digits: 12, Zone: "America/New_York"}},
		{`{"tag":"o","format":"dated","period":"year","step":10}`,
			leafd.Tag{Name: "o", Step: 10, MaxID: 1, Format: "dated", Period: "year", Digits: segment.DefaultDatedDigits}},
	} {
		got, err := leafhttp.ParseCreateTag(strings.NewReader(c.body), 5000)
		if err != nil || got != c.want {
			t.Errorf("%s: %+v, %v; want %+v", c.body, got, err, c.want)
		}
	}
}

// A sharded store holds no dated tag: POST /api/tags refuses it with
// invalid_body, and nothing is created.
func TestDatedTagShardedRefused(t *testing.T) {
	driver := store.DefaultDriver()
	s, err := sharded.Open(driver, []string{testdb.DSN(t, driver), testdb.DSN(t, driver)}, sharded.Options{Slots: 4, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx := context.Background()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	a := startAllocator(t, s, segment.Config{MaxStep: 100, WaitTimeout: 5 * time.Second, TagRefresh: time.Hour, Logger: quiet})
	hs := httptest.NewServer(leafhttp.New(leafhttp.Config{Segment: a, Tags: s, AdminToken: token, MaxStep: 5000, Logger: quiet}).Handler())
	t.Cleanup(hs.Close)

	r := authed(t, "POST", hs.URL+"/api/tags", `{"tag":"orders","format":"dated","period":"day"}`)
	if r.status != 400 || errorCode(t, r) != leafd.EInvalidBody {
		t.Fatalf("POST of a dated tag to a sharded store = %d %s, want 400 invalid_body", r.status, r.body)
	}
	if tags, err := s.ListTags(ctx); err != nil || len(tags) != 0 {
		t.Fatalf("tags after the refusal: %+v, %v", tags, err)
	}
}
