// Package galera starts a real MariaDB Galera cluster on loopback, for
// tests of leafd on a multi-primary database: one mariadbd per node, each
// with its own data directory, configuration file, socket and ports, all
// bound to 127.0.0.1, replicating through Debian's galera-4 provider, with
// state transfers by rsync (Debian's rsync package).
//
// Node 0 is bootstrapped with --wsrep-new-cluster and the others join it
// over gcomm://127.0.0.1:p0,127.0.0.1:p1,…; Start returns once every node
// reports wsrep_local_state_comment = Synced and the full cluster size.
// Kill ends a node with SIGKILL, as a crashed host would; Restart brings it
// back into the running cluster, recovering its position first so that it
// catches up by incremental state transfer (IST) rather than copying the
// whole data directory. Root logs in over TCP with an empty password.
//
// Nothing here touches a MariaDB the system runs (127.0.0.1:3306): ports
// are picked free below the ephemeral range, and each node reads only the
// configuration file written for it (--defaults-file).
//
// Environment, for tests (see Require and MustStart):
//
//	LEAFD_TEST_REQUIRE_GALERA=1   fail, rather than skip, when galera-4,
//	                              rsync or MariaDB's server is not installed
package galera

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/leafd/leafd/internal/testkit/testenv"
)

// ProviderPath is where Debian's galera-4 package installs the wsrep
// provider.
const ProviderPath = "/usr/lib/galera/libgalera_smm.so"

// RequireEnv names the environment variable that turns a skip for want of
// Galera into a failure.
const RequireEnv = "LEAFD_TEST_REQUIRE_GALERA"

// The programs a cluster needs besides the provider: the server, its
// installer, and what a state transfer by rsync runs.
var programs = []string{"mariadbd", "mariadb-install-db", "rsync", "wsrep_sst_rsync"}

