//go:build linux

package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/leafd/leafd/internal/testkit/testdb"
	"github.com/leafd/leafd/internal/testkit/testenv"
	"github.com/leafd/leafd/store"
)

// The limits the leafd processes of TestHTTPLimitsProcess run with: the
// timeouts shortened (http.read_header_timeout and the others) so that each
// attack ends within seconds, and a connection cap below the number of
// attacking connections.
const (
	limReadHeader = 2 * time.Second
	limRead       = 3 * time.Second
	limWrite      = 3 * time.Second
	limIdle       = 3 * time.Second
	limMaxConns   = 300
	limAdminToken = "limits-test-admin-token-0123456789"
)

// attack is one kind of hostile client.
type attack struct {
	name string
	// conns is how many connections it opens at once.
	conns int
	// timeout is the server's limit that must cut each connection.
	timeout time.Duration
	// run drives one open connection until the server closes it or stop
	// closes; it never reads unless the attack reads.
	run func(c net.Conn, stop <-chan struct{})
	// rssGrowth bounds the server's RSS above its baseline while attacked.
	rssGrowth int64
}

// TestHTTPLimitsProcess runs the leafd binary against four hostile clients,
// one leafd each, while a well-behaved client keeps asking for IDs, and
// holds, for each attack:
//   - the server's resident memory (VmRSS) stays within a bound above its
//     baseline during the attack, and comes back near the baseline once the
//     attacking connections are gone and traffic has run the collector;
//   - the server holds no more than http.max_connections connections (its
//     open descriptors), closes every attacking connection (a reset or FIN
//     seen in the attacker's TCP state) within its timeout for each round
//     of http.max_connections (those past the cap wait to be accepted)
//     plus 5 s, and then holds none;
//   - every request of the well-behaved client succeeds, and its p99
//     latency stays under a generous bound.
//
// How the well-behaved client gets through while the attackers hold more
// connections than the cap: its two keep-alive connections, opened before
// the attack, keep their slots. At the cap, the server's listener
// (connListener in http/limits.go) closes the connection that has waited
// the longest for a request, idle between requests or still sending its
// first request's headers, but only one that has waited 0.5 s: the good
// client's connections, idle for 10 ms between requests, are not taken,
// while idle and slowloris attackers are closed to make room for the next
// connection in the accept queue. Attackers inside a request (a slow body,
// an answer they do not read) keep their slot until ReadTimeout or
// WriteTimeout cuts them. Were a good connection closed (under a CPU
// starved machine it can wait 0.5 s between requests), the client's next
// connection would wait in the accept queue behind the attackers, for at
// most one timeout: the slowest request is logged with whether its
// connection was reused.
//
// The server is leafd built without -race: the race detector's own memory,
// which it keeps for every goroutine that ever ran, would swamp the
// server's. The test itself may run with -race.
func TestHTTPLimitsProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("attacks a leafd process for about a minute")
	}
	raiseFileLimit(t)
	idleConns := min(2000, fileLimit(t)-500)
	if idleConns < 1000 {
		t.Fatalf("the open-file limit (%d) leaves room for %d idle connections, want 1000 at least", fileLimit(t), idleConns)
	}
	attacks := []attack{{
		name: "Slowloris", conns: 400, timeout: limReadHeader, rssGrowth: 40 << 20,
		run: func(c net.Conn, stop <-chan struct{}) {
			trickle(c, stop, "GET /segment/good HTTP/1.1\r\nHost: leafd\r\nX-Slow: "+strings.Repeat("a", 1000))
		},
	}, {
		name: "SlowBody", conns: 400, timeout: limRead, rssGrowth: 40 << 20,
		run: func(c net.Conn, stop <-chan struct{}) {
			body := `{"name":"slow","step":100,"description":"` + strings.Repeat("b", 200) + `"}`
			head := "POST /api/tags HTTP/1.1\r\nHost: leafd\r\nAuthorization: Bearer " + limAdminToken +
				"\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n"
			if _, err := io.WriteString(c, head); err != nil {
				return
			}
			trickle(c, stop, body)
		},
	}, {
		name: "SlowReader", conns: 400, timeout: limWrite,
		// Each pins the chunk of an answer whose write is blocked, for at
		// most WriteTimeout: the bound allows for one per connection slot
		// (see chunkBytes), a seventh of what whole answers would take.
		rssGrowth: 40<<20 + limMaxConns*chunkBytes,
		run: func(c net.Conn, stop <-chan struct{}) {
			// 128 requests (9 KB) at once, more than the server's read
			// buffer (4 KB) takes: it reads the next request only once an
			// answer is written, so requests stay unread in its socket and
			// its close is a reset, which this side sees at once. (A close
			// with nothing unread sends a FIN, which waits behind the
			// answer the kernel still holds, unsent, for a client that
			// never reads.)
			req := strings.Repeat("GET /segment/bulk?count=10000&format=json HTTP/1.1\r\nHost: leafd\r\n\r\n", 128)
			if _, err := io.WriteString(c, req); err != nil {
				return
			}
			<-stop
		},
	}, {
		name: "IdleKeepAlive", conns: idleConns, timeout: limIdle, rssGrowth: 40 << 20,
		run: func(c net.Conn, stop <-chan struct{}) {
			// One request, answered, then nothing: the connection idles.
			if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: leafd\r\n\r\n"); err != nil {
				return
			}
			res, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				return
			}
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			<-stop
		},
	}}
	for _, a := range attacks {
		t.Run(a.name, func(t *testing.T) { runAttack(t, testdb.DSN(t, store.DefaultDriver()), a) })
	}
}

