package store

import (
	"context"
	"database/sql"
	"io/fs"

	"github.com/pressly/goose/v3"
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
