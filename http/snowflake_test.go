package http_test

import (
	"encoding/json"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leafd/leafd"
	leafhttp "github.com/leafd/leafd/http"
	"github.com/leafd/leafd/snowflake"
)

// movableClock is a wall clock a test can set back.
type movableClock struct {
	mu  sync.Mutex
	off time.Duration
}

func (c *movableClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.off)
}

func (c *movableClock) shift(d time.Duration) {
	c.mu.Lock()
	c.off += d
	c.mu.Unlock()
}

// newSnowflakeServer serves snowflake mode with fixed worker id 7.
func newSnowflakeServer(tb testing.TB) (*httptest.Server, *movableClock) {
	tb.Helper()
	clock := &movableClock{}
	g, err := snowflake.New(snowflake.Settings{WorkerID: 7, MaxBatch: 100, Now: clock.Now, Logger: quiet})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { g.Close() })
	srv := httptest.NewServer(leafhttp.New(leafhttp.Config{Snowflake: g, Logger: quiet}).Handler())
	tb.Cleanup(srv.Close)
	return srv, clock
}

func parseIDs(tb testing.TB, lines string) []int64 {
	tb.Helper()
	if !strings.HasSuffix(lines, "\n") {
		tb.Fatalf("body %q does not end with a newline", lines)
	}
	var ids []int64
	for _, l := range strings.Split(strings.TrimSuffix(lines, "\n"), "\n") {
		id, err := strconv.ParseInt(l, 10, 64)
		if err != nil || id <= 0 {
			tb.Fatalf("line %q is not a positive ID", l)
		}
		ids = append(ids, id)
	}
	return ids
}

func TestSnowflakePlainAndJSON(t *testing.T) {
	srv, _ := newSnowflakeServer(t)
	r := do(t, "GET", srv.URL+"/snowflake")
	if r.status != 200 || !strings.HasPrefix(r.contentType, "text/plain") || len(parseIDs(t, r.body)) != 1 {
		t.Fatalf("GET /snowflake = %d %q %q", r.status, r.contentType, r.body)
	}
	r = do(t, "GET", srv.URL+"/snowflake?count=50")
	ids := parseIDs(t, r.body)
	if len(ids) != 50 {
		t.Fatalf("count=50 gave %d IDs", len(ids))
	}
	for i := 1; i < len(ids); i++ {
		if ids[i] <= ids[i-1] {
			t.Fatalf("batch not ascending at %d: %d after %d", i, ids[i], ids[i-1])
		}
	}
	for _, req := range [][]string{{"/snowflake?count=3&format=json"}, {"/snowflake?count=3", "Accept", "application/json"}} {
		r := do(t, "GET", srv.URL+req[0], req[1:]...)
		var body struct{ IDs []string }
		if r.status != 200 || !strings.HasPrefix(r.contentType, "application/json") || json.Unmarshal([]byte(r.body), &body) != nil || len(body.IDs) != 3 {
			t.Fatalf("%v = %d %q %q, want {\"ids\":[three strings]}", req, r.status, r.contentType, r.body)
		}
	}
}

func TestSnowflakeDecode(t *testing.T) {
	srv, _ := newSnowflakeServer(t)
	r := do(t, "GET", srv.URL+"/snowflake")
	id := strings.TrimSpace(r.body)
	r = do(t, "GET", srv.URL+"/snowflake/"+id)
	var got struct {
		ID       string `json:"id"`
		Time     string `json:"time"`
		UnixMs   int64  `json:"unix_ms"`
		WorkerID int64  `json:"worker_id"`
		Sequence *int64 `json:"sequence"`
	}
	if r.status != 200 || json.Unmarshal([]byte(r.body), &got) != nil {
		t.Fatalf("decode = %d %q", r.status, r.body)
	}
	tm, err := time.Parse(time.RFC3339, got.Time)
	if got.ID != id || got.WorkerID != 7 || got.Sequence == nil || err != nil || tm.UnixMilli() != got.UnixMs ||
		time.Since(tm) > time.Minute || !strings.HasSuffix(got.Time, "Z") || len(got.Time) != len("2006-01-02T15:04:05.000Z") {
		t.Fatalf("decode(%s) = %s", id, r.body)
	}

	// Leaf's shape.
	r = do(t, "GET", srv.URL+"/decodeSnowflakeId?snowflakeId="+id)
	var leaf struct{ Timestamp, SequenceID, WorkerID string }
	if err := json.Unmarshal([]byte(r.body), &leaf); err != nil || r.status != 200 {
		t.Fatalf("decodeSnowflakeId = %d %q", r.status, r.body)
	}
	want := strconv.FormatInt(got.UnixMs, 10) + "(" + time.UnixMilli(got.UnixMs).UTC().Format("2006-01-02 15:04:05.000") + ")"
	if leaf.Timestamp != want || leaf.WorkerID != "7" || leaf.SequenceID != strconv.FormatInt(*got.Sequence, 10) {
		t.Fatalf("decodeSnowflakeId = %s, want timestamp %s worker 7", r.body, want)
	}
}

