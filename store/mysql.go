package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"github.com/pressly/goose/v3"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/migrations"
)

// MySQL is a store in MySQL 5.7+/8.x, MariaDB 10.5+ or an engine that
// speaks the same SQL. Open it with OpenMySQL. It is safe for concurrent
// use. Its methods but Migrate are the same code as SQLite's.
type MySQL struct {
	db
	log *slog.Logger
	// lockWait bounds the wait for leafd's lock row (migratelock.go).
	lockWait time.Duration
}

// Pool settings for MySQL: enough connections for the allocator's loads and
// the admin routes, recycled often enough that a failover or a proxy that
// drops idle connections is noticed.
const (
	mysqlMaxOpen     = 16
	mysqlMaxIdle     = 4
	mysqlMaxLifetime = 5 * time.Minute
	mysqlMaxIdleTime = time.Minute
	// mysqlDialTimeout applies when the DSN sets no timeout=: a database
	// that cannot be reached should fail a request in seconds, not after
	// the operating system's TCP timeout.
	mysqlDialTimeout = 5 * time.Second
	// mysqlLockWaitSeconds is the session's innodb_lock_wait_timeout when
	// the DSN sets none (the server's default is 50 s).
	lockWaitParam        = "innodb_lock_wait_timeout"
	mysqlLockWaitSeconds = "5"
)

// migrateLock is the MySQL named lock that serialises the migrations of
// servers starting at once on one database; goose takes no lock of its own
// on MySQL.
const (
	migrateLock        = "leafd_migrate"
	migrateLockSeconds = 60
)

// OpenMySQL returns a store for the database dsn names, in the format of
// github.com/go-sql-driver/mysql (user:password@tcp(host:3306)/dbname?param=value).
// It does not connect: a database that is down does not stop a server from
// starting, and the first method that needs it reports it. Whatever the DSN
// says, times are read as UTC (parseTime=true, loc=UTC) and the session
// time zone is UTC, so that update_time means the same on every server.
// A DSN without timeout= gets a dial timeout of 5 seconds.
//
// Errors: a DSN (the first or a fallback) is empty, does not parse, or
// names no database.
func OpenMySQL(dsn string, opts ...Option) (*MySQL, error) {
	return openMySQL(&mysqlDialect, dsn, newOptions(opts))
}

func init() { register(&mysqlDialect) }

var _ Node = (*MySQL)(nil)

// mysqlDialect is the MySQL family's.
var mysqlDialect = dialect{
	driver:  "mysql",
	title:   "MySQL",
	example: "user:password@tcp(host:3306)/leaf?parseTime=true",
	claims:  mysqlDSN,
	check:   func(dsn string) error { _, err := mysqlConnector(dsn); return err },
	open: func(d *dialect, dsn string, o options) (Node, error) {
		return openMySQL(d, dsn, o)
	},
	rows:     mysqlRows,
	classify: classifyMySQL,
	refused: func(err error) bool {
		var me *mysql.MySQLError
		return errors.As(err, &me)
	},
	missingTable: func(err error) bool {
		var me *mysql.MySQLError
		return errors.As(err, &me) && me.Number == 1146 // ER_NO_SUCH_TABLE
	},
	goose:      goose.DialectMySQL,
	migrations: migrations.MySQL,
	// NOW(3) and UNIX_TIMESTAMP convert through the session time zone and
	// back, so the result is Unix time whatever that zone is.
	nowMs:        "CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)",
	lockSuffix:   " FOR UPDATE",
	shareSuffix:  " LOCK IN SHARE MODE",
	greatest:     "GREATEST",
	markByUpdate: true,
}

