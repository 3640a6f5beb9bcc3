package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
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
	return openMySQL(dsn, newOptions(opts))
}

func openMySQL(dsn string, o options) (*MySQL, error) {
	connector, cluster, addr, err := openCluster(dsn, o, mysqlConnector, probeMySQL)
	if err != nil {
		return nil, err
	}
	sqlDB := sql.OpenDB(connector)
	sqlDB.SetMaxOpenConns(mysqlMaxOpen)
	sqlDB.SetMaxIdleConns(mysqlMaxIdle)
	sqlDB.SetConnMaxLifetime(mysqlMaxLifetime)
	sqlDB.SetConnMaxIdleTime(mysqlMaxIdleTime)
	s := &MySQL{db: db{
		x:        sqlx.NewDb(sqlDB, "mysql"),
		driver:   "mysql",
		classify: classifyMySQL,
		// NOW(3) and UNIX_TIMESTAMP convert through the session time zone
		// and back, so the result is Unix time whatever that zone is.
		nowMsSQL:     "CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)",
		lockSuffix:   " FOR UPDATE",
		markByUpdate: true,
		greatest:     "GREATEST",
		shareSuffix:  " LOCK IN SHARE MODE",
		cluster:      cluster,
		addr:         addr,
	}, log: o.log, lockWait: migrateLockSeconds * time.Second}
	if cluster != nil {
		s.unavailable = func(err error) {
			var me *mysql.MySQLError
			if errors.As(err, &me) {
				cluster.refused() // the node answered: it refuses to serve
			}
		}
	}
	return s, nil
}

// CheckMySQLDSN returns the error OpenMySQL would return for dsn, without
// opening anything: nil when dsn parses and names a database.
func CheckMySQLDSN(dsn string) error {
	_, err := mysqlConnector(dsn)
	return err
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
		return s.wrap(err, "migrate")
	}
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, ?)", migrateLock, migrateLockSeconds).Scan(&got); err != nil {
		conn.Close()
		if s.refusesNamedLock(err) {
			return s.migrateWithoutNamedLock(ctx, err)
		}
		return s.wrap(err, "migrate: take the lock "+migrateLock)
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
	return s.wrap(s.write(ctx, func(ctx context.Context) error {
		err := up(ctx, goose.DialectMySQL, s.x.DB, migrations.MySQL)
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
			err = up(ctx, goose.DialectMySQL, s.x.DB, migrations.MySQL)
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
