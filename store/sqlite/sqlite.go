// Package sqlite is the embedded engine of package store, and the default
// store.driver: one SQLite file (modernc.org/sqlite, pure Go), which
// several processes may share. It registers itself as store.driver
// "sqlite"; import it (or store/all) for its side effect.
package sqlite

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/pressly/goose/v3"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/leafd/leafd/store/internal/engine"
)

// Waiting for the write lock of a file that another process holds. SQLite's
// busy handler waits up to busy_timeout at a time without looking at the
// request's context, so its wait is kept short, and Allocate and CreateTag
// begin again after each SQLITE_BUSY, checking their context in between,
// until busyBudget has passed.
const (
	busyTimeout = "busy_timeout(250)"
	busyBudget  = 10 * time.Second
)

// maxOpen bounds the connections to the file. Reads run in parallel in WAL
// mode; writers queue in the store (OneWriter) before they reach SQLite's
// lock.
const maxOpen = 8

// params are the connection settings connect adds to a DSN that
// does not set them itself. synchronous(FULL) is SQLite's default, stated
// so that nobody lowers it by accident: in WAL mode NORMAL may lose the last
// transactions at a power failure, and a lost allocation would hand its IDs
// out again.
var params = []struct{ key, pragma, value string }{
	{"_txlock", "", "immediate"},
	{"_pragma", "busy_timeout", busyTimeout},
	{"_pragma", "journal_mode", "journal_mode(WAL)"},
	{"_pragma", "synchronous", "synchronous(FULL)"},
}

//go:embed migrations/*.sql
var migrationFiles embed.FS

func init() {
	// modernc.org/sqlite registers itself as "sqlite", a name sqlx does not
	// know; it binds with '?' like sqlite3.
	sqlx.BindDriver("sqlite", sqlx.QUESTION)
	engine.Register(&dialect)
}

// dialect is SQLite's: the default engine, so that leafd runs on a fresh
// machine with nothing installed. Its DSN is a path (data/leafd.db) or a
// file: URI (file:data/leafd.db?_pragma=...); opening creates the file's
// directory but does not open the file yet. The DSN's own parameters are
// kept; it gets, unless it sets them, immediate transactions
// (_txlock=immediate), WAL, synchronous FULL and a busy timeout of 250 ms,
// within which range loads and tag creations retry for up to 10 seconds
// (or until their context ends) while another process holds the write
// lock. Every transaction takes the write lock when it begins.
//
// A DSN is refused when it is empty, names an in-memory database (which
// would lose every max_id at exit and hand the same IDs out again), or has
// parameters that do not parse or that make sharing the file unsafe
// (checkParams).
var dialect = engine.Dialect{
	Driver:      "sqlite",
	Title:       "SQLite",
	Example:     "file:data/leafd.db",
	Default:     true,
	Claims:      claims,
	Check:       func(dsn string) error { _, _, err := parseDSN(dsn); return err },
	Connect:     connect,
	Secrets:     func(string) [][2]int { return nil }, // a path holds no secret
	NoFallbacks: "a file has no other address",
	Bind:        "sqlite",
	Pool:        engine.Pool{MaxOpen: maxOpen, MaxIdle: maxOpen, MaxIdleTime: 5 * time.Minute},
	Rows:        rows,
	Classify:    classify,
	Refused:     func(error) bool { return false },
	MissingTable: func(err error) bool {
		// SQLite has no code of its own for it (SQLITE_ERROR); its text is
		// matched.
		var se *sqlite.Error
		return errors.As(err, &se) && strings.Contains(se.Error(), "no such table")
	},
	Goose:      goose.DialectSQLite3,
	Migrations: engine.Sub(migrationFiles, "migrations"),
	Migrate:    migrate,
	OneWriter:  true,
	RetryFor:   busyBudget,
	NowMs:      "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)",
	NowUs:      "CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER)",
	Greatest:   "MAX",
}

// connect parses dsn, creates the file's directory, and returns the
// file's address: its path, and the driver's connector for the DSN it
// opens the file by (as sql.Open("sqlite", …) would use).
func connect(dsn string) (engine.Address, error) {
	path, query, err := parseDSN(dsn)
	if err != nil {
		return engine.Address{}, err
	}
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return engine.Address{}, fmt.Errorf("create the directory of the SQLite file: %w", err)
		}
	}
	c, err := sqlite.NewConnector(driverDSN(path, query))
	if err != nil {
		return engine.Address{}, fmt.Errorf("the parameters of the SQLite DSN do not parse: %w", err)
	}
	return engine.Address{Name: path, Connector: c}, nil
}