func openMySQL(d *dialect, dsn string, o options) (*MySQL, error) {
	connector, cluster, addr, err := openCluster(dsn, o, mysqlConnector, probeMySQL)
	if err != nil {
		return nil, err
	}
	sqlDB := sql.OpenDB(connector)
	sqlDB.SetMaxOpenConns(mysqlMaxOpen)
	sqlDB.SetMaxIdleConns(mysqlMaxIdle)
	sqlDB.SetConnMaxLifetime(mysqlMaxLifetime)
	sqlDB.SetConnMaxIdleTime(mysqlMaxIdleTime)
	return &MySQL{db: newDB(d, sqlx.NewDb(sqlDB, "mysql"), cluster, addr),
		log: o.log, lockWait: migrateLockSeconds * time.Second}, nil
}

// mysqlDSN reports whether dsn is written for MySQL: a mysql:// URL, or
// an address in tcp(…) or unix(…), even when go-sql-driver/mysql refuses
// the rest; or a DSN the driver parses with something before the database
// name (user@/leaf, tcp/leaf: a bare /leaf is a file's path as much as a
// DSN).
func mysqlDSN(dsn string) bool {
	lower := strings.ToLower(strings.TrimSpace(dsn))
	if strings.HasPrefix(lower, "mysql://") || strings.HasPrefix(lower, "tcp(") || strings.HasPrefix(lower, "unix(") ||
		strings.Contains(lower, "@tcp(") || strings.Contains(lower, "@unix(") {
		return true
	}
	_, err := mysql.ParseDSN(dsn)
	return err == nil && strings.LastIndexByte(dsn, '/') > 0
}

// unsafeCharsets are the character sets in which quoting a string into SQL
// is not safe (a multi-byte character can end in a backslash).
var unsafeCharsets = map[string]bool{"big5": true, "cp932": true, "gb2312": true, "gbk": true, "sjis": true}

// unsafeCharset returns the first character set of dsn's charset parameter
// that is in unsafeCharsets, or "". (The driver keeps the parameter to
// itself once parsed.)
func unsafeCharset(dsn string) string {
	// The parameters follow the database name, after the last slash: a
	// password may hold a '?' of its own.
	_, q, ok := strings.Cut(dsn[strings.LastIndex(dsn, "/")+1:], "?")
	if !ok {
		return ""
	}
	params, err := url.ParseQuery(q)
	if err != nil {
		return "" // the driver has already accepted it
	}
	for _, v := range params["charset"] {
		for _, cs := range strings.Split(v, ",") {
			if unsafeCharsets[strings.ToLower(strings.TrimSpace(cs))] {
				return cs
			}
		}
	}
	return ""
}

// mysqlConnector parses dsn and returns its connector, with the settings
// every leafd connection needs.
func mysqlConnector(dsn string) (clusterAddress, error) {
	if dsn == "" {
		return clusterAddress{}, errors.New("the MySQL DSN is empty: use user:password@tcp(host:3306)/dbname")
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return clusterAddress{}, fmt.Errorf("the MySQL DSN does not parse (use user:password@tcp(host:3306)/dbname): %w", err)
	}
	if cfg.DBName == "" {
		return clusterAddress{}, errors.New("the MySQL DSN names no database: put its name after the slash, user:password@tcp(host:3306)/dbname")
	}
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["time_zone"] = "'+00:00'"
	// A row lock held by someone else fails the statement after this many
	// seconds (unless the DSN says otherwise), well inside the allocator's
	// 10 s load timeout: the error then names the lock, where a timeout
	// would only say that the database did not answer.
	if _, ok := cfg.Params[lockWaitParam]; !ok {
		cfg.Params[lockWaitParam] = mysqlLockWaitSeconds
	}
	// RowsAffected then counts the rows the UPDATE matched, which is what
	// Allocate asks, even if a row were ever rewritten with its own value.
	cfg.ClientFoundRows = true
	if cfg.Timeout == 0 {
		cfg.Timeout = mysqlDialTimeout
	}
	// Statements go as text with their arguments quoted in by the driver
	// (numbers, validated tags, and descriptions escaped for the
	// connection's character set), not as server-side prepared statements:
	// one round trip instead of three, and on MariaDB Galera the
	// prepared-statement path sometimes loses the notice that another node's
	// write aborted the transaction, after which the COMMIT succeeds and two
	// servers hold the same range (seen under load with MariaDB 10.11 and
	// galera-4 26.4; TestGalera). Quoting is not safe in the multi-byte
	// character sets whose second bytes can be a backslash, so those are
	// refused.
	if cs := unsafeCharset(dsn); cs != "" {
		return clusterAddress{}, fmt.Errorf("the MySQL DSN sets charset=%s, which leafd does not support: leave charset out, or use utf8mb4", cs)
	}
	cfg.InterpolateParams = true
	// The driver would print to stderr, outside the server's structured log,
	// what the errors it returns already say.
	cfg.Logger = driverLogger{}
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return clusterAddress{}, fmt.Errorf("the MySQL DSN is not valid: %w", err)
	}
	return clusterAddress{name: cfg.Addr, c: connector}, nil
}

