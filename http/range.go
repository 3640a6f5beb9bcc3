package http

import (
	"context"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/segment"
)

// rangeLeaser is what a Segment implements to lease ranges that expire,
// those of dated tags (*segment.Allocator does): valid is how long the
// range may be used from now, 0 for one that never expires. A Segment
// without it leases no range of a dated tag (range_unsupported).
type rangeLeaser interface {
	RangeLease(ctx context.Context, tag string, size int64) (segment.Range, time.Duration, error)
}

// validMS is the valid_ms of a range valid for d: whole milliseconds,
// rounded down, at least 1; 0 for a range that never expires.
func validMS(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return max(d.Milliseconds(), 1)
}

// getSegmentRange answers GET /segment/{tag}/range?size=N: a lease of N
// consecutive IDs, [start, end), as JSON with the IDs as decimal strings,
// and for a range that expires (a dated tag's) valid_ms: how long, from
// the answer, it may be used.
func (s *Server) getSegmentRange(c *gin.Context) {
	if s.seg == nil {
		s.writeError(c, leafd.Errorf(leafd.EModeDisabled, "segment mode is switched off on this server (segment.enabled: false)"))
		return
	}
	tag := c.Param("tag")
	if err := leafd.ValidateTag(tag); err != nil { // as in getSegment
		s.writeError(c, err)
		return
	}
	size, err := parseSize(c.Request.URL.RawQuery, s.seg.MaxRange())
	if err != nil {
		s.writeError(c, err)
		return
	}
	var r segment.Range
	var valid time.Duration
	if l, ok := s.seg.(rangeLeaser); ok {
		r, valid, err = l.RangeLease(c.Request.Context(), tag, size)
	} else {
		r, err = s.seg.Range(c.Request.Context(), tag, size)
	}
	if err != nil {
		s.writeError(c, err)
		return
	}
	var buf [96]byte
	b := append(buf[:0], `{"tag":"`...)
	b = append(b, tag...) // a valid tag needs no JSON escaping
	b = append(b, `","start":"`...)
	b = strconv.AppendInt(b, r.Start, 10)
	b = append(b, `","end":"`...)
	b = strconv.AppendInt(b, r.End, 10)
	b = append(b, '"')
	if ms := validMS(valid); ms > 0 {
		b = append(b, `,"valid_ms":`...)
		b = strconv.AppendInt(b, ms, 10)
	}
	b = append(b, "}\n"...)
	writeOK(c, contentJSON, b)
}

// parseSize reads the query of a range request (rangeQuery): size, given
// once, a decimal integer in 1..max, and format at most once; no other
// parameter.
func parseSize(rawQuery string, max int64) (int64, error) {
	var q query
	if err := rangeQuery.read(rawQuery, &q); err != nil {
		return 0, err
	}
	size, ok := q.get("size")
	if !ok {
		return 0, leafd.Errorf(leafd.EInvalidSize, "size is missing: give the number of IDs wanted, from 1 to %d, as ?size=N", max)
	}
	n, err := strconv.ParseInt(size, 10, 64)
	if err != nil || n < 1 || n > max || size[0] == '+' {
		return 0, leafd.Errorf(leafd.EInvalidSize, "size %q is not valid: use a whole number from 1 to %d (segment.max_range)", truncate(size), max)
	}
	return n, nil
}
