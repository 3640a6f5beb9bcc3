package deploy_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	leafmetrics "github.com/leafd/leafd/metrics"
	leafdv1 "github.com/leafd/leafd/proto/leafd/v1"
	"github.com/leafd/leafd/rpc"
)

// callGRPC serves the gRPC API of a leafd whose metrics are m, as
// cmd/leafd does with grpc.addr set, and calls it once with success and
// once with an error, so that the gRPC series show in the scrape of
// exported.
func callGRPC(t *testing.T, m *leafmetrics.Registry, seg rpc.Segment, sf rpc.Snowflake) {
	t.Helper()
	srv, err := rpc.New(rpc.Config{Segment: seg, Snowflake: sf, Registerer: m.Registerer(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ln := bufconn.Listen(1 << 16)
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("passthrough:///leafd",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return ln.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := leafdv1.NewIDServiceClient(conn)
	if _, err := c.NextSegment(ctx, &leafdv1.NextSegmentRequest{Tag: "order", Count: 2}); err != nil {
		t.Fatalf("gRPC NextSegment: %v", err)
	}
	if _, err := c.NextSegment(ctx, &leafdv1.NextSegmentRequest{Tag: "nope"}); rpc.ErrorCode(err) != "unknown_tag" {
		t.Fatalf("gRPC NextSegment of an unknown tag: %v, want unknown_tag", err)
	}
}
