package store

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pressly/goose/v3"

	"github.com/leafd/leafd/internal/testkit/testdb"
)

// pxcRefusal is Percona XtraDB Cluster's answer to GET_LOCK under
// pxc_strict_mode=ENFORCING.
var pxcRefusal = mysqlErr(1105, "HY000", "Percona-XtraDB-Cluster prohibits use of GET_LOCK with pxc_strict_mode = ENFORCING")

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
func openRefusing(t *testing.T, dsn string, log *syncBuffer) (*db, *faults) {
	t.Helper()
	s, f := openFaulty(t, dsn, WithLogger(slog.New(slog.NewTextHandler(log, nil))))
	f.inject(stepGetLock, pxcRefusal, -1)
	return s, f
}

// wantMigratedOnce fails t unless every migration is recorded exactly once
// in goose's version table, with its version-0 row, and leafd's lock row
// is free.
func wantMigratedOnce(t *testing.T, dsn string) {
	t.Helper()
	raw := openRaw(t, "mysql", dsn)
	p, err := goose.NewProvider(goose.DialectMySQL, raw, lookup("mysql").Migrations)
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
	var stores [2]*db
	var fs [2]*faults
	// Both read goose's version table before either migrates.
	var read sync.WaitGroup
	read.Add(2)
	for i := range stores {
		stores[i], fs[i] = openRefusing(t, dsn, &logs[i])
		fs[i].inject(stepApplied, nil, 0).wait = func() {
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
		if fs[i].count(stepGetLock) != 1 || fs[i].saw("RELEASE_LOCK") {
			t.Errorf("server %d: GET_LOCK asked %d times, RELEASE_LOCK sent %v; want once, and no release of a lock never held",
				i, fs[i].count(stepGetLock), fs[i].saw("RELEASE_LOCK"))
		}
	}
	ran := 0
	for i := range fs {
		if fs[i].saw("CREATE TABLE IF NOT EXISTS leaf_alloc") {
			ran++
		} else if n := countTakes(fs[i]); n < 2 {
			t.Errorf("server %d ran no migration but tried the lock row %d times: it did not wait for the other", i, n)
		}
	}
	if ran != 1 {
		t.Fatalf("%d servers ran the migrations, want 1", ran)
	}
	wantMigratedOnce(t, dsn)
}

// countTakes returns how often a store tried to take leafd's lock row.
func countTakes(f *faults) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, op := range f.ops {
		if strings.HasPrefix(op.query, "UPDATE leafd_lock SET holder = ?, expires_ms") {
			n++
		}
	}
	return n
}

// A server that refuses GET_LOCK, on a database whose migrations are all
// applied: Migrate takes no lock at all and says so.
func TestMigrateAlreadyAppliedNoLock(t *testing.T) {
	dsn := testdb.MySQL(t)
	openMigratedMySQL(t, dsn)
	var log syncBuffer
	s, f := openRefusing(t, dsn, &log)
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log.String(), "level=INFO") || !strings.Contains(log.String(), "migrations already applied; no migration lock taken") ||
		!strings.Contains(log.String(), "pxc_strict_mode") {
		t.Errorf("logged %q, want an INFO line saying that no lock was taken, and why", log.String())
	}
	if f.saw("leafd_lock") || f.saw("CREATE TABLE") {
		t.Errorf("statements sent: a lock row or a migration, on a database up to date")
	}
}