// Migrate applies the pending migrations of package migrations with goose.
// It holds the named lock leafd_migrate (GET_LOCK) meanwhile, so that
// servers starting at once on one database migrate one after the other;
// the others then find nothing to do. (On Galera the lock holds on one node
// only; servers migrating through different nodes at once are safe all the
// same: every migration runs again harmlessly, and the version table is
// mended if the race lost its first row.) A server that refuses GET_LOCK
// (Percona XtraDB Cluster with pxc_strict_mode=ENFORCING, Vitess without a
// reserved connection, a proxy) gets leafd's lock row instead (migratelock.go),
// or no lock at all when every migration is already applied. It is
// idempotent, and it succeeds on a database that already holds Java Leaf's
// leaf_alloc, leaving its rows as they are.
//
// Errors: store_unavailable when the database cannot be reached; an error
// without a code when the lock is not granted within 60 seconds or a
// migration fails.
func (s *MySQL) Migrate(ctx context.Context) error {
	conn, err := s.x.Conn(ctx)
	if err != nil {
		return s.Wrap(err, "migrate")
	}
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, ?)", migrateLock, migrateLockSeconds).Scan(&got); err != nil {
		conn.Close()
		if s.refusesNamedLock(err) {
			return s.migrateWithoutNamedLock(ctx, err)
		}
		return s.Wrap(err, "migrate: take the lock "+migrateLock)
	}
	defer releaseMigrateLock(ctx, conn)
	if !got.Valid || got.Int64 != 1 {
		return fmt.Errorf("store: mysql: migrate: the lock %s was not granted within %d seconds: another server may be migrating this database",
			migrateLock, migrateLockSeconds)
	}
	return s.migrate(ctx)
}

// migrate runs goose, the caller holding a migration lock (or knowing that
// there is nothing to do).
func (s *MySQL) migrate(ctx context.Context) error {
	return s.Wrap(s.write(ctx, func(ctx context.Context) error {
		err := s.up(ctx)
		// goose does not export this error; its text is matched.
		if err != nil && strings.Contains(err.Error(), "missing zero version migration") {
			// GET_LOCK holds on one node of a Galera cluster only: servers
			// starting at once through different nodes can create goose's
			// table together and lose its first row to the conflict, after
			// which goose refuses every run. Put the row back and run again;
			// every migration is written to run again harmlessly.
			if _, herr := s.x.ExecContext(ctx, healVersionTableSQL); herr != nil {
				return errors.Join(err, herr)
			}
			err = s.up(ctx)
		}
		return err
	}), "migrate")
}

// healVersionTableSQL gives goose's version table the row of version 0
// that goose writes when it creates the table, if the table has no row.
const healVersionTableSQL = `INSERT INTO goose_db_version (version_id, is_applied)
SELECT 0, TRUE FROM DUAL WHERE NOT EXISTS (SELECT 1 FROM goose_db_version)`

// releaseMigrateLock releases the named lock (if this session holds it) and
// hands the connection back. A connection whose release failed may still
// hold the lock, so it is discarded instead: closing the session releases
// the lock on the server.
func releaseMigrateLock(ctx context.Context, conn *sql.Conn) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	// SELECT rather than DO: Vitess takes the locking functions in a SELECT.
	var released sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT RELEASE_LOCK(?)", migrateLock).Scan(&released); err != nil {
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	}
	_ = conn.Close()
}

