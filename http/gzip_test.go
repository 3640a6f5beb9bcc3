package http_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// raw is a client that leaves Accept-Encoding as the test sets it and the
// body as the server sent it (the default client asks for gzip by itself
// and decompresses out of sight).
var raw = &http.Client{Transport: &http.Transport{DisableCompression: true}}

type rawResponse struct {
	status   int
	header   http.Header
	body     []byte // as sent
	unzipped []byte // body, decompressed when Content-Encoding is gzip
}

func getRaw(tb testing.TB, url, acceptEncoding string) rawResponse {
	tb.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		tb.Fatal(err)
	}
	if acceptEncoding != "" {
		req.Header.Set("Accept-Encoding", acceptEncoding)
	}
	res, err := raw.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		tb.Fatal(err)
	}
	r := rawResponse{status: res.StatusCode, header: res.Header, body: b, unzipped: b}
	if res.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			tb.Fatalf("GET %s: Content-Encoding gzip, but %v", url, err)
		}
		if r.unzipped, err = io.ReadAll(zr); err != nil {
			tb.Fatalf("GET %s: the gzip stream is broken: %v", url, err)
		}
	}
	return r
}

// withoutTime decodes a state and drops what changes from one answer to
// the next by itself: the server's clock.
func withoutTime(tb testing.TB, b []byte) string {
	tb.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		tb.Fatalf("not JSON: %v: %.200q", err, b)
	}
	delete(m, "time")
	delete(m, "store")     // checked_at
	delete(m, "snowflake") // lease_until, renewed meanwhile
	out, _ := json.Marshal(m)
	return string(out)
}

// The dashboard's answers are compressed for a client that accepts gzip,
// to the same bytes once decompressed; others get them as they are. The
// ID routes and /metrics (which compresses by itself) are left alone.
func TestGzip(t *testing.T) {
	t.Parallel()
	d := manyTagsServer(t, 500, "")
	state := d.url + "/api/state"

	t.Run("State", func(t *testing.T) {
		plain := getRaw(t, state, "")
		zipped := getRaw(t, state, "gzip")
		if plain.status != 200 || zipped.status != 200 {
			t.Fatalf("statuses %d, %d", plain.status, zipped.status)
		}
		if ce := plain.header.Get("Content-Encoding"); ce != "" {
			t.Errorf("without Accept-Encoding: Content-Encoding %q", ce)
		}
		if ce := zipped.header.Get("Content-Encoding"); ce != "gzip" {
			t.Fatalf("with Accept-Encoding: gzip: Content-Encoding %q", ce)
		}
		for _, r := range []rawResponse{plain, zipped} {
			if v := r.header.Get("Vary"); v != "Accept-Encoding" {
				t.Errorf("Vary %q, want Accept-Encoding", v)
			}
			if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Errorf("Content-Type %q", ct)
			}
		}
		if withoutTime(t, zipped.unzipped) != withoutTime(t, plain.body) {
			t.Errorf("decompressed, the answer differs from the plain one")
		}
		if len(zipped.body)*5 > len(plain.body) {
			t.Errorf("500 tags: %d bytes compressed, %d plain: not a fifth", len(zipped.body), len(plain.body))
		}
		t.Logf("500 tags: %d bytes, %d with gzip", len(plain.body), len(zipped.body))
	})

	t.Run("AcceptEncoding", func(t *testing.T) {
		for header, want := range map[string]bool{
			"gzip":                    true,
			"deflate, gzip;q=1.0, br": true,
			"GZIP":                    true,
			"*":                       true,
			"br;q=1, gzip; q=0.5":     true,
			"gzip;q=0":                false,
			"gzip; q=0.000":           false,
			"gzip;q=0, *":             false,
			"*;q=0":                   false,
			"br, *;q=0.1":             true,
			"deflate, br":             false,
			"identity":                false,
		} {
			r := getRaw(t, state+"?limit=50", header)
			if got := r.header.Get("Content-Encoding") == "gzip"; got != want {
				t.Errorf("Accept-Encoding %q: compressed %v, want %v", header, got, want)
			}
			if !json.Valid(r.unzipped) {
				t.Errorf("Accept-Encoding %q: not JSON once decoded", header)
			}
		}
	})

	t.Run("SmallAnswer", func(t *testing.T) {
		r := getRaw(t, state+"?limit=0", "gzip")
		if r.status != 400 || r.header.Get("Content-Encoding") != "" || !bytes.Contains(r.body, []byte("invalid_query")) {
			t.Errorf("a small error: %d %v %q", r.status, r.header, r.body)
		}
		r = getRaw(t, state+"?tag=none", "gzip")
		if r.status != 200 || r.header.Get("Content-Encoding") != "" || !json.Valid(r.body) {
			t.Errorf("a small state: %d %v %q", r.status, r.header, r.body)
		}
	})

	t.Run("Dashboard", func(t *testing.T) {
		plain, zipped := getRaw(t, d.url+"/dashboard", ""), getRaw(t, d.url+"/dashboard", "gzip")
		if zipped.header.Get("Content-Encoding") != "gzip" || !bytes.Equal(zipped.unzipped, plain.body) ||
			zipped.header.Get("Content-Security-Policy") == "" {
			t.Errorf("the page with gzip: %v, %d bytes decompressed, %d plain", zipped.header, len(zipped.unzipped), len(plain.body))
		}
	})

	t.Run("NotTheIDRoutes", func(t *testing.T) {
		for _, path := range []string{"/segment/" + manyTagName(1) + "?count=500", "/snowflake?count=500"} {
			r := getRaw(t, d.url+path, "gzip")
			if r.status != 200 || r.header.Get("Content-Encoding") != "" || r.header.Get("Vary") != "" {
				t.Errorf("GET %s: %d %v", path, r.status, r.header)
			}
		}
	})

	t.Run("MetricsOnce", func(t *testing.T) {
		r := getRaw(t, d.url+"/metrics", "gzip")
		if r.header.Get("Content-Encoding") != "gzip" || !bytes.HasPrefix(r.unzipped, []byte("# HELP")) {
			t.Errorf("/metrics with gzip: %v, decompressed once it starts %.40q", r.header, r.unzipped)
		}
	})

	t.Run("Concurrent", func(t *testing.T) {
		// The pooled writers serve one answer at a time.
		want := withoutTime(t, getRaw(t, state+"?state=idle&limit=100", "").body)
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for range 10 {
					if got := withoutTime(t, getRaw(t, state+"?state=idle&limit=100", "gzip").unzipped); got != want {
						t.Error("a compressed answer differs from the plain one")
						return
					}
				}
			})
		}
		wg.Wait()
	})
}