func runAttack(t *testing.T, dsn string, a attack) {
	env := append(baseEnv(t), "LEAFD_STORE_DRIVER="+store.DefaultDriver(), "LEAFD_STORE_DSN="+dsn,
		"LEAFD_SEGMENT_SEED_TAGS=good:100000 bulk:1000000", "LEAFD_SNOWFLAKE_ENABLED=true", "LEAFD_SNOWFLAKE_WORKER_ID=1",
		"LEAFD_ADMIN_TOKEN="+limAdminToken, "LEAFD_HTTP_MAX_CONNECTIONS="+strconv.Itoa(limMaxConns),
		"LEAFD_HTTP_READ_HEADER_TIMEOUT="+limReadHeader.String(), "LEAFD_HTTP_READ_TIMEOUT="+limRead.String(),
		"LEAFD_HTTP_WRITE_TIMEOUT="+limWrite.String(), "LEAFD_HTTP_IDLE_TIMEOUT="+limIdle.String())
	tp := testenv.MustStart(t, testenv.Config{Path: plainLeafd(t), Dir: t.TempDir(), Env: env}, 30*time.Second)
	p := &process{Process: tp, addr: tp.URL()}
	waitReady(t, p)
	pid := p.Pid()
	addr := strings.TrimPrefix(p.addr, "http://")

	good := startGoodClient(t, p.addr)
	defer good.stop()
	time.Sleep(time.Second) // warm: the good client's ranges, buffers and connections
	if code, body := get(t, http.DefaultClient, p.addr+"/segment/bulk?count=10000&format=json"); code != 200 || len(body) < 2*32<<10 {
		t.Fatalf("GET /segment/bulk?count=10000&format=json: %d, %d bytes; the slow readers need answers of several 32 KiB chunks", code, len(body))
	}
	baseline := rss(t, pid)
	fdBase := fds(t, pid)
	good.reset()
	start := time.Now()

	// The attack: every connection opened at once; each records when the
	// server closed it.
	stop := make(chan struct{})
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		conns  []*watchedConn
		dialed atomic.Int64
	)
	for range a.conns {
		wg.Go(func() {
			c, err := attackDialer.Dial("tcp", addr)
			dialed.Add(1)
			if err != nil {
				t.Errorf("attacker: %v", err)
				return
			}
			w := &watchedConn{TCPConn: c.(*net.TCPConn), opened: time.Now()}
			mu.Lock()
			conns = append(conns, w)
			mu.Unlock()
			a.run(c, stop)
		})
	}

	// Watch: the server's RSS and descriptors, and when each attacking
	// connection is closed by the server, until all are or the deadline.
	// Connections past the cap wait in the accept queue, so the last are
	// accepted once the first are cut: the deadline allows for the
	// rounds.
	rounds := (a.conns + limMaxConns - 1) / limMaxConns
	deadline := start.Add(time.Duration(rounds)*a.timeout + 5*time.Second)
	var peakRSS, peakFDs int64
	for {
		peakRSS = max(peakRSS, rss(t, pid))
		peakFDs = max(peakFDs, fds(t, pid))
		mu.Lock()
		open := 0
		for _, w := range conns {
			if w.closed.IsZero() {
				if w.serverClosed() {
					w.closed = time.Now()
				} else {
					open++
				}
			}
		}
		n := len(conns)
		mu.Unlock()
		if open == 0 && dialed.Load() == int64(a.conns) {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("%d of %d attacking connections still open %v after the attack began (timeout %v, %d rounds of %d)",
				open, n, time.Since(start).Round(time.Millisecond), a.timeout, rounds, limMaxConns)
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	cut := time.Since(start)
	close(stop)
	mu.Lock()
	for _, w := range conns {
		w.Close()
	}
	var lives []time.Duration
	for _, w := range conns {
		if !w.closed.IsZero() {
			lives = append(lives, w.closed.Sub(start))
		}
	}
	mu.Unlock()
	wg.Wait()
	slices.Sort(lives)
	// The server has let go of every connection it accepted: its
	// descriptors are back to those at rest (the good client may have
	// opened another connection meanwhile).
	var fdAfter int64
	for end := time.Now().Add(2 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if fdAfter = fds(t, pid); fdAfter <= fdBase+2 || time.Now().After(end) {
			break
		}
	}
	if fdAfter > fdBase+2 {
		t.Errorf("the server holds %d descriptors after the attack, %d at rest", fdAfter, fdBase)
	}

	lat, failed, slowest := good.stop()

	// After: the memory the attack took is given back. The Go runtime
	// returns freed memory only after a garbage collection, which an idle
	// process runs every two minutes, and the answer buffers' pool keeps
	// what it holds through one collection: a server keeps serving, and
	// its traffic drives the collections. Here a client reads /metrics
	// (an answer of some kilobytes, made anew each time) until RSS is back
	// near the baseline, or 15 s. Memory the attack leaked would stay.
	gcs := func() string {
		_, m := get(t, http.DefaultClient, p.addr+"/metrics")
		for l := range strings.SplitSeq(m, "\n") {
			if v, ok := strings.CutPrefix(l, "go_gc_duration_seconds_count "); ok {
				return v
			}
		}
		return "?"
	}
	gcBefore := gcs()
	after := settledRSS(t, pid, baseline, p.addr)
	settled := time.Since(start) - cut
	gcAfter := gcs()

	p99 := percentile(lat, 0.99)
	t.Logf("%s: %d connections; RSS baseline %s, peak %s (+%s), %s %v after the attack (GC cycles %s -> %s); descriptors %d at rest, %d at peak; all cut %v after the attack began (first %v, median %v); good client: %d requests, %d failed, p50 %v p99 %v, slowest %s",
		a.name, a.conns, mib(baseline), mib(peakRSS), mib(peakRSS-baseline), mib(after), settled.Round(time.Millisecond),
		gcBefore, gcAfter, fdBase, peakFDs, cut.Round(time.Millisecond), at(lives, 0), at(lives, 0.5), len(lat), len(failed),
		percentile(lat, 0.5), p99, slowest)

	if peakRSS > baseline+a.rssGrowth {
		t.Errorf("RSS rose to %s under attack, more than %s above its baseline of %s", mib(peakRSS), mib(a.rssGrowth), mib(baseline))
	}
	if after > baseline+rssSettled {
		t.Errorf("RSS stayed at %s after the attacking connections were closed, more than %s above its baseline of %s",
			mib(after), mib(rssSettled), mib(baseline))
	}
	// The cap counts connections; the process also holds its listeners,
	// its database and the well-behaved client's connections.
	if peakFDs > fdBase+limMaxConns {
		t.Errorf("the server held %d descriptors under attack, %d at rest: more connections than http.max_connections (%d)",
			peakFDs, fdBase, limMaxConns)
	}
	if len(failed) > 0 {
		t.Errorf("%d of the good client's %d requests failed under attack, the first: %s", len(failed), len(lat)+len(failed), failed[0])
	}
	if len(lat) < 10 {
		t.Errorf("the good client made %d requests during the attack", len(lat))
	}
	if p99 > goodP99 {
		t.Errorf("the good client's p99 latency under attack was %v, want under %v", p99, goodP99)
	}
	if code := p.stop(t); code != 0 {
		t.Errorf("leafd exited %d after SIGTERM\n%s", code, p.Output())
	}
}

const (
	// chunkBytes is what the blocked write of a slow reader costs in RSS:
	// the server formats and writes a batch 32 KiB at a time, whatever its
	// size, and holds only the chunk it is writing, two and a half times
	// over: the buffer has up to a quarter spare, and the garbage collector
	// lets the heap grow to twice what is live (GOGC=100) before it
	// collects. runAttack checks that an answer spans several chunks.
	chunkBytes = 32 << 10 * 5 / 2
	// rssSettled is how near its baseline RSS must come back once the
	// attack is over.
	rssSettled = 16 << 20
	// goodP99 is the generous bound on the well-behaved client's p99.
	goodP99 = 250 * time.Millisecond
)

// attackDialer opens attacking connections with a receive buffer of 4 KiB,
// as a client across the Internet would have a small window: one that
// reads nothing then blocks the server's writes after a few answers,
// instead of letting loopback buffers swallow megabytes.
var attackDialer = &net.Dialer{Timeout: 30 * time.Second, Control: func(_, _ string, c syscall.RawConn) error {
	var err error
	if cerr := c.Control(func(fd uintptr) {
		err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
	}); cerr != nil {
		return cerr
	}
	return err
}}

// trickle writes s a byte every 500 ms until the connection fails, s is
// written or stop closes.
func trickle(c net.Conn, stop <-chan struct{}, s string) {
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for i := range len(s) {
		if _, err := c.Write([]byte{s[i]}); err != nil {
			return
		}
		select {
		case <-tick.C:
		case <-stop:
			return
		}
	}
	<-stop
}

// watchedConn is an attacking connection and when the server closed it.
type watchedConn struct {
	*net.TCPConn
	opened, closed time.Time
}

// serverClosed reports whether the server has closed c: its TCP state
// (TCP_INFO) is past ESTABLISHED, after the server's FIN or reset.
func (w *watchedConn) serverClosed() bool {
	raw, err := w.SyscallConn()
	if err != nil {
		return true // closed on our side: the attacker gave up on it
	}
	var info syscall.TCPInfo
	var errno syscall.Errno
	if err := raw.Control(func(fd uintptr) {
		size := uint32(unsafe.Sizeof(info))
		_, _, errno = syscall.Syscall6(syscall.SYS_GETSOCKOPT, fd, syscall.IPPROTO_TCP, syscall.TCP_INFO,
			uintptr(unsafe.Pointer(&info)), uintptr(unsafe.Pointer(&size)), 0)
	}); err != nil || errno != 0 {
		return true
	}
	const established = 1
	return info.State != established
}

// goodClient asks for IDs over and over on keep-alive connections, as a
// well-behaved application does.
type goodClient struct {
	mu     sync.Mutex
	lat    []time.Duration
	failed []string
	// slowest is the slowest request since reset, and when it began.
	slowest     time.Duration
	slowestWhat string
	since       time.Time
	done        chan struct{}
	wg          sync.WaitGroup
	once        sync.Once
}

func startGoodClient(t *testing.T, base string) *goodClient {
	g := &goodClient{done: make(chan struct{})}
	for i := range 2 {
		// A connection of its own, kept alive: a transport shared with
		// other requests, or free to dial a spare, would open connections
		// that wait in the accept queue behind the attackers.
		client := &http.Client{Timeout: 30 * time.Second,
			Transport: &http.Transport{MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1}}
		urls := []string{base + "/segment/good?count=100", base + "/snowflake"}
		g.wg.Go(func() {
			for n := i; ; n++ {
				select {
				case <-g.done:
					return
				case <-time.After(10 * time.Millisecond):
				}
				u := urls[n%2]
				var reused bool
				req, _ := http.NewRequest("GET", u, nil)
				req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
					GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }}))
				t0 := time.Now()
				res, err := client.Do(req)
				var body []byte
				if err == nil {
					body, err = io.ReadAll(res.Body)
					res.Body.Close()
				}
				d := time.Since(t0)
				g.mu.Lock()
				switch {
				case err != nil:
					g.failed = append(g.failed, fmt.Sprintf("GET %s: %v after %v", u, err, d))
				case res.StatusCode != 200 || len(body) == 0:
					g.failed = append(g.failed, fmt.Sprintf("GET %s: %d %q", u, res.StatusCode, body))
				default:
					g.lat = append(g.lat, d)
					if d > g.slowest {
						g.slowest, g.slowestWhat = d, fmt.Sprintf("%v (GET %s, %v after the attack began, connection reused: %v)",
							d.Round(time.Millisecond), strings.TrimPrefix(u, base), t0.Sub(g.since).Round(time.Millisecond), reused)
					}
				}
				g.mu.Unlock()
			}
		})
	}
	t.Cleanup(func() { g.stop() })
	return g
}

