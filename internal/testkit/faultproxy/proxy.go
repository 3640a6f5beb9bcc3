// Package faultproxy is a TCP proxy for tests that puts faults between a
// client and a real server without touching the server: it cuts every
// connection and refuses new ones (a database that restarts or cannot be
// reached), holds every packet (a network that drops them, so that clients
// hang instead of failing), or delays what is sent to the server (a slow
// database).
//
// A Proxy starts up: connections go through at once. Down, Stall and Up
// switch between the three states; SetLatency applies in any of them.
package faultproxy

import (
	"net"
	"sync"
	"testing"
	"time"
)

// state is what the proxy does with connections.
type state int

const (
	up      state = iota // forward
	down                 // cut open connections, refuse new ones
	stalled              // hold every byte, accept without connecting
)

// Proxy forwards connections from a loopback port to a target address.
type Proxy struct {
	target string
	ln     net.Listener

	mu       sync.Mutex
	state    state
	changed  chan struct{} // closed and replaced on every change of state
	latency  time.Duration
	conns    map[net.Conn]struct{}
	accepted int
	wg       sync.WaitGroup
}

// New starts a proxy to target on 127.0.0.1 and closes it when the test
// ends.
func New(tb testing.TB, target string) *Proxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("faultproxy: %v", err)
	}
	p := &Proxy{target: target, ln: ln, conns: map[net.Conn]struct{}{}, changed: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	tb.Cleanup(p.Close)
	return p
}

// Addr returns the proxy's address, host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Down cuts every open connection and refuses new ones (they are accepted
// and closed at once) until Up: what a client sees of a database server
// that restarts or whose host is gone.
func (p *Proxy) Down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.setLocked(down)
	for c := range p.conns {
		c.Close()
	}
}

// Stall holds every byte in both directions on open connections, and
// accepts new connections without connecting them to the target, until Up
// lets everything held through or Down cuts it: what a client sees of a
// network that drops packets. Nothing fails; everything hangs.
func (p *Proxy) Stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.setLocked(stalled)
}

// Up lets connections through again.
func (p *Proxy) Up() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.setLocked(up)
}

// SetLatency delays every chunk of data sent towards the target by d, on
// open and new connections, so that each request/response round trip
// takes d longer. Chunks keep their order and are delayed concurrently, as
// on a long link, not one after another. Zero removes the delay.
func (p *Proxy) SetLatency(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.latency = d
}

// Accepted returns how many connections the proxy has accepted so far,
// refused ones included.
func (p *Proxy) Accepted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted
}

// Close stops the proxy and cuts every connection.
func (p *Proxy) Close() {
	p.ln.Close()
	p.Down()
	p.wg.Wait()
}

func (p *Proxy) setLocked(s state) {
	if p.state == s {
		return
	}
	p.state = s
	close(p.changed)
	p.changed = make(chan struct{})
}

// pass blocks while the proxy is stalled and reports whether data may go
// through: false once the proxy is down or the connection ends (done).
func (p *Proxy) pass(done <-chan struct{}) bool {
	for {
		p.mu.Lock()
		s, changed := p.state, p.changed
		p.mu.Unlock()
		switch s {
		case up:
			return true
		case down:
			return false
		}
		select {
		case <-changed:
		case <-done:
			return false
		}
	}
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		p.accepted++
		p.mu.Unlock()
		p.wg.Add(1)
		go p.serve(c)
	}
}

func (p *Proxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state == down {
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *Proxy) forget(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		delete(p.conns, c)
		c.Close()
	}
}

func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	if !p.track(client) {
		client.Close()
		return
	}
	done := make(chan struct{})
	// A stalled proxy accepts but does not connect yet.
	if !p.pass(done) {
		p.forget(client)
		return
	}
	server, err := net.Dial("tcp", p.target)
	if err != nil || !p.track(server) {
		if server != nil {
			server.Close()
		}
		p.forget(client)
		return
	}
	var once sync.Once
	end := func() {
		once.Do(func() {
			close(done)
			p.forget(client, server)
		})
	}
	// Four goroutines, a reader and a writer each way; the first to stop
	// ends the connection, which stops the others.
	var wg sync.WaitGroup
	for _, side := range []struct {
		dst, src net.Conn
		toTarget bool
	}{{server, client, true}, {client, server, false}} {
		queue := make(chan chunk, 64)
		wg.Add(2)
		go func() { defer wg.Done(); defer end(); p.read(side.src, queue, side.toTarget, done) }()
		go func() { defer wg.Done(); defer end(); p.write(side.dst, queue, done) }()
	}
	wg.Wait()
}

// chunk is data read from one side, due on the other at a time.
type chunk struct {
	b   []byte
	due time.Time
}

// read queues what src sends, each chunk stamped with its due time: now
// plus the latency towards the target, now the other way. It closes queue
// when src fails or ends.
func (p *Proxy) read(src net.Conn, queue chan<- chunk, toTarget bool, done <-chan struct{}) {
	defer close(queue)
	for {
		buf := make([]byte, 32<<10)
		n, err := src.Read(buf)
		if n > 0 {
			c := chunk{b: buf[:n], due: time.Now()}
			if toTarget {
				p.mu.Lock()
				c.due = c.due.Add(p.latency)
				p.mu.Unlock()
			}
			select {
			case queue <- c:
			case <-done:
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// write sends each queued chunk to dst no earlier than it is due, and only
// while the proxy is up: a delay or a stall holds data, never the reader.
func (p *Proxy) write(dst net.Conn, queue <-chan chunk, done <-chan struct{}) {
	for c := range queue {
		if wait := time.Until(c.due); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-done:
				t.Stop()
				return
			}
		}
		if !p.pass(done) {
			return
		}
		if _, err := dst.Write(c.b); err != nil {
			return
		}
	}
}
