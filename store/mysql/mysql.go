// Package mysql is the engine of package store for the MySQL family: MySQL
// 5.7+/8.x, MariaDB 10.5+, Galera, Percona XtraDB Cluster, TiDB and Vitess,
// through github.com/go-sql-driver/mysql. It registers itself as
// store.driver "mysql"; import it (or store/all) for its side effect.
package mysql

import (
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"embed"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"github.com/pressly/goose/v3"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/store/internal/engine"
)

const (
	// lockWaitSeconds is the session's innodb_lock_wait_timeout when the
	// DSN sets none (the server's default is 50 s).
	lockWaitParam   = "innodb_lock_wait_timeout"
	lockWaitSeconds = "5"
)

// migrateLock is the MySQL named lock that serialises the migrations of
// servers starting at once on one database; goose takes no lock of its own
// on MySQL.
const (
	migrateLock        = "leafd_migrate"
	migrateLockSeconds = 60
)

// nowMs is the database's clock in Unix milliseconds. NOW(3) and
// UNIX_TIMESTAMP convert through the session time zone and back, so the
// result is Unix time whatever that zone is.
const nowMs = "CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)"

// nowUs is the database's clock in Unix microseconds. UTC_TIMESTAMP does
// not depend on the session time zone, and TIMESTAMPDIFF of two DATETIMEs
// is plain arithmetic: no local time is converted back, which in a zone's
// repeated hour (the end of summer time) could be either of two instants.
const nowUs = "TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))"

//go:embed migrations/*.sql
var migrationFiles embed.FS

func init() { engine.Register(&dialect) }

// dialect is the MySQL family's: MySQL 5.7+/8.x, MariaDB 10.5+, Galera and
// the engines that speak the same SQL, through
// github.com/go-sql-driver/mysql. Its DSN is the driver's
// (user:password@tcp(host:3306)/dbname?param=value). Whatever the DSN says,
// times are read as UTC (parseTime=true, loc=UTC) and the session time
// zone is UTC, so that update_time means the same on every server; a DSN
// without timeout= gets a dial timeout of 5 seconds.
var dialect = engine.Dialect{
	Driver:  "mysql",
	Title:   "MySQL",
	Example: "user:password@tcp(host:3306)/leaf?parseTime=true",
	Claims:  claims,
	Check:   func(dsn string) error { _, err := connect(dsn); return err },
	Connect: connect,
	Secrets: secrets,
	// The account MySQL quotes as 'user'@'host' (Access denied for user
	// 'leafd'@'10.0.0.9' …), and the database it quotes as 'leaf' (Unknown
	// database 'leaf') and leafd as `leaf` (CREATE DATABASE `leaf`).
	Redact: []engine.Redaction{
		{Pattern: regexp.MustCompile(`'[^']*'@'[^']*'`), With: "'…'@'…'"},
		{Pattern: regexp.MustCompile("(?i)\\b(database) (?:'[^']*'|`[^`]*`)"), With: "$1 …"},
	},
	Probe:    probe,
	Bind:     "mysql",
	Pool:     engine.ServerPool,
	Rows:     rows,
	Classify: classify,
	Refused: func(err error) bool {
		var me *mysql.MySQLError
		return errors.As(err, &me)
	},
	MissingTable: func(err error) bool {
		var me *mysql.MySQLError
		return errors.As(err, &me) && me.Number == 1146 // ER_NO_SUCH_TABLE
	},
	WriteError:  descriptionCharset,
	Goose:       goose.DialectMySQL,
	Migrations:  engine.Sub(migrationFiles, "migrations"),
	Migrate:     migrate,
	NowMs:       nowMs,
	NowUs:       nowUs,
	LockSuffix:  " FOR UPDATE",
	ShareSuffix: " LOCK IN SHARE MODE",
	Greatest:    "GREATEST",
	// A tag's high-water mark is raised by making sure its row exists,
	// locking it, and updating it: an upsert's gap locks would deadlock
	// the loads of different tags.
	Marks: &engine.MarkSQL{
		Ensure: `INSERT INTO leafd_tag_highwater (biz_tag, max_id) VALUES (?, 0) ON DUPLICATE KEY UPDATE max_id = max_id`,
		Raise:  `UPDATE leafd_tag_highwater SET max_id = ?, update_time = CURRENT_TIMESTAMP WHERE biz_tag = ?`,
		Copy:   `INSERT INTO leafd_tag_highwater (biz_tag, max_id) VALUES (?, ?) ON DUPLICATE KEY UPDATE max_id = GREATEST(max_id, ?)`,
	},
}

