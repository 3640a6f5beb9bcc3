package mysql_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pressly/goose/v3"

	"github.com/leafd/leafd/internal/testkit/faultdriver"
	"github.com/leafd/leafd/internal/testkit/testdb"
	"github.com/leafd/leafd/store"
)

// These tests run Migrate against a server that refuses GET_LOCK as
// Percona XtraDB Cluster does under pxc_strict_mode=ENFORCING: the real
// MariaDB of the tests, behind the fault-injecting driver.

// pxcRefusal is Percona XtraDB Cluster's answer to GET_LOCK under
// pxc_strict_mode=ENFORCING.
var pxcRefusal = mysqlErr(1105, "HY000", "Percona-XtraDB-Cluster prohibits use of GET_LOCK with pxc_strict_mode = ENFORCING")

// The steps of MySQL's migration lock: the named lock, and a take of
// leafd's lock row.
var (
	getLock = faultdriver.Step{Name: "GET_LOCK", Is: func(op faultdriver.Op) bool {
		return op.Kind == "query" && strings.HasPrefix(strings.TrimSpace(op.Query), "SELECT GET_LOCK")
	}}
	takeLockRow = faultdriver.Step{Name: "take the lock row", Is: func(op faultdriver.Op) bool {
		return strings.HasPrefix(op.Query, "UPDATE leafd_lock SET holder = ?, expires_ms")
	}}
)

// syncBuffer is a log destination that several goroutines may write.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// openRefusing opens a store on dsn whose server refuses GET_LOCK as PXC
// does, logging to log.
func openRefusing(t *testing.T, dsn string, log *syncBuffer) (store.Store, *faultdriver.Faults) {
	t.Helper()
	s, f := openFaulty(t, dsn, store.WithLogger(slog.New(slog.NewTextHandler(log, nil))))
	f.Inject(getLock, pxcRefusal, -1)
	return s, f
}

// wantMigratedOnce fails t unless every migration is recorded exactly once
// in goose's version table, with its version-0 row, and leafd's lock row
// is free.
func wantMigratedOnce(t *testing.T, dsn string) {
	t.Helper()
	raw := openRaw(t, dsn)
	p, err := goose.NewProvider(goose.DialectMySQL, raw, dialect(t).Migrations)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int64]int{0: 1}
	for _, src := range p.ListSources() {
		want[src.Version] = 1
	}
	rows, err := raw.Query("SELECT version_id, COUNT(*) FROM goose_db_version GROUP BY version_id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[int64]int{}
	for rows.Next() {
		var v int64
		var n int
		if err := rows.Scan(&v, &n); err != nil {
			t.Fatal(err)
		}
		got[v] = n
	}
	if len(got) != len(want) {
		t.Fatalf("goose_db_version holds versions %v, want each of %v once", got, want)
	}
	for v, n := range want {
		if got[v] != n {
			t.Fatalf("goose_db_version holds versions %v, want each of %v once", got, want)
		}
	}
	var holder string
	if err := raw.QueryRow("SELECT holder FROM leafd_lock WHERE name = 'leafd_migrate'").Scan(&holder); err != nil || holder != "" {
		t.Fatalf("leafd's lock row: holder %q, %v; want it free", holder, err)
	}
}

// Two servers migrate a fresh database at once through a server that
// refuses GET_LOCK: both succeed through leafd's lock row, one after the
// other (both found migrations pending, one waited for the row and then
// found nothing to do), and every migration is applied once.
func TestMigrateLockRowConcurrent(t *testing.T) {
	dsn := testdb.MySQL(t)
	var logs [2]syncBuffer
	var stores [2]store.Store
	var fs [2]*faultdriver.Faults
	// Both read goose's version table before either migrates.
	var read sync.WaitGroup
	read.Add(2)
	for i := range stores {
		stores[i], fs[i] = openRefusing(t, dsn, &logs[i])
		fs[i].Inject(faultdriver.Applied, nil, 0).Wait = func() {
			read.Done()
			done := make(chan struct{})
			go func() { read.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
			}
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = stores[i].Migrate(context.Background())
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("server %d: Migrate: %v", i, err)
		}
		if !strings.Contains(logs[i].String(), "migrating under leafd's lock row") {
			t.Errorf("server %d logged %q, want the fallback to the lock row said", i, logs[i].String())
		}
		if fs[i].Count(getLock) != 1 || fs[i].Saw("RELEASE_LOCK") {
			t.Errorf("server %d: GET_LOCK asked %d times, RELEASE_LOCK sent %v; want once, and no release of a lock never held",
				i, fs[i].Count(getLock), fs[i].Saw("RELEASE_LOCK"))
		}
	}
	ran := 0
	for i := range fs {
		if fs[i].Saw("CREATE TABLE IF NOT EXISTS leaf_alloc") {
			ran++
		} else if n := fs[i].Count(takeLockRow); n < 2 {
			t.Errorf("server %d ran no migration but tried the lock row %d times: it did not wait for the other", i, n)
		}
	}
	if ran != 1 {
		t.Fatalf("%d servers ran the migrations, want 1", ran)
	}
	wantMigratedOnce(t, dsn)
}

// A server that refuses GET_LOCK, on a database whose migrations are all
// applied: Migrate takes no lock at all and says so.
func TestMigrateAlreadyAppliedNoLock(t *testing.T) {
	dsn := testdb.MySQL(t)
	openMigrated(t, dsn)
	var log syncBuffer
	s, f := openRefusing(t, dsn, &log)
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log.String(), "level=INFO") || !strings.Contains(log.String(), "migrations already applied; no migration lock taken") ||
		!strings.Contains(log.String(), "pxc_strict_mode") {
		t.Errorf("logged %q, want an INFO line saying that no lock was taken, and why", log.String())
	}
	if f.Saw("leafd_lock") || f.Saw("CREATE TABLE") {
		t.Errorf("statements sent: a lock row or a migration, on a database up to date")
	}
}