// driverLogger hands the driver's messages to slog's default logger at
// debug level.
type driverLogger struct{}

func (driverLogger) Print(v ...any) {
	slog.Debug("mysql driver: " + fmt.Sprint(v...))
}

// quoted returns what the first pair of single quotes in msg holds, as in
// the server's "Unknown database 'leafd'"; "" when there is none.
func quoted(msg string) string {
	_, rest, ok := strings.Cut(msg, "'")
	if !ok {
		return ""
	}
	name, _, ok := strings.Cut(rest, "'")
	if !ok {
		return ""
	}
	return name
}

// quoteIdent returns name as it can be typed into a MySQL statement:
// unchanged when it is a plain identifier, in backquotes otherwise.
func quoteIdent(name string) string {
	plain, digits := name != "", true
	for _, r := range name {
		if !(r == '_' || r == '$' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			plain = false
		}
		digits = digits && r >= '0' && r <= '9'
	}
	if plain && !digits { // a name of digits alone would read as a number
		return name
	}
	return "`" + strings.ReplaceAll(name, "`", "``") + "`"
}

// descriptionCharsetSQL reads the character set of leaf_alloc.description.
const descriptionCharsetSQL = `SELECT COALESCE(CHARACTER_SET_NAME, '') FROM information_schema.COLUMNS
WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'leaf_alloc' AND COLUMN_NAME = 'description'`

// descriptionCharset turns err, the failed write of a tag's description,
// into invalid_body when MySQL refused a character that the column's
// character set cannot hold (error 1366): Leaf's own DDL creates the table
// with CHARSET=utf8, three bytes at most, which has no emoji. leafd never
// alters Leaf's table, so the message gives the ALTER to run. Any other
// error is returned as it is.
func descriptionCharset(ctx context.Context, q sqlx.QueryerContext, err error) error {
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != 1366 || !strings.Contains(me.Message, "description") {
		return err
	}
	charset := "not one that holds it"
	var name string
	if qerr := q.QueryRowxContext(ctx, descriptionCharsetSQL).Scan(&name); qerr == nil && name != "" {
		charset = name
	}
	return leafd.Wrap(leafd.EInvalidBody, err, fmt.Sprintf("the description holds a character that the column "+
		"leaf_alloc.description cannot store: its character set is %s (emoji and other 4-byte UTF-8 characters need utf8mb4). "+
		"Leave such characters out, or have the table widened (leafd never alters Leaf's table): "+
		"ALTER TABLE leaf_alloc CONVERT TO CHARACTER SET utf8mb4", charset))
}

