package client_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http/httptest"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/client"
	leafhttp "github.com/leafd/leafd/http"
	"github.com/leafd/leafd/internal/testkit/testdb"
	leafdv1 "github.com/leafd/leafd/proto/leafd/v1"
	"github.com/leafd/leafd/rpc"
	"github.com/leafd/leafd/segment"
	"github.com/leafd/leafd/snowflake"
	"github.com/leafd/leafd/store"
)

// opaqueKey is the segment.opaque_key of the servers of these tests.
var opaqueKey = []byte("0123456789abcdef0123456789abcdef")

// leafdPair is one real leafd over a store: a segment.Allocator and a
// snowflake.Generator serving both the HTTP API (behind a recorder) and
// the gRPC API (package rpc), as one leafd process with http.addr and
// grpc.addr does.
type leafdPair struct {
	url  string // the HTTP API's base URL
	addr string // the gRPC API's address
	rec  *recorder
	http *httptest.Server
	grpc *rpc.Server
}

func newPair(tb testing.TB, s store.Store, m modes) *leafdPair {
	tb.Helper()
	hcfg := leafhttp.Config{Logger: quiet}
	gcfg := rpc.Config{Logger: quiet}
	if m.segment {
		a, err := segment.New(s, segment.Config{WaitTimeout: time.Second, TagRefresh: time.Hour, Logger: quiet, OpaqueKey: opaqueKey})
		if err != nil {
			tb.Fatal(err)
		}
		if err := a.Refresh(context.Background()); err != nil {
			tb.Fatal(err)
		}
		a.Start()
		tb.Cleanup(func() { a.Close() })
		hcfg.Segment, gcfg.Segment = a, a
	}
	if m.snowflake {
		g, err := snowflake.New(snowflake.Settings{WorkerID: m.workerID, Logger: quiet})
		if err != nil {
			tb.Fatal(err)
		}
		g.Start()
		tb.Cleanup(func() { g.Close() })
		hcfg.Snowflake, gcfg.Snowflake = g, g
	}
	p := &leafdPair{rec: &recorder{h: leafhttp.New(hcfg).Handler()}}
	p.http = httptest.NewServer(p.rec)
	tb.Cleanup(p.http.Close)
	p.url = p.http.URL
	p.addr, p.grpc = serveGRPC(tb, gcfg)
	return p
}

// serveGRPC serves leafd's gRPC API of cfg on a loopback port.
func serveGRPC(tb testing.TB, cfg rpc.Config) (string, *rpc.Server) {
	tb.Helper()
	srv, err := rpc.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil {
			tb.Error(err)
		}
	}()
	tb.Cleanup(func() {
		srv.Stop()
		<-done
	})
	return ln.Addr().String(), srv
}

// serveIDService serves svc alone as leafd.v1.IDService on a loopback
// port: a fake server.
func serveIDService(tb testing.TB, svc leafdv1.IDServiceServer) string {
	tb.Helper()
	srv := grpc.NewServer()
	leafdv1.RegisterIDServiceServer(srv, svc)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	go srv.Serve(ln)
	tb.Cleanup(srv.Stop)
	return ln.Addr().String()
}

// rpcCounter counts a client's RPCs per address and method, through a
// client interceptor given with WithGRPCDialOptions.
type rpcCounter struct {
	mu   sync.Mutex
	n    map[string]int // "addr Method"
	reqs []any
}

func (r *rpcCounter) option() client.Option {
	return client.WithGRPCDialOptions(grpc.WithUnaryInterceptor(
		func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoke grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			r.mu.Lock()
			if r.n == nil {
				r.n = make(map[string]int)
			}
			r.n[cc.Target()+" "+path.Base(method)]++
			r.reqs = append(r.reqs, req)
			r.mu.Unlock()
			return invoke(ctx, method, req, reply, cc, opts...)
		}))
}

func (r *rpcCounter) count(addr, method string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n[addr+" "+method]
}

func (r *rpcCounter) requests() []any {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.reqs)
}

