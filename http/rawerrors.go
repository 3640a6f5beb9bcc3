package http

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/leafd/leafd"
)

// A request that net/http cannot read (a path with a malformed %-escape, a
// header with a control character, headers past MaxHeaderBytes, an unknown
// Transfer-Encoding) never reaches a handler: conn.serve answers it itself,
// with one Write straight to the connection, of
//
//	"HTTP/1.1 " + status + rawErrorHeaders + body
//
// where status is "400 Bad Request" or "400 Bad Request: invalid header
// value" and the like, and body repeats it ("Unsupported transfer encoding"
// for a 501). A handler's answer never has that shape: net/http writes its
// headers sorted, with a Date, so that Connection comes before Content-Type.
// serverConn.Write rewrites exactly such a Write into the contract's JSON
// error shape, with the same status; every other Write passes untouched.

// rawErrorHeaders are the headers of net/http's own error answers.
const rawErrorHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"

// Write passes p to the connection, unless p is one of net/http's own
// error answers, which it rewrites. A handler's answer is told apart by its
// status code alone, at no cost worth measuring: net/http's errors are all
// 4xx or 5xx, written whole in one Write.
func (c *serverConn) Write(p []byte) (int, error) {
	if len(p) < 13 || p[9] < '4' || p[9] > '5' {
		return c.Conn.Write(p)
	}
	b, ok := rewriteRawError(p, c.l.maxHeaderBytes)
	if !ok {
		return c.Conn.Write(p)
	}
	if _, err := c.Conn.Write(b); err != nil {
		return 0, err
	}
	return len(p), nil
}

// rewriteRawError returns the JSON answer for p when p is one of net/http's
// own error answers, whole, and false for anything else.
func rewriteRawError(p []byte, maxHeaderBytes int) ([]byte, bool) {
	const proto = "HTTP/1.1 "
	if !bytes.HasPrefix(p, []byte(proto)) {
		return nil, false
	}
	end := bytes.IndexByte(p, '\r')
	if end < 0 || end > 256 || !bytes.HasPrefix(p[end:], []byte(rawErrorHeaders)) {
		return nil, false
	}
	statusLine, body := string(p[len(proto):end]), string(p[end+len(rawErrorHeaders):])
	// statusLine: "NNN Text" or "NNN Text: detail".
	if len(statusLine) < 5 || statusLine[3] != ' ' {
		return nil, false
	}
	status, err := strconv.Atoi(statusLine[:3])
	if err != nil || status < 400 {
		return nil, false
	}
	text := http.StatusText(status)
	rest := statusLine[4:]
	if len(rest) < len(text) || rest[:len(text)] != text {
		return nil, false
	}
	detail := rest[len(text):]
	if detail != "" {
		if len(detail) < 3 || detail[:2] != ": " {
			return nil, false
		}
		detail = detail[2:]
	}
	wantBody := statusLine
	if status == http.StatusNotImplemented {
		wantBody = "Unsupported transfer encoding"
	}
	if body != wantBody {
		return nil, false
	}
	code, msg := rawErrorMessage(status, detail, maxHeaderBytes)
	if code == "" {
		return nil, false
	}
	js, err := json.Marshal(errorBody{Error: errorDetail{Code: code, Message: msg}})
	if err != nil {
		return nil, false
	}
	out := fmt.Appendf(nil, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nX-Content-Type-Options: nosniff\r\nCache-Control: no-store\r\nConnection: close\r\nContent-Length: %d\r\n\r\n",
		status, text, applicationJSON, len(js))
	return append(out, js...), true
}

// rawErrorMessage returns the code and message of one of net/http's own
// error answers, "" for a status the contract has no code for.
func rawErrorMessage(status int, detail string, maxHeaderBytes int) (code, msg string) {
	switch status {
	case http.StatusRequestHeaderFieldsTooLarge:
		return leafd.EHeadersTooLarge, fmt.Sprintf(
			"the request's headers are larger than this server reads (%d bytes): send fewer or shorter headers, cookies included", maxHeaderBytes)
	case http.StatusNotImplemented:
		return leafd.EUnsupportedTransferEncoding,
			"the request's Transfer-Encoding is not one this server reads: send the body with a Content-Length, or with Transfer-Encoding: chunked"
	case http.StatusHTTPVersionNotSupported:
		return leafd.EUnsupportedHTTPVersion, "the request's HTTP version is not one this server speaks: send HTTP/1.1 or HTTP/1.0"
	case http.StatusBadRequest:
	default:
		return "", ""
	}
	switch detail {
	case "":
		// net/http says no more for a request line, a path, a header line
		// (a control character in a value included) or a Content-Length
		// that does not parse.
		return leafd.EInvalidRequest, "the request could not be read: its path holds a malformed %-escape (escape a '%' as %25), " +
			"a header holds a control character such as NUL, or its request line, a header line or its Content-Length does not parse"
	case "missing required Host header":
		return leafd.EInvalidRequest, "the request has no Host header, which HTTP/1.1 requires: send one naming this server"
	case "malformed Host header":
		return leafd.EInvalidRequest, "the request's Host header is malformed: send this server's host name or address, with its port if any"
	case "invalid header name":
		return leafd.EInvalidRequest, "a header name holds a character that is not allowed (a space, a control character or a separator): correct the header"
	case "invalid header value":
		return leafd.EInvalidRequest, "a header value holds a control character such as NUL: leave the character out, or encode the value (percent or base64)"
	}
	return leafd.EInvalidRequest, "the request could not be read (" + detail + "): correct it and send it again"
}