// mysqlRows are the MySQL family's rows of the error table (classify.go):
// MySQL, MariaDB, Galera, Percona XtraDB Cluster, Group Replication, TiDB
// and Vitess, by error number.
var mysqlRows = []errorRule{
	// MySQL, MariaDB, Galera, Percona XtraDB Cluster, Group Replication,
	// TiDB and Vitess: error numbers.
	{code: "1213", from: "MySQL, MariaDB, Galera, PXC, TiDB",
		name:  "ER_LOCK_DEADLOCK: a deadlock, or a Galera certification conflict (also at COMMIT)",
		class: classRetry, cause: abortedCause, hint: abortedHint},
	{code: "3101", from: "MySQL Group Replication",
		name:  "ER_TRANSACTION_ROLLBACK_DURING_COMMIT: a certification conflict",
		class: classRetry, cause: abortedCause, hint: abortedHint},
	{code: "1412", from: "MySQL, MariaDB",
		name:  "ER_TABLE_DEF_CHANGED: the table changed under the transaction's snapshot",
		class: classRetry, cause: "the database aborted the transaction: a table it read was changed meanwhile (a schema change)",
		hint: "try again once the schema change is over"},
	{code: "8002", from: "TiDB",
		name:  "a transaction holding SELECT … FOR UPDATE (a worker id's claim) met a write conflict at COMMIT and was rolled back",
		class: classRetry, cause: "TiDB kept aborting the transaction (write conflict of a SELECT … FOR UPDATE)", hint: abortedHint},
	{code: "8005", from: "TiDB",
		name:  "write conflict, txnStartTS is stale",
		class: classRetry, cause: "TiDB kept aborting the transaction (write conflict)", hint: abortedHint},
	{code: "8022", from: "TiDB",
		name:  "the transaction's commit failed and was rolled back",
		class: classRetry, cause: "TiDB kept failing the transaction's commit (rolled back each time)", hint: tidbHint},
	{code: "8027", from: "TiDB",
		name:  "the TiDB server's schema is out of date",
		class: classRetry, cause: "TiDB's schema information is out of date",
		hint: "check the network between the TiDB server and the PD leader"},
	{code: "8028", from: "TiDB",
		name:  "a table's schema changed while the transaction ran",
		class: classRetry, cause: "TiDB aborted the transaction: a table's schema changed while it ran", hint: "try again once the schema change is over"},
	{code: "9001", from: "TiDB",
		name:  "PD server timeout",
		class: classRetry, cause: "TiDB's placement driver (PD) did not answer in time",
		hint: "check the PD servers (status, monitoring, log) and the network between TiDB and PD"},
	{code: "9002", from: "TiDB",
		name:  "TiKV server timeout",
		class: classRetry, cause: "TiDB's storage (TiKV) did not answer in time",
		hint: "check the TiKV servers (status, monitoring, log) and the network between TiDB and TiKV"},
	{code: "9003", from: "TiDB",
		name:  "TiKV server is busy",
		class: classRetry, cause: "TiDB's storage (TiKV) is busy",
		hint: "check the load of the TiKV servers"},
	{code: "9004", from: "TiDB",
		name:  "resolve lock timeout: many transactions conflict on the same rows",
		class: classRetry, cause: "TiDB timed out resolving locks (many transactions conflict on the same rows)",
		hint: "try again; if it persists, fewer servers should load the same tag at once (a larger step)"},
	{code: "9005", from: "TiDB",
		name:  "a Region (Raft group) is unavailable: too few replicas, a busy or stopped TiKV",
		class: classRetry, cause: "TiDB's storage has a region unavailable",
		hint: "check that the TiKV servers are up and have their replicas"},
	{code: "9007", from: "TiDB",
		name:  "write conflict of an optimistic transaction (or of a lazy uniqueness check)",
		class: classRetry, cause: abortedCause, hint: abortedHint},
	{code: "SQLSTATE 40001", from: "any",
		name:  "serialization failure, under an error number no other row names",
		class: classRetry, cause: abortedCause, hint: abortedHint},

	{code: "1205", from: "MySQL, MariaDB, Galera, PXC, TiDB",
		name:  "ER_LOCK_WAIT_TIMEOUT: a row lock wait timed out (innodb_lock_wait_timeout, 5 s)",
		class: classLocked, cause: "the row is locked by another transaction (lock wait timeout); the database answers",
		hint: "retry once the lock is released"},
	{code: "1062", from: "all",
		name:  "ER_DUP_ENTRY: a primary key was hit",
		class: classDuplicate},

	{code: "1045", from: "all",
		name:  "ER_ACCESS_DENIED_ERROR: the login was refused",
		class: classUnavailable, cause: "the database refused the login ({message})",
		hint: "check the user and password in store.dsn"},
	{code: "1044", from: "all",
		name:  "ER_DBACCESS_DENIED_ERROR: the user may not use the database",
		class: classUnavailable, cause: "the user in store.dsn may not use the database ({message})",
		hint: "grant it privileges on the database (GRANT ALL ON <database>.* TO <user>) or check the user and database name in store.dsn"},
	{code: "1049", from: "all",
		name:  "ER_BAD_DB_ERROR: the database does not exist",
		class: classUnavailable, cause: "database {quoted} does not exist",
		hint: "create it with CREATE DATABASE {ident}, or fix the database name in store.dsn"},
	{code: "1290", from: "MySQL, MariaDB",
		name:  "ER_OPTION_PREVENTS_STATEMENT: --read-only, a replica",
		class: classUnavailable, cause: readOnlyCause, hint: readOnlyHint},
	{code: "1792", from: "MySQL, MariaDB",
		name:  "ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION",
		class: classUnavailable, cause: readOnlyCause, hint: readOnlyHint},
	{code: "1836", from: "MySQL, MariaDB",
		name:  "ER_READ_ONLY_MODE",
		class: classUnavailable, cause: readOnlyCause, hint: readOnlyHint},
	{code: "1040", from: "all",
		name:  "ER_CON_COUNT_ERROR: max_connections reached",
		class: classUnavailable, cause: "the database has too many connections (max_connections)",
		hint: "raise max_connections or close other clients' connections; each leafd server opens at most {max_open}"},
	{code: "1203", from: "MySQL, MariaDB, Vitess",
		name:  "ER_TOO_MANY_USER_CONNECTIONS: the user's connection limit, or Vitess's pool exhausted",
		class: classUnavailable, cause: "the database has too many connections for this user ({message})",
		hint: "raise the user's max_user_connections (or Vitess's pool sizes); each leafd server opens at most {max_open}"},
	{code: "1041", from: "MySQL, MariaDB, Vitess",
		name:  "ER_OUT_OF_RESOURCES: out of memory, or Vitess's transaction throttler",
		class: classUnavailable, cause: "the database is out of resources ({message})",
		hint: "retry; see the database's load (Vitess: its transaction throttler)"},
	{code: "1053", from: "all",
		name:  "ER_SERVER_SHUTDOWN",
		class: classUnavailable, cause: "the database server is shutting down",
		hint: "retry once it is back, or list another node of the cluster in store.fallback_dsns"},
	{code: "3168", from: "MySQL, Vitess",
		name:  "ER_SERVER_ISNT_AVAILABLE",
		class: classUnavailable, cause: "the database server is not available ({message})",
		hint: "retry once it is back, or list another address in store.fallback_dsns"},
	{code: "1047", match: "wsrep", from: "Galera, PXC",
		name:  "ER_UNKNOWN_COM_ERROR from a node that is not synced (\"WSREP has not yet prepared node\")",
		class: classUnavailable, cause: galeraCause, hint: galeraHint},
	{code: "1047", from: "Vitess",
		name:  "ER_UNKNOWN_COM_ERROR: the session or transaction is gone on the server side (a Vitess reparent)",
		class: classUnavailable, cause: "the database no longer knows the session or its transaction ({message})",
		hint: "retry; a primary that changed (a reparent) loses the transactions in flight"},
	{code: "3100", from: "MySQL Group Replication",
		name:  "ER_RUN_HOOK_ERROR: the member is not online",
		class: classUnavailable, cause: "the Group Replication member is not online",
		hint: "point store.dsn at an online member or list the others in store.fallback_dsns"},
	{code: "1152", from: "all", name: "ER_ABORTING_CONNECTION",
		class: classUnavailable, cause: lostCause, hint: lostHint},
	{code: "1158", from: "all", name: "ER_NET_READ_ERROR",
		class: classUnavailable, cause: lostCause, hint: lostHint},
	{code: "1159", from: "all", name: "ER_NET_READ_INTERRUPTED",
		class: classUnavailable, cause: lostCause, hint: lostHint},
	{code: "1160", from: "all", name: "ER_NET_ERROR_ON_WRITE",
		class: classUnavailable, cause: lostCause, hint: lostHint},
	{code: "1161", from: "all", name: "ER_NET_WRITE_INTERRUPTED",
		class: classUnavailable, cause: lostCause, hint: lostHint},
	{code: "4031", from: "MySQL 8.0.24+",
		name:  "ER_CLIENT_INTERACTION_TIMEOUT: the server closed an idle connection",
		class: classUnavailable, cause: lostCause, hint: lostHint},
	{code: "1927", from: "MariaDB",
		name:  "ER_CONNECTION_KILLED",
		class: classUnavailable, cause: "the database killed the connection",
		hint: "a KILL, or the server is shutting down; retry"},
	{code: "1317", from: "all; Vitess for a cancelled, timed-out or aborted request",
		name:  "ER_QUERY_INTERRUPTED",
		class: classUnavailable, cause: "the database interrupted the query",
		hint: "a KILL QUERY, a statement time limit or a shutdown; retry"},
	{code: "1969", from: "MariaDB",
		name:  "ER_STATEMENT_TIMEOUT: max_statement_time exceeded",
		class: classUnavailable, cause: "the database interrupted the query (max_statement_time)",
		hint: "retry; if it persists, raise max_statement_time for leafd's user"},
	{code: "3024", from: "MySQL",
		name:  "ER_QUERY_TIMEOUT: max_execution_time exceeded",
		class: classUnavailable, cause: "the database interrupted the query (max_execution_time)",
		hint: "retry; if it persists, raise max_execution_time for leafd's user"},
	{code: "1180", from: "MySQL, MariaDB, Galera",
		name:  "ER_ERROR_DURING_COMMIT: the storage engine failed the COMMIT",
		class: classUnavailable, cause: "the database could not commit the transaction ({message})",
		hint: "see the database's log (a full disk, a storage engine error)"},

	{code: "1105", from: "PXC, Vitess, TiDB",
		name:  "ER_UNKNOWN_ERROR: among others PXC's refusal of GET_LOCK under pxc_strict_mode=ENFORCING; migrations then take leafd's lock row",
		class: classOther},
	{code: "1235", from: "Vitess, TiDB",
		name:  "ER_NOT_SUPPORTED_YET: a statement the proxy or engine does not support; for GET_LOCK, migrations then take leafd's lock row",
		class: classOther},
	{code: "1146", from: "all",
		name:  "ER_NO_SUCH_TABLE: the database was never migrated",
		class: classOther},
	{code: "8004", from: "TiDB",
		name:  "the transaction is too large",
		class: classOther},
	{code: "9006", from: "TiDB",
		name:  "GC life time is shorter than the transaction's duration",
		class: classOther},
}

