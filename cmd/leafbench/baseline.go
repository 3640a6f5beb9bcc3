package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gin-gonic/gin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	leafdhttp "github.com/leafd/leafd/http"
	leafdv1 "github.com/leafd/leafd/proto/leafd/v1"
)

// baselineCommand is the hidden first argument with which leafbench runs
// itself as a baseline server (-kind says which). It is not in the usage:
// leafbench starts it, nobody else needs to.
const baselineCommand = "__serve-baseline"

// listeningPrefix starts the line with which a baseline server tells its
// parent where it listens.
const listeningPrefix = "leafbench baseline listening on "

// serverKind names a server that scenarios are sent to: leafd, or one of
// the baseline servers, each run in a process of its own.
type serverKind string

// The kinds: leafd, the gin baselines (see newBaselineServer) and the bare
// gRPC server (bareIDService).
const (
	leafdServer    serverKind = ""
	bareServer     serverKind = "bare"
	timeoutsServer serverKind = "timeouts"
	batchServer    serverKind = "batch"
	grpcServer     serverKind = "grpc"
)

// baselineKinds are the kinds of the HTTP baselines, in the order
// leafbench starts them.
var baselineKinds = []serverKind{bareServer, timeoutsServer, batchServer}

// baselineBody is the constant the single-ID baselines answer: one ID as
// leafd writes it, with leafd's content type, so that only the work of
// issuing an ID differs.
var baselineBody = []byte("1\n")

// The batch scenarios' size, and the first IDs of the batch baseline's
// answers: a segment answer of 1000 IDs of 10 digits from 1,000,000,000
// (11,000 bytes), a snowflake one of 1000 IDs of 19 digits from a
// snowflake of the default layout issued in late 2025 (20,000 bytes), as
// leafd's snowflakes are from then on. leafd's segment IDs in a run are as
// wide or narrower: a tag that starts at 1 reaches ten digits only after a
// billion IDs.
const (
	batchIDs            = 1000
	segmentBatchFirst   = 1_000_000_000
	snowflakeBatchFirst = 1_993_720_349_868_498_944
)

// leafdMaxHeaderBytes is leafd's http.Server MaxHeaderBytes (64 KiB,
// defaultMaxHeaderBytes in http/limits.go, which the package does not
// export and no setting changes). Its timeouts are taken from the package's
// exported defaults.
const leafdMaxHeaderBytes = 64 << 10

// batchBody returns n IDs from first, one decimal per line, as leafd's
// plain-text batch answers are written.
func batchBody(first int64, n int) []byte {
	b := make([]byte, 0, n*(len(strconv.FormatInt(first+int64(n), 10))+1))
	for i := range int64(n) {
		b = strconv.AppendInt(b, first+i, 10)
		b = append(b, '\n')
	}
	return b
}

// ginHandler is a baseline's gin engine: release mode, no logger or
// recovery middleware, handlers that write a constant as gin's c.Data does:
// segment to GET /segment/{tag}, snowflake to GET /snowflake, so that its
// requests are byte for byte those sent to leafd, and baselineBody to
// /readyz. It does not read the query.
func ginHandler(segment, snowflake []byte) http.Handler {
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	for path, body := range map[string][]byte{"/segment/:tag": segment, "/snowflake": snowflake, "/readyz": baselineBody} {
		e.GET(path, func(c *gin.Context) { c.Data(http.StatusOK, "text/plain; charset=utf-8", body) })
	}
	return e
}

// newBaselineServer returns the http.Server of a baseline kind.
//
// bareServer, the baseline scenario's, has exactly two settings:
// ReadHeaderTimeout (10 s) and IdleTimeout (2 min), leafd's defaults of
// the two; no ReadTimeout, no WriteTimeout, net/http's default
// MaxHeaderBytes (1 MiB). net/http sets a read deadline on the connection
// for every request (the header timeout) and every wait between requests
// (the idle timeout), so this server already pays for those two.
//
// timeoutsServer and batchServer have all of leafd's default limits:
// ReadHeaderTimeout, ReadTimeout, WriteTimeout and IdleTimeout from
// package http's exported defaults, and MaxHeaderBytes 64 KiB. With a
// ReadTimeout other than the header timeout and a WriteTimeout, net/http
// sets one more read deadline and a write deadline per request.
//
// None has what leafd's server adds around net/http: its cap on
// connections (a listener that counts them and a ConnState hook) and its
// JSON answers to requests net/http cannot read.
//
// The single-ID baselines answer baselineBody. The batch one answers
// batchIDs segment-wide IDs and batchIDs snowflake-wide ones, each body
// formatted once here: what delivering leafd's batch answer costs over
// HTTP, without issuing or formatting a single ID. The body goes out in one
// Write with its Content-Length (gin's c.Data sets it), as leafd's answer
// of that size does, so that net/http frames both alike.
func newBaselineServer(kind serverKind) (*http.Server, error) {
	switch kind {
	case bareServer:
		return &http.Server{Handler: ginHandler(baselineBody, baselineBody),
			ReadHeaderTimeout: leafdhttp.DefaultReadHeaderTimeout, IdleTimeout: leafdhttp.DefaultIdleTimeout}, nil
	case timeoutsServer:
		return withLeafdLimits(ginHandler(baselineBody, baselineBody)), nil
	case batchServer:
		return withLeafdLimits(ginHandler(batchBody(segmentBatchFirst, batchIDs), batchBody(snowflakeBatchFirst, batchIDs))), nil
	}
	return nil, fmt.Errorf("unknown baseline kind %q", kind)
}

