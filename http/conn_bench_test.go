package http_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	leafhttp "github.com/leafd/leafd/http"
)

// The benchmarks below serve whole requests through net/http over one
// keep-alive connection held in memory (replayConn): what a server spends
// in user space on a request, from reading it to writing its answer, with
// leafd's listener, connection cap and timeouts, but without the kernel's
// share, which is the same for every server and hides differences of a few
// per cent in a load test. BenchmarkServeBaseline is the fair baseline of a
// single ID (leafbench's baseline_timeouts): gin writing a constant behind
// net/http with leafd's timeouts and header limit. Compare runs of the same
// invocation:
//
//	go test -run '^$' -bench '^BenchmarkServe' -count 10 ./http/

func BenchmarkServeBaseline(b *testing.B) {
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	e.GET("/segment/:tag", func(c *gin.Context) { c.Data(http.StatusOK, "text/plain; charset=utf-8", []byte("1\n")) })
	e.GET("/snowflake", func(c *gin.Context) { c.Data(http.StatusOK, "text/plain; charset=utf-8", []byte("1\n")) })
	srv := &http.Server{
		Handler:           e,
		ReadHeaderTimeout: leafhttp.DefaultReadHeaderTimeout,
		ReadTimeout:       leafhttp.DefaultReadTimeout,
		WriteTimeout:      leafhttp.DefaultWriteTimeout,
		IdleTimeout:       leafhttp.DefaultIdleTimeout,
		MaxHeaderBytes:    64 << 10,
	}
	serveConn(b, srv.Serve, srv.Shutdown, "/segment/bench")
}

func BenchmarkServeSegment(b *testing.B) {
	s := benchSegmentServer(b)
	serveConn(b, s.Serve, s.Shutdown, "/segment/bench")
}

func BenchmarkServeSnowflake(b *testing.B) {
	s := benchSnowflakeServer(b)
	serveConn(b, s.Serve, s.Shutdown, "/snowflake")
}

// serveConn answers b.N requests for path on one connection, through
// serve, and stops the server with shutdown.
func serveConn(b *testing.B, serve func(net.Listener) error, shutdown func(context.Context) error, path string) {
	b.Helper()
	c := newReplayConn(b, "GET "+path+" HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: Go-http-client/1.1\r\nAccept-Encoding: gzip\r\n\r\n", b.N)
	ln := &oneConnListener{c: c, closed: make(chan struct{})}
	served := make(chan error, 1)
	b.ReportAllocs()
	b.ResetTimer()
	cpu := processCPU()
	go func() { served <- serve(ln) }()
	<-c.closed
	b.StopTimer()
	b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := shutdown(ctx); err != nil {
		b.Fatal(err)
	}
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		b.Fatal(err)
	}
	if c.answers != b.N || c.bad != nil {
		b.Fatalf("%d answers of %d; first answer not 200: %q", c.answers, b.N, c.bad)
	}
}

// processCPU returns the CPU time the process has used, user and system,
// in nanoseconds: on a busy machine it varies less than the time a
// benchmark takes.
func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// replayConn is the server's end of a keep-alive connection whose client
// sends req again as soon as it has the answer to the previous one, n
// times, then hangs up. Reads and writes stay in memory; deadlines are set
// on a real TCP connection, so that their timers cost what they cost. A
// read of one byte (net/http's background read while a handler runs) waits,
// as on a real connection, until a deadline in the past ends it.
type replayConn struct {
	net.Conn // the real connection: deadlines and addresses only
	req      []byte

	mu      sync.Mutex
	cond    *sync.Cond
	off     int  // bytes of req read
	waiting bool // the request was read whole and its answer not yet written
	expired bool // the read deadline is in the past
	answers int
	left    int
	bad     []byte // the first answer that is not a 200
	closed  chan struct{}
	once    sync.Once
}

func newReplayConn(tb testing.TB, req string, n int) *replayConn {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { client.Close() })
	server, err := ln.Accept()
	if err != nil {
		tb.Fatal(err)
	}
	c := &replayConn{Conn: server, req: []byte(req), left: n, closed: make(chan struct{})}
	c.cond = sync.NewCond(&c.mu)
	return c
}

func (c *replayConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for (c.waiting || len(p) == 1) && !c.expired {
		c.cond.Wait()
	}
	switch {
	case c.expired:
		return 0, os.ErrDeadlineExceeded
	case c.left == 0:
		return 0, io.EOF
	}
	n := copy(p, c.req[c.off:])
	if c.off += n; c.off == len(c.req) {
		c.off, c.waiting = 0, true
	}
	return n, nil
}

func (c *replayConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.bad == nil && !bytes.HasPrefix(p, []byte("HTTP/1.1 200 ")) {
		c.bad = bytes.Clone(p)
	}
	c.answers++
	c.left--
	c.waiting = false
	c.cond.Broadcast()
	return len(p), nil
}

// longAgo: net/http ends a pending read with a deadline of 1970.
var longAgo = time.Unix(1000, 0)

func (c *replayConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	c.expired = !t.IsZero() && t.Before(longAgo)
	c.cond.Broadcast()
	c.mu.Unlock()
	return c.Conn.SetReadDeadline(t)
}

func (c *replayConn) SetDeadline(t time.Time) error {
	if err := c.SetReadDeadline(t); err != nil {
		return err
	}
	return c.Conn.SetWriteDeadline(t)
}

func (c *replayConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// oneConnListener accepts c, then waits until it is closed.
type oneConnListener struct {
	c        net.Conn
	accepted bool
	closed   chan struct{}
	once     sync.Once
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	if !l.accepted {
		l.accepted = true
		return l.c, nil
	}
	<-l.closed
	return nil, net.ErrClosed
}

func (l *oneConnListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *oneConnListener) Addr() net.Addr { return l.c.LocalAddr() }