// mysqlRules indexes mysqlRows by error number and SQLSTATE.
var mysqlRules = indexRules(mysqlRows, func(ix *ruleIndex, r *errorRule) error {
	if state, ok := strings.CutPrefix(r.code, "SQLSTATE "); ok {
		ix.byState[state] = append(ix.byState[state], r)
		return nil
	}
	n, err := strconv.Atoi(r.code)
	if err != nil {
		return fmt.Errorf("MySQL code %q is not a number", r.code)
	}
	ix.byNumber[n] = append(ix.byNumber[n], r)
	return nil
})

// classifyMySQL sorts the errors of the MySQL family (MySQL, MariaDB,
// Galera, PXC, TiDB, Vitess) by the error table, and words those that make
// the store unavailable. The server's own text is quoted where it names
// what leafd cannot know (the user and host of a refused login); it never
// holds the password.
func classifyMySQL(err error) verdict {
	if errors.Is(err, mysql.ErrInvalidConn) || errors.Is(err, driver.ErrBadConn) {
		return verdictLost
	}
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		return verdict{class: classOther}
	}
	return mysqlRule(me).verdict(me.Message, quoted(me.Message), quoteIdent(quoted(me.Message)), mysqlMaxOpen)
}

// mysqlRule returns the row of the error table for me, or nil.
func mysqlRule(me *mysql.MySQLError) *errorRule {
	if r := pick(mysqlRules.byNumber[int(me.Number)], me.Message); r != nil {
		return r
	}
	return pick(mysqlRules.byState[string(me.SQLState[:])], me.Message)
}
