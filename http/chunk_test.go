package http

import (
	"encoding/json"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/segment"
	"github.com/leafd/leafd/snowflake"
)

// oneBufferSegment is the answer of GET /segment/{tag} as it was written
// before answers were chunked: all of it formatted in one buffer, every ID
// formatted afresh.
func oneBufferSegment(tag string, ranges []segment.Range, asJSON bool) []byte {
	var b []byte
	if asJSON {
		b = append(b, `{"tag":"`+tag+`","ids":[`...)
	}
	for _, r := range ranges {
		for id := r.Start; id < r.End && id >= r.Start; id += max(r.Stride, 1) {
			if asJSON {
				b = append(b, '"')
				b = strconv.AppendInt(b, id, 10)
				b = append(b, `",`...)
			} else {
				b = strconv.AppendInt(b, id, 10)
				b = append(b, '\n')
			}
		}
	}
	if asJSON {
		if b[len(b)-1] == ',' {
			b = b[:len(b)-1]
		}
		b = append(b, "]}\n"...)
	}
	return b
}

// oneBufferSnowflake is the answer of GET /snowflake written in one buffer.
func oneBufferSnowflake(ids []snowflake.ID, asJSON bool) []byte {
	var b []byte
	if asJSON {
		b = append(b, `{"ids":[`...)
	}
	for i, id := range ids {
		if asJSON {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, '"')
			b = strconv.AppendInt(b, int64(id), 10)
			b = append(b, '"')
		} else {
			b = strconv.AppendInt(b, int64(id), 10)
			b = append(b, '\n')
		}
	}
	if asJSON {
		b = append(b, "]}\n"...)
	}
	return b
}

// writeLog is a ResponseWriter that records each Write the handler makes,
// the status and the Content-Type as they were at the first one, and fails
// every Write from the failAt-th on (0: never).
type writeLog struct {
	header      http.Header
	status      int
	contentType string
	writes      []int
	body        []byte
	failAt      int
}

func (w *writeLog) Header() http.Header { return w.header }

func (w *writeLog) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}

func (w *writeLog) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if len(w.writes) == 0 {
		w.contentType = w.header.Get("Content-Type")
	}
	w.writes = append(w.writes, len(p))
	if w.failAt > 0 && len(w.writes) >= w.failAt {
		return 0, errors.New("the client is gone")
	}
	w.body = append(w.body, p...)
	return len(p), nil
}

// record runs write, a chunked answer's writer, against a writeLog.
func record(failAt int, write func(c *gin.Context, b []byte) []byte) (*writeLog, []byte) {
	w := &writeLog{header: make(http.Header), failAt: failAt}
	gin.SetMode(gin.ReleaseMode) // as New sets it
	c, _ := gin.CreateTestContext(w)
	buf := write(c, nil)
	return w, buf
}

// checkChunks holds what every chunked answer must be: the bytes of the
// one-buffer answer, the status and Content-Type set before the first
// Write, no Write and no buffer over a chunk, and one Write only for an
// answer that fits in a chunk.
func checkChunks(t *testing.T, name string, w *writeLog, buf, want []byte, ct string) {
	t.Helper()
	if string(w.body) != string(want) {
		t.Fatalf("%s: the chunked answer differs from the one-buffer answer:\ngot  %d bytes %.200q…\nwant %d bytes %.200q…",
			name, len(w.body), w.body, len(want), want)
	}
	if w.status != http.StatusOK || w.contentType != ct {
		t.Errorf("%s: status %d, Content-Type %q at the first Write; want 200, %q", name, w.status, w.contentType, ct)
	}
	for i, n := range w.writes {
		if n > answerChunk {
			t.Errorf("%s: Write %d of %d wrote %d bytes, more than a chunk (%d)", name, i+1, len(w.writes), n, answerChunk)
		}
		if n == 0 && len(want) > 0 {
			t.Errorf("%s: Write %d of %d was empty", name, i+1, len(w.writes))
		}
	}
	// An answer that fits in a chunk, with room for one more ID, is never
	// cut: one Write, which gives a small one its Content-Length.
	if len(want) <= answerChunk-answerTail-maxIDBytes && len(w.writes) != 1 {
		t.Errorf("%s: an answer of %d bytes went out in %d Writes; want 1", name, len(want), len(w.writes))
	}
	if min := (len(want) + answerChunk - 1) / answerChunk; len(w.writes) < min {
		t.Errorf("%s: %d Writes for %d bytes", name, len(w.writes), len(want))
	}
	if cap(buf) > answerChunk {
		t.Errorf("%s: the buffer grew to %d bytes, more than a chunk (%d)", name, cap(buf), answerChunk)
	}
}

