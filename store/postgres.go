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
// it with Open("postgres", …). It is safe for concurrent
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
	// pgClaimLock ("leafd_wk") serialises worker id claims (its dialect's claimLock).
	pgClaimLock          int64 = 0x6c656166645f776b
	pgMigrateLockTimeout       = 60 * time.Second
	pgMigrateLockPoll          = 100 * time.Millisecond
)

func init() { register(&postgresDialect) }

var _ Node = (*Postgres)(nil)

// postgresDialect is PostgreSQL's.
var postgresDialect = dialect{
	driver:  "postgres",
	title:   "PostgreSQL",
	example: "postgres://user:password@host:5432/leaf",
	claims:  postgresDSN,
	check:   func(dsn string) error { _, err := parsePostgresDSN(dsn); return err },
	open: func(d *dialect, dsn string, o options) (Node, error) {
		return openPostgres(d, dsn, o)
	},
	rows:     postgresRows,
	classify: classifyPostgres,
	refused: func(err error) bool {
		var pe *pgconn.PgError
		return errors.As(err, &pe)
	},
	missingTable: func(err error) bool {
		var pe *pgconn.PgError
		return errors.As(err, &pe) && pe.Code == "42P01" // undefined_table
	},
	goose:      goose.DialectPostgres,
	migrations: migrations.Postgres,
	// clock_timestamp() is the time now; now() would be the time the
	// transaction began.
	nowMs:       "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)",
	lockSuffix:  " FOR UPDATE",
	shareSuffix: " FOR SHARE",
	greatest:    "GREATEST",
	// Released at COMMIT or ROLLBACK.
	claimLock: fmt.Sprintf("SELECT pg_advisory_xact_lock(%d)", pgClaimLock),
}