func newGRPCClient(tb testing.TB, addr string, opts ...client.Option) *client.Client {
	tb.Helper()
	c, err := client.NewGRPC(addr, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

// TestGRPC: every call of a NewGRPC client is an RPC (no HTTP request):
// Next and NextN NextSegment, SnowflakeN NextSnowflake, a buffer's refill
// NextSegment of the buffer's size, a lease SegmentRange of the lease's
// size; the IDs are those the server hands out, in order.
func TestGRPC(t *testing.T) {
	ctx := context.Background()
	setup := func(t *testing.T, opts ...client.Option) (*leafdPair, *rpcCounter, *client.Client) {
		s := openStore(t, testdb.DSN(t, store.DefaultDriver()))
		createTag(t, s, "order", 1000)
		p := newPair(t, s, bothModes)
		rc := &rpcCounter{}
		return p, rc, newGRPCClient(t, p.addr, append([]client.Option{rc.option()}, opts...)...)
	}

	t.Run("Direct", func(t *testing.T) {
		p, rc, c := setup(t)
		if id := mustNext(t, c, "order"); id != 1 {
			t.Fatalf("first ID %d, want 1", id)
		}
		ids, err := c.NextN(ctx, "order", 3)
		if err != nil || !slices.Equal(ids, []int64{2, 3, 4}) {
			t.Fatalf("NextN = %v, %v; want [2 3 4]", ids, err)
		}
		sf, err := c.Snowflake(ctx)
		if err != nil || sf <= 0 {
			t.Fatalf("Snowflake = %d, %v", sf, err)
		}
		sfs, err := c.SnowflakeN(ctx, 5)
		if err != nil || len(sfs) != 5 || !slices.IsSorted(sfs) || sfs[0] <= sf {
			t.Fatalf("SnowflakeN(5) = %v, %v after %d", sfs, err, sf)
		}
		if n := rc.count(p.addr, "NextSegment"); n != 2 {
			t.Fatalf("%d NextSegment calls, want 2", n)
		}
		if n := rc.count(p.addr, "NextSnowflake"); n != 2 {
			t.Fatalf("%d NextSnowflake calls, want 2", n)
		}
		if n := p.rec.requests.Load(); n != 0 {
			t.Fatalf("%d HTTP requests from a gRPC client", n)
		}
	})

	t.Run("Buffered", func(t *testing.T) {
		p, rc, c := setup(t, client.WithBuffer(100, 0.2))
		for want := int64(1); want <= 50; want++ {
			if id := mustNext(t, c, "order"); id != want {
				t.Fatalf("ID %d, want %d", id, want)
			}
		}
		if n := rc.count(p.addr, "NextSegment"); n != 1 {
			t.Fatalf("%d NextSegment calls for 50 IDs of a buffer of 100, want 1", n)
		}
		if req := rc.requests()[0].(*leafdv1.NextSegmentRequest); req.GetTag() != "order" || req.GetCount() != 100 {
			t.Fatalf("the refill asked for %v, want tag order, count 100", req)
		}
		for range 31 { // 19 left: the next refill starts in the background
			mustNext(t, c, "order")
		}
		waitFor(t, "the background refill", func() bool { return rc.count(p.addr, "NextSegment") == 2 })
		if n := p.rec.requests.Load(); n != 0 {
			t.Fatalf("%d HTTP requests from a gRPC client", n)
		}
	})

	t.Run("Ranged", func(t *testing.T) {
		p, rc, c := setup(t, client.WithRanges(500, 0.2))
		first := mustNext(t, c, "order")
		for i := int64(1); i < 10; i++ {
			if id := mustNext(t, c, "order"); id != first+i {
				t.Fatalf("ID %d, want %d", id, first+i)
			}
		}
		ids, err := c.NextN(ctx, "order", 5)
		if err != nil || !slices.Equal(ids, []int64{first + 10, first + 11, first + 12, first + 13, first + 14}) {
			t.Fatalf("NextN(5) = %v, %v after %d", ids, err, first+9)
		}
		if n := rc.count(p.addr, "SegmentRange"); n != 1 {
			t.Fatalf("%d SegmentRange calls, want 1", n)
		}
		if req := rc.requests()[0].(*leafdv1.SegmentRangeRequest); req.GetTag() != "order" || req.GetSize() != 500 || !req.GetExpiring() {
			t.Fatalf("the lease asked for %v, want tag order, size 500, expiring", req)
		}
		if n := rc.count(p.addr, "NextSegment"); n != 0 {
			t.Fatalf("%d NextSegment calls with a lease", n)
		}
		if n := p.rec.requests.Load(); n != 0 {
			t.Fatalf("%d HTTP requests from a gRPC client", n)
		}
	})
}

// TestGRPCFailover: two servers on one database, the first one's gRPC
// server stopped mid-traffic: no call fails, no segment or snowflake ID
// twice, and later calls go only to the second address. An address where
// nothing listens is passed over at once.
func TestGRPCFailover(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []client.Option
	}{
		{"Direct", nil},
		{"Buffered", []client.Option{client.WithBuffer(20, 0.5)}},
		{"Ranged", []client.Option{client.WithRanges(50, 0.5)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dsn := testdb.DSN(t, store.DefaultDriver())
			storeA, storeB := openStore(t, dsn), openStore(t, dsn)
			createTag(t, storeA, "order", 100)
			a := newPair(t, storeA, modes{segment: true, snowflake: true, workerID: 1})
			b := newPair(t, storeB, modes{segment: true, snowflake: true, workerID: 2})
			rc := &rpcCounter{}
			c := newGRPCClient(t, a.addr, append([]client.Option{client.WithFailover(b.addr), rc.option()}, tc.opts...)...)

			const workers, calls = 8, 150
			var (
				done     atomic.Int64
				wg       sync.WaitGroup
				mu       sync.Mutex
				segIDs   = map[int64]bool{}
				sfIDs    = map[int64]bool{}
				failures []error
			)
			for range workers {
				wg.Go(func() {
					ctx := context.Background()
					for i := range calls {
						var (
							id  int64
							err error
							m   = segIDs
						)
						if i%5 == 4 {
							id, err = c.Snowflake(ctx)
							m = sfIDs
						} else {
							id, err = c.Next(ctx, "order")
						}
						mu.Lock()
						switch {
						case err != nil:
							failures = append(failures, err)
						case m[id]:
							failures = append(failures, fmt.Errorf("ID %d handed out twice", id))
						default:
							m[id] = true
						}
						mu.Unlock()
						done.Add(1)
					}
				})
			}
			waitFor(t, "a third of the calls", func() bool { return done.Load() >= workers*calls/3 })
			a.grpc.Stop() // closes the connections; refuses new ones
			wg.Wait()
			for _, err := range failures {
				t.Error(err)
			}
			if t.Failed() {
				return
			}
			if len(segIDs)+len(sfIDs) != workers*calls {
				t.Fatalf("%d IDs for %d calls", len(segIDs)+len(sfIDs), workers*calls)
			}
			if rc.count(b.addr, "NextSnowflake") == 0 {
				t.Fatal("the second server got no call: no failover happened")
			}
			beforeA, beforeB := rc.count(a.addr, "NextSnowflake"), rc.count(b.addr, "NextSnowflake")
			for range 20 {
				if _, err := c.Snowflake(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			if da, db := rc.count(a.addr, "NextSnowflake")-beforeA, rc.count(b.addr, "NextSnowflake")-beforeB; da != 0 || db != 20 {
				t.Fatalf("after the failover, 20 calls made %d RPCs to the stopped server and %d to the live one; want 0 and 20", da, db)
			}
		})
	}

	t.Run("Refused", func(t *testing.T) {
		s := openStore(t, testdb.DSN(t, store.DefaultDriver()))
		createTag(t, s, "order", 100)
		p := newPair(t, s, bothModes)
		refused := strings.TrimPrefix(refusedURL(t), "http://")
		rc := &rpcCounter{}
		c := newGRPCClient(t, refused, client.WithFailover(p.addr), rc.option())
		for range 5 {
			mustNext(t, c, "order")
		}
		if n := rc.count(refused, "NextSegment"); n != 1 {
			t.Fatalf("%d calls to the address where nothing listens, want 1 (then the client stays on the live one)", n)
		}

		// Nothing answers at all: both errors, UNAVAILABLE without a
		// leafd code.
		c2 := newGRPCClient(t, refused, client.WithFailover(strings.TrimPrefix(refusedURL(t), "http://")))
		_, err := c2.Next(context.Background(), "order")
		var e *client.Error
		if !errors.As(err, &e) || e.Code != "" || e.Status != 503 || e.GRPCCode != codes.Unavailable ||
			!strings.Contains(err.Error(), "none of 2 gRPC addresses answered") {
			t.Fatalf("err = %v, want UNAVAILABLE of both addresses", err)
		}
	})
}

// TestGRPCErrorsLikeHTTP: the same failures answer the same *Error over
// both transports (Code and Status; Message too), matched by the same
// sentinels; over gRPC GRPCCode says what came.
func TestGRPCErrorsLikeHTTP(t *testing.T) {
	s := openStore(t, testdb.DSN(t, store.DefaultDriver()))
	createTag(t, s, "order", 1000)
	if _, err := s.CreateTag(context.Background(), leafd.Tag{Name: "user", Step: 1000, MaxID: 1,
		Format: segment.FormatOpaque, KeyFingerprint: segment.KeyFingerprint(opaqueKey, "user")}); err != nil {
		t.Fatal(err)
	}
	both := newPair(t, s, bothModes)
	segOnly := newPair(t, s, modes{segment: true})
	hc := map[*leafdPair]*client.Client{both: newClient(t, both.url), segOnly: newClient(t, segOnly.url)}
	gc := map[*leafdPair]*client.Client{both: newGRPCClient(t, both.addr), segOnly: newGRPCClient(t, segOnly.addr)}

	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		server   *leafdPair
		call     func(c *client.Client) error
		sentinel error
		grpcCode codes.Code
	}{
		{"unknown_tag", both, func(c *client.Client) error { _, err := c.Next(ctx, "nope"); return err }, client.ErrUnknownTag, codes.NotFound},
		{"invalid_count", both, func(c *client.Client) error { _, err := c.NextN(ctx, "order", 10_001); return err }, client.ErrInvalidCount, codes.InvalidArgument},
		{"invalid_count/snowflake", both, func(c *client.Client) error { _, err := c.SnowflakeN(ctx, 10_001); return err }, client.ErrInvalidCount, codes.InvalidArgument},
		{"mode_disabled", segOnly, func(c *client.Client) error { _, err := c.Snowflake(ctx); return err }, client.ErrModeDisabled, codes.NotFound},
		{"range_unsupported", both, func(c *client.Client) error { _, _, err := c.FetchRange(ctx, "user", 10); return err }, client.ErrRangeUnsupported, codes.FailedPrecondition},
		{"invalid_size", both, func(c *client.Client) error { _, _, err := c.FetchRange(ctx, "order", 1_000_001); return err }, client.ErrInvalidSize, codes.InvalidArgument},
		{"unknown_tag/range", both, func(c *client.Client) error { _, _, err := c.FetchRange(ctx, "nope", 10); return err }, client.ErrUnknownTag, codes.NotFound},
		{"invalid_tag", both, func(c *client.Client) error { _, err := c.Next(ctx, "no tag"); return err }, client.ErrInvalidTag, codes.OK}, // found by the client
	} {
		t.Run(tc.name, func(t *testing.T) {
			herr, gerr := tc.call(hc[tc.server]), tc.call(gc[tc.server])
			var he, ge *client.Error
			if !errors.As(herr, &he) || !errors.As(gerr, &ge) {
				t.Fatalf("HTTP: %v; gRPC: %v; want two *client.Error", herr, gerr)
			}
			if !errors.Is(herr, tc.sentinel) || !errors.Is(gerr, tc.sentinel) {
				t.Fatalf("HTTP: %v; gRPC: %v; want both to match %v", herr, gerr, tc.sentinel)
			}
			if he.Code != ge.Code || he.Status != ge.Status {
				t.Fatalf("HTTP: %+v; gRPC: %+v; want the same code and status", *he, *ge)
			}
			// The servers word the errors of a parameter each their own
			// way (count "10001" over HTTP, count 10001 over gRPC); the
			// others' messages are the allocator's, the same, but for an
			// unknown tag: the gRPC request comes within a second of the
			// HTTP one, and is answered from the allocator's memory of
			// the lookup, which its message says.
			switch {
			case he.Code == leafd.EInvalidCount || he.Code == leafd.EInvalidSize:
			case he.Code == leafd.EUnknownTag:
				if !strings.Contains(he.Message, `tag "nope"`) ||
					!strings.Contains(ge.Message, `tag "nope" was not in the store when it was looked up`) {
					t.Fatalf("messages: HTTP %q, gRPC %q", he.Message, ge.Message)
				}
			case he.Message != ge.Message:
				t.Fatalf("messages: HTTP %q, gRPC %q", he.Message, ge.Message)
			}
			if he.GRPCCode != codes.OK || ge.GRPCCode != tc.grpcCode {
				t.Fatalf("GRPCCode: HTTP %v, gRPC %v; want OK and %v", he.GRPCCode, ge.GRPCCode, tc.grpcCode)
			}
			if tc.grpcCode != codes.OK && !strings.Contains(gerr.Error(), "(gRPC "+tc.grpcCode.String()+")") {
				t.Fatalf("gRPC error %q does not say its gRPC code", gerr)
			}
		})
	}
}

// TestGRPCStatusTable: every leafd code's status, as package rpc makes it,
// becomes an *Error of that code whose Status is what the HTTP server
// answers for the code.
func TestGRPCStatusTable(t *testing.T) {
	for _, code := range leafd.Codes() {
		lerr := leafd.Errorf(code, "message of %s", code)
		status := leafhttp.ErrorStatus(lerr)
		e := client.StatusError(rpc.Status(lerr))
		if e.Code != code || e.Status != status || e.GRPCCode != rpc.Code(lerr) {
			t.Errorf("%s: became %+v, want status %d, gRPC code %v", code, *e, status, rpc.Code(lerr))
		}
	}
}

// fakeIDService answers NextSegment with its err, or with the next ID of
// a counter; its other RPCs are UNIMPLEMENTED, as from a server older
// than them.
type fakeIDService struct {
	leafdv1.UnimplementedIDServiceServer
	err   error
	calls atomic.Int64
	next  atomic.Int64
}

func (f *fakeIDService) NextSegment(ctx context.Context, req *leafdv1.NextSegmentRequest) (*leafdv1.NextSegmentResponse, error) {
	f.calls.Add(1)
	if f.err != nil {
		return nil, f.err
	}
	n := max(int64(req.GetCount()), 1)
	last := f.next.Add(n)
	ids := make([]int64, 0, n)
	for id := last - n + 1; id <= last; id++ {
		ids = append(ids, id)
	}
	return &leafdv1.NextSegmentResponse{Ids: ids}, nil
}

// TestGRPCStatusFailover: which statuses move on to the next address
// (UNAVAILABLE without a leafd code, segment_unavailable, INTERNAL) and
// which are the answer (INVALID_ARGUMENT without a code, unknown_tag,
// tag_exhausted, period_exhausted); UNIMPLEMENTED is not_found, and a lease of a server
// without SegmentRange falls back to NextSegment.
func TestGRPCStatusFailover(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		err    error
		retry  bool
		code   string
		status int
	}{
		{"Unavailable", status.Error(codes.Unavailable, "overloaded"), true, "", 503},
		{"Internal", status.Error(codes.Internal, "a proxy's trouble"), true, "", 500},
		{"segment_unavailable", rpc.Status(leafd.Errorf(leafd.ESegmentUnavailable, "no range in time")).Err(), true, leafd.ESegmentUnavailable, 503},
		{"InvalidArgument", status.Error(codes.InvalidArgument, "no"), false, "", 400},
		{"unknown_tag", rpc.Status(leafd.Errorf(leafd.EUnknownTag, "no such tag")).Err(), false, leafd.EUnknownTag, 404},
		{"tag_exhausted", rpc.Status(leafd.Errorf(leafd.ETagExhausted, "the end")).Err(), false, leafd.ETagExhausted, 503},
		{"period_exhausted", rpc.Status(leafd.Errorf(leafd.EPeriodExhausted, "the day is full")).Err(), false, leafd.EPeriodExhausted, 503},
		{"another_domain", func() error {
			st, err := status.New(codes.NotFound, "elsewhere").WithDetails(&errdetails.ErrorInfo{Reason: leafd.EUnknownTag, Domain: "example.com"})
			if err != nil {
				panic(err)
			}
			return st.Err()
		}(), false, "", 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := &fakeIDService{err: tc.err}
			good := &fakeIDService{}
			badAddr, goodAddr := serveIDService(t, bad), serveIDService(t, good)

			alone := newGRPCClient(t, badAddr)
			_, err := alone.Next(ctx, "order")
			var e *client.Error
			if !errors.As(err, &e) || e.Code != tc.code || e.Status != tc.status || e.GRPCCode != status.Code(tc.err) {
				t.Fatalf("err = %v, want code %q, status %d, gRPC code %v", err, tc.code, tc.status, status.Code(tc.err))
			}

			c := newGRPCClient(t, badAddr, client.WithFailover(goodAddr))
			id, err := c.Next(ctx, "order")
			if tc.retry {
				if err != nil || id != 1 {
					t.Fatalf("Next = %d, %v; want 1 from the second address", id, err)
				}
			} else if err == nil || good.calls.Load() != 0 {
				t.Fatalf("Next = %d, %v, %d calls to the second address; want the first one's error and none", id, err, good.calls.Load())
			}
		})
	}

	t.Run("Unimplemented", func(t *testing.T) {
		f := &fakeIDService{}
		addr := serveIDService(t, f)
		c := newGRPCClient(t, addr, client.WithRanges(100, 0.2))
		_, _, err := c.FetchRange(ctx, "order", 100)
		var e *client.Error
		if !errors.As(err, &e) || !errors.Is(err, client.ErrNotFound) || e.Status != 404 || e.GRPCCode != codes.Unimplemented {
			t.Fatalf("err = %v, want not_found (404) from UNIMPLEMENTED", err)
		}
		for want := int64(1); want <= 3; want++ {
			if id := mustNext(t, c, "order"); id != want {
				t.Fatalf("ID %d, want %d from NextSegment", id, want)
			}
		}
	})
}