// claims reports whether dsn is written for MySQL: a mysql:// URL, or
// an address in tcp(…) or unix(…), even when go-sql-driver/mysql refuses
// the rest; or a DSN the driver parses with something before the database
// name (user@/leaf, tcp/leaf: a bare /leaf is a file's path as much as a
// DSN).
func claims(dsn string) bool {
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

// connect parses dsn and returns its address, with the settings every
// leafd connection needs.
func connect(dsn string) (engine.Address, error) {
	if dsn == "" {
		return engine.Address{}, errors.New("the MySQL DSN is empty: use user:password@tcp(host:3306)/dbname")
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return engine.Address{}, fmt.Errorf("the MySQL DSN does not parse (use user:password@tcp(host:3306)/dbname): %w", err)
	}
	if cfg.DBName == "" {
		return engine.Address{}, errors.New("the MySQL DSN names no database: put its name after the slash, user:password@tcp(host:3306)/dbname")
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
		cfg.Params[lockWaitParam] = lockWaitSeconds
	}
	// RowsAffected then counts the rows the UPDATE matched, which is what
	// Allocate asks, even if a row were ever rewritten with its own value.
	cfg.ClientFoundRows = true
	cfg.Timeout = cmp.Or(cfg.Timeout, engine.DialTimeout)
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
		return engine.Address{}, fmt.Errorf("the MySQL DSN sets charset=%s, which leafd does not support: leave charset out, or use utf8mb4", cs)
	}
	cfg.InterpolateParams = true
	// The driver would print to stderr, outside the server's structured log,
	// what the errors it returns already say.
	cfg.Logger = driverLogger{}
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return engine.Address{}, fmt.Errorf("the MySQL DSN is not valid: %w", err)
	}
	return engine.Address{Name: cfg.Addr, Connector: connector}, nil
}

// migrate applies the pending migrations with goose.
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
func migrate(ctx context.Context, m engine.Migrator) error {
	conn, err := m.DB().Conn(ctx)
	if err != nil {
		return m.Wrap(err, "migrate")
	}
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, ?)", migrateLock, migrateLockSeconds).Scan(&got); err != nil {
		conn.Close()
		if refusesNamedLock(m, err) {
			return migrateWithoutNamedLock(ctx, m, err)
		}
		return m.Wrap(err, "migrate: take the lock "+migrateLock)
	}
	// SELECT rather than DO: Vitess takes the locking functions in a SELECT.
	defer engine.ReleaseLock(ctx, conn, "SELECT RELEASE_LOCK(?)", migrateLock)
	if !got.Valid || got.Int64 != 1 {
		return fmt.Errorf("store: mysql: migrate: the lock %s was not granted within %d seconds: another server may be migrating this database",
			migrateLock, migrateLockSeconds)
	}
	return up(ctx, m)
}

// up runs goose, the caller holding a migration lock (or knowing that
// there is nothing to do).
func up(ctx context.Context, m engine.Migrator) error {
	return m.Wrap(m.Write(ctx, func(ctx context.Context) error {
		err := m.Up(ctx)
		// goose does not export this error; its text is matched.
		if err != nil && strings.Contains(err.Error(), "missing zero version migration") {
			// GET_LOCK holds on one node of a Galera cluster only: servers
			// starting at once through different nodes can create goose's
			// table together and lose its first row to the conflict, after
			// which goose refuses every run. Put the row back and run again;
			// every migration is written to run again harmlessly.
			if _, herr := m.DB().ExecContext(ctx, healVersionTableSQL); herr != nil {
				return errors.Join(err, herr)
			}
			err = m.Up(ctx)
		}
		return err
	}), "migrate")
}

// healVersionTableSQL gives goose's version table the row of version 0
// that goose writes when it creates the table, if the table has no row.
const healVersionTableSQL = `INSERT INTO goose_db_version (version_id, is_applied)
SELECT 0, TRUE FROM DUAL WHERE NOT EXISTS (SELECT 1 FROM goose_db_version)`

// driverLogger hands the driver's messages to slog's default logger at
// debug level.
type driverLogger struct{}

