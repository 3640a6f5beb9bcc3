package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/segment"
	"github.com/leafd/leafd/store/internal/engine"
)

// MaxTableStep is the largest table step a tag can have: the step column is a
// MySQL INT. It is not segment.max_step, which caps the step a server chooses.
const MaxTableStep = math.MaxInt32

// Retries of a transaction the database aborted for a retry: attempts in
// all (unless the store sets a time budget instead), and the bounds of the
// backoff before each new attempt.
const (
	maxAttempts = 5
	backoffMin  = 5 * time.Millisecond
	backoffMax  = 250 * time.Millisecond
)

// The SQL that MySQL and SQLite share. Both bind with '?'.
const (
	// allocateSQL advances max_id by the chosen step (arguments: floor,
	// floor, step, tag, floor, floor, limit - step). A max_id below the
	// floor counts as the floor: 1 for Allocate, so that no ID below 1 is
	// ever issued, and a dated tag's period's first number for AllocateIn.
	// The guard keeps the sum at or below the limit (2^63-1 for Allocate)
	// without ever computing a larger one: MySQL would fail on the overflow
	// and SQLite would silently turn the sum into a REAL. update_time is
	// set here because SQLite has no ON UPDATE clause; on MySQL it is what
	// ON UPDATE would do anyway. It writes nothing in a database of
	// store.shards (see shardedSQL).
	allocateSQL = `UPDATE leaf_alloc
SET max_id = (CASE WHEN max_id < ? THEN ? ELSE max_id END) + ?, update_time = CURRENT_TIMESTAMP
WHERE biz_tag = ? AND (CASE WHEN max_id < ? THEN ? ELSE max_id END) <= ?
AND NOT EXISTS (SELECT 1 FROM leafd_shard)`
	// refusedSQL reads the max_id of the row allocateSQL did not change
	// (no row: an unknown tag); the dialect's lock suffix is appended, so
	// that AllocateIn's UPDATE of the room left finds the row as read.
	refusedSQL   = `SELECT max_id FROM leaf_alloc WHERE biz_tag = ?`
	readAllocSQL = `SELECT max_id, step FROM leaf_alloc WHERE biz_tag = ?`
	// shardedSQL counts the record of store.shards: a server that serves
	// the database alone while sharding is initialised on it (or with
	// store.dsn set to one of store.shards, unchecked at start-up) would
	// hand out the IDs its slots hand out.
	shardedSQL   = `SELECT COUNT(*) FROM leafd_shard`
	insertSQL    = `INSERT INTO leaf_alloc (biz_tag, max_id, step, description) VALUES (?, ?, ?, ?)`
	updateTagSQL = `UPDATE leaf_alloc SET step = ?, description = ?, update_time = CURRENT_TIMESTAMP WHERE biz_tag = ?`
	tagColumns   = `SELECT biz_tag, max_id, step, description, update_time FROM leaf_alloc`
	tagNamesSQL  = `SELECT biz_tag FROM leaf_alloc`
)

// db is the store of every engine: the shared SQL over the engine's
// dialect.
type db struct {
	x *sqlx.DB
	// dialect is the engine's: its SQL, its errors, its migrations.
	dialect *engine.Dialect
	log     *slog.Logger
	// writers, made when the dialect has one writer at a time, holds the
	// writing transaction of this store that runs.
	writers chan struct{}
	// cluster walks store.fallback_dsns; nil with a single address. addr
	// is the first address's name (host:port, a socket, a file).
	cluster *failover
	addr    string
	// beforeCommit, when set (by tests only, testhook.BeforeCommit), runs between
	// the SELECT and the COMMIT of Allocate.
	beforeCommit func(context.Context, *sqlx.Tx) error
	// afterLayoutRead, when set (by tests only, testhook.AfterLayoutRead), runs in a
	// worker id's claim after it read the recorded layout and before it
	// writes, so that a test can hold a claim there.
	afterLayoutRead func()
}

// Driver returns the engine's name as store.driver spells it (Drivers).
func (s *db) Driver() string { return s.dialect.Driver }

// newDB returns the shared implementation over x in dialect d, at the
// addresses of cluster (nil with one) whose first is addr.
func newDB(d *engine.Dialect, x *sqlx.DB, cluster *failover, addr string, log *slog.Logger) *db {
	s := &db{x: x, dialect: d, cluster: cluster, addr: addr, log: log}
	if d.OneWriter {
		s.writers = make(chan struct{}, 1)
	}
	return s
}

// leave tells the failover of an error that made the database count as
// unavailable, so that a node that answered but refuses writes is left;
// being told of one error twice does no harm.
func (s *db) leave(err error) {
	if s.cluster != nil && s.dialect.Refused(err) {
		s.cluster.refused()
	}
}

// q returns query, written with '?' placeholders, in the placeholders of
// the store's driver ($1, $2, … for PostgreSQL).
func (s *db) q(query string) string { return s.x.Rebind(query) }

