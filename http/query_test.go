package http_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/internal/testkit/testdb"
	"github.com/leafd/leafd/store"
)

// The query of the ID routes is read whole, or not at all: a repeated
// count or format, a ';' or a malformed escape is refused with 400 before
// any ID is taken, where url.ParseQuery would have dropped or ignored part
// of it and the route answered with a default (count=5;format=json: one
// ID, as text).
func TestIDRouteQuery(t *testing.T) {
	seg, _ := newServer(t, map[string]int64{"order": 1})
	sf, _ := newSnowflakeServer(t)
	for _, route := range []struct{ name, url string }{
		{"Segment", seg.URL + "/segment/order"},
		{"Snowflake", sf.URL + "/snowflake"},
	} {
		t.Run(route.name, func(t *testing.T) {
			for _, tc := range []struct {
				name, query, code, message string
			}{
				{"CountRepeated", "count=1&count=2", leafd.EInvalidCount, "count is repeated"},
				{"CountRepeatedSame", "count=3&format=json&count=3", leafd.EInvalidCount, "count is repeated"},
				{"CountRepeatedEscaped", "count=3&c%6Funt=3", leafd.EInvalidCount, "count is repeated"},
				{"FormatRepeated", "format=json&format=json", leafd.EInvalidQuery, "format is repeated"},
				{"FormatRepeatedWithCount", "count=2&format=text&format=json", leafd.EInvalidQuery, "format is repeated"},
				{"Semicolon", "count=5;format=json", leafd.EInvalidQuery, `";", which is not a separator`},
				{"SemicolonElsewhere", "count=5&cb=a;b", leafd.EInvalidQuery, `";", which is not a separator`},
				{"BadEscape", "count=%zz", leafd.EInvalidQuery, "malformed %-escape"},
			} {
				t.Run(tc.name, func(t *testing.T) {
					r := do(t, "GET", route.url+"?"+tc.query)
					var body struct {
						Error struct{ Code, Message string }
					}
					_ = json.Unmarshal([]byte(r.body), &body)
					if r.status != 400 || errorCode(t, r) != tc.code || !strings.Contains(body.Error.Message, tc.message) {
						t.Fatalf("GET ?%s = %d %q, want 400 %s saying %q", tc.query, r.status, r.body, tc.code, tc.message)
					}
				})
			}
			// What still works: the parameters once each, in any order,
			// escaped or not, with empty pairs between them.
			for _, query := range []string{"count=3", "format=text&count=3", "c%6Funt=3", "count=3&&", "&count=3&format=text&"} {
				r := do(t, "GET", route.url+"?"+query)
				if r.status != 200 || strings.Count(r.body, "\n") != 3 || !strings.HasPrefix(r.contentType, "text/plain") {
					t.Fatalf("GET ?%s = %d %q %q, want three IDs as text", query, r.status, r.contentType, r.body)
				}
			}
			r := do(t, "GET", route.url+"?count=2&format=json")
			if r.status != 200 || !strings.HasPrefix(r.contentType, "application/json") || strings.Count(r.body, `"`) < 4 {
				t.Fatalf("GET ?count=2&format=json = %d %q %q", r.status, r.contentType, r.body)
			}
			// format wins over Accept, and an empty format means text.
			r = do(t, "GET", route.url+"?format=", "Accept", "application/json")
			if r.status != 200 || !strings.HasPrefix(r.contentType, "text/plain") {
				t.Fatalf("GET ?format= with Accept: application/json = %d %q", r.status, r.contentType)
			}
		})
	}
}

