package snowflake

import (
	"context"
	"errors"
	"time"
)

// LeaseStore keeps worker id leases in the database that all servers of a
// deployment share. store.MySQL and store.SQLite implement it.
//
// A lease row holds, besides its owner and expiry, a watermark: a Unix
// millisecond at or after every timestamp ever issued under that worker id.
// The generator issues in millisecond t only after a watermark ≥ t has been
// committed, so the record survives a kill -9, and a worker id is claimed
// only by a server whose clock is past its watermark. Lease expiry is judged
// by the database's clock, never by a server's.
type LeaseStore interface {
	// ClaimWorker leases, in one transaction, a worker id in
	// [0, c.Workers) that no one holds (its lease has expired by the
	// database's clock, or it was never leased) and whose watermark is
	// below c.NowMs. It records c.Owner, an expiry c.TTL from the
	// database's now and the watermark c.WatermarkMs, and returns the
	// lease with the watermark the row had before.
	//
	// Errors: ErrNoFreeWorker when no worker id qualifies; any other error
	// is a store failure the caller may retry.
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
}

// Lease is a worker id held by a generator.
type Lease struct {
	WorkerID int64
	Owner    string
	// PrevWatermarkMs is the watermark the row had before the claim (0 for
	// a worker id never leased): every ID ever issued under WorkerID has a
	// time at or before it.
	PrevWatermarkMs int64
}

// Errors of a LeaseStore.
var (
	ErrNoFreeWorker = errors.New("snowflake: no worker id is free: every one is leased, or recorded ahead of this server's clock")
	ErrLeaseLost    = errors.New("snowflake: the worker id lease is no longer this server's")
)
