package store

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/internal/testkit/faultproxy"
	"github.com/leafd/leafd/internal/testkit/testdb"
	"github.com/leafd/leafd/segment"
)

// testLogger logs to the test's output: shown with -v or when it fails.
func testLogger(t *testing.T) *slog.Logger { return slog.New(slog.NewTextHandler(t.Output(), nil)) }

// proxiedDSN returns dsn with its address replaced by addr.
func proxiedDSN(t *testing.T, dsn, addr string) string {
	t.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Addr = addr
	return cfg.FormatDSN()
}

// clusterOf returns a migrated store whose addresses are proxies to one
// real database, so that each address can be taken away on its own.
func clusterOf(t *testing.T, n int) (*db, []*faultproxy.Proxy, string) {
	t.Helper()
	dsn := testdb.MySQL(t)
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	var proxies []*faultproxy.Proxy
	var dsns []string
	for range n {
		p := faultproxy.New(t, cfg.Addr)
		proxies = append(proxies, p)
		dsns = append(dsns, proxiedDSN(t, dsn, p.Addr()))
	}
	s, err := openDB("mysql", dsns[0], WithFallbacks(dsns[1:]...), WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s, proxies, dsn
}

func wantAddress(t *testing.T, s *db, index int, switches int64, name string) {
	t.Helper()
	a := s.Address()
	if a.Index != index || a.Switches != switches || a.Name != name || a.Count < 2 {
		t.Fatalf("Address() = %+v, want index %d (%s) after %d switches", a, index, name, switches)
	}
}

// The first address goes away: the next allocation is served through the
// second at once, the switch is counted, and once the first serves again
// the store moves back to it. Every range is new.
func TestFailoverMovesOnAndBack(t *testing.T) {
	s, proxies, dsn := clusterOf(t, 3)
	raw := openRaw(t, "mysql", dsn)
	mustExec(t, raw, "INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('t', 1, 10)")
	wantAddress(t, s, 0, 0, proxies[0].Addr())
	mustAllocate(t, s, "t", 10, segment.Allocation{Start: 1, End: 11, TableStep: 10})

	proxies[0].Down()
	mustAllocate(t, s, "t", 10, segment.Allocation{Start: 11, End: 21, TableStep: 10})
	wantAddress(t, s, 1, 1, proxies[1].Addr())
	if a := s.Address(); a.LastSwitch.IsZero() || !strings.Contains(a.LastSwitchReason, proxies[0].Addr()) {
		t.Fatalf("Address() = %+v: want the time of the switch and a reason naming %s", a, proxies[0].Addr())
	}

	// The second goes too: the third serves.
	proxies[1].Down()
	mustAllocate(t, s, "t", 10, segment.Allocation{Start: 21, End: 31, TableStep: 10})
	wantAddress(t, s, 2, 2, proxies[2].Addr())

	// The first is back: the store returns to it at its next check.
	proxies[0].Up()
	s.cluster.setRetryFirst(20 * time.Millisecond)
	deadline := time.Now().Add(10 * time.Second)
	for s.Address().Index != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("still on %+v 10s after the first address came back", s.Address())
		}
		time.Sleep(10 * time.Millisecond)
	}
	wantAddress(t, s, 0, 3, proxies[0].Addr())
	// The connections to the third address are no longer used: cutting it
	// does not disturb the store.
	proxies[2].Down()
	mustAllocate(t, s, "t", 10, segment.Allocation{Start: 31, End: 41, TableStep: 10})
	if got := readMaxID(t, raw, "t"); got != 41 {
		t.Fatalf("max_id = %d, want 41", got)
	}
}

// No address serves: the store reports store_unavailable naming every
// address, and serves again as soon as one of them does.
func TestFailoverNoneServes(t *testing.T) {
	s, proxies, dsn := clusterOf(t, 2)
	raw := openRaw(t, "mysql", dsn)
	mustExec(t, raw, "INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('t', 1, 10)")
	for _, p := range proxies {
		p.Down()
	}
	_, err := s.Allocate(context.Background(), "t", 10)
	if code := leafd.ErrorCode(err); code != leafd.EStoreUnavailable {
		t.Fatalf("Allocate with no address serving: %v (code %q), want store_unavailable", err, code)
	}
	for _, p := range proxies {
		if !strings.Contains(err.Error(), p.Addr()) {
			t.Errorf("the error %q does not name the address %s", err, p.Addr())
		}
	}
	proxies[1].Up()
	mustAllocate(t, s, "t", 10, segment.Allocation{Start: 1, End: 11, TableStep: 10})
	if a := s.Address(); a.Index != 1 {
		t.Fatalf("Address() = %+v, want the second address, the one that serves", a)
	}
}