// The native ID routes take only their own parameters: any other, a cache
// buster or a token included, is 400 invalid_query naming it and what the
// route takes, before any ID is taken.
func TestIDRouteUnknownParams(t *testing.T) {
	seg, _ := newServer(t, map[string]int64{"order": 1})
	sf, _ := newSnowflakeServer(t)
	for _, tc := range []struct {
		url, query, message string
	}{
		{seg.URL + "/segment/order", "count=2&foo=bar", `"foo" is not one this route takes: it takes count, format`},
		{seg.URL + "/segment/order", "_=1700000000", `"_" is not one this route takes: it takes count, format`},
		{seg.URL + "/segment/order", "size=3", `"size" is not one this route takes: it takes count, format`},
		{seg.URL + "/segment/order", "Count=3", `"Count" is not one this route takes`},
		{seg.URL + "/segment/order", "=3", `"" is not one this route takes`},
		{seg.URL + "/segment/order", "f%6F%6F=1", `"foo" is not one this route takes`},
		{seg.URL + "/segment/order", "count=2&token=secret", "Authorization: Bearer"},
		{seg.URL + "/segment/order/range", "size=2&count=2", `"count" is not one this route takes: it takes format, size, expiring`},
		{seg.URL + "/segment/order/range", "size=2&x", `"x" is not one this route takes: it takes format, size, expiring`},
		{seg.URL + "/segment/order/range", "token=a&size=2", "Authorization: Bearer"},
		{sf.URL + "/snowflake", "count=2&foo=bar", `"foo" is not one this route takes: it takes count, format`},
		{sf.URL + "/snowflake", "token=a", "Authorization: Bearer"},
	} {
		r := do(t, "GET", tc.url+"?"+tc.query)
		var body struct {
			Error struct{ Code, Message string }
		}
		_ = json.Unmarshal([]byte(r.body), &body)
		if r.status != 400 || body.Error.Code != leafd.EInvalidQuery || !strings.Contains(body.Error.Message, tc.message) {
			t.Errorf("GET %s?%s = %d %q, want 400 invalid_query saying %q", tc.url, tc.query, r.status, r.body, tc.message)
		}
	}
	// No ID was taken by the refusals: the next is the tag's first.
	if r := do(t, "GET", seg.URL+"/segment/order"); r.status != 200 || r.body != "1\n" {
		t.Fatalf("GET /segment/order after the refusals = %d %q, want the first ID", r.status, r.body)
	}
	// The range route still takes format (its answer is JSON either way).
	if r := do(t, "GET", seg.URL+"/segment/order/range?size=2&format=json"); r.status != 200 || !strings.HasPrefix(r.contentType, "application/json") {
		t.Fatalf("GET /segment/order/range?size=2&format=json = %d %q", r.status, r.body)
	}
}

// The Leaf-compatible routes read their query as Leaf does, ignoring what
// they do not take (drop-in clients send their own parameters), but a
// malformed escape or a repeated token is refused, in the routes' text
// shape.
func TestLeafRoutesQuery(t *testing.T) {
	seg, _ := newServer(t, map[string]int64{"order": 1})
	sf, _ := newSnowflakeServer(t)
	for _, base := range []string{seg.URL + "/api/segment/get/order", sf.URL + "/api/snowflake/get/k"} {
		for _, q := range []string{"x=1;y=2&x=3", "count=1&count=2", "token=a", "_=1&_=2&format=json"} {
			if r := do(t, "GET", base+"?"+q); r.status != 200 {
				t.Errorf("GET %s?%s = %d %q, want 200", base, q, r.status, r.body)
			}
		}
		for _, q := range []string{"token=a&token=b", "token=a&t%6Fken=b", "x=%zz", "x=1&y=%", "%g1=2"} {
			r := do(t, "GET", base+"?"+q)
			if r.status != 500 || !strings.HasPrefix(r.contentType, "text/plain") || !strings.HasPrefix(r.body, leafd.EInvalidQuery+": ") {
				t.Errorf("GET %s?%s = %d %q %q, want 500 text invalid_query", base, q, r.status, r.contentType, r.body)
			}
		}
	}
}

// With a query string the single-ID routes still allocate no more than a
// bare gin handler (the scan builds no url.Values), and a batch costs no
// allocation for its query.
func TestIDRouteQueryAllocates(t *testing.T) {
	if testing.CoverMode() != "" {
		t.Skip("coverage counters change allocation counts")
	}
	gin.SetMode(gin.ReleaseMode)
	bare := gin.New()
	bare.GET("/segment/:tag", func(c *gin.Context) { c.Data(http.StatusOK, "text/plain; charset=utf-8", []byte("1\n")) })
	floor := allocs(t, bare, "/segment/bench")
	seg, sf := benchSegmentT(t), benchSnowflakeT(t)
	for _, tc := range []struct {
		h    http.Handler
		path string
	}{
		{seg, "/segment/bench?count=1"},
		{seg, "/segment/bench?count=1&format=json"},
		{sf, "/snowflake?count=1&format=json"},
	} {
		if got := allocs(t, tc.h, tc.path); got > floor {
			t.Errorf("GET %s: %v allocations a request, more than the bare gin handler's %v", tc.path, got, floor)
		}
	}
}

