package http

import (
	"compress/gzip"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/gin-gonic/gin"
)

// gzipMinSize is the smallest body worth compressing: below it, gzip's
// header and the CPU cost more than the bytes they save.
const gzipMinSize = 1024

// gzipWriters are reused: a gzip.Writer holds some 800 KB of tables, which
// the dashboard's poll every second would otherwise allocate afresh.
var gzipWriters = sync.Pool{New: func() any {
	w, _ := gzip.NewWriterLevel(nil, gzip.DefaultCompression) // the level is valid: no error
	return w
}}

// gzipBody compresses the answers of the routes it guards (the dashboard
// and /api/state, whose JSON is the dashboard's traffic every second) for
// clients that accept gzip. It is not on the ID routes, whose path must
// stay free of allocations (answer.go), nor on /metrics, which compresses by
// itself. A body under gzipMinSize, or one that a handler encoded already,
// goes out as it is.
func gzipBody(c *gin.Context) {
	c.Header("Vary", "Accept-Encoding")
	if !acceptsGzip(c.Request.Header.Values("Accept-Encoding")) {
		c.Next()
		return
	}
	w := &gzipWriter{ResponseWriter: c.Writer}
	c.Writer = w
	defer func() {
		w.finish()
		c.Writer = w.ResponseWriter
	}()
	c.Next()
}

// acceptsGzip reports whether an Accept-Encoding header (RFC 9110, section
// 12.5.3) allows gzip: "gzip" listed without q=0, or else "*" without q=0
// (a "*" does not cover a coding the header names itself).
func acceptsGzip(values []string) bool {
	star := false
	for _, v := range values {
		for part := range strings.SplitSeq(v, ",") {
			coding, params, _ := strings.Cut(part, ";")
			coding = strings.TrimSpace(coding)
			switch {
			case strings.EqualFold(coding, "gzip"), strings.EqualFold(coding, "x-gzip"):
				return !zeroQ(params)
			case coding == "*":
				star = !zeroQ(params)
			}
		}
	}
	return star
}

// zeroQ reports whether the parameters of a coding say q=0.
func zeroQ(params string) bool {
	name, q, ok := strings.Cut(strings.TrimSpace(params), "=")
	if !ok || !strings.EqualFold(strings.TrimSpace(name), "q") {
		return false
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(q), 64)
	return err == nil && f == 0
}

// gzipWriter holds the first gzipMinSize bytes of a body back: a body that
// ends shorter goes out as it is, a longer one through gzip. Either way the
// status and headers are written only then, so that Content-Encoding can
// still be set.
type gzipWriter struct {
	gin.ResponseWriter
	head []byte       // the body so far, while under gzipMinSize
	gz   *gzip.Writer // from gzipWriters once compressing
	raw  bool         // decided against compressing
}

func (w *gzipWriter) Write(p []byte) (int, error) {
	switch {
	case w.gz != nil:
		return w.gz.Write(p)
	case w.raw:
		return w.ResponseWriter.Write(p)
	case len(w.head)+len(p) < gzipMinSize:
		w.head = append(w.head, p...)
		return len(p), nil
	}
	h := w.Header()
	if w.ResponseWriter.Written() || h.Get("Content-Encoding") != "" || !bodyAllowed(w.Status()) {
		// Headers already out, or encoded already: nothing to do but pass
		// the bytes on.
		w.raw = true
		if err := w.flushHead(); err != nil {
			return 0, err
		}
		return w.ResponseWriter.Write(p)
	}
	h.Set("Content-Encoding", "gzip")
	h.Del("Content-Length")
	w.gz = gzipWriters.Get().(*gzip.Writer)
	w.gz.Reset(w.ResponseWriter)
	if len(w.head) > 0 {
		if _, err := w.gz.Write(w.head); err != nil {
			return 0, err
		}
		w.head = nil
	}
	return w.gz.Write(p)
}

func (w *gzipWriter) WriteString(s string) (int, error) { return w.Write([]byte(s)) }

// Flush sends what the handler wrote so far: the held-back bytes decide
// against compressing, since a body being streamed may stay short.
func (w *gzipWriter) Flush() {
	if w.gz != nil {
		_ = w.gz.Flush()
	} else if !w.raw {
		w.raw = true
		_ = w.flushHead()
	}
	w.ResponseWriter.Flush()
}

func (w *gzipWriter) flushHead() error {
	if len(w.head) == 0 {
		return nil
	}
	_, err := w.ResponseWriter.Write(w.head)
	w.head = nil
	return err
}

// finish ends the body: the gzip stream's trailer, or the short body held
// back. It returns the gzip.Writer to the pool.
func (w *gzipWriter) finish() {
	if w.gz != nil {
		_ = w.gz.Close()
		w.gz.Reset(nil)
		gzipWriters.Put(w.gz)
		w.gz = nil
		return
	}
	_ = w.flushHead()
}

// bodyAllowed reports whether a response of this status has a body.
func bodyAllowed(status int) bool {
	return status >= 200 && status != http.StatusNoContent && status != http.StatusNotModified
}