// queryer is a pool or a transaction: what the helpers that run in either
// take, placeholders rebound by its Rebind.
type queryer interface {
	sqlx.QueryerContext
	Rebind(query string) string
}

// writeError is err, the failed write of a tag's row, as the engine words
// it (its column limits).
func (s *db) writeError(ctx context.Context, err error) error {
	if s.dialect.WriteError == nil {
		return err
	}
	return s.dialect.WriteError(ctx, s.x, err)
}

// Close closes the connection pool. Calls in flight may fail afterwards.
func (s *db) Close() error { return s.x.Close() }

// Ping checks that the database answers. It returns a store_unavailable
// *leafd.Error if it does not.
func (s *db) Ping(ctx context.Context) error {
	return s.Wrap(s.x.PingContext(ctx), "ping")
}

// Allocate advances tag's max_id by step and returns the range
// [new max_id - step, new max_id) together with the table step and the
// tag's recorded format, all in one transaction. It returns only after the
// COMMIT succeeded; on any error the caller gets no range, and the IDs of a
// transaction whose COMMIT outcome is unknown are never issued by anyone.
// A dated tag's row is refused with segment.ErrDatedRow, nothing written.
//
// The range must start at or above the tag's high-water mark, the end of
// the highest range ever handed out for it (highwater.go), which the same
// transaction raises to the new max_id.
//
// Errors: unknown_tag when no row has that tag; tag_exhausted when the new
// max_id would pass 2^63-1 (nothing is written); tag_rewound when the range
// would start below the high-water mark (nothing is written);
// store_unavailable when the database cannot be reached or kept aborting the
// transaction; an error without a code when step is below 1 or the database
// failed otherwise.
func (s *db) Allocate(ctx context.Context, tag string, step int64) (segment.Allocation, error) {
	return s.allocateWith(ctx, tag, step, nil)
}

// AllocateIn is Allocate for a dated tag: its range lies in the window
// within answers for the database's clock, read first in the transaction
// (Dialect.NowUs). A max_id below the window's Floor is raised to it; the
// range ends at or below its Limit, shorter than step when less room is
// left. The high-water mark is kept and checked as by Allocate, so a
// max_id lowered within a period is tag_rewound.
//
// Errors: those of Allocate, except tag_exhausted; within's own, as it
// returned it (nothing is written); period_exhausted when max_id, raised to
// Floor, is at or past Limit (nothing is written).
func (s *db) AllocateIn(ctx context.Context, tag string, step int64, within func(dbNow time.Time) (segment.Window, error)) (segment.Allocation, error) {
	if within == nil {
		return segment.Allocation{}, fmt.Errorf("store: allocate %q: no window", tag)
	}
	a, err := s.allocateWith(ctx, tag, step, within)
	if we, ok := errors.AsType[windowError](err); ok {
		return segment.Allocation{}, we.err
	}
	return a, err
}

// windowError is the error of AllocateIn's within, carried out of the
// transaction untouched: neither retried nor wrapped.
type windowError struct{ err error }

func (e windowError) Error() string { return e.err.Error() }
func (e windowError) Unwrap() error { return e.err }

// allocateWith is Allocate, or AllocateIn when within is not nil.
func (s *db) allocateWith(ctx context.Context, tag string, step int64, within func(time.Time) (segment.Window, error)) (segment.Allocation, error) {
	if step < 1 {
		return segment.Allocation{}, fmt.Errorf("store: allocate %q: step %d is below 1", tag, step)
	}
	var a segment.Allocation
	err := s.writeOrNextAddress(ctx, func(ctx context.Context) (err error) {
		a, err = s.allocate(ctx, tag, step, within)
		return err
	})
	if err != nil {
		return segment.Allocation{}, s.Wrap(err, fmt.Sprintf("allocate %q", tag))
	}
	return a, nil
}

// maxClips bounds the UPDATEs of AllocateIn's transaction that find less
// room left in the window than they ask for. The row is locked after the
// first, so the second fits; more means another writer keeps getting in
// between, and the whole transaction is tried again.
const maxClips = 3