// TestGRPCAndHTTPManyGoroutines: one leafd serving both APIs from one
// allocator and generator, and a second on the same database; HTTP and
// gRPC clients, direct, buffered and leased, from many goroutines at once:
// no segment or snowflake ID twice, and the opaque tag's IDs come through
// the ID buffer of the leased clients. Run with -race.
func TestGRPCAndHTTPManyGoroutines(t *testing.T) {
	testdb.Each(t, store.Drivers(), testGRPCAndHTTPManyGoroutines)
}

func testGRPCAndHTTPManyGoroutines(t *testing.T, driver, dsn string) {
	storeA, storeB := openShared(t, driver, dsn)
	createTag(t, storeA, "order", 1000)
	if _, err := storeA.CreateTag(context.Background(), leafd.Tag{Name: "user", Step: 10_000, MaxID: 1,
		Format: segment.FormatOpaque, KeyFingerprint: segment.KeyFingerprint(opaqueKey, "user")}); err != nil {
		t.Fatal(err)
	}
	a := newPair(t, storeA, modes{segment: true, snowflake: true, workerID: 1})
	b := newPair(t, storeB, modes{segment: true, snowflake: true, workerID: 2})
	clients := []*client.Client{
		newClient(t, a.url, client.WithFailover(b.url)),
		newClient(t, a.url, client.WithBuffer(50, 0.2)),
		newClient(t, b.url, client.WithRanges(37, 0.1), client.WithBuffer(10, 0.5)),
		newGRPCClient(t, a.addr, client.WithFailover(b.addr)),
		newGRPCClient(t, a.addr, client.WithBuffer(50, 0.2)),
		newGRPCClient(t, a.addr, client.WithRanges(500, 0.5), client.WithBuffer(50, 0.2)),
		newGRPCClient(t, b.addr, client.WithRanges(37, 0.1)),
	}

	const workers, calls = 14, 300
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		seen     = map[string]map[int64]bool{"order": {}, "user": {}, "snowflake": {}}
		failures []error
	)
	for w := range workers {
		c := clients[w%len(clients)]
		wg.Go(func() {
			ctx := context.Background()
			for i := range calls {
				kind := "order"
				switch i % 7 {
				case 5:
					kind = "user"
				case 6:
					kind = "snowflake"
				}
				var ids []int64
				var err error
				switch {
				case kind == "snowflake" && i%2 == 0:
					ids, err = c.SnowflakeN(ctx, 3)
				case kind == "snowflake":
					var id int64
					id, err = c.Snowflake(ctx)
					ids = []int64{id}
				case i%5 == 4:
					ids, err = c.NextN(ctx, kind, 4)
				default:
					var id int64
					id, err = c.Next(ctx, kind)
					ids = []int64{id}
				}
				mu.Lock()
				if err != nil {
					failures = append(failures, fmt.Errorf("%s: %w", kind, err))
					ids = nil
				}
				for _, id := range ids {
					if seen[kind][id] {
						failures = append(failures, fmt.Errorf("%s: ID %d handed out twice", kind, id))
					}
					seen[kind][id] = true
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, err := range failures {
		t.Error(err)
	}
	if n := a.rec.requests.Load() + b.rec.requests.Load(); n == 0 {
		t.Fatal("no HTTP segment request reached the servers")
	}
	for kind, ids := range seen {
		if len(ids) < workers*calls/10 {
			t.Errorf("%d IDs of %s", len(ids), kind)
		}
	}
}

// TestGRPCContextDeadline: a server that accepts connections and never
// answers: the call returns at its deadline with the context's error;
// Close does not wait for the stuck refill.
func TestGRPCContextDeadline(t *testing.T) {
	addr := strings.TrimPrefix(hangingServer(t), "http://")
	c, err := client.NewGRPC(addr, client.WithBuffer(10, 0.2))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = c.Next(ctx, "order")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the context's deadline", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Next returned after %v, its deadline was 200ms", d)
	}
	start = time.Now()
	c.Close()
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Close took %v", d)
	}
}

// TestGRPCClose: Close closes the connections; every later call is
// ErrClosed.
func TestGRPCClose(t *testing.T) {
	s := openStore(t, testdb.DSN(t, store.DefaultDriver()))
	createTag(t, s, "order", 1000)
	p := newPair(t, s, bothModes)
	c, err := client.NewGRPC(p.addr, client.WithFailover(p.addr), client.WithBuffer(100, 0.2))
	if err != nil {
		t.Fatal(err)
	}
	mustNext(t, c, "order")
	if states := client.GRPCConnStates(c); len(states) != 2 || states[0] != connectivity.Ready {
		t.Fatalf("connection states %v, want 2, the first ready", states)
	}
	c.Close()
	for _, st := range client.GRPCConnStates(c) {
		if st != connectivity.Shutdown {
			t.Fatalf("connection states %v after Close, want Shutdown", client.GRPCConnStates(c))
		}
	}
	if _, err := c.Next(context.Background(), "order"); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("Next after Close: %v", err)
	}
	if _, err := c.Snowflake(context.Background()); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("Snowflake after Close: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestNewGRPCRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		addr string
		opts []client.Option
		want string
	}{
		{"empty", "", nil, "not valid"},
		{"URL", "http://leafd:9090", nil, "not valid"},
		{"failover URL", "leafd:9090", []client.Option{client.WithFailover("https://leafd2:9090")}, "not valid"},
		{"HTTP client", "leafd:9090", []client.Option{client.WithHTTPClient(nil)}, "option of New"},
		{"buffer", "leafd:9090", []client.Option{client.WithBuffer(0, 0.2)}, "buffer size"},
		{"ranges", "leafd:9090", []client.Option{client.WithRanges(100, 1)}, "refillAt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := client.NewGRPC(tc.addr, tc.opts...)
			if err == nil {
				c.Close()
				t.Fatal("NewGRPC accepted it")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to say %q", err, tc.want)
			}
		})
	}
	if _, err := client.New("http://leafd:8080", client.WithGRPCDialOptions()); err == nil || !strings.Contains(err.Error(), "option of NewGRPC") {
		t.Fatalf("New with WithGRPCDialOptions: %v", err)
	}
}
