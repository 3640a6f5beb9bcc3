package main

import (
	"context"
	"flag"
	"io"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	leafdv1 "github.com/leafd/leafd/proto/leafd/v1"
)

// grpcBaselineCommand is the hidden first argument with which leafbench
// runs itself as the bare gRPC server, as baselineCommand runs the bare gin
// one.
const grpcBaselineCommand = "__serve-grpc-baseline"

// grpcListeningPrefix starts the line with which the bare gRPC server tells
// its parent where it listens.
const grpcListeningPrefix = "leafbench gRPC baseline listening on "

// grpcMethodNextSegment is the full name of the method the gRPC scenarios
// call.
const grpcMethodNextSegment = "leafd.v1.IDService/NextSegment"

// grpcMaxBatch bounds the count the bare server answers, as leafd's
// segment.max_batch (default 10,000) does.
const grpcMaxBatch = 10_000

// bareIDService is the whole gRPC baseline: leafd.v1.IDService with no
// leafd logic at all. Every method hands out the next values of one atomic
// counter, so that its answers are the same shape and size as leafd's; no
// interceptor, no metrics, no health service, no token check.
type bareIDService struct {
	leafdv1.UnimplementedIDServiceServer
	next atomic.Int64
}

// take returns the first of n new values of the counter.
func (s *bareIDService) take(n int64) int64 { return s.next.Add(n) - n + 1 }

// ids returns count new values of the counter, reading count as leafd
// does: 0 means 1, else 1..grpcMaxBatch.
func (s *bareIDService) ids(count int32) ([]int64, error) {
	n := max(int64(count), 1)
	if count < 0 || n > grpcMaxBatch {
		return nil, status.Errorf(codes.InvalidArgument, "count %d: use 1 to %d", count, grpcMaxBatch)
	}
	first := s.take(n)
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = first + int64(i)
	}
	return ids, nil
}

func (s *bareIDService) NextSegment(_ context.Context, req *leafdv1.NextSegmentRequest) (*leafdv1.NextSegmentResponse, error) {
	ids, err := s.ids(req.GetCount())
	return &leafdv1.NextSegmentResponse{Ids: ids}, err
}

func (s *bareIDService) SegmentRange(_ context.Context, req *leafdv1.SegmentRangeRequest) (*leafdv1.SegmentRangeResponse, error) {
	if req.GetSize() < 1 {
		return nil, status.Errorf(codes.InvalidArgument, "size %d: use a positive size", req.GetSize())
	}
	first := s.take(req.GetSize())
	return &leafdv1.SegmentRangeResponse{Tag: req.GetTag(), Start: first, End: first + req.GetSize()}, nil
}

func (s *bareIDService) NextSnowflake(_ context.Context, req *leafdv1.NextSnowflakeRequest) (*leafdv1.NextSnowflakeResponse, error) {
	ids, err := s.ids(req.GetCount())
	return &leafdv1.NextSnowflakeResponse{Ids: ids}, err
}

func (s *bareIDService) DecodeSnowflake(_ context.Context, req *leafdv1.DecodeSnowflakeRequest) (*leafdv1.DecodeSnowflakeResponse, error) {
	return &leafdv1.DecodeSnowflakeResponse{Id: req.GetId()}, nil
}

// newBareGRPCServer returns the bare gRPC server: grpc.NewServer with no
// option, and the bare IDService.
func newBareGRPCServer() *grpc.Server {
	s := grpc.NewServer()
	leafdv1.RegisterIDServiceServer(s, &bareIDService{})
	return s
}

// serveGRPCBaseline runs the bare gRPC server until SIGINT, SIGTERM or the
// end of standard input (leafbench gone). It prints grpcListeningPrefix and
// the address on stdout once it listens.
func serveGRPCBaseline(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet(grpcBaselineCommand, flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:0", "address to listen on")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	srv := newBareGRPCServer()
	return serveChild("leafbench gRPC baseline", *addr, grpcListeningPrefix, srv.Serve, func(ctx context.Context) error {
		stopped := make(chan struct{})
		go func() {
			srv.GracefulStop()
			close(stopped)
		}()
		select {
		case <-stopped:
		case <-ctx.Done():
			srv.Stop()
		}
		return nil
	}, stdout, stderr)
}
