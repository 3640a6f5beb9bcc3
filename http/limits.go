package http

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// The server's limits (docs/contract.md section 4, "HTTP server"). A client
// that is slow on purpose, or that never reads, holds a connection, a
// goroutine and, while an answer waits to be written, that answer's
// buffer: the timeouts bound how long, the connection cap how many.
const (
	// DefaultMaxConnections is the cap on concurrent connections
	// (http.max_connections) when Config.MaxConnections is 0.
	DefaultMaxConnections = 1024
	// defaultReadHeaderTimeout bounds reading a request's headers: a
	// slowloris that trickles them is cut.
	defaultReadHeaderTimeout = 10 * time.Second
	// defaultReadTimeout bounds reading a whole request, body included:
	// an admin body sent a byte a second is cut. No legitimate body (64 KiB
	// at most) takes this long.
	defaultReadTimeout = 15 * time.Second
	// defaultWriteTimeout bounds a request from the end of its headers to
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
	defaultWriteTimeout = 60 * time.Second
	// defaultIdleTimeout closes a keep-alive connection that sends nothing.
	defaultIdleTimeout = 2 * time.Minute
	// defaultMaxHeaderBytes bounds the request line and headers (net/http
	// adds 4 KiB of slack); past it net/http answers 431.
	defaultMaxHeaderBytes = 64 << 10
)

// limitListener accepts at most n connections at a time. At the cap, Accept
// first closes the connection that has been idle the longest between
// requests (a keep-alive connection with no request in flight, which a
// client may lose at any time and reopens); while no connection is idle, it
// waits for one to close, and new clients wait in the kernel's accept queue
// (their connect succeeds, their request is read once a slot frees). So
// idle connections cannot lock honest clients out, and a client that hogs
// a slot with a request is cut by the server's timeouts.
type limitListener struct {
	net.Listener
	slots chan struct{}
	done  chan struct{}
	once  sync.Once

	mu   sync.Mutex
	idle map[*limitConn]time.Time // connections between requests, since when
}

// newLimitListener returns ln accepting at most n connections at a time.
func newLimitListener(ln net.Listener, n int) *limitListener {
	return &limitListener{Listener: ln, slots: make(chan struct{}, n), done: make(chan struct{}),
		idle: make(map[*limitConn]time.Time)}
}

// Accept waits for a free slot, closing an idle connection to make one,
// then for a connection.
func (l *limitListener) Accept() (net.Conn, error) {
	for acquired := false; !acquired; {
		select {
		case l.slots <- struct{}{}:
			acquired = true
			continue
		case <-l.done:
			return nil, net.ErrClosed
		default:
		}
		l.closeIdlest()
		// The closed connection frees its slot once net/http sees it
		// closed; with none idle, wait for a close or look again.
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
	return &limitConn{Conn: c, l: l}, nil
}

// closeIdlest closes the connection idle the longest, if any.
func (l *limitListener) closeIdlest() {
	l.mu.Lock()
	var (
		oldest *limitConn
		since  time.Time
	)
	for c, t := range l.idle {
		if oldest == nil || t.Before(since) {
			oldest, since = c, t
		}
	}
	delete(l.idle, oldest)
	l.mu.Unlock()
	if oldest != nil {
		_ = oldest.Conn.Close() // net/http's read fails, and it closes the limitConn
	}
}

// connState is the http.Server's ConnState hook: it keeps the set of idle
// connections.
func (l *limitListener) connState(c net.Conn, state http.ConnState) {
	lc, ok := c.(*limitConn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if state == http.StateIdle {
		l.idle[lc] = time.Now()
	} else {
		delete(l.idle, lc)
	}
}

// Close closes the listener and wakes an Accept waiting for a slot.
func (l *limitListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// limitConn gives its slot back once, on the first Close.
type limitConn struct {
	net.Conn
	l    *limitListener
	once sync.Once
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.idle, c)
		c.l.mu.Unlock()
		<-c.l.slots
	})
	return err
}
