package e2e

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leafd/leafd/internal/testkit/galera"
	"github.com/leafd/leafd/internal/testkit/haproxy"
	"github.com/leafd/leafd/internal/testkit/testenv"
)

// The HAProxy scenarios (7d, 7e) run leafd behind the most common
// production topology for Galera: Debian's HAProxy (internal/testkit/haproxy) in
// front of the suite's shared 3-node cluster, TCP mode, node 0 the active
// server and nodes 1 and 2 backups in that order, so that all writes go
// through one node at a time; TCP health checks every 500 ms, a node
// marked down after 2 failed ones and up after 2 good ones, every session
// through a node marked down cut, and every session through a backup cut
// when node 0 comes back. Every leafd is given the proxy's address as
// store.dsn and nothing else (no store.fallback_dsns): failover is the
// proxy's. A connection can be cut in the middle of a transaction, by the
// proxy or by its death; a range must be used only after its COMMIT
// succeeded. They run when the suite is on and both galera-4 and haproxy
// are installed, and fail rather than skip without them when
// LEAFD_TEST_REQUIRE_GALERA=1 and LEAFD_TEST_REQUIRE_HAPROXY=1.

// galeraBehindProxy skips or fails the test as galeraCluster and
// haproxy.Require do, and returns the shared cluster, every node synced,
// with a new HAProxy in front of it that the test stops when it ends.
func galeraBehindProxy(t *testing.T) (*galera.Cluster, *haproxy.Proxy) {
	t.Helper()
	enabled(t)
	haproxy.Require(t)
	gc := galeraCluster(t)
	var backends []string
	for i := range gc.Size() {
		backends = append(backends, gc.Node(i).Addr())
	}
	return gc, haproxy.MustStart(t, haproxy.Options{Backends: backends, Logf: t.Logf})
}

// proxyOptions gives every server the proxy's address, and only it, as
// store.dsn, and reads the final max_ids straight from node 1 with causal
// reads (wsrep_sync_wait), so that nothing committed on another node is
// missed.
func proxyOptions(gc *galera.Cluster, p *haproxy.Proxy, db string, env ...string) clusterOptions {
	return clusterOptions{
		servers:  gc.Size(),
		env:      env,
		database: gc.Node(1).DSN(db) + "?timeout=2s&wsrep_sync_wait=1",
		store: func(int) (string, []string) {
			return "root@tcp(" + p.Addr() + ")/" + db + "?timeout=2s", nil
		},
	}
}

