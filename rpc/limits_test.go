package rpc_test

import (
	"context"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/leafd/leafd/internal/testkit/testenv"
	leafdv1 "github.com/leafd/leafd/proto/leafd/v1"
	"github.com/leafd/leafd/rpc"
	"github.com/leafd/leafd/segment"
	"github.com/leafd/leafd/snowflake"
)

// serveTCP starts an rpc.Server of cfg on a loopback TCP listener, as
// leafd serves it (the limits count connections by their address), and
// returns it with its address. It is stopped when the test ends.
func serveTCP(t *testing.T, cfg rpc.Config) (*rpc.Server, string) {
	t.Helper()
	cfg.Registerer = prometheus.NewRegistry()
	cfg.Logger = quiet
	srv, err := rpc.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	return srv, ln.Addr().String()
}

func dial(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// h2Preface is what an HTTP/2 client sends first: the preface and an empty
// SETTINGS frame.
const h2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + "\x00\x00\x00\x04\x00\x00\x00\x00\x00"

// closedAfter opens a raw HTTP/2 connection that sends the preface, then
// nothing, and reads (never answering a ping) until the server closes it;
// it returns how long that took.
func closedAfter(t *testing.T, addr string, within time.Duration) time.Duration {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	if _, err := io.WriteString(c, h2Preface); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(start.Add(within))
	_, err = io.Copy(io.Discard, c)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("the server kept the connection open for %v", within)
	}
	return time.Since(start)
}

// Past MaxConcurrentStreams RPCs open on one connection, the next waits:
// its handler is not entered until one of them ends.
func TestMaxConcurrentStreams(t *testing.T) {
	seg := &fakeSegment{block: make(chan struct{}), called: make(chan struct{}, 10), ranges: []segment.Range{{Start: 1, End: 3}}}
	_, addr := serveTCP(t, rpc.Config{Segment: seg, Limits: rpc.Limits{MaxConcurrentStreams: 2}})
	client := leafdv1.NewIDServiceClient(dial(t, addr))
	errs := make(chan error, 3)
	for range 3 {
		go func() {
			_, err := client.NextSegment(ctx(t), &leafdv1.NextSegmentRequest{Tag: "t", Count: 2})
			errs <- err
		}()
	}
	for range 2 {
		<-seg.called
	}
	select {
	case <-seg.called:
		t.Fatal("a third RPC entered its handler while two were open on the connection (grpc.max_concurrent_streams 2)")
	case <-time.After(300 * time.Millisecond):
	}
	close(seg.block) // the two end, the third runs
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// A connection with no RPC open for IdleTimeout is closed.
func TestIdleTimeout(t *testing.T) {
	_, addr := serveTCP(t, rpc.Config{Limits: rpc.Limits{IdleTimeout: 300 * time.Millisecond, KeepaliveTime: time.Hour}})
	if d := closedAfter(t, addr, 10*time.Second); d < 300*time.Millisecond {
		t.Fatalf("an idle connection was closed after %v, before the idle timeout of 300ms", d)
	}
}

// A connection that does not answer the server's ping within
// KeepaliveTimeout, once it has been silent for KeepaliveTime, is closed:
// a client that stopped reading does not keep its connection.
func TestKeepalive(t *testing.T) {
	_, addr := serveTCP(t, rpc.Config{Limits: rpc.Limits{IdleTimeout: time.Hour,
		KeepaliveTime: 200 * time.Millisecond, KeepaliveTimeout: 200 * time.Millisecond}})
	if d := closedAfter(t, addr, 10*time.Second); d < 400*time.Millisecond {
		t.Fatalf("a silent connection was closed after %v, before keepalive time and timeout (400ms)", d)
	}
}

// A request message over 16 KiB is refused RESOURCE_EXHAUSTED, before
// any handler reads it.
func TestRequestTooLarge(t *testing.T) {
	seg := &fakeSegment{called: make(chan struct{}, 1)}
	_, addr := serveTCP(t, rpc.Config{Segment: seg})
	client := leafdv1.NewIDServiceClient(dial(t, addr))
	_, err := client.NextSegment(ctx(t), &leafdv1.NextSegmentRequest{Tag: strings.Repeat("t", 17<<10)})
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(status.Convert(err).Message(), "larger than max") {
		t.Fatalf("a 17 KiB request: %v, want RESOURCE_EXHAUSTED larger than max", err)
	}
	if len(seg.called) != 0 {
		t.Fatal("the handler ran")
	}
	// A request within the bound is served.
	if _, err := client.NextSegment(ctx(t), &leafdv1.NextSegmentRequest{Tag: "t"}); err != nil {
		t.Fatal(err)
	}
}

// The largest batch's answer fits the answer limit, which follows
// MaxBatch: IDs of 9 bytes, the most an int64 below 2^63 takes.
func TestLargestAnswer(t *testing.T) {
	const start = int64(1) << 62
	seg := &fakeSegment{ranges: []segment.Range{{Start: start, End: start + 100_000}}}
	_, addr := serveTCP(t, rpc.Config{Segment: bigBatch{seg}})
	client := leafdv1.NewIDServiceClient(dial(t, addr))
	res, err := client.NextSegment(ctx(t), &leafdv1.NextSegmentRequest{Tag: "t", Count: 100_000},
		grpc.MaxCallRecvMsgSize(rpc.MaxAnswerBytes(100_000)))
	if err != nil || len(res.GetIds()) != 100_000 {
		t.Fatalf("a batch of 100,000 IDs of 2^62: %d IDs, %v", len(res.GetIds()), err)
	}
}

// bigBatch is a segment allowing batches of 100,000.
type bigBatch struct{ *fakeSegment }

func (bigBatch) MaxBatch() int { return 100_000 }

// At MaxConnections, a new connection waits to be accepted until one
// closes.
func TestMaxConnections(t *testing.T) {
	seg := &fakeSegment{}
	_, addr := serveTCP(t, rpc.Config{Segment: seg, Limits: rpc.Limits{MaxConnections: 2}})
	var first *grpc.ClientConn
	for i := range 2 {
		conn := dial(t, addr)
		if _, err := leafdv1.NewIDServiceClient(conn).NextSegment(ctx(t), &leafdv1.NextSegmentRequest{Tag: "t"}); err != nil {
			t.Fatalf("connection %d: %v", i+1, err)
		}
		if i == 0 {
			first = conn
		}
	}
	third := leafdv1.NewIDServiceClient(dial(t, addr))
	short, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if _, err := third.NextSegment(short, &leafdv1.NextSegmentRequest{Tag: "t"}, grpc.WaitForReady(true)); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("a third connection past grpc.max_connections 2: %v, want it to wait (DEADLINE_EXCEEDED)", err)
	}
	first.Close()
	if _, err := third.NextSegment(ctx(t), &leafdv1.NextSegmentRequest{Tag: "t"}, grpc.WaitForReady(true)); err != nil {
		t.Fatalf("the third connection once the first closed: %v", err)
	}
}