// driverDSN returns the DSN modernc.org/sqlite opens for the file at
// path with the parameters query and, where it does not set them,
// params.
func driverDSN(path string, query url.Values) string {
	for _, p := range params {
		if !hasParam(query, p.key, p.pragma) {
			query.Add(p.key, p.value)
		}
	}
	return "file:" + escapePath(path) + "?" + query.Encode()
}

// claims reports whether dsn is written for SQLite: a file: URI,
// :memory:, or a path ending in .db, .db3, .sqlite or .sqlite3 (with or
// without parameters) that holds no '=', '@' or '(', which belong to the
// other engines' DSNs. Any other string is a path to SQLite too, but not
// one that says so.
func claims(dsn string) bool {
	lower := strings.ToLower(strings.TrimSpace(dsn))
	if strings.HasPrefix(lower, "file:") || lower == ":memory:" {
		return true
	}
	path, _, _ := strings.Cut(lower, "?")
	if strings.ContainsAny(path, "=@(") {
		return false
	}
	return slices.ContainsFunc([]string{".db", ".db3", ".sqlite", ".sqlite3"}, func(ext string) bool { return strings.HasSuffix(path, ext) })
}

// parseDSN splits dsn into the file's path (unescaped, as the file
// system knows it) and the DSN's parameters.
func parseDSN(dsn string) (path string, query url.Values, err error) {
	if dsn == "" {
		return "", nil, errors.New("the SQLite DSN is empty: use a path such as data/leafd.db or file:data/leafd.db")
	}
	rest, rawQuery, _ := strings.Cut(dsn, "?")
	if after, ok := strings.CutPrefix(rest, "file:"); ok {
		rest = after
		if after, ok := strings.CutPrefix(rest, "//"); ok {
			// file://host/path: only an empty host or localhost is local.
			host, p, _ := strings.Cut(after, "/")
			if host != "" && host != "localhost" {
				return "", nil, errors.New("the SQLite DSN names a host (file://host/…): use a local path, such as file:data/leafd.db") // not quoted: the host may hold a user and password
			}
			rest = "/" + p
		}
		if rest, err = url.PathUnescape(rest); err != nil {
			return "", nil, fmt.Errorf("the SQLite DSN %q does not parse: %w", dsn, err)
		}
	} else if addressShaped(rest) {
		// Not quoted: no engine reads it, so none can mask its password.
		return "", nil, errors.New("the SQLite DSN reads as another database's address (a URL, user:password@host, or keyword=value pairs), not a file's path: " +
			"set store.driver to that database's engine and give its DSN, or write the path as a file: URI if it is one")
	}
	query, err = url.ParseQuery(rawQuery)
	if err != nil {
		return "", nil, fmt.Errorf("the parameters of the SQLite DSN %q do not parse: %w", dsn, err)
	}
	if hasNUL(rest, query) {
		return "", nil, fmt.Errorf("the SQLite DSN %q holds a NUL (%%00): SQLite would ignore what follows it, and open another database than the DSN says", dsn)
	}
	// SQLite takes the last of several modes: any of them may be the one.
	if rest == "" || rest == ":memory:" || slices.Contains(query["mode"], "memory") || slices.Contains(query["vfs"], "memdb") {
		return "", nil, fmt.Errorf("the SQLite DSN %q names no file: leafd keeps every tag's max_id in the file, use a path such as data/leafd.db", dsn)
	}
	if err := checkParams(query); err != nil {
		return "", nil, fmt.Errorf("the SQLite DSN %q sets %w", dsn, err)
	}
	return rest, query, nil
}

// hasNUL reports whether path or a key or value of query holds a NUL, after
// which SQLite reads no further: file:%00x.db would be a temporary
// database, mode=memory%00x one in memory.
func hasNUL(path string, query url.Values) bool {
	if strings.ContainsRune(path, 0) {
		return true
	}
	for key, values := range query {
		if strings.ContainsRune(key, 0) || slices.ContainsFunc(values, func(v string) bool { return strings.ContainsRune(v, 0) }) {
			return true
		}
	}
	return false
}

