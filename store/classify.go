package store

import (
	"fmt"
	"strconv"
	"strings"
)

// The error table: every error code of a database that leafd does something
// particular about, for every engine, and what it does. Each engine holds
// its rows (its dialect's rows; errorRows lists them all), and its
// classify function looks its driver's errors up there and nowhere else,
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
//     address (db.writeOrNextAddress), and a connection that met such an
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
	// engine is the store.driver the row is for, set by errorRows.
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

// ruleIndex finds the rows of one engine by code.
type ruleIndex struct {
	byNumber map[int][]*errorRule    // MySQL error numbers, SQLite result codes
	byState  map[string][]*errorRule // MySQL "SQLSTATE nnnnn" rows, PostgreSQL SQLSTATEs
	prefixes []*errorRule            // PostgreSQL classes ("08*")
}

// indexRules indexes an engine's rows by code, each filed by file. It
// panics on a row it cannot read: TestErrorTable runs it.
func indexRules(rows []errorRule, file func(ix *ruleIndex, r *errorRule) error) *ruleIndex {
	ix := &ruleIndex{byNumber: map[int][]*errorRule{}, byState: map[string][]*errorRule{}}
	for i := range rows {
		if err := file(ix, &rows[i]); err != nil {
			panic(fmt.Sprintf("store: error table: %v", err))
		}
	}
	return ix
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