// openPostgres returns a store for the database dsn names: a URL
// (postgres://user:password@host:5432/dbname?sslmode=disable) or
// key=value pairs (host=… dbname=…), as pgx reads them. It does not
// connect. Whatever the DSN says, the session time zone is UTC; it gets a
// lock_timeout of 5 s and a connect_timeout of 5 s unless it sets them.
//
// Errors: a DSN (the first or a fallback) is empty, does not parse, or
// names no database.
func openPostgres(d *dialect, dsn string, o options) (*Postgres, error) {
	connector, cluster, addr, err := openCluster(dsn, o, postgresConnector, probePostgres)
	if err != nil {
		return nil, err
	}
	sqlDB := sql.OpenDB(connector)
	sqlDB.SetMaxOpenConns(postgresMaxOpen)
	sqlDB.SetMaxIdleConns(postgresMaxIdle)
	sqlDB.SetConnMaxLifetime(postgresMaxLifetime)
	sqlDB.SetConnMaxIdleTime(postgresMaxIdleTime)
	// "pgx" is the name sqlx knows for '$1' placeholders.
	return &Postgres{db: newDB(d, sqlx.NewDb(sqlDB, "pgx"), cluster, addr)}, nil
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
// is for parsePostgresDSN to say.
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
		return s.Wrap(err, "migrate")
	}
	defer releaseAdvisoryLock(ctx, conn)
	if err := takeAdvisoryLock(ctx, conn); err != nil {
		return s.Wrap(err, "migrate")
	}
	return s.Wrap(s.write(ctx, func(ctx context.Context) error {
		return s.up(ctx)
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

// postgresRows are PostgreSQL's rows of the error table (classify.go), by
// SQLSTATE.
var postgresRows = []errorRule{
	// PostgreSQL: SQLSTATEs.
	{code: "40001", from: "PostgreSQL",
		name: "serialization_failure", class: classRetry, cause: abortedCause, hint: abortedHint},
	{code: "40P01", from: "PostgreSQL",
		name: "deadlock_detected", class: classRetry, cause: abortedCause, hint: abortedHint},
	{code: "55P03", from: "PostgreSQL",
		name:  "lock_not_available: lock_timeout (5 s) passed",
		class: classLocked, cause: "the row is locked by another transaction (lock_timeout); the database answers",
		hint: "retry once the lock is released"},
	{code: "23505", from: "PostgreSQL",
		name: "unique_violation", class: classDuplicate},
	{code: "28P01", from: "PostgreSQL",
		name:  "invalid_password",
		class: classUnavailable, cause: "the database refused the login ({message})",
		hint: "check the user and password in store.dsn, and pg_hba.conf on the server"},
	{code: "28000", from: "PostgreSQL",
		name:  "invalid_authorization_specification",
		class: classUnavailable, cause: "the database refused the login ({message})",
		hint: "check the user and password in store.dsn, and pg_hba.conf on the server"},
	{code: "3D000", from: "PostgreSQL",
		name:  "invalid_catalog_name: the database does not exist",
		class: classUnavailable, cause: "database {ident} does not exist",
		hint: "create it with CREATE DATABASE {ident}, or fix the database name in store.dsn"},
	{code: "42501", from: "PostgreSQL",
		name:  "insufficient_privilege",
		class: classUnavailable, cause: "the user in store.dsn lacks a privilege ({message})",
		hint: "grant it what leafd needs (GRANT ALL ON SCHEMA public and ON ALL TABLES IN SCHEMA public TO <user>) or check the user in store.dsn"},
	{code: "25006", from: "PostgreSQL",
		name:  "read_only_sql_transaction: a standby, or a read-only session",
		class: classUnavailable, cause: readOnlyCause, hint: readOnlyHint},
	{code: "53300", from: "PostgreSQL",
		name:  "too_many_connections",
		class: classUnavailable, cause: "the database has too many connections (max_connections)",
		hint: "raise max_connections or close other clients' connections; each leafd server opens at most {max_open}"},
	{code: "57P01", from: "PostgreSQL",
		name:  "admin_shutdown",
		class: classUnavailable, cause: "the database server is shutting down or restarting",
		hint: "retry once it is back, or list another server of the cluster in store.fallback_dsns"},
	{code: "57P02", from: "PostgreSQL",
		name:  "crash_shutdown",
		class: classUnavailable, cause: "the database server is shutting down or restarting",
		hint: "retry once it is back, or list another server of the cluster in store.fallback_dsns"},
	{code: "57P03", from: "PostgreSQL",
		name:  "cannot_connect_now: starting up, or in recovery",
		class: classUnavailable, cause: "the database server is starting up and does not accept connections yet",
		hint: "retry in a moment"},
	{code: "57014", from: "PostgreSQL",
		name:  "query_canceled: statement_timeout, or pg_cancel_backend",
		class: classUnavailable, cause: "the database cancelled the statement (statement_timeout, or a cancel by an administrator)",
		hint: "retry; if it persists, raise statement_timeout for leafd's user"},
	{code: "53100", from: "PostgreSQL",
		name:  "disk_full",
		class: classUnavailable, cause: "the database's disk is full", hint: "free space on the database server"},
	{code: "40003", from: "PostgreSQL",
		name:  "statement_completion_unknown: the outcome of the statement is unknown",
		class: classUnavailable, cause: "the database could not tell whether the statement completed",
		hint: "retry; whatever the statement did, leafd does not use it"},
	{code: "57P05", from: "PostgreSQL 14+",
		name: "idle_session_timeout", class: classUnavailable, cause: lostCause, hint: lostHint},
	{code: "25P03", from: "PostgreSQL",
		name: "idle_in_transaction_session_timeout", class: classUnavailable, cause: lostCause, hint: lostHint},
	{code: "08*", from: "PostgreSQL",
		name: "connection_exception and its subclasses", class: classUnavailable, cause: lostCause, hint: lostHint},
	{code: "42P01", from: "PostgreSQL",
		name: "undefined_table: the database was never migrated", class: classOther},
}

// postgresRules indexes postgresRows by SQLSTATE and class.
var postgresRules = indexRules(postgresRows, func(ix *ruleIndex, r *errorRule) error {
	if strings.HasSuffix(r.code, "*") {
		ix.prefixes = append(ix.prefixes, r)
		return nil
	}
	ix.byState[r.code] = append(ix.byState[r.code], r)
	return nil
})

// classifyPostgres sorts the errors of PostgreSQL by the error table (by
// SQLSTATE), and words those that make the store unavailable.
func classifyPostgres(err error) verdict {
	if errors.Is(err, driver.ErrBadConn) {
		return verdictLost
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		var ce *pgconn.ConnectError
		if errors.As(err, &ce) { // not the network's (judgeNetwork came first): TLS, a refused startup
			return verdict{classUnavailable,
				"the database cannot be reached: " + ce.Error(),
				"check the address and the sslmode in store.dsn, and that the server accepts this client (pg_hba.conf)"}
		}
		return verdict{class: classOther}
	}
	name := doubleQuoted(pe.Message)
	return postgresRule(pe.Code, pe.Message).verdict(pe.Message, name, pgQuoteIdent(name), postgresMaxOpen)
}

// postgresRule returns the row of the error table for SQLSTATE code, or
// nil.
func postgresRule(code, msg string) *errorRule {
	if r := pick(postgresRules.byState[code], msg); r != nil {
		return r
	}
	for _, r := range postgresRules.prefixes {
		if strings.HasPrefix(code, strings.TrimSuffix(r.code, "*")) && pick([]*errorRule{r}, msg) != nil {
			return r
		}
	}
	return nil
}
