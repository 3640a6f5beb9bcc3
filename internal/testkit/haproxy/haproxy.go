// Package haproxy runs Debian's HAProxy on loopback in front of a set of
// database servers, for tests of leafd behind the most common production
// topology for MariaDB Galera: one virtual address, a TCP proxy that checks
// the nodes' health and sends every connection to one node at a time, and
// fails over to the next when that node goes.
//
// The configuration it writes (Config shows it) is TCP mode, with the
// first backend as the only active server and the others as backup
// servers in order: HAProxy uses the first backup that is up only when the
// active one is down, so all writes go through one node at a time and the
// nodes never conflict at certification. Every server is checked with a
// TCP connect every Options.Inter (500 ms by default); it is marked down
// after Fall failed checks (2) and up again after Rise good ones (2). A
// server marked down has every session through it cut
// (on-marked-down shutdown-sessions), and when the active server comes back
// up, every session through a backup is cut (on-marked-up
// shutdown-backup-sessions), so that the clients reconnect to it: a
// connection can be cut in the middle of a transaction either way.
//
// With Options.HTTPCheck the proxy is the one Patroni's documentation
// describes instead: every server active, each checked with an HTTP GET of
// a health endpoint of Patroni's REST API (/primary) on a port of its own,
// so that connections go to the one server that is the primary now.
//
// HAProxy runs in the foreground (-db), in a process group of its own,
// with SIGKILL as its parent-death signal; a stats socket in its directory
// answers Servers. Kill ends it with SIGKILL (every connection through it
// is cut); Restart starts it again on the same port.
//
// Environment, for tests (see Require):
//
//	LEAFD_TEST_REQUIRE_HAPROXY=1   fail, rather than skip, when
//	                               /usr/sbin/haproxy is not installed
package haproxy

import (
	"bufio"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leafd/leafd/internal/testkit/testenv"
)

// Path is where Debian's haproxy package installs the program.
const Path = "/usr/sbin/haproxy"

// RequireEnv names the environment variable that turns a skip for want of
// HAProxy into a failure.
const RequireEnv = "LEAFD_TEST_REQUIRE_HAPROXY"

// Available reports whether HAProxy is installed: nil when it is,
// otherwise an error that says how to install it.
func Available() error {
	st, err := os.Stat(Path)
	if err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0 {
		return nil
	}
	return fmt.Errorf("haproxy: %s is not installed; install it with apt-get install haproxy", Path)
}

// Require skips the test when HAProxy is not installed, or fails it when
// LEAFD_TEST_REQUIRE_HAPROXY=1: asking for HAProxy and silently getting a
// skip would pass a CI run that tested nothing.
func Require(tb testing.TB) {
	tb.Helper()
	if err := Available(); err != nil {
		if os.Getenv(RequireEnv) == "1" {
			tb.Fatalf("%v (%s=1)", err, RequireEnv)
		}
		tb.Skip(err)
	}
}

// Options shape a proxy.
type Options struct {
	// Backends are the servers' addresses (host:port), in order: the
	// first is the active server, the others backups, used one at a
	// time in this order while every one before them is down (all are
	// active with HTTPCheck). They are
	// named node0, node1, … in the configuration and in Servers.
	Backends []string
	// Inter is the time between two health checks of a server; 0 means
	// 500 ms. Fall and Rise are how many checks in a row mark it down or
	// up; 0 means 2.
	Inter      time.Duration
	Fall, Rise int
	// HTTPCheck, when set, checks each server with an HTTP GET of this
	// path on its port in CheckPorts, instead of a TCP connect, expecting
	// 200, and makes every server active (no backups): HAProxy sends
	// connections to whichever servers pass. It is how a proxy finds a
	// Patroni cluster's primary: only its REST API answers GET /primary
	// with 200.
	HTTPCheck  string
	CheckPorts []int
	// Logf, when set, is told how the proxy is doing (t.Logf, say).
	Logf func(format string, args ...any)
}

