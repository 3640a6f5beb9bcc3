package http_test

import (
	"bufio"
	"bytes"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leafd/leafd"
	leafhttp "github.com/leafd/leafd/http"
	"github.com/leafd/leafd/internal/testkit/testdb"
	"github.com/leafd/leafd/store"
)

// The 64 KiB cap holds for the whole body: an object that fits, followed
// by a megabyte of padding, is too large, not accepted.
func TestAdminBodyCapIsWholeBody(t *testing.T) {
	srv := newAdminServer(t, store.DefaultDriver(), testdb.DSN(t, store.DefaultDriver()), token)
	obj := `{"tag":"padded","step":1000}`
	for name, pad := range map[string]string{
		"Spaces":  strings.Repeat(" ", 1_114_113-len(obj)),
		"Newline": strings.Repeat("\n", 70_000),
	} {
		t.Run(name, func(t *testing.T) {
			r := authed(t, "POST", srv.url+"/api/tags", obj+pad)
			if r.status != 413 || errorCode(t, r) != leafd.EBodyTooLarge {
				t.Fatalf("POST of %d bytes = %d %q, want 413 body_too_large", len(obj)+len(pad), r.status, r.body)
			}
		})
	}
	// Garbage after the object within the cap is not one object.
	if r := authed(t, "POST", srv.url+"/api/tags", obj+" xyz"); r.status != 400 || errorCode(t, r) != leafd.EInvalidBody {
		t.Fatalf("object then garbage = %d %q, want 400 invalid_body", r.status, r.body)
	}
	// Nothing was created.
	if r := authed(t, "GET", srv.url+"/api/tags", ""); strings.Contains(r.body, "padded") {
		t.Fatalf("a refused body created its tag: %s", r.body)
	}
}

// Admin POST and PATCH take JSON: another Content-Type is 415; JSON with
// parameters, or no Content-Type at all, is read.
func TestAdminContentType(t *testing.T) {
	srv := newAdminServer(t, store.DefaultDriver(), testdb.DSN(t, store.DefaultDriver()), token)
	auth := []string{"Authorization", "Bearer " + token}
	for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/jsonx", "not a type"} {
		r := send(t, "POST", srv.url+"/api/tags", `{"tag":"ct"}`, append(auth, "Content-Type", ct)...)
		if r.status != 415 || errorCode(t, r) != leafd.EUnsupportedMediaType {
			t.Errorf("POST with Content-Type %q = %d %q, want 415 unsupported_media_type", ct, r.status, r.body)
		}
		r = send(t, "PATCH", srv.url+"/api/tags/ct", `{"step":5}`, append(auth, "Content-Type", ct)...)
		if r.status != 415 || errorCode(t, r) != leafd.EUnsupportedMediaType {
			t.Errorf("PATCH with Content-Type %q = %d %q, want 415 unsupported_media_type", ct, r.status, r.body)
		}
	}
	if r := send(t, "POST", srv.url+"/api/tags", `{"tag":"ct1"}`, append(auth, "Content-Type", "Application/JSON; charset=utf-8")...); r.status != 201 {
		t.Errorf("POST with JSON and a charset = %d %q", r.status, r.body)
	}
	if r := send(t, "POST", srv.url+"/api/tags", `{"tag":"ct2"}`, auth...); r.status != 201 {
		t.Errorf("POST without a Content-Type = %d %q", r.status, r.body)
	}
}

// Every GET route answers HEAD as it answers GET, without a body.
func TestHead(t *testing.T) {
	srv := newAdminServer(t, store.DefaultDriver(), testdb.DSN(t, store.DefaultDriver()), token)
	if r := authed(t, "POST", srv.url+"/api/tags", `{"tag":"h"}`); r.status != 201 {
		t.Fatal(r.status, r.body)
	}
	for path, status := range map[string]int{
		"/healthz": 200, "/readyz": 200, "/metrics": 200, "/dashboard": 200, "/api/state": 200,
		"/segment/h": 200, "/api/segment/get/h": 200, "/api/tags": 401, "/": 302, "/snowflake": 404,
	} {
		req, _ := http.NewRequest("HEAD", srv.url+path, nil)
		res, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != status {
			t.Errorf("HEAD %s = %d, want %d", path, res.StatusCode, status)
		}
	}
}