// nodeBehind returns the node a new connection through the proxy reaches,
// asked with SELECT @@port.
func nodeBehind(gc *galera.Cluster, p *haproxy.Proxy) (int, error) {
	db, err := sql.Open("mysql", "root@tcp("+p.Addr()+")/?timeout=1s&readTimeout=2s")
	if err != nil {
		return -1, err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	var port int
	if err := db.QueryRowContext(ctx, "SELECT @@port").Scan(&port); err != nil {
		return -1, err
	}
	for i := range gc.Size() {
		if gc.Node(i).Addr() == "127.0.0.1:"+strconv.Itoa(port) {
			return i, nil
		}
	}
	return -1, fmt.Errorf("port %d is no node's", port)
}

// proxyServer returns what the proxy says of node i now.
func proxyServer(p *haproxy.Proxy, i int) (haproxy.Server, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	s, err := p.Servers(ctx)
	if err != nil {
		return haproxy.Server{}, err
	}
	return s[i], nil
}

// stretch is a named stretch of a scenario, for counting its failed
// requests.
type stretch struct {
	name     string
	from, to time.Time
}

// failedBy returns, for the note, how many requests failed in each stretch
// (those in flight in two are counted in both).
func (c *cluster) failedBy(stretches []stretch) string {
	var parts []string
	now := time.Now()
	for _, s := range stretches {
		to := s.to
		if to.IsZero() || to.After(now) {
			to = now
		}
		if to.Before(s.from) {
			to = s.from
		}
		w := window{s.from, to}
		n := len(c.outcomesOf(func(o *outcome) bool { return o.status != 200 && w.overlaps(o) }))
		parts = append(parts, fmt.Sprintf("%s (%v) %d", s.name, to.Sub(s.from).Round(10*time.Millisecond), n))
	}
	return strings.Join(parts, "; ")
}

// requestsFailed says how many of the scenario's requests failed, of how
// many, and how many of the failed ones were range leases.
func (c *cluster) requestsFailed() string {
	all := c.outcomesOf(func(*outcome) bool { return true })
	failed, ranges := 0, 0
	for _, o := range all {
		if o.status != 200 {
			failed++
			if strings.Contains(o.path, "/range?") {
				ranges++
			}
		}
	}
	return fmt.Sprintf("%d of %d requests failed (%.3f%%), %d of them range leases", failed, len(all),
		100*float64(failed)/float64(max(len(all), 1)), ranges)
}

// rangesLeased counts the ranges leased (answered 200), and those of them
// larger than carve: taken from the database directly, in a transaction of
// their own, when segment.max_step is 4 × carve.
func (c *cluster) rangesLeased(carve int) (ranges, direct int) {
	for _, o := range c.outcomesOf(func(o *outcome) bool { return o.status == 200 && strings.Contains(o.path, "/range?") }) {
		ranges++
		_, q, _ := strings.Cut(o.path, "size=")
		if n, err := strconv.Atoi(q); err == nil && n > carve {
			direct++
		}
	}
	return ranges, direct
}

func since(from, t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return t.Sub(from).Round(10 * time.Millisecond).String()
}

// Scenario 7d: the node HAProxy sends every connection to is killed with
// SIGKILL under load. Its connections die with it; HAProxy marks it down
// after two failed checks and sends new connections to the first backup,
// whose commits stall with the other survivor's until they evict the dead
// node (evs.suspect_timeout, about 6 s). Then the node is restarted and
// rejoins by IST; HAProxy marks it up again and cuts every session through
// the backup, so that the servers reconnect to it. Segment requests may
// fail (segment_unavailable) only from the kill until every server serves
// every tag again, and from the restart until every server serves again
// after the failback; snowflake (leases of 20 s) never. Ranges are leased
// too, all carved from the buffers (segment.max_step 20000 is at least four
// times the largest range): a range taken from the database directly
// waits for it up to the 10 s bound of one load, longer than the suite's
// bound on an answer, and the stall would read as a hang. The failures are
// counted by stretch.
func TestGaleraHAProxyNodeKilled(t *testing.T) {
	gc, p := galeraBehindProxy(t)
	db := galeraDB(t, gc)
	c := newCluster(t, "7d galera behind haproxy: active node kill -9, proxy failover, rejoin", proxyOptions(gc, p, db,
		// Ranges meant to last 3-6 s, as in 7b: shorter than the
		// survivors' stall, so that some requests fail, countably.
		"LEAFD_SEGMENT_SEED_TAGS=a:50 b:100 c:200 d:500", "LEAFD_SEGMENT_REFILL_MIN=3s", "LEAFD_SEGMENT_REFILL_MAX=6s",
		"LEAFD_SEGMENT_MAX_STEP=20000", "LEAFD_SNOWFLAKE_LEASE_TTL=20s"))
	var fault windows
	c.allowed = func(o *outcome) bool {
		return o.mode == modeSegment && o.code == "segment_unavailable" && fault.overlap(o)
	}
	c.startAll()
	l := c.startLoad(loadSpec{tags: galeraTags, snowflake: true, ranges: true})
	time.Sleep(prof.phase)

	victim, err := nodeBehind(gc, p)
	if err != nil {
		t.Fatalf("which node is behind the proxy: %v", err)
	}
	if victim != 0 {
		c.violate("connections through the proxy reach node %d, want node 0, its active server", victim)
	}
	killed := time.Now()
	if err := gc.Kill(victim); err != nil {
		t.Fatal(err)
	}
	// Watch, side by side, the proxy marking the node down and sending
	// new connections on, and the survivors evicting it.
	var markedDown, evicted time.Time
	next := -1
	if err := testenv.Eventually(t.Context(), 30*time.Second, 20*time.Millisecond, func() error {
		if markedDown.IsZero() {
			if s, err := proxyServer(p, victim); err == nil && !s.Up() {
				markedDown = time.Now()
			}
		}
		if evicted.IsZero() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			size, err := gc.Node((victim+1)%gc.Size()).Status(ctx, "wsrep_cluster_size")
			cancel()
			if err == nil && size["wsrep_cluster_size"] == strconv.Itoa(gc.Size()-1) {
				evicted = time.Now()
			}
		}
		if markedDown.IsZero() || evicted.IsZero() {
			return errors.New("waiting")
		}
		return nil
	}); err != nil {
		t.Fatalf("within 30s of killing node %d: the proxy marked it down after %s, the survivors evicted it after %s",
			victim, since(killed, markedDown), since(killed, evicted))
	}
	if next, err = nodeBehind(gc, p); err != nil || next == victim {
		c.violate("with node %d down, connections through the proxy reach node %d (%v)", victim, next, err)
	}
	recovered, err := c.allReady(30*time.Second, galeraTags, true)
	if err != nil {
		t.Fatalf("no recovery with node %d down: %v", victim, err)
	}
	fault.add(killed, recovered)
	c.note("node %d (the proxy's active server) killed; the proxy marked it down after %v and sent new connections to node %d; "+
		"the survivors evicted it after %v; every server served every tag again after %v",
		victim, since(killed, markedDown), next, since(killed, evicted), since(killed, recovered))
	time.Sleep(prof.phase) // load with the node down

	// The restart, watching for the proxy to mark the node up: as soon as
	// its port answers, which may be before it is synced.
	restarted := time.Now()
	upCh := make(chan time.Time, 1)
	watch, stopWatch := context.WithTimeout(context.Background(), 3*time.Minute)
	defer stopWatch()
	go func() {
		defer close(upCh)
		for watch.Err() == nil {
			if s, err := proxyServer(p, victim); err == nil && s.Up() {
				upCh <- time.Now()
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	err = gc.Restart(ctx, victim)
	cancel()
	if err != nil {
		t.Fatalf("node %d did not rejoin: %v", victim, err)
	}
	synced := time.Now()
	var markedUp time.Time
	select {
	case markedUp = <-upCh:
	case <-time.After(30 * time.Second):
	}
	stopWatch()
	if markedUp.IsZero() {
		c.violate("the proxy did not mark node %d up within 30s of its rejoining", victim)
	}
	back, err := nodeBehind(gc, p)
	if err != nil || back != victim {
		c.violate("after node %d rejoined, connections through the proxy reach node %d (%v), want node %d", victim, back, err, victim)
	}
	recoveredAgain, err := c.allReady(30*time.Second, galeraTags, true)
	if err != nil {
		t.Fatalf("no recovery after node %d rejoined: %v", victim, err)
	}
	fault.add(restarted, recoveredAgain)
	upAfter := "before it was synced"
	if !markedUp.Before(synced) {
		upAfter = fmt.Sprintf("%v after it was synced", markedUp.Sub(synced).Round(10*time.Millisecond))
	}
	c.note("node %d restarted, rejoined and synced after %v; the proxy marked it up %s and moved every session back to it; "+
		"every server served every tag again %v after the restart",
		victim, since(restarted, synced), upAfter, since(restarted, recoveredAgain))
	time.Sleep(prof.phase) // load with the node back
	l.Stop()

	stretches := []stretch{
		{"killed until marked down", killed, markedDown},
		{"marked down until evicted", markedDown, evicted},
		{"evicted until recovered", evicted, recovered},
		{"node down", recovered, restarted},
		{"restarted until synced", restarted, synced},
		{"synced until recovered", synced, recoveredAgain},
		{"after", recoveredAgain, time.Time{}},
	}
	if evicted.Before(markedDown) {
		stretches[0], stretches[1] = stretch{"killed until evicted", killed, evicted}, stretch{"evicted until marked down", evicted, markedDown}
		stretches[2].from = markedDown
	}
	ranges, _ := c.rangesLeased(20000 / 4)
	c.note("%d ranges leased, every one carved from a buffer; %s; by stretch: %s", ranges, c.requestsFailed(), c.failedBy(stretches))
	c.finish()
}

// Scenario 7e: HAProxy itself killed with SIGKILL under load, cutting
// every connection of every server at once, some in the middle of a
// transaction, and started again on the same port: at once, then after
// 1 s down (2 s in the long profile), in which every new connection is
// refused. Ranges are leased too, the larger ones taken from the database
// directly in transactions of their own (segment.max_step 5000), so that
// many transactions are in flight when the proxy dies. Segment requests
// may fail (segment_unavailable) only from the kill until every server
// serves every tag again; snowflake (leases of 20 s) never.
func TestGaleraHAProxyRestart(t *testing.T) {
	gc, p := galeraBehindProxy(t)
	db := galeraDB(t, gc)
	c := newCluster(t, "7e galera behind haproxy: haproxy kill -9 and restart", proxyOptions(gc, p, db,
		"LEAFD_SEGMENT_SEED_TAGS=a:50 b:100 c:200 d:500", "LEAFD_SEGMENT_REFILL_MIN=1s", "LEAFD_SEGMENT_REFILL_MAX=2s",
		"LEAFD_SEGMENT_MAX_STEP=5000", "LEAFD_SNOWFLAKE_LEASE_TTL=20s"))
	var fault windows
	c.allowed = func(o *outcome) bool {
		return o.mode == modeSegment && o.code == "segment_unavailable" && fault.overlap(o)
	}
	c.startAll()
	l := c.startLoad(loadSpec{tags: galeraTags, snowflake: true, ranges: true})
	time.Sleep(prof.phase)

	downs := []time.Duration{0, prof.shortOutage}
	if prof.name == "long" {
		downs = []time.Duration{0, prof.shortOutage, 0, prof.shortOutage, 0, prof.longOutage}
	}
	var rounds []string
	var stretches []stretch
	for i, down := range downs {
		loadErrs := c.total(loadErrorsMetric)
		killed := time.Now()
		if err := p.Kill(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(down)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := p.Restart(ctx)
		cancel()
		if err != nil {
			t.Fatalf("round %d: %v", i+1, err)
		}
		listening := time.Now()
		recovered, err := c.allReady(30*time.Second, galeraTags, true)
		if err != nil {
			t.Fatalf("round %d: no recovery after the proxy restarted: %v", i+1, err)
		}
		fault.add(killed, recovered)
		stretches = append(stretches, stretch{fmt.Sprintf("round %d", i+1), killed, recovered})
		rounds = append(rounds, fmt.Sprintf("round %d: down %v, listening again after %v, every server served every tag again after %v, %d range loads failed meanwhile",
			i+1, down, since(killed, listening), since(killed, recovered), c.total(loadErrorsMetric)-loadErrs))
		time.Sleep(prof.phase)
		stretches = append(stretches, stretch{fmt.Sprintf("after round %d", i+1), recovered, time.Now()})
	}
	l.Stop()
	behind, err := nodeBehind(gc, p)
	if err != nil || behind != 0 {
		c.violate("after the restarts, connections through the proxy reach node %d (%v), want node 0", behind, err)
	}
	ranges, direct := c.rangesLeased(5000 / 4)
	c.note("haproxy killed with kill -9 and restarted on its port, %d times; %s; %d ranges leased, %d of them from the database directly; "+
		"%s; by stretch: %s",
		len(downs), strings.Join(rounds, "; "), ranges, direct, c.requestsFailed(), c.failedBy(stretches))
	c.finish()
}
