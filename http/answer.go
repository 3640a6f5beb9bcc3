package http

import (
	"encoding/binary"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/leafd/leafd/segment"
)

// The ID routes answer many thousands of times a second, and the HTTP
// handling around an ID costs a hundred times the ID itself. These helpers
// do what gin's c.Data, c.GetQuery and c.GetHeader do, without what the ID
// routes do not need: canonicalising a header name already canonical,
// boxing the body in a render.Render, parsing the query string into a map.
// BenchmarkSegmentRoute beside BenchmarkBareGin shows what is left.

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

// The batch routes keep their buffers and slices in a sync.Pool (bufPool,
// idPool) for the next batch; what the pool holds stays until two garbage
// collections pass without a request taking it. An answer's text is
// formatted and written in chunks of at most answerChunk bytes
// (chunkedAnswer), so its buffer never grows past one chunk, whatever the
// batch. The ranges and IDs a batch holds do grow with it: with
// segment.max_batch at a million, a snowflake batch would leave 8 MB of IDs
// per concurrent request in the pool. So those are pooled only up to what
// a batch of pooledBatch IDs needs, the default segment.max_batch (which
// bounds snowflake batches too): with the default settings every batch
// reuses a pooled slice, and a larger batch allocates its own, which the
// garbage collector takes back. Each of those caps is twice the need,
// since append grows a slice past what it holds (by up to a quarter, then
// to a size class).
const (
	pooledBatch = segment.DefaultMaxBatch
	// maxPooledBytes: a buffer holds one chunk of an answer, and
	// chunkedAnswer sizes it to at most answerChunk.
	maxPooledBytes = answerChunk
	// maxPooledRanges: a segment batch of pooledBatch IDs spans one range
	// per step's worth of IDs, at most pooledBatch ranges (a step of 1).
	maxPooledRanges = 2 * pooledBatch
	// maxPooledIDs: a snowflake batch holds its IDs.
	maxPooledIDs = 2 * pooledBatch
)

// A batch answer is formatted and written in chunks of at most answerChunk
// bytes, the one buffer reused for each. A client that reads nothing
// blocks the handler in a Write until the server's WriteTimeout: what it
// pins then is one chunk, not the whole answer (220 KB for 10,000 IDs of 19
// digits in JSON, 23 MB for a million). 32 KiB is the largest small size
// class of Go's allocator, so a buffer of one chunk wastes nothing, and
// amply more than the write buffers of net/http (4 KiB), so that writing
// in chunks costs at most one more write to the socket per 32 KiB.
const (
	answerChunk = 32 << 10
	// maxIDBytes is the most one ID takes in an answer: 19 digits (2^63-1)
	// written "…", in JSON.
	maxIDBytes = 22
	// answerTail is the most an answer writes after its last ID: "]}\n".
	answerTail = 3
	// netHTTPBuffer is how much of a body net/http buffers before it
	// writes the headers (its bufferBeforeChunkingSize).
	netHTTPBuffer = 2048
)

// chunkedAnswer writes a 200 answer whose text may exceed answerChunk: the
// handler appends to b through appendRange or appendRun, which write b out
// as the next chunk (room) when another ID might not fit, then calls
// finish. An answer that
// fits in one chunk goes out in one Write when finished, as writeOK writes
// it, with its Content-Length; a larger one goes out in several, after the
// status and Content-Type are set once, and net/http sends it chunked as it
// would send one large Write. The bytes of the body are the same either
// way.
type chunkedAnswer struct {
	c  *gin.Context
	ct []string // contentTextPlain or contentJSON
	b  []byte
	// sent: the status line is written and b holds what follows the
	// chunks already written; failed: a Write failed (the client is gone,
	// or WriteTimeout passed), so nothing more is formatted or written.
	sent, failed bool
}

// newAnswer starts an answer of content type ct in the pooled buffer b, for
// ids IDs after head bytes: b is made to hold the whole answer, or a chunk
// when the answer is larger, so that appending never grows it.
func newAnswer(c *gin.Context, ct []string, b []byte, head, ids int) chunkedAnswer {
	need := answerChunk
	if ids < answerChunk/maxIDBytes {
		need = min(need, head+ids*maxIDBytes+answerTail)
	}
	if cap(b) < need {
		b = make([]byte, 0, need)
	}
	return chunkedAnswer{c: c, ct: ct, b: b[:0]}
}

