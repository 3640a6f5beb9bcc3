package snowflake

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// LeaseStore keeps worker id leases in the database that all servers of a
// deployment share. Every engine's store (package store) implements it.
//
// A lease row holds, besides its owner and expiry, a watermark: a Unix
// millisecond at or after every timestamp ever issued under that worker id.
// The generator issues in millisecond t only after a watermark ≥ t has been
// committed, so the record survives a kill -9, and a worker id is claimed
// only by a server whose clock is past its watermark. Lease expiry is judged
// by the database's clock, never by a server's.
//
// The store also records the layout (bit widths and epoch) that the worker
// ids are leased under: the first claim on a store with none records its
// own, atomically, and every claim, of either kind, compares its layout
// with the record in the same transaction and is refused with a
// *LayoutMismatchError when they differ. Worker id n of one layout and of
// another issue overlapping IDs, so a worker id leased under one layout
// must never be leased under another.
type LeaseStore interface {
	// ClaimWorker leases, in one transaction, a worker id in
	// [0, c.Workers) that no one holds (its lease has expired by the
	// database's clock, or it was never leased) and whose watermark is
	// below c.NowMs. It records c.Owner, an expiry c.TTL from the
	// database's now and the watermark c.WatermarkMs, and returns the
	// lease with the watermark the row had before.
	//
	// Errors: a *LayoutMismatchError (errors.Is ErrLayoutMismatch) when
	// another layout is recorded; ErrNoFreeWorker when no worker id
	// qualifies; any other error is a store failure the caller may retry.
	ClaimWorker(ctx context.Context, c Claim) (Lease, error)

	// RenewWorker extends l by ttl from the database's now and raises its
	// watermark to watermarkMs (it never lowers it).
	//
	// Errors: ErrLeaseLost when the row is no longer l's owner's; any
	// other error is a store failure the caller may retry.
	RenewWorker(ctx context.Context, l Lease, ttl time.Duration, watermarkMs int64) error

	// ReleaseWorker ends l at once and sets its watermark to watermarkMs,
	// which the caller guarantees is at or after every timestamp issued
	// under the worker id, so that another server may claim it as soon as
	// its clock has passed that.
	//
	// Errors: ErrLeaseLost when the row is no longer l's owner's; any other
	// error is a store failure.
	ReleaseWorker(ctx context.Context, l Lease, watermarkMs int64) error

	// ClaimFixedWorker leases, in one transaction, the one worker id
	// c.WorkerID for a server configured with it: it records c.Owner
	// (which starts with FixedOwnerPrefix), an expiry c.TTL from the
	// database's now and the watermark c.WatermarkMs, and returns the lease
	// with the watermark the row had before. The lease is renewed and
	// released like a claimed one, and ClaimWorker never takes a worker id
	// whose owner starts with FixedOwnerPrefix, live or not: it stays kept
	// for the servers configured with it.
	//
	// Errors: a *LayoutMismatchError as for ClaimWorker; a *HeldError
	// (errors.Is ErrWorkerHeld) when another owner's
	// lease on the worker id is live by the database's clock; a
	// *WatermarkAheadError (errors.Is ErrWatermarkAhead) when the row's
	// watermark is at or after c.NowMs; any other error is a store failure
	// the caller may retry.
	ClaimFixedWorker(ctx context.Context, c FixedClaim) (Lease, error)
}

// FixedOwnerPrefix starts the owner of every lease of a fixed worker id
// (snowflake.worker_id: N), so that the lease table tells them from leased
// ones. A released fixed worker id keeps the bare prefix as its owner.
const FixedOwnerPrefix = "fixed:"

// FixedClaim is a request to lease one given worker id.
type FixedClaim struct {
	// WorkerID is the worker id asked for.
	WorkerID int64
	// Owner names the claimant; it starts with FixedOwnerPrefix and is
	// unique to this generator and claim.
	Owner string
	// TTL is the lease's lifetime from the database's now.
	TTL time.Duration
	// NowMs is the claimant's clock in Unix ms: the worker id is claimed
	// only if its watermark is below it.
	NowMs int64
	// WatermarkMs is the watermark to record, as for Claim.
	WatermarkMs int64
	// Layout is the claimant's layout, as for Claim.
	Layout Layout
}

// Claim is a request to lease a worker id.
type Claim struct {
	// Owner names the claimant; it must be unique to this generator.
	Owner string
	// Workers is the number of worker ids of the layout: 0..Workers-1.
	Workers int64
	// TTL is the lease's lifetime from the database's now.
	TTL time.Duration
	// NowMs is the claimant's clock in Unix ms: only a worker id whose
	// watermark is below it may be claimed.
	NowMs int64
	// WatermarkMs is the watermark to record, at or after every timestamp
	// the claimant will issue before it renews.
	WatermarkMs int64
	// Layout is the claimant's layout: recorded by the first claim, and
	// compared with the record by every claim. The zero value means the
	// default layout, as everywhere.
	Layout Layout
}

