package client

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/leafd/leafd"
	leafdv1 "github.com/leafd/leafd/proto/leafd/v1"
)

// NewGRPC returns a Client of the leafd server whose gRPC API listens at
// addr (its grpc.addr, such as "leafd:9090"; any target of grpc.NewClient,
// such as "dns:///leafd:9090"), speaking leafd.v1.IDService instead of the
// HTTP API: Next and NextN call NextSegment, the leases of WithRanges
// SegmentRange, Snowflake and SnowflakeN NextSnowflake. Every other option
// means what it means for New: WithFailover adds further gRPC addresses,
// and the buffers of WithBuffer and WithRanges work the same on top.
//
// The connections are plaintext (h2c, as leafd serves gRPC) unless
// WithGRPCDialOptions gives credentials. They are made when first needed,
// not here; Close closes them.
//
// Errors are the same *Error values as over HTTP (see Error), and fail
// over the same: a status of a leafd code moves on to the next address
// when that code's HTTP status is a 5xx other than tag_exhausted and
// period_exhausted (segment_unavailable, snowflake_unavailable,
// store_unavailable, …); a status without a leafd code when its gRPC code maps to a 5xx:
// UNAVAILABLE (a connection that cannot be made, a server shutting down),
// DEADLINE_EXCEEDED while the caller's context has time left, INTERNAL,
// UNKNOWN.
//
// Errors: an address that is empty or an http or https URL, one that
// grpc.NewClient refuses, WithHTTPClient (an option of New), and those of
// New's options.
func NewGRPC(addr string, opts ...Option) (*Client, error) {
	s := collect(opts)
	addrs := append([]string{addr}, s.more...)
	for _, a := range addrs {
		if strings.TrimSpace(a) == "" || strings.HasPrefix(a, "http://") || strings.HasPrefix(a, "https://") {
			return nil, fmt.Errorf("leafd client: gRPC address %q is not valid: use the host:port of a server's grpc.addr, such as leafd:9090", a)
		}
	}
	if s.hcSet {
		return nil, errors.New("leafd client: WithHTTPClient is an option of New, not of NewGRPC")
	}
	if err := s.check(); err != nil {
		return nil, err
	}
	t, err := newGRPCTransport(addrs, s.dial)
	if err != nil {
		return nil, err
	}
	if s.token != "" {
		t.auth = "Bearer " + s.token
	}
	return newClient(s, t), nil
}

// WithGRPCDialOptions adds options to the gRPC connections of NewGRPC,
// after its own default, insecure credentials (plaintext): TLS with
// grpc.WithTransportCredentials(credentials.NewTLS(…)), per-RPC
// credentials, interceptors, keepalive, a larger
// grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(…)). An option of
// NewGRPC only: New refuses it.
func WithGRPCDialOptions(opts ...grpc.DialOption) Option {
	return func(s *settings) { s.dial, s.dialSet = append(s.dial, opts...), true }
}

// grpcTransport asks leafd's gRPC API: IDService on one connection per
// address.
type grpcTransport struct {
	addrs []string
	conns []*grpc.ClientConn
	stubs []leafdv1.IDServiceClient
	// cur is the index in addrs of the address that answered last: every
	// call starts there.
	cur atomic.Int32
	// closing is set before the connections close: an RPC that fails then
	// is ErrClosed.
	closing atomic.Bool
	// auth is the authorization metadata of every call (WithToken), "" for
	// none.
	auth string
}

// newGRPCTransport makes a connection per address, insecure unless opts
// say otherwise. It dials nothing yet.
func newGRPCTransport(addrs []string, opts []grpc.DialOption) (*grpcTransport, error) {
	t := &grpcTransport{addrs: addrs}
	dial := append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)
	for _, a := range addrs {
		conn, err := grpc.NewClient(a, dial...)
		if err != nil {
			t.close()
			return nil, fmt.Errorf("leafd client: gRPC address %q: %w", a, err)
		}
		t.conns = append(t.conns, conn)
		t.stubs = append(t.stubs, leafdv1.NewIDServiceClient(conn))
	}
	return t, nil
}

func (t *grpcTransport) close() {
	t.closing.Store(true)
	for _, conn := range t.conns {
		conn.Close()
	}
}

// The RPCs' names, for errors.
const (
	rpcNextSegment   = "NextSegment"
	rpcSegmentRange  = "SegmentRange"
	rpcNextSnowflake = "NextSnowflake"
)

// segment calls NextSegment for n IDs of tag.
func (t *grpcTransport) segment(ctx context.Context, tag string, n int) ([]int64, error) {
	if n > math.MaxInt32 {
		return nil, localError(http.StatusBadRequest, leafd.EInvalidCount, "count %d is not valid: ask for at most the servers' segment.max_batch IDs", n)
	}
	ctx = t.outgoing(ctx)
	var ids []int64
	err := t.call(ctx, rpcNextSegment, func(stub leafdv1.IDServiceClient) error {
		res, err := stub.NextSegment(ctx, &leafdv1.NextSegmentRequest{Tag: tag, Count: int32(n)}, recvLimit(n)...)
		ids = res.GetIds()
		return err
	})
	if err != nil {
		return nil, err
	}
	return checkIDs(ids, n)
}

