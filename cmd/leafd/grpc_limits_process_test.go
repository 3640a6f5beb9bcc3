//go:build linux

package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/leafd/leafd/internal/testkit/testdb"
	"github.com/leafd/leafd/internal/testkit/testenv"
	leafdv1 "github.com/leafd/leafd/proto/leafd/v1"
	"github.com/leafd/leafd/store"
)

// The limits the leafd processes of TestGRPCLimitsProcess run with: the
// timeouts shortened so that each attack ends within seconds, and a
// connection cap below the number of attacking connections.
const (
	glimMaxConns  = 200
	glimStreams   = 16
	glimIdle      = 3 * time.Second
	glimKeepalive = 2 * time.Second
	glimKpTimeout = time.Second
	// glimP99 bounds the good clients' p99 latency: looser than the HTTP
	// test's, for the attack on unread answers has the server compute 3.2
	// million IDs and encode them within its first second, on 2 cores.
	glimP99 = 500 * time.Millisecond
)

// grpcAttack is one kind of hostile gRPC client.
type grpcAttack struct {
	name string
	// run attacks addr, adding every connection it opens to conns, and
	// returns when it has sent all it sends; stop ends what it keeps.
	run func(t *testing.T, addr string, conns *connSet, stop <-chan struct{})
	// cut is how long after run returns the server must have closed
	// every attacking connection; 0 means the attacker closes them.
	cut time.Duration
	// hold is how long the attack holds what it got before it leaves.
	hold time.Duration
	// rssGrowth bounds the server's RSS above its baseline while attacked.
	rssGrowth int64
}

// TestGRPCLimitsProcess runs the leafd binary, gRPC on, against three
// hostile gRPC clients, one leafd each, while a well-behaved gRPC client
// asks for IDs on a connection of its own and an HTTP client asks for
// /healthz on a new connection each time, and holds, for each attack:
//   - the server's resident memory (VmRSS) stays within a bound above its
//     baseline during the attack, and comes back near it once the
//     attackers are gone;
//   - the server holds no more than grpc.max_connections attacking
//     connections (its open descriptors), and none after the attack;
//   - every request of both clients succeeds, /healthz on a new
//     connection included, and their p99 latency stays under a generous
//     bound.
//
// The attacks are those that took an unbounded server to 1.2 GB and out of
// descriptors: 100,000 health Watch streams on one connection; 3,000
// NextSnowflake calls of 10,000 IDs whose answers are never read, from 20
// connections, half of which never read their socket (cut by keepalive)
// while the other half answer pings but grant no flow-control window
// (they hold their answers until they leave); and 400 idle connections,
// twice the cap. Each is bounded and stops by itself; all go to
// loopback.
func TestGRPCLimitsProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("attacks leafd processes for about a minute")
	}
	raiseFileLimit(t)
	if fileLimit(t) < 2000 {
		t.Fatalf("the open-file limit (%d) is below the 2,000 descriptors the attacks need", fileLimit(t))
	}
	attacks := []grpcAttack{{
		name: "WatchFlood", hold: 5 * time.Second, rssGrowth: 40 << 20,
		run: func(t *testing.T, addr string, conns *connSet, stop <-chan struct{}) {
			h := conns.dialH2(t, addr)
			if h == nil {
				return
			}
			go h.Serve()
			for i := range 100_000 {
				if h.Call("/grpc.health.v1.Health/Watch", &healthpb.HealthCheckRequest{}) != nil {
					return
				}
				if i%500 == 499 && h.Flush() != nil {
					return
				}
			}
			h.Flush()
		},
	}, {
		// 20 connections of 16 streams hold an answer of 10,000 IDs each (90
		// KB in a 128 KiB buffer), and as much again in garbage until the
		// collector runs (the IDs before encoding; GOGC=100).
		name: "UnreadAnswers", hold: 8 * time.Second, rssGrowth: 20*glimStreams*128<<10*2 + 24<<20,
		run: func(t *testing.T, addr string, conns *connSet, stop <-chan struct{}) {
			var wg sync.WaitGroup
			for c := range 20 {
				h := conns.dialH2(t, addr)
				if h == nil {
					continue
				}
				if c%2 == 0 {
					go h.Serve() // answers pings: holds its answers until it leaves
				} // else reads nothing, pings included: keepalive cuts it
				wg.Go(func() {
					for range 150 {
						if h.Call("/leafd.v1.IDService/NextSnowflake", &leafdv1.NextSnowflakeRequest{Count: 10000}) != nil {
							return
						}
					}
					h.Flush()
				})
			}
			wg.Wait()
		},
	}, {
		// Two rounds of the cap: each round is closed once idle, after
		// grpc.idle_timeout and the GOAWAY's ping (keepalive_time at most).
		name: "IdleConnections", cut: 2*(glimIdle+glimKeepalive) + 5*time.Second, rssGrowth: 40 << 20,
		run: func(t *testing.T, addr string, conns *connSet, stop <-chan struct{}) {
			var wg sync.WaitGroup
			for range 2 * glimMaxConns {
				wg.Go(func() {
					// The preface, then nothing but the ping answers: only
					// the idle timeout closes it. Those past the cap wait
					// in the accept queue, their connect done.
					if h := conns.dialH2(t, addr); h != nil {
						go h.Serve()
					}
				})
			}
			wg.Wait()
		},
	}}
	for _, a := range attacks {
		t.Run(a.name, func(t *testing.T) { runGRPCAttack(t, a) })
	}
}

