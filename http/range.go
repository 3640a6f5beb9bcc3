package http

import (
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/leafd/leafd"
)

// getSegmentRange answers GET /segment/{tag}/range?size=N: a lease of N
// consecutive IDs, [start, end), as JSON with the IDs as decimal strings.
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
	r, err := s.seg.Range(c.Request.Context(), tag, size)
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
	b = append(b, "\"}\n"...)
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