// snowflake calls NextSnowflake for n IDs.
func (t *grpcTransport) snowflake(ctx context.Context, n int) ([]int64, error) {
	if n > math.MaxInt32 {
		return nil, localError(http.StatusBadRequest, leafd.EInvalidCount, "count %d is not valid: ask for at most the servers' segment.max_batch IDs", n)
	}
	ctx = t.outgoing(ctx)
	var ids []int64
	err := t.call(ctx, rpcNextSnowflake, func(stub leafdv1.IDServiceClient) error {
		res, err := stub.NextSnowflake(ctx, &leafdv1.NextSnowflakeRequest{Count: int32(n)}, recvLimit(n)...)
		ids = res.GetIds()
		return err
	})
	if err != nil {
		return nil, err
	}
	return checkIDs(ids, n)
}

// segmentRange calls SegmentRange for size IDs of tag, with expiring set
// (the client honours valid_ms, so a dated tag's range is leased too), and
// checks the range strictly: the tag asked for, start at least 1, exactly
// size IDs, or, for a range that expires (valid_ms over 0), 1 to size.
func (t *grpcTransport) segmentRange(ctx context.Context, tag string, size int64) (start, n int64, valid time.Duration, err error) {
	ctx = t.outgoing(ctx)
	var res *leafdv1.SegmentRangeResponse
	err = t.call(ctx, rpcSegmentRange, func(stub leafdv1.IDServiceClient) error {
		var err error
		res, err = stub.SegmentRange(ctx, &leafdv1.SegmentRangeRequest{Tag: tag, Size: size, Expiring: true})
		return err
	})
	if err != nil {
		return 0, 0, 0, err
	}
	if res.GetTag() != tag {
		return 0, 0, 0, fmt.Errorf("leafd client: malformed range: asked for tag %q, got an answer for another", tag)
	}
	start, end, ms := res.GetStart(), res.GetEnd(), res.GetValidMs()
	if ms < 0 || ms > maxValidMS {
		return 0, 0, 0, fmt.Errorf("leafd client: malformed range: valid_ms %d is not a duration of at most a year", ms)
	}
	if start < 1 || end <= start || end-start != size && (ms == 0 || end-start > size) {
		return 0, 0, 0, fmt.Errorf("leafd client: malformed range: [%d, %d) is not the %d IDs asked for", start, end, size)
	}
	return start, end - start, time.Duration(ms) * time.Millisecond, nil
}

// outgoing returns ctx with the metadata of every call: the access token
// (WithToken), if any.
func (t *grpcTransport) outgoing(ctx context.Context) context.Context {
	if t.auth == "" {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, "authorization", t.auth)
}

// call makes one RPC on the addresses in turn, starting at the one that
// answered last, until one answers or gives an error that another server
// would give too (see NewGRPC).
func (t *grpcTransport) call(ctx context.Context, method string, rpc func(leafdv1.IDServiceClient) error) error {
	return failover(ctx, &t.cur, len(t.addrs), "gRPC addresses",
		func(i int) string { return method + " on " + t.addrs[i] },
		func(i int) (bool, error) {
			err := rpc(t.stubs[i])
			if err == nil {
				return false, nil
			}
			if t.closing.Load() {
				return false, ErrClosed
			}
			st, ok := status.FromError(err)
			if !ok {
				return true, fmt.Errorf("leafd client: %s on %s: %w", method, t.addrs[i], err)
			}
			e := statusError(st)
			if e.Code == "" {
				// Not leafd's answer: say where it came from, as a network
				// error over HTTP does.
				return !e.definite(), fmt.Errorf("leafd client: %s on %s: %w", method, t.addrs[i], e)
			}
			return !e.definite(), e
		})
}

// recvLimit raises gRPC's 4 MiB bound of an answer for batches that may
// pass it: an ID is at most 10 bytes of protobuf.
func recvLimit(n int) []grpc.CallOption {
	const defaultLimit = 4 << 20
	if limit := int64(n)*10 + 1024; limit > defaultLimit {
		return []grpc.CallOption{grpc.MaxCallRecvMsgSize(int(min(limit, math.MaxInt32)))}
	}
	return nil
}

// checkIDs checks the IDs of an answer strictly, as parseIDs does those of
// JSON: exactly n, each in 1..2^63-1, none twice. It returns them
// ascending (an opaque tag's batch comes in no particular order).
func checkIDs(ids []int64, n int) ([]int64, error) {
	if len(ids) != n {
		return nil, fmt.Errorf("leafd client: malformed answer: asked for %d IDs, got %d", n, len(ids))
	}
	sorted := true
	for i, id := range ids {
		if id < 1 {
			return nil, fmt.Errorf("leafd client: malformed answer: %d is not an ID (1 to 2^63-1)", id)
		}
		if i > 0 && id <= ids[i-1] {
			sorted = false
		}
	}
	if !sorted {
		slices.Sort(ids)
		for i := 1; i < n; i++ {
			if ids[i] == ids[i-1] {
				return nil, fmt.Errorf("leafd client: malformed answer: ID %d twice in one batch", ids[i])
			}
		}
	}
	return ids, nil
}
