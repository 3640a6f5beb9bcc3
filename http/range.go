package http

import (
	"errors"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/segment"
)

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
// the answer, it may be used. A dated tag's range is leased only to a
// request with expiring=true, a client's word that it honours valid_ms:
// one that ignores it would hand out numbers of a period gone.
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
	size, expiring, err := parseRangeQuery(c.Request.URL.RawQuery, s.seg.MaxRange())
	if err != nil {
		s.writeError(c, err)
		return
	}
	var r segment.Range
	var valid time.Duration
	if expiring {
		r, valid, err = s.seg.RangeLease(c.Request.Context(), tag, size)
	} else {
		r, err = s.seg.Range(c.Request.Context(), tag, size)
	}
	if err != nil {
		if errors.Is(err, segment.ErrRangeExpires) {
			err = leafd.Errorf(leafd.ERangeUnsupported,
				"tag %q is dated: its ranges expire at the end of their period; a client that honours valid_ms (hands out none of a range's IDs after it) asks with GET /segment/%s/range?size=N&expiring=true, any other asks for numbers with GET /segment/%s?count=N",
				tag, tag, tag)
		}
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

// parseRangeQuery reads the query of a range request (rangeQuery): size,
// given once, a decimal integer in 1..max; format at most once; expiring
// at most once, exactly "true" (the client honours valid_ms); no other
// parameter.
func parseRangeQuery(rawQuery string, max int64) (size int64, expiring bool, err error) {
	var q query
	if err := rangeQuery.read(rawQuery, &q); err != nil {
		return 0, false, err
	}
	if v, ok := q.get("expiring"); ok {
		if v != "true" {
			return 0, false, leafd.Errorf(leafd.EInvalidQuery,
				"expiring %q is not valid: the only value is true, sent by a client that hands out none of a range's IDs after its valid_ms; leave it out otherwise", truncate(v))
		}
		expiring = true
	}
	s, ok := q.get("size")
	if !ok {
		return 0, false, leafd.Errorf(leafd.EInvalidSize, "size is missing: give the number of IDs wanted, from 1 to %d, as ?size=N", max)
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 1 || n > max || s[0] == '+' {
		return 0, false, leafd.Errorf(leafd.EInvalidSize, "size %q is not valid: use a whole number from 1 to %d (segment.max_range)", truncate(s), max)
	}
	return n, expiring, nil
}
