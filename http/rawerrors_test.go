package http

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/leafd/leafd"
)

// net/http's own error answers, as conn.serve writes them, become the JSON
// error shape with the same status; the code's status in errors.go is that
// status.
func TestRewriteRawError(t *testing.T) {
	for _, tc := range []struct {
		raw    string
		status int
		code   string
	}{
		{"HTTP/1.1 400 Bad Request" + rawErrorHeaders + "400 Bad Request", 400, leafd.EInvalidRequest},
		{"HTTP/1.1 400 Bad Request: invalid header value" + rawErrorHeaders + "400 Bad Request: invalid header value", 400, leafd.EInvalidRequest},
		{"HTTP/1.1 400 Bad Request: something new" + rawErrorHeaders + "400 Bad Request: something new", 400, leafd.EInvalidRequest},
		{"HTTP/1.1 431 Request Header Fields Too Large" + rawErrorHeaders + "431 Request Header Fields Too Large", 431, leafd.EHeadersTooLarge},
		{"HTTP/1.1 501 Not Implemented" + rawErrorHeaders + "Unsupported transfer encoding", 501, leafd.EUnsupportedTransferEncoding},
		{"HTTP/1.1 505 HTTP Version Not Supported: unsupported protocol version" + rawErrorHeaders +
			"505 HTTP Version Not Supported: unsupported protocol version", 505, leafd.EUnsupportedHTTPVersion},
	} {
		out, ok := rewriteRawError([]byte(tc.raw), 65536)
		if !ok {
			t.Errorf("%q was not rewritten", tc.raw)
			continue
		}
		res, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(out)), nil)
		if err != nil {
			t.Fatalf("%q: the rewrite %q does not parse: %v", tc.raw, out, err)
		}
		var body errorBody
		dec := json.NewDecoder(res.Body)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&body); err != nil {
			t.Fatalf("%q: body: %v", tc.raw, err)
		}
		status, known := leafd.HTTPStatus(body.Error.Code)
		if res.StatusCode != tc.status || body.Error.Code != tc.code || body.Error.Message == "" || !known || status != tc.status ||
			!res.Close || res.Header.Get("Content-Type") != applicationJSON || res.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%q became %q", tc.raw, out)
		}
	}
}

// Every other Write passes untouched: a handler's answer (headers sorted,
// Date among them), a 100 Continue, net/http's answer to HTTP on a TLS
// port, and anything not exactly net/http's error answer, a body that does
// not repeat the status line included.
func TestRewriteRawErrorPassesOthers(t *testing.T) {
	for _, raw := range []string{
		"",
		"HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nDate: x\r\n\r\n1\n",
		"HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Type: text/plain; charset=utf-8\r\nDate: x\r\n\r\n400 Bad Request",
		"HTTP/1.1 100 Continue\r\n\r\n",
		"HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n",
		"HTTP/1.1 400 Bad Request" + rawErrorHeaders + "400 Bad Request and more",
		"HTTP/1.1 400 Bad Request" + rawErrorHeaders,
		"HTTP/1.1 400 Bad Request" + rawErrorHeaders[:20],
		"HTTP/1.1 404 Not Found" + rawErrorHeaders + "404 Not Found",         // no code for it: never written by conn.serve
		"HTTP/1.1 400 Bad Thing" + rawErrorHeaders + "400 Bad Thing",         // not the status text
		"HTTP/1.1 400 Bad Request:x" + rawErrorHeaders + "400 Bad Request:x", // not ": detail"
		"HTTP/1.1 501 Not Implemented" + rawErrorHeaders + "501 Not Implemented",
		"HTTP/1.1 200 OK" + rawErrorHeaders + "200 OK",
		"xHTTP/1.1 400 Bad Request" + rawErrorHeaders + "400 Bad Request",
		"HTTP/1.1 " + strings.Repeat("4", 300) + rawErrorHeaders,
	} {
		if out, ok := rewriteRawError([]byte(raw), 65536); ok {
			t.Errorf("%q was rewritten to %q", raw, out)
		}
	}
}

// A serverConn passes a Write it does not rewrite to the connection as it
// is, and reports the caller's length for one it rewrites.
func TestServerConnRewritesRawErrors(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	c := &serverConn{Conn: a, l: &connListener{maxHeaderBytes: 1 << 10}}
	got := make(chan string, 2)
	go func() {
		buf := make([]byte, 4096)
		for range 2 {
			_ = b.SetReadDeadline(time.Now().Add(5 * time.Second))
			n, _ := b.Read(buf)
			got <- string(buf[:n])
		}
	}()
	plain := "HTTP/1.1 200 OK\r\nDate: x\r\nContent-Length: 2\r\n\r\n1\n"
	if n, err := c.Write([]byte(plain)); n != len(plain) || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	if s := <-got; s != plain {
		t.Fatalf("a handler's answer became %q", s)
	}
	raw := "HTTP/1.1 431 Request Header Fields Too Large" + rawErrorHeaders + "431 Request Header Fields Too Large"
	if n, err := c.Write([]byte(raw)); n != len(raw) || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	if s := <-got; !strings.HasPrefix(s, "HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Type: application/json") ||
		!strings.Contains(s, `"code":"headers_too_large"`) || !strings.Contains(s, "1024 bytes") {
		t.Fatalf("net/http's 431 became %q", s)
	}
}
