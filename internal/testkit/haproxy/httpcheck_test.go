package haproxy_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leafd/leafd/internal/testkit/haproxy"
	"github.com/leafd/leafd/internal/testkit/testenv"
)

// With HTTPCheck every server is active and the proxy sends connections to
// the one whose health check answers 200, as with Patroni's GET /primary:
// when the answer moves to another server, the first one's sessions are
// cut and new connections go to the other.
func TestHTTPCheckFollowsPrimary(t *testing.T) {
	backends := []*backend{newBackend(t, "b0"), newBackend(t, "b1"), newBackend(t, "b2")}
	var primary atomic.Int32
	primary.Store(1)
	var addrs []string
	var ports []int
	for i, b := range backends {
		addrs = append(addrs, b.addr)
		api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/primary" && primary.Load() == int32(i) {
				w.WriteHeader(http.StatusOK)
				return
			}
			w.WriteHeader(http.StatusServiceUnavailable)
		}))
		t.Cleanup(api.Close)
		_, port, _ := net.SplitHostPort(api.Listener.Addr().String())
		p, _ := strconv.Atoi(port)
		ports = append(ports, p)
	}
	p := haproxy.MustStart(t, haproxy.Options{Backends: addrs, HTTPCheck: "/primary", CheckPorts: ports, Inter: 100 * time.Millisecond})
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
	c1 := via("b1")
	for range 3 {
		via("b1")
	}
	s, err := p.Servers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i, srv := range s {
		if srv.Backup || srv.Up() != (i == 1) {
			t.Errorf("server %d: %+v; want every server active, only node1 up", i, srv)
		}
	}

	primary.Store(2)
	via("b2")
	if !cut(c1, 2*time.Second) {
		t.Error("a session to the server whose check fails now stays open")
	}

	if _, err := haproxy.Start(ctx, t.TempDir(), haproxy.Options{Backends: addrs, HTTPCheck: "/primary", CheckPorts: ports[:2]}); err == nil {
		t.Error("Start with fewer check ports than backends succeeded")
	}
}