// Proxy is a running HAProxy. Its methods are safe for concurrent use.
type Proxy struct {
	dir  string
	port int
	opts Options

	mu      sync.Mutex
	proc    *testenv.Process // nil while down
	stopped bool
}

// Start writes the configuration to dir (created if needed), picks a free
// port on 127.0.0.1 for the proxy and starts HAProxy, returning once it
// answers on its stats socket (it listens on its port by then).
//
// Errors: HAProxy is not installed, no backend, the configuration was
// refused (the error holds HAProxy's output), or it did not come up before
// ctx ended.
func Start(ctx context.Context, dir string, o Options) (*Proxy, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	if len(o.Backends) == 0 {
		return nil, errors.New("haproxy: no backend")
	}
	if o.HTTPCheck != "" && len(o.CheckPorts) != len(o.Backends) {
		return nil, fmt.Errorf("haproxy: %d check ports for %d backends", len(o.CheckPorts), len(o.Backends))
	}
	if o.Inter == 0 {
		o.Inter = 500 * time.Millisecond
	}
	if o.Fall == 0 {
		o.Fall = 2
	}
	if o.Rise == 0 {
		o.Rise = 2
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("haproxy: %w", err)
	}
	ports, err := testenv.FreePorts(1)
	if err != nil {
		return nil, fmt.Errorf("haproxy: %w", err)
	}
	p := &Proxy{dir: dir, port: ports[0], opts: o}
	if err := os.WriteFile(p.ConfigPath(), []byte(p.Config()), 0o644); err != nil {
		return nil, fmt.Errorf("haproxy: %w", err)
	}
	began := time.Now()
	if err := p.launch(ctx); err != nil {
		p.Stop()
		return nil, err
	}
	o.Logf("haproxy: listening on %s in %v, backends %s (dir %s)", p.Addr(), time.Since(began).Round(time.Millisecond),
		strings.Join(o.Backends, " "), dir)
	return p, nil
}

// MustStart starts a proxy for tb in a new directory under the system's
// temporary directory (a unix socket's path must be short) and stops it
// when the test ends; the directory is kept, and the end of HAProxy's
// output logged, if the test failed. It skips or fails tb as Require does
// when HAProxy is not installed, and fails it when HAProxy does not start
// within 30 seconds.
func MustStart(tb testing.TB, o Options) *Proxy {
	tb.Helper()
	Require(tb)
	if o.Logf == nil {
		o.Logf = tb.Logf
	}
	return testenv.MustStartIn(tb, "haproxy", 30*time.Second,
		func(ctx context.Context, dir string) (*Proxy, error) { return Start(ctx, dir, o) },
		func(p *Proxy) string { return p.LogTail(40) })
}

// Addr returns the proxy's address, 127.0.0.1:port: the one address the
// clients are given.
func (p *Proxy) Addr() string { return "127.0.0.1:" + strconv.Itoa(p.port) }

// Dir returns the directory that holds the configuration, the stats socket
// and the output.
func (p *Proxy) Dir() string { return p.dir }

// ConfigPath returns the path of the configuration file.
func (p *Proxy) ConfigPath() string { return filepath.Join(p.dir, "haproxy.cfg") }

func (p *Proxy) socketPath() string { return filepath.Join(p.dir, "admin.sock") }
func (p *Proxy) logPath() string    { return filepath.Join(p.dir, "haproxy.log") }

