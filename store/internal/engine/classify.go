package engine

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// The error table: every error code of a database that leafd does something
// particular about, for every engine, and what it does. Each engine holds
// its rows (Dialect.Rows), and its Classify looks its driver's errors up
// there and nowhere else, so the table is the behaviour; docs/compatibility.md
// prints it, and a test (TestErrorTableDocumented) fails when the two differ.
//
// The class of a row says what leafd does:
//
//   - ClassRetry: the database aborted and rolled back the transaction so
//     that the client runs it again. The whole transaction is run again
//     from its BEGIN (never its COMMIT alone), a bounded number of times,
//     with jittered backoff. Only errors after which the database
//     guarantees that the transaction did not commit belong here: a COMMIT
//     whose outcome is unknown is not retried.
//   - ClassUnavailable: the database, or this node of it, does not serve
//     now. The call fails with store_unavailable, worded by the row's
//     cause and hint; a range load or a lease renewal of a store with
//     fallback addresses first tries once more at once through the next
//     address, and a connection that met such an answer is not used again.
//   - ClassLocked: a row lock wait timed out: store_unavailable at once,
//     not retried (the lock is most likely still held).
//   - ClassDuplicate: a primary key was hit: tag_exists for a tag's
//     creation; a worker id's claim starts again.
//   - ClassOther: a bug, a schema problem or something leafd does not
//     know: an internal error with the server's own message. Rows of this
//     class are in the table to say so, and for the migration's fallback
//     lock (1105, 1235: a server that refuses GET_LOCK).
type Rule struct {
	// Code is the engine's code for the error: an error number, a
	// SQLSTATE or its class as "08*", a result code's name. Each engine
	// says how it reads its codes (its index).
	Code string
	// Match, when set, restricts the row to errors whose message holds it
	// (ignoring case); rows with a match come before the row of the same
	// code without one.
	Match string
	// From says who sends the error; Name is its symbol in the engine's
	// documentation and what it means.
	From, Name string
	Class      Class
	// Cause and Hint word a store_unavailable error: what went wrong and
	// what to do. {message} stands for the server's message, {quoted} for
	// what the message quotes (a database's name), {ident} for that name
	// as a statement would spell it, {max_open} for the pool's size.
	Cause, Hint string
}

// Class sorts database errors by what leafd does about them.
type Class int

const (
	// ClassOther is every error that is none of the below: a bug or a
	// schema problem, reported as an internal error.
	ClassOther Class = iota
	// ClassRetry is a transaction the database aborted and rolled back so
	// that the client retries it.
	ClassRetry
	// ClassUnavailable is a database that cannot be reached or does not
	// accept writes now: the connection failed, timed out or was lost.
	ClassUnavailable
	// ClassDuplicate is an INSERT that hit the primary key.
	ClassDuplicate
	// ClassLocked is a statement that waited for a row lock held by
	// another transaction until the database gave up: that row's
	// business, not the database's, and not retried at once (the lock is
	// most likely still held).
	ClassLocked
)

// A Verdict is what leafd makes of a database error: its class, and for
// the classes reported as store_unavailable, the message for the client in
// two halves: what went wrong, and what to do about it. The two are kept
// apart so that the store can say how often a transaction was retried
// between them. Neither ever holds the DSN: only what the driver, the
// network or the database said (a user name and host, an address, a
// database name).
type Verdict struct {
	Class       Class
	Cause, Hint string
}

// Words that several engines' rows share.
const (
	AbortedCause  = "the database kept aborting the transaction (deadlock or certification conflict)"
	AbortedHint   = "try again: it passes once fewer transactions write the same rows at once"
	LostCause     = "the database closed the connection"
	LostHint      = "it restarted or killed the session, or a proxy or firewall dropped the connection; retry, and see the database's log if it persists"
	ReadOnlyCause = "the database refuses writes (read-only, a replica)"
	ReadOnlyHint  = "point store.dsn at the primary or add it to store.fallback_dsns"
)

// The verdicts that more than one source of errors can reach.
var (
	// Lost is a connection that ended under a statement.
	Lost = Verdict{ClassUnavailable, LostCause, LostHint}
	// ReadOnly is a node that answers and refuses writes: a replica, or a
	// server set read-only.
	ReadOnly = Verdict{ClassUnavailable, ReadOnlyCause, ReadOnlyHint}
)

