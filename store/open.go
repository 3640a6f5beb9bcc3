package store

import (
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/jmoiron/sqlx"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/segment"
	"github.com/leafd/leafd/snowflake"
	"github.com/leafd/leafd/store/internal/engine"
)

// Store is everything leafd asks of a database: the segment allocator's
// and the snowflake lease keeper's interfaces, the admin API's tag
// writes, and what the server reports and runs at start-up. Every engine
// implements it with the same code (package doc); Open returns one.
type Store interface {
	segment.Store
	snowflake.LeaseStore
	// Driver is the engine's name as store.driver spells it.
	Driver() string
	// Address is the database address in use among its cluster's.
	Address() Address
	Ping(ctx context.Context) error
	Migrate(ctx context.Context) error
	// PendingMigrations reports whether the database lacks a migration
	// this leafd needs (migrate.go).
	PendingMigrations(ctx context.Context) (bool, error)
	TagNames(ctx context.Context) ([]string, error)
	CreateTag(ctx context.Context, t leafd.Tag) (leafd.Tag, error)
	UpdateTag(ctx context.Context, name string, u leafd.TagUpdate) (old, updated leafd.Tag, err error)
	// RepairTag raises a rewound tag's max_id to its high-water mark
	// (highwater.go).
	RepairTag(ctx context.Context, name string) (Repair, error)
	// The access tokens of the ID routes (tokens.go).
	CreateToken(ctx context.Context, tags []string, description string) (Token, string, error)
	ListTokens(ctx context.Context) ([]Token, error)
	RevokeToken(ctx context.Context, id string) error
	Close() error
}

// Option configures Open.
type Option func(*options)

type options struct {
	fallbacks []string
	log       *slog.Logger
	// connector, when set (by tests only: testhook.WithConnector), wraps the
	// connector of every address, so that a test can put a driver that
	// injects faults between the store and the real one.
	connector func(driver.Connector) driver.Connector
}

func newOptions(opts []Option) options {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	o.log = cmp.Or(o.log, slog.Default())
	return o
}

// WithFallbacks gives further addresses of the same cluster
// (store.fallback_dsns), in the same DSN format as the first. New
// connections go to the first address that can be reached and accepts
// writes, in list order starting from the one in use; while that is not
// the first, the first is tried again every minute. See Address. Engines
// without addresses (SQLite) refuse it.
func WithFallbacks(dsns ...string) Option {
	return func(o *options) { o.fallbacks = append(o.fallbacks, dsns...) }
}

// WithLogger sets the logger of address switches (default slog.Default()).
func WithLogger(l *slog.Logger) Option {
	return func(o *options) { o.log = l }
}

// Open returns a store of the engine driver names (one of Drivers) for
// the database dsn names, in that engine's DSN format. It
// does not connect: a server whose database is down still starts, and the
// first method that needs the database reports it as store_unavailable.
// The server, the command line and the tests all open stores here.
//
// Errors: an unknown driver; a DSN (the first or a fallback) written for
// another engine (OtherEngine), or that does not parse or names no database;
// fallbacks given to an engine that has no other addresses.
func Open(driver, dsn string, opts ...Option) (Store, error) {
	return openEngine(driver, dsn, newOptions(opts))
}

// openEngine is Open, returning the store as a Node.
func openEngine(driver, dsn string, o options) (Node, error) {
	d, ok := engine.Lookup(driver)
	if !ok {
		return nil, unknownDriver(driver)
	}
	for _, d := range append([]string{dsn}, o.fallbacks...) {
		if err := foreignDSN(driver, d); err != nil {
			return nil, err
		}
	}
	if len(o.fallbacks) > 0 && d.NoFallbacks != "" {
		return nil, fmt.Errorf("store.fallback_dsns does not apply to %s: %s; leave it empty", driver, d.NoFallbacks)
	}
	connector, cluster, addr, err := openCluster(d, dsn, o)
	if err != nil {
		return nil, err
	}
	sqlDB := sql.OpenDB(connector)
	sqlDB.SetMaxOpenConns(d.Pool.MaxOpen)
	sqlDB.SetMaxIdleConns(d.Pool.MaxIdle)
	sqlDB.SetConnMaxLifetime(d.Pool.MaxLifetime)
	sqlDB.SetConnMaxIdleTime(d.Pool.MaxIdleTime)
	return newDB(d, sqlx.NewDb(sqlDB, d.Bind), cluster, addr, o.log), nil
}

// CheckDSN returns the error Open would return for dsn, without opening
// anything: nil when driver is known and dsn is written for it, parses
// and names a database.
func CheckDSN(driver, dsn string) error {
	d, ok := engine.Lookup(driver)
	if !ok {
		return unknownDriver(driver)
	}
	if err := foreignDSN(driver, dsn); err != nil {
		return err
	}
	return d.Check(dsn)
}

func unknownDriver(driver string) error {
	if len(Drivers()) == 0 {
		return fmt.Errorf("store.driver %q is not supported: no engine is registered; import github.com/leafd/leafd/store/all (or an engine's package) for its side effect", driver)
	}
	return fmt.Errorf("store.driver %q is not supported: use %s", driver, strings.Join(Drivers(), ", "))
}

// MissingTable reports whether err is the database saying that a table
// does not exist: a store that was never migrated.
func MissingTable(err error) bool {
	return slices.ContainsFunc(Drivers(), func(name string) bool { return lookup(name).MissingTable(err) })
}