// addressShaped reports whether path, a DSN that is not a file: URI, has
// the shape of another database's address rather than a file's path: a URL
// (postgress://…, a misspelt scheme), keyword=value pairs ('=' and a space:
// ssl-mode=disable host=db password=…, whose first keyword PostgreSQL's
// rules do not read), a part holding both '@' and ':'
// (root:secret@localhost:3306/leaf, MySQL without tcp(…)), or a relative
// path whose first part holds '@' (root@localhost/leaf; ./leafd@blue/… is
// a path). SQLite would take it for a path, create a file or directories
// named after its password and serve from a new, empty file.
func addressShaped(path string) bool {
	if strings.Contains(path, "://") || strings.Contains(path, "=") && strings.ContainsAny(path, " \t\n\r\v\f") {
		return true
	}
	if first, _, ok := strings.Cut(path, "/"); ok && strings.Contains(first, "@") {
		return true
	}
	for part := range strings.SplitSeq(path, "/") {
		if strings.Contains(part, "@") && strings.Contains(part, ":") {
			return true
		}
	}
	return false
}

// checkParams refuses the parameters that would let two processes
// sharing the file take the same range, or let a crash lose a committed
// one and hand its IDs out again. SQLite's lock on the file is what keeps
// two servers' range loads apart, and only the default VFS takes the POSIX
// locks that every process (and the sqlite3 shell, and backup tools)
// honours: unix-none and nolock=1 take none, unix-dotfile and unix-flock
// take locks the default VFS does not see, unix-excl keeps the WAL index in
// its own memory, and immutable=1 takes no lock and ignores other
// processes' writes. journal_mode OFF or MEMORY leaves no journal on disk
// to roll a crashed write back, and synchronous below FULL lets a power
// failure undo committed transactions (in WAL mode, NORMAL may lose the
// last ones); so is a level SQLite does not know, which it reads as
// NORMAL. A _pragma that is not of pragmaForm is refused because it could
// set any of these unseen.
func checkParams(q url.Values) error {
	for _, v := range q["vfs"] {
		if v != "" && v != "unix" {
			return fmt.Errorf("vfs=%s: processes sharing the file must all take SQLite's default file locks, which keep two servers from taking the same range; remove vfs", v)
		}
	}
	for _, key := range []string{"nolock", "immutable"} {
		for _, v := range q[key] {
			if sqliteTrue(v) {
				return fmt.Errorf("%s=%s: SQLite would take no lock on the file, and servers sharing it could take the same range; remove %s", key, v, key)
			}
		}
	}
	for _, v := range q["_pragma"] {
		if _, _, ok := splitPragma(v); !ok {
			return fmt.Errorf("_pragma=%s: leafd reads a _pragma only as one pragma, name(value) or name=value, "+
				"its value a word or a number, without ';', comments or a quoted name; give each pragma its own _pragma in that form", v)
		}
	}
	for _, s := range pragmaSettings(q, "journal_mode") {
		if m := strings.ToLower(s.value); m == "off" || m == "memory" {
			return fmt.Errorf("%s: without a journal on disk, a crash during a write can corrupt the file and lose committed ranges; use WAL (leafd's default) or leave the journal mode out", s.param)
		}
	}
	// SQLite reads a level it does not know as NORMAL, and a number modulo
	// 8 (7 is OFF): only FULL and EXTRA are let through.
	for _, s := range pragmaSettings(q, "synchronous") {
		if m := strings.ToLower(s.value); m != "" && m != "full" && m != "2" && m != "extra" && m != "3" {
			return fmt.Errorf("%s: a power failure could undo committed range loads, and their IDs would be handed out again; use FULL (leafd's default) or EXTRA, or leave synchronous out", s.param)
		}
	}
	return nil
}

// pragmaForm is the one shape of a _pragma that leafd reads, and so lets
// through: [schema.]name, alone, with (value) or with = value, the value a
// word or a number (signed or quoted). A looser reading would miss a
// setting hidden by an SQL comment (synchronous/**/=off), a quoted name or
// a second statement, which SQLite would run all the same.
var pragmaForm = regexp.MustCompile(`^\s*(?:\w+\s*\.\s*)?(\w+)\s*(?:\(\s*([+-]?\w*|'[^']*'|"[^"]*")\s*\)|=\s*([+-]?\w*|'[^']*'|"[^"]*"))?\s*$`)

