package client

import "time"

// SetRangeProbeAfter sets how long a tag whose servers answered not_found
// for its range is served without ranges, until restore is called. Only
// for tests that make no client concurrently.
func SetRangeProbeAfter(d time.Duration) (restore func()) {
	old := rangeProbeAfter
	rangeProbeAfter = d
	return func() { rangeProbeAfter = old }
}
