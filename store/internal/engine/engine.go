// Package engine is the seam between package store's shared SQL machinery
// and the engines (store/mysql, store/postgres, store/sqlite): the Dialect
// an engine declares, the error table's rows it brings, and the registry
// it joins from its init. Nothing here opens a database.
package engine

import (
	"context"
	"database/sql/driver"
	"io/fs"
	"log/slog"
	"maps"
	"regexp"
	"slices"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/pressly/goose/v3"
)

// A Dialect is one engine of store.driver: everything engine-specific that
// the shared code asks of it.
type Dialect struct {
	// Driver is store.driver's name for it; Title its name in messages;
	// Example the shape of its DSN, as messages suggest it. Default marks
	// the engine of the default store.driver (one engine sets it).
	Driver, Title, Example string
	Default                bool
	// Claims reports whether dsn is written for the engine, as its driver
	// reads it (store.DSNKinds); Check returns Open's error for dsn
	// without opening anything or touching the file system.
	Claims func(dsn string) bool
	Check  func(dsn string) error
	// Connect parses dsn and returns its address: the connector every
	// connection of the pool is opened with, and the name the address is
	// shown by. It does not connect.
	Connect func(dsn string) (Address, error)
	// Secrets returns the byte ranges of dsn that hold secrets (a
	// password), as the engine's driver would read dsn; an empty range
	// stands for an empty secret, shown as "***" all the same.
	// store.MaskDSN hides the union of every engine's ranges: each engine
	// reads every DSN, its own or not, and none can unmask what another
	// found.
	Secrets func(dsn string) [][2]int
	// Redact are the rules that hide the accounts and database names the
	// engine's errors quote, for the texts anyone may read (store.Redact
	// applies every engine's, in turn).
	Redact []Redaction
	// Probe returns nil when the node of a new connection accepts writes;
	// a Refusal when it answered and refuses them. Used only with
	// store.fallback_dsns.
	Probe func(ctx context.Context, conn driver.QueryerContext) error
	// NoFallbacks says why store.fallback_dsns does not apply; "" where it
	// does.
	NoFallbacks string
	// Bind is the driver name sqlx knows the engine's placeholders by.
	Bind string
	Pool Pool

	// Rows are the engine's rows of the error table, which Classify looks
	// its driver's errors up in.
	Rows     []Rule
	Classify func(error) Verdict
	// Refused reports whether err came from a node that answered (and
	// refuses to serve): a store with fallback addresses then leaves it.
	Refused func(err error) bool
	// MissingTable reports whether err says that a table does not exist.
	MissingTable func(err error) bool
	// WriteError, when set, turns the failed write of a tag's row into the
	// error to return (an engine's column limits); nil returns it as it is.
	WriteError func(ctx context.Context, q sqlx.QueryerContext, err error) error

	// The migrations, applied with goose in this dialect, and Migrate,
	// which runs them under the engine's migration lock.
	Goose      goose.Dialect
	Migrations fs.FS
	Migrate    func(ctx context.Context, m Migrator) error

	// OneWriter lets one writing transaction of a store run at a time:
	// SQLite takes one writer per file anyway, and waiting here is fairer
	// and cheaper than in its busy handler. RetryFor, when positive,
	// replaces the bound on attempts: a transaction aborted for a retry
	// is tried again until this much time has passed since it began.
	OneWriter bool
	RetryFor  time.Duration

	// NowMs is the database's clock in Unix milliseconds; LockSuffix what
	// makes a SELECT lock the rows it reads, and ShareSuffix take a shared
	// lock on them ("" where a transaction holds the whole database);
	// Greatest the function of the larger of two values.
	NowMs, LockSuffix, ShareSuffix, Greatest string
	// NowUs is the database's clock in Unix microseconds, whatever the
	// session's time zone: a dated tag's period is the one this clock is
	// in (Store.AllocateIn).
	NowUs string
	// ClaimLock, when set, is run first in a worker id's claim to
	// serialise the claims of all servers: an engine that takes no gap
	// locks would otherwise let claims that both find worker id n free
	// both insert it, and all but one retry, again and again while many
	// servers start at once.
	ClaimLock string
	// Marks, when set, raises high-water marks by making sure a tag's row
	// exists, locking it and updating it (where an upsert's gap locks
	// would deadlock loads of different tags); nil raises them with one
	// INSERT … ON CONFLICT.
	Marks *MarkSQL
}

