package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/jmoiron/sqlx"

	"github.com/leafd/leafd"
)

// The high-water mark of a tag is the largest max_id any leafd server was
// ever handed for it, kept in leafd's own table, leafd_tag_highwater
// (migrations 00003): leaf_alloc is Meituan Leaf's and is never altered.
// Every range load reads and raises the mark in its own transaction, after
// its UPDATE of leaf_alloc, and refuses a range that starts below it: a
// max_id lowered by hand (UPDATE leaf_alloc SET max_id = 1), or a tag
// deleted and created again (max_id defaults to 1), would otherwise hand
// out IDs a second time. Deleting a tag does not delete its mark.
//
// Concurrency: the transaction already holds the tag's leaf_alloc row lock
// (its UPDATE), so two loads of one tag never touch its mark at once. On
// MySQL the mark is read with a locking read of a row that exists (the
// first statement makes sure it does), so it is the latest committed value
// whatever the isolation level, and no gap lock is taken: loads of
// different tags inserting their first marks do not deadlock. On Galera
// the mark's row is written by every load, so certification covers it as it
// covers the leaf_alloc row. On SQLite the transaction holds the whole file,
// so a plain read and an upsert suffice. On PostgreSQL the row lock of
// leaf_alloc serialises the loads of one tag; each statement of a READ
// COMMITTED transaction reads the latest committed rows, and an upsert
// takes no gap locks, so a read (locking the mark's row if there is one)
// and an upsert suffice there too.
const (
	// readMarkSQL reads the mark (argument: tag); the dialect's lock
	// suffix is appended.
	readMarkSQL = `SELECT max_id FROM leafd_tag_highwater WHERE biz_tag = ?`
	// upsertMarkSQL records a new mark, creating the row if need be
	// (arguments: tag, max_id), in SQLite's and PostgreSQL's words.
	upsertMarkSQL = `INSERT INTO leafd_tag_highwater (biz_tag, max_id) VALUES (?, ?)
ON CONFLICT (biz_tag) DO UPDATE SET max_id = excluded.max_id, update_time = CURRENT_TIMESTAMP`
)

// raiseMark checks, inside the allocation's transaction tx, that the range
// [start, end) of tag starts at or above the tag's high-water mark, and
// raises the mark to end. It returns a tag_rewound *leafd.Error, and
// writes nothing, when the range starts below the mark; the caller rolls
// the transaction back, so the UPDATE of leaf_alloc is undone too.
func (s *db) raiseMark(ctx context.Context, tx *sqlx.Tx, tag string, start, end int64) error {
	mark, err := s.lockMark(ctx, tx, tag)
	if err != nil {
		return err
	}
	if start < mark {
		return rewoundError(tag, start, mark)
	}
	if m := s.dialect.Marks; m != nil {
		_, err = tx.ExecContext(ctx, s.q(m.Raise), end, tag)
	} else {
		_, err = tx.ExecContext(ctx, s.q(upsertMarkSQL), tag, end)
	}
	if err != nil {
		return markErr(err)
	}
	return nil
}

// lockMark reads tag's high-water mark inside tx, locking its row where the
// dialect locks rows (on MySQL it first makes sure the row exists, so that
// the locking read takes no gap lock); 0 when the tag has no mark yet.
func (s *db) lockMark(ctx context.Context, tx *sqlx.Tx, tag string) (int64, error) {
	if m := s.dialect.Marks; m != nil {
		if _, err := tx.ExecContext(ctx, s.q(m.Ensure), tag); err != nil {
			return 0, markErr(err)
		}
	}
	var mark int64
	err := tx.QueryRowContext(ctx, s.q(readMarkSQL+s.dialect.LockSuffix), tag).Scan(&mark)
	switch {
	case errors.Is(err, sql.ErrNoRows) && s.dialect.Marks == nil:
		return 0, nil // no mark yet: the tag's first load by leafd
	case err != nil:
		return 0, markErr(err)
	}
	return mark, nil
}