func (driverLogger) Print(v ...any) {
	slog.Debug("mysql driver: " + fmt.Sprint(v...))
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

// rows are the MySQL family's rows of the error table (store/internal/engine/classify.go):
// MySQL, MariaDB, Galera, Percona XtraDB Cluster, Group Replication, TiDB
// and Vitess, by error number.
var rows = []engine.Rule{
	{Code: "1213", From: "MySQL, MariaDB, Galera, PXC, TiDB",
		Name:  "ER_LOCK_DEADLOCK: a deadlock, or a Galera certification conflict (also at COMMIT)",
		Class: engine.ClassRetry, Cause: engine.AbortedCause, Hint: engine.AbortedHint},
	{Code: "3101", From: "MySQL Group Replication",
		Name:  "ER_TRANSACTION_ROLLBACK_DURING_COMMIT: a certification conflict",
		Class: engine.ClassRetry, Cause: engine.AbortedCause, Hint: engine.AbortedHint},
	{Code: "1412", From: "MySQL, MariaDB",
		Name:  "ER_TABLE_DEF_CHANGED: the table changed under the transaction's snapshot",
		Class: engine.ClassRetry, Cause: "the database aborted the transaction: a table it read was changed meanwhile (a schema change)",
		Hint: "try again once the schema change is over"},
	{Code: "8002", From: "TiDB",
		Name:  "a transaction holding SELECT … FOR UPDATE (a worker id's claim) met a write conflict at COMMIT and was rolled back",
		Class: engine.ClassRetry, Cause: "TiDB kept aborting the transaction (write conflict of a SELECT … FOR UPDATE)", Hint: engine.AbortedHint},
	{Code: "8005", From: "TiDB",
		Name:  "write conflict, txnStartTS is stale",
		Class: engine.ClassRetry, Cause: "TiDB kept aborting the transaction (write conflict)", Hint: engine.AbortedHint},
	{Code: "8022", From: "TiDB",
		Name:  "the transaction's commit failed and was rolled back",
		Class: engine.ClassRetry, Cause: "TiDB kept failing the transaction's commit (rolled back each time)", Hint: tidbHint},
	{Code: "8027", From: "TiDB",
		Name:  "the TiDB server's schema is out of date",
		Class: engine.ClassRetry, Cause: "TiDB's schema information is out of date",
		Hint: "check the network between the TiDB server and the PD leader"},
	{Code: "8028", From: "TiDB",
		Name:  "a table's schema changed while the transaction ran",
		Class: engine.ClassRetry, Cause: "TiDB aborted the transaction: a table's schema changed while it ran", Hint: "try again once the schema change is over"},
	{Code: "9001", From: "TiDB",
		Name:  "PD server timeout",
		Class: engine.ClassRetry, Cause: "TiDB's placement driver (PD) did not answer in time",
		Hint: "check the PD servers (status, monitoring, log) and the network between TiDB and PD"},
	{Code: "9002", From: "TiDB",
		Name:  "TiKV server timeout",
		Class: engine.ClassRetry, Cause: "TiDB's storage (TiKV) did not answer in time",
		Hint: "check the TiKV servers (status, monitoring, log) and the network between TiDB and TiKV"},
	{Code: "9003", From: "TiDB",
		Name:  "TiKV server is busy",
		Class: engine.ClassRetry, Cause: "TiDB's storage (TiKV) is busy",
		Hint: "check the load of the TiKV servers"},
	{Code: "9004", From: "TiDB",
		Name:  "resolve lock timeout: many transactions conflict on the same rows",
		Class: engine.ClassRetry, Cause: "TiDB timed out resolving locks (many transactions conflict on the same rows)",
		Hint: "try again; if it persists, fewer servers should load the same tag at once (a larger step)"},
	{Code: "9005", From: "TiDB",
		Name:  "a Region (Raft group) is unavailable: too few replicas, a busy or stopped TiKV",
		Class: engine.ClassRetry, Cause: "TiDB's storage has a region unavailable",
		Hint: "check that the TiKV servers are up and have their replicas"},
	{Code: "9007", From: "TiDB",
		Name:  "write conflict of an optimistic transaction (or of a lazy uniqueness check)",
		Class: engine.ClassRetry, Cause: engine.AbortedCause, Hint: engine.AbortedHint},
	{Code: "SQLSTATE 40001", From: "any",
		Name:  "serialization failure, under an error number no other row names",
		Class: engine.ClassRetry, Cause: engine.AbortedCause, Hint: engine.AbortedHint},

	{Code: "1205", From: "MySQL, MariaDB, Galera, PXC, TiDB",
		Name:  "ER_LOCK_WAIT_TIMEOUT: a row lock wait timed out (innodb_lock_wait_timeout, 5 s)",
		Class: engine.ClassLocked, Cause: "the row is locked by another transaction (lock wait timeout); the database answers",
		Hint: "retry once the lock is released"},
	{Code: "1062", From: "all",
		Name:  "ER_DUP_ENTRY: a primary key was hit",
		Class: engine.ClassDuplicate},

	{Code: "1045", From: "all",
		Name:  "ER_ACCESS_DENIED_ERROR: the login was refused",
		Class: engine.ClassUnavailable, Cause: "the database refused the login ({message})",
		Hint: "check the user and password in store.dsn"},
	{Code: "1044", From: "all",
		Name:  "ER_DBACCESS_DENIED_ERROR: the user may not use the database",
		Class: engine.ClassUnavailable, Cause: "the user in store.dsn may not use the database ({message})",
		Hint: "grant it privileges on the database (GRANT ALL ON <database>.* TO <user>) or check the user and database name in store.dsn"},
	{Code: "1049", From: "all",
		Name:  "ER_BAD_DB_ERROR: the database does not exist",
		Class: engine.ClassUnavailable, Cause: "database {quoted} does not exist",
		Hint: "create it with CREATE DATABASE {ident}, or fix the database name in store.dsn"},
	{Code: "1290", From: "MySQL, MariaDB",
		Name:  "ER_OPTION_PREVENTS_STATEMENT: --read-only, a replica",
		Class: engine.ClassUnavailable, Cause: engine.ReadOnlyCause, Hint: engine.ReadOnlyHint},
	{Code: "1792", From: "MySQL, MariaDB",
		Name:  "ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION",
		Class: engine.ClassUnavailable, Cause: engine.ReadOnlyCause, Hint: engine.ReadOnlyHint},
	{Code: "1836", From: "MySQL, MariaDB",
		Name:  "ER_READ_ONLY_MODE",
		Class: engine.ClassUnavailable, Cause: engine.ReadOnlyCause, Hint: engine.ReadOnlyHint},
	{Code: "1040", From: "all",
		Name:  "ER_CON_COUNT_ERROR: max_connections reached",
		Class: engine.ClassUnavailable, Cause: "the database has too many connections (max_connections)",
		Hint: "raise max_connections or close other clients' connections; each leafd server opens at most {max_open}"},
	{Code: "1203", From: "MySQL, MariaDB, Vitess",
		Name:  "ER_TOO_MANY_USER_CONNECTIONS: the user's connection limit, or Vitess's pool exhausted",
		Class: engine.ClassUnavailable, Cause: "the database has too many connections for this user ({message})",
		Hint: "raise the user's max_user_connections (or Vitess's pool sizes); each leafd server opens at most {max_open}"},
	{Code: "1041", From: "MySQL, MariaDB, Vitess",
		Name:  "ER_OUT_OF_RESOURCES: out of memory, or Vitess's transaction throttler",
		Class: engine.ClassUnavailable, Cause: "the database is out of resources ({message})",
		Hint: "retry; see the database's load (Vitess: its transaction throttler)"},
	{Code: "1053", From: "all",
		Name:  "ER_SERVER_SHUTDOWN",
		Class: engine.ClassUnavailable, Cause: "the database server is shutting down",
		Hint: "retry once it is back, or list another node of the cluster in store.fallback_dsns"},
	{Code: "3168", From: "MySQL, Vitess",
		Name:  "ER_SERVER_ISNT_AVAILABLE",
		Class: engine.ClassUnavailable, Cause: "the database server is not available ({message})",
		Hint: "retry once it is back, or list another address in store.fallback_dsns"},
	{Code: "1047", Match: "wsrep", From: "Galera, PXC",
		Name:  "ER_UNKNOWN_COM_ERROR from a node that is not synced (\"WSREP has not yet prepared node\")",
		Class: engine.ClassUnavailable, Cause: galera.Cause, Hint: galera.Hint},
	{Code: "1047", From: "Vitess",
		Name:  "ER_UNKNOWN_COM_ERROR: the session or transaction is gone on the server side (a Vitess reparent)",
		Class: engine.ClassUnavailable, Cause: "the database no longer knows the session or its transaction ({message})",
		Hint: "retry; a primary that changed (a reparent) loses the transactions in flight"},
	{Code: "3100", From: "MySQL Group Replication",
		Name:  "ER_RUN_HOOK_ERROR: the member is not online",
		Class: engine.ClassUnavailable, Cause: "the Group Replication member is not online",
		Hint: "point store.dsn at an online member or list the others in store.fallback_dsns"},
	{Code: "1152", From: "all", Name: "ER_ABORTING_CONNECTION",
		Class: engine.ClassUnavailable, Cause: engine.LostCause, Hint: engine.LostHint},
	{Code: "1158", From: "all", Name: "ER_NET_READ_ERROR",
		Class: engine.ClassUnavailable, Cause: engine.LostCause, Hint: engine.LostHint},
	{Code: "1159", From: "all", Name: "ER_NET_READ_INTERRUPTED",
		Class: engine.ClassUnavailable, Cause: engine.LostCause, Hint: engine.LostHint},
	{Code: "1160", From: "all", Name: "ER_NET_ERROR_ON_WRITE",
		Class: engine.ClassUnavailable, Cause: engine.LostCause, Hint: engine.LostHint},
	{Code: "1161", From: "all", Name: "ER_NET_WRITE_INTERRUPTED",
		Class: engine.ClassUnavailable, Cause: engine.LostCause, Hint: engine.LostHint},
	{Code: "4031", From: "MySQL 8.0.24+",
		Name:  "ER_CLIENT_INTERACTION_TIMEOUT: the server closed an idle connection",
		Class: engine.ClassUnavailable, Cause: engine.LostCause, Hint: engine.LostHint},
	{Code: "1927", From: "MariaDB",
		Name:  "ER_CONNECTION_KILLED",
		Class: engine.ClassUnavailable, Cause: "the database killed the connection",
		Hint: "a KILL, or the server is shutting down; retry"},
	{Code: "1317", From: "all; Vitess for a cancelled, timed-out or aborted request",
		Name:  "ER_QUERY_INTERRUPTED",
		Class: engine.ClassUnavailable, Cause: "the database interrupted the query",
		Hint: "a KILL QUERY, a statement time limit or a shutdown; retry"},
	{Code: "1969", From: "MariaDB",
		Name:  "ER_STATEMENT_TIMEOUT: max_statement_time exceeded",
		Class: engine.ClassUnavailable, Cause: "the database interrupted the query (max_statement_time)",
		Hint: "retry; if it persists, raise max_statement_time for leafd's user"},
	{Code: "3024", From: "MySQL",
		Name:  "ER_QUERY_TIMEOUT: max_execution_time exceeded",
		Class: engine.ClassUnavailable, Cause: "the database interrupted the query (max_execution_time)",
		Hint: "retry; if it persists, raise max_execution_time for leafd's user"},
	{Code: "1180", From: "MySQL, MariaDB, Galera",
		Name:  "ER_ERROR_DURING_COMMIT: the storage engine failed the COMMIT",
		Class: engine.ClassUnavailable, Cause: "the database could not commit the transaction ({message})",
		Hint: "see the database's log (a full disk, a storage engine error)"},

	{Code: "1105", From: "PXC, Vitess, TiDB",
		Name:  "ER_UNKNOWN_ERROR: among others PXC's refusal of GET_LOCK under pxc_strict_mode=ENFORCING; migrations then take leafd's lock row",
		Class: engine.ClassOther},
	{Code: "1235", From: "Vitess, TiDB",
		Name:  "ER_NOT_SUPPORTED_YET: a statement the proxy or engine does not support; for GET_LOCK, migrations then take leafd's lock row",
		Class: engine.ClassOther},
	{Code: "1146", From: "all",
		Name:  "ER_NO_SUCH_TABLE: the database was never migrated",
		Class: engine.ClassOther},
	{Code: "8004", From: "TiDB",
		Name:  "the transaction is too large",
		Class: engine.ClassOther},
	{Code: "9006", From: "TiDB",
		Name:  "GC life time is shorter than the transaction's duration",
		Class: engine.ClassOther},
}

// rules indexes rows by error number and SQLSTATE.
var rules = engine.IndexRules(rows, func(ix *engine.RuleIndex, r *engine.Rule) error {
	if state, ok := strings.CutPrefix(r.Code, "SQLSTATE "); ok {
		ix.ByState[state] = append(ix.ByState[state], r)
		return nil
	}
	n, err := strconv.Atoi(r.Code)
	if err != nil {
		return fmt.Errorf("MySQL code %q is not a number", r.Code)
	}
	ix.ByNumber[n] = append(ix.ByNumber[n], r)
	return nil
})

// classify sorts the errors of the MySQL family (MySQL, MariaDB,
// Galera, PXC, TiDB, Vitess) by the error table, and words those that make
// the store unavailable. The server's own text is quoted where it names
// what leafd cannot know (the user and host of a refused login); it never
// holds the password.
func classify(err error) engine.Verdict {
	if errors.Is(err, mysql.ErrInvalidConn) || errors.Is(err, driver.ErrBadConn) {
		return engine.Lost
	}
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		return engine.Verdict{Class: engine.ClassOther}
	}
	// The server quotes a name in single quotes: "Unknown database 'leafd'".
	name := engine.Quoted(me.Message, "'")
	return rule(me).Verdict(me.Message, name, quoteIdent(name), engine.ServerPool.MaxOpen)
}