// Every answer carries one Date, nosniff, no-referrer and a CSP; the ID routes
// no-store; the dashboard keeps its own CSP. The Leaf route's error repeats
// the tag in text/plain, which nosniff keeps a browser from reading as
// HTML.
func TestSecurityHeaders(t *testing.T) {
	srv := newAdminServer(t, store.DefaultDriver(), testdb.DSN(t, store.DefaultDriver()), token)
	if r := authed(t, "POST", srv.url+"/api/tags", `{"tag":"s"}`); r.status != 201 {
		t.Fatal(r.status, r.body)
	}
	for _, path := range []string{
		"/segment/s", "/segment/s?count=3&format=json", "/api/segment/get/s", "/api/segment/get/no.such.tag",
		"/segment/bad$tag", "/no/route", "/healthz", "/readyz", "/metrics", "/api/state", "/api/tags", "/dashboard",
	} {
		res, err := http.Get(srv.url + path)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		h := res.Header
		if d := h.Values("Date"); len(d) != 1 {
			t.Errorf("GET %s: Date headers %q, want one", path, d)
		} else if at, err := http.ParseTime(d[0]); err != nil || time.Since(at).Abs() > 5*time.Second {
			t.Errorf("GET %s: Date %q (%v), not now", path, d[0], err)
		}
		if h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Referrer-Policy") != "no-referrer" {
			t.Errorf("GET %s: X-Content-Type-Options %q, Referrer-Policy %q", path, h.Get("X-Content-Type-Options"), h.Get("Referrer-Policy"))
		}
		csp := h.Get("Content-Security-Policy")
		if !strings.HasPrefix(csp, "default-src 'none'") {
			t.Errorf("GET %s: Content-Security-Policy %q", path, csp)
		}
		if path == "/dashboard" {
			if !strings.Contains(csp, "script-src 'sha256-") || h.Get("Cache-Control") != "no-cache" {
				t.Errorf("GET /dashboard lost its own CSP or Cache-Control: %q, %q", csp, h.Get("Cache-Control"))
			}
		} else if h.Get("Cache-Control") != "no-store" {
			t.Errorf("GET %s: Cache-Control %q, want no-store", path, h.Get("Cache-Control"))
		}
	}
}

// syncBuffer is a log destination the server writes from its goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The admin log names the socket's peer: X-Forwarded-For is believed only
// from a trusted proxy (none by default). The configured token is trimmed
// as the presented one is.
func TestAdminAuditCaller(t *testing.T) {
	for _, tc := range []struct {
		name    string
		trusted []string
		want    string
	}{
		{"NoProxyTrusted", nil, "by=127.0.0.1"},
		{"LoopbackTrusted", []string{"127.0.0.1"}, "by=203.0.113.9 via=127.0.0.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openAdminStore(t, store.DefaultDriver(), testdb.DSN(t, store.DefaultDriver()))
			var logs syncBuffer
			srv := httptest.NewServer(leafhttp.New(leafhttp.Config{
				Tags: s, AdminToken: token + "\n", TrustedProxies: tc.trusted,
				Logger: slog.New(slog.NewTextHandler(&logs, nil)),
			}).Handler())
			defer srv.Close()
			r := send(t, "POST", srv.URL+"/api/tags", `{"tag":"audit"}`,
				"Authorization", "Bearer "+token, "X-Forwarded-For", "203.0.113.9")
			if r.status != 201 {
				t.Fatalf("POST with the token, configured with a trailing newline = %d %q", r.status, r.body)
			}
			line := logs.String()
			if !strings.Contains(line, tc.want+"\n") {
				t.Fatalf("admin log %q, want %q", line, tc.want)
			}
		})
	}
}