// The routes other than the ID routes refuse a query that url.ParseQuery
// would read in part: a parameter given twice (the handler would take the
// first value), a ';', a malformed escape. The admin routes check the
// token first.
func TestQueryOnce(t *testing.T) {
	srv := newAdminServer(t, store.DefaultDriver(), testdb.DSN(t, store.DefaultDriver()), token)
	sf, _ := newSnowflakeServer(t)
	for _, tc := range []struct {
		url        string
		auth       bool
		status     int
		code, says string
	}{
		{sf.URL + "/decodeSnowflakeId?snowflakeId=1&snowflakeId=2", false, 400, leafd.EInvalidID, `"snowflakeId" is repeated`},
		{sf.URL + "/decodeSnowflakeId?snowflakeId=1;x=2", false, 400, leafd.EInvalidQuery, `";", which is not a separator`},
		{sf.URL + "/decodeSnowflakeId?snowflakeId=%zz", false, 400, leafd.EInvalidQuery, "malformed %-escape"},
		{sf.URL + "/snowflake/1?a=1&a=2", false, 400, leafd.EInvalidQuery, `"a" is repeated`},
		{sf.URL + "/snowflake/at/0?a=%", false, 400, leafd.EInvalidQuery, "malformed %-escape"},
		{srv.url + "/api/state?limit=1&limit=2", false, 400, leafd.EInvalidQuery, `"limit" is repeated`},
		{srv.url + "/api/state?l%69mit=1&limit=1", false, 400, leafd.EInvalidQuery, `"limit" is repeated`},
		{srv.url + "/api/state?limit=1;sort=rate", false, 400, leafd.EInvalidQuery, `";", which is not a separator`},
		{srv.url + "/dashboard?poll=1&poll=2", false, 400, leafd.EInvalidQuery, `"poll" is repeated`},
		{srv.url + "/?poll=1&poll=2", false, 400, leafd.EInvalidQuery, `"poll" is repeated`},
		{srv.url + "/metrics?x&x", false, 400, leafd.EInvalidQuery, `"x" is repeated`},
		{srv.url + "/healthz?x=1&x=1", false, 400, leafd.EInvalidQuery, `"x" is repeated`},
		{srv.url + "/readyz?x=%zz", false, 400, leafd.EInvalidQuery, "malformed %-escape"},
		{srv.url + "/api/tags?x=1&x=2", false, 401, leafd.EUnauthorized, ""},
		{srv.url + "/api/tags?x=1&x=2", true, 400, leafd.EInvalidQuery, `"x" is repeated`},
		{srv.url + "/api/tokens?x=%zz", true, 400, leafd.EInvalidQuery, "malformed %-escape"},
	} {
		var r response
		if tc.auth {
			r = authed(t, "GET", tc.url, "")
		} else {
			r = do(t, "GET", tc.url)
		}
		var body struct {
			Error struct{ Code, Message string }
		}
		_ = json.Unmarshal([]byte(r.body), &body)
		if r.status != tc.status || body.Error.Code != tc.code || !strings.Contains(body.Error.Message, tc.says) {
			t.Errorf("GET %s = %d %q, want %d %s saying %q", tc.url, r.status, r.body, tc.status, tc.code, tc.says)
		}
	}
	// Each parameter once still works.
	for _, u := range []string{
		sf.URL + "/decodeSnowflakeId?snowflakeId=1", srv.url + "/api/state?limit=1&sort=rate", srv.url + "/healthz?x=1&y=1&&",
		srv.url + "/metrics?name%5B%5D=x",
	} {
		if r := do(t, "GET", u); r.status != 200 {
			t.Errorf("GET %s = %d %q, want 200", u, r.status, r.body)
		}
	}
}