// room returns how many more IDs the chunk in a.b surely holds, at least
// one: when it holds none, it writes the chunk out first.
func (a *chunkedAnswer) room() int {
	n := (answerChunk - answerTail - len(a.b)) / maxIDBytes
	if n <= 0 {
		a.flush()
		n = (answerChunk - answerTail) / maxIDBytes
	}
	return n
}

// flush writes a.b out as the next chunk, the status line first, and
// empties it.
func (a *chunkedAnswer) flush() {
	if !a.sent {
		a.c.Writer.Header()["Content-Type"] = a.ct
		a.c.Writer.WriteHeader(http.StatusOK)
		a.sent = true
	}
	if !a.failed {
		if _, err := a.c.Writer.Write(a.b); err != nil {
			a.failed = true
		}
	}
	a.b = a.b[:0]
}

// appendRange appends the IDs of r as appendRange does, in pieces of at
// most room() IDs, so that a range of any size is formatted a chunk at a
// time.
func (a *chunkedAnswer) appendRange(r segment.Range, before, after string) {
	for r.Start < r.End && !a.failed {
		var head segment.Range
		head, r = splitRange(r, a.room())
		a.b = appendRange(a.b, head, before, after)
	}
}

// appendRun appends the IDs first to last as appendRun does, at most
// room() at a time, so that a run of any length is formatted a chunk at a
// time.
func (a *chunkedAnswer) appendRun(first, last int64, before, after string) {
	for !a.failed {
		n := int64(a.room())
		if last-first < n {
			a.b = appendRun(a.b, first, last, before, after)
			return
		}
		a.b = appendRun(a.b, first, first+n-1, before, after)
		first += n
	}
}

// finish writes what is left of the answer: all of it in one Write when it
// fit in one chunk. It returns the buffer, to put back in its pool.
//
// net/http gives an answer its Content-Length by itself only when the whole
// body fits in the 2 KiB it buffers before the headers go out; a larger
// one written in one Write would go out chunked, and its end in a write
// to the socket of its own. A 1000-ID batch (4 to 22 KB) is such an
// answer, so its length is set here: one write fewer each, and two small
// allocations, which single IDs do not pay.
func (a *chunkedAnswer) finish() []byte {
	if !a.sent {
		if len(a.b) > netHTTPBuffer {
			a.c.Writer.Header()["Content-Length"] = []string{strconv.Itoa(len(a.b))}
		}
		writeOK(a.c, a.ct, a.b)
	} else if !a.failed && len(a.b) > 0 {
		_, _ = a.c.Writer.Write(a.b)
	}
	return a.b
}

// splitRange splits r, which holds at least one ID, after its first n IDs
// (n >= 1): head holds those, rest the others, empty (Start == End) when r
// holds no more than n. The IDs of r are Start, Start+Stride, ... below
// End, as appendRange writes them; rest starts at the ID after head's
// last, which is below End, so that nothing overflows near 2^63-1.
func splitRange(r segment.Range, n int) (head, rest segment.Range) {
	stride := max(r.Stride, 1)
	if (r.End-r.Start-1)/stride < int64(n) { // r holds (End-Start-1)/stride + 1 IDs
		return r, segment.Range{}
	}
	mid := r.Start + int64(n)*stride // at most End-1: n*stride <= End-Start-1
	return segment.Range{Start: r.Start, End: mid, Stride: r.Stride},
		segment.Range{Start: mid, End: r.End, Stride: r.Stride}
}

// poolable returns s to keep in a pool, or nil when it grew past max
// elements, so that the pool does not keep it (see pooledBatch).
func poolable[T any](s []T, max int) []T {
	if cap(s) > max {
		return nil
	}
	return s
}

// wantJSON reports whether the client asked for JSON, by ?format=json or,
// without a format parameter, an Accept header naming application/json.
func wantJSON(c *gin.Context, q query) bool {
	if format, ok := q.get("format"); ok {
		return format == "json"
	}
	for _, v := range c.Request.Header["Accept"] { // "Accept" is canonical
		if strings.Contains(v, "application/json") {
			return true
		}
	}
	return false
}

