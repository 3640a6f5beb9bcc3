package client

import (
	"time"
	"unsafe"
)

// SetRangeProbeAfter sets how long a tag whose servers answered not_found
// for its range is served without ranges, until restore is called. Only
// for tests that make no client concurrently.
func SetRangeProbeAfter(d time.Duration) (restore func()) {
	old := rangeProbeAfter
	rangeProbeAfter = d
	return func() { rangeProbeAfter = old }
}

// LeaseSize is the size of a lease, which must be one cache line.
const LeaseSize = unsafe.Sizeof(lease{})
