package segment_test

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/internal/testkit/testdb"
	"github.com/leafd/leafd/segment"
	"github.com/leafd/leafd/store"
)

// database is one real database that several stores (standing in for
// several servers) share.
type database struct {
	driver, dsn string
	// raw is a plain pool on the database, outside any store; exec and
	// addTag rebind their '?' placeholders to the driver's.
	raw *sqlx.DB
}

// store opens a new, independent store on the database: its own pool, as a
// separate server would have.
func (d *database) store(tb testing.TB) store.Store {
	tb.Helper()
	return openStore(tb, d.driver, d.dsn)
}

func openStore(tb testing.TB, driver, dsn string) store.Store {
	tb.Helper()
	s, err := store.Open(driver, dsn)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

func (d *database) exec(tb testing.TB, query string, args ...any) {
	tb.Helper()
	if _, err := d.raw.Exec(d.raw.Rebind(query), args...); err != nil {
		tb.Fatalf("%s: %v", query, err)
	}
}

// addTag inserts a tag row the way an operator would, by SQL.
func (d *database) addTag(tb testing.TB, name string, maxID, step int64) {
	tb.Helper()
	d.exec(tb, "INSERT INTO leaf_alloc (biz_tag, max_id, step, description) VALUES (?, ?, ?, 'test')", name, maxID, step)
}

// forEachDatabase runs f against a fresh migrated database of every
// engine: SQLite always, MySQL and PostgreSQL when a server is reachable
// (CI requires both).
func forEachDatabase(t *testing.T, f func(t *testing.T, db *database)) {
	testdb.Each(t, store.Drivers(), func(t *testing.T, driver, dsn string) {
		t.Parallel() // the engines at once: each has its own database
		f(t, migrated(t, driver, dsn))
	})
}

// defaultDriver is the engine of the tests that need one database of any
// engine: the default one (store.DefaultDriver).
func defaultDriver() string { return store.DefaultDriver() }

// newDatabase makes a fresh, migrated database of driver; for a server
// that is not reachable it skips the test (testdb).
func newDatabase(tb testing.TB, driver string) *database {
	tb.Helper()
	return migrated(tb, driver, testdb.DSN(tb, driver))
}

// migrated migrates the database dsn and opens a raw pool on it.
func migrated(tb testing.TB, driver, dsn string) *database {
	tb.Helper()
	s := openStore(tb, driver, dsn)
	if err := s.Migrate(context.Background()); err != nil {
		tb.Fatal(err)
	}
	return &database{driver: driver, dsn: dsn, raw: testdb.SQL(tb, driver, dsn)}
}

// fastConfig is a configuration whose waits and retries take milliseconds.
func fastConfig() segment.Config {
	return segment.Config{
		WaitTimeout: 2 * time.Second,
		RetryMin:    5 * time.Millisecond,
		RetryMax:    50 * time.Millisecond,
		TagRefresh:  time.Hour, // tests refresh explicitly
		Logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

// newAllocator starts an allocator over s, waits for its tag list and
// closes it when the test ends.
func newAllocator(tb testing.TB, s segment.Store, cfg segment.Config) *segment.Allocator {
	tb.Helper()
	a, err := segment.New(s, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	if err := a.Refresh(context.Background()); err != nil {
		tb.Fatal(err)
	}
	a.Start()
	tb.Cleanup(func() { a.Close() })
	return a
}

// recordingStore remembers every range a real store handed out, so that a
// test can check each issued ID against them. It can also be switched to
// fail like an unreachable database, or to answer slowly.
type recordingStore struct {
	segment.Store
	mu     sync.Mutex
	ranges map[string][]segment.Range
	calls  int
	down   bool
	delay  time.Duration
}

func record(s segment.Store) *recordingStore {
	return &recordingStore{Store: s, ranges: map[string][]segment.Range{}}
}

func (r *recordingStore) Allocate(ctx context.Context, tag string, step int64) (segment.Allocation, error) {
	r.mu.Lock()
	r.calls++
	down, delay := r.down, r.delay
	r.mu.Unlock()
	if delay > 0 {
		time.Sleep(delay)
	}
	if down {
		return segment.Allocation{}, leafd.Errorf(leafd.EStoreUnavailable, "injected outage")
	}
	a, err := r.Store.Allocate(ctx, tag, step)
	if err == nil {
		r.mu.Lock()
		r.ranges[tag] = append(r.ranges[tag], segment.Range{Start: a.Start, End: a.End})
		r.mu.Unlock()
	}
	return a, err
}

// Ping fails during an injected outage, as an unreachable database would.
func (r *recordingStore) Ping(ctx context.Context) error {
	r.mu.Lock()
	down := r.down
	r.mu.Unlock()
	if down {
		return leafd.Errorf(leafd.EStoreUnavailable, "injected outage")
	}
	return r.Store.Ping(ctx)
}

func (r *recordingStore) set(f func(r *recordingStore)) {
	r.mu.Lock()
	f(r)
	r.mu.Unlock()
}

func (r *recordingStore) allocations() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls
}

// owned reports whether id lies in a range the database handed to r.
func (r *recordingStore) owned(tag string, id int64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rg := range r.ranges[tag] {
		if id >= rg.Start && id < rg.End {
			return true
		}
	}
	return false
}

// fakeClock is an injected clock that tests move by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func code(err error) string { return leafd.ErrorCode(err) }

func tagRow(name string, step int64) leafd.Tag {
	return leafd.Tag{Name: name, MaxID: 1, Step: step}
}