// withLeafdLimits returns an http.Server of h with leafd's default
// timeouts and header limit.
func withLeafdLimits(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: leafdhttp.DefaultReadHeaderTimeout,
		ReadTimeout:       leafdhttp.DefaultReadTimeout,
		WriteTimeout:      leafdhttp.DefaultWriteTimeout,
		IdleTimeout:       leafdhttp.DefaultIdleTimeout,
		MaxHeaderBytes:    leafdMaxHeaderBytes,
	}
}

// serveBaseline runs a baseline server (-kind, bare by default) until
// leafbench stops it (see serveChild).
func serveBaseline(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet(baselineCommand, flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:0", "address to listen on")
	kind := fs.String("kind", string(bareServer), "bare, timeouts, batch or grpc")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if serverKind(*kind) == grpcServer {
		srv := newBareGRPCServer()
		return serveChild("leafbench gRPC baseline", *addr, srv.Serve, func(ctx context.Context) error {
			go func() {
				<-ctx.Done()
				srv.Stop() // ends GracefulStop too
			}()
			srv.GracefulStop()
			return nil
		}, stdout, stderr)
	}
	srv, err := newBaselineServer(serverKind(*kind))
	if err != nil {
		fmt.Fprintln(stderr, "leafbench baseline:", err)
		return exitUsage
	}
	return serveChild("leafbench baseline", *addr, srv.Serve, srv.Shutdown, stdout, stderr)
}

// serveChild serves on addr, as a server that leafbench started, until
// SIGINT, SIGTERM or the end of standard input (leafbench gone), and then
// stops within 2 s. Once it listens it prints listeningPrefix and the
// address on stdout; its errors are name's.
func serveChild(name, addr string, serve func(net.Listener) error, stop func(context.Context) error, stdout, stderr io.Writer) int {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(stderr, name+":", err)
		return exitFailure
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer cancel()
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	served := make(chan error, 1)
	go func() { served <- serve(ln) }()
	fmt.Fprintf(stdout, "%s%s\n", listeningPrefix, ln.Addr())

	select {
	case err := <-served:
		fmt.Fprintln(stderr, name+":", err)
		return exitFailure
	case <-ctx.Done():
	}
	stopCtx, cancelStop := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancelStop()
	if err := stop(stopCtx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		fmt.Fprintln(stderr, name+":", err)
		return exitFailure
	}
	return exitOK
}

// grpcMethodNextSegment is the full name of the method the gRPC scenarios
// call.
const grpcMethodNextSegment = "leafd.v1.IDService/NextSegment"

// grpcMaxBatch bounds the count the bare server answers, as leafd's
// segment.max_batch (default 10,000) does.
const grpcMaxBatch = 10_000

// bareIDService is the whole gRPC baseline: leafd.v1.IDService with no
// leafd logic at all. NextSegment, the one method the gRPC scenarios call,
// hands out the next values of an atomic counter, so that its answers are
// the same shape and size as leafd's; no interceptor, no metrics, no health
// service, no token check.
type bareIDService struct {
	leafdv1.UnimplementedIDServiceServer
	next atomic.Int64
}

// NextSegment reads the count as leafd does: 0 means 1, else
// 1..grpcMaxBatch.
func (s *bareIDService) NextSegment(_ context.Context, req *leafdv1.NextSegmentRequest) (*leafdv1.NextSegmentResponse, error) {
	count := req.GetCount()
	n := max(int64(count), 1)
	if count < 0 || n > grpcMaxBatch {
		return nil, status.Errorf(codes.InvalidArgument, "count %d: use 1 to %d", count, grpcMaxBatch)
	}
	first := s.next.Add(n) - n + 1
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = first + int64(i)
	}
	return &leafdv1.NextSegmentResponse{Ids: ids}, nil
}

// newBareGRPCServer returns the bare gRPC server: grpc.NewServer with no
// option, and the bare IDService.
func newBareGRPCServer() *grpc.Server {
	s := grpc.NewServer()
	leafdv1.RegisterIDServiceServer(s, &bareIDService{})
	return s
}
