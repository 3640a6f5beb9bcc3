package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/jmoiron/sqlx"
	"github.com/pressly/goose/v3"

	"github.com/leafd/leafd/migrations"
)

// Postgres is a store in PostgreSQL 12 or later (and engines that speak its
// dialect and honour its row locks), through github.com/jackc/pgx/v5. Open
// it with Open("postgres", …) or OpenPostgres. It is safe for concurrent
// use. Its methods but Migrate are the same code as MySQL's and SQLite's.
type Postgres struct {
	db
}

// Pool settings for PostgreSQL: as for MySQL (mysql.go).
const (
	postgresMaxOpen     = 16
	postgresMaxIdle     = 4
	postgresMaxLifetime = 5 * time.Minute
	postgresMaxIdleTime = time.Minute
	// postgresDialTimeout applies when the DSN sets no connect_timeout.
	postgresDialTimeout = 5 * time.Second
	// postgresLockTimeout is the session's lock_timeout when the DSN sets
	// none (PostgreSQL's default is to wait for ever): a row lock held by
	// someone else then fails the statement with an error that names the
	// lock, well inside the allocator's 10 s load timeout.
	postgresLockTimeout = "5s"
)

// pgMigrateLock is the key of the advisory lock that serialises the
// migrations of servers starting at once on one database: the bytes of
// "leafd_mg" read as a big-endian integer. goose takes no lock of its own
// unless asked.
const (
	pgMigrateLock int64 = 0x6c656166645f6d67
	// pgClaimLock ("leafd_wk") serialises worker id claims (db.claimLockSQL).
	pgClaimLock          int64 = 0x6c656166645f776b
	pgMigrateLockTimeout       = 60 * time.Second
	pgMigrateLockPoll          = 100 * time.Millisecond
)

// OpenPostgres returns a store for the database dsn names: a URL
// (postgres://user:password@host:5432/dbname?sslmode=disable) or
// key=value pairs (host=… dbname=…), as pgx reads them. It does not
// connect. Whatever the DSN says, the session time zone is UTC; it gets a
// lock_timeout of 5 s and a connect_timeout of 5 s unless it sets them.
//
// Errors: a DSN (the first or a fallback) is empty, does not parse, or
// names no database.
func OpenPostgres(dsn string, opts ...Option) (*Postgres, error) {
	return openPostgres(dsn, newOptions(opts))
}

func openPostgres(dsn string, o options) (*Postgres, error) {
	connector, cluster, addr, err := openCluster(dsn, o, postgresConnector, probePostgres)
	if err != nil {
		return nil, err
	}
	sqlDB := sql.OpenDB(connector)
	sqlDB.SetMaxOpenConns(postgresMaxOpen)
	sqlDB.SetMaxIdleConns(postgresMaxIdle)
	sqlDB.SetConnMaxLifetime(postgresMaxLifetime)
	sqlDB.SetConnMaxIdleTime(postgresMaxIdleTime)
	s := &Postgres{db: db{
		// "pgx" is the name sqlx knows for '$1' placeholders.
		x:        sqlx.NewDb(sqlDB, "pgx"),
		driver:   "postgres",
		classify: classifyPostgres,
		// clock_timestamp() is the time now; now() would be the time the
		// transaction began.
		nowMsSQL:    "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)",
		lockSuffix:  " FOR UPDATE",
		greatest:    "GREATEST",
		shareSuffix: " FOR SHARE",
		// Released at COMMIT or ROLLBACK.
		claimLockSQL: fmt.Sprintf("SELECT pg_advisory_xact_lock(%d)", pgClaimLock),
		cluster:      cluster,
		addr:         addr,
	}}
	if cluster != nil {
		s.unavailable = func(err error) {
			var pe *pgconn.PgError
			if errors.As(err, &pe) {
				cluster.refused() // the node answered: it refuses to serve
			}
		}
	}
	return s, nil
}

// CheckPostgresDSN returns the error OpenPostgres would return for dsn,
// without opening anything: nil when dsn parses and names a database.
func CheckPostgresDSN(dsn string) error {
	_, err := parsePostgresDSN(dsn)
	return err
}

// isPostgresURL reports whether dsn is a postgres:// or postgresql:// URL,
// the form pgx reads as a URL (here in any case: the intent is plain).
func isPostgresURL(dsn string) bool {
	lower := strings.ToLower(strings.TrimSpace(dsn))
	return strings.HasPrefix(lower, "postgres://") || strings.HasPrefix(lower, "postgresql://")
}

// postgresDSN reports whether dsn is written for PostgreSQL: a URL, or
// libpq's keyword=value pairs, which begin, as libpq and pgx read them,
// with a keyword (letters, digits and underscores), optional spaces and
// '=': host = db dbname = leaf as much as host=db. Whether the rest parses
// is for CheckPostgresDSN to say.
func postgresDSN(dsn string) bool {
	if isPostgresURL(dsn) {
		return true
	}
	const space = " \t\n\r\v\f"
	s := strings.TrimLeft(dsn, space)
	end := strings.IndexAny(s, space+"=")
	if end <= 0 || !isWord(s[:end]) {
		return false
	}
	return strings.HasPrefix(strings.TrimLeft(s[end:], space), "=")
}

// isWord reports whether s is a letter or '_' followed by letters, digits
// and '_'.
func isWord(s string) bool {
	for i, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return s != ""
}

