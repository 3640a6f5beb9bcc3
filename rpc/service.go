package rpc

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/leafd/leafd"
	leafdv1 "github.com/leafd/leafd/proto/leafd/v1"
	"github.com/leafd/leafd/segment"
	"github.com/leafd/leafd/snowflake"
)

// The methods' names, for the log and leafd_grpc_errors_total.
const (
	methodNextSegment     = ServiceName + "/NextSegment"
	methodSegmentRange    = ServiceName + "/SegmentRange"
	methodNextSnowflake   = ServiceName + "/NextSnowflake"
	methodDecodeSnowflake = ServiceName + "/DecodeSnowflake"
)

// service implements leafdv1.IDServiceServer.
type service struct {
	leafdv1.UnimplementedIDServiceServer
	seg    Segment
	sf     Snowflake
	access Access
	// segToken and sfToken: the mode's ID requests need an access token.
	segToken, sfToken bool
	log               *slog.Logger
	metrics           *metrics
}

// Pooled scratch slices for batches, so that a batch allocates only its
// answer. A slice grown past maxPooled is dropped rather than kept.
var (
	rangePool = sync.Pool{New: func() any { return new([]segment.Range) }}
	idPool    = sync.Pool{New: func() any { return new([]snowflake.ID) }}
)

const maxPooled = 16 << 10

// NextSegment answers IDService.NextSegment.
func (s *service) NextSegment(ctx context.Context, req *leafdv1.NextSegmentRequest) (*leafdv1.NextSegmentResponse, error) {
	tag, err := s.segmentRequest(ctx, req.GetTag())
	if err != nil {
		return nil, s.fail(ctx, methodNextSegment, err)
	}
	n, err := count(req.GetCount(), s.seg.MaxBatch())
	if err != nil {
		return nil, s.fail(ctx, methodNextSegment, err)
	}
	if n == 1 {
		id, err := s.seg.Next(ctx, tag)
		if err != nil {
			return nil, s.fail(ctx, methodNextSegment, err)
		}
		return &leafdv1.NextSegmentResponse{Ids: []int64{id}}, nil
	}
	buf := rangePool.Get().(*[]segment.Range)
	defer func() {
		if cap(*buf) > maxPooled {
			*buf = nil
		}
		rangePool.Put(buf)
	}()
	if *buf, err = s.seg.NextN(ctx, tag, n, (*buf)[:0]); err != nil {
		return nil, s.fail(ctx, methodNextSegment, err)
	}
	ids := make([]int64, 0, n)
	for _, r := range *buf {
		ids = appendRange(ids, r)
	}
	return &leafdv1.NextSegmentResponse{Ids: ids}, nil
}

// appendRange appends the IDs of r: Start, Start+Stride, … below End.
func appendRange(ids []int64, r segment.Range) []int64 {
	if r.Stride <= 1 {
		for id := r.Start; id < r.End; id++ {
			ids = append(ids, id)
		}
		return ids
	}
	for id := r.Start; id < r.End; id += r.Stride {
		ids = append(ids, id)
		if r.End-id <= r.Stride {
			break // the last ID: id+Stride might pass 2^63-1
		}
	}
	return ids
}

// SegmentRange answers IDService.SegmentRange.
func (s *service) SegmentRange(ctx context.Context, req *leafdv1.SegmentRangeRequest) (*leafdv1.SegmentRangeResponse, error) {
	tag, err := s.segmentRequest(ctx, req.GetTag())
	if err != nil {
		return nil, s.fail(ctx, methodSegmentRange, err)
	}
	var r segment.Range
	var valid time.Duration
	if req.GetExpiring() {
		r, valid, err = s.seg.RangeLease(ctx, tag, req.GetSize())
	} else {
		r, err = s.seg.Range(ctx, tag, req.GetSize())
	}
	if err != nil {
		if errors.Is(err, segment.ErrRangeExpires) {
			// A caller that does not say it honours valid_ms would hand
			// out numbers of a period gone.
			err = leafd.Errorf(leafd.ERangeUnsupported,
				"tag %q is dated: its ranges expire at the end of their period; a caller that honours valid_ms (hands out none of a range's IDs after it) sets expiring: true in SegmentRangeRequest, any other asks NextSegment for numbers (count=N)",
				tag)
		}
		return nil, s.fail(ctx, methodSegmentRange, err)
	}
	if r.Stride > 1 || r.Start < 1 || r.End <= r.Start { // never: the allocator promises one run of consecutive IDs
		return nil, s.fail(ctx, methodSegmentRange, leafd.Errorf(leafd.EInternal,
			"segment: Range of %q gave [%d, %d) stride %d", tag, r.Start, r.End, r.Stride))
	}
	res := &leafdv1.SegmentRangeResponse{Tag: tag, Start: r.Start, End: r.End}
	if valid > 0 {
		res.ValidMs = max(valid.Milliseconds(), 1)
	}
	return res, nil
}

// segmentRequest checks what every segment RPC checks, in the order of the
// HTTP routes' answers: the mode is on, the tag is valid, the token allows
// it.
func (s *service) segmentRequest(ctx context.Context, tag string) (string, error) {
	if s.seg == nil {
		return "", leafd.Errorf(leafd.EModeDisabled, "segment mode is switched off on this server (segment.enabled: false)")
	}
	if err := leafd.ValidateTag(tag); err != nil {
		return "", err
	}
	if s.segToken {
		if err := s.access.Check(bearer(ctx), tag, false); err != nil {
			return "", err
		}
	}
	return tag, nil
}

