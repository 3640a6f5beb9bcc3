package http_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/leafd/leafd"
	leafhttp "github.com/leafd/leafd/http"
	"github.com/leafd/leafd/internal/testkit/testdb"
	"github.com/leafd/leafd/segment"
	"github.com/leafd/leafd/snowflake"
	"github.com/leafd/leafd/store"
)

// The baseline: a bare gin engine whose one handler writes a constant. The
// ID routes below should cost little more: the ID itself is nanoseconds,
// the HTTP handling around it is what a request costs.
func BenchmarkBareGin(b *testing.B) {
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	e.GET("/segment/:tag", func(c *gin.Context) { c.Data(http.StatusOK, "text/plain; charset=utf-8", []byte("1\n")) })
	serve(b, e, "/segment/bench", 1)
}

// benchSegment serves a tag of a real SQLite store whose ranges hold ten
// million IDs, so that loads stay in the background as in production.
func benchSegment(b *testing.B) http.Handler { return benchSegmentT(b) }

func benchSegmentT(b testing.TB) http.Handler { return benchSegmentServer(b).Handler() }

func benchSegmentServer(b testing.TB) *leafhttp.Server {
	b.Helper()
	s, err := store.Open(store.DefaultDriver(), testdb.DSN(b, store.DefaultDriver()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	ctx := context.Background()
	if err := s.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	if _, err := s.CreateTag(ctx, leafd.Tag{Name: "bench", MaxID: 1, Step: 10_000_000}); err != nil {
		b.Fatal(err)
	}
	a, err := segment.New(s, segment.Config{MaxStep: 100_000_000, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { a.Close() })
	if err := a.Refresh(ctx); err != nil {
		b.Fatal(err)
	}
	a.Start()
	return leafhttp.New(leafhttp.Config{Segment: a, Logger: quiet})
}

func benchSnowflake(b *testing.B) http.Handler { return benchSnowflakeT(b) }

func benchSnowflakeT(b testing.TB) http.Handler { return benchSnowflakeServer(b).Handler() }

func benchSnowflakeServer(b testing.TB) *leafhttp.Server {
	b.Helper()
	g, err := snowflake.New(snowflake.Settings{WorkerID: 1, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { g.Close() })
	return leafhttp.New(leafhttp.Config{Snowflake: g, Logger: quiet})
}

func BenchmarkSegmentRoute(b *testing.B) { serve(b, benchSegment(b), "/segment/bench", 1) }

// BenchmarkSegmentRouteLeaf is Leaf's route: the bare ID, no newline.
func BenchmarkSegmentRouteLeaf(b *testing.B) { serve(b, benchSegment(b), "/api/segment/get/bench", 1) }

// The batch routes: 1000 IDs a request, written without an allocation per
// ID; ids/s is what one core turns out.
func BenchmarkSegmentRouteBatch(b *testing.B) {
	serve(b, benchSegment(b), "/segment/bench?count=1000", 1000)
}

func BenchmarkSegmentRouteBatchJSON(b *testing.B) {
	serve(b, benchSegment(b), "/segment/bench?count=1000&format=json", 1000)
}

// A batch of the default segment.max_batch, written in chunks of about
// 32 KiB: an answer of 10,000 IDs is some 100 KB here. The body goes to a discardWriter, so that what is counted is
// what the server allocates, not a recorder's buffer growing chunk by
// chunk.
func BenchmarkSegmentRouteBatch10000(b *testing.B) {
	serveDiscard(b, benchSegment(b), "/segment/bench?count=10000", 10_000)
}

func BenchmarkSegmentRouteBatch10000JSON(b *testing.B) {
	serveDiscard(b, benchSegment(b), "/segment/bench?count=10000&format=json", 10_000)
}

func BenchmarkSnowflakeRoute(b *testing.B) { serve(b, benchSnowflake(b), "/snowflake", 1) }

// BenchmarkSnowflakeRouteBatch is bounded by the layout: 4096 IDs per
// millisecond with the default 12 sequence bits.
func BenchmarkSnowflakeRouteBatch(b *testing.B) {
	serve(b, benchSnowflake(b), "/snowflake?count=1000", 1000)
}

// serve runs GET path against h in memory, without a network, and reports
// IDs per second when each answer carries ids of them.
func serve(b *testing.B, h http.Handler, path string, ids int) {
	b.Helper()
	req := httptest.NewRequest("GET", path, nil)
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatalf("GET %s = %d %s", path, w.Code, w.Body)
		}
	}
	if ids > 1 {
		b.ReportMetric(float64(ids)*float64(b.N)/b.Elapsed().Seconds(), "ids/s")
	}
}

// BenchmarkSnowflakeRouteBatch10000 waits for the clock more than it
// works (10,000 IDs span three milliseconds), but shows what writing a
// large answer in chunks allocates.
func BenchmarkSnowflakeRouteBatch10000JSON(b *testing.B) {
	serveDiscard(b, benchSnowflake(b), "/snowflake?count=10000&format=json", 10_000)
}

// discardWriter is a ResponseWriter that counts the body and keeps none of
// it.
type discardWriter struct {
	header http.Header
	code   int
	n      int
}

func (w *discardWriter) Header() http.Header { return w.header }

func (w *discardWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}

func (w *discardWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	w.n += len(p)
	return len(p), nil
}

// serveDiscard is serve for large answers, written to a discardWriter.
func serveDiscard(b *testing.B, h http.Handler, path string, ids int) {
	b.Helper()
	req := httptest.NewRequest("GET", path, nil)
	w := &discardWriter{header: make(http.Header)}
	b.ReportAllocs()
	for b.Loop() {
		clear(w.header)
		w.code, w.n = 0, 0
		h.ServeHTTP(w, req)
		if w.code != http.StatusOK || w.n < ids {
			b.Fatalf("GET %s = %d, %d bytes", path, w.code, w.n)
		}
	}
	b.ReportMetric(float64(ids)*float64(b.N)/b.Elapsed().Seconds(), "ids/s")
}