// Lease is a worker id held by a generator.
type Lease struct {
	WorkerID int64
	Owner    string
	// PrevWatermarkMs is the watermark the row had before the claim (0 for
	// a worker id never leased): every ID ever issued under WorkerID has a
	// time at or before it.
	PrevWatermarkMs int64
	// Layout is the layout the lease was claimed under (the default
	// layout for a claim's zero one), set by the store: a renewal fails
	// with ErrLeaseLost once another layout, or none, is recorded, so
	// that a record edited or deleted by hand stops the servers leasing
	// under the old one rather than let a server with another layout
	// lease beside them. The zero layout is not checked.
	Layout Layout
}

// Errors of a LeaseStore.
var (
	ErrNoFreeWorker = errors.New("snowflake: no worker id is free: every one is leased, or recorded ahead of this server's clock")
	ErrLeaseLost    = errors.New("snowflake: the worker id lease is no longer this server's")
	// ErrWorkerHeld is what a *HeldError is.
	ErrWorkerHeld = errors.New("snowflake: the worker id is held by another server")
	// ErrWatermarkAhead is what a *WatermarkAheadError is.
	ErrWatermarkAhead = errors.New("snowflake: the worker id is recorded ahead of this server's clock")
	// ErrLayoutMismatch is what a *LayoutMismatchError is.
	ErrLayoutMismatch = errors.New("snowflake: the layout differs from the one recorded with the worker id leases")
)

// LayoutMismatchError says that a claim's layout differs from the one
// recorded with the worker id leases: IDs of the two would collide.
// errors.Is(err, ErrLayoutMismatch) holds for it.
type LayoutMismatchError struct {
	// Own is the claimant's layout, Recorded the one in the store.
	Own, Recorded Layout
	// RecordedBy is the owner of the claim that recorded it, and
	// RecordedMs when, by the database's clock, in Unix ms; the message
	// leaves them out when RecordedBy is "" (a row written by hand).
	RecordedBy string
	RecordedMs int64
}

func (e *LayoutMismatchError) Error() string {
	by := ""
	if e.RecordedBy != "" {
		by = fmt.Sprintf(" (by %s on %s)", e.RecordedBy, formatMs(e.RecordedMs))
	}
	return fmt.Sprintf("this server's snowflake layout is %s, but the worker id leases in the database are recorded with %s%s: "+
		"the IDs of the two would collide; set snowflake.epoch, snowflake.time_bits, snowflake.worker_bits "+
		"and snowflake.sequence_bits to the recorded values, or give this layout a database of its own",
		e.Own.describe(), e.Recorded.describe(), by)
}

// Is reports whether target is ErrLayoutMismatch.
func (e *LayoutMismatchError) Is(target error) bool { return target == ErrLayoutMismatch }

// HeldError says that a fixed worker id is leased by another owner whose
// lease is live. errors.Is(err, ErrWorkerHeld) holds for it.
type HeldError struct {
	WorkerID int64
	// Owner is the holder's owner: FixedOwnerPrefix and host/pid/random
	// for a server with a fixed worker id, host/pid/random for a leasing
	// one; each with its claim number after a '#'.
	Owner string
	// LeaseUntilMs is when the lease ends by the database's clock, in Unix
	// ms, unless its holder renews it; NowMs is the database's clock when
	// it was read.
	LeaseUntilMs, NowMs int64
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("worker id %d is held by %s until %s (%v from now, by the database's clock) unless it renews",
		e.WorkerID, e.Owner, formatMs(e.LeaseUntilMs), time.Duration(e.LeaseUntilMs-e.NowMs)*time.Millisecond)
}

// Is reports whether target is ErrWorkerHeld.
func (e *HeldError) Is(target error) bool { return target == ErrWorkerHeld }

// WatermarkAheadError says that a worker id's watermark is at or after the
// claimant's clock: IDs up to that time may have been issued under it.
// errors.Is(err, ErrWatermarkAhead) holds for it.
type WatermarkAheadError struct {
	WorkerID int64
	// WatermarkMs is the row's watermark and NowMs the claimant's clock,
	// both in Unix ms.
	WatermarkMs, NowMs int64
}

func (e *WatermarkAheadError) Error() string {
	return fmt.Sprintf("worker id %d is recorded up to %s, %v ahead of this server's clock: IDs up to then may have been issued under it",
		e.WorkerID, formatMs(e.WatermarkMs), time.Duration(e.WatermarkMs-e.NowMs+1)*time.Millisecond)
}

// Is reports whether target is ErrWatermarkAhead.
func (e *WatermarkAheadError) Is(target error) bool { return target == ErrWatermarkAhead }
