package http_test

import (
	"context"
	"encoding/json"
	"io"
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

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// newServer serves segment mode over a real SQLite store holding the given
// tags (name → max_id; step 10). A request waits up to 10 s for a range: on
// a busy machine a load can take longer than any short timeout.
func newServer(tb testing.TB, tags map[string]int64) (*httptest.Server, store.Store) {
	tb.Helper()
	return newServerWait(tb, tags, 10*time.Second)
}

// newServerWait is newServer whose requests wait up to wait for a range.
func newServerWait(tb testing.TB, tags map[string]int64, wait time.Duration) (*httptest.Server, store.Store) {
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
	for name, maxID := range tags {
		if _, err := s.CreateTag(ctx, leafd.Tag{Name: name, MaxID: maxID, Step: 10}); err != nil {
			tb.Fatal(err)
		}
	}
	a, err := segment.New(s, segment.Config{
		MaxStep: 10, MaxBatch: 100, WaitTimeout: wait,
		RetryMin: time.Millisecond, RetryMax: 10 * time.Millisecond, Logger: quiet,
	})
	if err != nil {
		tb.Fatal(err)
	}
	if err := a.Refresh(ctx); err != nil {
		tb.Fatal(err)
	}
	a.Start()
	tb.Cleanup(func() { a.Close() })
	srv := httptest.NewServer(leafhttp.New(leafhttp.Config{Segment: a, Logger: quiet}).Handler())
	tb.Cleanup(srv.Close)
	return srv, s
}

type response struct {
	status      int
	contentType string
	body        string
}

func do(tb testing.TB, method, url string, header ...string) response {
	tb.Helper()
	return send(tb, method, url, "", header...)
}

// errorCode decodes the JSON error model and returns its code, failing the
// test if the body is not that model or its message is empty.
func errorCode(tb testing.TB, r response) string {
	tb.Helper()
	var body struct {
		Error struct{ Code, Message string }
	}
	if err := json.Unmarshal([]byte(r.body), &body); err != nil || body.Error.Message == "" {
		tb.Fatalf("body %q is not the JSON error model (%v)", r.body, err)
	}
	return body.Error.Code
}

func TestSegmentPlainText(t *testing.T) {
	srv, _ := newServer(t, map[string]int64{"order": 1})
	r := do(t, "GET", srv.URL+"/segment/order")
	if r.status != 200 || r.body != "1\n" || !strings.HasPrefix(r.contentType, "text/plain") {
		t.Fatalf("GET /segment/order = %d %q %q", r.status, r.contentType, r.body)
	}
	r = do(t, "GET", srv.URL+"/segment/order?count=25")
	lines := strings.Split(strings.TrimSuffix(r.body, "\n"), "\n")
	if r.status != 200 || len(lines) != 25 || !strings.HasSuffix(r.body, "\n") {
		t.Fatalf("count=25: %d %q", r.status, r.body)
	}
	for i, l := range lines {
		if id, err := strconv.ParseInt(l, 10, 64); err != nil || id != int64(i+2) {
			t.Fatalf("line %d is %q, want %d", i, l, i+2)
		}
	}
}

func TestSegmentJSON(t *testing.T) {
	srv, _ := newServer(t, map[string]int64{"order": 1})
	for _, tc := range []struct {
		name   string
		url    string
		header []string
	}{
		{"FormatParam", "/segment/order?format=json&count=3", nil},
		{"AcceptHeader", "/segment/order?count=3", []string{"Accept", "application/json"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := do(t, "GET", srv.URL+tc.url, tc.header...)
			var body struct {
				Tag string   `json:"tag"`
				IDs []string `json:"ids"`
			}
			if err := json.Unmarshal([]byte(r.body), &body); err != nil || r.status != 200 {
				t.Fatalf("%d %q: %v", r.status, r.body, err)
			}
			if !strings.HasPrefix(r.contentType, "application/json") || body.Tag != "order" || len(body.IDs) != 3 {
				t.Fatalf("%s %q", r.contentType, r.body)
			}
		})
	}
}

func TestLeafCompatibleRoute(t *testing.T) {
	srv, _ := newServer(t, map[string]int64{"order": 1})
	r := do(t, "GET", srv.URL+"/api/segment/get/order")
	if r.status != 200 || r.body != "1" {
		t.Fatalf("Leaf route: %d %q, want 200 \"1\"", r.status, r.body)
	}
	r = do(t, "GET", srv.URL+"/api/segment/get/nope")
	if r.status != 500 || !strings.Contains(r.body, "unknown_tag") {
		t.Fatalf("Leaf route, unknown tag: %d %q, want 500 with a text reason", r.status, r.body)
	}
}

func TestSegmentErrors(t *testing.T) {
	srv, s := newServer(t, map[string]int64{"order": 1, "end": leafd.MaxID - 5})
	_ = s
	long := strings.Repeat("a", 129)
	tests := []struct {
		name, method, path string
		status             int
		code               string
	}{
		{"InvalidTagChars", "GET", "/segment/bad$tag", 400, leafd.EInvalidTag},
		{"InvalidTagTooLong", "GET", "/segment/" + long, 400, leafd.EInvalidTag},
		{"CountZero", "GET", "/segment/order?count=0", 400, leafd.EInvalidCount},
		{"CountNegative", "GET", "/segment/order?count=-3", 400, leafd.EInvalidCount},
		{"CountNotANumber", "GET", "/segment/order?count=ten", 400, leafd.EInvalidCount},
		{"CountEmpty", "GET", "/segment/order?count=", 400, leafd.EInvalidCount},
		{"CountOverMaxBatch", "GET", "/segment/order?count=101", 400, leafd.EInvalidCount},
		{"CountHuge", "GET", "/segment/order?count=99999999999999999999999", 400, leafd.EInvalidCount},
		{"UnknownTag", "GET", "/segment/nope", 404, leafd.EUnknownTag},
		{"UnknownRoute", "GET", "/nothing/here", 404, leafd.ENotFound},
		{"MissingTag", "GET", "/segment/", 404, leafd.ENotFound},
		{"WrongMethod", "POST", "/segment/order", 405, leafd.EMethodNotAllowed},
		{"Exhausted", "GET", "/segment/end", 503, leafd.ETagExhausted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := do(t, tt.method, srv.URL+tt.path)
			if r.status != tt.status {
				t.Fatalf("%s %s = %d %q, want %d", tt.method, tt.path, r.status, r.body, tt.status)
			}
			if got := errorCode(t, r); got != tt.code {
				t.Fatalf("%s %s: code %q, want %q", tt.method, tt.path, got, tt.code)
			}
		})
	}
}

