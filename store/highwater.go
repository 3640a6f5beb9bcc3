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
	// ensureMarkMySQL creates a tag's mark at 0 unless it exists, and locks
	// it either way (argument: tag).
	ensureMarkMySQL = `INSERT INTO leafd_tag_highwater (biz_tag, max_id) VALUES (?, 0) ON DUPLICATE KEY UPDATE max_id = max_id`
	// readMarkSQL reads the mark (argument: tag); the dialect's lock
	// suffix is appended.
	readMarkSQL = `SELECT max_id FROM leafd_tag_highwater WHERE biz_tag = ?`
	// raiseMarkMySQL records a new mark (arguments: max_id, tag). The
	// caller has checked that it is above the one read.
	raiseMarkMySQL = `UPDATE leafd_tag_highwater SET max_id = ?, update_time = CURRENT_TIMESTAMP WHERE biz_tag = ?`
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
	byUpdate := s.markByUpdate
	if byUpdate {
		if _, err := tx.ExecContext(ctx, s.q(ensureMarkMySQL), tag); err != nil {
			return markErr(err)
		}
	}
	var mark int64
	err := tx.QueryRowContext(ctx, s.q(readMarkSQL+s.lockSuffix), tag).Scan(&mark)
	switch {
	case errors.Is(err, sql.ErrNoRows) && !byUpdate:
		mark = 0 // no mark yet: the tag's first load by leafd
	case err != nil:
		return markErr(err)
	}
	if start < mark {
		return rewoundError(tag, start, mark)
	}
	if byUpdate {
		_, err = tx.ExecContext(ctx, s.q(raiseMarkMySQL), end, tag)
	} else {
		_, err = tx.ExecContext(ctx, s.q(upsertMarkSQL), tag, end)
	}
	if err != nil {
		return markErr(err)
	}
	return nil
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
			"or the tag was deleted and created again; no ID was handed out. Raise it above them: "+
			"UPDATE leaf_alloc SET max_id = %d WHERE biz_tag = '%s'",
		tag, start, mark-1, mark, tag)
}
