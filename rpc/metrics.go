package rpc

import (
	"context"
	"fmt"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// metrics are the gRPC API's series: requests by method and gRPC code, the
// latency by method, and error answers by leafd code. Counting a request
// takes no lock and allocates nothing: each method's series are found in a
// map built once, when every service is registered, and cached there on
// their first use (a method never called exports nothing).
type metrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	errors   *prometheus.CounterVec
	byMethod map[string]*methodSeries // by full method ("/leafd.v1.IDService/NextSegment"); read-only once built
}

// methodSeries are the series of one unary method.
type methodSeries struct {
	name    string // the label: the full method without its leading slash
	took    atomic.Pointer[observer]
	codes   [numCodes]atomic.Pointer[counter]
	vec     *prometheus.CounterVec
	latency *prometheus.HistogramVec
}

// numCodes is the number of gRPC codes, OK (0) to Unauthenticated (16).
const numCodes = 17

type (
	counter  struct{ prometheus.Counter }
	observer struct{ prometheus.Observer }
)

// requestBuckets span an ID served from memory to a request that waited
// out segment.wait_timeout for a range, as the HTTP histogram's.
var requestBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leafd_grpc_requests_total",
			Help: "Unary gRPC requests answered, by method (leafd.v1.IDService/NextSegment, …) and gRPC status code (OK, NotFound, …).",
		}, []string{"method", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "leafd_grpc_request_duration_seconds",
			Help:    "Time from a unary gRPC request's arrival in the handler to its answer, by method.",
			Buckets: requestBuckets,
		}, []string{"method"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leafd_grpc_errors_total",
			Help: "gRPC error answers of the IDService, by leafd error code (the ErrorInfo reason: unknown_tag, segment_unavailable, …) and method.",
		}, []string{"code", "method"}),
		byMethod: map[string]*methodSeries{},
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.requests, m.latency, m.errors} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("rpc: registering the gRPC metrics: %w", err)
			}
		}
	}
	return m, nil
}

// methods makes the series of every unary method of services. Call it once,
// before the server serves.
func (m *metrics) methods(services map[string]grpc.ServiceInfo) {
	for svc, info := range services {
		for _, mi := range info.Methods {
			if mi.IsClientStream || mi.IsServerStream {
				continue
			}
			full := "/" + svc + "/" + mi.Name
			m.byMethod[full] = m.series(full)
		}
	}
}

func (m *metrics) series(full string) *methodSeries {
	name := strings.TrimPrefix(full, "/")
	return &methodSeries{name: name, vec: m.requests, latency: m.latency}
}

// count records one answer of the method.
func (ms *methodSeries) count(c codes.Code, took time.Duration) {
	o := ms.took.Load()
	if o == nil {
		o = &observer{ms.latency.WithLabelValues(ms.name)}
		ms.took.Store(o) // a racing twin stores the same series
	}
	o.Observe(took.Seconds())
	if c >= numCodes {
		ms.vec.WithLabelValues(ms.name, c.String()).Inc()
		return
	}
	p := ms.codes[c].Load()
	if p == nil {
		p = &counter{ms.vec.WithLabelValues(ms.name, c.String())}
		ms.codes[c].Store(p) // a racing twin stores the same counter
	}
	p.Inc()
}

// unary counts every unary request and turns a panic into INTERNAL, so
// that no panic ever reaches a client as a broken connection.
func (s *Server) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
	start := time.Now()
	defer func() {
		if p := recover(); p != nil {
			resp, err = nil, s.panicked(info.FullMethod, p)
		}
		ms := s.metrics.byMethod[info.FullMethod]
		if ms == nil { // not registered when New ran: never on leafd's own services
			ms = s.metrics.series(info.FullMethod)
		}
		ms.count(status.Code(err), time.Since(start))
	}()
	return handler(ctx, req)
}

// stream turns a panic in a streaming handler (health Watch, reflection)
// into INTERNAL.
func (s *Server) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = s.panicked(info.FullMethod, p)
		}
	}()
	return handler(srv, ss)
}

// panicked logs a recovered panic with its stack and returns the INTERNAL
// status the client gets.
func (s *Server) panicked(method string, p any) error {
	s.log.Error("grpc: panic in a handler", "method", method, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
	return status.Error(codes.Internal, internalMessage)
}