func (s *db) allocate(ctx context.Context, tag string, step int64, within func(time.Time) (segment.Window, error)) (segment.Allocation, error) {
	tx, err := s.x.BeginTxx(ctx, nil)
	if err != nil {
		return segment.Allocation{}, err
	}
	defer tx.Rollback() // a no-op once committed
	w := segment.Window{Floor: 1, Limit: leafd.MaxID}
	if within != nil {
		var us int64
		if err := tx.QueryRowContext(ctx, "SELECT "+s.dialect.NowUs).Scan(&us); err != nil {
			return segment.Allocation{}, err
		}
		if w, err = within(time.UnixMicro(us)); err != nil {
			return segment.Allocation{}, windowError{err}
		}
		// Size the range from the room the window has left, read with the
		// row locked: a server's own idea of it may be old.
		var ids []int64
		if err := tx.SelectContext(ctx, &ids, s.q(refusedSQL+s.dialect.LockSuffix), tag); err != nil {
			return segment.Allocation{}, err
		}
		if len(ids) == 1 {
			from := max(ids[0], w.Floor)
			switch {
			case from > w.Limit:
				return segment.Allocation{}, laterPeriod(tag, ids[0], w)
			case from == w.Limit:
				return segment.Allocation{}, periodExhausted(tag, w)
			case w.Share > 0:
				step = min(step, max(1, (w.Limit-from)/w.Share))
			}
		}
	}
	for clips := 0; ; clips++ {
		n, err := affected(tx.ExecContext(ctx, s.q(allocateSQL), w.Floor, w.Floor, step, tag, w.Floor, w.Floor, w.Limit-step))
		if err != nil {
			return segment.Allocation{}, err
		}
		if n > 0 {
			break
		}
		var shards int
		if err := tx.QueryRowContext(ctx, shardedSQL).Scan(&shards); err != nil {
			return segment.Allocation{}, err
		}
		if shards > 0 {
			return segment.Allocation{}, leafd.Errorf(leafd.EStoreUnavailable,
				"the database is part of store.shards: served alone it would hand out its slots' IDs again; "+
					"stop this server and give it the deployment's store.shards")
		}
		var ids []int64
		if err := tx.SelectContext(ctx, &ids, s.q(refusedSQL+s.dialect.LockSuffix), tag); err != nil {
			return segment.Allocation{}, err
		}
		switch {
		case len(ids) == 0:
			return segment.Allocation{}, leafd.UnknownTagError(tag)
		case within == nil:
			return segment.Allocation{}, leafd.Errorf(leafd.ETagExhausted,
				"tag %q is exhausted: a range of %d more IDs would pass the largest ID, %d", tag, step, leafd.MaxID)
		}
		from := max(ids[0], w.Floor)
		switch {
		case from > w.Limit:
			return segment.Allocation{}, laterPeriod(tag, ids[0], w)
		case from == w.Limit:
			return segment.Allocation{}, periodExhausted(tag, w)
		case clips == maxClips:
			return segment.Allocation{}, errRetry{fmt.Errorf("tag %q: the room left below %d kept shrinking", tag, w.Limit)}
		}
		step = min(step, w.Limit-from) // the last numbers of the window
	}
	var maxID, tableStep int64
	if err := tx.QueryRowContext(ctx, s.q(readAllocSQL), tag).Scan(&maxID, &tableStep); err != nil {
		return segment.Allocation{}, err
	}
	if maxID-step < w.Floor || maxID > w.Limit {
		// The UPDATE guarantees floor + step <= max_id <= limit; anything
		// else means the row is not what this transaction just wrote.
		return segment.Allocation{}, fmt.Errorf("max_id %d read back after adding %d in %v is impossible", maxID, step, w)
	}
	if err := s.raiseMark(ctx, tx, tag, maxID-step, maxID); err != nil {
		return segment.Allocation{}, err // rolled back: leaf_alloc is unchanged
	}
	// The format of the row the range comes from (Allocation.Format).
	// AllocateIn serves dated tags, whose format never changes: a dated
	// tag has a past from its creation on (format.go).
	format := []leafd.Tag{{Name: tag}}
	if within == nil {
		if err := s.withFormats(ctx, tx, format, tag); err != nil {
			return segment.Allocation{}, err
		}
		if format[0].Format == segment.FormatDated {
			return segment.Allocation{}, segment.ErrDatedRow // rolled back
		}
	}
	if s.beforeCommit != nil {
		if err := s.beforeCommit(ctx, tx); err != nil {
			return segment.Allocation{}, err
		}
	}
	if err := tx.Commit(); err != nil {
		return segment.Allocation{}, err
	}
	return segment.Allocation{Start: maxID - step, End: maxID, TableStep: tableStep, Format: format[0].Format}, nil
}

// laterPeriod is AllocateIn's answer when max_id is past the window: only
// a range of a later window takes it there (other servers' clocks passed
// the period's end first, or max_id was set so by hand).
func laterPeriod(tag string, maxID int64, w segment.Window) error {
	return windowError{fmt.Errorf("tag %q: max_id %d is past %d: %w", tag, maxID, w.Limit, segment.ErrLaterPeriod)}
}

func periodExhausted(tag string, w segment.Window) error {
	return leafd.Errorf(leafd.EPeriodExhausted, "tag %q has no number left below %d", tag, w.Limit)
}

// TagNames returns the name of every tag, sorted.
//
// Errors: store_unavailable when the database cannot be reached; an error
// without a code otherwise.
func (s *db) TagNames(ctx context.Context) ([]string, error) {
	var names []string
	if err := s.x.SelectContext(ctx, &names, tagNamesSQL); err != nil {
		return nil, s.Wrap(err, "list tag names")
	}
	slices.Sort(names)
	return names, nil
}

