// Package patroni starts a real PostgreSQL high-availability cluster on
// loopback, for tests of leafd on a primary that fails over: a single-node
// etcd (Debian's etcd-server) as Patroni's distributed configuration store,
// and three PostgreSQL 15 nodes, each run by its own Patroni (Debian's
// patroni package), one the primary and the others streaming replicas. All
// of it lives in a temporary directory, on free loopback ports, and touches
// nothing the system runs.
//
// Patroni's timings are short, so that a failover takes seconds rather than
// the half minute of Patroni's defaults (ttl 30, loop_wait 10,
// retry_timeout 10):
//
//	ttl: 6                    the leader key's lease: a primary whose Patroni
//	                          stops renewing it (its host died) loses it after 6 s
//	loop_wait: 1              every Patroni runs its loop every second
//	retry_timeout: 2          etcd and PostgreSQL calls are retried for 2 s
//	                          (Patroni wants loop_wait + 2 × retry_timeout ≤ ttl)
//	primary_start_timeout: 0  a primary whose postmaster crashed is failed
//	                          over at once, not restarted in place first
//	synchronous_mode: true    a commit waits for one replica, the synchronous
//	                          standby, and only it may be promoted: a failover
//	                          loses no committed transaction
//
// Synchronous mode is what an ID service needs: with asynchronous
// replication a failover may lose the last committed ranges, and a range
// handed out before the crash would be handed out again.
//
// The nodes run as the postgres user when the test runs as root. Patroni
// runs initdb on the first node to win the leader key, and the others clone
// it with pg_basebackup; pg_rewind brings a failed primary back as a
// replica. The superuser root logs in without a password (trust) over
// 127.0.0.1, as on the test machine's own PostgreSQL.
//
// Kill ends a node as a crashed host ends: its Patroni and its postmaster
// with SIGKILL. Its replicas wait for the leader key to expire (ttl) and
// the synchronous standby takes over. KillPostmaster ends only the
// postmaster, and the node's Patroni, alive, hands the leader key on at its
// next loop. Switchover asks Patroni for a planned switchover (POST
// /switchover). Restart starts a killed node's Patroni again.
//
// Patroni starts its postmaster in a session of its own, so that signals
// to Patroni do not reach PostgreSQL: Stop and Kill end both, but if the
// test process itself is killed with SIGKILL, Patroni and etcd go with it
// (their parent-death signal) while the postmasters stay.
//
// Environment, for tests (see Require):
//
//	LEAFD_TEST_REQUIRE_PATRONI=1   fail, rather than skip, when patroni,
//	                               etcd or PostgreSQL's programs are not
//	                               installed
package patroni

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/leafd/leafd/internal/testkit/testenv"
)

// Where Debian's packages install the programs.
const (
	PatroniPath = "/usr/bin/patroni"
	EtcdPath    = "/usr/bin/etcd"
)

// RequireEnv names the environment variable that turns a skip for want of
// Patroni into a failure.
const RequireEnv = "LEAFD_TEST_REQUIRE_PATRONI"

// The timings of every cluster (see the package's comment), in seconds.
const (
	TTL          = 6
	LoopWait     = 1
	RetryTimeout = 2
)

// user is who Patroni and PostgreSQL run as when the test runs as root,
// which PostgreSQL refuses to run as.
const user = "postgres"

// bindir returns the directory of PostgreSQL's server programs, the
// newest of Debian's /usr/lib/postgresql/<version>/bin that holds every
// program Patroni runs.
func bindir() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return vb - va
	})
	for _, d := range dirs {
		ok := true
		for _, p := range []string{"postgres", "initdb", "pg_basebackup", "pg_rewind", "pg_controldata"} {
			if _, err := os.Stat(filepath.Join(d, p)); err != nil {
				ok = false
			}
		}
		if ok {
			return d, nil
		}
	}
	return "", errors.New("PostgreSQL's server programs (/usr/lib/postgresql/<version>/bin) are not installed")
}

