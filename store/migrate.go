package store

import (
	"context"
	"log/slog"
	"slices"

	"github.com/jmoiron/sqlx"
	"github.com/pressly/goose/v3"

	"github.com/leafd/leafd/store/internal/engine"
)

// up applies the pending migrations of the dialect with goose's Provider,
// which records them in goose's default version table, goose_db_version.
// The caller serialises concurrent runs: goose does not, on MySQL or
// SQLite. goose applies each migration in a transaction of its own, and
// every migration is written to run again harmlessly (IF NOT EXISTS), so
// that up can simply run again after the database aborted it.
func (s *db) up(ctx context.Context) error {
	p, err := goose.NewProvider(s.dialect.Goose, s.x.DB, s.dialect.Migrations)
	if err != nil {
		return err
	}
	_, err = p.Up(ctx)
	return err
}

// Migrate applies the pending migrations under the engine's migration lock,
// so that servers starting at once on one database migrate one after the
// other; the others then find nothing to do. It is idempotent, and it
// succeeds on a database that already holds Java Leaf's leaf_alloc,
// leaving its rows as they are.
//
// Errors: store_unavailable when the database cannot be reached; an error
// without a code when the lock is not granted in time or a migration fails.
func (s *db) Migrate(ctx context.Context) error { return s.dialect.Migrate(ctx, migrator{s}) }

// migrator is what the engines' Migrate asks of the store
// (engine.Migrator), kept off the store's own methods: only a migration
// lock's holder may run the migrations.
type migrator struct{ s *db }

func (m migrator) DB() *sqlx.DB                 { return m.s.x }
func (m migrator) Addr() string                 { return m.s.addr }
func (m migrator) Up(ctx context.Context) error { return m.s.up(ctx) }
func (m migrator) Write(ctx context.Context, f func(context.Context) error) error {
	return m.s.write(ctx, f)
}
func (m migrator) Pending(ctx context.Context) (bool, error) { return m.s.pendingMigrations(ctx) }
func (m migrator) Class(err error) engine.Class              { return m.s.class(err) }
func (m migrator) Wrap(err error, op string) error           { return m.s.Wrap(err, op) }
func (m migrator) Log() *slog.Logger                         { return m.s.log }

// appliedSQL lists the migrations goose recorded as applied.
const appliedSQL = `SELECT version_id FROM goose_db_version WHERE is_applied`

// PendingMigrations reports whether the database lacks a migration this
// leafd needs: a server started with store.migrate false waits for
// `leafd migrate` rather than serve from a schema that is behind it.
// Errors are the store's own (store_unavailable when it cannot be asked).
func (s *db) PendingMigrations(ctx context.Context) (bool, error) {
	p, err := s.pendingMigrations(ctx)
	return p, s.Wrap(err, "check migrations")
}

// pendingMigrations reports whether a migration of the dialect is not
// recorded as applied in goose's version table, or the table is missing.
// It only reads: goose itself would create the table.
func (s *db) pendingMigrations(ctx context.Context) (bool, error) {
	p, err := goose.NewProvider(s.dialect.Goose, s.x.DB, s.dialect.Migrations)
	if err != nil {
		return false, err
	}
	var applied []int64
	if err := s.x.SelectContext(ctx, &applied, appliedSQL); err != nil {
		if MissingTable(err) {
			return true, nil
		}
		return false, err
	}
	for _, src := range p.ListSources() {
		if !slices.Contains(applied, src.Version) {
			return true, nil
		}
	}
	return false, nil
}
