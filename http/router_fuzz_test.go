package http_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leafd/leafd"
	leafhttp "github.com/leafd/leafd/http"
	"github.com/leafd/leafd/internal/testkit/testdb"
	"github.com/leafd/leafd/segment"
	"github.com/leafd/leafd/snowflake"
	"github.com/leafd/leafd/store"
)

// routerFuzzServer is the whole router of a server with both modes, the
// admin routes and the token routes over SQLite, and the tags "order"
// and "fz".
func routerFuzzServer(tb testing.TB) http.Handler {
	tb.Helper()
	s, err := store.Open(store.DefaultDriver(), testdb.DSN(tb, store.DefaultDriver()))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	ctx := context.Background()
	if err := s.Migrate(ctx); err != nil {
		tb.Fatal(err)
	}
	for _, name := range []string{"order", "fz"} {
		if _, err := s.CreateTag(ctx, leafd.Tag{Name: name, MaxID: 1, Step: 100}); err != nil {
			tb.Fatal(err)
		}
	}
	a := startAllocator(tb, s, segment.Config{MaxStep: 10_000, MaxBatch: 100, MaxRange: 1000, WaitTimeout: time.Second, TagRefresh: time.Hour, Logger: quiet})
	g, err := snowflake.New(snowflake.Settings{WorkerID: 3, MaxBatch: 100, Logger: quiet})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { g.Close() })
	return leafhttp.New(leafhttp.Config{
		Segment: a, Snowflake: g, Store: s, Tags: s, Tokens: s, AdminToken: token, Logger: quiet,
	}).Handler()
}

// fuzzHeaders are the headers the fuzzed value goes in.
var fuzzHeaders = []string{"Accept", "Authorization", "Content-Type", "X-Fuzz"}

// The Leaf-compatible ID routes, whose errors are text by contract.
var leafRoute = regexp.MustCompile(`^/api/(segment|snowflake)/get/[^/]+$`)

