package segment

import (
	"context"

	"github.com/leafd/leafd"
)

// Range reserves size consecutive IDs of tag and returns them as one range
// [Start, End) with Stride 1, which no one else will ever receive.
//
// Errors: invalid_size when size is outside 1..MaxRange; range_unsupported
// for a tag whose IDs are not consecutive (opaque, or from a strided
// store); otherwise those of Next.
func (a *Allocator) Range(ctx context.Context, name string, size int64) (Range, error) {
	return Range{}, leafd.Errorf(leafd.ERangeUnsupported, "not yet")
}