// runs returns n contiguous IDs from start as ranges of the given sizes,
// cycled.
func runs(start int64, n int, sizes ...int) []segment.Range {
	var out []segment.Range
	for i := 0; n > 0; i++ {
		k := min(sizes[i%len(sizes)], n)
		out = append(out, segment.Range{Start: start, End: start + int64(k), Stride: 1})
		start += int64(k)
		n -= k
	}
	return out
}

// idsIn counts the IDs of ranges.
func idsIn(ranges []segment.Range) int {
	n := 0
	for _, r := range ranges {
		for id := r.Start; id < r.End && id >= r.Start; id += max(r.Stride, 1) {
			n++
		}
	}
	return n
}

// The chunked segment answer is byte for byte the one-buffer answer, in
// text and JSON: single IDs, batches of 1, 2, 1000 and 10,000, ranges
// that straddle a chunk's boundary (a chunk holds 1489 IDs at most), strided
// ranges, and IDs up to 2^63-1.
func TestSegmentAnswerChunked(t *testing.T) {
	const chunkIDs = (answerChunk - answerTail) / maxIDBytes
	wide := int64(1_000_000_000_000_000_000) // 19 digits
	top := int64(math.MaxInt64)
	cases := []struct {
		name   string
		ranges []segment.Range
	}{
		{"single ID", []segment.Range{{Start: 1, End: 2}}},
		{"single ID 0", []segment.Range{{Start: 0, End: 1, Stride: 1}}},
		{"single wide ID", []segment.Range{{Start: top - 1, End: top}}},
		{"batch of 1", runs(42, 1, 1)},
		{"batch of 2", runs(99, 2, 2)},
		{"batch of 2 in two ranges", runs(9, 2, 1)},
		{"batch of 1000", runs(1, 1000, 1000)},
		{"batch of 10000", runs(1, 10_000, 10_000)},
		{"batch of 10000 wide", runs(wide, 10_000, 10_000)},
		{"batch of 10000 of stride 0", []segment.Range{{Start: wide, End: wide + 10_000}}},
		{"batch of 10000 carrying", runs(999_995, 10_000, 10_000)},
		{"batch of 10000 in ranges of 7", runs(wide, 10_000, 7)},
		{"batch of 10000 in ranges of one", runs(5, 10_000, 1)},
		{"straddling ranges", runs(wide, 10_000, chunkIDs-1, 1, 2, chunkIDs, chunkIDs+1, 3*chunkIDs)},
		{"a chunk's worth", runs(wide, chunkIDs, chunkIDs)},
		{"a chunk's worth and one", runs(wide, chunkIDs+1, chunkIDs+1)},
		{"a chunk's worth less one", runs(wide, chunkIDs-1, chunkIDs-1)},
		{"strided", []segment.Range{{Start: 3, End: 3 + 4*10_000, Stride: 4}}},
		{"strided, end not on the stride", []segment.Range{{Start: 3, End: 3 + 4*10_000 - 2, Stride: 4}}},
		{"strided wide", []segment.Range{{Start: wide + 7, End: wide + 7 + 1000*10_000, Stride: 1000}}},
		{"strided in pieces", []segment.Range{
			{Start: 1, End: 1 + 3*chunkIDs, Stride: 3}, {Start: 5, End: 6, Stride: 3},
			{Start: wide, End: wide + 16*(chunkIDs+2), Stride: 16},
		}},
		{"up to 2^63-1", runs(top-10_000, 10_000, 10_000)},
		{"up to 2^63-1 in pieces", runs(top-10_000, 10_000, 333, chunkIDs)},
		{"strided up to 2^63-1", []segment.Range{{Start: top - 4*10_000, End: top, Stride: 4}}},
		{"strided up to 2^63-1, no ID at End-Stride", []segment.Range{{Start: top - 4*5000 - 2, End: top, Stride: 4}}},
		{"strided up to 2^63-1, a huge stride", []segment.Range{{Start: 5, End: top, Stride: top / 3}}},
		{"strided up to 2^63-1, stride 2^62", []segment.Range{{Start: 1, End: top, Stride: 1 << 62}}},
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 20 {
		var rs []segment.Range
		for n := 0; n < 10_000; {
			start := rng.Int64N(top - 1_000_000)
			if rng.IntN(3) == 0 {
				start = rng.Int64N(10_000)
			}
			k := 1 + rng.IntN(min(3*chunkIDs, 10_000-n))
			stride := int64(1 + rng.IntN(2)*rng.IntN(50))
			rs = append(rs, segment.Range{Start: start, End: start + int64(k)*stride - rng.Int64N(stride), Stride: stride})
			n += k
		}
		cases = append(cases, struct {
			name   string
			ranges []segment.Range
		}{"random " + strconv.Itoa(i), rs})
	}
	tags := []string{"t", strings.Repeat("x", leafd.MaxTagLen)}
	for _, tc := range cases {
		for _, asJSON := range []bool{false, true} {
			for _, tag := range tags[:1+btoi(asJSON)] {
				name := tc.name + map[bool]string{false: " text", true: " json"}[asJSON] + " tag of " + strconv.Itoa(len(tag))
				want := oneBufferSegment(tag, tc.ranges, asJSON)
				ct := textPlain
				if asJSON {
					ct = applicationJSON
					var v struct{ IDs []string }
					if err := json.Unmarshal(want, &v); err != nil || len(v.IDs) != idsIn(tc.ranges) {
						t.Fatalf("%s: the reference answer is not JSON of %d IDs: %v", name, idsIn(tc.ranges), err)
					}
				}
				w, buf := record(0, func(c *gin.Context, b []byte) []byte {
					return writeSegmentAnswer(c, b, tag, tc.ranges, idsIn(tc.ranges), asJSON)
				})
				checkChunks(t, name, w, buf, want, ct)
			}
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// The chunked snowflake answer is byte for byte the one-buffer answer.
func TestSnowflakeAnswerChunked(t *testing.T) {
	seq := func(start int64, n int) []snowflake.ID {
		ids := make([]snowflake.ID, n)
		for i := range ids {
			ids[i] = snowflake.ID(start + int64(i))
		}
		return ids
	}
	rng := rand.New(rand.NewPCG(5, 6))
	mixed := make([]snowflake.ID, 10_000)
	for i := range mixed {
		mixed[i] = snowflake.ID(rng.Int64N(math.MaxInt64) >> rng.IntN(63))
	}
	// Runs of consecutive IDs (one millisecond's) of any length, a gap
	// between them, across changes in the number of digits.
	var runs []snowflake.ID
	for id := int64(9_999_000); len(runs) < 10_000; id += 1 + rng.Int64N(3) {
		for range rng.IntN(60) {
			runs = append(runs, snowflake.ID(id))
			id++
		}
	}
	const chunkIDs = (answerChunk - answerTail) / maxIDBytes
	for _, tc := range []struct {
		name string
		ids  []snowflake.ID
	}{
		{"runs of consecutive IDs", runs},
		{"single ID", seq(7, 1)},
		{"batch of 2", seq(1_800_000_000_000_000_000, 2)},
		{"batch of 1000", seq(1_800_000_000_000_000_000, 1000)},
		{"batch of 10000", seq(1_800_000_000_000_000_000, 10_000)},
		{"batch of 10000 up to 2^63-1", seq(math.MaxInt64-9_999, 10_000)},
		{"batch of 10000 short IDs", seq(0, 10_000)},
		{"a chunk's worth", seq(math.MaxInt64-chunkIDs*10, chunkIDs)},
		{"a chunk's worth and one", seq(math.MaxInt64-chunkIDs*10, chunkIDs+1)},
		{"mixed digits", mixed},
	} {
		for _, asJSON := range []bool{false, true} {
			name := tc.name + map[bool]string{false: " text", true: " json"}[asJSON]
			want := oneBufferSnowflake(tc.ids, asJSON)
			ct := textPlain
			if asJSON {
				ct = applicationJSON
			}
			w, buf := record(0, func(c *gin.Context, b []byte) []byte {
				return writeSnowflakeAnswer(c, b, tc.ids, asJSON)
			})
			checkChunks(t, name, w, buf, want, ct)
		}
	}
}

// Once a Write fails (the client went away, or WriteTimeout passed), the
// rest of the answer is neither formatted nor written.
func TestChunkedAnswerStopsAtFailedWrite(t *testing.T) {
	for _, asJSON := range []bool{false, true} {
		w, _ := record(1, func(c *gin.Context, b []byte) []byte {
			return writeSegmentAnswer(c, b, "t", runs(1_000_000_000_000_000_000, 10_000, 10_000), 10_000, asJSON)
		})
		if len(w.writes) != 1 {
			t.Errorf("segment, json %v: %d Writes after the first failed; want none", asJSON, len(w.writes)-1)
		}
		ids := make([]snowflake.ID, 10_000)
		w, _ = record(1, func(c *gin.Context, b []byte) []byte {
			return writeSnowflakeAnswer(c, b, ids, asJSON)
		})
		if len(w.writes) != 1 {
			t.Errorf("snowflake, json %v: %d Writes after the first failed; want none", asJSON, len(w.writes)-1)
		}
	}
}

// splitRange cuts a range after n IDs, whatever its stride, without
// passing 2^63-1.
func TestSplitRange(t *testing.T) {
	top := int64(math.MaxInt64)
	for _, tc := range []struct {
		r          segment.Range
		n          int
		head, rest segment.Range
	}{
		{segment.Range{Start: 0, End: 10}, 3, segment.Range{Start: 0, End: 3}, segment.Range{Start: 3, End: 10}},
		{segment.Range{Start: 0, End: 10, Stride: 1}, 10, segment.Range{Start: 0, End: 10, Stride: 1}, segment.Range{}},
		{segment.Range{Start: 0, End: 10}, 11, segment.Range{Start: 0, End: 10}, segment.Range{}},
		{segment.Range{Start: 0, End: 10}, 9, segment.Range{Start: 0, End: 9}, segment.Range{Start: 9, End: 10}},
		{segment.Range{Start: 3, End: 43, Stride: 4}, 10, segment.Range{Start: 3, End: 43, Stride: 4}, segment.Range{}},
		{segment.Range{Start: 3, End: 41, Stride: 4}, 9, segment.Range{Start: 3, End: 39, Stride: 4}, segment.Range{Start: 39, End: 41, Stride: 4}},
		{segment.Range{Start: 3, End: 40, Stride: 4}, 10, segment.Range{Start: 3, End: 40, Stride: 4}, segment.Range{}},
		{segment.Range{Start: top - 10, End: top, Stride: 4}, 2, segment.Range{Start: top - 10, End: top - 2, Stride: 4}, segment.Range{Start: top - 2, End: top, Stride: 4}},
		{segment.Range{Start: top - 10, End: top, Stride: 4}, 3, segment.Range{Start: top - 10, End: top, Stride: 4}, segment.Range{}},
		{segment.Range{Start: 1, End: top, Stride: 1 << 62}, 1, segment.Range{Start: 1, End: 1 + 1<<62, Stride: 1 << 62}, segment.Range{Start: 1 + 1<<62, End: top, Stride: 1 << 62}},
		{segment.Range{Start: 1, End: top, Stride: 1 << 62}, 2, segment.Range{Start: 1, End: top, Stride: 1 << 62}, segment.Range{}},
	} {
		head, rest := splitRange(tc.r, tc.n)
		if head != tc.head || rest != tc.rest {
			t.Errorf("splitRange(%+v, %d) = %+v, %+v; want %+v, %+v", tc.r, tc.n, head, rest, tc.head, tc.rest)
		}
	}
}

// Through the router and net/http: an answer that fits net/http's buffer
// keeps its Content-Length, one of 10,000 IDs goes out chunked, whole.
func TestChunkedAnswerOnTheWire(t *testing.T) {
	a := wideAllocator(t, 0)
	g, err := snowflake.New(snowflake.Settings{WorkerID: 1, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	srv := httptest.NewServer(New(Config{Segment: a, Snowflake: g, Logger: quiet}).Handler())
	t.Cleanup(srv.Close)

	for _, tc := range []struct {
		path    string
		n       int
		chunked bool
	}{
		{"/segment/wide", 1, false},
		{"/segment/wide?count=50&format=json", 50, false},
		// One chunk, larger than what net/http buffers before it sends
		// the headers: its Content-Length is set by the answer.
		{"/segment/wide?count=1000", 1000, false},
		{"/snowflake?count=1000&format=json", 1000, false},
		{"/segment/wide?count=10000", 10_000, true},
		{"/segment/wide?count=10000&format=json", 10_000, true},
		{"/snowflake?count=2", 2, false},
		{"/snowflake?count=10000&format=json", 10_000, true},
	} {
		res, err := srv.Client().Get(srv.URL + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil || res.StatusCode != 200 {
			t.Fatalf("GET %s: %d, %v", tc.path, res.StatusCode, err)
		}
		chunked := len(res.TransferEncoding) == 1 && res.TransferEncoding[0] == "chunked"
		if tc.chunked != chunked || !chunked && res.ContentLength != int64(len(body)) {
			t.Errorf("GET %s: Content-Length %d, Transfer-Encoding %q for %d bytes; want chunked %v",
				tc.path, res.ContentLength, res.TransferEncoding, len(body), tc.chunked)
		}
		var ids []string
		if strings.Contains(tc.path, "json") {
			var v struct{ IDs []string }
			if err := json.Unmarshal(body, &v); err != nil {
				t.Fatalf("GET %s: %v", tc.path, err)
			}
			ids = v.IDs
		} else {
			ids = strings.Split(strings.TrimSuffix(string(body), "\n"), "\n")
		}
		if len(ids) != tc.n {
			t.Fatalf("GET %s: %d IDs; want %d", tc.path, len(ids), tc.n)
		}
		for i := 1; i < len(ids); i++ {
			prev, _ := strconv.ParseInt(ids[i-1], 10, 64)
			id, err := strconv.ParseInt(ids[i], 10, 64)
			if err != nil || id <= prev {
				t.Fatalf("GET %s: ID %d is %q after %q", tc.path, i, ids[i], ids[i-1])
			}
		}
	}
}
