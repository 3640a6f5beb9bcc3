package http

import (
	"net"
	"net/http"
	"testing"
	"time"
)

// A request costs the connection cap no lock: connState, which net/http
// calls twice a request, records a connection's waiting time while
// another goroutine holds the listener's lock (as Accept does at the cap),
// and the eviction at the cap sees it.
func TestConnStateTakesNoLock(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := newConnListener(ln, 1, 1<<10)
	defer l.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	c, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	sc := c.(*serverConn)

	l.mu.Lock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.connState(sc, http.StateActive)
		if sc.waiting.Load() != 0 {
			t.Error("a connection with a request in flight counts as waiting")
		}
		l.connState(sc, http.StateIdle)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("connState waited for the listener's lock")
	}
	l.mu.Unlock()

	// Idle for longer than evictAfter: the next Accept at the cap closes it.
	sc.waiting.Store(monoNow() - 2*int64(evictAfter))
	l.closeLongestWaiting()
	if _, err := sc.Conn.Write([]byte("x")); err == nil {
		t.Fatal("the connection idle past evictAfter was not closed at the cap")
	}
	if sc.waiting.Load() != 0 {
		t.Fatal("a closed connection still counts as waiting")
	}
}
