package galera_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leafd/leafd/internal/testkit/testenv"

	"github.com/go-sql-driver/mysql"

	"github.com/leafd/leafd/internal/testkit/galera"
)

// open returns a handle on database db of node n; causal reads wait until
// the node has applied everything the cluster committed before them.
func open(t *testing.T, n *galera.Node, db string, causal bool) *sql.DB {
	t.Helper()
	dsn := n.DSN(db) + "?timeout=2s"
	if causal {
		dsn += "&wsrep_sync_wait=1"
	}
	h, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// One cluster for every case: starting it is the slow part.
func TestCluster(t *testing.T) {
	testenv.Slow(t)
	c := galera.MustStart(t, galera.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if c.Size() != 3 {
		t.Fatalf("Size = %d, want 3", c.Size())
	}
	n0 := open(t, c.Node(0), "", false)
	for _, q := range []string{
		"CREATE DATABASE g",
		"CREATE TABLE g.t (id INT PRIMARY KEY, v VARCHAR(32) NOT NULL) ENGINE=InnoDB",
		"INSERT INTO g.t VALUES (1, 'from node 0')",
	} {
		if _, err := n0.ExecContext(ctx, q); err != nil {
			t.Fatalf("node 0: %s: %v", q, err)
		}
	}

	t.Run("WriteOnOneReadOnAnother", func(t *testing.T) {
		var v string
		if err := open(t, c.Node(2), "g", true).QueryRowContext(ctx, "SELECT v FROM t WHERE id = 1").Scan(&v); err != nil {
			t.Fatalf("node 2: %v", err)
		}
		if v != "from node 0" {
			t.Fatalf("node 2 reads %q, want %q", v, "from node 0")
		}
	})

	// What leafd's store has to cope with: two transactions that change
	// one row on two nodes both run their statements, and the second to
	// commit is aborted with error 1213 (a brute-force abort by the first
	// one's write set, or a failed certification).
	t.Run("CertificationConflict", func(t *testing.T) {
		before, err := c.Status(ctx, "wsrep_local_cert_failures", "wsrep_local_bf_aborts")
		if err != nil {
			t.Fatal(err)
		}
		tx1, err := open(t, c.Node(1), "g", true).BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx1.Rollback()
		tx2, err := open(t, c.Node(2), "g", true).BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx2.Rollback()
		if _, err := tx1.ExecContext(ctx, "UPDATE t SET v = 'from node 1' WHERE id = 1"); err != nil {
			t.Fatal(err)
		}
		if _, err := tx2.ExecContext(ctx, "UPDATE t SET v = 'from node 2' WHERE id = 1"); err != nil {
			t.Fatal(err)
		}
		if err := tx1.Commit(); err != nil {
			t.Fatalf("node 1 commits first: %v", err)
		}
		commitErr := tx2.Commit()
		var me *mysql.MySQLError
		if !errors.As(commitErr, &me) || me.Number != 1213 {
			t.Fatalf("node 2 commits second: %v, want error 1213", commitErr)
		}
		after, err := c.Status(ctx, "wsrep_local_cert_failures", "wsrep_local_bf_aborts")
		if err != nil {
			t.Fatal(err)
		}
		conflicts := after["wsrep_local_cert_failures"] + after["wsrep_local_bf_aborts"] -
			before["wsrep_local_cert_failures"] - before["wsrep_local_bf_aborts"]
		if conflicts < 1 {
			t.Errorf("status counters moved by %d, want at least 1: before %v, after %v", conflicts, before, after)
		}
		t.Logf("node 2's commit: %v (counters summed over the nodes: %v)", commitErr, after)
	})

	t.Run("KillAndRejoin", func(t *testing.T) {
		if err := c.Kill(2); err != nil {
			t.Fatal(err)
		}
		if c.Node(2).Running() {
			t.Fatal("node 2 runs after Kill")
		}
		if err := c.Kill(2); err == nil {
			t.Error("a second Kill of node 2 succeeded")
		}
		// The survivors keep a primary component (2 of 3) and commit,
		// after a stall until node 2 is evicted.
		began := time.Now()
		if _, err := n0.ExecContext(ctx, "INSERT INTO g.t VALUES (2, 'while node 2 was down')"); err != nil {
			t.Fatalf("node 0 with node 2 down: %v", err)
		}
		t.Logf("the first commit after the kill took %v", time.Since(began).Round(10*time.Millisecond))
		if err := c.WaitSynced(ctx); err != nil {
			t.Fatalf("the survivors: %v", err)
		}
		if err := c.Restart(ctx, 2); err != nil {
			t.Fatal(err)
		}
		if err := c.Restart(ctx, 2); err == nil || !strings.Contains(err.Error(), "running") {
			t.Errorf("Restart of a running node: %v, want an error", err)
		}
		var v string
		if err := open(t, c.Node(2), "g", true).QueryRowContext(ctx, "SELECT v FROM t WHERE id = 2").Scan(&v); err != nil {
			t.Fatalf("node 2 after rejoining: %v", err)
		}
		if v != "while node 2 was down" {
			t.Fatalf("node 2 reads %q", v)
		}
		st, err := c.Node(0).Status(ctx, "wsrep_cluster_size")
		if err != nil {
			t.Fatal(err)
		}
		if st["wsrep_cluster_size"] != "3" {
			t.Fatalf("cluster size after the rejoin = %s, want 3", st["wsrep_cluster_size"])
		}
	})
}

// Standalone servers are independent: what one holds the other does not,
// and a server killed with SIGKILL comes back with what it committed.
func TestStandalone(t *testing.T) {
	testenv.Slow(t)
	c := galera.MustStart(t, galera.Options{Nodes: 2, Standalone: true})
	a, b := open(t, c.Node(0), "", false), open(t, c.Node(1), "", false)
	for _, q := range []string{"CREATE DATABASE s", "CREATE TABLE s.t (n INT)", "INSERT INTO s.t VALUES (7)"} {
		if _, err := a.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.Exec("SELECT n FROM s.t"); err == nil {
		t.Fatal("the second server holds the first one's table: they are not independent")
	}
	if err := c.Kill(0); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.Restart(ctx, 0); err != nil {
		t.Fatal(err)
	}
	a = open(t, c.Node(0), "", false)
	var n int
	if err := a.QueryRow("SELECT n FROM s.t").Scan(&n); err != nil || n != 7 {
		t.Fatalf("after kill -9 and restart: %d, %v; want 7", n, err)
	}
}