// Config returns the configuration HAProxy runs with.
func (p *Proxy) Config() string {
	o := p.opts
	var b strings.Builder
	fmt.Fprintf(&b, `# Written by leafd's internal/testkit/haproxy for a test on loopback.
global
    maxconn 4000
    stats socket %s mode 600 level admin
    log stderr format iso local0 notice

defaults
    mode tcp
    log global
    option tcplog
    option dontlognull
    timeout connect 2s
    timeout client 1h
    timeout server 1h
    timeout check 1s
    # A connection that cannot be made is tried again, the last time on
    # whatever server is up then.
    retries 2
    option redispatch

listen galera
    bind 127.0.0.1:%d
    option tcpka
    default-server inter %dms downinter %dms fall %d rise %d on-marked-down shutdown-sessions
`, p.socketPath(), p.port, o.Inter.Milliseconds(), o.Inter.Milliseconds(), o.Fall, o.Rise)
	if o.HTTPCheck != "" {
		fmt.Fprintf(&b, "    option httpchk GET %s\n    http-check expect status 200\n", o.HTTPCheck)
		for i, addr := range o.Backends {
			fmt.Fprintf(&b, "    server node%d %s check port %d\n", i, addr, o.CheckPorts[i])
		}
		return b.String()
	}
	for i, addr := range o.Backends {
		fmt.Fprintf(&b, "    server node%d %s check", i, addr)
		if i == 0 {
			b.WriteString(" on-marked-up shutdown-backup-sessions")
		} else {
			b.WriteString(" backup")
		}
		b.WriteString("\n")
	}
	return b.String()
}

// launch starts haproxy and waits until it answers on its stats socket.
func (p *Proxy) launch(ctx context.Context) error {
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return errors.New("haproxy: the proxy was stopped")
	}
	if p.proc != nil {
		p.mu.Unlock()
		return errors.New("haproxy: it is running")
	}
	_ = os.Remove(p.socketPath())
	if f, err := os.OpenFile(p.logPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err == nil {
		fmt.Fprintf(f, "--- leafd test: starting haproxy at %s\n", time.Now().UTC().Format("2006-01-02T15:04:05.000000Z07:00"))
		f.Close()
	}
	pr, err := testenv.Start(testenv.Config{Path: Path, Args: []string{"-db", "-f", p.ConfigPath()}, Dir: p.dir,
		Env:     []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C"},
		LogFile: p.logPath(), Tail: 40,
		Group: true, DeathSignal: syscall.SIGKILL})
	if err != nil {
		p.mu.Unlock()
		return fmt.Errorf("haproxy: %w", err)
	}
	p.proc = pr
	p.mu.Unlock()
	err = testenv.Eventually(ctx, 0, 20*time.Millisecond, func() error {
		if pr.Exited() {
			return testenv.Final(fmt.Errorf("haproxy: exited at start (%s); its output:\n%s", pr.State(), p.LogTail(30)))
		}
		_, err := p.command(ctx, "show info")
		return err
	})
	if err != nil && !pr.Exited() {
		return fmt.Errorf("haproxy: not answering on %s: %w; its output:\n%s", p.socketPath(), err, p.LogTail(30))
	}
	return err
}

// Running reports whether HAProxy runs.
func (p *Proxy) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.proc != nil
}

// Kill ends HAProxy with SIGKILL and waits for it: every connection
// through it is cut, as when its host crashes.
//
// Errors: it is not running.
func (p *Proxy) Kill() error {
	p.mu.Lock()
	pr := p.proc
	p.proc = nil
	p.mu.Unlock()
	if pr == nil {
		return errors.New("haproxy: not running")
	}
	pr.Kill()
	return nil
}

// Restart kills HAProxy if it runs (cutting every connection) and starts
// it again on the same port with the same configuration, returning once
// it answers. The new process knows nothing of the old one's health
// checks: it counts every server up until its checks say otherwise.
//
// Errors: the proxy was stopped, or it did not come up before ctx ended.
func (p *Proxy) Restart(ctx context.Context) error {
	_ = p.Kill()
	return p.launch(ctx)
}

// Stop kills HAProxy for good. It is safe to call more than once.
func (p *Proxy) Stop() {
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	_ = p.Kill()
}

