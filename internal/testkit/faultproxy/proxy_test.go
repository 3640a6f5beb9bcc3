package faultproxy_test

import (
	"bufio"
	"net"
	"testing"
	"time"

	"github.com/leafd/leafd/internal/testkit/faultproxy"
)

// echoServer answers each line it reads with the same line, until the test
// ends.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// conn is a client connection through the proxy.
type conn struct {
	net.Conn
	r *bufio.Reader
}

func dial(t *testing.T, p *faultproxy.Proxy) *conn {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &conn{c, bufio.NewReader(c)}
}

// roundTrip sends a line and returns the echo, or the error of the read,
// which gives up after timeout.
func (c *conn) roundTrip(line string, timeout time.Duration) (string, error) {
	_ = c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte(line + "\n")); err != nil {
		return "", err
	}
	got, err := c.r.ReadString('\n')
	if err != nil {
		return "", err
	}
	return got[:len(got)-1], nil
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

func TestUpDown(t *testing.T) {
	p := faultproxy.New(t, echoServer(t))
	c := dial(t, p)
	if got, err := c.roundTrip("hello", time.Second); err != nil || got != "hello" {
		t.Fatalf("through the proxy: %q, %v", got, err)
	}
	p.Down()
	if _, err := c.roundTrip("cut", time.Second); err == nil || isTimeout(err) {
		t.Fatalf("an open connection after Down: %v, want it cut", err)
	}
	// A new connection is accepted and closed at once: an error, not a hang.
	if _, err := dial(t, p).roundTrip("refused", time.Second); err == nil || isTimeout(err) {
		t.Fatalf("a new connection while down: %v, want it closed", err)
	}
	p.Up()
	if got, err := dial(t, p).roundTrip("again", time.Second); err != nil || got != "again" {
		t.Fatalf("after Up: %q, %v", got, err)
	}
	if n := p.Accepted(); n != 3 {
		t.Fatalf("Accepted() = %d, want 3", n)
	}
}

func TestStall(t *testing.T) {
	p := faultproxy.New(t, echoServer(t))
	open := dial(t, p)
	if _, err := open.roundTrip("warm", time.Second); err != nil {
		t.Fatal(err)
	}
	p.Stall()
	if _, err := open.roundTrip("held", 200*time.Millisecond); !isTimeout(err) {
		t.Fatalf("an open connection while stalled: %v, want a timeout", err)
	}
	fresh := dial(t, p) // accepted, not connected
	if _, err := fresh.roundTrip("held too", 200*time.Millisecond); !isTimeout(err) {
		t.Fatalf("a new connection while stalled: %v, want a timeout", err)
	}
	p.Up()
	// What was held goes through, in order, on both connections.
	for _, c := range []*conn{open, fresh} {
		_ = c.SetDeadline(time.Now().Add(time.Second))
		if _, err := c.r.ReadString('\n'); err != nil {
			t.Fatalf("the held line after Up: %v", err)
		}
	}
	if got, err := fresh.roundTrip("flows", time.Second); err != nil || got != "flows" {
		t.Fatalf("after Up: %q, %v", got, err)
	}
	// Down while stalled cuts what was held.
	p.Stall()
	p.Down()
	if _, err := open.roundTrip("cut", time.Second); err == nil || isTimeout(err) {
		t.Fatalf("after Stall then Down: %v, want the connection cut", err)
	}
}

func TestLatency(t *testing.T) {
	p := faultproxy.New(t, echoServer(t))
	c := dial(t, p)
	const d = 150 * time.Millisecond
	p.SetLatency(d)
	began := time.Now()
	if _, err := c.roundTrip("slow", 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took < d {
		t.Fatalf("a round trip took %v with a latency of %v", took, d)
	}
	// Chunks in flight are delayed together, not one after another: ten
	// lines sent at once come back in about one latency, not ten.
	began = time.Now()
	for i := range 10 {
		if _, err := c.Write([]byte{byte('0' + i), '\n'}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond) // separate chunks
	}
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	for i := range 10 {
		line, err := c.r.ReadString('\n')
		if err != nil || line != string([]byte{byte('0' + i), '\n'}) {
			t.Fatalf("line %d: %q, %v", i, line, err)
		}
	}
	if took := time.Since(began); took >= 5*d {
		t.Fatalf("ten pipelined lines took %v with a latency of %v: delayed one after another", took, d)
	}
	p.SetLatency(0)
	if got, err := c.roundTrip("fast", d/2); err != nil || got != "fast" {
		t.Fatalf("without latency: %q, %v", got, err)
	}
}