func runGRPCAttack(t *testing.T, a grpcAttack) {
	p := startGRPCBinary(t, plainLeafd(t), "LEAFD_STORE_DRIVER="+store.DefaultDriver(), "LEAFD_STORE_DSN="+testdb.DSN(t, store.DefaultDriver()),
		"LEAFD_SEGMENT_SEED_TAGS=good:100000", "LEAFD_SNOWFLAKE_ENABLED=true", "LEAFD_SNOWFLAKE_WORKER_ID=1",
		"LEAFD_HTTP_MAX_CONNECTIONS=300", "LEAFD_GRPC_MAX_CONNECTIONS="+strconv.Itoa(glimMaxConns),
		"LEAFD_GRPC_MAX_CONCURRENT_STREAMS="+strconv.Itoa(glimStreams), "LEAFD_GRPC_IDLE_TIMEOUT="+glimIdle.String(),
		"LEAFD_GRPC_KEEPALIVE_TIME="+glimKeepalive.String(), "LEAFD_GRPC_KEEPALIVE_TIMEOUT="+glimKpTimeout.String())
	waitReady(t, p.process)
	pid := p.Pid()

	good := startGoodClients(t, p)
	defer good.stop()
	time.Sleep(time.Second) // warm: the good clients' ranges, buffers and connections
	baseline := rss(t, pid)
	fdBase := fds(t, pid)
	good.reset()
	start := time.Now()

	// The attack, watched: the server's RSS and descriptors every 100 ms
	// until the attackers are gone.
	conns := &connSet{}
	stop := make(chan struct{})
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		a.run(t, p.grpcAddr, conns, stop)
	}()
	var peakRSS, peakFDs int64
	sample := func() {
		peakRSS = max(peakRSS, rss(t, pid))
		peakFDs = max(peakFDs, fds(t, pid))
	}
	var sentAt time.Time
	for done := false; !done; {
		select {
		case <-sent:
			done, sentAt = true, time.Now()
		case <-time.After(100 * time.Millisecond):
			sample()
		}
	}
	if a.cut > 0 {
		// The server closes every attacking connection by itself.
		for open := conns.open(); open > 0; open = conns.open() {
			if time.Since(sentAt) > a.cut {
				t.Errorf("%d of %d attacking connections still open %v after the attack was sent", open, conns.len(), a.cut)
				break
			}
			sample()
			time.Sleep(100 * time.Millisecond)
		}
	} else {
		for end := sentAt.Add(a.hold); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
			sample()
		}
	}
	attacked := time.Since(start)
	serverCut := conns.len() - conns.open()
	close(stop)
	conns.closeAll()
	var fdAfter int64
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if fdAfter = fds(t, pid); fdAfter <= fdBase+2 || time.Now().After(end) {
			break
		}
	}
	gLat, gFailed, hLat, hFailed := good.stop()

	// After: traffic drives the collections that give freed memory back
	// (see runAttack).
	after := settledRSS(t, pid, baseline, p.addr)

	t.Logf("%s: %d connections (%d cut by the server); RSS baseline %s, peak %s (+%s), %s after; descriptors %d at rest, %d at peak, %d after; attack %v; gRPC client: %d requests, %d failed, p50 %v p99 %v; /healthz on new connections: %d, %d failed, p50 %v p99 %v",
		a.name, conns.len(), serverCut, mib(baseline), mib(peakRSS), mib(peakRSS-baseline), mib(after), fdBase, peakFDs, fdAfter,
		attacked.Round(time.Millisecond), len(gLat), len(gFailed), percentile(gLat, 0.5), percentile(gLat, 0.99),
		len(hLat), len(hFailed), percentile(hLat, 0.5), percentile(hLat, 0.99))

	if peakRSS > baseline+a.rssGrowth {
		t.Errorf("RSS rose to %s under attack, more than %s above its baseline of %s", mib(peakRSS), mib(a.rssGrowth), mib(baseline))
	}
	if after > baseline+rssSettled {
		t.Errorf("RSS stayed at %s after the attackers left, more than %s above its baseline of %s", mib(after), mib(rssSettled), mib(baseline))
	}
	// The cap counts the gRPC connections; the process also holds its
	// listeners, its database, the good clients' connections and one
	// /healthz connection at a time.
	if peakFDs > fdBase+glimMaxConns+2 {
		t.Errorf("the server held %d descriptors under attack, %d at rest: more gRPC connections than grpc.max_connections (%d)",
			peakFDs, fdBase, glimMaxConns)
	}
	if fdAfter > fdBase+2 {
		t.Errorf("the server holds %d descriptors after the attack, %d at rest", fdAfter, fdBase)
	}
	for _, c := range []struct {
		name   string
		lat    []time.Duration
		failed []string
	}{{"gRPC client", gLat, gFailed}, {"/healthz client", hLat, hFailed}} {
		if len(c.failed) > 0 {
			t.Errorf("%d of the %s's %d requests failed under attack, the first: %s", len(c.failed), c.name, len(c.lat)+len(c.failed), c.failed[0])
		}
		if len(c.lat) < 10 {
			t.Errorf("the %s made %d requests during the attack", c.name, len(c.lat))
		}
		if p99 := percentile(c.lat, 0.99); p99 > glimP99 {
			t.Errorf("the %s's p99 latency under attack was %v, want under %v", c.name, p99, glimP99)
		}
	}
	if code := p.stop(t); code != 0 {
		t.Errorf("leafd exited %d after SIGTERM\n%s", code, p.Output())
	}
}

