package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver, to read a PostgreSQL scenario's max_ids

	"github.com/leafd/leafd/internal/testkit/faultproxy"
	"github.com/leafd/leafd/internal/testkit/testdb"
	"github.com/leafd/leafd/internal/testkit/testenv"
)

// cluster is one scenario's world: a fresh database, leafd servers that
// each reach it through a proxy of their own, the load on them, and every
// ID and answer they gave.
type cluster struct {
	t        *testing.T
	scenario string
	dsn      string   // the database, directly
	driver   string   // store.driver
	shards   []string // store.shards, if the servers use them
	// maxBorrow is snowflake.max_borrow (clusterOptions).
	maxBorrow time.Duration
	env       []string // LEAFD_* settings shared by every server
	servers   []*server
	ledger    ledger

	// segWithin and sfWithin bound how long an answer may take: the
	// longest wait leafd allows itself (segment.wait_timeout; 2s for a
	// snowflake lease) plus a margin. Slower is a hang.
	segWithin, sfWithin time.Duration
	// allowed says whether a failed request is expected in the scenario;
	// failures on processes that were killed or stopped are judged apart.
	allowed func(o *outcome) bool

	// logDir holds every process's full log; it is removed when the
	// scenario passes and kept when it fails.
	logDir string

	mu         sync.Mutex
	procs      []*process
	outcomes   []outcome
	violations []string
	notes      []string
	ended      map[string]int64 // counters scraped from processes that have ended
	finished   bool
}

// server is one slot of the cluster: a proxy to the database and the leafd
// processes that ran in it, one after the other.
type server struct {
	c     *cluster
	idx   int
	proxy *faultproxy.Proxy // nil when the server's store is given (clusterOptions.store)
	dsn   string            // the database through the proxy, or as given
	env   []string          // LEAFD_* settings of this server alone
	// epochShift is how much later than the suite's snowflake.epoch this
	// server's is, in ms: its IDs' times are read with it.
	epochShift int64

	mu  sync.Mutex
	cur *process // serving: clients send to it; nil while down
}

// process is one run of leafd.
type process struct {
	*testenv.Process
	seq  int // index in cluster.procs
	srv  *server
	addr string // http://127.0.0.1:port

	mu      sync.Mutex
	races   int
	panics  int
	workers []int64 // worker ids it leased, in order
	// killed is set before SIGKILL, stopped before SIGTERM: the requests
	// they cut are judged apart.
	killed, stopped bool
	// late are the stretches in which its answers may come late, not
	// hung: it, or a server holding the lock of its SQLite file, was
	// stopped with SIGSTOP, or its database hung.
	late windows
}

// clusterOptions configure newCluster.
type clusterOptions struct {
	servers int      // default prof.servers
	env     []string // LEAFD_* settings on top of the defaults
	// waitTimeout is the segment.wait_timeout given to leafd, 1s by
	// default; answers must come within it (or snowflake's 2s) plus a
	// margin.
	waitTimeout time.Duration
	// database, when set, is the scenario's database (a DSN, read at the
	// end for every tag's max_id) instead of a fresh one from testdb, and
	// store gives each server its DSN and further LEAFD_* settings
	// (store.fallback_dsns, say): the servers then reach the database
	// directly, with no proxy, and faults are the database's own.
	database string
	store    func(i int) (dsn string, env []string)
	// driver is store.driver: "mysql" (the default) or "postgres". A
	// PostgreSQL scenario gives its database and store.
	driver string
	// shards, when set, are the databases of store.shards (the servers'
	// settings come from store): IDs are checked against their slots'
	// counters instead of leaf_alloc.
	shards []string
	// maxBorrow is snowflake.max_borrow: a snowflake ID's time may be this
	// far past the clock of the process that issued it.
	maxBorrow time.Duration
}

