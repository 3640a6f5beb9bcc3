package rpc_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/access"
	"github.com/leafd/leafd/internal/testkit/testdb"
	leafdv1 "github.com/leafd/leafd/proto/leafd/v1"
	"github.com/leafd/leafd/rpc"
	"github.com/leafd/leafd/segment"
	"github.com/leafd/leafd/snowflake"
	"github.com/leafd/leafd/store"
)

// NextSegment hands out a tag's IDs from a real allocator on every engine:
// count 0 is one ID, a batch is ascending and continues where the last
// ended, across range loads.
func TestNextSegment(t *testing.T) {
	testdb.Each(t, store.Drivers(), testNextSegment)
}

func testNextSegment(t *testing.T, driver, dsn string) {
	s := newStoreOn(t, driver, dsn, map[string]int64{"order": 10})
	a := startAllocator(t, s, segment.Config{MaxBatch: 100})
	c := serve(t, rpc.Config{Segment: a}).client

	if ids := nextSegment(t, c, "order", 0); len(ids) != 1 || ids[0] != 1 {
		t.Fatalf("count 0: %v, want [1]", ids)
	}
	if ids := nextSegment(t, c, "order", 1); len(ids) != 1 || ids[0] != 2 {
		t.Fatalf("count 1: %v, want [2]", ids)
	}
	ids := nextSegment(t, c, "order", 25) // crosses ranges of 10
	if len(ids) != 25 {
		t.Fatalf("count 25: %d IDs", len(ids))
	}
	for i, id := range ids {
		if id != int64(3+i) {
			t.Fatalf("count 25: %v, want 3..27", ids)
		}
	}
	if ids := nextSegment(t, c, "order", 100); len(ids) != 100 || ids[0] <= 27 {
		t.Fatalf("count 100 (segment.max_batch): %d IDs from %v", len(ids), ids[:1])
	}

	for _, tt := range []struct {
		tag    string
		count  int32
		code   codes.Code
		reason string
	}{
		{"order", 101, codes.InvalidArgument, leafd.EInvalidCount},
		{"order", -1, codes.InvalidArgument, leafd.EInvalidCount},
		{"", 1, codes.InvalidArgument, leafd.EInvalidTag},
		{"..", 1, codes.InvalidArgument, leafd.EInvalidTag},
		{"a/b", 1, codes.InvalidArgument, leafd.EInvalidTag},
		{"nosuchtag", 1, codes.NotFound, leafd.EUnknownTag},
		{"nosuchtag", 5, codes.NotFound, leafd.EUnknownTag},
	} {
		_, err := c.NextSegment(ctx(t), &leafdv1.NextSegmentRequest{Tag: tt.tag, Count: tt.count})
		msg := wantError(t, fmt.Sprintf("NextSegment(%q, %d)", tt.tag, tt.count), err, tt.code, tt.reason)
		if msg == "" {
			t.Fatalf("NextSegment(%q, %d): an empty message", tt.tag, tt.count)
		}
	}
}

