package http

import (
	"strconv"
	"sync"

	"github.com/gin-gonic/gin"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/segment"
)

const (
	textPlain       = "text/plain; charset=utf-8"
	applicationJSON = "application/json; charset=utf-8"
)

// bufPool holds response buffers and range slices for batch answers, so
// that a batch is written without an allocation per ID. Put them back with
// release.
var bufPool = sync.Pool{New: func() any { return new(batchBuf) }}

type batchBuf struct {
	b      []byte
	ranges []segment.Range
}

// release returns buf to bufPool, dropping a slice that a batch larger
// than pooledBatch grew (see pooledBatch).
func (buf *batchBuf) release() {
	buf.b = poolable(buf.b, maxPooledBytes)
	buf.ranges = poolable(buf.ranges, maxPooledRanges)
	bufPool.Put(buf)
}

// getSegment answers GET /segment/{tag}[?count=N][&format=json]. The query
// is read by segmentQuery: a repeated count or format, or any other
// parameter, is refused.
func (s *Server) getSegment(c *gin.Context) {
	if s.seg == nil {
		s.writeError(c, leafd.Errorf(leafd.EModeDisabled, "segment mode is switched off on this server (segment.enabled: false)"))
		return
	}
	// The tag is validated here although segment validates it too: segment
	// checks only a name it does not serve, and it serves every row of the
	// table, a Leaf row that leafd refuses ("..", `a"b`) included, which
	// the contract answers invalid_tag. The JSON below writes tag as it is,
	// which only a valid one allows.
	tag := c.Param("tag")
	if err := leafd.ValidateTag(tag); err != nil {
		s.writeError(c, err)
		return
	}
	var q query
	err := segmentQuery.read(c.Request.URL.RawQuery, &q)
	if err != nil {
		s.writeError(c, err)
		return
	}
	n := 1
	if count, ok := q.get("count"); ok {
		if n, err = parseCount(count, s.seg.MaxBatch()); err != nil {
			s.writeError(c, err)
			return
		}
	}
	buf := bufPool.Get().(*batchBuf)
	defer buf.release()
	if buf.ranges, err = s.seg.NextN(c.Request.Context(), tag, n, buf.ranges[:0]); err != nil {
		s.writeError(c, err)
		return
	}
	buf.b = writeSegmentAnswer(c, buf.b, tag, buf.ranges, n, wantJSON(c, q))
}

// writeSegmentAnswer writes the answer of GET /segment/{tag}: the n IDs of
// ranges, one a line in text or as {"tag":…,"ids":[…]} in JSON, formatted
// in b a chunk at a time (chunkedAnswer). It returns the buffer, to pool.
func writeSegmentAnswer(c *gin.Context, b []byte, tag string, ranges []segment.Range, n int, json bool) []byte {
	if !json {
		a := newAnswer(c, contentTextPlain, b, 0, n)
		for _, r := range ranges {
			a.appendRange(r, "", "\n")
		}
		return a.finish()
	}
	const open, mid = `{"tag":"`, `","ids":[`
	a := newAnswer(c, contentJSON, b, len(open)+len(tag)+len(mid), n)
	a.b = append(a.b, open...)
	a.b = append(a.b, tag...) // a valid tag needs no JSON escaping
	a.b = append(a.b, mid...)
	for _, r := range ranges {
		a.appendRange(r, `"`, `",`)
	}
	// The last ID is still in a.b: a chunk is written out only when
	// another ID follows (room), or when a Write failed.
	if l := len(a.b); l > 0 && a.b[l-1] == ',' {
		a.b = a.b[:l-1]
	}
	a.b = append(a.b, "]}\n"...)
	return a.finish()
}

// getLeafSegment answers Leaf's GET /api/segment/get/{tag}: the bare
// decimal ID, errors as HTTP 500 with a text body. Its query is read as
// Leaf reads it, ignoring what it does not take (leafQuery).
func (s *Server) getLeafSegment(c *gin.Context) {
	if s.seg == nil {
		s.writeLeafError(c, leafd.Errorf(leafd.EModeDisabled, "segment mode is switched off on this server"))
		return
	}
	tag := c.Param("tag")
	if err := leafd.ValidateTag(tag); err != nil { // as in getSegment
		s.writeLeafError(c, err)
		return
	}
	if err := leafQuery.read(c.Request.URL.RawQuery, new(query)); err != nil {
		s.writeLeafError(c, err)
		return
	}
	id, err := s.seg.Next(c.Request.Context(), tag)
	if err != nil {
		s.writeLeafError(c, err)
		return
	}
	var b [20]byte
	writeOK(c, contentTextPlain, strconv.AppendInt(b[:0], id, 10))
}