// A Refusal is a probe's finding that a node that answered refuses writes:
// why, and the verdict of a store that found no node that takes them.
type Refusal struct {
	Reason  string
	Verdict Verdict
}

func (r *Refusal) Error() string { return r.Reason }

// RuleIndex finds the rows of one engine by code.
type RuleIndex struct {
	ByNumber map[int][]*Rule    // error numbers, result codes
	ByState  map[string][]*Rule // SQLSTATEs
	Prefixes []*Rule            // SQLSTATE classes ("08*")
}

// IndexRules indexes an engine's rows by code, each filed by file. It
// panics on a row it cannot read: the engine's tests run it.
func IndexRules(rows []Rule, file func(ix *RuleIndex, r *Rule) error) *RuleIndex {
	ix := &RuleIndex{ByNumber: map[int][]*Rule{}, ByState: map[string][]*Rule{}}
	for i := range rows {
		if err := file(ix, &rows[i]); err != nil {
			panic(fmt.Sprintf("store: error table: %v", err))
		}
	}
	return ix
}

// Pick returns the first of rules that applies to an error with message
// msg, or nil.
func Pick(rules []*Rule, msg string) *Rule {
	lower := ""
	for _, r := range rules {
		if r.Match == "" {
			return r
		}
		if lower == "" {
			lower = strings.ToLower(msg)
		}
		if strings.Contains(lower, strings.ToLower(r.Match)) {
			return r
		}
	}
	return nil
}

// Verdict fills a row's placeholders for an error with the server's message
// msg; quotedName is what msg quotes, ident that name as a statement spells
// it, maxOpen the engine's pool size. A nil row is ClassOther.
func (r *Rule) Verdict(msg, quotedName, ident string, maxOpen int) Verdict {
	if r == nil {
		return Verdict{Class: ClassOther}
	}
	if quotedName == "" {
		quotedName, ident = "named in store.dsn", "<name>"
	}
	fill := strings.NewReplacer("{message}", msg, "{quoted}", quotedName, "{ident}", ident,
		"{max_open}", strconv.Itoa(maxOpen))
	return Verdict{Class: r.Class, Cause: fill.Replace(r.Cause), Hint: fill.Replace(r.Hint)}
}

// IsOff reports whether a boolean server variable reads false: 0, or OFF
// where the server reports it by name.
func IsOff(v string) bool { return v == "0" || strings.EqualFold(v, "OFF") }

// QueryValue returns column col of the first row of query on conn, as
// text; "" when there is no row. Probes ask with it.
func QueryValue(ctx context.Context, conn driver.QueryerContext, query string, col int) (string, error) {
	rows, err := conn.QueryContext(ctx, query, nil)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	v := make([]driver.Value, len(rows.Columns()))
	if col >= len(v) {
		return "", fmt.Errorf("%s: %d columns", query, len(v))
	}
	if err := rows.Next(v); err != nil {
		if err == io.EOF {
			return "", nil
		}
		return "", err
	}
	if b, ok := v[col].([]byte); ok {
		return string(b), nil
	}
	return fmt.Sprint(v[col]), nil
}

// Quoted returns what the first pair of quotes q in msg holds, as in a
// server's "Unknown database 'leafd'"; "" when there is none.
func Quoted(msg, q string) string {
	_, rest, ok := strings.Cut(msg, q)
	name, _, closed := strings.Cut(rest, q)
	if !ok || !closed {
		return ""
	}
	return name
}

// Sleep waits for d, or until ctx ends: ctx.Err() then.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// ReleaseLock runs query (with arg) on conn to release a session lock (if
// the session holds it) and hands conn back. A connection whose release
// failed may still hold the lock, so it is discarded instead: closing the
// session releases the lock on the server.
func ReleaseLock(ctx context.Context, conn *sql.Conn, query string, arg any) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	var released any
	if err := conn.QueryRowContext(ctx, query, arg).Scan(&released); err != nil {
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	}
	_ = conn.Close()
}