// connSet is the attacking connections.
type connSet struct {
	mu    sync.Mutex
	conns []*watchedConn
}

// dialH2 opens an attacking HTTP/2 connection with a small receive buffer
// (attackDialer).
func (s *connSet) dialH2(t *testing.T, addr string) *testenv.H2 {
	h, err := testenv.DialH2(attackDialer, addr)
	if err != nil {
		t.Errorf("attacker: %v", err)
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.conns = append(s.conns, &watchedConn{TCPConn: h.Conn().(*net.TCPConn), opened: time.Now()})
	return h
}

func (s *connSet) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// open counts the connections the server has not closed.
func (s *connSet) open() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.conns {
		if !c.serverClosed() {
			n++
		}
	}
	return n
}

func (s *connSet) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.conns {
		c.Close()
	}
}

// goodClients are a gRPC client asking for IDs on a connection of its
// own, opened before the attack, and an HTTP client asking for /healthz
// on a new connection each time: the descriptors the attack leaves.
type goodClients struct {
	mu           sync.Mutex
	gLat, hLat   []time.Duration
	gFail, hFail []string
	done         chan struct{}
	wg           sync.WaitGroup
	once         sync.Once
}

func startGoodClients(t *testing.T, p *grpcProcess) *goodClients {
	g := &goodClients{done: make(chan struct{})}
	client := leafdv1.NewIDServiceClient(p.conn)
	httpClient := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	loop := func(do func() error, lat *[]time.Duration, fail *[]string) {
		for {
			select {
			case <-g.done:
				return
			case <-time.After(10 * time.Millisecond):
			}
			t0 := time.Now()
			err := do()
			d := time.Since(t0)
			g.mu.Lock()
			if err != nil {
				*fail = append(*fail, fmt.Sprintf("%v after %v", err, d))
			} else {
				*lat = append(*lat, d)
			}
			g.mu.Unlock()
		}
	}
	g.wg.Go(func() {
		loop(func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			res, err := client.NextSegment(ctx, &leafdv1.NextSegmentRequest{Tag: "good", Count: 100})
			if err == nil && len(res.GetIds()) != 100 {
				err = fmt.Errorf("NextSegment: %d IDs", len(res.GetIds()))
			}
			return err
		}, &g.gLat, &g.gFail)
	})
	g.wg.Go(func() {
		loop(func() error {
			res, err := httpClient.Get(p.addr + "/healthz")
			if err != nil {
				return err
			}
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				return fmt.Errorf("GET /healthz: %d", res.StatusCode)
			}
			return nil
		}, &g.hLat, &g.hFail)
	})
	t.Cleanup(func() { g.stop() })
	return g
}

// reset forgets the latencies measured so far (not the failures).
func (g *goodClients) reset() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.gLat, g.hLat = nil, nil
}

// stop ends the clients and returns their latencies and failures.
func (g *goodClients) stop() (gLat []time.Duration, gFail []string, hLat []time.Duration, hFail []string) {
	g.once.Do(func() { close(g.done) })
	g.wg.Wait()
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.gLat), slices.Clone(g.gFail), slices.Clone(g.hLat), slices.Clone(g.hFail)
}

// With gRPC on, connection caps that do not fit under the open-file limit
// with the files kept apart stop start-up (exit 2), naming both keys: at
// the caps, one listener would take the descriptors the other needs.
func TestGRPCConnectionCapsOverFileLimit(t *testing.T) {
	code, out := runLeafd(t, t.TempDir(), []string{"LEAFD_GRPC_ADDR=localhost:0",
		"LEAFD_HTTP_MAX_CONNECTIONS=1000000", "LEAFD_GRPC_MAX_CONNECTIONS=1000000"}, "serve")
	if code != 2 || !strings.Contains(out, "http.max_connections, grpc.max_connections") || !strings.Contains(out, "RLIMIT_NOFILE") {
		t.Fatalf("exit %d, output %q; want exit 2 naming both caps and the open-file limit", code, out)
	}
	// Without gRPC, the HTTP cap alone is not checked.
	p := startLeafd(t, "LEAFD_HTTP_MAX_CONNECTIONS=1000000")
	waitReady(t, p)
}
