// Package store keeps leafd's state in a SQL database: Meituan Leaf's
// leaf_alloc table, in MySQL (and MariaDB, and engines that speak the same
// SQL) or in an embedded SQLite file. It implements segment.Store.
//
// MySQL and SQLite share one implementation of everything but opening the
// database and migrating it. Opening never connects: a server whose
// database is down still starts, and every method reports a database it
// cannot reach as a store_unavailable *leafd.Error. A transaction that the
// database aborts so that it can be retried (a deadlock, a lock wait
// timeout, a Galera or Group Replication certification conflict, a busy
// SQLite file) is retried a few times with jittered backoff before that.
//
// A range is handed out only after its COMMIT returned success: whatever
// fails before that, including the COMMIT itself, yields no range.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/segment"
)

var (
	_ segment.Store = (*MySQL)(nil)
	_ segment.Store = (*SQLite)(nil)
)

// MaxStep is the largest table step a tag can have: the step column is a
// MySQL INT.
const MaxStep = math.MaxInt32

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
	// allocateSQL advances max_id by the chosen step (arguments: step, tag,
	// leafd.MaxID - step). A max_id below 1 counts as 1, so that no ID below
	// 1 is ever issued. The guard keeps the sum at or below 2^63-1 without
	// ever computing a larger one: MySQL would fail on the overflow and
	// SQLite would silently turn the sum into a REAL. update_time is set
	// here because SQLite has no ON UPDATE clause; on MySQL it is what ON
	// UPDATE would do anyway.
	allocateSQL = `UPDATE leaf_alloc
SET max_id = (CASE WHEN max_id < 1 THEN 1 ELSE max_id END) + ?, update_time = CURRENT_TIMESTAMP
WHERE biz_tag = ? AND (CASE WHEN max_id < 1 THEN 1 ELSE max_id END) <= ?`
	readAllocSQL = `SELECT max_id, step FROM leaf_alloc WHERE biz_tag = ?`
	existsSQL    = `SELECT COUNT(*) FROM leaf_alloc WHERE biz_tag = ?`
	insertSQL    = `INSERT INTO leaf_alloc (biz_tag, max_id, step, description) VALUES (?, ?, ?, ?)`
	updateTagSQL = `UPDATE leaf_alloc SET step = ?, description = ?, update_time = CURRENT_TIMESTAMP WHERE biz_tag = ?`
	tagColumns   = `SELECT biz_tag, max_id, step, description, update_time FROM leaf_alloc`
	tagNamesSQL  = `SELECT biz_tag FROM leaf_alloc`
)

// errClass sorts database errors by what leafd does about them.
type errClass int

const (
	// classOther is every error that is none of the below: a bug or a
	// schema problem, reported as an internal error.
	classOther errClass = iota
	// classRetry is a transaction the database aborted and rolled back so
	// that the client retries it.
	classRetry
	// classUnavailable is a database that cannot be reached or does not
	// accept writes now: the connection failed, timed out or was lost.
	classUnavailable
	// classDuplicate is an INSERT that hit the primary key.
	classDuplicate
)

// db is the implementation MySQL and SQLite share.
type db struct {
	x      *sqlx.DB
	driver string
	// classify sorts the driver's own errors; class sorts the network's,
	// the context's and database/sql's before it asks.
	classify func(error) errClass
	// writers, when not nil, lets one writing transaction of this process
	// run at a time: SQLite takes one writer per file anyway, and waiting
	// here is fairer and cheaper than in SQLite's busy handler.
	writers chan struct{}
	// retryFor, when positive, replaces the bound of maxAttempts: a
	// transaction aborted for a retry is tried again until this much time
	// has passed since the first attempt began.
	retryFor time.Duration
	// nowMsSQL is the dialect's expression of the database's clock in Unix
	// milliseconds; lockSuffix what makes a SELECT lock the rows it reads
	// ("" where transactions lock the whole database).
	nowMsSQL, lockSuffix string
	// unavailable, when set (a MySQL store with fallback addresses), is
	// told of errors that made the database count as unavailable, so that
	// a node that answered but refuses writes is left; being told of one
	// error twice does no harm. With it set, writeMovingOn tries a
	// transaction once more at once, through the next address.
	unavailable func(error)
	// beforeCommit, when set (by tests of this package only), runs between
	// the SELECT and the COMMIT of Allocate.
	beforeCommit func(context.Context, *sqlx.Tx) error
}

// Driver returns the name of the database/sql driver: "mysql" or "sqlite".
func (s *db) Driver() string { return s.driver }

// Close closes the connection pool. Calls in flight may fail afterwards.
func (s *db) Close() error { return s.x.Close() }

// Ping checks that the database answers. It returns a store_unavailable
// *leafd.Error if it does not.
func (s *db) Ping(ctx context.Context) error {
	return s.wrap(s.x.PingContext(ctx), "ping")
}