// Available reports whether a cluster can be started here: nil when
// Patroni, etcd and PostgreSQL's server programs are installed, otherwise
// an error that names what is missing and how to install it.
func Available() error {
	var missing []string
	for _, p := range []string{PatroniPath, EtcdPath} {
		if st, err := os.Stat(p); err != nil || !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
			missing = append(missing, p)
		}
	}
	if _, err := bindir(); err != nil {
		missing = append(missing, "PostgreSQL's server programs")
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("patroni: cannot start a cluster: missing %s; install them with "+
		"apt-get install --no-install-recommends patroni etcd-server postgresql (and stop the services they start)",
		strings.Join(missing, ", "))
}

// Require skips the test when a cluster cannot be started here, or fails
// it when LEAFD_TEST_REQUIRE_PATRONI=1: asking for Patroni and silently
// getting a skip would pass a CI run that tested nothing.
func Require(tb testing.TB) {
	tb.Helper()
	if err := Available(); err != nil {
		if os.Getenv(RequireEnv) == "1" {
			tb.Fatalf("%v (%s=1)", err, RequireEnv)
		}
		tb.Skip(err)
	}
}

// Options shape a cluster. The zero value is a cluster of three nodes.
type Options struct {
	// Nodes is the number of PostgreSQL nodes; 0 means 3.
	Nodes int
	// Logf, when set, is told how the cluster is doing (t.Logf, say).
	Logf func(format string, args ...any)
}

// Cluster is a running Patroni cluster. Its methods are safe for
// concurrent use. Stop ends it.
type Cluster struct {
	dir      string
	bin      string
	opts     Options
	uid, gid int // owner of the nodes' files when run as root; -1 to leave them
	etcdPort int
	etcd     *testenv.Process
	nodes    []*Node
	client   *http.Client

	mu      sync.Mutex
	stopped bool
}

// Node is one member of a Cluster: a Patroni and the PostgreSQL it runs.
type Node struct {
	c       *Cluster
	idx     int
	dir     string
	pgPort  int
	apiPort int

	mu   sync.Mutex
	proc *testenv.Process // Patroni; nil while the node is down
}