func TestLeafSnowflakeRoute(t *testing.T) {
	srv, _ := newSnowflakeServer(t)
	r := do(t, "GET", srv.URL+"/api/snowflake/get/anykey")
	if id, err := strconv.ParseInt(r.body, 10, 64); r.status != 200 || err != nil || id <= 0 {
		t.Fatalf("Leaf route = %d %q, want a bare positive decimal ID", r.status, r.body)
	}
}

func TestSnowflakeErrors(t *testing.T) {
	srv, _ := newSnowflakeServer(t)
	tests := []struct {
		name, path string
		status     int
		code       string
	}{
		{"CountZero", "/snowflake?count=0", 400, leafd.EInvalidCount},
		{"CountOverMax", "/snowflake?count=101", 400, leafd.EInvalidCount},
		{"CountNotANumber", "/snowflake?count=x", 400, leafd.EInvalidCount},
		{"DecodeNotANumber", "/snowflake/abc", 400, leafd.EInvalidID},
		{"DecodeZero", "/snowflake/0", 400, leafd.EInvalidID},
		{"DecodeNegative", "/snowflake/-5", 400, leafd.EInvalidID},
		{"DecodeOverflow", "/snowflake/9223372036854775808", 400, leafd.EInvalidID},
		{"LeafDecodeMissing", "/decodeSnowflakeId", 400, leafd.EInvalidID},
		{"LeafDecodeBad", "/decodeSnowflakeId?snowflakeId=1e9", 400, leafd.EInvalidID},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := do(t, "GET", srv.URL+tt.path)
			if r.status != tt.status || errorCode(t, r) != tt.code {
				t.Fatalf("GET %s = %d %q, want %d %s", tt.path, r.status, r.body, tt.status, tt.code)
			}
		})
	}
}

// /decodeSnowflakeId without its parameter says which parameter is
// missing and how to ask, not that an empty ID is not valid.
func TestLeafDecodeMissingParameter(t *testing.T) {
	srv, _ := newSnowflakeServer(t)
	for _, path := range []string{"/decodeSnowflakeId", "/decodeSnowflakeId?snowflakeId=", "/decodeSnowflakeId?id=123"} {
		r := do(t, "GET", srv.URL+path)
		if r.status != 400 || errorCode(t, r) != leafd.EInvalidID ||
			!strings.Contains(r.body, "snowflakeId is missing") || !strings.Contains(r.body, "/decodeSnowflakeId?snowflakeId=ID") ||
			strings.Contains(r.body, `id \"\" is not valid`) {
			t.Fatalf("GET %s = %d %q, want 400 invalid_id naming the missing parameter", path, r.status, r.body)
		}
	}
}

// A clock set back further than max_backward with a fixed worker id: 503
// snowflake_unavailable (never a made-up ID), /readyz 503, and service
// again once the clock has caught up.
func TestSnowflakeClockBehind(t *testing.T) {
	srv, clock := newSnowflakeServer(t)
	do(t, "GET", srv.URL+"/snowflake")
	clock.shift(-time.Second)
	r := do(t, "GET", srv.URL+"/snowflake")
	if r.status != 503 || errorCode(t, r) != leafd.ESnowflakeUnavailable {
		t.Fatalf("clock behind: %d %q", r.status, r.body)
	}
	if r := do(t, "GET", srv.URL+"/api/snowflake/get/k"); r.status != 500 || !strings.Contains(r.body, leafd.ESnowflakeUnavailable) {
		t.Fatalf("Leaf route, clock behind: %d %q", r.status, r.body)
	}
	if r := do(t, "GET", srv.URL+"/readyz"); r.status != 503 {
		t.Fatalf("/readyz with the clock behind = %d %q", r.status, r.body)
	}
	clock.shift(time.Second)
	if r := do(t, "GET", srv.URL+"/snowflake"); r.status != 200 {
		t.Fatalf("after the clock caught up: %d %q", r.status, r.body)
	}
}

func TestSnowflakeModeDisabled(t *testing.T) {
	srv := httptest.NewServer(leafhttp.New(leafhttp.Config{Logger: quiet}).Handler())
	defer srv.Close()
	for _, path := range []string{"/snowflake", "/snowflake?count=2", "/snowflake/123", "/decodeSnowflakeId?snowflakeId=123"} {
		if r := do(t, "GET", srv.URL+path); r.status != 404 || errorCode(t, r) != leafd.EModeDisabled {
			t.Fatalf("%s with snowflake off: %d %q", path, r.status, r.body)
		}
	}
	if r := do(t, "GET", srv.URL+"/api/snowflake/get/k"); r.status != 500 || r.body == "0" {
		t.Fatalf("Leaf route with snowflake off: %d %q; never a fake 0", r.status, r.body)
	}
}