// Available reports whether a cluster can be started here: nil when the
// Galera provider and every program it needs are installed, otherwise an
// error that names what is missing and how to install it.
func Available() error {
	var missing []string
	if _, err := os.Stat(ProviderPath); err != nil {
		missing = append(missing, ProviderPath+" (package galera-4)")
	}
	for _, p := range programs {
		if _, err := lookPath(p); err != nil {
			missing = append(missing, p)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("galera: cannot start a cluster: missing %s; install them with apt-get install galera-4 rsync mariadb-server",
		strings.Join(missing, ", "))
}

// lookPath finds a program in PATH or in the sbin directories, which a
// user's PATH often lacks.
func lookPath(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, dir := range []string{"/usr/sbin", "/usr/bin", "/sbin", "/usr/local/sbin", "/usr/local/bin"} {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found", name)
}

// Require skips the test when a cluster cannot be started here, or fails
// it when LEAFD_TEST_REQUIRE_GALERA=1: asking for Galera and silently
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

// Options shape a cluster. The zero value is a 3-node cluster with
// Galera's default timeouts.
type Options struct {
	// Nodes is the number of nodes; 0 means 3.
	Nodes int
	// ProviderOptions are appended to wsrep_provider_options, separated by
	// semicolons ("evs.suspect_timeout=PT2S;evs.inactive_timeout=PT4S").
	// Empty keeps Galera's defaults, beyond the addresses and a 32 MB
	// gcache: a killed node then stalls the others' commits for about
	// evs.suspect_timeout (5 s) until it is evicted, as in production.
	ProviderOptions string
	// Logf, when set, is told how the cluster is doing (t.Logf, say).
	Logf func(format string, args ...any)
	// Standalone starts independent MariaDB servers instead: no Galera
	// (wsrep off), no replication, each with its own data. Kill and
	// Restart work the same; a restarted server recovers by itself.
	Standalone bool
}

// Cluster is a running Galera cluster. Its methods are safe for concurrent
// use. Stop ends it.
type Cluster struct {
	dir   string
	opts  Options
	uid   int // owner of the nodes' files, when run as root; -1 to leave them
	gid   int
	nodes []*Node

	mu      sync.Mutex
	stopped bool
}

// Node is one member of a Cluster.
type Node struct {
	c   *Cluster
	idx int
	dir string
	// port is the SQL port; gcomm the group communication port (4567 by
	// default), ist the incremental state transfer port, sst the rsync
	// daemon's port while the node receives a full state transfer.
	port, gcomm, ist, sst int

	mu   sync.Mutex
	proc *testenv.Process // nil while the node is down
}

// user is who the nodes run as when the test runs as root: rsync's daemon,
// which receives a state transfer, will not write as root into files it
// does not own.
const user = "mysql"

// Start creates a cluster of o.Nodes nodes in dir (created if needed; each
// node gets a subdirectory nodeI holding its data, my.cnf, socket and
// logs), bootstraps node 0, lets the others join, and returns once every
// node is synced. It takes about 10 seconds on two cores, most of it the
// joiners' rsync state transfers, which the donor serves one at a time.
//
// When run as root, the nodes run as the mysql user (rsync's daemon, which
// receives a state transfer, will not write as root into files it does not
// own): the node directories are given to that user and dir is made
// searchable (0755), so dir's parents must be searchable by it too (under
// /tmp, say).
//
// Every mariadbd is started in a process group of its own and gets SIGKILL
// if this process dies, so that a test that crashes leaves no server
// behind; call Stop all the same.
//
// Errors: Galera is not installed (see Available); root but no mysql
// user; a node did not start or sync before ctx ended (the error holds the
// end of its log). On error every node started is stopped.
func Start(ctx context.Context, dir string, o Options) (*Cluster, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	if o.Nodes == 0 {
		o.Nodes = 3
	}
	if o.Nodes < 1 {
		return nil, fmt.Errorf("galera: %d nodes", o.Nodes)
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	c := &Cluster{dir: dir, opts: o}
	var err error
	if c.uid, c.gid, err = testenv.UserIDs(user); err != nil {
		return nil, fmt.Errorf("galera: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("galera: %w", err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, fmt.Errorf("galera: %w", err)
	}
	ports, err := testenv.FreePorts(4 * o.Nodes)
	if err != nil {
		return nil, fmt.Errorf("galera: %w", err)
	}
	for i := range o.Nodes {
		n := &Node{c: c, idx: i, dir: filepath.Join(dir, fmt.Sprintf("node%d", i)),
			port: ports[4*i], gcomm: ports[4*i+1], ist: ports[4*i+2], sst: ports[4*i+3]}
		c.nodes = append(c.nodes, n)
	}
	for _, n := range c.nodes {
		if err := n.prepare(); err != nil {
			return nil, err
		}
	}
	began := time.Now()
	fail := func(err error) (*Cluster, error) {
		c.Stop()
		return nil, err
	}
	if o.Standalone {
		for _, n := range c.nodes {
			if err := n.install(ctx); err != nil {
				return fail(err)
			}
			if err := n.launch(); err != nil {
				return fail(err)
			}
		}
		for _, n := range c.nodes {
			if err := n.waitServing(ctx); err != nil {
				return fail(err)
			}
		}
		o.Logf("galera: %d standalone servers serving in %v (SQL ports %s; dir %s)", o.Nodes, time.Since(began).Round(10*time.Millisecond),
			c.sqlPorts(), dir)
		return c, nil
	}
	if err := c.nodes[0].install(ctx); err != nil {
		return fail(err)
	}
	// Node 0 alone first: a joiner that came up before the bootstrap
	// would find no primary component to join.
	if err := c.nodes[0].launch("--wsrep-new-cluster"); err != nil {
		return fail(err)
	}
	if err := c.nodes[0].waitSynced(ctx, 1); err != nil {
		return fail(err)
	}
	for _, n := range c.nodes[1:] {
		if err := n.launch(); err != nil {
			return fail(err)
		}
	}
	for _, n := range c.nodes {
		if err := n.waitSynced(ctx, o.Nodes); err != nil {
			return fail(err)
		}
	}
	o.Logf("galera: %d nodes synced in %v (SQL ports %s; dir %s)", o.Nodes, time.Since(began).Round(10*time.Millisecond),
		c.sqlPorts(), dir)
	return c, nil
}

// MustStart starts a cluster for tb in a new directory under the system's
// temporary directory (whose parents the mysql user can search, unlike
// tb.TempDir's), and stops it when the test ends. If the test failed, the
// end of every node's log is logged and the directory is kept; otherwise it
// is removed. It skips or fails tb as Require does when Galera is not
// installed, and fails tb when the cluster does not start within two
// minutes.
func MustStart(tb testing.TB, o Options) *Cluster {
	tb.Helper()
	Require(tb)
	if o.Logf == nil {
		o.Logf = tb.Logf
	}
	return testenv.MustStartIn(tb, "galera", 2*time.Minute,
		func(ctx context.Context, dir string) (*Cluster, error) { return Start(ctx, dir, o) },
		func(c *Cluster) string { return c.Logs(60) })
}

// Dir returns the directory that holds the nodes.
func (c *Cluster) Dir() string { return c.dir }

// Size returns the number of nodes, running or not.
func (c *Cluster) Size() int { return len(c.nodes) }

// Node returns node i, 0 ≤ i < Size.
func (c *Cluster) Node(i int) *Node { return c.nodes[i] }

// Kill ends node i with SIGKILL (its whole process group, so an rsync of a
// state transfer in progress goes too) and waits for it to exit: the crash
// of a database host. The others evict it after evs.suspect_timeout.
//
// Errors: the node is not running.
func (c *Cluster) Kill(i int) error { return c.nodes[i].kill() }

// Restart starts node i again after Kill and waits until it has rejoined
// the cluster and is synced (every running node then counts it). It first
// recovers the node's last committed position (mariadbd --wsrep-recover)
// and records it in grastate.dat, as Debian's galera_recovery does for
// systemd, so that the node catches up by IST from a donor's gcache; if
// that position cannot be found it falls back to a full rsync state
// transfer. Another node must be running: a whole cluster that went down
// is not bootstrapped again.
//
// Errors: the node is running, the cluster was stopped, or the node did not
// sync before ctx ended (the error holds the end of its log).
func (c *Cluster) Restart(ctx context.Context, i int) error {
	n := c.nodes[i]
	c.mu.Lock()
	stopped := c.stopped
	c.mu.Unlock()
	if stopped {
		return errors.New("galera: the cluster was stopped")
	}
	if n.Running() {
		return fmt.Errorf("galera: node %d is running", i)
	}
	began := time.Now()
	if c.opts.Standalone {
		if err := n.launch(); err != nil {
			return err
		}
		if err := n.waitServing(ctx); err != nil {
			return err
		}
		c.opts.Logf("galera: standalone server %d serving again in %v", i, time.Since(began).Round(10*time.Millisecond))
		return nil
	}
	how := "IST"
	if err := n.recoverPosition(ctx); err != nil {
		how = "SST"
		c.opts.Logf("galera: node %d: %v; it will rejoin by a full state transfer", i, err)
	}
	if err := n.launch(); err != nil {
		return err
	}
	if err := n.waitSynced(ctx, c.running()); err != nil {
		return err
	}
	c.opts.Logf("galera: node %d rejoined (%s) and synced in %v", i, how, time.Since(began).Round(10*time.Millisecond))
	return nil
}

// WaitSynced waits until every running node is synced and counts every
// running node in its cluster size.
//
// Errors: a node exited, or ctx ended first.
func (c *Cluster) WaitSynced(ctx context.Context) error {
	size := c.running()
	for _, n := range c.nodes {
		if n.Running() {
			if err := n.waitSynced(ctx, size); err != nil {
				return err
			}
		}
	}
	return nil
}

// running counts the nodes that run.
func (c *Cluster) running() int {
	k := 0
	for _, n := range c.nodes {
		if n.Running() {
			k++
		}
	}
	return k
}

// Stop kills every node with SIGKILL and waits for them. It is safe to call
// more than once; the files stay in Dir.
func (c *Cluster) Stop() {
	c.mu.Lock()
	c.stopped = true
	c.mu.Unlock()
	for _, n := range c.nodes {
		_ = n.kill()
	}
}

// Logs returns the last lines of every node's error log, each under a
// heading: what to show when a test fails.
func (c *Cluster) Logs(lines int) string {
	var b strings.Builder
	for _, n := range c.nodes {
		fmt.Fprintf(&b, "--- node %d (%s), %s:\n%s\n", n.idx, n.Addr(), n.ErrorLog(), n.LogTail(lines))
	}
	return b.String()
}

// Status sums status counters (wsrep_local_cert_failures, say) over the
// running nodes. A node's counters start again from zero when it restarts.
//
// Errors: a running node did not answer, or a value is not a number.
func (c *Cluster) Status(ctx context.Context, names ...string) (map[string]int64, error) {
	sum := map[string]int64{}
	for _, n := range c.nodes {
		if !n.Running() {
			continue
		}
		st, err := n.Status(ctx, names...)
		if err != nil {
			return nil, err
		}
		for k, v := range st {
			x, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("galera: node %d: %s = %q is not a number", n.idx, k, v)
			}
			sum[k] += x
		}
	}
	return sum, nil
}

func (c *Cluster) sqlPorts() string {
	var ps []string
	for _, n := range c.nodes {
		ps = append(ps, strconv.Itoa(n.port))
	}
	return strings.Join(ps, ",")
}

// Index returns the node's number in its cluster.
func (n *Node) Index() int { return n.idx }

// Addr returns the node's SQL address, 127.0.0.1:port.
func (n *Node) Addr() string { return "127.0.0.1:" + strconv.Itoa(n.port) }

// DSN returns the node's DSN for root, who has an empty password, in the
// format of github.com/go-sql-driver/mysql, naming database db ("" for
// none).
func (n *Node) DSN(db string) string { return "root@tcp(" + n.Addr() + ")/" + db }

// ErrorLog returns the path of the node's error log, which also holds the
// state transfer scripts' output.
func (n *Node) ErrorLog() string { return filepath.Join(n.dir, "error.log") }

// Running reports whether the node's mariadbd is running.
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.proc != nil
}

// Status returns the named global status variables of the node
// (wsrep_local_state_comment, say), as text.
//
// Errors: the node did not answer.
func (n *Node) Status(ctx context.Context, names ...string) (map[string]string, error) {
	db, err := n.open()
	if err != nil {
		return nil, err
	}
	defer db.Close()
	return status(ctx, db, names...)
}

func status(ctx context.Context, db *sql.DB, names ...string) (map[string]string, error) {
	out := map[string]string{}
	if len(names) == 0 {
		return out, nil
	}
	args := make([]any, len(names))
	for i, name := range names {
		args[i] = name
	}
	q := "SELECT VARIABLE_NAME, VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME IN (?" +
		strings.Repeat(",?", len(names)-1) + ")"
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, err
		}
		out[strings.ToLower(k)] = v
	}
	return out, rows.Err()
}

// open returns a handle on the node for root, with short timeouts, so that
// a node that hangs does not hold up a poll.
func (n *Node) open() (*sql.DB, error) {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr = "root", "tcp", n.Addr()
	cfg.Timeout, cfg.ReadTimeout, cfg.WriteTimeout = time.Second, 5*time.Second, 5*time.Second
	cfg.Logger = &mysql.NopLogger{}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(conn)
	db.SetMaxOpenConns(1)
	return db, nil
}

// LogTail returns the last lines of the node's error log.
func (n *Node) LogTail(lines int) string { return testenv.LogTail(n.ErrorLog(), lines) }

// prepare writes the node's configuration and creates its directories.
func (n *Node) prepare() error {
	for _, d := range []string{"data", "tmp"} {
		if err := os.MkdirAll(filepath.Join(n.dir, d), 0o750); err != nil {
			return fmt.Errorf("galera: %w", err)
		}
	}
	if err := os.WriteFile(n.cnf(), []byte(n.config()), 0o644); err != nil {
		return fmt.Errorf("galera: %w", err)
	}
	return n.chown(n.dir, filepath.Join(n.dir, "data"), filepath.Join(n.dir, "tmp"))
}

func (n *Node) cnf() string { return filepath.Join(n.dir, "my.cnf") }

// config is the node's my.cnf. mariadbd reads nothing else
// (--defaults-file), so the system's /etc/mysql, and the MariaDB it
// configures, play no part; the state transfer scripts are handed the same
// file.
func (n *Node) config() string {
	c := n.c
	var peers []string
	for _, m := range c.nodes {
		peers = append(peers, "127.0.0.1:"+strconv.Itoa(m.gcomm))
	}
	provider := fmt.Sprintf("gmcast.listen_addr=tcp://127.0.0.1:%d;ist.recv_addr=127.0.0.1:%d;gcache.size=32M", n.gcomm, n.ist)
	if c.opts.ProviderOptions != "" {
		provider += ";" + strings.Trim(c.opts.ProviderOptions, "; ")
	}
	d := n.dir
	base := fmt.Sprintf(`# Written by leafd's internal/testkit/galera for a test cluster on loopback.
[mysqld]
datadir=%[1]s/data
# Temporary tables of the node's own, not the shared /tmp: servers
# installed at once elsewhere on the machine must not meet them.
tmpdir=%[1]s/tmp
socket=%[1]s/mysqld.sock
pid-file=%[1]s/mysqld.pid
log-error=%[1]s/error.log
port=%[2]d
bind-address=127.0.0.1
skip-name-resolve
max_connections=500
# Small and quick: a test cluster on a shared machine. A process crash
# (kill -9) loses nothing with innodb_flush_log_at_trx_commit=2: the log is
# in the kernel's cache at COMMIT.
innodb_buffer_pool_size=48M
innodb_log_file_size=16M
innodb_flush_log_at_trx_commit=2
performance_schema=OFF
default_storage_engine=InnoDB
`, d, n.port)
	if c.opts.Standalone {
		return base
	}
	return base + fmt.Sprintf(`# What Galera requires.
binlog_format=ROW
innodb_autoinc_lock_mode=2
wsrep_on=ON
wsrep_provider=%[1]s
wsrep_cluster_name=leafd_test
wsrep_cluster_address=gcomm://%[2]s
wsrep_node_name=node%[3]d
wsrep_node_address=127.0.0.1:%[4]d
wsrep_node_incoming_address=127.0.0.1:%[5]d
wsrep_sst_method=rsync
wsrep_sst_receive_address=127.0.0.1:%[6]d
wsrep_provider_options=%[7]s
`, ProviderPath, strings.Join(peers, ","), n.idx, n.gcomm, n.port, n.sst, provider)
}

// install creates the system tables in the node's data directory, with a
// root that logs in with an empty password (not by unix socket, Debian's
// default), over TCP from 127.0.0.1.
func (n *Node) install(ctx context.Context) error {
	prog, err := lookPath("mariadb-install-db")
	if err != nil {
		return err
	}
	_, err = testenv.Run(ctx, testenv.Config{Path: prog, Env: n.env(), User: user, DeathSignal: syscall.SIGKILL,
		Args: []string{"--defaults-file=" + n.cnf(), "--auth-root-authentication-method=normal", "--skip-test-db"}})
	if err != nil {
		return fmt.Errorf("galera: node %d: %w", n.idx, err)
	}
	return nil
}

// env is the environment of the node's programs: a PATH that finds the
// state transfer scripts and rsync, and nothing of the test's.
func (n *Node) env() []string {
	return []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C"}
}

// launch starts mariadbd for the node with args beyond its my.cnf. It does
// not wait for the node to serve.
func (n *Node) launch(args ...string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proc != nil {
		return fmt.Errorf("galera: node %d is running", n.idx)
	}
	prog, err := lookPath("mariadbd")
	if err != nil {
		return err
	}
	// The output only gets what comes before the error log opens.
	p, err := testenv.Start(testenv.Config{Path: prog, Args: append([]string{"--defaults-file=" + n.cnf()}, args...),
		Name: fmt.Sprintf("galera: node %d", n.idx), Env: n.env(), User: user,
		LogFile: filepath.Join(n.dir, "mariadbd.out"), Tail: 40,
		Group: true, DeathSignal: syscall.SIGKILL})
	if err != nil {
		return err
	}
	n.proc = p
	return nil
}

// kill sends SIGKILL to the node's process group and waits for mariadbd.
func (n *Node) kill() error {
	n.mu.Lock()
	p := n.proc
	n.proc = nil
	n.mu.Unlock()
	if p == nil {
		return fmt.Errorf("galera: node %d is not running", n.idx)
	}
	p.Kill()
	return nil
}

// exited returns an error when the node's process has ended by itself.
func (n *Node) exited(what string) error {
	n.mu.Lock()
	p := n.proc
	n.mu.Unlock()
	how := "not running"
	if p != nil {
		if !p.Exited() {
			return nil
		}
		how = p.State().String()
	}
	return fmt.Errorf("galera: %s %d exited before it %s (%s); the end of its log:\n%s", n.kind(), n.idx, what, how, n.LogTail(40))
}

// kind names a node in errors.
func (n *Node) kind() string {
	if n.c.opts.Standalone {
		return "server"
	}
	return "node"
}

// waitSynced polls the node until it is Synced in a primary component of
// size nodes.
func (n *Node) waitSynced(ctx context.Context, size int) error {
	db, err := n.open()
	if err != nil {
		return err
	}
	defer db.Close()
	return n.poll(ctx, "synced", func() error {
		qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		st, err := status(qctx, db, "wsrep_local_state_comment", "wsrep_cluster_size", "wsrep_cluster_status", "wsrep_ready")
		if err != nil {
			return err
		}
		if st["wsrep_local_state_comment"] == "Synced" && st["wsrep_cluster_size"] == strconv.Itoa(size) &&
			st["wsrep_cluster_status"] == "Primary" && st["wsrep_ready"] == "ON" {
			return nil
		}
		return fmt.Errorf("%v", st)
	}, func(err error) error {
		return fmt.Errorf("galera: node %d not synced in a cluster of %d: %w; the end of its log:\n%s",
			n.idx, size, err, n.LogTail(40))
	})
}

// waitServing polls a standalone server until it answers a query.
func (n *Node) waitServing(ctx context.Context) error {
	db, err := n.open()
	if err != nil {
		return err
	}
	defer db.Close()
	return n.poll(ctx, "served", func() error {
		qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		return db.PingContext(qctx)
	}, func(err error) error {
		return fmt.Errorf("galera: server %d does not serve: %w; the end of its log:\n%s", n.idx, err, n.LogTail(40))
	})
}

// poll calls check every 100 ms until it returns nil, for as long as ctx
// lasts. When the node's process exits first it returns that at once,
// saying it exited before it did what; when ctx ends, what fail makes of
// check's last error.
func (n *Node) poll(ctx context.Context, what string, check func() error, fail func(error) error) error {
	var gone error
	err := testenv.Eventually(ctx, 0, 100*time.Millisecond, func() error {
		if gone = n.exited(what); gone != nil {
			return testenv.Final(gone)
		}
		return check()
	})
	if err == nil || gone != nil {
		return err
	}
	return fail(err)
}

// recoveredRE finds the position mariadbd --wsrep-recover logs.
var recoveredRE = regexp.MustCompile(`WSREP: Recovered position: ([0-9a-f-]{36}):(-?\d+)`)

// recoverPosition finds the last transaction the node committed and writes
// it to grastate.dat. A node killed while running leaves seqno -1 there,
// and would otherwise ask for a full state transfer, blocking its donor's
// writes while rsync copies the data directory.
func (n *Node) recoverPosition(ctx context.Context) error {
	prog, err := lookPath("mariadbd")
	if err != nil {
		return err
	}
	logPath := filepath.Join(n.dir, "recover.log")
	_ = os.Remove(logPath)
	if _, err := testenv.Run(ctx, testenv.Config{Path: prog, Name: "mariadbd --wsrep-recover", Env: n.env(), User: user,
		Args: []string{"--defaults-file=" + n.cnf(), "--wsrep-recover", "--log-error=" + logPath}, DeathSignal: syscall.SIGKILL}); err != nil {
		return err
	}
	f, err := os.Open(logPath)
	if err != nil {
		return err
	}
	defer f.Close()
	var uuid, seqno string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m := recoveredRE.FindStringSubmatch(sc.Text()); m != nil {
			uuid, seqno = m[1], m[2]
		}
	}
	if uuid == "" || seqno == "-1" || strings.Trim(uuid, "0-") == "" {
		return errors.New("mariadbd --wsrep-recover found no position")
	}
	state := fmt.Sprintf("# GALERA saved state\nversion: 2.1\nuuid:    %s\nseqno:   %s\nsafe_to_bootstrap: 0\n", uuid, seqno)
	path := filepath.Join(n.dir, "data", "grastate.dat")
	if err := os.WriteFile(path, []byte(state), 0o660); err != nil {
		return err
	}
	return n.chown(path)
}

// chown gives paths to the user the nodes run as, when that is not us.
func (n *Node) chown(paths ...string) error {
	if n.c.uid < 0 {
		return nil
	}
	for _, p := range paths {
		if err := os.Chown(p, n.c.uid, n.c.gid); err != nil {
			return fmt.Errorf("galera: %w", err)
		}
	}
	return nil
}