// newCluster makes a fresh database and one proxy per server (or takes the
// database and the servers' DSNs from o); start the servers with startAll or
// start.
func newCluster(t *testing.T, scenario string, o clusterOptions) *cluster {
	t.Helper()
	if o.servers == 0 {
		o.servers = prof.servers
	}
	if o.waitTimeout == 0 {
		o.waitTimeout = time.Second
	}
	if o.driver == "" {
		o.driver = "mysql"
	}
	if o.driver != "mysql" && (o.database == "" || o.store == nil) {
		t.Fatalf("a %s scenario gives its database and store", o.driver)
	}
	dsn := o.database
	if dsn == "" {
		dsn = testdb.MySQL(t)
	}
	var cfg *mysql.Config // the database's address, for the proxies
	if o.store == nil {
		var err error
		if cfg, err = mysql.ParseDSN(dsn); err != nil {
			t.Fatal(err)
		}
	}
	// margin: process scheduling on a small, loaded machine, more with the
	// race detector.
	margin := 1500 * time.Millisecond
	if raceBinary() {
		margin = 3 * time.Second
	}
	c := &cluster{
		t: t, scenario: scenario, dsn: dsn, driver: o.driver, shards: o.shards, maxBorrow: o.maxBorrow,
		env: append([]string{
			"LEAFD_HTTP_ADDR=127.0.0.1:0", "LEAFD_LOG_FORMAT=json", "LEAFD_STORE_DRIVER=" + o.driver,
			"LEAFD_SEGMENT_WAIT_TIMEOUT=" + o.waitTimeout.String(),
			"LEAFD_SEGMENT_TAG_REFRESH=1s", "LEAFD_HTTP_SHUTDOWN_TIMEOUT=10s",
			"LEAFD_SNOWFLAKE_MAX_BORROW=" + o.maxBorrow.String(),
		}, o.env...),
		segWithin: o.waitTimeout + margin,
		// The snowflake generator waits up to 2s for a lease, not settable.
		sfWithin: 2*time.Second + margin,
		allowed:  func(*outcome) bool { return false },
	}
	c.ledger.seg = map[string]*stamps{}
	c.ended = map[string]int64{}
	for i := range o.servers {
		if o.store != nil {
			s := &server{c: c, idx: i}
			s.dsn, s.env = o.store(i)
			c.servers = append(c.servers, s)
			continue
		}
		s := &server{c: c, idx: i, proxy: faultproxy.New(t, cfg.Addr)}
		sc := cfg.Clone()
		sc.Addr = s.proxy.Addr()
		sc.Timeout = 2 * time.Second
		s.dsn = sc.FormatDSN()
		c.servers = append(c.servers, s)
	}
	var err error
	c.logDir, err = os.MkdirTemp("", "leafd-e2e-logs-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.cleanup)
	return c
}

// startAll starts every server at once and waits until all are ready.
func (c *cluster) startAll() {
	c.t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, len(c.servers))
	for i, s := range c.servers {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = s.start() }()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			first, _, _ := strings.Cut(err.Error(), "\n")
			c.note("a server did not start: %s", first)
			c.t.Fatal(err)
		}
	}
}

// violate records a broken guarantee or expectation: the scenario fails.
func (c *cluster) violate(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	c.mu.Lock()
	c.violations = append(c.violations, msg)
	n := len(c.violations)
	c.mu.Unlock()
	if n <= 20 {
		c.t.Errorf("%s: %s", c.scenario, msg)
	} else if n == 21 {
		c.t.Errorf("%s: more violations follow; counting only", c.scenario)
	}
}

// note adds a remark to the scenario's row of the results table.
func (c *cluster) note(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	c.t.Log(msg)
	c.mu.Lock()
	c.notes = append(c.notes, msg)
	c.mu.Unlock()
}

func (c *cluster) serverEnv(s *server) []string {
	env := append([]string{"LEAFD_STORE_DSN=" + s.dsn}, c.env...)
	return testenv.Env(c.t.TempDir(), append(env, s.env...)...)
}

// start runs a new leafd process in s and makes it the one clients use
// once its /readyz answers 200, as a load balancer would.
func (s *server) start() error {
	p, err := s.launch()
	if err != nil {
		return err
	}
	if err := p.waitReady(30 * time.Second); err != nil {
		return err
	}
	s.mu.Lock()
	s.cur = p
	s.mu.Unlock()
	return nil
}