// splitPragma returns the name, lower case and without a schema, and the
// value, unquoted, of a _pragma: journal_mode(WAL), synchronous = off, or
// main.synchronous('OFF'); false when v is not of pragmaForm.
func splitPragma(v string) (name, value string, ok bool) {
	m := pragmaForm.FindStringSubmatch(v)
	if m == nil {
		return "", "", false
	}
	return strings.ToLower(m[1]), strings.Trim(m[2]+m[3], `'"`), true
}

// sqliteTrue reports whether SQLite may read the URI parameter value v as
// true (sqlite3_uri_boolean): yes, on, true, or a number other than 0. A
// value that begins with a digit is taken for true unless it is all zeros,
// since SQLite reads hexadecimal (0x1) and stops at the first character
// that is not a digit.
func sqliteTrue(v string) bool {
	v = strings.ToLower(strings.TrimSpace(v))
	if v != "" && v[0] >= '0' && v[0] <= '9' {
		return strings.Trim(v, "0") != ""
	}
	return v == "yes" || v == "on" || v == "true"
}

// hasParam reports whether the DSN's parameters set key, or for
// _pragma, the pragma named pragma.
func hasParam(q url.Values, key, pragma string) bool {
	if pragma == "" {
		return q.Has(key)
	}
	return len(pragmaSettings(q, pragma)) > 0
}

// shorthands are modernc.org/sqlite's shorthand keys for pragmas:
// _sync=FULL sets synchronous as _pragma=synchronous(FULL) does.
var shorthands = map[string][]string{
	"busy_timeout": {"_busy_timeout", "_timeout"},
	"journal_mode": {"_journal_mode", "_journal"},
	"synchronous":  {"_synchronous", "_sync"},
}

// A pragmaSetting is one setting of a pragma in a DSN: the parameter as
// the DSN writes it, and its value.
type pragmaSetting struct{ param, value string }

// pragmaSettings returns each setting of the pragma name in q, by _pragma
// (of pragmaForm) or by a shorthand key.
func pragmaSettings(q url.Values, name string) []pragmaSetting {
	var settings []pragmaSetting
	for _, v := range q["_pragma"] {
		if n, value, ok := splitPragma(v); ok && n == name {
			settings = append(settings, pragmaSetting{"_pragma=" + v, value})
		}
	}
	for _, key := range shorthands[name] {
		for _, v := range q[key] {
			settings = append(settings, pragmaSetting{key + "=" + v, v})
		}
	}
	return settings
}

// escapePath escapes the characters that SQLite's URI parser would
// read as something other than part of the path.
func escapePath(path string) string {
	return strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
}

// sqliteMigrating serialises the migrations of this process, per file: a
// semaphore (chan struct{}) by absolute path. The lock file serialises
// processes.
var sqliteMigrating sync.Map

// migrating returns the semaphore of the migrations of the file at path.
func migrating(path string) chan struct{} {
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	sem, _ := sqliteMigrating.LoadOrStore(path, make(chan struct{}, 1))
	return sem.(chan struct{})
}

// migrate applies the pending migrations with goose. Processes that share
// the file migrate one after the other: each holds an exclusive lock
// (flock) on the file's sibling <file>.migrate.lock meanwhile, and the
// others then find nothing to do. It is idempotent.
//
// Errors: store_unavailable when the file cannot be opened or stays locked;
// an error without a code when ctx ends while waiting for the lock or a
// migration fails.
func migrate(ctx context.Context, m engine.Migrator) error {
	path := m.Addr()
	sem := migrating(path)
	select {
	case sem <- struct{}{}:
		defer func() { <-sem }()
	case <-ctx.Done():
		return fmt.Errorf("store: sqlite: migrate: waiting for another migration: %w", ctx.Err())
	}
	unlock, err := lockFile(ctx, path+".migrate.lock")
	if err != nil {
		return fmt.Errorf("store: sqlite: migrate: %w", err)
	}
	defer unlock()
	return m.Wrap(m.Write(ctx, m.Up), "migrate")
}

