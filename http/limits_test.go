package http_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leafd/leafd/internal/testkit/testenv"
	"github.com/leafd/leafd/store"

	"github.com/leafd/leafd"
	leafhttp "github.com/leafd/leafd/http"
	"github.com/leafd/leafd/internal/testkit/testdb"
	"github.com/leafd/leafd/segment"
)

// limitServer serves cfg on a loopback listener through Serve, so that the
// listener's cap and the server's timeouts are those of production. It has
// the tag "bench" (ranges of ten million) and the admin routes.
func limitServer(tb testing.TB, cfg leafhttp.Config) string {
	tb.Helper()
	s := openAdminStore(tb, store.DefaultDriver(), testdb.DSN(tb, store.DefaultDriver()))
	ctx := context.Background()
	if _, err := s.CreateTag(ctx, leafd.Tag{Name: "bench", MaxID: 1, Step: 10_000_000}); err != nil {
		tb.Fatal(err)
	}
	if cfg.Segment == nil {
		a, err := segment.New(s, segment.Config{MaxStep: 100_000_000, MaxBatch: 1_000_000, Logger: quiet})
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { a.Close() })
		if err := a.Refresh(ctx); err != nil {
			tb.Fatal(err)
		}
		a.Start()
		cfg.Segment = a
	}
	cfg.Tags, cfg.AdminToken = s, token
	if cfg.Logger == nil {
		cfg.Logger = quiet
	}
	srv := leafhttp.New(cfg)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		if err := <-served; err != nil {
			tb.Errorf("Serve: %v", err)
		}
	})
	return ln.Addr().String()
}

// closedWithin reports whether the server closes c within d: a read that
// ends in EOF or a reset, not in the client's own deadline.
func closedWithin(c net.Conn, d time.Duration) (bool, time.Duration) {
	start := time.Now()
	_ = c.SetReadDeadline(start.Add(d))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false, time.Since(start)
	}
	return true, time.Since(start)
}

// A client that trickles its headers (slowloris) is cut at
// ReadHeaderTimeout.
func TestSlowHeadersAreCut(t *testing.T) {
	addr := limitServer(t, leafhttp.Config{ReadHeaderTimeout: 500 * time.Millisecond})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	done := make(chan struct{})
	go func() { // one header byte every 100 ms, for at most 5 s
		defer close(done)
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n"); err != nil {
			return
		}
		for i := 0; i < 50; i++ {
			if _, err := c.Write([]byte("X")); err != nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	closed, _ := closedWithin(c, 5*time.Second)
	took := time.Since(start)
	<-done
	if !closed {
		t.Fatalf("a client trickling its headers was still connected after %v", took)
	}
	t.Logf("slowloris cut after %v", took.Round(time.Millisecond))
}

// An admin body sent a byte a second is cut at ReadTimeout, not read
// forever.
func TestSlowBodyIsCut(t *testing.T) {
	addr := limitServer(t, leafhttp.Config{ReadTimeout: time.Second})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	body := `{"tag":"slow","step":1000}`
	fmt.Fprintf(c, "POST /api/tags HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", token, len(body))
	start := time.Now()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for i := 0; i < len(body); i++ {
			select {
			case <-stop:
				return
			case <-time.After(time.Second):
			}
			if _, err := c.Write([]byte{body[i]}); err != nil {
				return
			}
		}
	}()
	// The server may answer an error before closing (it read part of a
	// body that never completed); either way the connection must end.
	closed, _ := closedWithin(c, 6*time.Second)
	took := time.Since(start)
	if !closed {
		t.Fatalf("an admin body sent at 1 byte/s was still being read after %v", took)
	}
	t.Logf("slow body cut after %v", took.Round(time.Millisecond))
}

