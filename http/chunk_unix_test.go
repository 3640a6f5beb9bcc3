//go:build unix

package http_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leafd/leafd/internal/testkit/testenv"

	"github.com/leafd/leafd"
	leafhttp "github.com/leafd/leafd/http"
	"github.com/leafd/leafd/segment"
)

// 200 clients pipeline requests for 10,000 IDs of 19 digits in JSON (220
// KB an answer) and read nothing, so that each blocks the handler of its
// connection in a Write. The server holds one chunk of the answer for
// each (32 KiB), not the answer: the live heap grows by less than 64 KiB a
// connection, the chunk and net/http's own buffers, where a whole answer
// would pin some 220 KiB.
func TestNonReadingClientPinsOneChunk(t *testing.T) {
	testenv.Slow(t) // opens 200 connections
	const conns = 200
	s := openDefault(t)
	ctx := context.Background()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateTag(ctx, leafd.Tag{Name: "wide", MaxID: 1_000_000_000_000_000_000, Step: 100_000_000}); err != nil {
		t.Fatal(err)
	}
	a := startAllocator(t, s, segment.Config{MaxStep: 100_000_000, Logger: quiet})
	router := leafhttp.New(leafhttp.Config{Segment: a, Logger: quiet}).Handler()
	var inFlight atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inFlight.Add(1)
		defer inFlight.Add(-1)
		router.ServeHTTP(w, r)
	}))
	srv.Listener = smallSendBuffers{srv.Listener}
	srv.Start()
	// Closed after the clients (cleanups run last first): Close waits
	// for the handlers, which return once their client is gone.
	t.Cleanup(srv.Close)
	addr := strings.TrimPrefix(srv.URL, "http://")

	heap := func() uint64 {
		runtime.GC() // twice: sync.Pool keeps its buffers through one
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	// Warm up: an answer read whole, so that the pools and the range exist.
	res, err := http.Get(srv.URL + "/segment/wide?count=10000&format=json")
	if err != nil {
		t.Fatal(err)
	}
	n, _ := io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || n < 220_000 {
		t.Fatalf("warm-up: %d, %d bytes; want 200 and 10,000 IDs of 19 digits", res.StatusCode, n)
	}
	http.DefaultClient.CloseIdleConnections()
	base := heap()

	// Ten answers a connection, 2.2 MB, more than the kernel holds for a
	// client whose receive buffer is 4 KiB (stingyDialer) and a server
	// whose send buffer is 16 KiB (smallSendBuffers), as a client across
	// the Internet that reads nothing would leave it.
	req := strings.Repeat("GET /segment/wide?count=10000&format=json HTTP/1.1\r\nHost: x\r\n\r\n", 10)
	var clients []net.Conn
	t.Cleanup(func() {
		for _, c := range clients {
			c.Close()
		}
	})
	for range conns {
		c, err := stingyDialer.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, c)
		go func() { _, _ = io.WriteString(c, req) }()
	}
	// Wait until every connection's handler is blocked in a Write: all
	// of them in flight, and staying so.
	deadline := time.Now().Add(30 * time.Second)
	for steady := 0; steady < 10; {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d handlers in flight after 30 s: the clients' writes are not blocked", inFlight.Load(), conns)
		}
		time.Sleep(50 * time.Millisecond)
		if inFlight.Load() == conns {
			steady++
		} else {
			steady = 0
		}
	}
	peak := heap()
	if got := inFlight.Load(); got != conns {
		t.Fatalf("%d of %d handlers in flight when the heap was measured", got, conns)
	}
	per := (int64(peak) - int64(base)) / conns
	t.Logf("live heap %.1f MB at rest, %.1f MB with %d blocked answers of 10,000 IDs: %.1f KiB a connection",
		mb(base), mb(peak), conns, float64(per)/1024)
	if per > 64<<10 {
		t.Errorf("a client that reads nothing pins %.1f KiB of heap on the server; want at most 64 KiB (one 32 KiB chunk and net/http's buffers), not the whole answer",
			float64(per)/1024)
	}
}

// smallSendBuffers gives each connection it accepts a send buffer of 16
// KiB, which Linux would otherwise grow to megabytes on loopback, so that a
// client that reads nothing blocks the server's writes within an answer.
type smallSendBuffers struct{ net.Listener }

func (l smallSendBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(16 << 10)
	}
	return c, err
}
