package http

import (
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// The server's limits (docs/contract.md section 4, "HTTP server"). A client
// that is slow on purpose, or that never reads, holds a connection, a
// goroutine and, while an answer waits to be written, that answer's
// buffer: the timeouts bound how long, the connection cap how many.
// DefaultMaxConnections is the cap on concurrent connections
// (http.max_connections) when Config.MaxConnections is 0.
const DefaultMaxConnections = 1024

// The limits New uses where Config leaves them 0, and the defaults of
// http.read_header_timeout, http.read_timeout, http.write_timeout and
// http.idle_timeout.
const (
	// DefaultReadHeaderTimeout bounds reading a request's headers: a
	// slowloris that trickles them is cut.
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultReadTimeout bounds reading a whole request, body included:
	// an admin body sent a byte a second is cut. No legitimate body (64 KiB
	// at most) takes this long.
	DefaultReadTimeout = 15 * time.Second
	// DefaultWriteTimeout bounds a request from the end of its headers to
	// the last byte of its answer: the handler (which may wait up to
	// segment.wait_timeout for a range) and the write. Measured on
	// loopback (TestWriteTimeoutFitsLargestBatch): a count=10000 JSON
	// answer (80 KB with 7-digit IDs, about 230 KB with 19-digit ones)
	// takes 2 ms to a client that reads at full speed and 2.7 s to one
	// that reads 64 KiB a second; the largest batch allowed
	// (segment.max_batch 1,000,000: 9 MB, up to 23 MB) takes 50 ms at full
	// speed. 60 s serves a default batch to a client reading 4 KB/s and the
	// largest to one reading 400 KB/s, and still frees, within a minute,
	// what a client that never reads holds.
	DefaultWriteTimeout = 60 * time.Second
	// DefaultIdleTimeout closes a keep-alive connection that sends nothing.
	DefaultIdleTimeout = 2 * time.Minute
	// defaultMaxHeaderBytes bounds the request line and headers (net/http
	// adds 4 KiB of slack); past it net/http answers 431.
	defaultMaxHeaderBytes = 64 << 10
)

// connListener is the listener the server accepts every connection
// through. It accepts at most n connections at a time, and each is a
// serverConn, whose net/http error answers are rewritten (rawerrors.go).
//
// At the cap, Accept first closes the connection that has waited the
// longest for a request: one idle between requests (a keep-alive
// connection, which a client may lose at any time and reopens) or one that
// has not finished its first request since it was accepted (a slowloris; an
// honest client sends its request at once). It closes only one that has
// waited at least evictAfter: a connection between two requests of a busy
// client is not taken from it, which would only send that client to the
// back of the accept queue. While none qualifies, Accept waits for a
// connection to close, and new clients wait in the kernel's accept queue
// (their connect succeeds, their request is read once a slot frees). So
// idle and trickling connections cannot lock honest clients out, and a
// client that hogs a slot inside a request (a slow body, an answer it does
// not read) is cut by the server's timeouts.
//
// A request costs the cap nothing but two atomic stores (connState): the
// set of connections changes at accept and close only, and Accept reads
// the connections' waiting times when it is at the cap.
type connListener struct {
	net.Listener
	maxHeaderBytes int // what a 431's message says
	slots          chan struct{}
	done           chan struct{}
	once           sync.Once

	mu    sync.Mutex
	conns map[*serverConn]struct{} // the open connections
}

// evictAfter is how long a connection must have waited for a request
// before Accept closes it to make room.
const evictAfter = 500 * time.Millisecond

// newConnListener returns ln accepting at most n connections at a time.
func newConnListener(ln net.Listener, n, maxHeaderBytes int) *connListener {
	return &connListener{Listener: ln, maxHeaderBytes: maxHeaderBytes, slots: make(chan struct{}, n),
		done: make(chan struct{}), conns: make(map[*serverConn]struct{})}
}

// Accept waits for a free slot, closing a waiting connection to make one,
// then for a connection.
func (l *connListener) Accept() (net.Conn, error) {
	for acquired := false; !acquired; {
		select {
		case l.slots <- struct{}{}:
			acquired = true
			continue
		case <-l.done:
			return nil, net.ErrClosed
		default:
		}
		l.closeLongestWaiting()
		// The closed connection frees its slot once net/http sees it
		// closed; with none closed, wait for a close or look again.
		select {
		case l.slots <- struct{}{}:
			acquired = true
		case <-l.done:
			return nil, net.ErrClosed
		case <-time.After(50 * time.Millisecond):
		}
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	sc := &serverConn{Conn: c, l: l}
	sc.waiting.Store(monoNow()) // for its first request
	l.mu.Lock()
	l.conns[sc] = struct{}{}
	l.mu.Unlock()
	return sc, nil
}

// closeLongestWaiting closes the connection that has waited for a request
// the longest, if it has waited evictAfter at least.
func (l *connListener) closeLongestWaiting() {
	var (
		oldest *serverConn
		since  = monoNow() - int64(evictAfter)
	)
	l.mu.Lock()
	for c := range l.conns {
		if t := c.waiting.Load(); t != 0 && t <= since {
			oldest, since = c, t
		}
	}
	l.mu.Unlock()
	// Taken off the waiting (unless a request began meanwhile), so that
	// the next Accept at the cap looks for another.
	if oldest != nil && oldest.waiting.CompareAndSwap(since, 0) {
		_ = oldest.Conn.Close() // net/http's read fails, and it closes the serverConn
	}
}

// connState is the http.Server's ConnState hook: it records since when a
// connection waits for a request. net/http reports a connection New until
// its first request's headers are read, Active from then to the end of the
// answer, then Idle until the next request's headers are read.
func (l *connListener) connState(c net.Conn, state http.ConnState) {
	sc, ok := c.(*serverConn)
	if !ok {
		return
	}
	if state == http.StateNew || state == http.StateIdle {
		sc.waiting.Store(monoNow())
	} else {
		sc.waiting.Store(0)
	}
}

// monoStart is the origin of monoNow.
var monoStart = time.Now()

// monoNow is the time in nanoseconds since monoStart, at least 1: one read
// of the monotonic clock, where time.Now reads the wall clock too.
func monoNow() int64 { return int64(time.Since(monoStart)) | 1 }

// Close closes the listener and wakes an Accept waiting for a slot.
func (l *connListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// serverConn is one accepted connection: it holds a slot of the cap, given
// back on the first Close, and rewrites net/http's own error answers.
type serverConn struct {
	net.Conn
	l *connListener
	// waiting is since when (monoNow) the connection has waited for a
	// request; 0 while a request is in flight.
	waiting atomic.Int64
	once    sync.Once
}

func (c *serverConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.conns, c)
		c.l.mu.Unlock()
		<-c.l.slots
	})
	return err
}
