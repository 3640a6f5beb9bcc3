package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/leafd/leafd/snowflake"
	"github.com/leafd/leafd/store/internal/engine"
)

var _ snowflake.LeaseStore = (*db)(nil)

// The SQL of the worker id leases. %[1]s is the dialect's expression of the
// database's clock in Unix milliseconds, %[2]s its row-lock suffix.
const (
	workerRowsSQL = `SELECT worker_id, owner, lease_until_ms, watermark_ms FROM leaf_worker WHERE worker_id >= 0 AND worker_id < ? ORDER BY worker_id%[2]s`
	dbNowSQL      = `SELECT %[1]s`
	// The claim's UPDATE repeats what the SELECT saw, so that it changes
	// nothing if another server got there first on an engine whose row
	// locks do not span the cluster.
	claimUpdateSQL = `UPDATE leaf_worker SET owner = ?, lease_until_ms = ?, watermark_ms = ?, update_time = CURRENT_TIMESTAMP
WHERE worker_id = ? AND owner = ? AND lease_until_ms = ? AND watermark_ms = ?`
	claimInsertSQL = `INSERT INTO leaf_worker (worker_id, owner, lease_until_ms, watermark_ms) VALUES (?, ?, ?, ?)`
	renewSQL       = `UPDATE leaf_worker SET lease_until_ms = %[1]s + ?,
watermark_ms = CASE WHEN watermark_ms > ? THEN watermark_ms ELSE ? END, update_time = CURRENT_TIMESTAMP
WHERE worker_id = ? AND owner = ?`
	// A renewal also needs the lease's layout still recorded.
	layoutHeldSQL = ` AND EXISTS (SELECT 1 FROM leafd_snowflake_layout WHERE id = 1 AND epoch_ms = ? AND time_bits = ? AND worker_bits = ? AND sequence_bits = ?)`
	// A released fixed worker id keeps the bare fixed prefix as its owner,
	// so that no leasing server takes it while its server restarts.
	releaseSQL = `UPDATE leaf_worker SET owner = CASE WHEN owner LIKE '` + snowflake.FixedOwnerPrefix + `%' THEN '` +
		snowflake.FixedOwnerPrefix + `' ELSE '' END, lease_until_ms = 0, watermark_ms = ?, update_time = CURRENT_TIMESTAMP
WHERE worker_id = ? AND owner = ?`
	fixedRowSQL = `SELECT worker_id, owner, lease_until_ms, watermark_ms FROM leaf_worker WHERE worker_id = ?%[2]s`
	// The layout the worker ids are leased under: one row, id 1
	// (store/*/migrations/00007_snowflake_layout.sql).
	layoutSQL       = `SELECT epoch_ms, time_bits, worker_bits, sequence_bits, recorded_by, recorded_ms FROM leafd_snowflake_layout WHERE id = 1%s`
	insertLayoutSQL = `INSERT INTO leafd_snowflake_layout (id, epoch_ms, time_bits, worker_bits, sequence_bits, recorded_by, recorded_ms)
VALUES (1, ?, ?, ?, ?, ?, ?)`
)

// maxOwnerLen is the width of leaf_worker.owner. A longer owner would fail
// on a strict MySQL and be cut short on a lax one, after which no renewal
// would match it.
const maxOwnerLen = 128

// errRetry marks an error that the whole transaction should be tried again
// for: another server claimed the worker id chosen at the same moment.
type errRetry struct{ error }

func (e errRetry) Unwrap() error { return e.error }

// retryDuplicate is err, made errRetry when it is a duplicate key: another
// server inserted the same row at the same moment, and the transaction
// starts again. It covers a claim's COMMIT too: TiDB checks uniqueness at
// COMMIT in optimistic transactions (and with
// tidb_constraint_check_in_place_pessimistic off), so another server's
// claim of the same worker id then fails this COMMIT, which wrote nothing.
func retryDuplicate(s *db, err error) error {
	if s.class(err) == engine.ClassDuplicate {
		return errRetry{err}
	}
	return err
}

// takeWorker claims row r for owner until untilMs: its UPDATE matches
// only the row as the claim read it, and the claim starts again if
// another server changed it meanwhile.
func (s *db) takeWorker(ctx context.Context, tx *sqlx.Tx, r workerRow, owner string, untilMs, watermarkMs int64) error {
	n, err := affected(tx.ExecContext(ctx, s.q(claimUpdateSQL), owner, untilMs, watermarkMs,
		r.WorkerID, r.Owner, r.LeaseUntilMs, r.WatermarkMs))
	if err == nil && n != 1 {
		err = errRetry{fmt.Errorf("worker id %d changed while being claimed", r.WorkerID)}
	}
	return err
}

