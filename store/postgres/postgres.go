// Package postgres is the PostgreSQL engine of package store: PostgreSQL 12
// or later, and engines that speak its dialect and honour its row locks,
// through github.com/jackc/pgx/v5. It registers itself as store.driver
// "postgres"; import it (or store/all) for its side effect.
package postgres

import (
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"embed"
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/leafd/leafd/store/internal/engine"
)

// lockTimeout is the session's lock_timeout when the DSN sets none
// (PostgreSQL's default is to wait for ever): a row lock held by someone
// else then fails the statement with an error that names the lock, well
// inside the allocator's 10 s load timeout.
const lockTimeout = "5s"

// pgMigrateLock is the key of the advisory lock that serialises the
// migrations of servers starting at once on one database: the bytes of
// "leafd_mg" read as a big-endian integer. goose takes no lock of its own
// unless asked.
const (
	pgMigrateLock int64 = 0x6c656166645f6d67
	// pgClaimLock ("leafd_wk") serialises worker id claims (its dialect's ClaimLock).
	pgClaimLock          int64 = 0x6c656166645f776b
	pgMigrateLockTimeout       = 60 * time.Second
	pgMigrateLockPoll          = 100 * time.Millisecond
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

func init() { engine.Register(&dialect) }

// dialect is PostgreSQL's. Its DSN is a URL
// (postgres://user:password@host:5432/dbname?sslmode=disable) or key=value
// pairs (host=… dbname=…), as pgx reads them. Whatever the DSN says, the
// session time zone is UTC; it gets a lock_timeout of 5 s and a
// connect_timeout of 5 s unless it sets them.
var dialect = engine.Dialect{
	Driver:  "postgres",
	Title:   "PostgreSQL",
	Example: "postgres://user:password@host:5432/leaf",
	Claims:  claims,
	Check:   func(dsn string) error { _, err := parseDSN(dsn); return err },
	Connect: connect,
	Secrets: secrets,
	// pgx's `user=leafd database=leaf` before every failed connection;
	// PostgreSQL's role "leafd", user "leafd" and database "leaf" (role
	// "leafd" does not exist; no pg_hba.conf entry for host "10.0.0.9", user
	// "leafd", database "leaf"), and the names it writes without quotes
	// (permission denied for database leaf).
	Redact: []engine.Redaction{
		{Pattern: regexp.MustCompile("`user=[^`]* database=[^`]*`"), With: "`user=… database=…`"},
		{Pattern: regexp.MustCompile(`(?i)\b(role|user|database) "(?:[^"]|"")*"`), With: `$1 "…"`},
		{Pattern: regexp.MustCompile(`(?i)\b(for database|of database) [^\s"(),;:]+`), With: "$1 …"},
	},
	Probe: probe,
	// "pgx" is the name sqlx knows for '$1' placeholders.
	Bind:     "pgx",
	Pool:     engine.ServerPool,
	Rows:     rows,
	Classify: classify,
	Refused: func(err error) bool {
		var pe *pgconn.PgError
		return errors.As(err, &pe)
	},
	MissingTable: func(err error) bool {
		var pe *pgconn.PgError
		return errors.As(err, &pe) && pe.Code == "42P01" // undefined_table
	},
	Goose:      goose.DialectPostgres,
	Migrations: engine.Sub(migrationFiles, "migrations"),
	Migrate:    migrate,
	// clock_timestamp() is the time now; now() would be the time the
	// transaction began.
	NowMs:       "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)",
	NowUs:       "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000000 AS BIGINT)",
	LockSuffix:  " FOR UPDATE",
	ShareSuffix: " FOR SHARE",
	Greatest:    "GREATEST",
	// PostgreSQL takes no gap locks, so claims that both find worker id n
	// free would otherwise both insert it. Released at COMMIT or ROLLBACK.
	ClaimLock: fmt.Sprintf("SELECT pg_advisory_xact_lock(%d)", pgClaimLock),
}

// isURL reports whether dsn is a postgres:// or postgresql:// URL,
// the form pgx reads as a URL (here in any case: the intent is plain).
func isURL(dsn string) bool {
	lower := strings.ToLower(strings.TrimSpace(dsn))
	return strings.HasPrefix(lower, "postgres://") || strings.HasPrefix(lower, "postgresql://")
}

// claims reports whether dsn is written for PostgreSQL: a URL, or
// libpq's keyword=value pairs, which begin, as libpq and pgx read them,
// with a keyword (letters, digits and underscores), optional spaces and
// '=': host = db dbname = leaf as much as host=db. Whether the rest parses
// is for parseDSN to say.
func claims(dsn string) bool {
	if isURL(dsn) {
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

// parseDSN parses dsn with the settings every leafd connection
// needs.
func parseDSN(dsn string) (*pgx.ConnConfig, error) {
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
		cfg.RuntimeParams["lock_timeout"] = lockTimeout
	}
	cfg.ConnectTimeout = cmp.Or(cfg.ConnectTimeout, engine.DialTimeout)
	return cfg, nil
}

// connect parses dsn and returns its address.
func connect(dsn string) (engine.Address, error) {
	cfg, err := parseDSN(dsn)
	if err != nil {
		return engine.Address{}, err
	}
	name := cfg.Host // a socket directory
	if !strings.HasPrefix(name, "/") {
		name = net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
	}
	return engine.Address{Name: name, Connector: connector{stdlib.GetConnector(*cfg)}}, nil
}

// connector is pgx's, whose connections answer BeginTx with
// driver.ErrBadConn when pgx found the connection gone before it sent
// anything (pgconn.SafeToRetry), as pgx's own ExecContext and
// QueryContext do: database/sql then starts the transaction on another
// connection, where it would otherwise fail on each pooled connection
// whose socket went away while it was idle (the server restarted, a proxy
// or a move to a fallback address dropped it).
type connector struct{ driver.Connector }

func (c connector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return retryConn{conn.(*stdlib.Conn)}, nil
}

// retryConn is a connection of connector.
type retryConn struct{ *stdlib.Conn }

func (c retryConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	tx, err := c.Conn.BeginTx(ctx, opts)
	if err != nil && pgconn.SafeToRetry(err) {
		return nil, driver.ErrBadConn
	}
	return tx, err
}

// Why a probe refuses a PostgreSQL node that answered.
var (
	errStandby = &engine.Refusal{Reason: "the server is a standby (pg_is_in_recovery() is true): it replicates a primary and refuses writes",
		Verdict: engine.ReadOnly}
	errReadOnlySession = &engine.Refusal{Reason: "the session is read-only (transaction_read_only is on): default_transaction_read_only is set for this server, database or user",
		Verdict: engine.ReadOnly}
)

// probe returns nil when conn's PostgreSQL node accepts writes: it
// is not a standby, and its sessions are not read-only.
func probe(ctx context.Context, conn driver.QueryerContext) error {
	standby, err := engine.QueryValue(ctx, conn, "SELECT pg_is_in_recovery()", 0)
	if err != nil {
		return err
	}
	if standby == "true" {
		return errStandby
	}
	readOnly, err := engine.QueryValue(ctx, conn, "SHOW transaction_read_only", 0)
	if err != nil {
		return err
	}
	if !engine.IsOff(readOnly) {
		return errReadOnlySession
	}
	return nil
}

// migrate applies the pending migrations with goose.
// It holds an advisory lock meanwhile, so that servers starting at once on
// one database migrate one after the other; the others then find nothing
// to do. It is idempotent, and it succeeds on a database that already holds
// a leaf_alloc table of Leaf's columns, leaving its rows as they are.
//
// Errors: store_unavailable when the database cannot be reached; an error
// without a code when the lock is not granted within 60 seconds or a
// migration fails.
func migrate(ctx context.Context, m engine.Migrator) error {
	conn, err := m.DB().Conn(ctx)
	if err != nil {
		return m.Wrap(err, "migrate")
	}
	defer engine.ReleaseLock(ctx, conn, "SELECT pg_advisory_unlock($1)", pgMigrateLock)
	if err := takeAdvisoryLock(ctx, conn); err != nil {
		return m.Wrap(err, "migrate")
	}
	return m.Wrap(m.Write(ctx, m.Up), "migrate")
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
		if err := engine.Sleep(ctx, pgMigrateLockPoll); err != nil {
			return err
		}
	}
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

// rows are PostgreSQL's rows of the error table (store/internal/engine/classify.go), by
// SQLSTATE.
var rows = []engine.Rule{
	{Code: "40001", From: "PostgreSQL",
		Name: "serialization_failure", Class: engine.ClassRetry, Cause: engine.AbortedCause, Hint: engine.AbortedHint},
	{Code: "40P01", From: "PostgreSQL",
		Name: "deadlock_detected", Class: engine.ClassRetry, Cause: engine.AbortedCause, Hint: engine.AbortedHint},
	{Code: "55P03", From: "PostgreSQL",
		Name:  "lock_not_available: lock_timeout (5 s) passed",
		Class: engine.ClassLocked, Cause: "the row is locked by another transaction (lock_timeout); the database answers",
		Hint: "retry once the lock is released"},
	{Code: "23505", From: "PostgreSQL",
		Name: "unique_violation", Class: engine.ClassDuplicate},
	{Code: "28P01", From: "PostgreSQL",
		Name:  "invalid_password",
		Class: engine.ClassUnavailable, Cause: "the database refused the login ({message})",
		Hint: "check the user and password in store.dsn, and pg_hba.conf on the server"},
	{Code: "28000", From: "PostgreSQL",
		Name:  "invalid_authorization_specification",
		Class: engine.ClassUnavailable, Cause: "the database refused the login ({message})",
		Hint: "check the user and password in store.dsn, and pg_hba.conf on the server"},
	{Code: "3D000", From: "PostgreSQL",
		Name:  "invalid_catalog_name: the database does not exist",
		Class: engine.ClassUnavailable, Cause: "database {ident} does not exist",
		Hint: "create it with CREATE DATABASE {ident}, or fix the database name in store.dsn"},
	{Code: "42501", From: "PostgreSQL",
		Name:  "insufficient_privilege",
		Class: engine.ClassUnavailable, Cause: "the user in store.dsn lacks a privilege ({message})",
		Hint: "grant it what leafd needs (GRANT ALL ON SCHEMA public and ON ALL TABLES IN SCHEMA public TO <user>) or check the user in store.dsn"},
	{Code: "25006", From: "PostgreSQL",
		Name:  "read_only_sql_transaction: a standby, or a read-only session",
		Class: engine.ClassUnavailable, Cause: engine.ReadOnlyCause, Hint: engine.ReadOnlyHint},
	{Code: "53300", From: "PostgreSQL",
		Name:  "too_many_connections",
		Class: engine.ClassUnavailable, Cause: "the database has too many connections (max_connections)",
		Hint: "raise max_connections or close other clients' connections; each leafd server opens at most {max_open}"},
	{Code: "57P01", From: "PostgreSQL",
		Name:  "admin_shutdown",
		Class: engine.ClassUnavailable, Cause: "the database server is shutting down or restarting",
		Hint: "retry once it is back, or list another server of the cluster in store.fallback_dsns"},
	{Code: "57P02", From: "PostgreSQL",
		Name:  "crash_shutdown",
		Class: engine.ClassUnavailable, Cause: "the database server is shutting down or restarting",
		Hint: "retry once it is back, or list another server of the cluster in store.fallback_dsns"},
	{Code: "57P03", From: "PostgreSQL",
		Name:  "cannot_connect_now: starting up, or in recovery",
		Class: engine.ClassUnavailable, Cause: "the database server is starting up and does not accept connections yet",
		Hint: "retry in a moment"},
	{Code: "57014", From: "PostgreSQL",
		Name:  "query_canceled: statement_timeout, or pg_cancel_backend",
		Class: engine.ClassUnavailable, Cause: "the database cancelled the statement (statement_timeout, or a cancel by an administrator)",
		Hint: "retry; if it persists, raise statement_timeout for leafd's user"},
	{Code: "53100", From: "PostgreSQL",
		Name:  "disk_full",
		Class: engine.ClassUnavailable, Cause: "the database's disk is full", Hint: "free space on the database server"},
	{Code: "40003", From: "PostgreSQL",
		Name:  "statement_completion_unknown: the outcome of the statement is unknown",
		Class: engine.ClassUnavailable, Cause: "the database could not tell whether the statement completed",
		Hint: "retry; whatever the statement did, leafd does not use it"},
	{Code: "57P05", From: "PostgreSQL 14+",
		Name: "idle_session_timeout", Class: engine.ClassUnavailable, Cause: engine.LostCause, Hint: engine.LostHint},
	{Code: "25P03", From: "PostgreSQL",
		Name: "idle_in_transaction_session_timeout", Class: engine.ClassUnavailable, Cause: engine.LostCause, Hint: engine.LostHint},
	{Code: "08*", From: "PostgreSQL",
		Name: "connection_exception and its subclasses", Class: engine.ClassUnavailable, Cause: engine.LostCause, Hint: engine.LostHint},
	{Code: "42P01", From: "PostgreSQL",
		Name: "undefined_table: the database was never migrated", Class: engine.ClassOther},
}

// rules indexes rows by SQLSTATE and class.
var rules = engine.IndexRules(rows, func(ix *engine.RuleIndex, r *engine.Rule) error {
	if strings.HasSuffix(r.Code, "*") {
		ix.Prefixes = append(ix.Prefixes, r)
		return nil
	}
	ix.ByState[r.Code] = append(ix.ByState[r.Code], r)
	return nil
})

// classify sorts the errors of PostgreSQL by the error table (by
// SQLSTATE), and words those that make the store unavailable.
func classify(err error) engine.Verdict {
	// pgx answers ErrConnClosed on a pooled connection whose socket went
	// away while it was idle (the server restarted, a proxy or failover
	// dropped it), as it starts a transaction there.
	if errors.Is(err, driver.ErrBadConn) || errors.Is(err, pgconn.ErrConnClosed) {
		return engine.Lost
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		if ce, ok := errors.AsType[*pgconn.ConnectError](err); ok { // not the network's (judgeNetwork came first): TLS, a refused startup
			return engine.Verdict{Class: engine.ClassUnavailable,
				Cause: "the database cannot be reached: " + ce.Error(),
				Hint:  "check the address and the sslmode in store.dsn, and that the server accepts this client (pg_hba.conf)"}
		}
		return engine.Verdict{Class: engine.ClassOther}
	}
	name := engine.Quoted(pe.Message, `"`) // database "leafd" does not exist
	return rule(pe.Code, pe.Message).Verdict(pe.Message, name, pgQuoteIdent(name), engine.ServerPool.MaxOpen)
}

// rule returns the row of the error table for SQLSTATE code, or
// nil.
func rule(code, msg string) *engine.Rule {
	if r := engine.Pick(rules.ByState[code], msg); r != nil {
		return r
	}
	for _, r := range rules.Prefixes {
		if strings.HasPrefix(code, strings.TrimSuffix(r.Code, "*")) && engine.Pick([]*engine.Rule{r}, msg) != nil {
			return r
		}
	}
	return nil
}

// secrets returns where dsn holds secrets as pgx would read it: the
// password of a URL and the secret parameters, or the secret values among
// keyword=value pairs, also where they only have that shape
// (ssl-mode=disable host=db password=secret), which PostgreSQL would not
// read but a message may quote.
func secrets(dsn string) [][2]int {
	if isURL(dsn) {
		return urlSecrets(dsn)
	}
	if claims(dsn) || strings.Contains(dsn, "=") && strings.ContainsAny(dsn, " \t\n\r\v\f") {
		return keywordSecrets(dsn)
	}
	return nil
}

// secretKeys are the keys of a PostgreSQL DSN whose values are secrets.
var secretKeys = map[string]bool{"password": true, "sslpassword": true}

// urlSecrets finds the password of a URL's user and the secrets among its
// query parameters. pgx ends the user and password at the first '@' before
// any '/', so a '?' or '#' may be in the password; the password runs to
// the last such '@', in case it holds one too. The parameters are read
// from the first '?' after the password, and from the first '?' of all.
func urlSecrets(dsn string) (spans [][2]int) {
	scheme := strings.Index(dsn, "://") + len("://")
	host := dsn[scheme:]
	if i := strings.IndexByte(host, '/'); i >= 0 {
		host = host[:i]
	}
	after := 0
	if at := strings.LastIndexByte(host, '@'); at >= 0 {
		if colon := strings.IndexByte(host[:at], ':'); colon >= 0 && colon+1 < at {
			spans = append(spans, [2]int{scheme + colon + 1, scheme + at})
		}
		after = scheme + at
	}
	for _, from := range []int{0, after} {
		q := strings.IndexByte(dsn[from:], '?')
		if q < 0 {
			continue
		}
		pos := from + q + 1
		for _, p := range strings.Split(dsn[pos:], "&") {
			key, _, ok := strings.Cut(p, "=")
			name, err := url.QueryUnescape(key) // pgx unescapes the key: pass%77ord is password
			if err != nil {
				name = key
			}
			if ok && secretKeys[strings.ToLower(name)] {
				spans = append(spans, [2]int{pos + len(key) + 1, pos + len(p)})
			}
			pos += len(p) + 1
		}
	}
	return spans
}

// keywordSecrets finds the secrets among libpq's keyword=value pairs, read
// as libpq reads them: spaces around '=', values quoted with ' and escaped
// with \. What follows a pair it cannot read is a secret whole.
func keywordSecrets(dsn string) (spans [][2]int) {
	const space = " \t\n\r\v\f"
	pos := 0
	for {
		rest := strings.TrimLeft(dsn[pos:], space)
		pos = len(dsn) - len(rest)
		if rest == "" {
			return spans
		}
		eq := strings.IndexByte(rest, '=')
		if eq < 0 {
			return append(spans, [2]int{pos, len(dsn)})
		}
		key := strings.TrimSpace(rest[:eq])
		value := strings.TrimLeft(rest[eq+1:], space)
		at := len(dsn) - len(value)
		n, ok := valueLen(value)
		if !ok {
			return append(spans, [2]int{at, len(dsn)})
		}
		if secretKeys[key] {
			spans = append(spans, [2]int{at, at + n})
		}
		pos = at + n
	}
}

// valueLen returns the length of the value that starts s in libpq's
// keyword=value format, and false when a quoted value does not end.
func valueLen(s string) (int, bool) {
	if strings.HasPrefix(s, "'") {
		for i := 1; i < len(s); i++ {
			switch s[i] {
			case '\\':
				i++
			case '\'':
				return i + 1, true
			}
		}
		return 0, false
	}
	i := 0
	for i < len(s) && !strings.ContainsRune(" \t\n\r\v\f", rune(s[i])) {
		if s[i] == '\\' {
			i++
		}
		i++
	}
	return min(i, len(s)), true
}