// Start starts etcd and o.Nodes Patroni nodes in dir (created if needed;
// etcd's data in dir/etcd, each node's configuration, data directory and
// log in dir/nodeI), and returns once one node is the primary and every
// other one a replica streaming from it. It takes 6 to 20 seconds on two
// cores. When run as root the nodes run as the postgres user: dir is made
// searchable (0755) and the node directories are given to that user, so
// dir's parents must be searchable by it too (under /tmp, say).
//
// Errors: Patroni or etcd is not installed (see Available); root but no
// postgres user; the cluster did not come up before ctx ended (the error
// holds the end of the logs). On error everything started is stopped.
func Start(ctx context.Context, dir string, o Options) (*Cluster, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	if o.Nodes == 0 {
		o.Nodes = 3
	}
	if o.Nodes < 1 {
		return nil, fmt.Errorf("patroni: %d nodes", o.Nodes)
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	bin, _ := bindir()
	c := &Cluster{dir: dir, bin: bin, opts: o, client: &http.Client{Timeout: 2 * time.Second}}
	var err error
	if c.uid, c.gid, err = testenv.UserIDs(user); err != nil {
		return nil, fmt.Errorf("patroni: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("patroni: %w", err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, fmt.Errorf("patroni: %w", err)
	}
	ports, err := testenv.FreePorts(2 + 2*o.Nodes)
	if err != nil {
		return nil, fmt.Errorf("patroni: %w", err)
	}
	c.etcdPort = ports[0]
	for i := range o.Nodes {
		n := &Node{c: c, idx: i, dir: filepath.Join(dir, fmt.Sprintf("node%d", i)),
			pgPort: ports[2+2*i], apiPort: ports[3+2*i]}
		c.nodes = append(c.nodes, n)
	}
	began := time.Now()
	fail := func(err error) (*Cluster, error) {
		c.Stop()
		return nil, err
	}
	if err := c.startEtcd(ctx, ports[1]); err != nil {
		return fail(err)
	}
	for _, n := range c.nodes {
		if err := n.prepare(); err != nil {
			return fail(err)
		}
	}
	// Node 0 first, so that it bootstraps the cluster and the others
	// clone it rather than race for the initialisation key.
	if err := c.nodes[0].launch(); err != nil {
		return fail(err)
	}
	if _, err := c.WaitPrimary(ctx, -1); err != nil {
		return fail(err)
	}
	for _, n := range c.nodes[1:] {
		if err := n.launch(); err != nil {
			return fail(err)
		}
	}
	if err := c.WaitStreaming(ctx); err != nil {
		return fail(err)
	}
	o.Logf("patroni: %d nodes up in %v, primary node %d (PostgreSQL ports %s, etcd 127.0.0.1:%d, dir %s)",
		o.Nodes, time.Since(began).Round(10*time.Millisecond), c.primaryOrMinus(ctx), c.pgPorts(), c.etcdPort, dir)
	return c, nil
}

// MustStart starts a cluster for tb in a new directory under the system's
// temporary directory (whose parents the postgres user can search, unlike
// tb.TempDir's), and stops it when the test ends. If the test failed, the
// end of every log is logged and the directory kept; otherwise it is
// removed. It skips or fails tb as Require does when Patroni is not
// installed, and fails tb when the cluster does not come up within two
// minutes.
func MustStart(tb testing.TB, o Options) *Cluster {
	tb.Helper()
	Require(tb)
	if o.Logf == nil {
		o.Logf = tb.Logf
	}
	return testenv.MustStartIn(tb, "patroni", 2*time.Minute,
		func(ctx context.Context, dir string) (*Cluster, error) { return Start(ctx, dir, o) },
		func(c *Cluster) string { return c.Logs(60) })
}

// startEtcd starts a single-node etcd on 127.0.0.1:etcdPort (peers on
// peer) and waits until it is healthy.
func (c *Cluster) startEtcd(ctx context.Context, peer int) error {
	client := "http://127.0.0.1:" + strconv.Itoa(c.etcdPort)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(peer)
	p, err := testenv.Start(testenv.Config{Path: EtcdPath, Name: "etcd", Dir: c.dir,
		Args: []string{"--name", "etcd0", "--data-dir", filepath.Join(c.dir, "etcd"),
			"--listen-client-urls", client, "--advertise-client-urls", client,
			"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
			"--initial-cluster", "etcd0=" + peerURL, "--initial-cluster-state", "new"},
		Env:     []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C"},
		LogFile: filepath.Join(c.dir, "etcd.log"), Tail: 40,
		Group: true, DeathSignal: syscall.SIGKILL})
	if err != nil {
		return fmt.Errorf("patroni: etcd: %w", err)
	}
	c.etcd = p
	err = testenv.Eventually(ctx, 0, 50*time.Millisecond, func() error {
		if p.Exited() {
			return testenv.Final(fmt.Errorf("patroni: etcd exited at start (%s); its log:\n%s", p.State(), c.EtcdLog(30)))
		}
		var h struct{ Health string }
		if err := c.getJSON(ctx, client+"/health", &h); err != nil {
			return err
		}
		if h.Health != "true" {
			return fmt.Errorf("etcd health %q", h.Health)
		}
		return nil
	})
	if err != nil && !p.Exited() {
		return fmt.Errorf("patroni: etcd not healthy: %w; its log:\n%s", err, c.EtcdLog(30))
	}
	return err
}

// Dir returns the directory that holds the cluster.
func (c *Cluster) Dir() string { return c.dir }

// Size returns the number of nodes, running or not.
func (c *Cluster) Size() int { return len(c.nodes) }

// Node returns node i, 0 ≤ i < Size.
func (c *Cluster) Node(i int) *Node { return c.nodes[i] }

// Addrs returns every node's PostgreSQL address, in order.
func (c *Cluster) Addrs() []string {
	var a []string
	for _, n := range c.nodes {
		a = append(a, n.Addr())
	}
	return a
}

// DSN returns the URL of database db on the cluster as its users reach
// it, whichever node is the primary: every node's address in one URL,
// with target_session_attrs=read-write, so that the client tries them in
// turn and keeps the one that accepts writes.
func (c *Cluster) DSN(db string) string {
	u := url.URL{Scheme: "postgres", User: url.User("root"), Host: strings.Join(c.Addrs(), ","), Path: "/" + db,
		RawQuery: "sslmode=disable&target_session_attrs=read-write"}
	return u.String()
}

// CreateDatabase creates an empty database named name, on the primary.
func (c *Cluster) CreateDatabase(ctx context.Context, name string) error {
	db, err := open(c.DSN("postgres"))
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.ExecContext(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	return err
}

// open returns a handle on dsn with a short connect timeout.
func open(dsn string) (*sql.DB, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	cfg.ConnectTimeout = 2 * time.Second
	return stdlib.OpenDB(*cfg), nil
}

// Member is what Patroni's GET /cluster says of one node.
type Member struct {
	Name string `json:"name"`
	// Role is "leader" (the primary), "replica" or "sync_standby" (the
	// synchronous standby).
	Role string `json:"role"`
	// State is "running", "starting", "stopped", "crashed"…
	State    string `json:"state"`
	Port     int    `json:"port"`
	Timeline int    `json:"timeline"`
}

// Members returns the cluster as the first running node's Patroni
// describes it (GET /cluster).
//
// Errors: no running node answered.
func (c *Cluster) Members(ctx context.Context) ([]Member, error) {
	var last error = errors.New("patroni: no node is running")
	for _, n := range c.nodes {
		if !n.Running() {
			continue
		}
		var cl struct{ Members []Member }
		if last = c.getJSON(ctx, n.APIURL()+"/cluster", &cl); last == nil {
			return cl.Members, nil
		}
	}
	return nil, last
}

// Primary returns the index of the primary: the one running node whose
// Patroni answers GET /primary with 200 (it holds the leader key and its
// PostgreSQL runs as a primary).
//
// Errors: no node is the primary now, or two are.
func (c *Cluster) Primary(ctx context.Context) (int, error) {
	var primaries []int
	for _, n := range c.nodes {
		if n.Running() && n.isPrimary(ctx) {
			primaries = append(primaries, n.idx)
		}
	}
	switch len(primaries) {
	case 1:
		return primaries[0], nil
	case 0:
		return -1, errors.New("patroni: no node answers GET /primary with 200")
	}
	return -1, fmt.Errorf("patroni: nodes %v all answer GET /primary with 200", primaries)
}

func (c *Cluster) primaryOrMinus(ctx context.Context) int {
	i, _ := c.Primary(ctx)
	return i
}

// WaitPrimary waits until a node other than not (-1 for any) is the
// primary (see Primary) and accepts writes over SQL, and returns it.
//
// Errors: ctx ended first; the error holds the last answer and the end of
// the logs.
func (c *Cluster) WaitPrimary(ctx context.Context, not int) (int, error) {
	p := -1
	err := testenv.Eventually(ctx, 0, 50*time.Millisecond, func() error {
		var err error
		if p, err = c.Primary(ctx); err != nil {
			return err
		}
		if p == not {
			return fmt.Errorf("node %d is still the primary", p)
		}
		return c.nodes[p].writable(ctx)
	})
	if err != nil {
		return -1, fmt.Errorf("patroni: waiting for a primary (not node %d): %w; the logs:\n%s", not, err, c.Logs(20))
	}
	return p, nil
}

// WaitStreaming waits until there is a primary and every other running
// node streams from it: the primary's Patroni lists each of them as a
// streaming replication connection (GET /patroni), and, when there is more
// than one node, one of them is the synchronous standby, in PostgreSQL
// (sync_state) and in etcd (role sync_standby in GET /cluster).
//
// Errors: ctx ended first.
func (c *Cluster) WaitStreaming(ctx context.Context) error {
	err := testenv.Eventually(ctx, 0, 100*time.Millisecond, func() error {
		p, err := c.Primary(ctx)
		if err != nil {
			return err
		}
		var st struct {
			Replication []struct {
				Name      string `json:"application_name"`
				State     string `json:"state"`
				SyncState string `json:"sync_state"`
			} `json:"replication"`
		}
		if err := c.getJSON(ctx, c.nodes[p].APIURL()+"/patroni", &st); err != nil {
			return err
		}
		streaming, sync := map[string]bool{}, 0
		for _, r := range st.Replication {
			if r.State == "streaming" {
				streaming[r.Name] = true
			}
			if r.SyncState == "sync" {
				sync++
			}
		}
		running := 0
		for _, n := range c.nodes {
			if !n.Running() {
				continue
			}
			running++
			if n.idx != p && !streaming[n.Name()] {
				return fmt.Errorf("node %d does not stream from the primary, node %d (its replication: %+v)", n.idx, p, st.Replication)
			}
		}
		if running > 1 && sync == 0 {
			return fmt.Errorf("the primary, node %d, has no synchronous standby yet (%+v)", p, st.Replication)
		}
		if running > 1 {
			// The synchronous standby as etcd records it, which Patroni
			// promotes on a failover and asks for on a switchover.
			members, err := c.Members(ctx)
			if err != nil {
				return err
			}
			for _, m := range members {
				if m.Role == "sync_standby" && m.State == "running" {
					return nil
				}
			}
			return fmt.Errorf("GET /cluster names no running synchronous standby: %+v", members)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("patroni: waiting for the replicas to stream: %w; the logs:\n%s", err, c.Logs(20))
	}
	return nil
}

// Kill ends node i as a crashed host ends: its Patroni and its postmaster
// with SIGKILL. It returns once both are gone.
//
// Errors: the node is not running.
func (c *Cluster) Kill(i int) error {
	n := c.nodes[i]
	n.mu.Lock()
	p := n.proc
	n.proc = nil
	n.mu.Unlock()
	if p == nil {
		return fmt.Errorf("patroni: node %d is not running", i)
	}
	pid := n.postmasterPID()
	p.Kill()
	killPID(pid)
	return nil
}

// KillPrimary kills the primary (see Kill) and returns its index.
//
// Errors: there is no primary now.
func (c *Cluster) KillPrimary(ctx context.Context) (int, error) {
	p, err := c.Primary(ctx)
	if err != nil {
		return -1, err
	}
	return p, c.Kill(p)
}

// KillPostmaster ends only node i's postmaster, with SIGKILL, and returns
// once it is gone: its Patroni lives on, and on a primary hands the leader
// key on at once (primary_start_timeout 0), then brings its PostgreSQL
// back as a replica.
//
// Errors: the node's PostgreSQL is not running.
func (c *Cluster) KillPostmaster(i int) error {
	pid := c.nodes[i].postmasterPID()
	if pid <= 0 || !alive(pid) {
		return fmt.Errorf("patroni: node %d's postmaster is not running", i)
	}
	killPID(pid)
	return nil
}

// Restart starts node i's Patroni again after Kill and returns once it
// streams from the primary (see WaitStreaming).
//
// Errors: the node runs, the cluster was stopped, or it did not stream
// before ctx ended.
func (c *Cluster) Restart(ctx context.Context, i int) error {
	c.mu.Lock()
	stopped := c.stopped
	c.mu.Unlock()
	if stopped {
		return errors.New("patroni: the cluster was stopped")
	}
	began := time.Now()
	if err := c.nodes[i].launch(); err != nil {
		return err
	}
	if err := c.WaitStreaming(ctx); err != nil {
		return err
	}
	c.opts.Logf("patroni: node %d back and streaming in %v", i, time.Since(began).Round(10*time.Millisecond))
	return nil
}

// Switchover asks the primary's Patroni for a planned switchover (POST
// /switchover) to node candidate, or to the node Patroni picks when
// candidate is -1 (in synchronous mode only the synchronous standby may
// take over), and returns the new primary's index once it accepts writes.
// Patroni answers once the old primary has stopped and the new one is
// promoted; the old primary then follows it as a replica.
//
// Errors: there is no primary, Patroni refused (its answer is in the
// error), or no other node was the primary before ctx ended.
func (c *Cluster) Switchover(ctx context.Context, candidate int) (int, error) {
	p, err := c.Primary(ctx)
	if err != nil {
		return -1, err
	}
	body := map[string]string{"leader": c.nodes[p].Name()}
	if candidate >= 0 {
		body["candidate"] = c.nodes[candidate].Name()
	}
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.nodes[p].APIURL()+"/switchover", bytes.NewReader(b))
	if err != nil {
		return -1, err
	}
	req.Header.Set("Content-Type", "application/json")
	// The answer comes once the switchover is done: longer than a poll.
	res, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
	if err != nil {
		return -1, fmt.Errorf("patroni: POST /switchover to node %d: %w", p, err)
	}
	answer, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return -1, fmt.Errorf("patroni: POST /switchover %s to node %d: %s %s", b, p, res.Status, bytes.TrimSpace(answer))
	}
	c.opts.Logf("patroni: switchover from node %d: %s", p, bytes.TrimSpace(answer))
	return c.WaitPrimary(ctx, p)
}

// Stop kills every node (Patroni and postmaster) and etcd with SIGKILL and
// waits for them. It is safe to call more than once; the files stay in
// Dir.
func (c *Cluster) Stop() {
	c.mu.Lock()
	c.stopped = true
	c.mu.Unlock()
	for _, n := range c.nodes {
		_ = c.Kill(n.idx)
		// A postmaster a Kill left (none should) or that Patroni started
		// after it.
		killPID(n.postmasterPID())
	}
	if c.etcd != nil {
		c.etcd.Kill()
	}
}

// Logs returns the last lines of every node's log (Patroni's, with
// PostgreSQL's output) and of etcd's, each under a heading: what to show
// when a test fails.
func (c *Cluster) Logs(lines int) string {
	var b strings.Builder
	for _, n := range c.nodes {
		fmt.Fprintf(&b, "--- node %d (%s, REST API %s), %s:\n%s\n", n.idx, n.Addr(), n.APIURL(), n.LogPath(), n.LogTail(lines))
	}
	fmt.Fprintf(&b, "--- etcd (127.0.0.1:%d):\n%s\n", c.etcdPort, c.EtcdLog(min(lines, 10)))
	return b.String()
}

// EtcdLog returns the last lines of etcd's log.
func (c *Cluster) EtcdLog(lines int) string {
	return testenv.LogTail(filepath.Join(c.dir, "etcd.log"), lines)
}

func (c *Cluster) pgPorts() string {
	var ps []string
	for _, n := range c.nodes {
		ps = append(ps, strconv.Itoa(n.pgPort))
	}
	return strings.Join(ps, ",")
}

// getJSON GETs u and decodes its JSON answer into v, whatever its status
// (Patroni answers its health checks with 503 and the same body).
func (c *Cluster) getJSON(ctx context.Context, u string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	res, err := c.client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if err := json.NewDecoder(io.LimitReader(res.Body, 1<<20)).Decode(v); err != nil {
		return fmt.Errorf("GET %s: %s: %w", u, res.Status, err)
	}
	return nil
}

// Index returns the node's number in its cluster.
func (n *Node) Index() int { return n.idx }

// Name returns the node's name in Patroni: node0, node1, …
func (n *Node) Name() string { return "node" + strconv.Itoa(n.idx) }

// Addr returns the node's PostgreSQL address, 127.0.0.1:port.
func (n *Node) Addr() string { return "127.0.0.1:" + strconv.Itoa(n.pgPort) }

// APIAddr returns the address of the node's Patroni REST API, whose
// health checks (GET /primary, /replica, /health) a proxy can use.
func (n *Node) APIAddr() string { return "127.0.0.1:" + strconv.Itoa(n.apiPort) }

// APIURL returns http:// and APIAddr.
func (n *Node) APIURL() string { return "http://" + n.APIAddr() }

// DSN returns the URL of database db on this node alone, as root.
func (n *Node) DSN(db string) string {
	u := url.URL{Scheme: "postgres", User: url.User("root"), Host: n.Addr(), Path: "/" + db, RawQuery: "sslmode=disable"}
	return u.String()
}

// LogPath returns the path of the node's log: Patroni's, and PostgreSQL's
// output.
func (n *Node) LogPath() string { return filepath.Join(n.dir, "patroni.log") }

// LogTail returns the last lines of the node's log.
func (n *Node) LogTail(lines int) string { return testenv.LogTail(n.LogPath(), lines) }

// Running reports whether the node's Patroni runs.
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.proc != nil && !n.proc.Exited()
}

// isPrimary reports whether the node's Patroni answers GET /primary
// with 200.
func (n *Node) isPrimary(ctx context.Context) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.APIURL()+"/primary", nil)
	if err != nil {
		return false
	}
	res, err := n.c.client.Do(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 1<<20))
	res.Body.Close()
	return res.StatusCode == http.StatusOK
}