// insertWorker claims worker id id, which has no row yet, for owner.
func (s *db) insertWorker(ctx context.Context, tx *sqlx.Tx, id int64, owner string, untilMs, watermarkMs int64) error {
	_, err := tx.ExecContext(ctx, s.q(claimInsertSQL), id, owner, untilMs, watermarkMs)
	return retryDuplicate(s, err)
}

// workerRow is one row of leaf_worker.
type workerRow struct {
	WorkerID     int64  `db:"worker_id"`
	Owner        string `db:"owner"`
	LeaseUntilMs int64  `db:"lease_until_ms"`
	WatermarkMs  int64  `db:"watermark_ms"`
}

// layoutRow is the row of leafd_snowflake_layout.
type layoutRow struct {
	EpochMs      int64  `db:"epoch_ms"`
	TimeBits     int    `db:"time_bits"`
	WorkerBits   int    `db:"worker_bits"`
	SequenceBits int    `db:"sequence_bits"`
	RecordedBy   string `db:"recorded_by"`
	RecordedMs   int64  `db:"recorded_ms"`
}

// checkLayout compares l, a claim's layout, with the one recorded with the
// worker leases, in the claim's transaction tx, after beginClaim: it
// records l with owner and the database's clock nowMs when none is
// recorded (a new database, or one whose leases predate the record), and
// returns a *snowflake.LayoutMismatchError when another is.
//
// Two claims that both find no record both insert it: the primary key lets
// one commit, and the other's transaction is tried again (errRetry, or the
// engine's deadlock), finds the record and compares. So servers started
// together with different layouts never both lease.
func (s *db) checkLayout(ctx context.Context, tx *sqlx.Tx, l snowflake.Layout, owner string, nowMs int64) error {
	l = orDefault(l)
	var r layoutRow
	err := tx.GetContext(ctx, &r, fmt.Sprintf(layoutSQL, s.dialect.LockSuffix))
	if s.afterLayoutRead != nil {
		s.afterLayoutRead()
	}
	switch {
	case errors.Is(err, sql.ErrNoRows):
		_, err := tx.ExecContext(ctx, s.q(insertLayoutSQL), l.Epoch, l.TimeBits, l.WorkerBits, l.SequenceBits, owner, nowMs)
		return retryDuplicate(s, err)
	case err != nil:
		return err
	}
	rec := snowflake.Layout{Epoch: r.EpochMs, TimeBits: r.TimeBits, WorkerBits: r.WorkerBits, SequenceBits: r.SequenceBits}
	if rec != l {
		return &snowflake.LayoutMismatchError{Own: l, Recorded: rec, RecordedBy: r.RecordedBy, RecordedMs: r.RecordedMs}
	}
	return nil
}

// orDefault returns l, or the default layout for the zero one.
func orDefault(l snowflake.Layout) snowflake.Layout {
	if l == (snowflake.Layout{}) {
		return snowflake.DefaultLayout()
	}
	return l
}

// ClaimWorker leases the lowest worker id below c.Workers that is free by
// the database's clock and whose watermark is below c.NowMs, after
// checkLayout. See snowflake.LeaseStore.
//
// Errors: a *snowflake.LayoutMismatchError when another layout is
// recorded; snowflake.ErrNoFreeWorker (wrapped, with what was found) when
// none qualifies; store_unavailable when the database cannot be reached; an
// error without a code otherwise.
func (s *db) ClaimWorker(ctx context.Context, c snowflake.Claim) (snowflake.Lease, error) {
	if c.Owner == "" || len(c.Owner) > maxOwnerLen || c.Workers < 1 || c.TTL <= 0 {
		return snowflake.Lease{}, fmt.Errorf("store: claim worker: owner (1 to %d bytes), workers and ttl must be set (got %q, %d, %v)",
			maxOwnerLen, c.Owner, c.Workers, c.TTL)
	}
	var lease snowflake.Lease
	err := s.write(ctx, func(ctx context.Context) (err error) {
		lease, err = s.claimWorker(ctx, c)
		return err
	})
	if errors.Is(err, snowflake.ErrNoFreeWorker) || errors.Is(err, snowflake.ErrLayoutMismatch) {
		return snowflake.Lease{}, err
	}
	return lease, s.Wrap(err, "claim worker id") // lease is zero unless the claim committed
}