// Allocate advances tag's max_id by step and returns the range
// [new max_id - step, new max_id) together with the table step, all in one
// transaction. It returns only after the COMMIT succeeded; on any error the
// caller gets no range, and the IDs of a transaction whose COMMIT outcome is
// unknown are never issued by anyone.
//
// Errors: unknown_tag when no row has that tag; tag_exhausted when the new
// max_id would pass 2^63-1 (nothing is written); store_unavailable when the
// database cannot be reached or kept aborting the transaction; an error
// without a code when step is below 1 or the database failed otherwise.
func (s *db) Allocate(ctx context.Context, tag string, step int64) (segment.Allocation, error) {
	if step < 1 {
		return segment.Allocation{}, fmt.Errorf("store: allocate %q: step %d is below 1", tag, step)
	}
	var a segment.Allocation
	err := s.writeMovingOn(ctx, func(ctx context.Context) error {
		var err error
		a, err = s.allocate(ctx, tag, step)
		return err
	})
	if err != nil {
		return segment.Allocation{}, s.wrap(err, fmt.Sprintf("allocate %q", tag))
	}
	return a, nil
}

func (s *db) allocate(ctx context.Context, tag string, step int64) (segment.Allocation, error) {
	tx, err := s.x.BeginTxx(ctx, nil)
	if err != nil {
		return segment.Allocation{}, err
	}
	defer tx.Rollback() // a no-op once committed
	res, err := tx.ExecContext(ctx, allocateSQL, step, tag, leafd.MaxID-step)
	if err != nil {
		return segment.Allocation{}, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return segment.Allocation{}, err
	}
	if n == 0 {
		var rows int
		if err := tx.QueryRowContext(ctx, existsSQL, tag).Scan(&rows); err != nil {
			return segment.Allocation{}, err
		}
		if rows == 0 {
			return segment.Allocation{}, unknownTag(tag)
		}
		return segment.Allocation{}, leafd.Errorf(leafd.ETagExhausted,
			"tag %q is exhausted: a range of %d more IDs would pass the largest ID, %d", tag, step, leafd.MaxID)
	}
	var maxID, tableStep int64
	if err := tx.QueryRowContext(ctx, readAllocSQL, tag).Scan(&maxID, &tableStep); err != nil {
		return segment.Allocation{}, err
	}
	if maxID-step < 1 {
		// The UPDATE guarantees max_id >= 1 + step; anything else means the
		// row is not what this transaction just wrote.
		return segment.Allocation{}, fmt.Errorf("max_id %d read back after adding %d is impossible", maxID, step)
	}
	if s.beforeCommit != nil {
		if err := s.beforeCommit(ctx, tx); err != nil {
			return segment.Allocation{}, err
		}
	}
	if err := tx.Commit(); err != nil {
		return segment.Allocation{}, err
	}
	return segment.Allocation{Start: maxID - step, End: maxID, TableStep: tableStep}, nil
}

// TagNames returns the name of every tag, sorted.
//
// Errors: store_unavailable when the database cannot be reached; an error
// without a code otherwise.
func (s *db) TagNames(ctx context.Context) ([]string, error) {
	var names []string
	if err := s.x.SelectContext(ctx, &names, tagNamesSQL); err != nil {
		return nil, s.wrap(err, "list tag names")
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
		return nil, s.wrap(err, "list tags")
	}
	tags := make([]leafd.Tag, len(rows))
	for i, r := range rows {
		tags[i] = r.tag()
	}
	slices.SortFunc(tags, func(a, b leafd.Tag) int { return strings.Compare(a.Name, b.Name) })
	return tags, nil
}

// CreateTag inserts a tag and returns its row as stored, update_time
// included. A MaxID below 1 is stored as 1; UpdateTime is ignored (the
// database sets it).
//
// Errors: invalid_tag for a name leafd.ValidateTag refuses; invalid_body for
// a step outside 1..MaxStep or a description over 256 characters or not
// UTF-8; tag_exists when the tag is already there (nothing is changed);
// store_unavailable when the database cannot be reached; an error without a
// code otherwise.
func (s *db) CreateTag(ctx context.Context, t leafd.Tag) (leafd.Tag, error) {
	if err := leafd.ValidateTag(t.Name); err != nil {
		return leafd.Tag{}, err
	}
	if err := leafd.ValidateStep(t.Step, MaxStep); err != nil {
		return leafd.Tag{}, err
	}
	if err := leafd.ValidateDescription(t.Description); err != nil {
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
		if _, err := tx.ExecContext(ctx, insertSQL, t.Name, t.MaxID, t.Step, desc); err != nil {
			if s.class(err) == classDuplicate {
				return leafd.Errorf(leafd.ETagExists, "tag %q already exists; change its step with PATCH /api/tags/%s or leafd tag set-step", t.Name, t.Name)
			}
			return err
		}
		var r tagRow
		if err := tx.GetContext(ctx, &r, tagColumns+` WHERE biz_tag = ?`, t.Name); err != nil {
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
		}
		stored = r.tag()
		return nil
	})
	if err != nil {
		return leafd.Tag{}, s.wrap(err, fmt.Sprintf("create tag %q", t.Name))
	}
	return stored, nil
}

func nullString(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }

// UpdateTag changes a tag's table step and/or description, whichever u
// sets, and returns the row as it was and as it is now. max_id is never
// changed: lowering it would hand out IDs again. An empty description is
// stored as NULL.
//
// Errors: invalid_body for a step outside 1..MaxStep, a description over
// 256 characters or not UTF-8, or an update that sets nothing; unknown_tag
// when no row has that tag; store_unavailable when the database cannot be
// reached; an error without a code otherwise.
func (s *db) UpdateTag(ctx context.Context, name string, u leafd.TagUpdate) (old, updated leafd.Tag, err error) {
	switch {
	case u.Step == nil && u.Description == nil:
		return old, updated, leafd.Errorf(leafd.EInvalidBody, "nothing to change: give step, description or both")
	case u.Step != nil:
		if err := leafd.ValidateStep(*u.Step, MaxStep); err != nil {
			return old, updated, err
		}
	}
	if u.Description != nil {
		if err := leafd.ValidateDescription(*u.Description); err != nil {
			return old, updated, err
		}
	}
	err = s.write(ctx, func(ctx context.Context) error {
		tx, err := s.x.BeginTxx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		var before tagRow
		if err := tx.GetContext(ctx, &before, tagColumns+` WHERE biz_tag = ?`+s.lockSuffix, name); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return unknownTag(name)
			}
			return err
		}
		step, desc := before.Step, before.Description
		if u.Step != nil {
			step = *u.Step
		}
		if u.Description != nil {
			desc = nullString(*u.Description)
		}
		if _, err := tx.ExecContext(ctx, updateTagSQL, step, desc, name); err != nil {
			return err
		}
		var after tagRow
		if err := tx.GetContext(ctx, &after, tagColumns+` WHERE biz_tag = ?`, name); err != nil {
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
		}
		old, updated = before.tag(), after.tag()
		return nil
	})
	if err != nil {
		return leafd.Tag{}, leafd.Tag{}, s.wrap(err, fmt.Sprintf("update tag %q", name))
	}
	return old, updated, nil
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

func unknownTag(tag string) error {
	return leafd.Errorf(leafd.EUnknownTag, "tag %q is not defined; create it with POST /api/tags or leafd tag add", tag)
}

// write runs one writing transaction, retrying it while the database aborts
// it for a retry, at most maxAttempts times in all (or for retryFor), with
// jittered backoff between attempts. It gives up early when ctx ends and
// then returns the last error.
func (s *db) write(ctx context.Context, tx func(context.Context) error) error {
	return s.writeWith(ctx, false, tx)
}

// writeMovingOn is write, and when the database could not be reached and
// the store has further addresses of its cluster, it also tries once more
// at once, through the next one. Only for transactions whose repetition is
// harmless even when the failed attempt did commit (its answer lost): an
// allocation, whose lost range is simply never used, or a renewal. Not for
// a tag's creation, whose repetition would answer tag_exists, nor a worker
// id's claim, whose repetition would hold a second one.
func (s *db) writeMovingOn(ctx context.Context, tx func(context.Context) error) error {
	return s.writeWith(ctx, s.unavailable != nil, tx)
}

func (s *db) writeWith(ctx context.Context, moveOn bool, tx func(context.Context) error) error {
	var err error
	movedOn := false // tried again at once after the address failed
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
		switch s.class(err) {
		case classRetry:
		case classUnavailable:
			if moveOn && !movedOn && ctx.Err() == nil {
				s.unavailable(err) // so that the next connection is probed afresh
				movedOn = true
				attempt--
				continue
			}
			return err
		default:
			return err
		}
		if s.retryFor > 0 {
			if time.Since(start) >= s.retryFor {
				return err
			}
		} else if attempt == maxAttempts {
			return err
		}
		t := time.NewTimer(backoff(min(attempt, 8)))
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
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

// class sorts err: the errors of the network, the context and
// database/sql first, then the driver's own.
func (s *db) class(err error) errClass {
	var (
		le    *leafd.Error
		retry errRetry
	)
	switch {
	case errors.As(err, &le):
		return classOther // already decided
	case errors.As(err, &retry):
		return classRetry
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, sql.ErrConnDone), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return classUnavailable
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return classUnavailable
	}
	return s.classify(err)
}

// wrap turns err into what the methods return: nil stays nil, a
// *leafd.Error passes through, an unreachable database or a transaction
// that could not be completed becomes store_unavailable, and anything else
// gets the operation's name for the log.
func (s *db) wrap(err error, op string) error {
	if err == nil {
		return nil
	}
	var le *leafd.Error
	if errors.As(err, &le) {
		return err
	}
	switch s.class(err) {
	case classUnavailable:
		if s.unavailable != nil {
			s.unavailable(err)
		}
		fallthrough
	case classRetry:
		return leafd.Wrap(leafd.EStoreUnavailable, fmt.Errorf("%s: %s: %w", s.driver, op, err),
			"the database cannot be reached; IDs are served from buffers until it answers")
	}
	return fmt.Errorf("store: %s: %s: %w", s.driver, op, err)
}
