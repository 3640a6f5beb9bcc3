package snowflake_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/internal/testkit/testdb"
	"github.com/leafd/leafd/snowflake"
	"github.com/leafd/leafd/store"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// stepClock is a fake wall clock that moves only when read or slept on:
// each read advances it by step, each Sleep by the time slept.
type stepClock struct {
	mu    sync.Mutex
	now   time.Time
	step  time.Duration
	slept []time.Duration
}

func newStepClock(step time.Duration) *stepClock {
	return &stepClock{now: time.UnixMilli(time.Now().UnixMilli()), step: step}
}

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.now
	c.now = c.now.Add(c.step)
	return t
}

func (c *stepClock) Sleep(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.slept = append(c.slept, d)
	c.now = c.now.Add(d)
}

func (c *stepClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// shiftClock is the real clock moved by an offset that a test sets: time
// flows as usual (the lease keeper's timers are real), but the test can
// step the wall clock back or forward at will.
type shiftClock struct{ off atomic.Int64 }

func (c *shiftClock) Now() time.Time        { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *shiftClock) Shift(d time.Duration) { c.off.Add(int64(d)) }
func (c *shiftClock) Sleep(d time.Duration) { time.Sleep(d) }

// leaseDB is one real database that several generators (standing in for
// several servers) share.
type leaseDB struct {
	driver, dsn string
	// raw is a plain pool on the database, outside any store; exec and
	// watermark rebind their '?' placeholders to the driver's.
	raw *sqlx.DB
}

type leaseStore interface {
	snowflake.LeaseStore
	Migrate(context.Context) error
	Close() error
}

// store opens a new, independent store on the database, as a separate
// server would.
func (d *leaseDB) store(tb testing.TB) leaseStore {
	tb.Helper()
	s, err := store.Open(d.driver, d.dsn)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

func (d *leaseDB) exec(tb testing.TB, query string, args ...any) {
	tb.Helper()
	if _, err := d.raw.Exec(d.raw.Rebind(query), args...); err != nil {
		tb.Fatalf("%s: %v", query, err)
	}
}

// watermark returns the recorded watermark of a worker id.
func (d *leaseDB) watermark(tb testing.TB, worker int64) int64 {
	tb.Helper()
	var wm int64
	if err := d.raw.QueryRow(d.raw.Rebind("SELECT watermark_ms FROM leaf_worker WHERE worker_id = ?"), worker).Scan(&wm); err != nil {
		tb.Fatal(err)
	}
	return wm
}

// defaultDriver is the engine of the tests that need one database of any
// engine: the default one (store.DefaultDriver).
func defaultDriver() string { return store.DefaultDriver() }

// forEachDatabase runs f against a fresh migrated database of every
// engine (testdb.Each: a server that is not reachable skips its engine
// unless LEAFD_TEST_REQUIRE_* says otherwise).
func forEachDatabase(t *testing.T, f func(t *testing.T, db *leaseDB)) {
	testdb.Each(t, store.Drivers(), func(t *testing.T, driver, dsn string) {
		t.Parallel() // the engines at once: each has its own database
		db := &leaseDB{driver: driver, dsn: dsn}
		if err := db.store(t).Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
		db.raw = testdb.SQL(t, driver, dsn)
		f(t, db)
	})
}

// faultyLeases passes calls to a real store until the test breaks it; then
// every call fails as if the database were unreachable.
type faultyLeases struct {
	snowflake.LeaseStore
	broken atomic.Bool
	claims atomic.Int64 // ClaimWorker calls, failed ones included
}

var errUnreachable = leafd.Wrap(leafd.EStoreUnavailable, errors.New("injected: connection refused"), "the database cannot be reached")

func (f *faultyLeases) ClaimWorker(ctx context.Context, c snowflake.Claim) (snowflake.Lease, error) {
	f.claims.Add(1)
	if f.broken.Load() {
		return snowflake.Lease{}, errUnreachable
	}
	return f.LeaseStore.ClaimWorker(ctx, c)
}

func (f *faultyLeases) RenewWorker(ctx context.Context, l snowflake.Lease, ttl time.Duration, wm int64) error {
	if f.broken.Load() {
		return errUnreachable
	}
	return f.LeaseStore.RenewWorker(ctx, l, ttl, wm)
}

func (f *faultyLeases) ReleaseWorker(ctx context.Context, l snowflake.Lease, wm int64) error {
	if f.broken.Load() {
		return errUnreachable
	}
	return f.LeaseStore.ReleaseWorker(ctx, l, wm)
}

// newGenerator creates and starts a generator, closing it when the test
// ends.
func newGenerator(tb testing.TB, s snowflake.Settings) *snowflake.Generator {
	tb.Helper()
	if s.Logger == nil {
		s.Logger = quiet
	}
	g, err := snowflake.New(s)
	if err != nil {
		tb.Fatal(err)
	}
	g.Start()
	tb.Cleanup(func() { g.Close() })
	return g
}

// waitReady waits until g holds a worker id and can issue.
func waitReady(tb testing.TB, g *snowflake.Generator) {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for g.Ready() != nil {
		if time.Now().After(deadline) {
			tb.Fatalf("generator not ready after 10s: %v", g.Ready())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func mustNext(tb testing.TB, g *snowflake.Generator) snowflake.ID {
	tb.Helper()
	id, err := g.Next(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	return id
}

func wantCode(tb testing.TB, err error, code string) {
	tb.Helper()
	if got := leafd.ErrorCode(err); got != code {
		tb.Fatalf("error %v: code %q, want %q", err, got, code)
	}
}