// ListTags returns every row of leaf_alloc, sorted by tag name (byte
// order, whatever the table's collation), with update_time in UTC.
//
// Errors: store_unavailable when the database cannot be reached; an error
// without a code otherwise.
func (s *db) ListTags(ctx context.Context) ([]leafd.Tag, error) {
	var rows []tagRow
	if err := s.x.SelectContext(ctx, &rows, tagColumns); err != nil {
		return nil, s.Wrap(err, "list tags")
	}
	tags := make([]leafd.Tag, len(rows))
	for i, r := range rows {
		tags[i] = r.tag()
	}
	if err := s.withFormats(ctx, s.x, tags, ""); err != nil {
		return nil, s.Wrap(err, "list tag formats")
	}
	slices.SortFunc(tags, func(a, b leafd.Tag) int { return strings.Compare(a.Name, b.Name) })
	return tags, nil
}

// LookupTag returns the row of one tag, found by its exact name: a row
// whose name differs only in letter case (MySQL's default collation
// compares so) is not that tag.
//
// Exact names here and in ListTags are also what keeps Allocate exact.
// Allocate's UPDATE finds its row with the collation's "=", which on MySQL's
// default collation ignores case, so Allocate("ORDER") would advance the
// row "order". The allocator never asks that: it allocates only for names
// it took from ListTags (each row's own name, as stored) or from this
// method (a row of exactly the name asked for); a request for "ORDER" when
// only "order" exists is answered unknown_tag without reaching Allocate.
// storetest's AllocatorExactCase defends this. CreateTag and UpdateTag
// compare exactly on their own.
//
// Errors: unknown_tag when no row has that name; store_unavailable when the
// database cannot be reached; an error without a code otherwise.
func (s *db) LookupTag(ctx context.Context, name string) (leafd.Tag, error) {
	r, ok, err := exactRow(ctx, s.x, name, "")
	if err != nil {
		return leafd.Tag{}, s.Wrap(err, fmt.Sprintf("look up tag %q", name))
	}
	if !ok {
		return leafd.Tag{}, leafd.UnknownTagError(name)
	}
	t := []leafd.Tag{r.tag()}
	if err := s.withFormats(ctx, s.x, t, name); err != nil {
		return leafd.Tag{}, s.Wrap(err, fmt.Sprintf("look up the format of tag %q", name))
	}
	return t[0], nil
}

// exactRow reads the row named exactly name, with suffix (" FOR UPDATE" or
// "") after its WHERE. It reports false when there is none: a row that the
// "=" of MySQL's default collation finds, its name differing in letter
// case, is another tag.
func exactRow(ctx context.Context, q queryer, name, suffix string) (tagRow, bool, error) {
	var rows []tagRow
	if err := sqlx.SelectContext(ctx, q, &rows, q.Rebind(tagColumns+` WHERE biz_tag = ?`+suffix), name); err != nil {
		return tagRow{}, false, err
	}
	for _, r := range rows {
		if r.Name == name {
			return r, true, nil
		}
	}
	return tagRow{}, false, nil
}

// caseTwins returns the names of the rows that equal name but for letter
// case, name itself included if it is there, sorted. name must be valid
// (leafd.ValidateTag): ASCII.
func caseTwins(ctx context.Context, q queryer, name string) ([]string, error) {
	query, args := caseTwinsQuery(name)
	var names []string
	if err := sqlx.SelectContext(ctx, q, &names, q.Rebind(query), args...); err != nil {
		return nil, err
	}
	slices.Sort(names)
	return names, nil
}

// caseTwinsLetters bounds the letters of a name whose case caseTwinsQuery
// varies: at most 2^4 ranges of the primary key.
const caseTwinsLetters = 4

// caseTwinsQuery is the query of caseTwins and its arguments. LOWER on
// both sides compares without case whatever the column's collation
// (MySQL's default ignores case, SQLite's BINARY does not), but no index
// serves it: alone it would read every row, and 10,000 tags created one
// after another would read 50 million. So the primary key first narrows
// the rows to those that can match: the name itself (under a collation
// that ignores case, every match), and the names that begin with name's
// first four letters, and what precedes them, in any mix of case (under a
// binary collation, every match).
func caseTwinsQuery(name string) (string, []any) {
	cut, letters := len(name), []int(nil)
	for i := 0; i < len(name) && cut == len(name); i++ {
		if c := name[i] | 0x20; 'a' <= c && c <= 'z' {
			letters = append(letters, i)
			if len(letters) == caseTwinsLetters {
				cut = i + 1
			}
		}
	}
	var b strings.Builder
	b.WriteString(`SELECT biz_tag FROM leaf_alloc WHERE (biz_tag = ?`)
	args := []any{name}
	for m := range 1 << len(letters) {
		v := []byte(name[:cut])
		for j, i := range letters {
			if m>>j&1 == 1 {
				v[i] ^= 0x20 // the other case of an ASCII letter
			}
		}
		if cut == len(name) {
			b.WriteString(` OR biz_tag = ?`)
			args = append(args, string(v))
			continue
		}
		end := slices.Clone(v)
		end[len(end)-1]++ // past every name that begins with v
		b.WriteString(` OR (biz_tag >= ? AND biz_tag < ?)`)
		args = append(args, string(v), string(end))
	}
	b.WriteString(`) AND LOWER(biz_tag) = LOWER(?)`)
	return b.String(), append(args, name)
}