// markErr says, for the log, that a failure was about the high-water mark,
// and what a missing table most likely means.
func markErr(err error) error {
	msg := err.Error()
	if strings.Contains(msg, "leafd_tag_highwater") && (strings.Contains(msg, "doesn't exist") || strings.Contains(msg, "no such table") || strings.Contains(msg, "does not exist")) {
		return fmt.Errorf("the table leafd_tag_highwater is missing: run `leafd migrate` (or start with store.migrate: true): %w", err)
	}
	return fmt.Errorf("high-water mark (leafd_tag_highwater): %w", err)
}

// rewoundError is the tag_rewound error of a range load of tag whose range
// would start at start, below mark, the end of the highest range ever
// handed out for the tag: every ID below mark may have been issued.
func rewoundError(tag string, start, mark int64) *leafd.Error {
	return leafd.Errorf(leafd.ETagRewound,
		"tag %q was rewound: its max_id (%d) is below IDs already issued, up to %d — it was lowered by an UPDATE, "+
			"or the tag was deleted and created again; no ID was handed out. Repair it with POST /api/tags/%s/repair "+
			"(or leafd tag repair %s), which raises max_id to %d; or by SQL: UPDATE leaf_alloc SET max_id = %d WHERE biz_tag = '%s'",
		tag, start, mark-1, tag, tag, mark, mark, tag)
}

// Repair is the outcome of RepairTag: the tag's row before and after, and
// the high-water mark they were held against.
type Repair struct {
	// Before and After are the tag's row as read under its lock, and as it
	// is once the repair committed: the same row when nothing changed.
	Before, After leafd.Tag
	// Mark is the tag's high-water mark, the end of the highest range ever
	// handed out for it; 0 when leafd never loaded a range of it.
	Mark int64
	// Raised says whether max_id was raised (from Before.MaxID to Mark).
	Raised bool
}

// raiseToMarkSQL raises a rewound tag's max_id to its mark (arguments: mark,
// tag, mark). The guard makes it a no-op on a row already at or above the
// mark: a repair never lowers max_id.
const raiseToMarkSQL = `UPDATE leaf_alloc SET max_id = ?, update_time = CURRENT_TIMESTAMP WHERE biz_tag = ? AND max_id < ?`

// RepairTag mends a rewound tag: when the tag's max_id is below its
// high-water mark, it raises max_id to the mark, so that the next range
// starts right above every ID ever handed out for the tag. It never lowers
// anything: a tag at or above its mark, or that leafd never loaded (no
// mark), is left as it is and reported unchanged, so that a repair can be
// run again safely.
//
// One transaction reads the tag's row under its lock (the lock every range
// load takes first), then its mark, and raises max_id only if it is still
// below the mark: a load running meanwhile either committed before (and
// the repair sees its max_id and mark) or waits for the repair, and is
// never undone.
//
// Errors: invalid_tag for a name leafd.ValidateTag refuses; unknown_tag
// when no row has exactly that name; store_unavailable when the database
// cannot be reached; an error without a code otherwise (the mark's table
// missing: run leafd migrate).
func (s *db) RepairTag(ctx context.Context, name string) (Repair, error) {
	if err := leafd.ValidateTag(name); err != nil {
		return Repair{}, err
	}
	var r Repair
	err := s.WriteTx(ctx, func(ctx context.Context, tx *sqlx.Tx) (err error) {
		r = Repair{}
		r.Before, r.After, err = s.changeTag(ctx, tx, name, func(before tagRow) (bool, error) {
			mark, err := s.lockMark(ctx, tx, name) // 0: never loaded by leafd
			r.Mark = mark
			if err != nil || before.MaxID >= mark {
				return false, err // at or above its mark: left as it is
			}
			if n, err := affected(tx.ExecContext(ctx, s.q(raiseToMarkSQL), mark, name, mark)); err != nil {
				return false, err
			} else if n != 1 {
				return false, fmt.Errorf("raising max_id of %q from %d to %d changed %d rows, want 1", name, before.MaxID, mark, n)
			}
			r.Raised = true
			return true, nil
		})
		return err
	})
	if err != nil {
		return Repair{}, s.Wrap(err, fmt.Sprintf("repair tag %q", name))
	}
	return r, nil
}