// Past http.max_connections a new connection waits while every
// connection has a request in flight, and is served once one closes.
func TestConnectionCapWaits(t *testing.T) {
	addr := limitServer(t, leafhttp.Config{MaxConnections: 3})
	var held []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		// A request whose body has not arrived: the connection is busy.
		fmt.Fprintf(c, "POST /api/tags HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: 20\r\n\r\n{", token)
		held = append(held, c)
	}
	time.Sleep(200 * time.Millisecond)  // let the server take them
	extra, err := net.Dial("tcp", addr) // the kernel's backlog accepts it
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	fmt.Fprint(extra, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	r := bufio.NewReader(extra)
	_ = extra.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := r.Peek(1); err == nil {
		t.Fatal("a fourth connection was served while three requests were in flight and the cap is 3")
	}
	held[0].Close()
	_ = extra.SetReadDeadline(time.Now().Add(5 * time.Second))
	res, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatalf("the waiting connection was not served once a slot freed: %v", err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("status %d", res.StatusCode)
	}
}

// At the cap, idle keep-alive connections do not lock a new client out:
// the one idle the longest is closed to make room.
func TestConnectionCapClosesIdle(t *testing.T) {
	addr := limitServer(t, leafhttp.Config{MaxConnections: 3})
	var held []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprint(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		held = append(held, c) // idle now, kept alive
		time.Sleep(10 * time.Millisecond)
	}
	start := time.Now()
	res, err := (&http.Client{Timeout: 2 * time.Second}).Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatalf("a new client was locked out by three idle connections: %v", err)
	}
	res.Body.Close()
	t.Logf("served at the cap after %v", time.Since(start).Round(time.Millisecond))
	if closed, _ := closedWithin(held[0], time.Second); !closed {
		t.Error("the connection idle the longest was not the one closed")
	}
}

// At the cap, connections that trickle their first request's headers
// (slowloris) do not lock a new client out until ReadHeaderTimeout: the one
// that has waited the longest for its request is closed to make room.
func TestConnectionCapClosesSlowloris(t *testing.T) {
	addr := limitServer(t, leafhttp.Config{MaxConnections: 3, ReadHeaderTimeout: 30 * time.Second})
	var held []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprint(c, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: a") // and never more
		held = append(held, c)
		time.Sleep(50 * time.Millisecond)
	}
	start := time.Now()
	res, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatalf("a new client was locked out by three connections trickling their headers: %v", err)
	}
	res.Body.Close()
	t.Logf("served at the cap after %v", time.Since(start).Round(time.Millisecond))
	if closed, _ := closedWithin(held[0], time.Second); !closed {
		t.Error("the connection that waited the longest for its request was not the one closed")
	}
}

// At the cap, a busy keep-alive connection (idle only for moments between
// its requests) keeps its slot: a new client waits for it to go quiet
// rather than take it, which would only send the busy client to the back
// of the accept queue.
func TestConnectionCapKeepsBusyConnection(t *testing.T) {
	addr := limitServer(t, leafhttp.Config{MaxConnections: 1})
	busy, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	r := bufio.NewReader(busy)
	ask := func() error {
		if _, err := fmt.Fprint(busy, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			return err
		}
		_ = busy.SetReadDeadline(time.Now().Add(5 * time.Second))
		res, err := http.ReadResponse(r, nil)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, res.Body)
		return res.Body.Close()
	}
	if err := ask(); err != nil {
		t.Fatal(err)
	}
	type result struct {
		err error
		at  time.Time
	}
	served := make(chan result, 1)
	go func() {
		res, err := (&http.Client{Timeout: 10 * time.Second}).Get("http://" + addr + "/healthz")
		if err == nil {
			res.Body.Close()
		}
		served <- result{err, time.Now()}
	}()
	// Busy for 1.5 s: a request every 20 ms, on the one connection.
	for end := time.Now().Add(1500 * time.Millisecond); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if err := ask(); err != nil {
			t.Fatalf("the busy connection lost its slot to a new client: %v", err)
		}
	}
	quiet := time.Now()
	got := <-served
	if got.err != nil {
		t.Fatalf("the new client was not served once the busy connection went quiet: %v", got.err)
	}
	if got.at.Before(quiet) {
		t.Fatal("a second connection was served while the cap is 1 and the first was busy")
	}
	t.Logf("the new client was served %v after the busy connection went quiet", got.at.Sub(quiet).Round(time.Millisecond))
	if closed, _ := closedWithin(busy, time.Second); !closed {
		t.Error("the quiet connection was not the one closed to make room")
	}
}