// tagExists is the tag_exists error for creating name where the rows
// named same are: name itself, or names the database takes for it.
func tagExists(name string, same []string) error {
	if len(same) == 0 || slices.Contains(same, name) {
		return leafd.Errorf(leafd.ETagExists, "tag %q already exists; change its step with PATCH /api/tags/%s or leafd tag set-step", name, name)
	}
	other := same[0]
	if strings.EqualFold(other, name) {
		return leafd.Errorf(leafd.ETagExists, "tag %q cannot be created: a tag that differs only in letter case, %q, exists; "+
			"tag names are compared without case on MySQL, so leafd refuses such a pair on every store: use %q or another name", name, other, other)
	}
	return leafd.Errorf(leafd.ETagExists, "tag %q cannot be created: the database's collation takes it for the tag %q, which exists: use %q or another name", name, other, other)
}

// CreateTag inserts a tag and returns its row as stored, update_time and
// format included. A MaxID below 1 is stored as 1; UpdateTime is ignored
// (the database sets it).
//
// A tag deleted before (its leaf_alloc row gone, its format and high-water
// mark kept) is created again only in the format, domain and key it had,
// and its max_id starts at or above its mark: it continues above every ID
// it issued.
//
// A name that differs from an existing tag's only in letter case is
// refused on every engine, so that a set of tags made on SQLite moves to
// MySQL, whose default collation would take the two for one tag.
//
// Errors: invalid_tag for a name leafd.ValidateTag refuses; invalid_body for
// a step outside 1..MaxTableStep, a description over 256 characters or not
// UTF-8, or one the column's character set cannot store (MySQL), or a
// format, digits, period, zone or max_step that do not make a tag;
// tag_exists when the tag is already there, or a tag whose name
// differs only in letter case (its message names that tag; nothing is
// changed); tag_conflict when the name was another tag before (another
// format, domain or key, another period, zone or counter width of a dated
// tag), or its records are shared with a tag deleted
// before whose name differs only in letter case; store_unavailable when the
// database cannot be reached; an error without a code otherwise.
func (s *db) CreateTag(ctx context.Context, t leafd.Tag) (leafd.Tag, error) {
	// The first problem, in this order, is the answer.
	if err := cmp.Or(leafd.ValidateTag(t.Name), leafd.ValidateStep(t.Step, MaxTableStep),
		leafd.ValidateDescription(t.Description), validateFormat(t)); err != nil {
		return leafd.Tag{}, err
	}
	t.MaxID = max(t.MaxID, 1)
	desc := nullString(t.Description)
	var stored leafd.Tag
	err := s.write(ctx, func(ctx context.Context) error {
		tx, err := s.x.BeginTxx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		// A tag deleted before is created as it was, above every ID it
		// issued, or refused.
		p, err := creatable(ctx, tx, t)
		if err != nil {
			return err
		}
		// Created since the SELECT, or equal to the name by a collation
		// that folds more than case (ß and ss): asked again outside this
		// transaction, whose snapshot does not show it.
		exists := func() error {
			tx.Rollback()
			var same []string
			if err := s.x.SelectContext(ctx, &same, s.q(tagNamesSQL+` WHERE biz_tag = ?`), t.Name); err != nil {
				return err
			}
			slices.Sort(same)
			return tagExists(t.Name, same)
		}
		if _, err := tx.ExecContext(ctx, s.q(insertSQL), t.Name, max(t.MaxID, p.mark), t.Step, desc); err != nil {
			if s.class(err) != engine.ClassDuplicate {
				return s.writeError(ctx, err)
			}
			return exists()
		}
		switch {
		case p.format.Name == "":
			if err := s.insertFormat(ctx, tx, t); err != nil {
				return err
			}
		case t.Format == segment.FormatDated && p.format.MaxStep != t.MaxStep:
			// Created again as it was (check): only the cap of the
			// servers' steps may change, as the creation asks.
			if _, err := tx.ExecContext(ctx, s.q(maxStepSQL), t.MaxStep, t.Name); err != nil {
				return err
			}
		}
		var r tagRow
		if err := tx.GetContext(ctx, &r, s.q(tagColumns+` WHERE biz_tag = ?`), t.Name); err != nil {
			return err
		}
		// The definition as stored, format included, is what the server
		// that took the request serves.
		got := []leafd.Tag{r.tag()}
		if err := s.withFormats(ctx, tx, got, t.Name); err != nil {
			return err
		}
		if err := tx.Commit(); err != nil {
			if s.class(err) == engine.ClassDuplicate {
				// TiDB checks uniqueness at COMMIT in optimistic
				// transactions: the COMMIT failed, nothing was written.
				return exists()
			}
			return err
		}
		stored = got[0]
		return nil
	})
	if err != nil {
		return leafd.Tag{}, s.Wrap(err, fmt.Sprintf("create tag %q", t.Name))
	}
	return stored, nil
}