// Server is what HAProxy says of one backend server.
type Server struct {
	Name string // node0, node1, …: Options.Backends' order
	Addr string
	// Status is HAProxy's: UP, DOWN, "UP 1/2" (up, one check failed),
	// "DOWN 1/2" (down, one check passed), MAINT…
	Status string
	Backup bool
	// Sessions is the number of connections through the server now;
	// Total since HAProxy started.
	Sessions, Total int64
}

// Up reports whether HAProxy sends connections to the server when it is
// its turn: UP, or going down but not yet down.
func (s Server) Up() bool {
	return strings.HasPrefix(s.Status, "UP") || strings.HasPrefix(s.Status, "NOLB")
}

// Servers returns what HAProxy says of every backend server now, in
// Options.Backends' order, read from its stats socket.
//
// Errors: HAProxy does not answer.
func (p *Proxy) Servers(ctx context.Context) ([]Server, error) {
	out, err := p.command(ctx, "show stat")
	if err != nil {
		return nil, err
	}
	r := csv.NewReader(strings.NewReader(strings.TrimPrefix(out, "# ")))
	r.FieldsPerRecord = -1
	recs, err := r.ReadAll()
	if err != nil || len(recs) == 0 {
		return nil, fmt.Errorf("haproxy: show stat: %v: %.200q", err, out)
	}
	col := map[string]int{}
	for i, name := range recs[0] {
		col[name] = i
	}
	get := func(rec []string, name string) string {
		if i, ok := col[name]; ok && i < len(rec) {
			return rec[i]
		}
		return ""
	}
	byName := map[string]Server{}
	for _, rec := range recs[1:] {
		name := get(rec, "svname")
		if get(rec, "pxname") != "galera" || name == "FRONTEND" || name == "BACKEND" {
			continue
		}
		s := Server{Name: name, Addr: get(rec, "addr"), Status: get(rec, "status"), Backup: get(rec, "bck") == "1"}
		s.Sessions, _ = strconv.ParseInt(get(rec, "scur"), 10, 64)
		s.Total, _ = strconv.ParseInt(get(rec, "stot"), 10, 64)
		byName[name] = s
	}
	servers := make([]Server, 0, len(p.opts.Backends))
	for i := range p.opts.Backends {
		s, ok := byName["node"+strconv.Itoa(i)]
		if !ok {
			return nil, fmt.Errorf("haproxy: show stat has no server node%d: %.300q", i, out)
		}
		servers = append(servers, s)
	}
	return servers, nil
}

// Active returns the index of the server HAProxy sends new connections to
// now: the active server if it is up, else the first backup that is up;
// -1 when none is.
//
// Errors: HAProxy does not answer.
func (p *Proxy) Active(ctx context.Context) (int, error) {
	servers, err := p.Servers(ctx)
	if err != nil {
		return -1, err
	}
	for i, s := range servers {
		if s.Up() {
			return i, nil
		}
	}
	return -1, nil
}

// command sends one command to the stats socket and returns the answer.
func (p *Proxy) command(ctx context.Context, cmd string) (string, error) {
	d := net.Dialer{Timeout: time.Second}
	c, err := d.DialContext(ctx, "unix", p.socketPath())
	if err != nil {
		return "", fmt.Errorf("haproxy: %w", err)
	}
	defer c.Close()
	deadline := time.Now().Add(2 * time.Second)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = c.SetDeadline(deadline)
	if _, err := io.WriteString(c, cmd+"\n"); err != nil {
		return "", fmt.Errorf("haproxy: %s: %w", cmd, err)
	}
	b, err := io.ReadAll(bufio.NewReader(c))
	if err != nil {
		return "", fmt.Errorf("haproxy: %s: %w", cmd, err)
	}
	return string(b), nil
}

// LogTail returns the last lines of HAProxy's output: its warnings, its
// servers' changes of state, and a line per connection that ended.
func (p *Proxy) LogTail(lines int) string { return testenv.LogTail(p.logPath(), lines) }