// NextSnowflake answers IDService.NextSnowflake.
func (s *service) NextSnowflake(ctx context.Context, req *leafdv1.NextSnowflakeRequest) (*leafdv1.NextSnowflakeResponse, error) {
	if s.sf == nil {
		return nil, s.fail(ctx, methodNextSnowflake, snowflakeDisabled())
	}
	if s.sfToken {
		if err := s.access.Check(bearer(ctx), "", true); err != nil {
			return nil, s.fail(ctx, methodNextSnowflake, err)
		}
	}
	n, err := count(req.GetCount(), s.sf.MaxBatch())
	if err != nil {
		return nil, s.fail(ctx, methodNextSnowflake, err)
	}
	if n == 1 {
		id, err := s.sf.Next(ctx)
		if err != nil {
			return nil, s.fail(ctx, methodNextSnowflake, err)
		}
		return &leafdv1.NextSnowflakeResponse{Ids: []int64{int64(id)}}, nil
	}
	buf := idPool.Get().(*[]snowflake.ID)
	defer func() {
		if cap(*buf) > maxPooled {
			*buf = nil
		}
		idPool.Put(buf)
	}()
	if *buf, err = s.sf.NextN(ctx, n, (*buf)[:0]); err != nil {
		return nil, s.fail(ctx, methodNextSnowflake, err)
	}
	ids := make([]int64, len(*buf))
	for i, id := range *buf {
		ids[i] = int64(id)
	}
	return &leafdv1.NextSnowflakeResponse{Ids: ids}, nil
}

// DecodeSnowflake answers IDService.DecodeSnowflake with the fields of
// GET /snowflake/{id}.
func (s *service) DecodeSnowflake(ctx context.Context, req *leafdv1.DecodeSnowflakeRequest) (*leafdv1.DecodeSnowflakeResponse, error) {
	if s.sf == nil {
		return nil, s.fail(ctx, methodDecodeSnowflake, snowflakeDisabled())
	}
	if req.GetId() < 1 {
		return nil, s.fail(ctx, methodDecodeSnowflake, leafd.Errorf(leafd.EInvalidID,
			"id %d is not valid: use a positive snowflake ID", req.GetId()))
	}
	d := snowflake.DecodeJSON(s.sf.Layout(), snowflake.ID(req.GetId()))
	return &leafdv1.DecodeSnowflakeResponse{Id: int64(d.ID), Time: d.Time, UnixMs: d.UnixMs, WorkerId: d.WorkerID, Sequence: d.Sequence}, nil
}

func snowflakeDisabled() error {
	return leafd.Errorf(leafd.EModeDisabled, "snowflake mode is switched off on this server (snowflake.enabled: false)")
}

// count reads a batch size: 0 means 1, else 1..max.
func count(c int32, max int) (int, error) {
	if c == 0 {
		return 1, nil
	}
	if c < 0 || int64(c) > int64(max) {
		return 0, leafd.Errorf(leafd.EInvalidCount, "count %d is not valid: use a whole number from 1 to %d (0 means 1)", c, max)
	}
	return int(c), nil
}

// bearer returns the token of the request's "authorization: Bearer TOKEN"
// metadata (the scheme word in any case), "" without one.
func bearer(ctx context.Context) string {
	for _, v := range metadata.ValueFromIncomingContext(ctx, "authorization") {
		scheme, rest, _ := strings.Cut(strings.TrimSpace(v), " ")
		if strings.EqualFold(scheme, "Bearer") {
			if token := strings.TrimSpace(rest); token != "" {
				return token
			}
		}
	}
	return ""
}

// fail logs a failed request as the HTTP server does (not a client's
// mistake, nor not_ready), counts it by leafd code and returns its status
// error. A request that failed because the client cancelled it, or its
// deadline passed, answers CANCELED or DEADLINE_EXCEEDED.
func (s *service) fail(ctx context.Context, method string, err error) error {
	if cerr := ctx.Err(); cerr != nil && leafd.ErrorCode(err) == leafd.EInternal && errors.Is(err, cerr) {
		// The client cancelled, or its deadline passed: gRPC's own
		// status, as the client sees it, and neither a bug nor logged.
		return status.FromContextError(cerr).Err()
	}
	st := Status(err)
	code := leafd.ErrorCode(err)
	if _, known := grpcCodes[code]; !known {
		code = leafd.EInternal
	}
	s.metrics.errors.WithLabelValues(code, method).Inc()
	if serverSide(code) {
		level := slog.LevelWarn
		if code == leafd.EInternal {
			level = slog.LevelError
		}
		s.log.Log(ctx, level, "grpc: request failed", "method", method, "code", st.Code().String(), "err", err)
	}
	return st.Err()
}

// serverSide reports whether a code is the server's trouble rather than
// the client's, as the HTTP server's 5xx: logged.
func serverSide(code string) bool {
	switch code {
	case leafd.EInternal, leafd.ESegmentUnavailable, leafd.ESnowflakeUnavailable, leafd.ETagExhausted,
		leafd.EPeriodExhausted, leafd.ETagRewound, leafd.EOpaqueKeyMismatch, leafd.EStoreUnavailable:
		return true
	}
	return false
}
