package http_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/leafd/leafd"
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
			// escaped or not, beside parameters of the client's own.
			for _, query := range []string{"count=3", "format=text&count=3", "count=3&_=1700000000&_=2", "c%6Funt=3", "count=3&&"} {
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

// The Leaf-compatible routes take no query and read none: whatever the
// client sends there is ignored, as before.
func TestLeafRoutesIgnoreQuery(t *testing.T) {
	seg, _ := newServer(t, map[string]int64{"order": 1})
	sf, _ := newSnowflakeServer(t)
	for _, u := range []string{seg.URL + "/api/segment/get/order?x=1;y=2&x=3", sf.URL + "/api/snowflake/get/k?count=1&count=2"} {
		if r := do(t, "GET", u); r.status != 200 {
			t.Fatalf("GET %s = %d %q", u, r.status, r.body)
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
