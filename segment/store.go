package segment

import (
	"context"
	"errors"
	"time"

	"github.com/leafd/leafd"
)

// Store is what segment mode needs from a database. Every store of package
// store implements it.
type Store interface {
	// Allocate runs, in one transaction, the UPDATE that advances the tag's
	// max_id by step (a row whose max_id is below 1 is first raised to 1)
	// and the SELECT that reads the new max_id and the table step. It
	// returns only after the COMMIT succeeded; the range it returns belongs
	// to the caller alone. step counts IDs: the range holds step IDs
	// (Allocation.Count), whatever its stride.
	//
	// A store that keeps a high-water mark per tag (every engine of
	// package store does) refuses a range that starts below the end of the
	// highest one it ever handed out for the tag. A strided store must hand
	// a server each new range of a tag above every ID of the ranges it
	// handed that server before for the tag: the allocator refuses one that
	// starts at or below the last ID it already holds (tag_rewound).
	//
	// Errors: unknown_tag when no row has that tag; tag_exhausted when
	// max_id + step would pass 2^63-1 (nothing is written); tag_rewound when
	// the range would start below the tag's high-water mark: its max_id was
	// lowered, or it was deleted and created again (nothing is written); any
	// other error is a store failure that the caller may retry.
	//
	// The Allocation carries the tag's recorded format (Allocation.Format),
	// read in the same transaction or after its commit. A dated tag's row
	// is refused with ErrDatedRow and nothing is written: only AllocateIn
	// takes its numbers, within their period.
	Allocate(ctx context.Context, tag string, step int64) (Allocation, error)

	// AllocateIn is Allocate for a dated tag, whose range must lie in the
	// window of the current period. In the transaction, before it writes
	// anything, it reads the database's clock and calls within with it;
	// within returns the window, or an error that ends the transaction with
	// nothing written (a server whose clock is wrong). A max_id below
	// Floor is first raised to Floor; the range ends at or below Limit, and
	// holds fewer than step IDs when less room is left. The high-water
	// mark is kept and checked as by Allocate.
	//
	// Errors: those of Allocate, within's, and period_exhausted when the
	// max_id (raised to Floor) is at or past Limit: nothing is written.
	AllocateIn(ctx context.Context, tag string, step int64, within func(dbNow time.Time) (Window, error)) (Allocation, error)

	// ListTags returns every row of the table. The allocator reads it at
	// start and every tag_refresh; the table step it returns is the step of
	// a tag's first range.
	ListTags(ctx context.Context) ([]leafd.Tag, error)

	// LookupTag returns the row of one tag, found by its exact name. The
	// allocator asks it for a tag that is not in the list it last read, so
	// that a tag created anywhere is served at once.
	//
	// Errors: unknown_tag when no row has that name; any other error is a
	// store failure.
	LookupTag(ctx context.Context, name string) (leafd.Tag, error)

	// Ping reports whether the database answers, so that Allocator.Ready
	// can tell a store that is down from a tag whose load fails for a
	// reason of its own.
	Ping(ctx context.Context) error
}

// AnyOrderStore is a Store that can also hand out a tag's ranges in any
// order. A strided store's slots each hand out the IDs of their own residue
// modulo the stride; to keep a server's IDs of a tag increasing, Allocate
// raises the slot it takes a range from above every ID it handed the server
// before, passing over the IDs of that slot below them. Over 2^63 that is
// nothing; over the domain of an opaque tag it would be all but 1/S of it.
// The allocator asks an AnyOrderStore for the ranges of opaque tags, whose
// IDs have no order to keep. The sharded store (store/sharded) implements it.
type AnyOrderStore interface {
	Store
	// AllocateAnyOrder is Allocate, except that a new range of the tag need
	// only lie above the IDs of its own residue modulo its stride that the
	// store handed this server before: the allocator refuses one that
	// starts at or below the last of them (tag_rewound).
	AllocateAnyOrder(ctx context.Context, tag string, step int64) (Allocation, error)
}

// Allocation is the answer of Store.Allocate.
type Allocation struct {
	// Start and End bound the range handed out: its IDs are Start,
	// Start+Stride, Start+2*Stride, … below End. End-Start is a multiple of
	// the stride, and Count() is the step asked for. For a contiguous range
	// End is the new max_id.
	Start, End int64
	// Stride is the distance between consecutive IDs of the range: the IDs
	// are Start, Start+Stride, … below End. 0 means 1 (contiguous, every
	// store today); a sharded store whose slot k of S hands out only IDs
	// ≡ k (mod S) answers S.
	Stride int64
	// TableStep is the step column as read in the same transaction: the
	// smallest step the server may choose next.
	TableStep int64
	// Format is the tag's format as the store records it, read with the
	// range by Allocate and AllocateAnyOrder: FormatOpaque or FormatDated,
	// empty for a sequential tag (and from a store that records none). A
	// server that serves the tag as sequential drops a range whose Format
	// says otherwise: the tag was created again in another format since
	// the server read it.
	Format string
}

// stride returns the stride of a, 0 taken as 1.
func (a Allocation) stride() int64 { return max(a.Stride, 1) }

// Count returns the number of IDs of the range: (End-Start)/Stride, with a
// Stride of 0 taken as 1.
func (a Allocation) Count() int64 { return (a.End - a.Start) / a.stride() }

// Last returns the highest ID of the range, End-Stride (a Stride of 0 taken
// as 1). It is below Start when the range holds no ID.
func (a Allocation) Last() int64 { return a.End - a.stride() }

// ErrDatedRow is Store.Allocate's answer for the row of a dated tag, whose
// numbers only AllocateIn takes, within their period: nothing is written.
// A server that asks it serves the tag as sequential, and the tag was
// created again as dated since the server read it.
var ErrDatedRow = errors.New("the tag is dated: its numbers are taken within their period only")