// With the database gone and nothing buffered, the client gets 503
// segment_unavailable after wait_timeout, and /readyz turns 503.
func TestSegmentUnavailable(t *testing.T) {
	srv, s := newServerWait(t, map[string]int64{"order": 1}, 100*time.Millisecond)
	s.Close() // the store is gone before the tag was ever loaded
	r := do(t, "GET", srv.URL+"/segment/order")
	if r.status != 503 || errorCode(t, r) != leafd.ESegmentUnavailable {
		t.Fatalf("GET with the store closed = %d %q", r.status, r.body)
	}
	// The shape of docs/contract.md section 4, not the error model.
	r = do(t, "GET", srv.URL+"/readyz")
	var ready map[string]string
	if err := json.Unmarshal([]byte(r.body), &ready); err != nil || r.status != 503 ||
		!strings.HasPrefix(r.contentType, "application/json") || len(ready) != 2 ||
		ready["status"] != "not_ready" || !strings.Contains(ready["reason"], `tag "order" has no IDs buffered`) {
		t.Fatalf("/readyz with a failing tag = %d %s %q, want 503 {\"reason\":\"…\",\"status\":\"not_ready\"}", r.status, r.contentType, r.body)
	}
	if r := do(t, "GET", srv.URL+"/healthz"); r.status != 200 {
		t.Fatalf("/healthz = %d", r.status)
	}
}

func TestHealthAndReady(t *testing.T) {
	srv, _ := newServer(t, map[string]int64{"order": 1})
	for _, path := range []string{"/healthz", "/readyz"} {
		r := do(t, "GET", srv.URL+path)
		if r.status != 200 || !json.Valid([]byte(r.body)) {
			t.Fatalf("%s = %d %q", path, r.status, r.body)
		}
	}
}

func TestModeDisabled(t *testing.T) {
	srv := httptest.NewServer(leafhttp.New(leafhttp.Config{Logger: quiet}).Handler())
	defer srv.Close()
	r := do(t, "GET", srv.URL+"/segment/order")
	if r.status != 404 || errorCode(t, r) != leafd.EModeDisabled {
		t.Fatalf("segment off: %d %q", r.status, r.body)
	}
	if r := do(t, "GET", srv.URL+"/api/segment/get/order"); r.status != 500 || r.body == "0" {
		t.Fatalf("Leaf route with segment off: %d %q; never a fake 0", r.status, r.body)
	}
	if r := do(t, "GET", srv.URL+"/readyz"); r.status != 200 {
		t.Fatalf("/readyz with no mode on = %d", r.status)
	}
}

// startAllocator starts an allocator over s with cfg, its tag list read,
// closed when the test ends.
func startAllocator(tb testing.TB, s segment.Store, cfg segment.Config) *segment.Allocator {
	tb.Helper()
	a, err := segment.New(s, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	if err := a.Refresh(context.Background()); err != nil {
		tb.Fatal(err)
	}
	a.Start()
	tb.Cleanup(func() { a.Close() })
	return a
}