// Ranges from the allocator, strided (store.shards) or one ID each (opaque
// tags), are answered as the IDs they hold.
func TestNextSegmentExpandsRanges(t *testing.T) {
	const top = leafd.MaxID
	f := &fakeSegment{ranges: []segment.Range{
		{Start: 5, End: 8},                     // 5 6 7
		{Start: 100, End: 130, Stride: 8},      // 100 108 116 124
		{Start: 77, End: 78},                   // one ID, as an opaque tag's
		{Start: top - 16, End: top, Stride: 8}, // top-16 top-8: the last must not overflow
		{Start: top - 1, End: top, Stride: 1},
	}}
	c := serve(t, rpc.Config{Segment: f}).client
	got := nextSegment(t, c, "t", 12)
	want := []int64{5, 6, 7, 100, 108, 116, 124, 77, top - 16, top - 8, top - 1}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// SegmentRange reserves consecutive IDs that no other request receives.
func TestSegmentRange(t *testing.T) {
	testdb.Each(t, store.Drivers(), testSegmentRange)
}

func testSegmentRange(t *testing.T, driver, dsn string) {
	s := newStoreOn(t, driver, dsn, map[string]int64{"order": 100})
	a := startAllocator(t, s, segment.Config{MaxRange: 5000})
	c := serve(t, rpc.Config{Segment: a}).client

	first := nextSegment(t, c, "order", 3)
	r, err := c.SegmentRange(ctx(t), &leafdv1.SegmentRangeRequest{Tag: "order", Size: 40})
	if err != nil {
		t.Fatal(err)
	}
	if r.GetTag() != "order" || r.GetEnd()-r.GetStart() != 40 || r.GetStart() <= first[2] {
		t.Fatalf("range %v after IDs %v: want 40 IDs above them", r, first)
	}
	big, err := c.SegmentRange(ctx(t), &leafdv1.SegmentRangeRequest{Tag: "order", Size: 5000}) // past a step: taken from the store
	if err != nil {
		t.Fatal(err)
	}
	if big.GetEnd()-big.GetStart() != 5000 {
		t.Fatalf("range %v, want 5000 IDs", big)
	}
	after := nextSegment(t, c, "order", 50)
	all := append(append([]int64{}, first...), after...)
	for _, rr := range []*leafdv1.SegmentRangeResponse{r, big} {
		for id := rr.GetStart(); id < rr.GetEnd(); id++ {
			all = append(all, id)
		}
	}
	noDuplicates(t, all)

	for _, size := range []int64{0, -1, 5001} {
		_, err := c.SegmentRange(ctx(t), &leafdv1.SegmentRangeRequest{Tag: "order", Size: size})
		wantError(t, fmt.Sprintf("size %d", size), err, codes.InvalidArgument, leafd.EInvalidSize)
	}
	_, err = c.SegmentRange(ctx(t), &leafdv1.SegmentRangeRequest{Tag: "no:such", Size: 10})
	wantError(t, "unknown tag", err, codes.NotFound, leafd.EUnknownTag)
	_, err = c.SegmentRange(ctx(t), &leafdv1.SegmentRangeRequest{Tag: "a b", Size: 10})
	wantError(t, "invalid tag", err, codes.InvalidArgument, leafd.EInvalidTag)

	// A tag whose IDs are not consecutive answers range_unsupported.
	f := &fakeSegment{err: leafd.Errorf(leafd.ERangeUnsupported, "tag %q is opaque", "user")}
	_, err = serve(t, rpc.Config{Segment: f}).client.SegmentRange(ctx(t), &leafdv1.SegmentRangeRequest{Tag: "user", Size: 10})
	wantError(t, "opaque tag", err, codes.FailedPrecondition, leafd.ERangeUnsupported)
}

// NextSnowflake hands out ascending snowflake IDs; DecodeSnowflake answers
// the fields of GET /snowflake/{id}, under the same layout.
func TestSnowflake(t *testing.T) {
	g := newGenerator(t, 7)
	c := serve(t, rpc.Config{Snowflake: g}).client
	one, err := c.NextSnowflake(ctx(t), &leafdv1.NextSnowflakeRequest{})
	if err != nil || len(one.GetIds()) != 1 {
		t.Fatalf("NextSnowflake: %v %v", one, err)
	}
	batch, err := c.NextSnowflake(ctx(t), &leafdv1.NextSnowflakeRequest{Count: 500})
	if err != nil || len(batch.GetIds()) != 500 {
		t.Fatalf("NextSnowflake(500): %d IDs, %v", len(batch.GetIds()), err)
	}
	prev := one.GetIds()[0]
	for _, id := range batch.GetIds() {
		if id <= prev {
			t.Fatalf("%d after %d", id, prev)
		}
		prev = id
	}
	_, err = c.NextSnowflake(ctx(t), &leafdv1.NextSnowflakeRequest{Count: 1001})
	wantError(t, "count past max_batch", err, codes.InvalidArgument, leafd.EInvalidCount)

	// The HTTP route's answer (snowflake.DecodeJSON), field for field.
	for _, id := range []int64{one.GetIds()[0], batch.GetIds()[499], 1234567890123456789, 1} {
		d, err := c.DecodeSnowflake(ctx(t), &leafdv1.DecodeSnowflakeRequest{Id: id})
		if err != nil {
			t.Fatal(err)
		}
		want := snowflake.DecodeJSON(g.Layout(), snowflake.ID(id))
		if d.GetId() != int64(want.ID) || d.GetTime() != want.Time || d.GetUnixMs() != want.UnixMs ||
			d.GetWorkerId() != want.WorkerID || d.GetSequence() != want.Sequence {
			t.Fatalf("DecodeSnowflake(%d) = %v; GET /snowflake/%d = %+v", id, d, id, want)
		}
	}
	if d, _ := c.DecodeSnowflake(ctx(t), &leafdv1.DecodeSnowflakeRequest{Id: one.GetIds()[0]}); d.GetWorkerId() != 7 {
		t.Fatalf("worker id %d, want 7", d.GetWorkerId())
	}
	d, err := c.DecodeSnowflake(ctx(t), &leafdv1.DecodeSnowflakeRequest{Id: 1234567890123456789})
	if err != nil || d.GetTime() != "2020-03-02T19:54:56.824Z" || d.GetWorkerId() != 664 || d.GetSequence() != 277 {
		t.Fatalf("DecodeSnowflake(1234567890123456789) = %v, %v", d, err)
	}
	for _, id := range []int64{0, -5} {
		_, err := c.DecodeSnowflake(ctx(t), &leafdv1.DecodeSnowflakeRequest{Id: id})
		wantError(t, fmt.Sprintf("decode %d", id), err, codes.InvalidArgument, leafd.EInvalidID)
	}
}

// A mode that is switched off answers NOT_FOUND mode_disabled.
func TestModeDisabled(t *testing.T) {
	c := serve(t, rpc.Config{}).client
	_, err := c.NextSegment(ctx(t), &leafdv1.NextSegmentRequest{Tag: "order"})
	wantError(t, "NextSegment", err, codes.NotFound, leafd.EModeDisabled)
	_, err = c.SegmentRange(ctx(t), &leafdv1.SegmentRangeRequest{Tag: "order", Size: 1})
	wantError(t, "SegmentRange", err, codes.NotFound, leafd.EModeDisabled)
	_, err = c.NextSnowflake(ctx(t), &leafdv1.NextSnowflakeRequest{})
	wantError(t, "NextSnowflake", err, codes.NotFound, leafd.EModeDisabled)
	_, err = c.DecodeSnowflake(ctx(t), &leafdv1.DecodeSnowflakeRequest{Id: 1})
	wantError(t, "DecodeSnowflake", err, codes.NotFound, leafd.EModeDisabled)
}

// Every leafd code the allocators answer reaches the client with its gRPC
// code and the leafd code as ErrorInfo's reason; an internal error shows
// nothing of its cause.
func TestErrorMapping(t *testing.T) {
	for _, tt := range []struct {
		reason string
		code   codes.Code
	}{
		{leafd.EUnknownTag, codes.NotFound},
		{leafd.ESegmentUnavailable, codes.Unavailable},
		{leafd.EStoreUnavailable, codes.Unavailable},
		{leafd.ENotReady, codes.Unavailable},
		{leafd.ETagExhausted, codes.ResourceExhausted},
		{leafd.EPeriodExhausted, codes.ResourceExhausted},
		{leafd.ETagRewound, codes.FailedPrecondition},
		{leafd.EOpaqueKeyMismatch, codes.FailedPrecondition},
		{leafd.ERangeUnsupported, codes.FailedPrecondition},
		{leafd.EInvalidSize, codes.InvalidArgument},
		{leafd.ETokenRequired, codes.Unauthenticated},
		{leafd.ETokenRefused, codes.PermissionDenied},
	} {
		f := &fakeSegment{err: leafd.Errorf(tt.reason, "the %s message", tt.reason)}
		c := serve(t, rpc.Config{Segment: f}).client
		_, err := c.NextSegment(ctx(t), &leafdv1.NextSegmentRequest{Tag: "t"})
		if msg := wantError(t, tt.reason, err, tt.code, tt.reason); msg != "the "+tt.reason+" message" {
			t.Fatalf("%s: message %q", tt.reason, msg)
		}
	}
	for _, cause := range []error{
		errors.New("dial tcp 10.1.2.3:3306: secret-password rejected"),
		leafd.Wrap(leafd.EInternal, errors.New("secret-password"), "a secret-password message"),
		leafd.Errorf("no_such_code", "secret-password"),
	} {
		f := &fakeSegment{err: cause}
		c := serve(t, rpc.Config{Segment: f}).client
		_, err := c.SegmentRange(ctx(t), &leafdv1.SegmentRangeRequest{Tag: "t", Size: 1})
		if msg := wantError(t, cause.Error(), err, codes.Internal, leafd.EInternal); strings.Contains(msg, "secret") || !strings.Contains(msg, "server log") {
			t.Fatalf("internal error shows %q", msg)
		}
	}
	// A client's deadline is gRPC's own status, without ErrorInfo.
	f := &fakeSegment{block: make(chan struct{})}
	c := serve(t, rpc.Config{Segment: f}).client
	short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := c.NextSegment(short, &leafdv1.NextSegmentRequest{Tag: "t"})
	if status.Code(err) != codes.DeadlineExceeded || rpc.ErrorCode(err) != "" {
		t.Fatalf("deadline: %v (reason %q)", err, rpc.ErrorCode(err))
	}
}

// A panic in a handler is INTERNAL for that request; the server goes on.
func TestPanicRecovered(t *testing.T) {
	f := &fakeSegment{panic: true}
	s := serve(t, rpc.Config{Segment: f, Snowflake: newGenerator(t, 1)})
	_, err := s.client.NextSegment(ctx(t), &leafdv1.NextSegmentRequest{Tag: "t"})
	if status.Code(err) != codes.Internal || strings.Contains(err.Error(), "boom") {
		t.Fatalf("panic answered %v", err)
	}
	if _, err := s.client.NextSnowflake(ctx(t), &leafdv1.NextSnowflakeRequest{}); err != nil {
		t.Fatalf("after a panic: %v", err)
	}
	if n := counterValue(t, s.reg, "leafd_grpc_requests_total", map[string]string{"method": "leafd.v1.IDService/NextSegment", "code": "Internal"}); n != 1 {
		t.Fatalf("panics counted %v, want 1", n)
	}
}

// With segment.require_token and snowflake.require_token, the RPCs that
// issue IDs need "authorization: Bearer TOKEN" allowed for the tag, checked
// by the HTTP server's keeper of tokens and counted with its refusals;
// DecodeSnowflake needs none.
func TestTokens(t *testing.T) {
	testdb.Each(t, store.Drivers(), testTokens)
}

func testTokens(t *testing.T, driver, dsn string) {
	st := newStoreOn(t, driver, dsn, map[string]int64{"order": 100, "pay": 100})
	a := startAllocator(t, st, segment.Config{})
	g := newGenerator(t, 3)
	_, orderToken, err := st.CreateToken(context.Background(), []string{"order"}, "")
	if err != nil {
		t.Fatal(err)
	}
	_, sfToken, err := st.CreateToken(context.Background(), []string{"snow*"}, "")
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry() // the registry /metrics serves
	acc := access.New(access.Config{Store: st, Segment: true, Snowflake: true, Refresh: 20 * time.Millisecond,
		Registerer: reg, Logger: quiet})
	t.Cleanup(acc.Close)
	c := serve(t, rpc.Config{Segment: a, Snowflake: g, Access: acc, Registerer: reg}).client
	with := func(token string) context.Context {
		return metadata.AppendToOutgoingContext(ctx(t), "authorization", "Bearer "+token)
	}
	// The keeper reads the tokens every 20 ms.
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := c.NextSegment(with(orderToken), &leafdv1.NextSegmentRequest{Tag: "order"})
		if err == nil {
			break
		}
		if rpc.ErrorCode(err) != leafd.EStoreUnavailable || time.Now().After(deadline) {
			t.Fatalf("with a good token: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}

	_, err = c.NextSegment(ctx(t), &leafdv1.NextSegmentRequest{Tag: "order"})
	wantError(t, "no token", err, codes.Unauthenticated, leafd.ETokenRequired)
	_, err = c.SegmentRange(ctx(t), &leafdv1.SegmentRangeRequest{Tag: "order", Size: 5})
	wantError(t, "range, no token", err, codes.Unauthenticated, leafd.ETokenRequired)
	_, err = c.NextSegment(with("leafd_0123456789abcdef_nope"), &leafdv1.NextSegmentRequest{Tag: "order"})
	wantError(t, "unknown token", err, codes.PermissionDenied, leafd.ETokenRefused)
	_, err = c.NextSegment(with(orderToken), &leafdv1.NextSegmentRequest{Tag: "pay"})
	wantError(t, "token of another tag", err, codes.PermissionDenied, leafd.ETokenRefused)
	_, err = c.NextSegment(with(orderToken), &leafdv1.NextSegmentRequest{Tag: "a b"})
	wantError(t, "invalid tag", err, codes.InvalidArgument, leafd.EInvalidTag)
	_, err = c.NextSnowflake(with(orderToken), &leafdv1.NextSnowflakeRequest{})
	wantError(t, "segment token for snowflake", err, codes.PermissionDenied, leafd.ETokenRefused)
	_, err = c.NextSnowflake(ctx(t), &leafdv1.NextSnowflakeRequest{})
	wantError(t, "snowflake, no token", err, codes.Unauthenticated, leafd.ETokenRequired)

	// The scheme word in any case, and surrounding whitespace.
	lower := metadata.AppendToOutgoingContext(ctx(t), "authorization", "  bearer  "+orderToken+" ")
	if r, err := c.SegmentRange(lower, &leafdv1.SegmentRangeRequest{Tag: "order", Size: 5}); err != nil || r.GetEnd()-r.GetStart() != 5 {
		t.Fatalf("range with a good token: %v %v", r, err)
	}
	if _, err := c.NextSnowflake(with(sfToken), &leafdv1.NextSnowflakeRequest{Count: 3}); err != nil {
		t.Fatalf("snowflake with a good token: %v", err)
	}
	if _, err := c.DecodeSnowflake(ctx(t), &leafdv1.DecodeSnowflakeRequest{Id: 1}); err != nil {
		t.Fatalf("decode without a token: %v", err)
	}

	gatherer := prometheus.Gatherer(reg)
	refusals := func(mode, tag, reason string) float64 {
		return counterValue(t, gatherer, "leafd_token_refusals_total", map[string]string{"mode": mode, "tag": tag, "reason": reason})
	}
	// With metrics.per_tag basic (the default) the refusals carry no tag.
	if n := refusals("segment", "", "missing"); n != 2 {
		t.Errorf("segment refusals for a missing token: %v, want 2", n)
	}
	if n := refusals("segment", "", "refused"); n != 2 {
		t.Errorf("segment refusals of order and pay: %v, want 2", n)
	}
	if n := refusals("segment", "order", "refused") + refusals("segment", "pay", "refused"); n != 0 {
		t.Errorf("segment refusals with a tag label under per_tag basic: %v, want none", n)
	}
	if n := refusals("snowflake", "", "missing") + refusals("snowflake", "", "refused"); n != 2 {
		t.Errorf("snowflake refusals: %v, want 2", n)
	}
}

// The health service says SERVING while the readiness check passes,
// NOT_SERVING while it fails, and NOT_SERVING for good once the server
// stops.
func TestHealth(t *testing.T) {
	var notReady atomic.Pointer[error]
	ready := func() error {
		if p := notReady.Load(); p != nil {
			return *p
		}
		return nil
	}
	s := serve(t, rpc.Config{Ready: ready, ReadyInterval: 10 * time.Millisecond})
	hc := healthpb.NewHealthClient(s.conn)
	check := func(service string) healthpb.HealthCheckResponse_ServingStatus {
		t.Helper()
		res, err := hc.Check(ctx(t), &healthpb.HealthCheckRequest{Service: service})
		if err != nil {
			t.Fatalf("Check(%q): %v", service, err)
		}
		return res.GetStatus()
	}
	waitFor := func(want healthpb.HealthCheckResponse_ServingStatus) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for check("") != want || check(rpc.ServiceName) != want {
			if time.Now().After(deadline) {
				t.Fatalf("health is %s/%s, want %s", check(""), check(rpc.ServiceName), want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitFor(healthpb.HealthCheckResponse_SERVING)
	var err error = leafd.Errorf(leafd.ENotReady, "the tag list has not been read yet")
	notReady.Store(&err)
	waitFor(healthpb.HealthCheckResponse_NOT_SERVING)
	notReady.Store(nil)
	waitFor(healthpb.HealthCheckResponse_SERVING)

	// A client watching sees NOT_SERVING when the server stops, and then
	// the end of its stream, which does not hold the graceful stop up.
	watch, werr := hc.Watch(ctx(t), &healthpb.HealthCheckRequest{Service: rpc.ServiceName})
	if werr != nil {
		t.Fatal(werr)
	}
	if res, err := watch.Recv(); err != nil || res.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("watch: %v %v", res, err)
	}
	unknown, werr := hc.Watch(ctx(t), &healthpb.HealthCheckRequest{Service: "no.such.Service"})
	if werr != nil {
		t.Fatal(werr)
	}
	if res, err := unknown.Recv(); err != nil || res.GetStatus() != healthpb.HealthCheckResponse_SERVICE_UNKNOWN {
		t.Fatalf("watch of an unknown service: %v %v", res, err)
	}
	stopped := make(chan error, 1)
	go func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		stopped <- s.srv.Shutdown(sctx)
	}()
	if res, err := watch.Recv(); err != nil || res.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("watch during the stop: %v %v", res, err)
	}
	if res, err := watch.Recv(); err != io.EOF {
		t.Fatalf("watch after the stop: %v %v, want its end", res, err)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("Shutdown with a Watch open: %v", err)
	}
	if err := <-s.serveCh; err != nil {
		t.Fatalf("Serve after a stop: %v", err)
	}
}

// Reflection lists the services, so that grpcurl needs no .proto file.
func TestReflection(t *testing.T) {
	s := serve(t, rpc.Config{})
	stream, err := reflectionpb.NewServerReflectionClient(s.conn).ServerReflectionInfo(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	res, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, svc := range res.GetListServicesResponse().GetService() {
		names = append(names, svc.GetName())
	}
	got := strings.Join(names, " ")
	for _, want := range []string{"leafd.v1.IDService", "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection"} {
		if !strings.Contains(got, want) {
			t.Fatalf("services %q lack %s", got, want)
		}
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_FileContainingSymbol{
		FileContainingSymbol: "leafd.v1.IDService"}}); err != nil {
		t.Fatal(err)
	}
	if res, err := stream.Recv(); err != nil || len(res.GetFileDescriptorResponse().GetFileDescriptorProto()) == 0 {
		t.Fatalf("the descriptor of leafd.v1.IDService: %v %v", res, err)
	}
}

// GracefulStop lets the RPC in flight finish and refuses new ones.
func TestGracefulStop(t *testing.T) {
	f := &fakeSegment{block: make(chan struct{}), called: make(chan struct{}, 1)}
	s := serve(t, rpc.Config{Segment: f})
	inFlight := make(chan error, 1)
	go func() {
		_, err := s.client.NextSegment(ctx(t), &leafdv1.NextSegmentRequest{Tag: "t"})
		inFlight <- err
	}()
	<-f.called
	stopped := make(chan struct{})
	go func() {
		s.srv.GracefulStop()
		close(stopped)
	}()
	select {
	case <-stopped:
		t.Fatal("GracefulStop returned with an RPC in flight")
	case <-time.After(100 * time.Millisecond):
	}
	close(f.block)
	if err := <-inFlight; err != nil {
		t.Fatalf("the RPC in flight: %v", err)
	}
	<-stopped
	if err := <-s.serveCh; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if _, err := s.client.NextSegment(ctx(t), &leafdv1.NextSegmentRequest{Tag: "t"}, grpc.WaitForReady(false)); status.Code(err) != codes.Unavailable {
		t.Fatalf("after the stop: %v, want UNAVAILABLE", err)
	}
}

// Every request is counted by method and gRPC code, timed by method, and
// every error answer counted by leafd code.
func TestMetrics(t *testing.T) {
	st := newStore(t, map[string]int64{"order": 100})
	s := serve(t, rpc.Config{Segment: startAllocator(t, st, segment.Config{})})
	for range 3 {
		nextSegment(t, s.client, "order", 2)
	}
	_, err := s.client.NextSegment(ctx(t), &leafdv1.NextSegmentRequest{Tag: "nope"})
	wantError(t, "unknown", err, codes.NotFound, leafd.EUnknownTag)
	_, err = s.client.NextSnowflake(ctx(t), &leafdv1.NextSnowflakeRequest{})
	wantError(t, "disabled", err, codes.NotFound, leafd.EModeDisabled)
	if _, err := healthpb.NewHealthClient(s.conn).Check(ctx(t), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}

	const next = "leafd.v1.IDService/NextSegment"
	for _, tt := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"leafd_grpc_requests_total", map[string]string{"method": next, "code": "OK"}, 3},
		{"leafd_grpc_requests_total", map[string]string{"method": next, "code": "NotFound"}, 1},
		{"leafd_grpc_requests_total", map[string]string{"method": "leafd.v1.IDService/NextSnowflake", "code": "NotFound"}, 1},
		{"leafd_grpc_requests_total", map[string]string{"method": "grpc.health.v1.Health/Check", "code": "OK"}, 1},
		{"leafd_grpc_request_duration_seconds", map[string]string{"method": next}, 4},
		{"leafd_grpc_errors_total", map[string]string{"method": next, "code": leafd.EUnknownTag}, 1},
		{"leafd_grpc_errors_total", map[string]string{"method": "leafd.v1.IDService/NextSnowflake", "code": leafd.EModeDisabled}, 1},
	} {
		if got := counterValue(t, s.reg, tt.name, tt.labels); got != tt.want {
			t.Errorf("%s%v = %v, want %v", tt.name, tt.labels, got, tt.want)
		}
	}
	// A second server cannot register the same series on the registry.
	if _, err := rpc.New(rpc.Config{Registerer: s.reg, Logger: quiet}); err == nil {
		t.Fatal("a second server registered its metrics on the same registry")
	}
}

// Clients on many goroutines, batches and single IDs, over one connection
// and several: no ID twice.
func TestConcurrentNoDuplicates(t *testing.T) {
	testdb.Each(t, store.Drivers(), testConcurrentNoDuplicates)
}

func testConcurrentNoDuplicates(t *testing.T, driver, dsn string) {
	st := newStoreOn(t, driver, dsn, map[string]int64{"a": 7, "b": 50})
	a := startAllocator(t, st, segment.Config{MaxStep: 60, MaxBatch: 100})
	s := serve(t, rpc.Config{Segment: a})
	var mu sync.Mutex
	got := map[string][]int64{}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			tag := []string{"a", "b"}[w%2]
			var mine []int64
			for i := range 60 {
				mine = append(mine, nextSegment(t, s.client, tag, int32(1+(i*w)%17))...)
			}
			mu.Lock()
			got[tag] = append(got[tag], mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	for tag, ids := range got {
		t.Logf("tag %s: %d IDs", tag, len(ids))
		noDuplicates(t, ids)
	}
}

// Shutdown waits for the RPCs in flight until its context ends, then
// cancels them and returns the context's error.
func TestShutdownBounded(t *testing.T) {
	f := &fakeSegment{block: make(chan struct{}), called: make(chan struct{}, 1)}
	defer close(f.block)
	s := serve(t, rpc.Config{Segment: f})
	inFlight := make(chan error, 1)
	go func() {
		_, err := s.client.NextSegment(ctx(t), &leafdv1.NextSegmentRequest{Tag: "t"})
		inFlight <- err
	}()
	<-f.called
	start := time.Now() // before the deadline's clock starts, which Shutdown waits out
	sctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := s.srv.Shutdown(sctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown: %v, want the deadline", err)
	}
	if took := time.Since(start); took < 100*time.Millisecond || took > 5*time.Second {
		t.Fatalf("Shutdown took %v", took)
	}
	if err := <-inFlight; status.Code(err) != codes.Unavailable && status.Code(err) != codes.Canceled {
		t.Fatalf("the RPC cut off: %v, want UNAVAILABLE or CANCELED", err)
	}
	if err := <-s.serveCh; err != nil {
		t.Fatalf("Serve: %v", err)
	}
}
