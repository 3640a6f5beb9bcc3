package rpc_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/internal/testkit/testdb"
	leafdv1 "github.com/leafd/leafd/proto/leafd/v1"
	"github.com/leafd/leafd/rpc"
	"github.com/leafd/leafd/segment"
	"github.com/leafd/leafd/snowflake"
	"github.com/leafd/leafd/store"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// newStoreB is newStore for a benchmark: the tag bench, step 100,000.
func newStoreB(b *testing.B) store.Store {
	return newStore(b, map[string]int64{"bench": 100000})
}

// newStore opens a fresh, migrated SQLite store with the given tags
// (name:step pairs as a map).
func newStore(t testing.TB, tags map[string]int64) store.Store {
	t.Helper()
	return newStoreOn(t, store.DefaultDriver(), testdb.DSN(t, store.DefaultDriver()), tags)
}

// newStoreOn is newStore on the database dsn of engine driver.
func newStoreOn(t testing.TB, driver, dsn string, tags map[string]int64) store.Store {
	t.Helper()
	s, err := store.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	for name, step := range tags {
		if _, err := s.CreateTag(context.Background(), leafd.Tag{Name: name, Step: step, MaxID: 1}); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// startAllocator starts a real allocator over s, its tag list read.
func startAllocator(t testing.TB, s segment.Store, cfg segment.Config) *segment.Allocator {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quiet
	}
	if cfg.TagRefresh == 0 {
		cfg.TagRefresh = time.Hour
	}
	a, err := segment.New(s, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	a.Start()
	t.Cleanup(func() { a.Close() })
	return a
}

// newGenerator returns a snowflake generator with a fixed, unrecorded
// worker id.
func newGenerator(t testing.TB, workerID int64) *snowflake.Generator {
	t.Helper()
	g, err := snowflake.New(snowflake.Settings{WorkerID: workerID, MaxBatch: 1000, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

// served is a running rpc.Server and a client connection to it over an
// in-memory listener.
type served struct {
	srv     *rpc.Server
	conn    *grpc.ClientConn
	client  leafdv1.IDServiceClient
	reg     *prometheus.Registry
	serveCh chan error // Serve's result
}

// serve starts an rpc.Server of cfg (with a registry of its own unless
// cfg has one) on a bufconn listener and connects to it. The server is
// stopped when the test ends.
func serve(t testing.TB, cfg rpc.Config) *served {
	t.Helper()
	s := &served{serveCh: make(chan error, 1)}
	if cfg.Registerer == nil {
		s.reg = prometheus.NewRegistry()
		cfg.Registerer = s.reg
	}
	if cfg.Logger == nil {
		cfg.Logger = quiet
	}
	var err error
	if s.srv, err = rpc.New(cfg); err != nil {
		t.Fatal(err)
	}
	ln := bufconn.Listen(1 << 20)
	go func() { s.serveCh <- s.srv.Serve(ln) }()
	s.conn, err = grpc.NewClient("passthrough:///leafd",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return ln.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	s.client = leafdv1.NewIDServiceClient(s.conn)
	t.Cleanup(func() {
		s.conn.Close()
		s.srv.Stop()
	})
	return s
}

// ctx is a context bounded for one test step.
func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

// wantError checks that err is a status with code c whose ErrorInfo says
// reason in the leafd domain, and returns its message.
func wantError(t testing.TB, what string, err error, c codes.Code, reason string) string {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error, want %s %s", what, c, reason)
	}
	st, ok := status.FromError(err)
	if !ok {
		t.Fatalf("%s: %v is not a status", what, err)
	}
	var info *errdetails.ErrorInfo
	for _, d := range st.Details() {
		if i, ok := d.(*errdetails.ErrorInfo); ok {
			info = i
		}
	}
	if st.Code() != c || info == nil || info.GetReason() != reason || info.GetDomain() != "leafd" {
		t.Fatalf("%s: %s %q with ErrorInfo %v, want %s with reason %s in domain leafd", what, st.Code(), st.Message(), info, c, reason)
	}
	if got := rpc.ErrorCode(err); got != reason {
		t.Fatalf("%s: rpc.ErrorCode = %q, want %q", what, got, reason)
	}
	return st.Message()
}

// nextSegment asks for count IDs of tag and fails the test on an error.
func nextSegment(t testing.TB, c leafdv1.IDServiceClient, tag string, count int32) []int64 {
	t.Helper()
	res, err := c.NextSegment(ctx(t), &leafdv1.NextSegmentRequest{Tag: tag, Count: count})
	if err != nil {
		t.Fatalf("NextSegment(%s, %d): %v", tag, count, err)
	}
	return res.GetIds()
}

// counterValue returns the value of the counter (or a histogram's sample
// count) named name with exactly the labels given, 0 when it is absent.
func counterValue(t testing.TB, g prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if matches(m, labels) {
				if h := m.GetHistogram(); h != nil {
					return float64(h.GetSampleCount())
				}
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func matches(m *dto.Metric, labels map[string]string) bool {
	if len(m.GetLabel()) != len(labels) {
		return false
	}
	for _, l := range m.GetLabel() {
		if v, ok := labels[l.GetName()]; !ok || v != l.GetValue() {
			return false
		}
	}
	return true
}

// fakeSegment answers every call with err, or with ranges, or panics.
type fakeSegment struct {
	err    error
	ranges []segment.Range
	rng    segment.Range
	panic  bool
	block  chan struct{} // when set, calls wait for it to close
	called chan struct{} // when set, receives once per call
}

func (f *fakeSegment) wait(ctx context.Context) error {
	if f.called != nil {
		f.called <- struct{}{}
	}
	if f.panic {
		panic("fake segment: " + errors.New("boom").Error())
	}
	if f.block != nil {
		select {
		case <-f.block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return f.err
}

func (f *fakeSegment) Next(ctx context.Context, _ string) (int64, error) {
	if err := f.wait(ctx); err != nil {
		return 0, err
	}
	return 42, nil
}

func (f *fakeSegment) NextN(ctx context.Context, _ string, n int, dst []segment.Range) ([]segment.Range, error) {
	if err := f.wait(ctx); err != nil {
		return dst, err
	}
	return append(dst, f.ranges...), nil
}

func (f *fakeSegment) Range(ctx context.Context, _ string, _ int64) (segment.Range, error) {
	if err := f.wait(ctx); err != nil {
		return segment.Range{}, err
	}
	return f.rng, nil
}

func (f *fakeSegment) RangeLease(ctx context.Context, tag string, size int64) (segment.Range, time.Duration, error) {
	r, err := f.Range(ctx, tag, size)
	return r, 0, err
}

func (f *fakeSegment) MaxBatch() int { return 10000 }

// noDuplicates fails the test if ids holds an ID twice or one below 1.
func noDuplicates(t testing.TB, ids []int64) {
	t.Helper()
	sorted := slices.Clone(ids)
	slices.Sort(sorted)
	for i, id := range sorted {
		if id < 1 {
			t.Fatalf("ID %d below 1", id)
		}
		if i > 0 && id == sorted[i-1] {
			t.Fatalf("ID %d issued twice", id)
		}
	}
}
