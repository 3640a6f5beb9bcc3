package store

import (
	"database/sql/driver"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// The error table: every error code of a database that leafd does something
// particular about, for every engine, and what it does. classifyMySQL,
// classifyPostgres and classifySQLite look errors up here and nowhere else,
// so the table is the behaviour; docs/compatibility.md prints it, and a test
// (TestErrorTableDocumented) fails when the two differ.
//
// The class of a row says what leafd does (errClass):
//
//   - classRetry: the database aborted and rolled back the transaction so
//     that the client runs it again. The whole transaction is run again
//     from its BEGIN (never its COMMIT alone), at most maxAttempts times
//     in all, with jittered backoff (db.writeWith). Only errors after
//     which the database guarantees that the transaction did not commit
//     belong here: a COMMIT whose outcome is unknown is not retried.
//   - classUnavailable: the database, or this node of it, does not serve
//     now. The call fails with store_unavailable, worded by the row's
//     cause and hint; a range load or a lease renewal of a store with
//     fallback addresses first tries once more at once through the next
//     address (db.writeMovingOn), and a connection that met such an
//     answer is not used again.
//   - classLocked: a row lock wait timed out: store_unavailable at once,
//     not retried (the lock is most likely still held).
//   - classDuplicate: a primary key was hit: tag_exists for a tag's
//     creation; a worker id's claim starts again.
//   - classOther: a bug, a schema problem or something leafd does not
//     know: an internal error with the server's own message. Rows of this
//     class are in the table to say so, and for the migration's fallback
//     lock (1105, 1235: a server that refuses GET_LOCK).
type errorRule struct {
	// engine is the store.driver the row is for: "mysql", "postgres" or
	// "sqlite".
	engine string
	// code is the MySQL error number; the PostgreSQL SQLSTATE, or its
	// class as "08*"; the SQLite result code's name. For MySQL, "SQLSTATE
	// nnnnn" is a row for every error number no other row names whose
	// SQLSTATE is nnnnn.
	code string
	// match, when set, restricts the row to errors whose message holds it
	// (ignoring case); rows with a match come before the row of the same
	// code without one.
	match string
	// from says who sends the error; name is its symbol in the engine's
	// documentation and what it means.
	from, name string
	class      errClass
	// cause and hint word a store_unavailable error: what went wrong and
	// what to do. {message} stands for the server's message, {quoted} for
	// what the message quotes (a database's name), {ident} for that name
	// as a statement would spell it, {max_open} for the pool's size.
	cause, hint string
}

// Words that several rows share.
const (
	abortedCause  = "the database kept aborting the transaction (deadlock or certification conflict)"
	abortedHint   = "try again: it passes once fewer transactions write the same rows at once"
	lostCause     = "the database closed the connection"
	lostHint      = "it restarted or killed the session, or a proxy or firewall dropped the connection; retry, and see the database's log if it persists"
	readOnlyCause = "the database refuses writes (read-only, a replica)"
	readOnlyHint  = "point store.dsn at the primary or add it to store.fallback_dsns"
	galeraCause   = "the Galera node is not synced with its cluster (not ready, or not in the primary component)"
	galeraHint    = "wait until it has joined, or list the other nodes of the cluster in store.fallback_dsns"
	tidbHint      = "try again; if it persists, see the TiDB cluster's dashboard and logs"
)

var errorTable = []errorRule{
	// MySQL, MariaDB, Galera, Percona XtraDB Cluster, Group Replication,
	// TiDB and Vitess: error numbers.
	{engine: "mysql", code: "1213", from: "MySQL, MariaDB, Galera, PXC, TiDB",
		name:  "ER_LOCK_DEADLOCK: a deadlock, or a Galera certification conflict (also at COMMIT)",
		class: classRetry, cause: abortedCause, hint: abortedHint},
	{engine: "mysql", code: "3101", from: "MySQL Group Replication",
		name:  "ER_TRANSACTION_ROLLBACK_DURING_COMMIT: a certification conflict",
		class: classRetry, cause: abortedCause, hint: abortedHint},
	{engine: "mysql", code: "1412", from: "MySQL, MariaDB",
		name:  "ER_TABLE_DEF_CHANGED: the table changed under the transaction's snapshot",
		class: classRetry, cause: "the database aborted the transaction: a table it read was changed meanwhile (a schema change)",
		hint: "try again once the schema change is over"},
	{engine: "mysql", code: "8002", from: "TiDB",
		name:  "a transaction holding SELECT … FOR UPDATE (a worker id's claim) met a write conflict at COMMIT and was rolled back",
		class: classRetry, cause: "TiDB kept aborting the transaction (write conflict of a SELECT … FOR UPDATE)", hint: abortedHint},
	{engine: "mysql", code: "8005", from: "TiDB",
		name:  "write conflict, txnStartTS is stale",
		class: classRetry, cause: "TiDB kept aborting the transaction (write conflict)", hint: abortedHint},
	{engine: "mysql", code: "8022", from: "TiDB",
		name:  "the transaction's commit failed and was rolled back",
		class: classRetry, cause: "TiDB kept failing the transaction's commit (rolled back each time)", hint: tidbHint},
	{engine: "mysql", code: "8027", from: "TiDB",
		name:  "the TiDB server's schema is out of date",
		class: classRetry, cause: "TiDB's schema information is out of date",
		hint: "check the network between the TiDB server and the PD leader"},
	{engine: "mysql", code: "8028", from: "TiDB",
		name:  "a table's schema changed while the transaction ran",
		class: classRetry, cause: "TiDB aborted the transaction: a table's schema changed while it ran", hint: "try again once the schema change is over"},
	{engine: "mysql", code: "9001", from: "TiDB",
		name:  "PD server timeout",
		class: classRetry, cause: "TiDB's placement driver (PD) did not answer in time",
		hint: "check the PD servers (status, monitoring, log) and the network between TiDB and PD"},
	{engine: "mysql", code: "9002", from: "TiDB",
		name:  "TiKV server timeout",
		class: classRetry, cause: "TiDB's storage (TiKV) did not answer in time",
		hint: "check the TiKV servers (status, monitoring, log) and the network between TiDB and TiKV"},
	{engine: "mysql", code: "9003", from: "TiDB",
		name:  "TiKV server is busy",
		class: classRetry, cause: "TiDB's storage (TiKV) is busy",
		hint: "check the load of the TiKV servers"},
	{engine: "mysql", code: "9004", from: "TiDB",
		name:  "resolve lock timeout: many transactions conflict on the same rows",
		class: classRetry, cause: "TiDB timed out resolving locks (many transactions conflict on the same rows)",
		hint: "try again; if it persists, fewer servers should load the same tag at once (a larger step)"},
	{engine: "mysql", code: "9005", from: "TiDB",
		name:  "a Region (Raft group) is unavailable: too few replicas, a busy or stopped TiKV",
		class: classRetry, cause: "TiDB's storage has a region unavailable",
		hint: "check that the TiKV servers are up and have their replicas"},
	{engine: "mysql", code: "9007", from: "TiDB",
		name:  "write conflict of an optimistic transaction (or of a lazy uniqueness check)",
		class: classRetry, cause: abortedCause, hint: abortedHint},
	{engine: "mysql", code: "SQLSTATE 40001", from: "any",
		name:  "serialization failure, under an error number no other row names",
		class: classRetry, cause: abortedCause, hint: abortedHint},

	{engine: "mysql", code: "1205", from: "MySQL, MariaDB, Galera, PXC, TiDB",
		name:  "ER_LOCK_WAIT_TIMEOUT: a row lock wait timed out (innodb_lock_wait_timeout, 5 s)",
		class: classLocked, cause: "the row is locked by another transaction (lock wait timeout); the database answers",
		hint: "retry once the lock is released"},
	{engine: "mysql", code: "1062", from: "all",
		name:  "ER_DUP_ENTRY: a primary key was hit",
		class: classDuplicate},

	{engine: "mysql", code: "1045", from: "all",
		name:  "ER_ACCESS_DENIED_ERROR: the login was refused",
		class: classUnavailable, cause: "the database refused the login ({message})",
		hint: "check the user and password in store.dsn"},
	{engine: "mysql", code: "1044", from: "all",
		name:  "ER_DBACCESS_DENIED_ERROR: the user may not use the database",
		class: classUnavailable, cause: "the user in store.dsn may not use the database ({message})",
		hint: "grant it privileges on the database (GRANT ALL ON <database>.* TO <user>) or check the user and database name in store.dsn"},
	{engine: "mysql", code: "1049", from: "all",
		name:  "ER_BAD_DB_ERROR: the database does not exist",
		class: classUnavailable, cause: "database {quoted} does not exist",
		hint: "create it with CREATE DATABASE {ident}, or fix the database name in store.dsn"},
	{engine: "mysql", code: "1290", from: "MySQL, MariaDB",
		name:  "ER_OPTION_PREVENTS_STATEMENT: --read-only, a replica",
		class: classUnavailable, cause: readOnlyCause, hint: readOnlyHint},
	{engine: "mysql", code: "1792", from: "MySQL, MariaDB",
		name:  "ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION",
		class: classUnavailable, cause: readOnlyCause, hint: readOnlyHint},
	{engine: "mysql", code: "1836", from: "MySQL, MariaDB",
		name:  "ER_READ_ONLY_MODE",
		class: classUnavailable, cause: readOnlyCause, hint: readOnlyHint},
	{engine: "mysql", code: "1040", from: "all",
		name:  "ER_CON_COUNT_ERROR: max_connections reached",
		class: classUnavailable, cause: "the database has too many connections (max_connections)",
		hint: "raise max_connections or close other clients' connections; each leafd server opens at most {max_open}"},
	{engine: "mysql", code: "1203", from: "MySQL, MariaDB, Vitess",
		name:  "ER_TOO_MANY_USER_CONNECTIONS: the user's connection limit, or Vitess's pool exhausted",
		class: classUnavailable, cause: "the database has too many connections for this user ({message})",
		hint: "raise the user's max_user_connections (or Vitess's pool sizes); each leafd server opens at most {max_open}"},
	{engine: "mysql", code: "1041", from: "MySQL, MariaDB, Vitess",
		name:  "ER_OUT_OF_RESOURCES: out of memory, or Vitess's transaction throttler",
		class: classUnavailable, cause: "the database is out of resources ({message})",
		hint: "retry; see the database's load (Vitess: its transaction throttler)"},
	{engine: "mysql", code: "1053", from: "all",
		name:  "ER_SERVER_SHUTDOWN",
		class: classUnavailable, cause: "the database server is shutting down",
		hint: "retry once it is back, or list another node of the cluster in store.fallback_dsns"},
	{engine: "mysql", code: "3168", from: "MySQL, Vitess",
		name:  "ER_SERVER_ISNT_AVAILABLE",
		class: classUnavailable, cause: "the database server is not available ({message})",
		hint: "retry once it is back, or list another address in store.fallback_dsns"},
	{engine: "mysql", code: "1047", match: "wsrep", from: "Galera, PXC",
		name:  "ER_UNKNOWN_COM_ERROR from a node that is not synced (\"WSREP has not yet prepared node\")",
		class: classUnavailable, cause: galeraCause, hint: galeraHint},
	{engine: "mysql", code: "1047", from: "Vitess",
		name:  "ER_UNKNOWN_COM_ERROR: the session or transaction is gone on the server side (a Vitess reparent)",
		class: classUnavailable, cause: "the database no longer knows the session or its transaction ({message})",
		hint: "retry; a primary that changed (a reparent) loses the transactions in flight"},
	{engine: "mysql", code: "3100", from: "MySQL Group Replication",
		name:  "ER_RUN_HOOK_ERROR: the member is not online",
		class: classUnavailable, cause: "the Group Replication member is not online",
		hint: "point store.dsn at an online member or list the others in store.fallback_dsns"},
	{engine: "mysql", code: "1152", from: "all", name: "ER_ABORTING_CONNECTION",
		class: classUnavailable, cause: lostCause, hint: lostHint},
	{engine: "mysql", code: "1158", from: "all", name: "ER_NET_READ_ERROR",
		class: classUnavailable, cause: lostCause, hint: lostHint},
	{engine: "mysql", code: "1159", from: "all", name: "ER_NET_READ_INTERRUPTED",
		class: classUnavailable, cause: lostCause, hint: lostHint},
	{engine: "mysql", code: "1160", from: "all", name: "ER_NET_ERROR_ON_WRITE",
		class: classUnavailable, cause: lostCause, hint: lostHint},
	{engine: "mysql", code: "1161", from: "all", name: "ER_NET_WRITE_INTERRUPTED",
		class: classUnavailable, cause: lostCause, hint: lostHint},
	{engine: "mysql", code: "4031", from: "MySQL 8.0.24+",
		name:  "ER_CLIENT_INTERACTION_TIMEOUT: the server closed an idle connection",
		class: classUnavailable, cause: lostCause, hint: lostHint},
	{engine: "mysql", code: "1927", from: "MariaDB",
		name:  "ER_CONNECTION_KILLED",
		class: classUnavailable, cause: "the database killed the connection",
		hint: "a KILL, or the server is shutting down; retry"},
	{engine: "mysql", code: "1317", from: "all; Vitess for a cancelled, timed-out or aborted request",
		name:  "ER_QUERY_INTERRUPTED",
		class: classUnavailable, cause: "the database interrupted the query",
		hint: "a KILL QUERY, a statement time limit or a shutdown; retry"},
	{engine: "mysql", code: "1969", from: "MariaDB",
		name:  "ER_STATEMENT_TIMEOUT: max_statement_time exceeded",
		class: classUnavailable, cause: "the database interrupted the query (max_statement_time)",
		hint: "retry; if it persists, raise max_statement_time for leafd's user"},
	{engine: "mysql", code: "3024", from: "MySQL",
		name:  "ER_QUERY_TIMEOUT: max_execution_time exceeded",
		class: classUnavailable, cause: "the database interrupted the query (max_execution_time)",
		hint: "retry; if it persists, raise max_execution_time for leafd's user"},
	{engine: "mysql", code: "1180", from: "MySQL, MariaDB, Galera",
		name:  "ER_ERROR_DURING_COMMIT: the storage engine failed the COMMIT",
		class: classUnavailable, cause: "the database could not commit the transaction ({message})",
		hint: "see the database's log (a full disk, a storage engine error)"},

	{engine: "mysql", code: "1105", from: "PXC, Vitess, TiDB",
		name:  "ER_UNKNOWN_ERROR: among others PXC's refusal of GET_LOCK under pxc_strict_mode=ENFORCING; migrations then take leafd's lock row",
		class: classOther},
	{engine: "mysql", code: "1235", from: "Vitess, TiDB",
		name:  "ER_NOT_SUPPORTED_YET: a statement the proxy or engine does not support; for GET_LOCK, migrations then take leafd's lock row",
		class: classOther},
	{engine: "mysql", code: "1146", from: "all",
		name:  "ER_NO_SUCH_TABLE: the database was never migrated",
		class: classOther},
	{engine: "mysql", code: "8004", from: "TiDB",
		name:  "the transaction is too large",
		class: classOther},
	{engine: "mysql", code: "9006", from: "TiDB",
		name:  "GC life time is shorter than the transaction's duration",
		class: classOther},

	// PostgreSQL: SQLSTATEs.
	{engine: "postgres", code: "40001", from: "PostgreSQL",
		name: "serialization_failure", class: classRetry, cause: abortedCause, hint: abortedHint},
	{engine: "postgres", code: "40P01", from: "PostgreSQL",
		name: "deadlock_detected", class: classRetry, cause: abortedCause, hint: abortedHint},
	{engine: "postgres", code: "55P03", from: "PostgreSQL",
		name:  "lock_not_available: lock_timeout (5 s) passed",
		class: classLocked, cause: "the row is locked by another transaction (lock_timeout); the database answers",
		hint: "retry once the lock is released"},
	{engine: "postgres", code: "23505", from: "PostgreSQL",
		name: "unique_violation", class: classDuplicate},
	{engine: "postgres", code: "28P01", from: "PostgreSQL",
		name:  "invalid_password",
		class: classUnavailable, cause: "the database refused the login ({message})",
		hint: "check the user and password in store.dsn, and pg_hba.conf on the server"},
	{engine: "postgres", code: "28000", from: "PostgreSQL",
		name:  "invalid_authorization_specification",
		class: classUnavailable, cause: "the database refused the login ({message})",
		hint: "check the user and password in store.dsn, and pg_hba.conf on the server"},
	{engine: "postgres", code: "3D000", from: "PostgreSQL",
		name:  "invalid_catalog_name: the database does not exist",
		class: classUnavailable, cause: "database {ident} does not exist",
		hint: "create it with CREATE DATABASE {ident}, or fix the database name in store.dsn"},
	{engine: "postgres", code: "42501", from: "PostgreSQL",
		name:  "insufficient_privilege",
		class: classUnavailable, cause: "the user in store.dsn lacks a privilege ({message})",
		hint: "grant it what leafd needs (GRANT ALL ON SCHEMA public and ON ALL TABLES IN SCHEMA public TO <user>) or check the user in store.dsn"},
	{engine: "postgres", code: "25006", from: "PostgreSQL",
		name:  "read_only_sql_transaction: a standby, or a read-only session",
		class: classUnavailable, cause: readOnlyCause, hint: readOnlyHint},
	{engine: "postgres", code: "53300", from: "PostgreSQL",
		name:  "too_many_connections",
		class: classUnavailable, cause: "the database has too many connections (max_connections)",
		hint: "raise max_connections or close other clients' connections; each leafd server opens at most {max_open}"},
	{engine: "postgres", code: "57P01", from: "PostgreSQL",
		name:  "admin_shutdown",
		class: classUnavailable, cause: "the database server is shutting down or restarting",
		hint: "retry once it is back, or list another server of the cluster in store.fallback_dsns"},
	{engine: "postgres", code: "57P02", from: "PostgreSQL",
		name:  "crash_shutdown",
		class: classUnavailable, cause: "the database server is shutting down or restarting",
		hint: "retry once it is back, or list another server of the cluster in store.fallback_dsns"},
	{engine: "postgres", code: "57P03", from: "PostgreSQL",
		name:  "cannot_connect_now: starting up, or in recovery",
		class: classUnavailable, cause: "the database server is starting up and does not accept connections yet",
		hint: "retry in a moment"},
	{engine: "postgres", code: "57014", from: "PostgreSQL",
		name:  "query_canceled: statement_timeout, or pg_cancel_backend",
		class: classUnavailable, cause: "the database cancelled the statement (statement_timeout, or a cancel by an administrator)",
		hint: "retry; if it persists, raise statement_timeout for leafd's user"},
	{engine: "postgres", code: "53100", from: "PostgreSQL",
		name:  "disk_full",
		class: classUnavailable, cause: "the database's disk is full", hint: "free space on the database server"},
	{engine: "postgres", code: "40003", from: "PostgreSQL",
		name:  "statement_completion_unknown: the outcome of the statement is unknown",
		class: classUnavailable, cause: "the database could not tell whether the statement completed",
		hint: "retry; whatever the statement did, leafd does not use it"},
	{engine: "postgres", code: "57P05", from: "PostgreSQL 14+",
		name: "idle_session_timeout", class: classUnavailable, cause: lostCause, hint: lostHint},
	{engine: "postgres", code: "25P03", from: "PostgreSQL",
		name: "idle_in_transaction_session_timeout", class: classUnavailable, cause: lostCause, hint: lostHint},
	{engine: "postgres", code: "08*", from: "PostgreSQL",
		name: "connection_exception and its subclasses", class: classUnavailable, cause: lostCause, hint: lostHint},
	{engine: "postgres", code: "42P01", from: "PostgreSQL",
		name: "undefined_table: the database was never migrated", class: classOther},

	// SQLite: result codes, an extended code before its primary code.
	{engine: "sqlite", code: "SQLITE_BUSY", from: "SQLite",
		name:  "another connection or process holds the file's write lock past the busy timeout",
		class: classRetry, cause: "the SQLite file stayed locked by another connection or process (busy)",
		hint: "see what else writes the file: a long transaction of another program holds every writer up"},
	{engine: "sqlite", code: "SQLITE_LOCKED", from: "SQLite",
		name:  "a table is locked by another connection of the process",
		class: classRetry, cause: "the SQLite file stayed locked by another connection or process (busy)",
		hint: "see what else writes the file: a long transaction of another program holds every writer up"},
	{engine: "sqlite", code: "SQLITE_CONSTRAINT_PRIMARYKEY", from: "SQLite",
		name: "a primary key was hit", class: classDuplicate},
	{engine: "sqlite", code: "SQLITE_CONSTRAINT_UNIQUE", from: "SQLite",
		name: "a unique index was hit", class: classDuplicate},
	{engine: "sqlite", code: "SQLITE_CANTOPEN", from: "SQLite",
		name: "the file cannot be opened",
		// "cannot be reached" as for a server, so that one phrase finds
		// every store that cannot be used at all.
		class: classUnavailable, cause: "the SQLite database cannot be reached: the file store.dsn names cannot be opened",
		hint: "check that the path names a file, not a directory, that its directory exists, and that leafd may write there"},
	{engine: "sqlite", code: "SQLITE_READONLY", from: "SQLite",
		name:  "the file cannot be written",
		class: classUnavailable, cause: "the SQLite file cannot be written (read-only)",
		hint: "check the permissions of the file and of its directory, and that the file system is not mounted read-only"},
	{engine: "sqlite", code: "SQLITE_AUTH", from: "SQLite",
		name:  "authorization denied",
		class: classUnavailable, cause: "access to the SQLite file is denied",
		hint: "check the permissions of the file and of its directory"},
	{engine: "sqlite", code: "SQLITE_PERM", from: "SQLite",
		name:  "access permission denied",
		class: classUnavailable, cause: "access to the SQLite file is denied",
		hint: "check the permissions of the file and of its directory"},
	{engine: "sqlite", code: "SQLITE_FULL", from: "SQLite",
		name:  "the disk is full",
		class: classUnavailable, cause: "the disk of the SQLite file is full", hint: "free space on it"},
	{engine: "sqlite", code: "SQLITE_IOERR", from: "SQLite",
		name:  "an I/O error",
		class: classUnavailable, cause: "the SQLite file could not be read or written (I/O error)",
		hint: "check the disk and the file system; see the system log"},
	{engine: "sqlite", code: "SQLITE_NOLFS", from: "SQLite",
		name:  "the file is too large for the file system",
		class: classUnavailable, cause: "the file system of the SQLite file cannot hold a file this large",
		hint: "move the file to another file system"},
	{engine: "sqlite", code: "SQLITE_PROTOCOL", from: "SQLite",
		name:  "the file locking protocol failed",
		class: classUnavailable, cause: "SQLite's file locking failed (a locking protocol error)",
		hint: "retry; keep the file off network file systems"},
	{engine: "sqlite", code: "SQLITE_INTERRUPT", from: "SQLite",
		name:  "the operation was interrupted",
		class: classUnavailable, cause: "the SQLite operation was interrupted",
		hint: "the request ended or the server is shutting down; retry"},
}

// sqliteCodes are the SQLite result codes the table names.
var sqliteCodes = map[string]int{
	"SQLITE_BUSY":                  sqlite3.SQLITE_BUSY,
	"SQLITE_LOCKED":                sqlite3.SQLITE_LOCKED,
	"SQLITE_CONSTRAINT_PRIMARYKEY": sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY,
	"SQLITE_CONSTRAINT_UNIQUE":     sqlite3.SQLITE_CONSTRAINT_UNIQUE,
	"SQLITE_CANTOPEN":              sqlite3.SQLITE_CANTOPEN,
	"SQLITE_READONLY":              sqlite3.SQLITE_READONLY,
	"SQLITE_AUTH":                  sqlite3.SQLITE_AUTH,
	"SQLITE_PERM":                  sqlite3.SQLITE_PERM,
	"SQLITE_FULL":                  sqlite3.SQLITE_FULL,
	"SQLITE_IOERR":                 sqlite3.SQLITE_IOERR,
	"SQLITE_NOLFS":                 sqlite3.SQLITE_NOLFS,
	"SQLITE_PROTOCOL":              sqlite3.SQLITE_PROTOCOL,
	"SQLITE_INTERRUPT":             sqlite3.SQLITE_INTERRUPT,
}

// ruleIndex finds the rows of one engine by code.
type ruleIndex struct {
	byNumber map[int][]*errorRule    // MySQL error numbers, SQLite result codes
	byState  map[string][]*errorRule // MySQL "SQLSTATE nnnnn" rows, PostgreSQL SQLSTATEs
	prefixes []*errorRule            // PostgreSQL classes ("08*")
}

var mysqlRules, postgresRules, sqliteRules = indexRules()

// indexRules sorts the table's rows by engine and code. It panics on a row
// it cannot read: TestErrorTable runs it.
func indexRules() (my, pg, lite *ruleIndex) {
	my, pg, lite = newRuleIndex(), newRuleIndex(), newRuleIndex()
	for i := range errorTable {
		r := &errorTable[i]
		switch r.engine {
		case "mysql":
			if state, ok := strings.CutPrefix(r.code, "SQLSTATE "); ok {
				my.byState[state] = append(my.byState[state], r)
				continue
			}
			n, err := strconv.Atoi(r.code)
			if err != nil {
				panic(fmt.Sprintf("store: error table: MySQL code %q is not a number", r.code))
			}
			my.byNumber[n] = append(my.byNumber[n], r)
		case "postgres":
			if strings.HasSuffix(r.code, "*") {
				pg.prefixes = append(pg.prefixes, r)
				continue
			}
			pg.byState[r.code] = append(pg.byState[r.code], r)
		case "sqlite":
			n, ok := sqliteCodes[r.code]
			if !ok {
				panic(fmt.Sprintf("store: error table: unknown SQLite code %q", r.code))
			}
			lite.byNumber[n] = append(lite.byNumber[n], r)
		default:
			panic(fmt.Sprintf("store: error table: unknown engine %q", r.engine))
		}
	}
	return my, pg, lite
}

func newRuleIndex() *ruleIndex {
	return &ruleIndex{byNumber: map[int][]*errorRule{}, byState: map[string][]*errorRule{}}
}

// pick returns the first of rules that applies to an error with message
// msg, or nil.
func pick(rules []*errorRule, msg string) *errorRule {
	lower := ""
	for _, r := range rules {
		if r.match == "" {
			return r
		}
		if lower == "" {
			lower = strings.ToLower(msg)
		}
		if strings.Contains(lower, strings.ToLower(r.match)) {
			return r
		}
	}
	return nil
}

// verdict fills a row's placeholders for an error with the server's message
// msg; quotedName is what msg quotes, ident that name as a statement spells
// it, maxOpen the engine's pool size.
func (r *errorRule) verdict(msg, quotedName, ident string, maxOpen int) verdict {
	if r == nil {
		return verdict{class: classOther}
	}
	if quotedName == "" {
		quotedName, ident = "named in store.dsn", "<name>"
	}
	fill := strings.NewReplacer("{message}", msg, "{quoted}", quotedName, "{ident}", ident,
		"{max_open}", strconv.Itoa(maxOpen))
	return verdict{class: r.class, cause: fill.Replace(r.cause), hint: fill.Replace(r.hint)}
}

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

// classifySQLite sorts the errors of SQLite by the error table (the
// extended result code, then the primary one), and words those that make
// the store unavailable.
func classifySQLite(err error) verdict {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return verdict{class: classOther}
	}
	return sqliteRule(se.Code(), se.Error()).verdict(se.Error(), "", "", 0)
}

// sqliteRule returns the row of the error table for result code code, or
// nil.
func sqliteRule(code int, msg string) *errorRule {
	if r := pick(sqliteRules.byNumber[code], msg); r != nil {
		return r
	}
	return pick(sqliteRules.byNumber[code&0xff], msg)
}
