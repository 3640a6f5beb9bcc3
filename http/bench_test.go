package http_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/leafd/leafd"
	leafhttp "github.com/leafd/leafd/http"
	"github.com/leafd/leafd/internal/testdb"
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
	serve(b, e, "/segment/bench")
}

// BenchmarkSegmentRoute serves a tag of a real SQLite store whose ranges
// hold a million IDs, so that loads stay in the background as in
// production.
func BenchmarkSegmentRoute(b *testing.B) {
	s, err := store.OpenSQLite(testdb.SQLite(b))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if err := s.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	if _, err := s.CreateTag(ctx, leafd.Tag{Name: "bench", MaxID: 1, Step: 1_000_000}); err != nil {
		b.Fatal(err)
	}
	a, err := segment.New(s, segment.Config{MaxStep: 10_000_000, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	if err := a.Refresh(ctx); err != nil {
		b.Fatal(err)
	}
	a.Start()
	serve(b, leafhttp.New(leafhttp.Config{Segment: a, Logger: quiet}).Handler(), "/segment/bench")
}

func BenchmarkSnowflakeRoute(b *testing.B) {
	g, err := snowflake.New(snowflake.Settings{WorkerID: 1, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	serve(b, leafhttp.New(leafhttp.Config{Snowflake: g, Logger: quiet}).Handler(), "/snowflake")
}

// serve runs GET path against h in memory, without a network.
func serve(b *testing.B, h http.Handler, path string) {
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
}