// beginClaim begins a claim's transaction: it takes the claim lock where
// the dialect has one (its ClaimLock), reads the database's clock, and reads
// and locks the worker rows of query (workerRowsSQL or fixedRowSQL, with
// its argument). The caller rolls tx back unless it commits.
func (s *db) beginClaim(ctx context.Context, query string, arg int64) (tx *sqlx.Tx, nowMs int64, rows []workerRow, err error) {
	// The transaction in a variable of its own: the returns below set the
	// result tx to nil before the deferred rollback runs.
	t, err := s.x.BeginTxx(ctx, nil)
	if err != nil {
		return nil, 0, nil, err
	}
	defer func() {
		if err != nil {
			t.Rollback()
		}
	}()
	if s.dialect.ClaimLock != "" {
		if _, err = t.ExecContext(ctx, s.dialect.ClaimLock); err != nil {
			return nil, 0, nil, err
		}
	}
	if err = t.GetContext(ctx, &nowMs, fmt.Sprintf(dbNowSQL, s.dialect.NowMs)); err != nil {
		return nil, 0, nil, err
	}
	if err = t.SelectContext(ctx, &rows, s.q(fmt.Sprintf(query, s.dialect.NowMs, s.dialect.LockSuffix)), arg); err != nil {
		return nil, 0, nil, err
	}
	return t, nowMs, rows, nil
}

func (s *db) claimWorker(ctx context.Context, c snowflake.Claim) (snowflake.Lease, error) {
	tx, now, rows, err := s.beginClaim(ctx, workerRowsSQL, c.Workers)
	if err != nil {
		return snowflake.Lease{}, err
	}
	defer tx.Rollback()
	if err := s.checkLayout(ctx, tx, c.Layout, c.Owner, now); err != nil {
		return snowflake.Lease{}, err
	}
	chosen, found, held, ahead := int64(-1), (*workerRow)(nil), 0, 0
	next := int64(0) // the lowest worker id not seen yet
	for i := range rows {
		r := &rows[i]
		if next < r.WorkerID {
			break // a gap: worker id next has no row, so it was never leased
		}
		next = r.WorkerID + 1
		switch {
		case r.LeaseUntilMs >= now || strings.HasPrefix(r.Owner, snowflake.FixedOwnerPrefix):
			held++ // a fixed worker id is its server's, live or not
		case r.WatermarkMs >= c.NowMs:
			ahead++
		default:
			found = r
		}
		if found != nil {
			break
		}
	}
	until := now + c.TTL.Milliseconds()
	switch {
	case found != nil:
		chosen = found.WorkerID
		err = s.takeWorker(ctx, tx, *found, c.Owner, until, c.WatermarkMs)
	case next >= c.Workers:
		return snowflake.Lease{}, fmt.Errorf("%w (%d worker ids: %d leased or fixed, %d recorded ahead of the clock %s)",
			snowflake.ErrNoFreeWorker, c.Workers, held, ahead, time.UnixMilli(c.NowMs).UTC().Format(time.RFC3339Nano))
	default:
		chosen = next
		err = s.insertWorker(ctx, tx, chosen, c.Owner, until, c.WatermarkMs)
	}
	if err != nil {
		return snowflake.Lease{}, err
	}
	if err := tx.Commit(); err != nil {
		return snowflake.Lease{}, retryDuplicate(s, err)
	}
	prev := int64(0)
	if found != nil {
		prev = found.WatermarkMs
	}
	return snowflake.Lease{WorkerID: chosen, Owner: c.Owner, PrevWatermarkMs: prev, Layout: orDefault(c.Layout)}, nil
}

// ClaimFixedWorker leases worker id c.WorkerID for a server configured with
// it, unless another owner's lease on it is live by the database's clock or
// its watermark is at or after c.NowMs, after checkLayout. See
// snowflake.LeaseStore.
//
// Errors: a *snowflake.LayoutMismatchError when another layout is
// recorded; a *snowflake.HeldError or a *snowflake.WatermarkAheadError when
// the worker id cannot be had; store_unavailable when the database cannot
// be reached; an error without a code otherwise.
func (s *db) ClaimFixedWorker(ctx context.Context, c snowflake.FixedClaim) (snowflake.Lease, error) {
	if !strings.HasPrefix(c.Owner, snowflake.FixedOwnerPrefix) || len(c.Owner) == len(snowflake.FixedOwnerPrefix) ||
		len(c.Owner) > maxOwnerLen || c.WorkerID < 0 || c.TTL <= 0 {
		return snowflake.Lease{}, fmt.Errorf("store: claim fixed worker id: owner (%s and 1 to %d bytes), worker id and ttl must be set (got %q, %d, %v)",
			snowflake.FixedOwnerPrefix, maxOwnerLen-len(snowflake.FixedOwnerPrefix), c.Owner, c.WorkerID, c.TTL)
	}
	var lease snowflake.Lease
	err := s.write(ctx, func(ctx context.Context) (err error) {
		lease, err = s.claimFixedWorker(ctx, c)
		return err
	})
	if errors.Is(err, snowflake.ErrWorkerHeld) || errors.Is(err, snowflake.ErrWatermarkAhead) || errors.Is(err, snowflake.ErrLayoutMismatch) {
		return snowflake.Lease{}, err
	}
	return lease, s.Wrap(err, fmt.Sprintf("claim fixed worker id %d", c.WorkerID)) // lease is zero unless the claim committed
}