// writable returns nil when the node's PostgreSQL takes writes.
func (n *Node) writable(ctx context.Context) error {
	db, err := open(n.DSN("postgres"))
	if err != nil {
		return err
	}
	defer db.Close()
	qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var standby bool
	if err := db.QueryRowContext(qctx, "SELECT pg_is_in_recovery()").Scan(&standby); err != nil {
		return err
	}
	if standby {
		return fmt.Errorf("node %d is still in recovery", n.idx)
	}
	return nil
}

// postmasterPID reads the node's postmaster's pid from its data
// directory; 0 when there is none, or when that process is not a postgres
// of this data directory (the file outlives a killed postmaster, and its
// pid may since be another process's).
func (n *Node) postmasterPID() int {
	data := filepath.Join(n.dir, "data")
	b, err := os.ReadFile(filepath.Join(data, "postmaster.pid"))
	if err != nil {
		return 0
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, _ := strconv.Atoi(strings.TrimSpace(first))
	if pid <= 0 {
		return 0
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return 0
	}
	args := strings.Split(string(cmdline), "\x00")
	if !strings.HasSuffix(args[0], "postgres") || !slices.Contains(args, data) {
		return 0
	}
	return pid
}

// alive reports whether process pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// pid (comm) state …: the state follows the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// killPID sends SIGKILL to pid, a postmaster (not a child of ours: Patroni
// detaches it), and waits up to 10 seconds for it to be gone. pid ≤ 0 is
// nothing to kill.
func killPID(pid int) {
	if pid <= 0 || !alive(pid) {
		return
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	_ = testenv.Eventually(context.Background(), 10*time.Second, 10*time.Millisecond, func() error {
		if alive(pid) {
			return errors.New("alive")
		}
		return nil
	})
}

// prepare writes the node's configuration and creates its directory.
func (n *Node) prepare() error {
	if err := os.MkdirAll(n.dir, 0o750); err != nil {
		return fmt.Errorf("patroni: %w", err)
	}
	if err := os.WriteFile(n.configPath(), []byte(n.config()), 0o644); err != nil {
		return fmt.Errorf("patroni: %w", err)
	}
	f, err := os.OpenFile(n.LogPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("patroni: %w", err)
	}
	f.Close()
	return n.chown(n.dir, n.configPath(), n.LogPath())
}

func (n *Node) configPath() string { return filepath.Join(n.dir, "patroni.yml") }

// config is the node's Patroni configuration.
func (n *Node) config() string {
	c := n.c
	return fmt.Sprintf(`# Written by leafd's internal/testkit/patroni for a test cluster on loopback.
scope: leafd-test
namespace: /leafd-test/
name: %[1]s
log:
  level: INFO
restapi:
  listen: 127.0.0.1:%[2]d
  connect_address: 127.0.0.1:%[2]d
etcd3:
  hosts: 127.0.0.1:%[3]d
bootstrap:
  dcs:
    ttl: %[4]d
    loop_wait: %[5]d
    retry_timeout: %[6]d
    primary_start_timeout: 0
    synchronous_mode: true
    maximum_lag_on_failover: 1048576
    postgresql:
      use_pg_rewind: true
      use_slots: true
      parameters:
        wal_level: replica
        hot_standby: "on"
        wal_log_hints: "on"
        max_connections: 200
        max_wal_senders: 10
        max_replication_slots: 10
  initdb:
    - encoding: UTF8
    - no-sync
  pg_hba:
    - local all all trust
    - host all all 127.0.0.1/32 trust
    - host replication all 127.0.0.1/32 trust
postgresql:
  listen: 127.0.0.1:%[7]d
  connect_address: 127.0.0.1:%[7]d
  data_dir: %[8]s/data
  bin_dir: %[9]s
  pgpass: %[8]s/pgpass
  authentication:
    superuser:
      username: root
    replication:
      username: replicator
    rewind:
      username: root
  parameters:
    unix_socket_directories: %[8]s
    shared_buffers: 32MB
    # A test cluster on a shared machine: a process crash loses nothing
    # without fsync, only a crash of the machine would.
    fsync: "off"
`, n.Name(), n.apiPort, c.etcdPort, TTL, LoopWait, RetryTimeout, n.pgPort, n.dir, c.bin)
}

// launch starts the node's Patroni. It does not wait for it.
func (n *Node) launch() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proc != nil && !n.proc.Exited() {
		return fmt.Errorf("patroni: node %d is running", n.idx)
	}
	if f, err := os.OpenFile(n.LogPath(), os.O_WRONLY|os.O_APPEND, 0o644); err == nil {
		fmt.Fprintf(f, "--- leafd test: starting patroni at %s\n", time.Now().UTC().Format("2006-01-02T15:04:05.000000Z07:00"))
		f.Close()
	}
	// Patroni's output goes to its log file, not to a pipe of ours: the
	// postmaster it starts inherits it and outlives Patroni when only
	// Patroni is killed, and would hold a pipe open.
	p, err := testenv.Start(testenv.Config{Path: "/bin/sh", Name: fmt.Sprintf("patroni: node %d", n.idx), Dir: n.dir,
		Args: []string{"-c", `exec "$0" "$1" >>"$2" 2>&1`, PatroniPath, n.configPath(), n.LogPath()},
		Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8",
			"HOME=" + n.dir},
		User: user, Tail: 40, Group: true, DeathSignal: syscall.SIGKILL})
	if err != nil {
		return fmt.Errorf("patroni: node %d: %w", n.idx, err)
	}
	n.proc = p
	return nil
}

// chown gives paths to the user the nodes run as, when that is not us.
func (n *Node) chown(paths ...string) error {
	if n.c.uid < 0 {
		return nil
	}
	for _, p := range paths {
		if err := os.Chown(p, n.c.uid, n.c.gid); err != nil {
			return fmt.Errorf("patroni: %w", err)
		}
	}
	return nil
}
