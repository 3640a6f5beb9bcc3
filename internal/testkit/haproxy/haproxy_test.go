package haproxy_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leafd/leafd/internal/testkit/haproxy"
	"github.com/leafd/leafd/internal/testkit/testenv"
)

// backend is a TCP server that greets every connection with its name and
// then holds it open until the client or Close ends it.
type backend struct {
	name string
	addr string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]bool
}

func newBackend(t *testing.T, name string) *backend {
	t.Helper()
	b := &backend{name: name, conns: map[net.Conn]bool{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b.addr = ln.Addr().String()
	b.serve(ln)
	t.Cleanup(b.Close)
	return b
}

func (b *backend) serve(ln net.Listener) {
	b.mu.Lock()
	b.ln = ln
	b.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b.mu.Lock()
			b.conns[c] = true
			b.mu.Unlock()
			go func() {
				fmt.Fprintf(c, "%s\n", b.name)
				_, _ = io.Copy(io.Discard, c)
				c.Close()
			}()
		}
	}()
}

// Close stops listening and cuts every connection: a server that died.
func (b *backend) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ln != nil {
		b.ln.Close()
		b.ln = nil
	}
	for c := range b.conns {
		c.Close()
	}
	b.conns = map[net.Conn]bool{}
}

// Reopen listens again on the same address.
func (b *backend) Reopen(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", b.addr)
	if err != nil {
		t.Fatal(err)
	}
	b.serve(ln)
}

// greeting connects through the proxy and returns the name of the backend
// that answered, and the open connection.
func greeting(addr string) (string, net.Conn, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", nil, err
	}
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		c.Close()
		return "", nil, err
	}
	_ = c.SetReadDeadline(time.Time{})
	return strings.TrimSpace(line), c, nil
}

// cut reports whether the server side closed c within d.
func cut(c net.Conn, d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// One active server, backups in order: the proxy fails over when the
// active one goes (cutting its sessions), back when it returns (cutting
// the backup's sessions), and a restart cuts everything.
func TestFailoverAndRestart(t *testing.T) {
	testenv.Slow(t)
	b0, b1, b2 := newBackend(t, "b0"), newBackend(t, "b1"), newBackend(t, "b2")
	p := haproxy.MustStart(t, haproxy.Options{Backends: []string{b0.addr, b1.addr, b2.addr}, Inter: 100 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	via := func(want string) net.Conn {
		t.Helper()
		var conn net.Conn
		if err := testenv.Eventually(ctx, 10*time.Second, 50*time.Millisecond, func() error {
			name, c, err := greeting(p.Addr())
			if err != nil {
				return err
			}
			if name != want {
				c.Close()
				return fmt.Errorf("answered by %s, want %s", name, want)
			}
			conn = c
			return nil
		}); err != nil {
			t.Fatalf("through the proxy: %v\n%s", err, p.LogTail(20))
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	c0 := via("b0")
	for range 3 {
		via("b0") // every connection to the active server
	}
	if i, err := p.Active(ctx); err != nil || i != 0 {
		t.Fatalf("Active = %d, %v; want 0", i, err)
	}

	b0.Close()
	if !cut(c0, 2*time.Second) {
		t.Fatal("a connection to the dead server stays open")
	}
	c1 := via("b1")
	if err := testenv.Eventually(ctx, 5*time.Second, 50*time.Millisecond, func() error {
		s, err := p.Servers(ctx)
		if err != nil {
			return err
		}
		if s[0].Up() || !s[1].Up() || !s[1].Backup {
			return fmt.Errorf("servers %+v", s)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	b0.Reopen(t)
	c0 = via("b0")
	if !cut(c1, 2*time.Second) {
		t.Error("a session through the backup stays open after the active server came back")
	}

	if err := p.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if !cut(c0, 2*time.Second) {
		t.Error("a session stays open across a restart of the proxy")
	}
	via("b0")

	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := greeting(p.Addr()); err == nil {
		t.Error("the killed proxy still answers")
	}
	if err := p.Kill(); err == nil {
		t.Error("a second Kill succeeded")
	}
	if err := p.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	via("b0")
}
