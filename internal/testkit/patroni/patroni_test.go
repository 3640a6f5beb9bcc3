package patroni_test

import (
	"context"
	"database/sql"
	"strconv"
	"testing"
	"time"

	"github.com/leafd/leafd/internal/testkit/testenv"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/leafd/leafd/internal/testkit/patroni"
)

// One cluster for every step: starting it is the slow part. Each step
// checks that a row committed through the multi-host URL before a change
// of primary is there after it, and that the URL reaches the new primary.
func TestCluster(t *testing.T) {
	testenv.Slow(t)
	c := patroni.MustStart(t, patroni.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if c.Size() != 3 {
		t.Fatalf("Size = %d, want 3", c.Size())
	}
	first, err := c.Primary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	members, err := c.Members(ctx)
	if err != nil {
		t.Fatal(err)
	}
	leaders := 0
	for _, m := range members {
		if m.Role == "leader" {
			leaders++
			if m.Name != c.Node(first).Name() {
				t.Errorf("GET /cluster names %s the leader, GET /primary node %d", m.Name, first)
			}
		}
	}
	if len(members) != 3 || leaders != 1 {
		t.Fatalf("GET /cluster: %+v; want 3 members, one leader", members)
	}
	if err := c.CreateDatabase(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("pgx", c.DSN("p")+"&connect_timeout=2")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxIdleConns(0) // a new connection each time: each finds the primary anew
	if _, err := db.ExecContext(ctx, "CREATE TABLE t (n BIGINT PRIMARY KEY, port INT NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	n := 0
	// write inserts a row through the multi-host URL and checks that it
	// reached node want, and that every row written before is there.
	write := func(step string, want int) {
		t.Helper()
		n++
		var port, count int
		if err := db.QueryRowContext(ctx, "INSERT INTO t VALUES ($1, inet_server_port()) RETURNING port", n).Scan(&port); err != nil {
			t.Fatalf("%s: INSERT through %s: %v", step, c.DSN("p"), err)
		}
		if got := "127.0.0.1:" + strconv.Itoa(port); got != c.Node(want).Addr() {
			// On a loaded machine Patroni may have failed over by
			// itself since: the URL must reach the primary of now.
			if now, err := c.Primary(ctx); err != nil || c.Node(now).Addr() != got {
				t.Errorf("%s: the multi-host URL reached %s, want the primary node %d (%s)", step, got, want, c.Node(want).Addr())
			} else {
				t.Logf("%s: node %d became the primary by itself since", step, now)
			}
		}
		if err := db.QueryRowContext(ctx, "SELECT count(*) FROM t").Scan(&count); err != nil {
			t.Fatal(err)
		}
		if count != n {
			t.Fatalf("%s: %d rows, want %d: a committed row was lost", step, count, n)
		}
	}
	write("at start", first)

	began := time.Now()
	second, err := c.Switchover(ctx, -1)
	if err != nil {
		t.Fatal(err)
	}
	if second == first {
		t.Fatalf("after the switchover node %d is still the primary", first)
	}
	t.Logf("switchover from node %d to node %d in %v", first, second, time.Since(began).Round(10*time.Millisecond))
	write("after the switchover", second)
	if err := c.WaitStreaming(ctx); err != nil {
		t.Fatal(err)
	}

	began = time.Now()
	killed, err := c.KillPrimary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if killed != second {
		t.Fatalf("KillPrimary killed node %d, the primary was node %d", killed, second)
	}
	if c.Node(killed).Running() {
		t.Fatalf("node %d runs after Kill", killed)
	}
	third, err := c.WaitPrimary(ctx, killed)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(began)
	t.Logf("node %d killed (patroni and postmaster, kill -9); node %d the primary after %v", killed, third, took.Round(10*time.Millisecond))
	// The leader key expires after ttl; the survivors then take a loop or
	// two to elect and promote.
	if bound := time.Duration(patroni.TTL+4*patroni.LoopWait+2*patroni.RetryTimeout) * time.Second; took > bound {
		t.Errorf("the failover took %v, more than ttl + 4 loop_wait + 2 retry_timeout = %v", took, bound)
	}
	write("after the kill", third)
	if err := c.Restart(ctx, killed); err != nil {
		t.Fatal(err)
	}
	if p, err := c.Primary(ctx); err != nil || p != third {
		t.Fatalf("after node %d came back: primary %d (%v), want node %d", killed, p, err, third)
	}

	began = time.Now()
	if err := c.KillPostmaster(third); err != nil {
		t.Fatal(err)
	}
	fourth, err := c.WaitPrimary(ctx, third)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("node %d's postmaster killed (kill -9), its patroni alive; node %d the primary after %v", third, fourth,
		time.Since(began).Round(10*time.Millisecond))
	write("after the postmaster's kill", fourth)
	if err := c.WaitStreaming(ctx); err != nil {
		t.Fatal(err)
	}
}