// creatable checks, through q, that t can be created: no tag has its name
// or one that differs only in letter case (tag_exists), and a tag deleted
// before under that name was the same tag (tag_conflict otherwise). It
// returns the name's past, whose mark the new max_id must not be below.
func creatable(ctx context.Context, q queryer, t leafd.Tag) (past, error) {
	same, err := caseTwins(ctx, q, t.Name)
	if err != nil {
		return past{}, err
	}
	if len(same) > 0 {
		return past{}, tagExists(t.Name, same)
	}
	p, err := pastOf(ctx, q, t.Name)
	if err != nil {
		return past{}, err
	}
	return p, p.check(t)
}

// affected returns the rows a statement changed, from ExecContext's
// results.
func affected(res sql.Result, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func nullString(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }

// UpdateTag changes a tag's table step and/or description, whichever u
// sets, and returns the row as it was and as it is now. max_id is never
// changed: lowering it would hand out IDs again. An empty description is
// stored as NULL.
//
// The tag is found by its exact name, as LookupTag finds it: a row whose
// name differs only in letter case is another tag and is never changed.
//
// Errors: invalid_body for a step outside 1..MaxTableStep, a description over
// 256 characters, not UTF-8 or that the column's character set cannot store
// (MySQL), or an update that sets nothing; unknown_tag
// when no row has exactly that name (its message names a tag that differs
// only in letter case, if there is one); store_unavailable when the
// database cannot be reached; an error without a code otherwise.
func (s *db) UpdateTag(ctx context.Context, name string, u leafd.TagUpdate) (old, updated leafd.Tag, err error) {
	switch {
	case u.Step == nil && u.Description == nil:
		return old, updated, leafd.Errorf(leafd.EInvalidBody, "nothing to change: give step, description or both")
	case u.Step != nil:
		if err := leafd.ValidateStep(*u.Step, MaxTableStep); err != nil {
			return old, updated, err
		}
	}
	if u.Description != nil {
		if err := leafd.ValidateDescription(*u.Description); err != nil {
			return old, updated, err
		}
	}
	err = s.WriteTx(ctx, func(ctx context.Context, tx *sqlx.Tx) (err error) {
		old, updated, err = s.changeTag(ctx, tx, name, func(before tagRow) (bool, error) {
			step, desc := before.Step, before.Description
			if u.Step != nil {
				step = *u.Step
			}
			if u.Description != nil {
				desc = nullString(*u.Description)
			}
			if _, err := tx.ExecContext(ctx, s.q(updateTagSQL), step, desc, name); err != nil {
				return false, s.writeError(ctx, err)
			}
			return true, nil
		})
		return err
	})
	if err != nil {
		return leafd.Tag{}, leafd.Tag{}, s.Wrap(err, fmt.Sprintf("update tag %q", name))
	}
	return old, updated, nil
}

// changeTag runs change in tx on the row named exactly name, read locked,
// and returns the tag before and after (formats included); change reports
// whether it wrote the row. Found exactly, the row is the only one its
// UPDATE can reach, although the UPDATE's own "=" would, under MySQL's
// default collation, find "order" for "ORDER": the primary key holds no
// two rows that the collation's "=" takes for one. unknown_tag when no
// row has that name.
func (s *db) changeTag(ctx context.Context, tx *sqlx.Tx, name string, change func(before tagRow) (bool, error)) (before, after leafd.Tag, err error) {
	b, ok, err := exactRow(ctx, tx, name, s.dialect.LockSuffix)
	if err != nil {
		return before, after, err
	}
	if !ok {
		return before, after, unknownTagNear(ctx, tx, name)
	}
	a := b
	if changed, err := change(b); err != nil {
		return before, after, err
	} else if changed {
		if a, ok, err = exactRow(ctx, tx, name, ""); err != nil {
			return before, after, err
		} else if !ok {
			return before, after, fmt.Errorf("the row of %q is gone after its UPDATE", name)
		}
	}
	both := []leafd.Tag{b.tag(), a.tag()}
	if err := s.withFormats(ctx, tx, both, name); err != nil {
		return before, after, err
	}
	return both[0], both[1], nil
}

// tagRow is one row of leaf_alloc as the drivers scan it.
type tagRow struct {
	Name        string         `db:"biz_tag"`
	MaxID       int64          `db:"max_id"`
	Step        int64          `db:"step"`
	Description sql.NullString `db:"description"`
	UpdateTime  time.Time      `db:"update_time"`
}

func (r tagRow) tag() leafd.Tag {
	return leafd.Tag{
		Name:        r.Name,
		MaxID:       r.MaxID,
		Step:        r.Step,
		Description: r.Description.String,
		UpdateTime:  r.UpdateTime.UTC(),
	}
}

// unknownTagNear is unknown_tag for name, naming the tag that differs from
// it only in letter case if the table has one: PATCH /api/tags/ORDER where
// "order" exists is a slip worth pointing out, on every engine.
func unknownTagNear(ctx context.Context, q queryer, name string) error {
	same, err := caseTwins(ctx, q, name)
	if err != nil {
		return err
	}
	if len(same) == 0 {
		return leafd.UnknownTagError(name)
	}
	return leafd.Errorf(leafd.EUnknownTag, "tag %q is not defined in the store; a tag that differs only in letter case, %q, exists: tag names are exact", name, same[0])
}

// write runs one writing transaction, retrying it while the database aborts
// it for a retry, at most maxAttempts times in all (or for the dialect's
// RetryFor), with jittered backoff between attempts. It gives up early when
// ctx ends and then returns the last error.
func (s *db) write(ctx context.Context, tx func(context.Context) error) error {
	return s.writeWith(ctx, false, tx)
}

// writeOrNextAddress is write, and when the database could not be reached and
// the store has further addresses of its cluster, it also tries once more
// at once, through the next one. Only for transactions whose repetition is
// harmless even when the failed attempt did commit (its answer lost): an
// allocation, whose lost range is simply never used, or a renewal. Not for
// a tag's creation, whose repetition would answer tag_exists, nor a worker
// id's claim, whose repetition would hold a second one.
func (s *db) writeOrNextAddress(ctx context.Context, tx func(context.Context) error) error {
	return s.writeWith(ctx, s.cluster != nil, tx)
}

func (s *db) writeWith(ctx context.Context, moveOn bool, tx func(context.Context) error) error {
	var err error
	movedOn := false // tried again at once after the address failed
	tries := 0       // attempts that failed, for the message
	start := time.Now()
	for attempt := 1; ; attempt++ {
		if err = s.acquire(ctx); err != nil {
			return err
		}
		err = tx(ctx)
		s.release()
		if err == nil {
			return nil
		}
		tries++
		switch s.class(err) {
		case engine.ClassRetry:
		case engine.ClassUnavailable:
			if moveOn && !movedOn && ctx.Err() == nil {
				s.leave(err) // so that the next connection is probed afresh
				movedOn = true
				attempt--
				continue
			}
			return err
		default:
			return err
		}
		spent := attempt == maxAttempts
		if s.dialect.RetryFor > 0 {
			spent = time.Since(start) >= s.dialect.RetryFor
		}
		if spent || engine.Sleep(ctx, backoff(min(attempt, 8))) != nil {
			return &retriedOut{err, tries, time.Since(start)}
		}
	}
}

// backoff returns the pause before attempt+1: exponential from backoffMin,
// at most backoffMax, with jitter so that servers that collided once do not
// collide again in step.
func backoff(attempt int) time.Duration {
	d := min(backoffMin<<(attempt-1), backoffMax)
	return d/2 + rand.N(d/2+1)
}

func (s *db) acquire(ctx context.Context) error {
	if s.writers == nil {
		return nil
	}
	select {
	case s.writers <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *db) release() {
	if s.writers != nil {
		<-s.writers
	}
}

// retriedOut is the last error of a transaction that the database kept
// aborting for a retry, with how often and how long it was tried, for the
// message.
type retriedOut struct {
	err     error
	tries   int
	elapsed time.Duration
}

func (e *retriedOut) Error() string { return e.err.Error() }
func (e *retriedOut) Unwrap() error { return e.err }

// class sorts err: the errors of the network, the context and
// database/sql first, then the driver's own.
func (s *db) class(err error) engine.Class { return s.judge(err).Class }

// judge sorts err and words it: the errors of the network, the context and
// database/sql first, then the failover's probe, then the driver's own.
func (s *db) judge(err error) engine.Verdict {
	if _, ok := errors.AsType[*leafd.Error](err); ok {
		return engine.Verdict{Class: engine.ClassOther} // already decided
	}
	if _, ok := errors.AsType[windowError](err); ok {
		return engine.Verdict{Class: engine.ClassOther} // the caller's, whatever it wraps
	}
	if _, ok := errors.AsType[errRetry](err); ok {
		return engine.Verdict{Class: engine.ClassRetry,
			Cause: "other servers kept changing the same rows at the same time",
			Hint:  "try again: it passes once fewer servers start at once"}
	}
	// The network's errors before the context's: a dial timeout is also a
	// context.DeadlineExceeded, and the network's error names the address.
	if v, ok := judgeNetwork(err); ok {
		return v
	}
	switch {
	case errors.Is(err, context.Canceled):
		return unavailable(
			"the operation was cancelled before the database answered",
			"the request ended or the server is shutting down; retry")
	case errors.Is(err, context.DeadlineExceeded):
		return unavailable(
			"the database did not answer in time",
			"it is overloaded, waits for a lock, or cannot be reached: see its log and check the address in store.dsn")
	case errors.Is(err, sql.ErrConnDone), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return engine.Lost
	}
	// The failover's probe found every node it could reach refusing
	// writes; not one of the driver's errors, so sorted here.
	if refusal, ok := errors.AsType[*engine.Refusal](err); ok {
		return refusal.Verdict
	}
	return s.dialect.Classify(err)
}

// unavailable is the verdict of a database that does not serve: what went
// wrong, and what to do.
func unavailable(cause, hint string) engine.Verdict {
	return engine.Verdict{Class: engine.ClassUnavailable, Cause: cause, Hint: hint}
}

// judgeNetwork words the errors of the network, naming the address they
// were about. It reports false for an error that is not the network's.
func judgeNetwork(err error) (engine.Verdict, bool) {
	if dns, ok := errors.AsType[*net.DNSError](err); ok {
		return unavailable(
			fmt.Sprintf("the database cannot be reached: the host name %q does not resolve (%s)", dns.Name, dns.Err),
			"check the host in store.dsn and the DNS of this machine"), true
	}
	var ne net.Error
	if !errors.As(err, &ne) {
		return engine.Verdict{}, false
	}
	at, dial := "", false
	var oe *net.OpError
	switch {
	case errors.As(err, &oe):
		if oe.Addr != nil {
			at = " at " + oe.Addr.String()
		}
		dial = oe.Op == "dial"
	case errors.Is(err, context.DeadlineExceeded):
		return engine.Verdict{}, false // the context's own error is a net.Error too
	}
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return unavailable(
			"the database cannot be reached"+at+": nothing accepts connections there (connection refused)",
			"check the address in store.dsn and that the database server runs"), true
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return unavailable(
			"the database cannot be reached"+at+": there is no route to it",
			"check the address in store.dsn and the network (routes, firewalls) between leafd and the database"), true
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return unavailable(
			"the connection to the database"+at+" was reset",
			"the database restarted, or a proxy or firewall dropped the connection; retry, and see the database's log if it persists"), true
	case ne.Timeout() && dial:
		return unavailable(
			"the database cannot be reached"+at+": it did not answer within the dial timeout",
			"check the address in store.dsn, the firewalls between, and that the host is up (the timeout is timeout= in store.dsn, 5s unless set)"), true
	case ne.Timeout():
		return unavailable(
			"the database"+at+" stopped answering (i/o timeout)",
			"it is overloaded or the network drops packets: see its log and load"), true
	}
	return unavailable(
		"the database cannot be reached"+at,
		"check the address in store.dsn and the network between leafd and the database"), true
}

// Wrap turns err into what the methods return: nil stays nil, a
// *leafd.Error passes through, an unreachable database or a transaction
// that could not be completed becomes store_unavailable with a message that
// names the cause and what to do, and anything else gets the operation's
// name for the log.
//
// The message says nothing of what the server does meanwhile (serving IDs
// from its buffers): the store is used by one-shot commands too, and the
// serving path says that itself.
func (s *db) Wrap(err error, op string) error {
	if err == nil {
		return nil
	}
	if _, ok := errors.AsType[*leafd.Error](err); ok {
		return err
	}
	v := s.judge(err)
	switch v.Class {
	case engine.ClassUnavailable:
		s.leave(err)
	case engine.ClassLocked, engine.ClassRetry:
	default:
		return fmt.Errorf("store: %s: %s: %w", s.dialect.Driver, op, err)
	}
	if v.Cause == "" { // a classifier that had nothing to say
		v.Cause, v.Hint = "the database failed the request", "see the cause in the server log"
	}
	msg := v.Cause
	var ro *retriedOut
	if v.Class == engine.ClassRetry && errors.As(err, &ro) {
		if ro.tries > 1 {
			msg += fmt.Sprintf("; retried %d times in %v", ro.tries-1, ro.elapsed.Round(time.Millisecond))
		} else {
			msg += "; the request ended before it could be retried"
		}
	}
	return leafd.Wrap(leafd.EStoreUnavailable, fmt.Errorf("%s: %s: %w", s.dialect.Driver, op, err), msg+"; "+v.Hint)
}
