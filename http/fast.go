package http

import (
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
)

// The ID routes answer many thousands of times a second, and the HTTP
// handling around an ID costs a hundred times the ID itself. These helpers
// do what gin's c.Data, c.GetQuery and c.GetHeader do, without what the ID
// routes do not need: canonicalising a header name already canonical,
// boxing the body in a render.Render, parsing an empty query string into a
// map. BenchmarkSegmentRoute beside BenchmarkBareGin shows what is left.

// The Content-Type values, shared by every response. net/http only reads
// them, and Header().Set or Add replace or copy the slice, never write into
// it.
var (
	contentTextPlain = []string{textPlain}
	contentJSON      = []string{applicationJSON}
)

// writeOK answers 200 with body b of content type ct (contentTextPlain or
// contentJSON).
func writeOK(c *gin.Context, ct []string, b []byte) {
	c.Writer.Header()["Content-Type"] = ct
	c.Writer.WriteHeader(http.StatusOK)
	_, _ = c.Writer.Write(b)
}

// query returns the value of the query parameter key, as c.GetQuery does,
// but without parsing anything when the request has no query string, as
// most ID requests have none.
func query(c *gin.Context, key string) (string, bool) {
	if c.Request.URL.RawQuery == "" {
		return "", false
	}
	return c.GetQuery(key)
}

// wantJSON reports whether the client asked for JSON, by ?format=json or an
// Accept header naming application/json.
func wantJSON(c *gin.Context) bool {
	if f, ok := query(c, "format"); ok {
		return f == "json"
	}
	for _, v := range c.Request.Header["Accept"] { // "Accept" is canonical
		if strings.Contains(v, "application/json") {
			return true
		}
	}
	return false
}

// appendRun appends the decimal IDs start, start+1, ..., end-1, each
// written as before, the digits, after: "1\n2\n" for a text batch, "\"1\","
// for JSON. Consecutive IDs differ in their last digits only, so the digits
// are counted up in place instead of formatted afresh for every ID: a batch
// of a thousand costs a few microseconds. start must be at least 0 and end
// at most 2^63-1.
func appendRun(b []byte, start, end int64, before, after string) []byte {
	if start >= end {
		return b
	}
	var d [20]byte // 2^63-1 has 19 digits
	i := len(d)
	for v := start; ; v /= 10 {
		i--
		d[i] = byte('0' + v%10)
		if v < 10 {
			break
		}
	}
	for id := start; ; id++ {
		b = append(b, before...)
		b = append(b, d[i:]...)
		b = append(b, after...)
		if id == end-1 {
			return b
		}
		// Count up by one: 9s roll over to 0s and carry left.
		j := len(d) - 1
		for d[j] == '9' {
			d[j] = '0'
			j--
		}
		if j < i { // a new leading digit, 999 -> 1000
			i--
			d[i] = '1'
		} else {
			d[j]++
		}
	}
}
