package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leafd/leafd/internal/testkit/haproxy"
	"github.com/leafd/leafd/internal/testkit/patroni"
)

// Scenarios 12a and 12b: PostgreSQL under Patroni. Three servers over a
// real three-node Patroni cluster of the scenario's own
// (internal/testkit/patroni: etcd, synchronous mode, ttl 6 s, loop_wait
// 1 s, retry_timeout 2 s), reaching it as its users do. 12a gives each
// server one multi-host URL naming every node, with
// target_session_attrs=read-write, so that pgx connects to whichever node
// accepts writes. 12b gives each server the address of a real HAProxy
// (internal/testkit/haproxy) that checks every node with GET /primary on its
// Patroni REST API and sends connections to the one that answers 200.
// Under load (segment and snowflake):
//
//   - the primary killed with kill -9 (its Patroni and its postmaster, as
//     a host crash), the leader key expiring after ttl and the synchronous
//     standby promoted; then the killed node started again, rejoining as a
//     replica (pg_rewind);
//   - a planned switchover (Patroni's POST /switchover).
//
// Once each, or three times each in the long profile. Segment requests may
// fail, with segment_unavailable only, from a fault until every server
// serves every tag again; that stretch is bounded: a new primary within
// ttl + 4 loop_wait + 2 retry_timeout (14 s) of a kill, or the switchover's
// own time, and every server serving again within 15 s of it. Snowflake
// never fails: its 20 s lease outlasts the failover. No ID twice, no
// worker id held by two processes at once (the suite's ledger).
func TestPatroni(t *testing.T) {
	enabled(t)
	pc := patroni.MustStart(t, patroni.Options{Logf: t.Logf})
	runPatroni(t, pc, "12a Patroni, multi-host URL: primary kill -9, switchover",
		"multi-host URL with target_session_attrs=read-write", pc.DSN("leafd")+"&connect_timeout=2")
}

// TestPatroniBehindProxy is scenario 12b: scenario 12a with every server given
// an HAProxy's address only, HAProxy checking Patroni's GET /primary.
func TestPatroniBehindProxy(t *testing.T) {
	enabled(t)
	haproxy.Require(t)
	pc := patroni.MustStart(t, patroni.Options{Logf: t.Logf})
	var ports []int
	for i := range pc.Size() {
		_, port, _ := strings.Cut(pc.Node(i).APIAddr(), ":")
		p, err := strconv.Atoi(port)
		if err != nil {
			t.Fatal(err)
		}
		ports = append(ports, p)
	}
	p := haproxy.MustStart(t, haproxy.Options{Backends: pc.Addrs(), HTTPCheck: "/primary", CheckPorts: ports, Logf: t.Logf})
	runPatroni(t, pc, "12b Patroni behind HAProxy (GET /primary): primary kill -9, switchover",
		"HAProxy checking GET /primary every 500 ms, fall 2, rise 2",
		"postgres://root@"+p.Addr()+"/leafd?sslmode=disable&connect_timeout=2")
}

