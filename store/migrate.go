package store

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"

	"github.com/jmoiron/sqlx"
	"github.com/pressly/goose/v3"

	"github.com/leafd/leafd/migrations"
)

// up applies the pending migrations in fsys with goose's Provider, which
// records them in goose's default version table, goose_db_version. The
// caller serialises concurrent runs: goose does not, on MySQL or SQLite.
// goose applies each migration in a transaction of its own, and every
// migration is written to run again harmlessly (IF NOT EXISTS), so that up
// can simply run again after the database aborted it.
func up(ctx context.Context, dialect goose.Dialect, sqlDB *sql.DB, fsys fs.FS) error {
	p, err := goose.NewProvider(dialect, sqlDB, fsys)
	if err != nil {
		return err
	}
	_, err = p.Up(ctx)
	return err
}

// appliedSQL lists the migrations goose recorded as applied.
const appliedSQL = `SELECT version_id FROM goose_db_version WHERE is_applied`

// pendingIn reports whether a migration in fsys is not recorded as applied
// in goose's version table of x, or the table is missing. It only reads:
// goose itself would create the table.
func pendingIn(ctx context.Context, x *sqlx.DB, dialect goose.Dialect, fsys fs.FS) (bool, error) {
	p, err := goose.NewProvider(dialect, x.DB, fsys)
	if err != nil {
		return false, err
	}
	var applied []int64
	if err := x.SelectContext(ctx, &applied, appliedSQL); err != nil {
		if MissingTable(err) {
			return true, nil
		}
		return false, err
	}
	done := map[int64]bool{}
	for _, v := range applied {
		done[v] = true
	}
	for _, src := range p.ListSources() {
		if !done[src.Version] {
			return true, nil
		}
	}
	return false, nil
}

// PendingMigrations reports whether the database lacks a migration this
// leafd needs: a server started with store.migrate false waits for
// `leafd migrate` rather than serve from a schema that is behind it.
// Errors are the store's own (store_unavailable when it cannot be asked).
func (s *MySQL) PendingMigrations(ctx context.Context) (bool, error) {
	p, err := s.pendingMigrations(ctx)
	return p, s.wrap(err, "check migrations")
}

// PendingMigrations: see (*MySQL).PendingMigrations.
func (s *Postgres) PendingMigrations(ctx context.Context) (bool, error) {
	p, err := pendingIn(ctx, s.x, goose.DialectPostgres, migrations.Postgres)
	return p, s.wrap(err, "check migrations")
}

// PendingMigrations: see (*MySQL).PendingMigrations.
func (s *SQLite) PendingMigrations(ctx context.Context) (bool, error) {
	p, err := pendingIn(ctx, s.x, goose.DialectSQLite3, migrations.SQLite)
	return p, s.wrap(err, "check migrations")
}

// PendingMigrations reports whether any of the databases lacks a migration
// (see (*MySQL).PendingMigrations).
func (s *Sharded) PendingMigrations(ctx context.Context) (bool, error) {
	for i, d := range s.dbs {
		c, ok := d.Store.(interface {
			PendingMigrations(context.Context) (bool, error)
		})
		if !ok {
			continue
		}
		pending, err := c.PendingMigrations(ctx)
		if err != nil {
			return false, fmt.Errorf("store.shards[%d]: %w", i, err)
		}
		if pending {
			return true, nil
		}
	}
	return false, nil
}
