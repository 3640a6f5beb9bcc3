package client

import (
	"context"
	"time"
	"unsafe"

	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"
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

// FetchRange asks c's servers for one range, as a lease's fetch does (one
// round over the servers, no retry).
func (c *Client) FetchRange(ctx context.Context, tag string, size int64) (start, n int64, err error) {
	start, n, _, err = c.t.segmentRange(ctx, tag, size)
	return start, n, err
}

// FetchRangeValid is FetchRange with the range's validity (valid_ms).
func (c *Client) FetchRangeValid(ctx context.Context, tag string, size int64) (start, n int64, valid time.Duration, err error) {
	return c.t.segmentRange(ctx, tag, size)
}

// StatusError is the *Error a gRPC status becomes.
func StatusError(st *status.Status) *Error { return statusError(st) }

// GRPCConnStates returns the states of a NewGRPC client's connections.
func GRPCConnStates(c *Client) []connectivity.State {
	t, ok := c.t.(*grpcTransport)
	if !ok {
		return nil
	}
	var states []connectivity.State
	for _, conn := range t.conns {
		states = append(states, conn.GetState())
	}
	return states
}