// rule returns the row of the error table for me, or nil.
func rule(me *mysql.MySQLError) *engine.Rule {
	if r := engine.Pick(rules.ByNumber[int(me.Number)], me.Message); r != nil {
		return r
	}
	return engine.Pick(rules.ByState[string(me.SQLState[:])], me.Message)
}

// tidbHint is the hint of a TiDB commit that keeps failing.
const tidbHint = "try again; if it persists, see the TiDB cluster's dashboard and logs"

// galera is a Galera node that is not synced or not in the primary
// component.
var galera = engine.Verdict{Class: engine.ClassUnavailable,
	Cause: "the Galera node is not synced with its cluster (not ready, or not in the primary component)",
	Hint:  "wait until it has joined, or list the other nodes of the cluster in store.fallback_dsns"}

// The probe of a new connection. read_only is 1 (or ON) on a replica, a
// Group Replication secondary or a server set read-only. A Galera node
// that is out of the primary component or not synced still answers
// queries that read no table, so its wsrep_ready is asked too: OFF there.
// MySQL has no wsrep variables, and a MariaDB without Galera has wsrep_on
// OFF; neither is asked further.
const (
	probeReadOnlySQL = "SELECT @@global.read_only"
	probeWsrepOnSQL  = "SHOW GLOBAL VARIABLES LIKE 'wsrep_on'"
	probeWsrepSQL    = "SHOW GLOBAL STATUS LIKE 'wsrep_ready'"
)

