package store

import (
	"context"

	"github.com/pressly/goose/v3"
)

// up applies the pending migrations of the dialect with goose's Provider,
// which records them in goose's default version table, goose_db_version.
// The caller serialises concurrent runs: goose does not, on MySQL or
// SQLite. goose applies each migration in a transaction of its own, and
// every migration is written to run again harmlessly (IF NOT EXISTS), so
// that up can simply run again after the database aborted it.
func (s *db) up(ctx context.Context) error {
	p, err := goose.NewProvider(s.dialect.goose, s.x.DB, s.dialect.migrations)
	if err != nil {
		return err
	}
	_, err = p.Up(ctx)
	return err
}

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
	p, err := goose.NewProvider(s.dialect.goose, s.x.DB, s.dialect.migrations)
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