// reset forgets the latencies measured so far (not the failures).
func (g *goodClient) reset() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.lat, g.slowest, g.since = nil, 0, time.Now()
}

// stop ends the client and returns its latencies, its failures and its
// slowest request.
func (g *goodClient) stop() ([]time.Duration, []string, string) {
	g.once.Do(func() { close(g.done) })
	g.wg.Wait()
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.lat), slices.Clone(g.failed), g.slowestWhat
}

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(p*float64(len(s))))].Round(time.Microsecond)
}

// at is the p-quantile of sorted durations.
func at(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(p*float64(len(sorted))))].Round(time.Millisecond)
}

// rss is the process's resident memory in bytes (VmRSS).
// settledRSS reads pid's RSS until it is back within rssSettled of
// baseline, or 15 s passed, driving the collections that give freed memory
// back with reads of addr's /metrics (an answer of some kilobytes, made anew
// each time) in between; it returns the last reading.
func settledRSS(t *testing.T, pid int, baseline int64, addr string) int64 {
	settle := time.Now().Add(15 * time.Second)
	for {
		after := rss(t, pid)
		if after <= baseline+rssSettled || time.Now().After(settle) {
			return after
		}
		for range 50 {
			get(t, http.DefaultClient, addr+"/metrics")
		}
	}
}

func rss(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for l := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("VmRSS %q: %v", v, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}

// fds counts the process's open descriptors.
func fds(t *testing.T, pid int) int64 {
	t.Helper()
	e, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	return int64(len(e))
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// raiseFileLimit raises this test process's open-file limit to its hard
// limit, for the idle attack's thousands of connections.
func raiseFileLimit(t *testing.T) {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		t.Fatal(err)
	}
	if l.Cur < l.Max {
		l.Cur = l.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
			t.Logf("raising the open-file limit: %v", err)
		}
	}
}

func fileLimit(t *testing.T) int {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		t.Fatal(err)
	}
	return int(min(l.Cur, 1<<20))
}