// FuzzRouter drives the whole router with a fuzzed method, path, query,
// header value and body, read by net/http's own request parser as the
// server reads them (what it refuses never reaches the router: see
// TestErrorsBelowTheRouter). Whatever the request: no panic, no 500; an
// error answer carries the JSON error shape with a code of the contract
// (errors.go) whose status is the answer's, except the Leaf-compatible
// routes' text `code: message`; and a 2xx answer of an ID route parses.
func FuzzRouter(f *testing.F) {
	for _, seed := range []struct {
		method, path, query string
		header              uint8
		value, body         string
	}{
		{"GET", "/segment/order", "count=5;format=json", 0, "", ""},
		{"GET", "/segment/order", "count=3&count=abc", 0, "", ""},
		{"GET", "/segment/order", "count=abc&count=3", 0, "", ""},
		{"GET", "/segment/order", "format=json&format=text", 0, "application/json", ""},
		{"GET", "/segment/order", "count=3&format=json", 0, "", ""},
		{"GET", "/segment/order", "count=99999999999999999999", 0, "", ""},
		{"GET", "/segment/order", "count=100", 0, "application/json", ""},
		{"GET", "/segment/order", "count=2&foo=bar", 0, "", ""},
		{"GET", "/segment/order", "token=abc", 1, "Bearer x", ""},
		{"GET", "/segment/.", "", 0, "", ""},
		{"GET", "/segment/..", "count=2", 0, "", ""},
		{"GET", "/segment/%zz", "", 0, "", ""},
		{"GET", "/segment/a%00b", "", 0, "", ""},
		{"GET", "/segment/order", "count=%zz", 0, "", ""},
		{"GET", "/segment/order/range", "size=10", 0, "", ""},
		{"GET", "/segment/order/range", "size=10&size=10", 0, "", ""},
		{"GET", "/segment/order/range", "size=99999999999999999999999", 0, "", ""},
		{"GET", "/segment/order/range", "size=5&count=2", 0, "", ""},
		{"HEAD", "/segment/fz", "count=2", 0, "", ""},
		{"GET", "/snowflake", "count=3&format=json", 0, "", ""},
		{"GET", "/snowflake", "count=5;format=json", 0, "", ""},
		{"GET", "/snowflake", "x=1", 0, "", ""},
		{"GET", "/snowflake/123456789", "", 0, "", ""},
		{"GET", "/snowflake/at/2026-01-01T00:00:00Z", "", 0, "", ""},
		{"GET", "/decodeSnowflakeId", "snowflakeId=1&snowflakeId=2", 0, "", ""},
		{"GET", "/api/segment/get/order", "x=1;y=2&x=3", 0, "", ""},
		{"GET", "/api/segment/get/..", "", 0, "", ""},
		{"GET", "/api/segment/get/nope", "token=a&token=b", 0, "", ""},
		{"GET", "/api/snowflake/get/k", "x=%zz", 0, "", ""},
		{"GET", "/api/state", "limit=1&limit=2", 0, "", ""},
		{"GET", "/api/state", "limit=1;sort=rate", 0, "", ""},
		{"GET", "/api/state", "state=serving&sort=rate&offset=0&limit=5", 0, "", ""},
		{"POST", "/api/tags", "", 2, "application/json", `{"tag":"fz2","step":10}`},
		{"POST", "/api/tags", "", 2, "text/plain", `{"tag":"fz3"}`},
		{"PATCH", "/api/tags/order", "x=1&x=1", 2, "application/json", `{"step":50}`},
		{"POST", "/api/tokens", "", 2, "application/json", `{"tags":["order"]}`},
		{"DELETE", "/api/tokens/0123456789abcdef", "", 0, "", ""},
		{"PUT", "/segment/order", "", 0, "", "x"},
		{"GET", "/", "poll=1&poll=2", 0, "", ""},
		{"GET", "/readyz", "", 0, "", ""},
		{"GET", "/no/such/route", "", 0, "", ""},
		{"OPTIONS", "*", "", 0, "", ""},
	} {
		f.Add(seed.method, seed.path, seed.query, seed.header, seed.value, []byte(seed.body))
	}
	h := routerFuzzServer(f)
	codes := leafd.Codes()
	f.Fuzz(func(t *testing.T, method, path, query string, header uint8, value string, body []byte) {
		target := path
		if query != "" {
			target += "?" + query
		}
		name := fuzzHeaders[int(header)%len(fuzzHeaders)]
		raw := method + " " + target + " HTTP/1.1\r\nHost: leafd\r\n"
		if name != "Authorization" {
			raw += "Authorization: Bearer " + token + "\r\n"
		}
		raw += name + ": " + value + "\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + string(body)
		req, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw)))
		if err != nil || !serverReads(req) {
			return // net/http refuses it before the router
		}
		req.RemoteAddr = "127.0.0.1:1234"
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		res := rec.Result()
		got := rec.Body.String()
		// The Leaf routes answer every error 500 (by contract), but never
		// one of code internal.
		leaf := leafRoute.MatchString(req.URL.Path) && (req.Method == "GET" || req.Method == "HEAD")
		if res.StatusCode >= 500 && res.StatusCode != http.StatusServiceUnavailable && !leaf {
			t.Fatalf("%s %s: %d %q", req.Method, req.URL, res.StatusCode, got)
		}
		if res.StatusCode >= 400 {
			code := errorAnswerCode(t, req, res.StatusCode, res.Header.Get("Content-Type"), got, leaf)
			if code == leafd.EInternal {
				t.Fatalf("%s %s: %d %q", req.Method, req.URL, res.StatusCode, got)
			}
			if !slices.Contains(codes, code) {
				t.Fatalf("%s %s: %d with code %q, not one of errors.go: %q", req.Method, req.URL, res.StatusCode, code, got)
			}
			if status, _ := leafd.HTTPStatus(code); status != res.StatusCode && !(leaf && res.StatusCode == 500) {
				t.Fatalf("%s %s: %d with code %q, whose status is %d", req.Method, req.URL, res.StatusCode, code, status)
			}
			return
		}
		if res.StatusCode/100 == 2 {
			checkIDAnswer(t, req, res.Header.Get("Content-Type"), got, leaf)
		}
	})
}

