package http_test

import (
	"net/http"
	"testing"

	"github.com/gin-gonic/gin"
)

// discard is a ResponseWriter that keeps nothing, so that what is counted
// is the handler's own work, not a recorder's copies.
type discard struct{ h http.Header }

func (w *discard) Header() http.Header         { return w.h }
func (w *discard) Write(b []byte) (int, error) { return len(b), nil }
func (w *discard) WriteHeader(int)             {}

// allocs returns the allocations of one GET path through h.
func allocs(t *testing.T, h http.Handler, path string) float64 {
	t.Helper()
	req, err := http.NewRequest("GET", path, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := &discard{h: http.Header{}}
	return testing.AllocsPerRun(1000, func() {
		clear(w.h)
		h.ServeHTTP(w, req)
	})
}

// The single-ID routes allocate no more than a bare gin handler writing a
// constant with c.Data: counting requests, looking the tag up, taking the
// ID and writing it cost no allocation of their own.
func TestIDRoutesAllocateNoMoreThanGin(t *testing.T) {
	if testing.CoverMode() != "" {
		t.Skip("coverage counters change allocation counts")
	}
	gin.SetMode(gin.ReleaseMode)
	bare := gin.New()
	bare.GET("/segment/:tag", func(c *gin.Context) { c.Data(http.StatusOK, "text/plain; charset=utf-8", []byte("1\n")) })
	floor := allocs(t, bare, "/segment/bench")

	// The benchmarks' servers: a real allocator over SQLite, a generator.
	seg, sf := benchSegmentT(t), benchSnowflakeT(t)
	for _, tc := range []struct {
		name string
		h    http.Handler
		path string
	}{
		{"segment", seg, "/segment/bench"},
		{"leaf segment", seg, "/api/segment/get/bench"},
		{"snowflake", sf, "/snowflake"},
		{"leaf snowflake", sf, "/api/snowflake/get/x"},
	} {
		if got := allocs(t, tc.h, tc.path); got > floor {
			t.Errorf("GET %s: %v allocations a request, more than the bare gin handler's %v", tc.path, got, floor)
		} else {
			t.Logf("GET %s: %v allocations a request (bare gin: %v)", tc.path, got, floor)
		}
	}
}