// launch starts a process and waits until it listens. Its whole log goes
// to a file in the scenario's logDir; the process keeps its head and tail.
func (s *server) launch() (*process, error) {
	c := s.c
	p := &process{srv: s}
	cfg := testenv.Config{Path: leafdBin, Dir: c.t.TempDir(), Env: c.serverEnv(s), Line: p.scan, Head: 100, Tail: 200}
	c.mu.Lock()
	if c.finished {
		c.mu.Unlock()
		return nil, errors.New("the scenario is over")
	}
	p.seq = len(c.procs)
	logFile, err := os.Create(filepath.Join(c.logDir, fmt.Sprintf("server%d-process%d.log", s.idx, p.seq)))
	if err != nil {
		c.mu.Unlock()
		return nil, err
	}
	cfg.Log = logFile
	if p.Process, err = testenv.Start(cfg); err != nil {
		c.mu.Unlock()
		logFile.Close()
		return nil, err
	}
	c.procs = append(c.procs, p)
	c.mu.Unlock()
	go func() {
		<-p.Done()
		logFile.Close()
	}()
	if p.addr, err = p.WaitServing(context.Background(), 30*time.Second); err != nil {
		return nil, fmt.Errorf("server %d: %w\n%s", s.idx, err, p.Output())
	}
	return p, nil
}

// current returns the process clients should use, nil while the server is
// down.
func (s *server) current() *process {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

// takeDown stops routing requests to the current process and returns it.
func (s *server) takeDown() *process {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.cur
	s.cur = nil
	return p
}

// kill sends SIGKILL to the current process mid-load and waits for it to
// die. Requests it was answering are cut.
func (s *server) kill() {
	p := s.takeDown()
	if p == nil {
		return
	}
	s.c.scrapeEnded(p)
	p.mu.Lock()
	p.killed = true
	p.mu.Unlock()
	p.Kill()
}

// stop sends SIGTERM to the current process and returns its exit code.
// Clients stop sending to it first; what it is answering must be answered.
func (s *server) stop() int {
	p := s.takeDown()
	if p == nil {
		return 0
	}
	s.c.scrapeEnded(p)
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	code, err := p.Stop(30 * time.Second)
	if err != nil {
		s.c.violate("server %d: %v", s.idx, err)
	}
	return code
}

// scan counts data races and panics in a line of the process's log and
// notes the worker ids it leases.
func (p *process) scan(line string) {
	var rec struct {
		Msg      string
		WorkerID *int64 `json:"worker_id"`
	}
	isJSON := json.Unmarshal([]byte(line), &rec) == nil
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case strings.Contains(line, "WARNING: DATA RACE"):
		p.races++
	case !isJSON && (strings.HasPrefix(line, "panic:") || strings.HasPrefix(line, "fatal error:")):
		p.panics++
	case isJSON && rec.Msg == "snowflake: leased worker id" && rec.WorkerID != nil:
		p.workers = append(p.workers, *rec.WorkerID)
	}
}

func (p *process) leased() []int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]int64(nil), p.workers...)
}

func (p *process) alive() bool { return !p.Exited() }

var probe = &http.Client{Timeout: 2 * time.Second}

// get fetches path from the process.
func (p *process) get(path string) (int, string, error) {
	res, err := probe.Get(p.addr + path)
	if err != nil {
		return 0, "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, string(b), err
}

// waitReady polls /readyz until it answers 200.
func (p *process) waitReady(within time.Duration) error {
	if err := p.WaitReady(context.Background(), probe, within); err != nil {
		return fmt.Errorf("server %d: %w\n%s", p.srv.idx, err, p.Output())
	}
	return nil
}

// metrics scrapes /metrics into series (name with labels) → value.
func (p *process) metrics() (map[string]float64, error) {
	code, body, err := p.get("/metrics")
	if err != nil {
		return nil, err
	}
	if code != 200 {
		return nil, fmt.Errorf("/metrics: %d", code)
	}
	m := map[string]float64{}
	for _, line := range strings.Split(body, "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			m[line[:i]] = v
		}
	}
	return m, nil
}

