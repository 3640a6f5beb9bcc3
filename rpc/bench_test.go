package rpc_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	leafdv1 "github.com/leafd/leafd/proto/leafd/v1"
	"github.com/leafd/leafd/rpc"
	"github.com/leafd/leafd/segment"
)

// bareServer is the floor the gRPC API is measured against: the same
// service and messages on a gRPC server with no interceptor, answering a
// counter.
type bareServer struct {
	leafdv1.UnimplementedIDServiceServer
	n atomic.Int64
}

func (b *bareServer) NextSegment(context.Context, *leafdv1.NextSegmentRequest) (*leafdv1.NextSegmentResponse, error) {
	return &leafdv1.NextSegmentResponse{Ids: []int64{b.n.Add(1)}}, nil
}

func dialBuf(b *testing.B, ln *bufconn.Listener) leafdv1.IDServiceClient {
	conn, err := grpc.NewClient("passthrough:///bench",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return ln.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	return leafdv1.NewIDServiceClient(conn)
}

// BenchmarkNextSegment compares one unary NextSegment of one ID through
// leafd's server (interceptor, metrics, tag check, a real allocator over
// SQLite) with the bare server answering a counter, both over an
// in-memory connection, client and server in this process, in parallel.
// The ratio of the two is the gRPC API's own cost.
func BenchmarkNextSegment(b *testing.B) {
	b.Run("bare", func(b *testing.B) {
		srv := grpc.NewServer()
		leafdv1.RegisterIDServiceServer(srv, &bareServer{})
		ln := bufconn.Listen(1 << 20)
		go srv.Serve(ln)
		b.Cleanup(srv.Stop)
		runNextSegment(b, dialBuf(b, ln))
	})
	b.Run("leafd", func(b *testing.B) {
		st := newStoreB(b)
		a := startAllocator(b, st, segment.Config{MaxStep: 1 << 20})
		srv, err := rpc.New(rpc.Config{Segment: a, Logger: quiet})
		if err != nil {
			b.Fatal(err)
		}
		ln := bufconn.Listen(1 << 20)
		go srv.Serve(ln)
		b.Cleanup(srv.Stop)
		runNextSegment(b, dialBuf(b, ln))
	})
}

func runNextSegment(b *testing.B, c leafdv1.IDServiceClient) {
	req := &leafdv1.NextSegmentRequest{Tag: "bench"}
	if _, err := c.NextSegment(context.Background(), req); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.NextSegment(context.Background(), req); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
