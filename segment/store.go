package segment

import (
	"context"

	"github.com/leafd/leafd"
)

// Store is what segment mode needs from a database. store.MySQL and
// store.SQLite implement it.
type Store interface {
	// Allocate runs, in one transaction, the UPDATE that advances the tag's
	// max_id by step (a row whose max_id is below 1 is first raised to 1)
	// and the SELECT that reads the new max_id and the table step. It
	// returns only after the COMMIT succeeded; the range it returns belongs
	// to the caller alone.
	//
	// A store that keeps a high-water mark per tag (store.MySQL and
	// store.SQLite do) refuses a range that starts below the end of the
	// highest one it ever handed out for the tag.
	//
	// Errors: unknown_tag when no row has that tag; tag_exhausted when
	// max_id + step would pass 2^63-1 (nothing is written); tag_rewound when
	// the range would start below the tag's high-water mark: its max_id was
	// lowered, or it was deleted and created again (nothing is written); any
	// other error is a store failure that the caller may retry.
	Allocate(ctx context.Context, tag string, step int64) (Allocation, error)

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
}

// Allocation is the answer of Store.Allocate.
type Allocation struct {
	// Start and End bound the range handed out: [Start, End), End is the new
	// max_id and End-Start the step asked for.
	Start, End int64
	// TableStep is the step column as read in the same transaction: the
	// smallest step the server may choose next.
	TableStep int64
}