// appendRange appends the IDs of r, each written as before, the digits,
// after: a contiguous run by appendRun, a strided one (from a sharded
// store) by formatting every ID afresh, since consecutive IDs then differ in
// more than their last digit.
func appendRange(b []byte, r segment.Range, before, after string) []byte {
	if r.Start >= r.End {
		return b
	}
	if r.Stride <= 1 {
		return appendRun(b, r.Start, r.End-1, before, after)
	}
	for id := r.Start; id < r.End; id += r.Stride {
		b = append(b, before...)
		b = strconv.AppendInt(b, id, 10)
		b = append(b, after...)
		if r.End-id <= r.Stride {
			break // the last ID: id+Stride might pass 2^63-1
		}
	}
	return b
}

// appendRun appends the decimal IDs first, first+1, ..., last, each
// written as before, the digits, after: "1\n2\n" for a text batch, "\"1\","
// for JSON. Consecutive IDs differ in their last digits only, so one line is
// kept written out, in three 8-byte words, and counted up in place; an ID
// then costs three 8-byte stores where the buffer has room for them (the
// bytes past the line are overwritten by the next one, or lie beyond
// len(b)), and from an ID ending in 0 the next ten are written with no
// counting at all (appendDecade): a batch of a thousand costs a few
// microseconds (BenchmarkAppendRun). The digits are counted up in the words rather than in a byte
// array, because a byte written just before a word is read from it stalls
// the processor. first must be at least 0 and at most last, and before and
// after together at most 5 bytes.
func appendRun(b []byte, first, last int64, before, after string) []byte {
	// The line is the first n bytes of w, in little-endian order: byte k
	// is bits 8*(k%8) of w[k/8]. Its last digit is byte digit.
	var w [3]uint64
	n, digit := writeLine(&w, first, before, after)
	for id := first; ; id++ {
		shift := uint(digit%8) * 8
		if l := len(b); cap(b)-l < 24 {
			b = binary.LittleEndian.AppendUint64(b, w[0])
			b = binary.LittleEndian.AppendUint64(b, w[1])
			b = binary.LittleEndian.AppendUint64(b, w[2])
			b = b[:l+n]
		} else if byte(w[digit/8]>>shift) == '0' && last-id >= 9 && cap(b)-l >= 9*n+24 {
			b = appendDecade(b, w, n, digit)
			id += 9
			w[digit/8] += 9 << shift // the line of the decade's last ID
		} else {
			o := b[l : l+24]
			binary.LittleEndian.PutUint64(o[0:], w[0])
			binary.LittleEndian.PutUint64(o[8:], w[1])
			binary.LittleEndian.PutUint64(o[16:], w[2])
			b = b[:l+n]
		}
		if id == last {
			return b
		}
		// Count up by one: 9s roll over to 0s and carry left; past the
		// first digit (999 -> 1000), the line is written afresh.
		for j := digit; ; j-- {
			if j < len(before) {
				n, digit = writeLine(&w, id+1, before, after)
				break
			}
			shift := uint(j%8) * 8
			if byte(w[j/8]>>shift) != '9' {
				w[j/8] += 1 << shift
				break
			}
			w[j/8] -= 9 << shift // '9' -> '0'
		}
	}
}

// appendDecade appends ten lines: the line w of n bytes, whose last digit
// (byte digit) is 0, and the nine that follow it, whose last digits are 1
// to 9. b must have room for 9*n+24 bytes.
func appendDecade(b []byte, w [3]uint64, n, digit int) []byte {
	l := len(b)
	o := b[l : l+9*n+24]
	var d [3]uint64
	d[digit/8] = 1 << (uint(digit%8) * 8)
	w0, w1, w2, d0, d1, d2 := w[0], w[1], w[2], d[0], d[1], d[2]
	for range 10 {
		binary.LittleEndian.PutUint64(o[0:], w0)
		binary.LittleEndian.PutUint64(o[8:], w1)
		binary.LittleEndian.PutUint64(o[16:], w2)
		w0, w1, w2 = w0+d0, w1+d1, w2+d2
		o = o[n:]
	}
	return b[:l+10*n]
}

// writeLine writes id into w as appendRun keeps it, and returns the line's
// length and the index of its last digit.
func writeLine(w *[3]uint64, id int64, before, after string) (n, digit int) {
	var line [24]byte // before, up to 19 digits (2^63-1), after
	if len(before)+len(after) > len(line)-19 {
		panic("http: appendRun's separators are longer than its line holds")
	}
	n = copy(line[:], before)
	n = len(strconv.AppendInt(line[:n], id, 10))
	digit = n - 1
	n += copy(line[n:], after)
	for k := range w {
		w[k] = binary.LittleEndian.Uint64(line[8*k:])
	}
	return n, digit
}