// sum adds the series of metric name (with any labels).
func sum(m map[string]float64, name string) float64 {
	var total float64
	for k, v := range m {
		if k == name || strings.HasPrefix(k, name+"{") {
			total += v
		}
	}
	return total
}

// Counters summed over every process of a scenario.
const (
	waitsMetric      = "leafd_segment_all_waits_total"
	loadsMetric      = "leafd_segment_all_range_loads_total"
	loadErrorsMetric = "leafd_segment_all_range_load_errors_total"
)

var counted = []string{waitsMetric, loadsMetric, loadErrorsMetric}

// scrapeEnded records the counters of a process about to end.
func (c *cluster) scrapeEnded(p *process) {
	m, err := p.metrics()
	if err != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, name := range counted {
		c.ended[name] += int64(sum(m, name))
	}
}

// total is counter name summed over every process of the scenario: those
// that ended, as last scraped, and those running now.
func (c *cluster) total(name string) int64 {
	c.mu.Lock()
	total := c.ended[name]
	c.mu.Unlock()
	for _, s := range c.servers {
		if p := s.current(); p != nil {
			if m, err := p.metrics(); err == nil {
				total += int64(sum(m, name))
			}
		}
	}
	return total
}

func (c *cluster) totalWaits() int64 { return c.total(waitsMetric) }

// allReady waits until every server's current process has recovered from
// a fault, and returns when that was: no tag has a failing load any more
// (a tag with IDs left in its buffer may still answer while its load
// waits out a backoff), /readyz answers 200, and every tag and snowflake
// serves.
func (c *cluster) allReady(within time.Duration, tags []string, snowflake bool) (time.Time, error) {
	deadline := time.Now().Add(within)
	for _, s := range c.servers {
		p := s.current()
		if p == nil {
			continue
		}
		if err := testenv.Eventually(context.Background(), time.Until(deadline), 50*time.Millisecond, func() error {
			st, err := p.state()
			if err != nil {
				return err
			}
			for _, tg := range st.Segment.Tags {
				if tg.Error != "" {
					return fmt.Errorf("tag %q still failing to load", tg.Tag)
				}
			}
			return nil
		}); err != nil {
			return time.Time{}, fmt.Errorf("server %d: %w (waited %v in all)", s.idx, err, within)
		}
		paths := []string{"/readyz"}
		for _, tag := range tags {
			paths = append(paths, "/segment/"+tag)
		}
		if snowflake {
			paths = append(paths, "/snowflake")
		}
		for _, path := range paths {
			if err := testenv.Eventually(context.Background(), time.Until(deadline), 50*time.Millisecond, func() error {
				code, body, err := p.get(path)
				if code != 200 {
					return fmt.Errorf("GET %s = %d %q %v", path, code, body, err)
				}
				if path != "/readyz" {
					c.record(p, path, body) // IDs handed out are IDs to check
				}
				return nil
			}); err != nil {
				return time.Time{}, fmt.Errorf("server %d: %w (waited %v in all)", s.idx, err, within)
			}
		}
	}
	return time.Now(), nil
}

// maxIDs reads the final max_id of every tag: the first ID no server was
// handed.
func (c *cluster) maxIDs() (map[string]int64, error) {
	if c.shards != nil {
		return c.shardMaxIDs()
	}
	return readMaxIDs(c.driver, c.dsn, "SELECT biz_tag, max_id FROM leaf_alloc")
}

// shardMaxIDs is maxIDs over store.shards: every slot's counter is the
// next ID of its slot, so the largest of them bounds every ID handed out.
func (c *cluster) shardMaxIDs() (map[string]int64, error) {
	out := map[string]int64{}
	for _, dsn := range c.shards {
		m, err := readMaxIDs(c.driver, dsn, "SELECT biz_tag, MAX(max_id) FROM leafd_slot_alloc GROUP BY biz_tag")
		if err != nil {
			return nil, err
		}
		for tag, v := range m {
			out[tag] = max(out[tag], v)
		}
	}
	return out, nil
}

