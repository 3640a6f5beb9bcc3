package mysql_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/leafd/leafd/internal/testkit/testenv"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/internal/testkit/galera"
	"github.com/leafd/leafd/segment"
	"github.com/leafd/leafd/store"
	"github.com/leafd/leafd/store/storetest"
)

// These tests run the MySQL store against a real three-node MariaDB
// Galera cluster on loopback (internal/testkit/galera): every node accepts writes,
// and two transactions on the same row through different nodes conflict
// at COMMIT, where one of them fails with 1213 after its UPDATE and SELECT
// had succeeded. They skip when Galera is not installed, unless
// LEAFD_TEST_REQUIRE_GALERA=1.
func TestGalera(t *testing.T) {
	testenv.Slow(t)
	if testing.Short() {
		t.Skip("starts a Galera cluster")
	}
	// A killed node is evicted after 2-4 s instead of Galera's 5-15 s.
	c := galera.MustStart(t, galera.Options{ProviderOptions: "evs.suspect_timeout=PT2S;evs.inactive_timeout=PT4S;evs.keepalive_period=PT0.5S;evs.inactive_check_period=PT0.5S"})
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))

	// newDatabase makes a database on the cluster with one tag of the
	// given step, and returns its name.
	dbs := 0
	newDatabase := func(t *testing.T, step int64) string {
		t.Helper()
		dbs++
		name := fmt.Sprintf("leaf%d", dbs)
		raw := openGaleraRaw(t, c.Node(0), "")
		if _, err := raw.Exec("CREATE DATABASE " + name); err != nil {
			t.Fatal(err)
		}
		s, err := store.Open("mysql", c.Node(0).DSN(name), store.WithLogger(quiet))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if err := s.Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
		if _, err := s.CreateTag(context.Background(), leafd.Tag{Name: "t", MaxID: 1, Step: step}); err != nil {
			t.Fatal(err)
		}
		// Galera applies a commit on the other nodes after it certified
		// it: under load a node may not have the row for a moment, and an
		// Allocate there answers unknown_tag. Wait until every node has
		// applied it (a read with wsrep_sync_wait waits for that).
		for i := range c.Size() {
			maxID(t, c.Node(i), name)
		}
		return name
	}
	openStore := func(t *testing.T, db string, nodes ...int) store.Store {
		t.Helper()
		var fallbacks []string
		for _, n := range nodes[1:] {
			fallbacks = append(fallbacks, c.Node(n).DSN(db))
		}
		s, err := store.Open("mysql", c.Node(nodes[0]).DSN(db), store.WithFallbacks(fallbacks...), store.WithLogger(quiet))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}

	// hammer runs 4 allocating goroutines per store for d and returns the
	// ranges, sorted, with the store each came from and the failed calls.
	type got struct {
		segment.Allocation
		store int
	}
	hammer := func(t *testing.T, stores []store.Store, step int64, d time.Duration) (ranges []got, failed int) {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		var (
			mu sync.Mutex
			wg sync.WaitGroup
		)
		for i, s := range stores {
			for range 4 {
				wg.Go(func() {
					for ctx.Err() == nil {
						a, err := s.Allocate(ctx, "t", step)
						mu.Lock()
						switch {
						case err == nil:
							ranges = append(ranges, got{a, i})
						case ctx.Err() == nil:
							failed++
							if code := leafd.ErrorCode(err); code != leafd.EStoreUnavailable {
								t.Errorf("Allocate: %v (code %q), want a range or store_unavailable", err, code)
							}
						}
						mu.Unlock()
					}
				})
			}
		}
		wg.Wait()
		slices.SortFunc(ranges, func(a, b got) int { return int(a.Start - b.Start) })
		return ranges, failed
	}
	// duplicates returns the ranges handed out more than once.
	duplicates := func(ranges []got) (dups []string) {
		for i := 1; i < len(ranges); i++ {
			if ranges[i].Start < ranges[i-1].End {
				dups = append(dups, fmt.Sprintf("[%d, %d) through nodes %d and %d",
					ranges[i].Start, ranges[i].End, ranges[i-1].store, ranges[i].store))
			}
		}
		return dups
	}

	// tiled checks that the ranges, sorted, cover [1, max_id) with no
	// overlap and no gap: no range was handed out twice, and every range
	// the cluster committed was returned to the server that took it.
	tiled := func(t *testing.T, db string, ranges []got) {
		t.Helper()
		if dups := duplicates(ranges); len(dups) > 0 {
			t.Fatalf("%d ranges handed out twice, the first %s", len(dups), dups[0])
		}
		next := int64(1)
		for _, r := range ranges {
			if r.Start != next {
				t.Fatalf("range %+v where one from %d was expected: a committed range was not returned", r, next)
			}
			next = r.End
		}
		if max := maxID(t, c.Node(1), db); max != next {
			t.Fatalf("max_id is %d, but the ranges returned end at %d", max, next)
		}
	}

	// Three servers, each through a node of its own, take ranges of one
	// tag as fast as they can: the cluster aborts thousands of their
	// transactions, many at COMMIT after the UPDATE and SELECT ran; the
	// store retries them, and the ranges it returns never overlap. (With
	// server-side prepared statements, the driver's default, about one
	// range in 60 was handed out twice here: see mysqlConnector.)
	t.Run("ConflictsAtCommit", func(t *testing.T) {
		db := newDatabase(t, 5)
		before := conflicts(t, c)
		var stores []store.Store
		for n := range 3 {
			stores = append(stores, openStore(t, db, n))
		}
		ranges, failed := hammer(t, stores, 5, 4*time.Second)
		tiled(t, db, ranges)
		n := conflicts(t, c) - before
		t.Logf("%d ranges through 3 nodes, %d certification conflicts and aborts, %d calls gave up after %d attempts (store_unavailable)",
			len(ranges), n, failed, 5)
		if len(ranges) < 100 {
			t.Fatalf("only %d ranges", len(ranges))
		}
		if n == 0 {
			t.Fatal("no certification conflict happened: the test did not exercise what it is for")
		}
	})

	// A dated tag's windows through three nodes at once: the last range of
	// a period is clipped at its limit while the cluster aborts
	// transactions, no range leaves its window or comes twice, every
	// number of the first period is handed out, and the next period starts
	// at its first number.
	t.Run("DatedWindows", func(t *testing.T) {
		db := newDatabase(t, 5)
		var stores []store.Store
		for n := range 3 {
			stores = append(stores, openStore(t, db, n))
		}
		if _, err := stores[0].CreateTag(context.Background(), leafd.Tag{Name: "d", MaxID: 1, Step: 7,
			Format: segment.FormatDated, Period: segment.PeriodDay, Digits: 3}); err != nil {
			t.Fatal(err)
		}
		days := []segment.Window{{Floor: 20261127001, Limit: 20261128000}, {Floor: 20261128001, Limit: 20261129000}}
		var (
			mu      sync.Mutex
			wg      sync.WaitGroup
			ranges  [2][]segment.Allocation
			day     int // the day the servers ask for: 1 once the first is full
			full    int // goroutines that found the second day full
			ctx, cn = context.WithTimeout(context.Background(), 20*time.Second)
		)
		defer cn()
		for _, s := range stores {
			for range 4 {
				wg.Go(func() {
					for ctx.Err() == nil {
						mu.Lock()
						d := day
						mu.Unlock()
						a, err := s.AllocateIn(ctx, "d", 7, func(time.Time) (segment.Window, error) { return days[d], nil })
						mu.Lock()
						switch code := leafd.ErrorCode(err); {
						case err == nil:
							ranges[d] = append(ranges[d], a)
						case code == leafd.EPeriodExhausted && d == 0:
							day = 1
						case code == leafd.EPeriodExhausted:
							if full++; full == 12 {
								cn()
							}
						case errors.Is(err, segment.ErrLaterPeriod) && d == 0:
							// Asked for the first day after another server
							// took numbers of the second.
						case code == leafd.EUnknownTag, code == leafd.EStoreUnavailable:
							// The tag not applied on this node yet, or a
							// conflict retried past the attempts.
						default:
							t.Errorf("AllocateIn: %v (code %q)", err, code)
						}
						mu.Unlock()
					}
				})
			}
		}
		wg.Wait()
		if full < 12 {
			t.Fatalf("the second day did not fill within 20 s: %d, %d ranges", len(ranges[0]), len(ranges[1]))
		}
		for i, rs := range ranges {
			slices.SortFunc(rs, func(a, b segment.Allocation) int { return int(a.Start - b.Start) })
			next := days[i].Floor
			for _, r := range rs {
				if r.Start != next || r.End > days[i].Limit || r.End <= r.Start {
					t.Fatalf("day %d: range [%d, %d) where one from %d within %v was expected", i, r.Start, r.End, next, days[i])
				}
				next = r.End
			}
			if next != days[i].Limit {
				t.Fatalf("day %d: the ranges end at %d, not at the window's limit %d", i, next, days[i].Limit)
			}
		}
	})

	// The conformance suite's cases of dated tags, each store a server
	// writing through another node than the one before it: the counter
	// of each period, its rewind protection and a tag created again hold
	// when every node takes writes.
	t.Run("DatedConformance", func(t *testing.T) {
		storetest.RunDated(t, func(t *testing.T) *storetest.Database {
			dbs++
			name := fmt.Sprintf("leaf%d", dbs)
			if _, err := openGaleraRaw(t, c.Node(0), "").Exec("CREATE DATABASE " + name); err != nil {
				t.Fatal(err)
			}
			var opened atomic.Int64
			return &storetest.Database{
				Open: func() (storetest.Store, error) {
					first := int(opened.Add(1)-1) % c.Size()
					var fallbacks []string
					for i := 1; i < c.Size(); i++ {
						fallbacks = append(fallbacks, c.Node((first+i)%c.Size()).DSN(name))
					}
					return store.Open("mysql", c.Node(first).DSN(name), store.WithFallbacks(fallbacks...), store.WithLogger(quiet))
				},
				// Reads wait until the node has applied every write the
				// cluster committed before them.
				Raw:       sqlx.NewDb(openGaleraRaw(t, c.Node(0), name), "mysql"),
				Conflicts: true,
			}
		})
	})

	// Every server listing the nodes in the same order writes through one
	// node: no conflict at all, and no call fails.
	t.Run("OneNodeForAll", func(t *testing.T) {
		db := newDatabase(t, 5)
		var stores []store.Store
		for range 3 {
			stores = append(stores, openStore(t, db, 0, 1, 2))
		}
		ranges, failed := hammer(t, stores, 5, 2*time.Second)
		tiled(t, db, ranges)
		if len(ranges) < 100 || failed > 0 {
			t.Fatalf("%d ranges, %d failed calls", len(ranges), failed)
		}
	})

	// A node set read-only is left for the next address, at the first
	// transaction it refuses, with no failure.
	t.Run("ReadOnlyNodeLeft", func(t *testing.T) {
		db := newDatabase(t, 10)
		// read_only does not hold back root, so the server logs in as a
		// user of its own, as a production one would.
		raw := openGaleraRaw(t, c.Node(0), "")
		for _, q := range []string{
			"CREATE USER IF NOT EXISTS 'leafd'@'127.0.0.1' IDENTIFIED BY 'secret'",
			"GRANT ALL ON " + db + ".* TO 'leafd'@'127.0.0.1'",
		} {
			if _, err := raw.Exec(q); err != nil {
				t.Fatal(err)
			}
		}
		dsn := func(n int) string { return "leafd:secret@tcp(" + c.Node(n).Addr() + ")/" + db }
		s, err := store.Open("mysql", dsn(0), store.WithFallbacks(dsn(1), dsn(2)), store.WithLogger(quiet))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if _, err := s.Allocate(context.Background(), "t", 10); err != nil {
			t.Fatal(err)
		}
		if _, err := raw.Exec("SET GLOBAL read_only = 1"); err != nil {
			t.Fatal(err)
		}
		defer raw.Exec("SET GLOBAL read_only = 0")
		for i := range 5 {
			a, err := s.Allocate(context.Background(), "t", 10)
			if err != nil {
				t.Fatalf("Allocate %d with node 0 read-only: %v", i, err)
			}
			if want := int64(11 + 10*i); a.Start != want {
				t.Fatalf("Allocate %d = %+v, want a range from %d", i, a, want)
			}
		}
		if a := s.Address(); a.Index != 1 || a.Switches != 1 {
			t.Fatalf("Address() = %+v, want node 1 after one switch", a)
		}
	})

	// A node cut off from the others (out of the primary component) still
	// accepts connections and answers queries that read no table, but
	// refuses every write (1047). The store leaves it at the first refusal,
	// with no failed call, and the node rejoins once it can talk again.
	t.Run("PartitionedNodeLeft", func(t *testing.T) {
		db := newDatabase(t, 10)
		s := openStore(t, db, 0, 1, 2)
		if _, err := s.Allocate(context.Background(), "t", 10); err != nil {
			t.Fatal(err)
		}
		raw := openGaleraRaw(t, c.Node(0), "")
		raw.SetMaxOpenConns(1)
		if _, err := raw.Exec("SET GLOBAL wsrep_provider_options = 'gmcast.isolate=1'"); err != nil {
			t.Fatal(err)
		}
		defer func() {
			if _, err := raw.Exec("SET GLOBAL wsrep_provider_options = 'gmcast.isolate=0'"); err != nil {
				t.Errorf("let node 0 talk again: %v", err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if err := c.WaitSynced(ctx); err != nil {
				t.Fatalf("node 0 did not rejoin: %v", err)
			}
		}()
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			st, err := c.Node(0).Status(context.Background(), "wsrep_ready")
			if err == nil && st["wsrep_ready"] == "OFF" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node 0 still ready 30 s after it was cut off: %v %v", st, err)
			}
		}
		for i := range 5 {
			a, err := s.Allocate(context.Background(), "t", 10)
			if err != nil {
				t.Fatalf("Allocate %d with node 0 cut off: %v", i, err)
			}
			if want := int64(11 + 10*i); a.Start != want {
				t.Fatalf("Allocate %d = %+v, want a range from %d", i, a, want)
			}
		}
		if a := s.Address(); a.Index == 0 || !strings.Contains(a.LastSwitchReason, "wsrep_ready") {
			t.Fatalf("Address() = %+v, want another node, left for wsrep_ready", a)
		}
	})

	// A node killed with SIGKILL: the store moves to the next, allocations
	// go on (those in flight at the kill may fail), and no range is lost
	// or given twice. The node then restarts and rejoins.
	t.Run("NodeKilled", func(t *testing.T) {
		db := newDatabase(t, 10)
		s := openStore(t, db, 0, 1, 2)
		var ranges []segment.Allocation
		take := func() error {
			a, err := s.Allocate(context.Background(), "t", 10)
			if err == nil {
				ranges = append(ranges, a)
			}
			return err
		}
		for range 10 {
			if err := take(); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.Kill(0); err != nil {
			t.Fatal(err)
		}
		failed, deadline := 0, time.Now().Add(30*time.Second)
		for len(ranges) < 30 {
			if time.Now().After(deadline) {
				t.Fatalf("only %d ranges 30 s after the kill (%d failed calls)", len(ranges), failed)
			}
			if err := take(); err != nil {
				failed++
				time.Sleep(100 * time.Millisecond)
			}
		}
		a := s.Address()
		if a.Index == 0 || a.Switches < 1 {
			t.Fatalf("Address() = %+v after node 0 was killed", a)
		}
		t.Logf("after the kill: on %s (index %d), %d failed calls before it", a.Name, a.Index, failed)
		for i := 1; i < len(ranges); i++ {
			if ranges[i].Start < ranges[i-1].End {
				t.Fatalf("ranges out of order or overlapping: %+v then %+v", ranges[i-1], ranges[i])
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := c.Restart(ctx, 0); err != nil {
			t.Fatal(err)
		}
		if err := take(); err != nil {
			t.Fatalf("Allocate after node 0 rejoined: %v", err)
		}
		if max := maxID(t, c.Node(0), db); max != ranges[len(ranges)-1].End {
			t.Fatalf("node 0 after rejoining reads max_id %d, want %d", max, ranges[len(ranges)-1].End)
		}
	})
}

func openGaleraRaw(t *testing.T, n *galera.Node, db string) *sql.DB {
	t.Helper()
	raw, err := sql.Open("mysql", n.DSN(db)+"?timeout=2s&wsrep_sync_wait=1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	return raw
}

// maxID reads the tag's max_id on node n, after the node has applied every
// write the cluster committed before the read.
func maxID(t *testing.T, n *galera.Node, db string) int64 {
	t.Helper()
	var v int64
	if err := openGaleraRaw(t, n, db).QueryRow("SELECT max_id FROM leaf_alloc WHERE biz_tag = 't'").Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// conflicts sums, over the running nodes, the transactions Galera failed
// at certification or aborted for a replicated one that won.
func conflicts(t *testing.T, c *galera.Cluster) int64 {
	t.Helper()
	var sum int64
	for i := range c.Size() {
		if !c.Node(i).Running() {
			continue
		}
		st, err := c.Node(i).Status(context.Background(), "wsrep_local_cert_failures", "wsrep_local_bf_aborts")
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range st {
			n, _ := strconv.ParseInt(v, 10, 64)
			sum += n
		}
	}
	return sum
}
