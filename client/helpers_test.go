package client_test

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leafd/leafd"
	leafhttp "github.com/leafd/leafd/http"
	"github.com/leafd/leafd/internal/testkit/testdb"
	"github.com/leafd/leafd/segment"
	"github.com/leafd/leafd/snowflake"
	"github.com/leafd/leafd/store"
)

var quiet = slog.New(slog.DiscardHandler)

// openStore opens and migrates the database dsn of the default engine;
// several stores may share one, as several leafd processes do.
func openStore(tb testing.TB, dsn string) store.Store {
	tb.Helper()
	s, err := store.Open(store.DefaultDriver(), dsn)
	if err != nil {
		tb.Fatal(err)
	}
	return migrated(tb, s)
}

// openShared opens two migrated stores on the database dsn of engine
// driver: two servers sharing one database.
func openShared(tb testing.TB, driver, dsn string) (a, b store.Store) {
	tb.Helper()
	open := func() store.Store {
		s, err := store.Open(driver, dsn)
		if err != nil {
			tb.Fatal(err)
		}
		return migrated(tb, s)
	}
	return open(), open()
}

// migrated migrates s and closes it when the test ends.
func migrated(tb testing.TB, s store.Store) store.Store {
	tb.Helper()
	tb.Cleanup(func() { s.Close() })
	if err := s.Migrate(context.Background()); err != nil {
		tb.Fatal(err)
	}
	return s
}

func createTag(tb testing.TB, s store.Store, name string, step int64) {
	tb.Helper()
	if _, err := s.CreateTag(context.Background(), leafd.Tag{Name: name, Step: step, MaxID: 1}); err != nil {
		tb.Fatal(err)
	}
}

// modes says which modes a test server serves.
type modes struct {
	segment   bool
	snowflake bool
	workerID  int64
}

var bothModes = modes{segment: true, snowflake: true, workerID: 1}

// leafdHandler is a real leafd HTTP handler over s: segment.Allocator,
// snowflake.Generator with a fixed worker id, leafhttp.Server.
func leafdHandler(tb testing.TB, s store.Store, m modes) http.Handler {
	tb.Helper()
	cfg := leafhttp.Config{Logger: quiet}
	if m.segment {
		a, err := segment.New(s, segment.Config{WaitTimeout: time.Second, TagRefresh: time.Hour, Logger: quiet})
		if err != nil {
			tb.Fatal(err)
		}
		if err := a.Refresh(context.Background()); err != nil {
			tb.Fatal(err)
		}
		a.Start()
		tb.Cleanup(func() { a.Close() })
		cfg.Segment = a
	}
	if m.snowflake {
		g, err := snowflake.New(snowflake.Settings{WorkerID: m.workerID, Logger: quiet})
		if err != nil {
			tb.Fatal(err)
		}
		g.Start()
		tb.Cleanup(func() { g.Close() })
		cfg.Snowflake = g
	}
	return leafhttp.New(cfg).Handler()
}

// recorder wraps a handler: it counts the /segment/ requests it sees,
// keeps their queries, and can hold them at a gate.
type recorder struct {
	h        http.Handler
	requests atomic.Int64 // /segment/ requests received
	answered atomic.Int64 // /segment/ requests answered

	mu      sync.Mutex
	queries []string
	gate    chan struct{} // non-nil: /segment/ requests wait until it is closed
}

func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasPrefix(r.URL.Path, "/segment/") {
		rec.h.ServeHTTP(w, r)
		return
	}
	rec.requests.Add(1)
	rec.mu.Lock()
	rec.queries = append(rec.queries, r.URL.RawQuery)
	gate := rec.gate
	rec.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-r.Context().Done():
			return
		}
	}
	rec.h.ServeHTTP(w, r)
	rec.answered.Add(1)
}

// hold makes the following /segment/ requests wait; the returned function
// lets them (and later ones) through.
func (rec *recorder) hold() (release func()) {
	gate := make(chan struct{})
	rec.mu.Lock()
	rec.gate = gate
	rec.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			rec.mu.Lock()
			rec.gate = nil
			rec.mu.Unlock()
			close(gate)
		})
	}
}

func (rec *recorder) allQueries() []string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]string(nil), rec.queries...)
}

// testServer is a real leafd over its own SQLite file (or dsn), behind a
// recorder, on a loopback port.
type testServer struct {
	*httptest.Server
	rec *recorder
}

func newServer(tb testing.TB, s store.Store, m modes) *testServer {
	tb.Helper()
	rec := &recorder{h: leafdHandler(tb, s, m)}
	srv := httptest.NewServer(rec)
	tb.Cleanup(srv.Close)
	return &testServer{Server: srv, rec: rec}
}

// newLeafd is a server over a fresh database holding tag (step 1000).
func newLeafd(tb testing.TB, tag string) *testServer {
	tb.Helper()
	s := openStore(tb, testdb.DSN(tb, store.DefaultDriver()))
	createTag(tb, s, tag, 1000)
	return newServer(tb, s, bothModes)
}

// waitFor polls cond until it holds, and fails the test after 10 s.
func waitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("gave up after 10s waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// parked counts goroutines blocked in a select inside the client's buffer
// (waiting for a refill), read from the goroutine dump: parked, not
// spinning, is what the dump's state says.
func parked() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		header, _, _ := strings.Cut(g, "\n")
		if strings.Contains(header, "[select") && strings.Contains(g, "leafd/client.(*Client).take(") {
			count++
		}
	}
	return count
}

// hangingServer accepts connections and never answers: a server that is
// there but unreachable in practice. Its address is returned as a URL.
func hangingServer(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
	)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	tb.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	return "http://" + ln.Addr().String()
}

// refusedURL is a loopback address where nothing listens.
func refusedURL(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

// countingTransport counts round trips per host and path.
type countingTransport struct {
	base http.RoundTripper
	mu   sync.Mutex
	n    map[string]int // host + path
}

func (t *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.mu.Lock()
	if t.n == nil {
		t.n = make(map[string]int)
	}
	t.n[r.URL.Host+r.URL.Path]++
	t.mu.Unlock()
	return t.base.RoundTrip(r)
}

// count returns the round trips to the server at baseURL for path.
func (t *countingTransport) count(baseURL, path string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n[strings.TrimPrefix(baseURL, "http://")+path]
}