// parsePostgresDSN parses dsn with the settings every leafd connection
// needs.
func parsePostgresDSN(dsn string) (*pgx.ConnConfig, error) {
	const use = "use postgres://user:password@host:5432/dbname"
	if dsn == "" {
		return nil, errors.New("the PostgreSQL DSN is empty: " + use)
	}
	cfg, err := pgx.ParseConfig(dsn) // its errors hide the password
	if err != nil {
		return nil, fmt.Errorf("the PostgreSQL DSN does not parse (%s): %w", use, err)
	}
	if cfg.Database == "" {
		return nil, errors.New("the PostgreSQL DSN names no database: put its name after the slash, postgres://user:password@host:5432/dbname")
	}
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	cfg.RuntimeParams["timezone"] = "UTC"
	if _, ok := cfg.RuntimeParams["lock_timeout"]; !ok {
		cfg.RuntimeParams["lock_timeout"] = postgresLockTimeout
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = postgresDialTimeout
	}
	return cfg, nil
}

// postgresConnector parses dsn and returns its connector.
func postgresConnector(dsn string) (clusterAddress, error) {
	cfg, err := parsePostgresDSN(dsn)
	if err != nil {
		return clusterAddress{}, err
	}
	name := cfg.Host // a socket directory
	if !strings.HasPrefix(name, "/") {
		name = net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
	}
	return clusterAddress{name: name, c: stdlib.GetConnector(*cfg)}, nil
}

// Why a probe refuses a PostgreSQL node that answered.
var (
	errStandby        = errors.New("the server is a standby (pg_is_in_recovery() is true): it replicates a primary and refuses writes")
	errReadOnlySelect = errors.New("the session is read-only (transaction_read_only is on): default_transaction_read_only is set for this server, database or user")
)

// probePostgres returns nil when conn's PostgreSQL node accepts writes: it
// is not a standby, and its sessions are not read-only.
func probePostgres(ctx context.Context, conn driver.QueryerContext) error {
	standby, err := queryValue(ctx, conn, "SELECT pg_is_in_recovery()", 0)
	if err != nil {
		return err
	}
	if standby == "true" {
		return errStandby
	}
	readOnly, err := queryValue(ctx, conn, "SHOW transaction_read_only", 0)
	if err != nil {
		return err
	}
	if !isOff(readOnly) {
		return errReadOnlySelect
	}
	return nil
}

// Migrate applies the pending migrations of package migrations with goose.
// It holds an advisory lock meanwhile, so that servers starting at once on
// one database migrate one after the other; the others then find nothing
// to do. It is idempotent, and it succeeds on a database that already holds
// a leaf_alloc table of Leaf's columns, leaving its rows as they are.
//
// Errors: store_unavailable when the database cannot be reached; an error
// without a code when the lock is not granted within 60 seconds or a
// migration fails.
func (s *Postgres) Migrate(ctx context.Context) error {
	conn, err := s.x.Conn(ctx)
	if err != nil {
		return s.wrap(err, "migrate")
	}
	defer releaseAdvisoryLock(ctx, conn)
	if err := takeAdvisoryLock(ctx, conn); err != nil {
		return s.wrap(err, "migrate")
	}
	return s.wrap(s.write(ctx, func(ctx context.Context) error {
		return up(ctx, goose.DialectPostgres, s.x.DB, migrations.Postgres)
	}), "migrate")
}

// takeAdvisoryLock takes the migration lock on conn, waiting up to 60
// seconds (or until ctx ends) while another session holds it.
func takeAdvisoryLock(ctx context.Context, conn *sql.Conn) error {
	deadline := time.Now().Add(pgMigrateLockTimeout)
	for {
		var got bool
		if err := conn.QueryRowContext(ctx, "SELECT pg_try_advisory_lock($1)", pgMigrateLock).Scan(&got); err != nil {
			return err
		}
		if got {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the advisory lock %d (leafd's migration lock) was not granted within %v: another server may be migrating this database",
				pgMigrateLock, pgMigrateLockTimeout)
		}
		t := time.NewTimer(pgMigrateLockPoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// releaseAdvisoryLock releases the migration lock (if this session holds
// it) and hands the connection back; a connection whose release failed is
// discarded instead, which ends the session and its locks.
func releaseAdvisoryLock(ctx context.Context, conn *sql.Conn) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	var released bool
	if err := conn.QueryRowContext(ctx, "SELECT pg_advisory_unlock($1)", pgMigrateLock).Scan(&released); err != nil {
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	}
	_ = conn.Close()
}

// doubleQuoted returns what the first pair of double quotes in msg holds,
// as in the server's `database "leafd" does not exist`; "" when there is
// none.
func doubleQuoted(msg string) string {
	_, rest, ok := strings.Cut(msg, `"`)
	if !ok {
		return ""
	}
	name, _, ok := strings.Cut(rest, `"`)
	if !ok {
		return ""
	}
	return name
}

// pgQuoteIdent returns name as it can be typed into a PostgreSQL
// statement: unchanged when it is a plain lower-case identifier, in double
// quotes otherwise.
func pgQuoteIdent(name string) string {
	plain := name != "" && !(name[0] >= '0' && name[0] <= '9')
	for _, r := range name {
		if !(r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z') {
			plain = false
		}
	}
	if plain {
		return name
	}
	return `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
}