// A connection holds at most WatchesPerConnection health Watch streams;
// another connection may still watch, and the streams of a client that
// leaves are freed.
func TestWatchesPerConnection(t *testing.T) {
	srv, addr := serveTCP(t, rpc.Config{})
	watch := func(conn *grpc.ClientConn) error {
		w, err := healthpb.NewHealthClient(conn).Watch(ctx(t), &healthpb.HealthCheckRequest{})
		if err != nil {
			return err
		}
		_, err = w.Recv()
		return err
	}
	greedy := dial(t, addr)
	for i := range rpc.WatchesPerConnection {
		if err := watch(greedy); err != nil {
			t.Fatalf("watch %d: %v", i+1, err)
		}
	}
	if err := watch(greedy); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("watch %d on one connection: %v, want RESOURCE_EXHAUSTED", rpc.WatchesPerConnection+1, err)
	}
	if err := watch(dial(t, addr)); err != nil {
		t.Fatalf("a watch on another connection: %v", err)
	}
	greedy.Close()
	if err := testenv.Eventually(ctx(t), 5*time.Second, 10*time.Millisecond, func() error {
		if n := srv.Watches(); n != 1 {
			return status.Errorf(codes.Unknown, "%d watches open", n)
		}
		return nil
	}); err != nil {
		t.Fatalf("after the client with %d watches left: %v", rpc.WatchesPerConnection, err)
	}
}

// Answers that a client does not read hold their streams: a connection
// holds at most MaxConcurrentStreams of them, the calls past it refused
// before any handler runs.
func TestUnreadAnswers(t *testing.T) {
	gen := &countingSnowflake{Snowflake: newGenerator(t, 1)}
	_, addr := serveTCP(t, rpc.Config{Snowflake: gen, Limits: rpc.Limits{MaxConcurrentStreams: 8}})
	// 200 calls of 1,000 IDs that grant no window for the answers, from a
	// client that answers pings, so that nothing but the bound stops them.
	h, err := testenv.DialH2(&net.Dialer{}, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	go h.Serve()
	for range 200 {
		if err := h.Call("/leafd.v1.IDService/NextSnowflake", &leafdv1.NextSnowflakeRequest{Count: 1000}); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := testenv.Eventually(ctx(t), 5*time.Second, 10*time.Millisecond, func() error {
		if n := gen.batches.Load(); n != 8 {
			return status.Errorf(codes.Unknown, "%d calls answered", n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if n := gen.batches.Load(); n != 8 {
		t.Fatalf("%d of 200 calls answered to a client that reads none, want grpc.max_concurrent_streams (8)", n)
	}
}

// countingSnowflake counts the batches asked of it.
type countingSnowflake struct {
	rpc.Snowflake
	batches atomic.Int64
}

func (c *countingSnowflake) NextN(ctx context.Context, n int, dst []snowflake.ID) ([]snowflake.ID, error) {
	c.batches.Add(1)
	return c.Snowflake.NextN(ctx, n, dst)
}
