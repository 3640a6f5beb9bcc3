package store

import (
	"context"
	"database/sql/driver"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/store/internal/engine"
	"github.com/leafd/leafd/store/internal/testhook"
)

// DefaultShardSlots is store.shard_slots' default.
const DefaultShardSlots = 16

// MaxShardSlots bounds store.shard_slots: a range of step IDs spans step*S.
const MaxShardSlots = 1024

// A Node is one database as the sharded store (store/sharded) drives it:
// the engine's Store, and what its own SQL needs to run as the engine's
// does. Every engine's store is one; nothing but store/sharded needs it.
type Node interface {
	Store
	DB() *sqlx.DB // the pool; its Rebind writes '?' in the engine's placeholders
	// WriteTx runs f in a writing transaction, committed when f returns
	// nil, again while the database aborts it for a retry or f returns an
	// error of Retry: f may run several times and must start afresh each
	// time. It never moves to a fallback address.
	WriteTx(ctx context.Context, f func(context.Context, *sqlx.Tx) error) error
	Wrap(err error, op string) error // err with the code its class calls for
	Duplicate(err error) bool        // an INSERT that hit the primary key
	Greatest() string                // the SQL function of the larger of two values
	ShareSuffix() string             // what makes a SELECT share-lock its rows
	// Creatable checks that CreateTag would take t, and returns the name's
	// high-water mark, which its max_id must not be below.
	Creatable(ctx context.Context, t leafd.Tag) (mark int64, err error)
	Marks(ctx context.Context) (map[string]int64, error) // every name's high-water mark
	// CopyTags gives the database in tx the tags it lacks, raises the
	// max_id of those it has to the tag's, and its marks to those given.
	CopyTags(ctx context.Context, tx *sqlx.Tx, tags []leafd.Tag, marks map[string]int64) error
}

// OpenNode opens one database of engine driver, as Open does.
func OpenNode(driver, dsn string) (Node, error) { return openEngine(driver, dsn, newOptions(nil)) }

// Retry marks err so that Node.WriteTx runs the transaction again: another
// server wrote the same row at the same moment.
func Retry(err error) error { return errRetry{err} }

// Definition words t's format, domain and key as POST /api/tags takes
// them: two definitions are one tag's when their words are the same.
func Definition(t leafd.Tag) string {
	r := formatOf(formatRow{Format: t.Format, Digits: t.Digits, Fingerprint: t.KeyFingerprint, Period: t.Period, Zone: t.Zone})
	if r.Fingerprint == "" {
		return describeFormat(r)
	}
	return describeFormat(r) + ", key fingerprint " + r.Fingerprint
}

func init() {
	testhook.AfterLayoutRead = func(s any, f func()) { s.(*db).afterLayoutRead = f }
	testhook.Migrator = func(s any) any { return migrator{s.(*db)} }
	testhook.BeforeCommit = func(s any, f func(context.Context, *sqlx.Tx) error) { s.(*db).beforeCommit = f }
	testhook.WithConnector = func(wrap func(driver.Connector) driver.Connector) any {
		return Option(func(o *options) { o.connector = wrap })
	}
	testhook.RetryFor = func(s any, d time.Duration) {
		db := s.(*db)
		own := *db.dialect // this store's alone
		own.RetryFor = d
		db.dialect = &own
	}
	testhook.MaxAttempts = maxAttempts
}

// DB, Duplicate, Greatest and ShareSuffix are Node's, from the pool, the
// error classes and the dialect.
func (s *db) DB() *sqlx.DB             { return s.x }
func (s *db) Duplicate(err error) bool { return s.class(err) == engine.ClassDuplicate }
func (s *db) Greatest() string         { return s.dialect.Greatest }
func (s *db) ShareSuffix() string      { return s.dialect.ShareSuffix }

// WriteTx is Node.WriteTx.
func (s *db) WriteTx(ctx context.Context, f func(context.Context, *sqlx.Tx) error) error {
	return s.write(ctx, func(ctx context.Context) error {
		tx, err := s.x.BeginTxx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback() // a no-op once committed
		if err := f(ctx, tx); err != nil {
			return err
		}
		return tx.Commit()
	})
}

// Creatable reads t's past through the pool.
func (s *db) Creatable(ctx context.Context, t leafd.Tag) (int64, error) {
	p, err := creatable(ctx, s.x, t)
	return p.mark, err
}

// Marks reads leafd_tag_highwater.
func (s *db) Marks(ctx context.Context) (map[string]int64, error) {
	var rows []struct {
		Name  string `db:"biz_tag"`
		MaxID int64  `db:"max_id"`
	}
	if err := s.x.SelectContext(ctx, &rows, `SELECT biz_tag, max_id FROM leafd_tag_highwater`); err != nil {
		return nil, markErr(err)
	}
	marks := make(map[string]int64, len(rows))
	for _, m := range rows {
		marks[m.Name] = m.MaxID
	}
	return marks, nil
}

// markCopySQL raises a tag's high-water mark to at least a value,
// creating it if need be (arguments: tag, value), where the dialect has no
// Marks of its own; %[1]s is greatest.
const markCopySQL = `INSERT INTO leafd_tag_highwater (biz_tag, max_id) VALUES (?, ?)
ON CONFLICT (biz_tag) DO UPDATE SET max_id = %[1]s(leafd_tag_highwater.max_id, excluded.max_id)`

// CopyTags writes in one order for every server, so that two copying at
// once do not deadlock.
func (s *db) CopyTags(ctx context.Context, tx *sqlx.Tx, tags []leafd.Tag, marks map[string]int64) error {
	for _, name := range slices.Sorted(maps.Keys(marks)) {
		if mark := marks[name]; mark > 1 {
			query, args := fmt.Sprintf(markCopySQL, s.dialect.Greatest), []any{name, mark}
			if m := s.dialect.Marks; m != nil {
				query, args = m.Copy, append(args, mark)
			}
			if _, err := tx.ExecContext(ctx, s.q(query), args...); err != nil {
				return markErr(err)
			}
		}
	}
	for _, t := range tags {
		r, ok, err := exactRow(ctx, tx, t.Name, "")
		if err != nil {
			return err
		}
		if !ok {
			if _, err := tx.ExecContext(ctx, s.q(insertSQL), t.Name, t.MaxID, t.Step, nullString(t.Description)); err != nil {
				return err
			}
			continue
		}
		if r.MaxID < t.MaxID {
			if _, err := tx.ExecContext(ctx, s.q(`UPDATE leaf_alloc SET max_id = ? WHERE biz_tag = ?`), t.MaxID, t.Name); err != nil {
				return err
			}
		}
	}
	// An opaque tag's format goes with it: served as sequential by a
	// database that lacked it, its counters would come out unmapped.
	for _, t := range tags {
		if !hasFormatRow(t) {
			continue
		}
		have := []leafd.Tag{{Name: t.Name}}
		if err := s.withFormats(ctx, tx, have, t.Name); err != nil {
			return err
		}
		if have[0].Format == "" {
			if err := s.insertFormat(ctx, tx, t); err != nil {
				return err
			}
		}
	}
	return nil
}
