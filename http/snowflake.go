package http

import (
	"net/http"
	"strconv"
	"sync"

	"github.com/gin-gonic/gin"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/snowflake"
)

// idPool holds ID slices and response buffers for snowflake batches.
var idPool = sync.Pool{New: func() any { return new(idBuf) }}

type idBuf struct {
	b   []byte
	ids []snowflake.ID
}

// getSnowflake answers GET /snowflake[?count=N][&format=json], the query
// read by snowflakeQuery.
func (s *Server) getSnowflake(c *gin.Context) {
	if s.sf == nil {
		s.writeError(c, snowflakeDisabled())
		return
	}
	var q query
	err := snowflakeQuery.read(c.Request.URL.RawQuery, &q)
	if err != nil {
		s.writeError(c, err)
		return
	}
	n := 1
	if count, ok := q.get("count"); ok {
		if n, err = parseCount(count, s.sf.MaxBatch()); err != nil {
			s.writeError(c, err)
			return
		}
	}
	buf := idPool.Get().(*idBuf)
	defer func() {
		// Not kept grown past what a pooled batch needs (answer.go).
		buf.b, buf.ids = poolable(buf.b, maxPooledBytes), poolable(buf.ids, maxPooledIDs)
		idPool.Put(buf)
	}()
	if buf.ids, err = s.sf.NextN(c.Request.Context(), n, buf.ids[:0]); err != nil {
		s.writeError(c, err)
		return
	}
	buf.b = writeSnowflakeAnswer(c, buf.b, buf.ids, wantJSON(c, q))
}

// writeSnowflakeAnswer writes the answer of GET /snowflake: ids, one a
// line in text or as {"ids":[…]} in JSON, formatted in b a chunk at a time
// (chunkedAnswer). IDs of one millisecond follow each other, so they are
// written in runs of consecutive IDs, as a segment's range is. It returns
// the buffer, to pool.
func writeSnowflakeAnswer(c *gin.Context, b []byte, ids []snowflake.ID, json bool) []byte {
	const open = `{"ids":[`
	ct, head, before, after := contentTextPlain, 0, "", "\n"
	if json {
		ct, head, before, after = contentJSON, len(open), `"`, `",`
	}
	a := newAnswer(c, ct, b, head, len(ids))
	if json {
		a.b = append(a.b, open...)
	}
	for i := 0; i < len(ids) && !a.failed; {
		j := i + 1
		for j < len(ids) && ids[j] == ids[j-1]+1 {
			j++
		}
		a.appendRun(int64(ids[i]), int64(ids[j-1]), before, after)
		i = j
	}
	if json {
		// The last ID is still in a.b, as in writeSegmentAnswer.
		if l := len(a.b); l > 0 && a.b[l-1] == ',' {
			a.b = a.b[:l-1]
		}
		a.b = append(a.b, "]}\n"...)
	}
	return a.finish()
}

// getLeafSnowflake answers Leaf's GET /api/snowflake/get/{key}: the bare
// decimal ID. The key is ignored, as Leaf ignores it, and the query is
// read as on the other Leaf route (leafQuery).
func (s *Server) getLeafSnowflake(c *gin.Context) {
	if s.sf == nil {
		s.writeLeafError(c, snowflakeDisabled())
		return
	}
	if err := leafQuery.read(c.Request.URL.RawQuery, new(query)); err != nil {
		s.writeLeafError(c, err)
		return
	}
	id, err := s.sf.Next(c.Request.Context())
	if err != nil {
		s.writeLeafError(c, err)
		return
	}
	var b [20]byte
	writeOK(c, contentTextPlain, strconv.AppendInt(b[:0], int64(id), 10))
}

// rfc3339Milli is RFC 3339 to the millisecond, as the JSON answers give
// times.
const rfc3339Milli = "2006-01-02T15:04:05.000Z07:00"

// decodeSnowflake answers GET /snowflake/{id}.
func (s *Server) decodeSnowflake(c *gin.Context) {
	if s.sf == nil {
		s.writeError(c, snowflakeDisabled())
		return
	}
	id, err := snowflake.ParseID(c.Param("id"))
	if err != nil {
		s.writeError(c, err)
		return
	}
	c.JSON(http.StatusOK, snowflake.DecodeJSON(s.sf.Layout(), id))
}

// composeSnowflake answers GET /snowflake/at/{time}: the first ID of that
// millisecond and of the next, with the configured layout.
func (s *Server) composeSnowflake(c *gin.Context) {
	if s.sf == nil {
		s.writeError(c, snowflakeDisabled())
		return
	}
	out, err := snowflake.ComposeJSON(s.sf.Layout(), c.Param("time"))
	if err != nil {
		s.writeError(c, err)
		return
	}
	c.JSON(http.StatusOK, out)
}

// decodeLeafSnowflake answers Leaf's GET /decodeSnowflakeId?snowflakeId=N
// in Leaf's shape, with the time in UTC.
func (s *Server) decodeLeafSnowflake(c *gin.Context) {
	if s.sf == nil {
		s.writeError(c, snowflakeDisabled())
		return
	}
	var q query
	_ = decodeLeafQuery.read(c.Request.URL.RawQuery, &q) // checked before (checkQuery)
	raw, ok := q.get("snowflakeId")
	if !ok || raw == "" {
		s.writeError(c, leafd.Errorf(leafd.EInvalidID,
			"the query parameter snowflakeId is missing: ask GET /decodeSnowflakeId?snowflakeId=ID (ID a snowflake ID), or GET /snowflake/ID"))
		return
	}
	id, err := snowflake.ParseID(raw)
	if err != nil {
		s.writeError(c, err)
		return
	}
	p := s.sf.Layout().Decode(id)
	c.JSON(http.StatusOK, gin.H{
		"timestamp":  strconv.FormatInt(p.UnixMs, 10) + "(" + p.Time.Format("2006-01-02 15:04:05.000") + ")",
		"sequenceId": strconv.FormatInt(p.Sequence, 10),
		"workerId":   strconv.FormatInt(p.WorkerID, 10),
	})
}

func snowflakeDisabled() error {
	return leafd.Errorf(leafd.EModeDisabled, "snowflake mode is switched off on this server (snowflake.enabled: false)")
}