// 400 clients pipeline requests for 10,000 IDs in JSON and never read:
// each holds at most one chunk of an answer (32 KiB, of an answer of about
// 80 KB here) while its write is blocked, and what the kernel buffered
// before. WriteTimeout cuts a
// connection blocked in a write, IdleTimeout one whose answers all fit the
// kernel's buffers, so the memory they pin is bounded by the connections
// (http.max_connections) and comes back; a well-behaved client keeps being
// served fast beside them.
func TestNonReadingClientsAreCut(t *testing.T) {
	testenv.Slow(t) // opens 400 connections
	const attackers = 400
	// Under the race detector the server is ten times slower: the
	// attack's answers take longer to make, and the client's bound is
	// looser.
	writeTimeout, drain, p99Bound := 3*time.Second, 5*time.Second, time.Second
	if raceEnabled {
		writeTimeout, drain, p99Bound = 6*time.Second, 20*time.Second, 10*time.Second
	}
	addr := limitServer(t, leafhttp.Config{WriteTimeout: writeTimeout, IdleTimeout: writeTimeout})
	heap := func() uint64 {
		runtime.GC() // twice: sync.Pool keeps its buffers through one
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapInuse
	}
	// Warm up: one batch answer, so the pools and the range exist.
	if r := send(t, "GET", "http://"+addr+"/segment/bench?count=10000&format=json", ""); r.status != 200 {
		t.Fatalf("warm-up: %d %s", r.status, r.body)
	}
	base := heap()

	attackStart := time.Now()
	req := strings.Repeat("GET /segment/bench?count=10000&format=json HTTP/1.1\r\nHost: x\r\n\r\n", 10)
	conns := make([]net.Conn, 0, attackers)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range attackers {
		c, err := stingyDialer.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		go func() { _, _ = io.WriteString(c, req) }()
	}

	// The well-behaved client, while the attack holds its answers.
	var lat []time.Duration
	client := &http.Client{Timeout: 10 * time.Second}
	deadline := time.Now().Add(writeTimeout / 2)
	for time.Now().Before(deadline) {
		start := time.Now()
		res, err := client.Get("http://" + addr + "/segment/bench")
		if err != nil {
			t.Fatalf("the well-behaved client failed beside the attack: %v", err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		lat = append(lat, time.Since(start))
	}
	peak := heap()

	// Every attacker is cut once WriteTimeout (or IdleTimeout) passes.
	// Nothing is read until then: reading would let the server go on.
	time.Sleep(2*writeTimeout + time.Second - time.Since(attackStart))
	var wg sync.WaitGroup
	var mu sync.Mutex
	open := 0
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if closed, _ := closedWithin(c, drain); !closed {
				mu.Lock()
				open++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	after := heap()

	slices.Sort(lat)
	p99 := lat[len(lat)*99/100]
	t.Logf("heap in use: %.1f MB at rest, %.1f MB under %d non-reading clients, %.1f MB after they were cut; "+
		"well-behaved client: %d requests, p50 %v, p99 %v",
		mb(base), mb(peak), attackers, mb(after), len(lat), lat[len(lat)/2], p99)
	if open > 0 {
		t.Errorf("%d of %d non-reading connections were still open %v after WriteTimeout and IdleTimeout", open, attackers, drain)
	}
	// Each attacker pins at most one chunk, 32 KiB, and 64 KB of buffers.
	if limit := base + attackers*128<<10 + 32<<20; peak > limit {
		t.Errorf("heap grew to %.1f MB under attack, more than a chunk and buffers per connection (%.1f MB)", mb(peak), mb(limit))
	}
	if after > base+16<<20 {
		t.Errorf("heap stayed at %.1f MB after the attackers were cut (%.1f MB at rest)", mb(after), mb(base))
	}
	if p99 > p99Bound {
		t.Errorf("the well-behaved client's p99 was %v beside the attack", p99)
	}
}

// A client that pipelines more answers than the kernel buffers hold and
// reads none blocks the server's write: WriteTimeout, not IdleTimeout (left
// at 2 minutes here), cuts it and frees the answer it pinned.
func TestBlockedWriteIsCut(t *testing.T) {
	writeTimeout := 2 * time.Second
	if raceEnabled {
		writeTimeout = 5 * time.Second
	}
	addr := limitServer(t, leafhttp.Config{WriteTimeout: writeTimeout})
	req := strings.Repeat("GET /segment/bench?count=10000&format=json HTTP/1.1\r\nHost: x\r\n\r\n", 150) // ~12 MB of answers
	var conns []net.Conn
	for range 5 {
		c, err := stingyDialer.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		go func() { _, _ = io.WriteString(c, req) }()
		conns = append(conns, c)
	}
	start := time.Now()
	time.Sleep(writeTimeout + time.Second) // read nothing until then
	for i, c := range conns {
		if closed, _ := closedWithin(c, 10*time.Second); !closed {
			t.Errorf("connection %d, blocked in a write, was still open %v later", i, time.Since(start).Round(time.Millisecond))
		}
	}
	t.Logf("5 blocked connections cut within %v (WriteTimeout %v)", time.Since(start).Round(time.Millisecond), writeTimeout)
}

func mb(b uint64) float64 { return float64(b) / (1 << 20) }

// slowReader reads at about rate bytes a second.
type slowReader struct {
	r    io.Reader
	rate int
}

func (s slowReader) Read(p []byte) (int, error) {
	chunk := s.rate / 10
	if len(p) > chunk {
		p = p[:chunk]
	}
	time.Sleep(100 * time.Millisecond)
	return s.r.Read(p)
}

// The default WriteTimeout (60 s) must fit the largest answer to a client
// that is slow but reads: this measures how long a count=10000 JSON answer
// takes at full speed and at 64 KiB/s, and a count=1,000,000 one at full
// speed, and checks each within the timeout with a margin of four.
func TestWriteTimeoutFitsLargestBatch(t *testing.T) {
	addr := limitServer(t, leafhttp.Config{})
	for _, tc := range []struct {
		name  string
		count int
		rate  int // bytes a second, 0: full speed
	}{
		{"10000 full speed", 10_000, 0},
		{"10000 at 64 KiB/s", 10_000, 64 << 10},
		{"1000000 full speed", 1_000_000, 0},
	} {
		if tc.rate > 0 && testing.Short() {
			continue
		}
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		fmt.Fprintf(c, "GET /segment/bench?count=%d&format=json HTTP/1.1\r\nHost: x\r\n\r\n", tc.count)
		var r io.Reader = c
		if tc.rate > 0 {
			if tcp, ok := c.(*net.TCPConn); ok {
				_ = tcp.SetReadBuffer(8 << 10)
			}
			r = slowReader{c, tc.rate}
		}
		res, err := http.ReadResponse(bufio.NewReader(r), nil)
		if err != nil {
			t.Fatal(err)
		}
		n, err := io.Copy(io.Discard, res.Body)
		took := time.Since(start)
		res.Body.Close()
		c.Close()
		if err != nil || res.StatusCode != 200 {
			t.Fatalf("%s: %d after %d bytes: %v", tc.name, res.StatusCode, n, err)
		}
		t.Logf("count=%d JSON, %d bytes, %s: %v", tc.count, n, tc.name, took.Round(time.Millisecond))
		if took > 15*time.Second {
			t.Errorf("%s took %v: the 60 s WriteTimeout leaves less than a margin of four", tc.name, took)
		}
	}
}