// MarkSQL is the SQL of high-water marks raised by update. Ensure
// (argument: tag) makes sure the tag's row exists; Raise (arguments: value,
// tag) sets it; Copy (arguments: tag, value, value) raises it to at least
// a value, creating it if need be.
type MarkSQL struct{ Ensure, Raise, Copy string }

// Pool sizes the engine's connection pool (database/sql's settings; zero
// leaves one unset).
type Pool struct {
	MaxOpen, MaxIdle         int
	MaxLifetime, MaxIdleTime time.Duration
}

// ServerPool is the pool of an engine reached over the network: enough
// connections for the allocator's loads and the admin routes, recycled
// often enough that a failover or a proxy that drops idle connections is
// noticed.
var ServerPool = Pool{MaxOpen: 16, MaxIdle: 4, MaxLifetime: 5 * time.Minute, MaxIdleTime: time.Minute}

// DialTimeout is the dial timeout of an engine reached over the network
// when the DSN sets none: a database that cannot be reached should fail a
// request in seconds, not after the operating system's TCP timeout.
const DialTimeout = 5 * time.Second

// Redaction replaces what Pattern matches by With (regexp.ReplaceAllString).
type Redaction struct {
	Pattern *regexp.Regexp
	With    string
}

// Address is one address of a database: its connector and the name it is
// logged and shown by (host:port, a socket, a file; never the password).
type Address struct {
	Name      string
	Connector driver.Connector
}

// A Migrator is the store an engine's Migrate runs the migrations of.
type Migrator interface {
	DB() *sqlx.DB
	// Addr is the first address's name (the file, for an embedded engine).
	Addr() string
	// Up applies the pending migrations with goose; Write runs f as a
	// writing transaction of the store runs (retried while the database
	// aborts it, one at a time where the engine has one writer).
	Up(ctx context.Context) error
	Write(ctx context.Context, f func(context.Context) error) error
	// Pending reports whether a migration is not applied yet.
	Pending(ctx context.Context) (bool, error)
	Class(err error) Class
	Wrap(err error, op string) error
	Log() *slog.Logger
}

// registered are the engines by store.driver name.
var registered = map[string]*Dialect{}

// Register adds an engine; each engine's package calls it from init. It
// panics on an engine registered twice, a second default engine, or a
// dialect that lacks what the shared code calls, so that a new engine's
// mistake stops its first test rather than a server later.
func Register(d *Dialect) {
	if registered[d.Driver] != nil {
		panic("store: engine " + d.Driver + " registered twice")
	}
	for name, other := range registered {
		if d.Default && other.Default {
			panic("store: engines " + name + " and " + d.Driver + " are both the default")
		}
	}
	missing := map[string]bool{
		"Driver": d.Driver == "", "Title": d.Title == "", "Example": d.Example == "", "Bind": d.Bind == "",
		"Claims": d.Claims == nil, "Check": d.Check == nil, "Connect": d.Connect == nil, "Secrets": d.Secrets == nil,
		"Probe (or NoFallbacks)": d.Probe == nil && d.NoFallbacks == "",
		"Classify":               d.Classify == nil, "Refused": d.Refused == nil, "MissingTable": d.MissingTable == nil,
		"Migrations": d.Migrations == nil, "Migrate": d.Migrate == nil, "NowMs": d.NowMs == "", "NowUs": d.NowUs == "", "Greatest": d.Greatest == "",
	}
	for field, lacks := range missing {
		if lacks {
			panic("store: engine " + d.Driver + ": its dialect has no " + field)
		}
	}
	registered[d.Driver] = d
}

// Lookup returns the engine store.driver calls driver.
func Lookup(driver string) (*Dialect, bool) {
	d, ok := registered[driver]
	return d, ok
}

// Names returns the registered engines' names, sorted.
func Names() []string {
	return slices.Sorted(maps.Keys(registered))
}

// Sub returns the directory dir of files, for an engine's embedded
// migrations, rooted as goose expects.
func Sub(files fs.FS, dir string) fs.FS {
	f, err := fs.Sub(files, dir)
	if err != nil {
		panic(err) // dir is a constant that go:embed has already checked
	}
	return f
}