// serverReads reports whether net/http's server goes on to the handler with
// a request that http.ReadRequest read: it also refuses a request without
// a valid Host and a header name or value with a character HTTP does not
// allow.
func serverReads(req *http.Request) bool {
	if req.Host == "" || strings.ContainsAny(req.Host, " \t\r\n/\\") {
		return false
	}
	for k, vv := range req.Header {
		if k == "" || strings.ContainsFunc(k, func(r rune) bool { return r <= ' ' || r >= 0x7f || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, r) }) {
			return false
		}
		for _, v := range vv {
			if strings.ContainsFunc(v, func(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f }) {
				return false
			}
		}
	}
	return true
}

// errorAnswerCode returns the code of an error answer, failing t unless it
// has the route's shape: JSON {"error":{"code","message"}} (/readyz's
// {"reason","status"} for not_ready), or the Leaf routes' text.
func errorAnswerCode(t *testing.T, req *http.Request, status int, ct, body string, leaf bool) string {
	t.Helper()
	if leaf {
		code, msg, ok := strings.Cut(body, ": ")
		if !strings.HasPrefix(ct, "text/plain") || !ok || code == "" || msg == "" {
			t.Fatalf("%s %s: %d %q %q, want the Leaf route's text code: message", req.Method, req.URL, status, ct, body)
		}
		return code
	}
	if !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("%s %s: %d %q %q, want the JSON error shape", req.Method, req.URL, status, ct, body)
	}
	if req.URL.Path == "/readyz" && status == http.StatusServiceUnavailable {
		var ready struct{ Reason, Status string }
		if err := json.Unmarshal([]byte(body), &ready); err != nil || ready.Reason == "" {
			t.Fatalf("GET /readyz: %d %q", status, body)
		}
		return ready.Status
	}
	var e struct {
		Error struct{ Code, Message string }
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error.Code == "" || e.Error.Message == "" {
		t.Fatalf("%s %s: %d %q, want the JSON error shape (%v)", req.Method, req.URL, status, body, err)
	}
	return e.Error.Code
}

// checkIDAnswer fails t when a 2xx answer of an ID route does not parse:
// IDs positive and ascending, as text or JSON strings, a range with start
// below end, the Leaf routes' bare ID.
func checkIDAnswer(t *testing.T, req *http.Request, ct, body string, leaf bool) {
	t.Helper()
	p := req.URL.Path
	switch {
	case leaf:
		if id, err := strconv.ParseInt(body, 10, 64); err != nil || id <= 0 {
			t.Fatalf("%s %s: bare ID %q", req.Method, req.URL, body)
		}
	case strings.HasPrefix(p, "/segment/") && strings.HasSuffix(p, "/range"):
		var r struct{ Tag, Start, End string }
		if err := json.Unmarshal([]byte(body), &r); err != nil {
			t.Fatalf("%s %s: range %q: %v", req.Method, req.URL, body, err)
		}
		start, err1 := strconv.ParseInt(r.Start, 10, 64)
		end, err2 := strconv.ParseInt(r.End, 10, 64)
		if err1 != nil || err2 != nil || start <= 0 || end <= start {
			t.Fatalf("%s %s: range %q", req.Method, req.URL, body)
		}
	case strings.HasPrefix(p, "/segment/") || p == "/snowflake":
		var ids []string
		if strings.HasPrefix(ct, "application/json") {
			var v struct{ IDs []string }
			if err := json.Unmarshal([]byte(body), &v); err != nil {
				t.Fatalf("%s %s: %q: %v", req.Method, req.URL, body, err)
			}
			ids = v.IDs
		} else {
			if !strings.HasPrefix(ct, "text/plain") || !strings.HasSuffix(body, "\n") {
				t.Fatalf("%s %s: %q %q, want IDs one a line", req.Method, req.URL, ct, body)
			}
			ids = strings.Split(strings.TrimSuffix(body, "\n"), "\n")
		}
		prev := int64(0)
		for _, s := range ids {
			id, err := strconv.ParseInt(s, 10, 64)
			if err != nil || id <= prev {
				t.Fatalf("%s %s: IDs %q not ascending positive decimals", req.Method, req.URL, body)
			}
			prev = id
		}
		if len(ids) == 0 {
			t.Fatalf("%s %s: no ID in %q", req.Method, req.URL, body)
		}
	}
}