// A bad escape that still parses reaches the router and is answered in the
// JSON shape. A request net/http cannot read never reaches a handler:
// net/http answers it itself, and Serve's connections rewrite that answer
// into the JSON shape, with the same status, a code of the contract and
// Connection: close. Over a real TCP listener, as in production.
func TestErrorsBelowTheRouter(t *testing.T) {
	srv := newAdminServer(t, store.DefaultDriver(), testdb.DSN(t, store.DefaultDriver()), token)
	r := send(t, "GET", srv.url+"/segment/a%00b", "")
	if r.status != 400 || errorCode(t, r) != leafd.EInvalidTag {
		t.Errorf("GET /segment/a%%00b = %d %q, want 400 invalid_tag in JSON", r.status, r.body)
	}
	addr := limitServer(t, leafhttp.Config{MaxHeaderBytes: 4 << 10})
	for _, tc := range []struct {
		name, request string
		status        int
		code, says    string
	}{
		{"MalformedPathEscape", "GET /segment/%zz HTTP/1.1\r\nHost: x\r\n\r\n", 400, leafd.EInvalidRequest, "escape a '%' as %25"},
		{"MalformedRequestLine", "GET\r\nHost: x\r\n\r\n", 400, leafd.EInvalidRequest, "request line"},
		{"NULInHeaderValue", "GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: a\x00b\r\n\r\n", 400, leafd.EInvalidRequest, "control character"},
		{"BadHeaderName", "GET /healthz HTTP/1.1\r\nHost: x\r\nX A: b\r\n\r\n", 400, leafd.EInvalidRequest, ""},
		{"NoHost", "GET /healthz HTTP/1.1\r\n\r\n", 400, leafd.EInvalidRequest, "no Host header"},
		{"BadHost", "GET /healthz HTTP/1.1\r\nHost: a b\r\n\r\n", 400, leafd.EInvalidRequest, "Host header is malformed"},
		{"BadContentLength", "POST /api/tags HTTP/1.1\r\nHost: x\r\nContent-Length: x\r\n\r\n", 400, leafd.EInvalidRequest, "Content-Length"},
		{"HeadersTooLarge", "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 2<<20) + "\r\n\r\n", 431, leafd.EHeadersTooLarge, "4096 bytes"},
		{"UnknownTransferEncoding", "POST /api/tags HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 501, leafd.EUnsupportedTransferEncoding, "Transfer-Encoding"},
		{"HTTP2RequestLine", "GET /healthz HTTP/2.0\r\nHost: x\r\n\r\n", 505, leafd.EUnsupportedHTTPVersion, "HTTP/1.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			go func() { _, _ = io.WriteString(c, tc.request) }() // the server may answer before it read it all
			res, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(res.Body)
			res.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			h := res.Header
			if res.StatusCode != tc.status || h.Get("Content-Type") != "application/json; charset=utf-8" || !res.Close ||
				h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Cache-Control") != "no-store" ||
				res.ContentLength != int64(len(body)) {
				t.Errorf("%d %v (Close %v), want %d in JSON with nosniff, no-store, Connection: close and its length", res.StatusCode, h, res.Close, tc.status)
			}
			got := errorCode(t, response{status: res.StatusCode, body: string(body)})
			if got != tc.code || !strings.Contains(string(body), tc.says) {
				t.Errorf("body %s, want code %s saying %q", body, tc.code, tc.says)
			}
			if status, _ := leafd.HTTPStatus(got); status != res.StatusCode {
				t.Errorf("code %s is %d in errors.go, answered with %d", got, status, res.StatusCode)
			}
		})
	}
	// The server still serves, and a handler's answer passes untouched.
	res, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 || res.Header.Get("Date") == "" {
		t.Fatalf("GET /healthz after the refusals = %d %v", res.StatusCode, res.Header)
	}
}