// readMaxIDs runs query, which answers tag and max_id rows, on dsn.
func readMaxIDs(driver, dsn, query string) (map[string]int64, error) {
	db, err := sql.Open(testdb.SQLDriver(driver), dsn)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rows, err := db.QueryContext(ctx, query)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var tag string
		var max int64
		if err := rows.Scan(&tag, &max); err != nil {
			return nil, err
		}
		out[tag] = max
	}
	return out, rows.Err()
}

// finish stops every server with SIGTERM (each must exit 0), then checks
// every ID and answer of the scenario. The scenario's row is added when
// the test ends, with the verdict.
func (c *cluster) finish() {
	c.t.Helper()
	if errs := c.total(loadErrorsMetric); errs > 0 {
		c.note("%d failed range loads, retried", errs)
	}
	for _, s := range c.servers {
		p := s.takeDown()
		if p == nil {
			continue
		}
		c.scrapeEnded(p)
		p.mu.Lock()
		p.stopped = true
		p.mu.Unlock()
		if code, err := p.Stop(30 * time.Second); err != nil {
			c.violate("server %d: %v", s.idx, err)
		} else if code != 0 {
			c.violate("server %d: exit %d after SIGTERM, want 0", s.idx, code)
		}
	}
	maxIDs, err := c.maxIDs()
	if err != nil {
		c.t.Fatalf("reading leaf_alloc: %v", err)
	}
	c.checkIDs(maxIDs)
	c.checkOutcomes()
}

// cleanup kills what still runs, checks every log for data races and
// panics, and adds the scenario's row to the results table.
func (c *cluster) cleanup() {
	c.mu.Lock()
	c.finished = true
	procs := append([]*process(nil), c.procs...)
	c.mu.Unlock()
	for _, p := range procs {
		p.Kill()
		p.mu.Lock()
		races, panics := p.races, p.panics
		p.mu.Unlock()
		if races > 0 || panics > 0 {
			c.violate("server %d (process %d): %d data races and %d panics in its log", p.srv.idx, p.seq, races, panics)
		}
		if c.t.Failed() {
			c.t.Logf("server %d, process %d (pid %d) log, head and tail:\n%s", p.srv.idx, p.seq, p.Pid(), p.Output())
		}
	}
	if c.t.Failed() {
		c.t.Logf("every process's full log is kept in %s", c.logDir)
	} else {
		os.RemoveAll(c.logDir)
	}
	var r row
	r.scenario = c.scenario
	c.mu.Lock()
	r.waits = c.ended[waitsMetric]
	for i := range c.outcomes {
		o := &c.outcomes[i]
		r.ids += int64(o.ids)
		if o.status != 200 {
			r.failed++
		}
		if o.status != 0 && o.took > r.maxLatency {
			r.maxLatency = o.took
		}
	}
	byMode := map[string]time.Duration{}
	for i := range c.outcomes {
		if o := &c.outcomes[i]; o.status != 0 {
			byMode[o.mode] = max(byMode[o.mode], o.took)
		}
	}
	notes := slices.Clone(c.notes)
	if len(byMode) > 1 {
		notes = append(notes, fmt.Sprintf("max latency segment %v, snowflake %v",
			byMode[modeSegment].Round(time.Millisecond), byMode[modeSnowflake].Round(time.Millisecond)))
	}
	// A failed row says why, not only that.
	if n := len(c.violations); n > 0 {
		first := c.violations[0]
		if len(first) > 200 {
			first = first[:200] + "…"
		}
		notes = append(notes, fmt.Sprintf("**%d violations**, the first: %s", n, first))
	}
	r.notes = strings.Join(notes, "; ")
	c.mu.Unlock()
	r.verdict = "PASS"
	if c.t.Failed() {
		r.verdict = "**FAIL**"
	}
	c.t.Logf("%s: %d IDs, %d failed requests, %d waits, max latency %v, %s",
		r.scenario, r.ids, r.failed, r.waits, r.maxLatency.Round(time.Millisecond), r.verdict)
	addRow(r)
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