// runPatroni runs the scenario on pc, every server given dsn (over
// database leafd, created here), and describes the way in with how.
func runPatroni(t *testing.T, pc *patroni.Cluster, scenario, how, dsn string) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	if err := pc.CreateDatabase(ctx, "leafd"); err != nil {
		t.Fatal(err)
	}
	c := newCluster(t, scenario, clusterOptions{
		servers:  3,
		driver:   "postgres",
		database: pc.DSN("leafd"),
		store:    func(int) (string, []string) { return dsn, nil },
		env: []string{
			"LEAFD_SEGMENT_SEED_TAGS=a:20 b:100 c:500", "LEAFD_SEGMENT_REFILL_MIN=1s", "LEAFD_SEGMENT_REFILL_MAX=2s",
			"LEAFD_SEGMENT_MAX_STEP=5000", "LEAFD_SNOWFLAKE_LEASE_TTL=20s"},
	})
	var fault windows
	c.allowed = func(o *outcome) bool {
		return o.mode == modeSegment && o.code == "segment_unavailable" && fault.overlap(o)
	}
	c.startAll()
	if p, err := pc.Primary(ctx); err != nil {
		t.Fatal(err)
	} else {
		checkReached(c, pc, dsn, "at start", p)
	}
	l := c.startLoad(loadSpec{tags: segTags, snowflake: true})
	time.Sleep(prof.phase)

	electBound := time.Duration(patroni.TTL+4*patroni.LoopWait+2*patroni.RetryTimeout) * time.Second
	const recoverBound = 15 * time.Second
	cycles := 1
	if prof.name == "long" {
		cycles = 3
	}
	var stretches []stretch
	var events []string
	for i := range cycles {
		// kill -9 of the primary: its Patroni and its postmaster.
		killed := time.Now()
		victim, err := pc.KillPrimary(ctx)
		if err != nil {
			t.Fatal(err)
		}
		next, err := pc.WaitPrimary(ctx, victim)
		if err != nil {
			t.Fatalf("cycle %d: no new primary after node %d was killed: %v", i+1, victim, err)
		}
		elected := time.Now()
		if took := elected.Sub(killed); took > electBound {
			c.violate("cycle %d: node %d became the primary %v after node %d was killed, more than ttl + 4 loop_wait + 2 retry_timeout = %v",
				i+1, next, took.Round(10*time.Millisecond), victim, electBound)
		}
		recovered, err := c.allReady(recoverBound, segTags, true)
		if err != nil {
			t.Fatalf("cycle %d: no recovery within %v of node %d's promotion: %v", i+1, recoverBound, next, err)
		}
		fault.add(killed, recovered)
		checkReached(c, pc, dsn, fmt.Sprintf("after kill %d", i+1), next)
		stretches = append(stretches,
			stretch{fmt.Sprintf("kill %d: killed until recovered", i+1), killed, recovered},
			stretch{fmt.Sprintf("kill %d: of those, killed until promoted", i+1), killed, elected})
		events = append(events, fmt.Sprintf("kill %d: primary node %d killed, node %d promoted after %v, every server served every tag again after %v",
			i+1, victim, next, since(killed, elected), since(killed, recovered)))
		time.Sleep(prof.phase) // load on two nodes

		// The killed node back, as a replica: nothing may fail.
		restarted := time.Now()
		if err := pc.Restart(ctx, victim); err != nil {
			t.Fatalf("cycle %d: node %d did not come back: %v", i+1, victim, err)
		}
		streaming := time.Now()
		stretches = append(stretches, stretch{fmt.Sprintf("kill %d: node down, restarted until streaming", i+1), recovered, streaming})
		events = append(events, fmt.Sprintf("node %d streaming again %v after its restart", victim, since(restarted, streaming)))
		time.Sleep(prof.phase)

		// A planned switchover, to the synchronous standby.
		from := time.Now()
		before := next
		next, err = pc.Switchover(ctx, -1)
		if err != nil {
			t.Fatalf("cycle %d: switchover: %v", i+1, err)
		}
		switched := time.Now()
		recovered, err = c.allReady(recoverBound, segTags, true)
		if err != nil {
			t.Fatalf("cycle %d: no recovery within %v of the switchover to node %d: %v", i+1, recoverBound, next, err)
		}
		fault.add(from, recovered)
		checkReached(c, pc, dsn, fmt.Sprintf("after switchover %d", i+1), next)
		stretches = append(stretches,
			stretch{fmt.Sprintf("switchover %d: asked until recovered", i+1), from, recovered},
			stretch{fmt.Sprintf("switchover %d: of those, asked until done", i+1), from, switched})
		events = append(events, fmt.Sprintf("switchover %d from node %d to node %d done after %v, every server served every tag again after %v",
			i+1, before, next, since(from, switched), since(from, recovered)))
		if err := pc.WaitStreaming(ctx); err != nil {
			t.Fatal(err)
		}
		after := time.Now()
		time.Sleep(prof.phase)
		stretches = append(stretches, stretch{fmt.Sprintf("after switchover %d", i+1), recovered, after.Add(prof.phase)})
	}
	l.Stop()
	c.note("%s; %s", how, strings.Join(events, "; "))
	// A request in flight across the end of a stretch counts in the next
	// one too: the stretches of a fault are given whole.
	c.note("%s; by stretch: %s", c.requestsFailed(), c.failedBy(stretches))
	c.finish()
}

// patroniReached returns the node a new connection through dsn reaches,
// asked with inet_server_port().
func patroniReached(pc *patroni.Cluster, dsn string) (int, error) {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return -1, err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var port int
	if err := db.QueryRowContext(ctx, "SELECT inet_server_port()").Scan(&port); err != nil {
		return -1, err
	}
	for i := range pc.Size() {
		if pc.Node(i).Addr() == "127.0.0.1:"+strconv.Itoa(port) {
			return i, nil
		}
	}
	return -1, fmt.Errorf("port %d is no node's", port)
}

// checkReached records a violation unless a new connection through dsn
// reaches node want, the primary.
func checkReached(c *cluster, pc *patroni.Cluster, dsn, when string, want int) {
	if got, err := patroniReached(pc, dsn); err != nil || got != want {
		c.violate("%s: a new connection reaches node %d (%v), want the primary, node %d", when, got, err, want)
	}
}