// rows are SQLite's rows of the error table (store/internal/engine/classify.go), by result
// code, an extended code before its primary code.
var rows = []engine.Rule{
	{Code: "SQLITE_BUSY", From: "SQLite",
		Name:  "another connection or process holds the file's write lock past the busy timeout",
		Class: engine.ClassRetry, Cause: "the SQLite file stayed locked by another connection or process (busy)",
		Hint: "see what else writes the file: a long transaction of another program holds every writer up"},
	{Code: "SQLITE_LOCKED", From: "SQLite",
		Name:  "a table is locked by another connection of the process",
		Class: engine.ClassRetry, Cause: "the SQLite file stayed locked by another connection or process (busy)",
		Hint: "see what else writes the file: a long transaction of another program holds every writer up"},
	{Code: "SQLITE_CONSTRAINT_PRIMARYKEY", From: "SQLite",
		Name: "a primary key was hit", Class: engine.ClassDuplicate},
	{Code: "SQLITE_CONSTRAINT_UNIQUE", From: "SQLite",
		Name: "a unique index was hit", Class: engine.ClassDuplicate},
	{Code: "SQLITE_CANTOPEN", From: "SQLite",
		Name: "the file cannot be opened",
		// "cannot be reached" as for a server, so that one phrase finds
		// every store that cannot be used at all.
		Class: engine.ClassUnavailable, Cause: "the SQLite database cannot be reached: the file store.dsn names cannot be opened",
		Hint: "check that the path names a file, not a directory, that its directory exists, and that leafd may write there"},
	{Code: "SQLITE_READONLY", From: "SQLite",
		Name:  "the file cannot be written",
		Class: engine.ClassUnavailable, Cause: "the SQLite file cannot be written (read-only)",
		Hint: "check the permissions of the file and of its directory, and that the file system is not mounted read-only"},
	{Code: "SQLITE_AUTH", From: "SQLite",
		Name:  "authorization denied",
		Class: engine.ClassUnavailable, Cause: "access to the SQLite file is denied",
		Hint: "check the permissions of the file and of its directory"},
	{Code: "SQLITE_PERM", From: "SQLite",
		Name:  "access permission denied",
		Class: engine.ClassUnavailable, Cause: "access to the SQLite file is denied",
		Hint: "check the permissions of the file and of its directory"},
	{Code: "SQLITE_FULL", From: "SQLite",
		Name:  "the disk is full",
		Class: engine.ClassUnavailable, Cause: "the disk of the SQLite file is full", Hint: "free space on it"},
	{Code: "SQLITE_IOERR", From: "SQLite",
		Name:  "an I/O error",
		Class: engine.ClassUnavailable, Cause: "the SQLite file could not be read or written (I/O error)",
		Hint: "check the disk and the file system; see the system log"},
	{Code: "SQLITE_NOLFS", From: "SQLite",
		Name:  "the file is too large for the file system",
		Class: engine.ClassUnavailable, Cause: "the file system of the SQLite file cannot hold a file this large",
		Hint: "move the file to another file system"},
	{Code: "SQLITE_PROTOCOL", From: "SQLite",
		Name:  "the file locking protocol failed",
		Class: engine.ClassUnavailable, Cause: "SQLite's file locking failed (a locking protocol error)",
		Hint: "retry; keep the file off network file systems"},
	{Code: "SQLITE_INTERRUPT", From: "SQLite",
		Name:  "the operation was interrupted",
		Class: engine.ClassUnavailable, Cause: "the SQLite operation was interrupted",
		Hint: "the request ended or the server is shutting down; retry"},
}

// codes are the SQLite result codes the table names.
var codes = map[string]int{
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

// rules indexes rows by result code.
var rules = engine.IndexRules(rows, func(ix *engine.RuleIndex, r *engine.Rule) error {
	n, ok := codes[r.Code]
	if !ok {
		return fmt.Errorf("unknown SQLite code %q", r.Code)
	}
	ix.ByNumber[n] = append(ix.ByNumber[n], r)
	return nil
})

// classify sorts the errors of SQLite by the error table (the
// extended result code, then the primary one), and words those that make
// the store unavailable.
func classify(err error) engine.Verdict {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return engine.Verdict{Class: engine.ClassOther}
	}
	return rule(se.Code(), se.Error()).Verdict(se.Error(), "", "", 0)
}

// rule returns the row of the error table for result code code, or
// nil.
func rule(code int, msg string) *engine.Rule {
	if r := engine.Pick(rules.ByNumber[code], msg); r != nil {
		return r
	}
	return engine.Pick(rules.ByNumber[code&0xff], msg)
}
