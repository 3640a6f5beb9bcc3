package http_test

import (
	"encoding/json"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/leafd/leafd"
	leafhttp "github.com/leafd/leafd/http"
	"github.com/leafd/leafd/internal/testkit/testdb"
	"github.com/leafd/leafd/snowflake"
	"github.com/leafd/leafd/store"
)

type composed struct {
	Time   string `json:"time"`
	UnixMs int64  `json:"unix_ms"`
	First  string `json:"first"`
	Next   string `json:"next"`
}

func getComposed(t *testing.T, url string) composed {
	t.Helper()
	r := do(t, "GET", url)
	if r.status != 200 || !strings.HasPrefix(r.contentType, "application/json") {
		t.Fatalf("GET %s = %d %q %q", url, r.status, r.contentType, r.body)
	}
	var c composed
	dec := json.NewDecoder(strings.NewReader(r.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		t.Fatalf("GET %s: %q: %v", url, r.body, err)
	}
	return c
}

// GET /snowflake/at/{time} answers the first ID of the millisecond and of
// the next, for RFC 3339 with any zone and fraction and for Unix ms; the
// IDs decode back to that millisecond with GET /snowflake/{id}.
func TestSnowflakeCompose(t *testing.T) {
	srv, _ := newSnowflakeServer(t)
	const ms = 1795395053738 // 2026-11-23T00:50:53.738Z
	first := (int64(ms) - snowflake.DefaultEpoch) << 22
	want := composed{Time: "2026-11-23T00:50:53.738Z", UnixMs: ms,
		First: strconv.FormatInt(first, 10), Next: strconv.FormatInt(first+1<<22, 10)}
	for _, raw := range []string{
		"2026-11-23T00:50:53.738Z",
		"2026-11-23T00:50:53.738999999Z",
		"2026-11-23T01:50:53.738123456+01:00",
		"2026-11-23T01:50:53.738123456%2B01:00",
		"2026-11-22T19:20:53.7385-05:30",
		"1795395053738",
	} {
		if c := getComposed(t, srv.URL+"/snowflake/at/"+raw); c != want {
			t.Errorf("/snowflake/at/%s = %+v, want %+v", raw, c, want)
		}
	}
	// The route beside /snowflake/{id}: both answer their own.
	var d snowflake.Decoded
	r := do(t, "GET", srv.URL+"/snowflake/"+want.First)
	if err := json.Unmarshal([]byte(r.body), &d); r.status != 200 || err != nil || d.UnixMs != ms || d.WorkerID != 0 || d.Sequence != 0 {
		t.Fatalf("decode of first: %d %q", r.status, r.body)
	}
	r = do(t, "GET", srv.URL+"/snowflake/"+strconv.FormatInt(first+1<<22-1, 10))
	if err := json.Unmarshal([]byte(r.body), &d); r.status != 200 || err != nil || d.UnixMs != ms || d.WorkerID != 1023 || d.Sequence != 4095 {
		t.Fatalf("decode of next-1: %d %q", r.status, r.body)
	}
	r = do(t, "GET", srv.URL+"/snowflake/"+want.Next)
	if err := json.Unmarshal([]byte(r.body), &d); r.status != 200 || err != nil || d.UnixMs != ms+1 {
		t.Fatalf("decode of next: %d %q", r.status, r.body)
	}
	// An ID issued now lies within the range of its own millisecond.
	ids := parseIDs(t, do(t, "GET", srv.URL+"/snowflake").body)
	p := snowflake.Layout{}.Decode(snowflake.ID(ids[0]))
	c := getComposed(t, srv.URL+"/snowflake/at/"+strconv.FormatInt(p.UnixMs, 10))
	if f, _ := strconv.ParseInt(c.First, 10, 64); f > ids[0] {
		t.Errorf("first %s of the millisecond is above the ID %d issued in it", c.First, ids[0])
	}
	if n, _ := strconv.ParseInt(c.Next, 10, 64); n <= ids[0] {
		t.Errorf("next %s of the millisecond is not above the ID %d issued in it", c.Next, ids[0])
	}

	// The epoch's first ID is 0; the last millisecond's next is 2^63.
	if c := getComposed(t, srv.URL+"/snowflake/at/2010-11-04T01:42:54.657Z"); c.First != "0" || c.Next != "4194304" || c.UnixMs != snowflake.DefaultEpoch {
		t.Errorf("the epoch: %+v", c)
	}
	if c := getComposed(t, srv.URL+"/snowflake/at/2080-07-10T17:30:30.208Z"); c.Next != "9223372036854775808" || c.First != strconv.FormatInt((1<<41-1)<<22, 10) {
		t.Errorf("the last millisecond: %+v", c)
	}

	// HEAD answers as GET, without a body.
	if r := do(t, "HEAD", srv.URL+"/snowflake/at/1795395053738"); r.status != 200 || r.body != "" || !strings.HasPrefix(r.contentType, "application/json") {
		t.Errorf("HEAD = %d %q %q", r.status, r.contentType, r.body)
	}
	if r := do(t, "HEAD", srv.URL+"/snowflake/at/x"); r.status != 400 || r.body != "" {
		t.Errorf("HEAD of a bad time = %d %q", r.status, r.body)
	}
}

func TestSnowflakeComposeErrors(t *testing.T) {
	srv, _ := newSnowflakeServer(t)
	for _, c := range []struct {
		path   string
		status int
		code   string
		msg    string
	}{
		{"/snowflake/at/x", 400, leafd.EInvalidTime, "use RFC 3339 with a zone"},
		{"/snowflake/at/2026-11-23", 400, leafd.EInvalidTime, "use RFC 3339 with a zone"},
		{"/snowflake/at/2026-11-23T00:50:53", 400, leafd.EInvalidTime, "use RFC 3339 with a zone"},
		{"/snowflake/at/-1", 400, leafd.EInvalidTime, "use RFC 3339 with a zone"},
		{"/snowflake/at/1.5", 400, leafd.EInvalidTime, "use RFC 3339 with a zone"},
		{"/snowflake/at/99999999999999999999", 400, leafd.EInvalidTime, "use RFC 3339 with a zone"},
		{"/snowflake/at/2010-11-04T01:42:54.656Z", 400, leafd.EInvalidTime, "is outside the ID layout"},
		{"/snowflake/at/0", 400, leafd.EInvalidTime, "is outside the ID layout"},
		{"/snowflake/at/2080-07-10T17:30:30.209Z", 400, leafd.EInvalidTime, "is outside the ID layout"},
		{"/snowflake/at/", 404, leafd.ENotFound, ""},
		{"/snowflake/at/1/2", 404, leafd.ENotFound, ""},
		{"/snowflake/at", 400, leafd.EInvalidID, ""},
		{"/snowflake/123", 200, "", ""},
	} {
		r := do(t, "GET", srv.URL+c.path)
		if r.status != c.status {
			t.Errorf("%s = %d %q, want %d", c.path, r.status, r.body, c.status)
			continue
		}
		if c.code == "" {
			continue
		}
		if code := errorCode(t, r); code != c.code || !strings.Contains(r.body, c.msg) {
			t.Errorf("%s = %q, want the code %s and %q", c.path, r.body, c.code, c.msg)
		}
	}
	if r := do(t, "POST", srv.URL+"/snowflake/at/0"); r.status != 405 || errorCode(t, r) != leafd.EMethodNotAllowed {
		t.Errorf("POST = %d %q", r.status, r.body)
	}
}

// The route composes with the server's layout, and is off with snowflake
// mode.
func TestSnowflakeComposeLayout(t *testing.T) {
	l := snowflake.Layout{Epoch: 1700000000000, TimeBits: 39, WorkerBits: 8, SequenceBits: 16}
	g, err := snowflake.New(snowflake.Settings{WorkerID: 3, Layout: l, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	srv := httptest.NewServer(leafhttp.New(leafhttp.Config{Snowflake: g, Logger: quiet}).Handler())
	t.Cleanup(srv.Close)
	c := getComposed(t, srv.URL+"/snowflake/at/1700000000001")
	if c.First != strconv.FormatInt(1<<24, 10) || c.Next != strconv.FormatInt(2<<24, 10) || c.Time != "2023-11-14T22:13:20.001Z" {
		t.Errorf("8/16 layout: %+v", c)
	}
	if r := do(t, "GET", srv.URL+"/snowflake/at/1699999999999"); r.status != 400 || errorCode(t, r) != leafd.EInvalidTime {
		t.Errorf("before this layout's epoch: %d %q", r.status, r.body)
	}

	off := httptest.NewServer(leafhttp.New(leafhttp.Config{Logger: quiet}).Handler())
	t.Cleanup(off.Close)
	for _, path := range []string{"/snowflake/at/1795395053738", "/snowflake/at/x"} {
		if r := do(t, "GET", off.URL+path); r.status != 404 || errorCode(t, r) != leafd.EModeDisabled {
			t.Errorf("%s with snowflake off: %d %q", path, r.status, r.body)
		}
	}
}

// The route issues nothing and needs no access token.
func TestSnowflakeComposeNoToken(t *testing.T) {
	s := newTokenServer(t, store.DefaultDriver(), testdb.DSN(t, store.DefaultDriver()), 1, nil)
	if r := do(t, "GET", s.url+"/snowflake/at/1795395053738"); r.status != 200 {
		t.Fatalf("without a token: %d %q", r.status, r.body)
	}
	if r := do(t, "GET", s.url+"/snowflake"); r.status != 401 {
		t.Fatalf("GET /snowflake without a token: %d %q", r.status, r.body)
	}
}