func (s *db) claimFixedWorker(ctx context.Context, c snowflake.FixedClaim) (snowflake.Lease, error) {
	tx, now, rows, err := s.beginClaim(ctx, fixedRowSQL, c.WorkerID)
	if err != nil {
		return snowflake.Lease{}, err
	}
	defer tx.Rollback()
	if err := s.checkLayout(ctx, tx, c.Layout, c.Owner, now); err != nil {
		return snowflake.Lease{}, err
	}
	prev, until := int64(0), now+c.TTL.Milliseconds()
	if len(rows) == 0 {
		err = s.insertWorker(ctx, tx, c.WorkerID, c.Owner, until, c.WatermarkMs)
	} else {
		r := rows[0]
		switch {
		case r.LeaseUntilMs >= now:
			return snowflake.Lease{}, &snowflake.HeldError{WorkerID: c.WorkerID, Owner: r.Owner, LeaseUntilMs: r.LeaseUntilMs, NowMs: now}
		case r.WatermarkMs >= c.NowMs:
			return snowflake.Lease{}, &snowflake.WatermarkAheadError{WorkerID: c.WorkerID, WatermarkMs: r.WatermarkMs, NowMs: c.NowMs}
		}
		prev = r.WatermarkMs
		err = s.takeWorker(ctx, tx, r, c.Owner, until, c.WatermarkMs)
	}
	if err != nil {
		return snowflake.Lease{}, err
	}
	if err := tx.Commit(); err != nil {
		return snowflake.Lease{}, retryDuplicate(s, err)
	}
	return snowflake.Lease{WorkerID: c.WorkerID, Owner: c.Owner, PrevWatermarkMs: prev, Layout: orDefault(c.Layout)}, nil
}

// RenewWorker extends l by ttl from the database's now and raises its
// watermark to watermarkMs, while l.Layout is the layout recorded. See
// snowflake.LeaseStore.
//
// Errors: snowflake.ErrLeaseLost when the row is no longer l's owner's, or
// another layout or none is recorded; store_unavailable when the database
// cannot be reached; an error without a code otherwise.
func (s *db) RenewWorker(ctx context.Context, l snowflake.Lease, ttl time.Duration, watermarkMs int64) error {
	query := fmt.Sprintf(renewSQL, s.dialect.NowMs)
	args := []any{ttl.Milliseconds(), watermarkMs, watermarkMs, l.WorkerID, l.Owner}
	if y := l.Layout; y != (snowflake.Layout{}) {
		query += layoutHeldSQL
		args = append(args, y.Epoch, y.TimeBits, y.WorkerBits, y.SequenceBits)
	}
	return s.updateWorker(ctx, "renew", query, l, args...)
}

// ReleaseWorker ends l at once with the watermark watermarkMs. See
// snowflake.LeaseStore.
//
// Errors: those of RenewWorker.
func (s *db) ReleaseWorker(ctx context.Context, l snowflake.Lease, watermarkMs int64) error {
	return s.updateWorker(ctx, "release", releaseSQL, l, watermarkMs, l.WorkerID, l.Owner)
}

func (s *db) updateWorker(ctx context.Context, op, query string, l snowflake.Lease, args ...any) error {
	if l.Owner == "" || l.Owner == snowflake.FixedOwnerPrefix {
		// The owner of a released row: no lease has it.
		return fmt.Errorf("%w: worker id %d: %q owns no lease", snowflake.ErrLeaseLost, l.WorkerID, l.Owner)
	}
	var n int64
	err := s.writeOrNextAddress(ctx, func(ctx context.Context) (err error) {
		n, err = affected(s.x.ExecContext(ctx, s.q(query), args...))
		return err
	})
	if err != nil {
		return s.Wrap(err, fmt.Sprintf("%s worker id %d", op, l.WorkerID))
	}
	if n != 1 {
		return fmt.Errorf("%w: worker id %d is not held by %s", snowflake.ErrLeaseLost, l.WorkerID, l.Owner)
	}
	return nil
}