// Why a probe refuses a node that answered.
var (
	errReadOnly = &engine.Refusal{Reason: "the server is read-only (@@global.read_only is on): it is a replica or was set read-only",
		Verdict: engine.ReadOnly}
	errNotReady = &engine.Refusal{Reason: "the Galera node is not ready (wsrep_ready is OFF): it is not synced or not in the primary component",
		Verdict: galera}
)

// probe returns nil when conn's MySQL or MariaDB node accepts writes.
func probe(ctx context.Context, conn driver.QueryerContext) error {
	readOnly, err := engine.QueryValue(ctx, conn, probeReadOnlySQL, 0)
	if err != nil {
		return err
	}
	if !engine.IsOff(readOnly) {
		return errReadOnly
	}
	wsrepOn, err := engine.QueryValue(ctx, conn, probeWsrepOnSQL, 1)
	if err != nil || !strings.EqualFold(wsrepOn, "ON") {
		return nil // no Galera (MySQL answers no row; a failed SHOW is not the node refusing)
	}
	ready, err := engine.QueryValue(ctx, conn, probeWsrepSQL, 1)
	if err != nil {
		return err
	}
	if !strings.EqualFold(ready, "ON") {
		return errNotReady
	}
	return nil
}

// secrets returns where a go-sql-driver/mysql DSN holds its password, as
// the driver reads it: the last '@' before the database name ends the
// credentials, the first ':' in them starts the password. A mysql:// URL
// is read the same way.
func secrets(dsn string) [][2]int {
	head := dsn
	if i := strings.LastIndexByte(dsn, '/'); i >= 0 { // a password may hold a '/' before its '@'
		head = dsn[:i+1]
	}
	at := strings.LastIndexByte(head, '@')
	if at < 0 {
		return nil
	}
	start := 0
	if i := strings.Index(head[:at], "://"); i >= 0 { // mysql://user:pw@host/db
		start = i + len("://")
	}
	colon := strings.IndexByte(head[start:at], ':')
	if colon < 0 || start+colon+1 == at {
		return nil // no password, or an empty one
	}
	return [][2]int{{start + colon + 1, at}}
}