// An address whose server answers but refuses the connection (here: the
// database is missing there, as on a node not yet provisioned) is passed
// over like one that cannot be reached.
func TestFailoverRefusingAddressSkipped(t *testing.T) {
	dsn := testdb.MySQL(t)
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	missing := cfg.Clone()
	missing.DBName = "leafd_test_missing_database"
	s, err := openDB("mysql", missing.FormatDSN(), WithFallbacks(dsn), WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	if a := s.Address(); a.Index != 1 || a.Switches != 1 {
		t.Fatalf("Address() = %+v, want the second address after one switch", a)
	}
}

// Many allocations run while the addresses are taken away and given back
// in turn: the ranges handed out never overlap, whichever address each
// came through.
func TestFailoverConcurrentNoOverlap(t *testing.T) {
	s, proxies, dsn := clusterOf(t, 3)
	raw := openRaw(t, "mysql", dsn)
	mustExec(t, raw, "INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('t', 1, 7)")
	s.cluster.setRetryFirst(50 * time.Millisecond)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	var (
		mu     sync.Mutex
		ranges []segment.Allocation
		fails  int
		wg     sync.WaitGroup
	)
	for range 8 {
		wg.Go(func() {
			for ctx.Err() == nil {
				a, err := s.Allocate(ctx, "t", 7)
				mu.Lock()
				if err != nil {
					fails++
				} else {
					ranges = append(ranges, a)
				}
				mu.Unlock()
			}
		})
	}
	// Take each address away in turn, never all at once.
	for i := 0; ctx.Err() == nil; i++ {
		p := proxies[i%len(proxies)]
		p.Down()
		time.Sleep(150 * time.Millisecond)
		p.Up()
		time.Sleep(50 * time.Millisecond)
	}
	wg.Wait()

	if len(ranges) < 50 {
		t.Fatalf("only %d ranges in 3s (%d failures)", len(ranges), fails)
	}
	slices.SortFunc(ranges, func(a, b segment.Allocation) int { return int(a.Start - b.Start) })
	for i := 1; i < len(ranges); i++ {
		if ranges[i].Start < ranges[i-1].End {
			t.Fatalf("ranges overlap: %+v and %+v", ranges[i-1], ranges[i])
		}
	}
	if max := readMaxID(t, raw, "t"); ranges[len(ranges)-1].End > max {
		t.Fatalf("a range ends at %d, past max_id %d", ranges[len(ranges)-1].End, max)
	}
	a := s.Address()
	if a.Switches < 3 {
		t.Fatalf("Address() = %+v: want several switches", a)
	}
	t.Logf("%d ranges, %d failed attempts (a connection cut mid-transaction), %d switches", len(ranges), fails, a.Switches)
}

// A certification conflict at COMMIT, as Galera and Group Replication
// report it: this server's UPDATE and SELECT ran, another node's
// transaction on the same row won, and the COMMIT fails with 1213. The
// range this transaction read must never be handed out: the retry reads
// the row as the winner left it.
func TestCertificationConflictAtCommit(t *testing.T) {
	dsn := testdb.MySQL(t)
	s := openMigratedMySQL(t, dsn)
	raw := openRaw(t, "mysql", dsn)
	mustExec(t, raw, "INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('t', 1, 10)")
	attempts := 0
	var seen []int64
	s.beforeCommit = func(ctx context.Context, tx *sqlx.Tx) error {
		attempts++
		var maxID int64
		if err := tx.QueryRowContext(ctx, "SELECT max_id FROM leaf_alloc WHERE biz_tag = 't'").Scan(&maxID); err != nil {
			return err
		}
		seen = append(seen, maxID)
		if attempts > 1 {
			return nil
		}
		// The cluster aborts this transaction; the other node's write of
		// the same row is what the database now holds.
		if err := tx.Rollback(); err != nil {
			return err
		}
		if _, err := raw.ExecContext(ctx, "UPDATE leaf_alloc SET max_id = max_id + 10 WHERE biz_tag = 't'"); err != nil {
			return err
		}
		return &mysql.MySQLError{Number: 1213, SQLState: [5]byte{'4', '0', '0', '0', '1'},
			Message: "Deadlock found when trying to get lock; try restarting transaction (certification failure)"}
	}
	got, err := s.Allocate(context.Background(), "t", 10)
	if err != nil {
		t.Fatal(err)
	}
	// The other server got [1, 11); this one, after the retry, [11, 21).
	if want := (segment.Allocation{Start: 11, End: 21, TableStep: 10}); got != want {
		t.Fatalf("Allocate = %+v after a conflict at COMMIT, want %+v (max_id read by each attempt: %v)", got, want, seen)
	}
	if attempts != 2 || seen[0] != 11 {
		t.Fatalf("attempts %d, max_id read by each %v: want 2 attempts, the first reading 11", attempts, seen)
	}
	if max := readMaxID(t, raw, "t"); max != 21 {
		t.Fatalf("max_id = %d, want 21", max)
	}
}

func TestMySQLDialectCheck(t *testing.T) {
	for _, dsn := range []string{"", "not a dsn", "root@tcp(127.0.0.1:3306)/"} {
		if err := lookup("mysql").Check(dsn); err == nil {
			t.Errorf("CheckMySQLDSN(%q) = nil, want an error", dsn)
		}
	}
	for _, dsn := range []string{"root@tcp(127.0.0.1:3306)/leafd", "root@tcp(127.0.0.1:3306)/leafd?charset=utf8mb4,utf8"} {
		if err := lookup("mysql").Check(dsn); err != nil {
			t.Errorf("CheckMySQLDSN(%q): %v", dsn, err)
		}
	}
	// Quoting arguments into SQL is not safe in these character sets.
	if err := lookup("mysql").Check("root@tcp(127.0.0.1:3306)/leafd?charset=gbk"); err == nil || !strings.Contains(err.Error(), "charset=gbk") {
		t.Errorf("CheckMySQLDSN with charset=gbk: %v, want an error naming it", err)
	}
	_, err := openDB("mysql", "root@tcp(127.0.0.1:3306)/leafd", WithFallbacks("root@tcp(127.0.0.1:3307)/"))
	if err == nil || !strings.Contains(err.Error(), fmt.Sprint("fallback address 0")) {
		t.Errorf("Open with a fallback naming no database: %v, want an error naming fallback address 0", err)
	}
}

// The checks of the first address fall on the top of each minute, the same
// moment for every server of a fleet whose clocks agree.
func TestRetryFirstAtTheTopOfTheMinute(t *testing.T) {
	at := time.Date(2026, 11, 23, 12, 34, 56, 500_000_000, time.UTC)
	if got := untilNextMultiple(at, time.Minute); got != 3500*time.Millisecond {
		t.Fatalf("untilNextMultiple(12:34:56.5, 1m) = %v, want 3.5s", got)
	}
	if got := untilNextMultiple(at.Truncate(time.Minute), time.Minute); got != time.Minute {
		t.Fatalf("untilNextMultiple at the top of a minute = %v, want 1m", got)
	}
}

// goose's version table without its first row, as servers that migrate at
// once through different Galera nodes can leave it (GET_LOCK holds on one
// node only): Migrate puts the row back instead of failing for good.
func TestMigrateHealsEmptyVersionTable(t *testing.T) {
	dsn := testdb.MySQL(t)
	s := openMigratedMySQL(t, dsn)
	raw := openRaw(t, "mysql", dsn)
	mustExec(t, raw, "INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('t', 1, 10)")
	mustExec(t, raw, "DELETE FROM goose_db_version")
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatalf("Migrate with an empty version table: %v", err)
	}
	var zero int
	if err := raw.QueryRow("SELECT COUNT(*) FROM goose_db_version WHERE version_id = 0").Scan(&zero); err != nil || zero != 1 {
		t.Fatalf("version 0 rows: %d, %v; want 1", zero, err)
	}
	// The rows are as they were, and the migrations ran again harmlessly.
	mustAllocate(t, s, "t", 10, segment.Allocation{Start: 1, End: 11, TableStep: 10})
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatalf("Migrate once more: %v", err)
	}
}

// setRetryFirst changes how often the first address is checked (tests).
func (f *failover) setRetryFirst(d time.Duration) {
	f.cancel()
	<-f.done
	f.retryFirst = d
	f.ctx, f.cancel = context.WithCancel(context.Background())
	f.done = make(chan struct{})
	go f.retryFirstLoop()
}
