// Package rpc serves leafd's gRPC API: the IDService of proto/leafd/v1
// (docs/grpc.md, docs/contract.md section 4 "gRPC"), the standard health
// service and server reflection, on a listener of its own (grpc.addr).
//
// Like the HTTP handlers, the service only translates: it checks the
// request, calls the allocators and answers. Errors carry a leafd code; the
// one table in errors.go turns a code into a gRPC status, with the code in
// a google.rpc.ErrorInfo detail.
package rpc

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"

	"github.com/leafd/leafd/access"
	leafdv1 "github.com/leafd/leafd/proto/leafd/v1"
	"github.com/leafd/leafd/segment"
	"github.com/leafd/leafd/snowflake"
)

// Segment is what the gRPC API needs of segment mode; *segment.Allocator
// implements it.
type Segment interface {
	Next(ctx context.Context, tag string) (int64, error)
	NextN(ctx context.Context, tag string, n int, dst []segment.Range) ([]segment.Range, error)
	Range(ctx context.Context, tag string, size int64) (segment.Range, error)
	// RangeLease is Range for a caller that honours a range's validity:
	// it leases dated tags' ranges too, valid for the duration it returns
	// (0 for a range that never expires).
	RangeLease(ctx context.Context, tag string, size int64) (segment.Range, time.Duration, error)
	MaxBatch() int
}

// Snowflake is what the gRPC API needs of snowflake mode;
// *snowflake.Generator and *snowflake.Pool implement it.
type Snowflake interface {
	Next(ctx context.Context) (snowflake.ID, error)
	NextN(ctx context.Context, n int, dst []snowflake.ID) ([]snowflake.ID, error)
	MaxBatch() int
	Layout() snowflake.Layout
}

// Access checks the access tokens of the ID requests (segment.require_token,
// snowflake.require_token), the same check as the HTTP routes';
// *access.Checker implements it.
type Access interface {
	// Required reports whether a mode's ID requests need a token
	// (snowflake mode, or segment mode when false). It is asked once, by
	// New.
	Required(snowflake bool) bool
	// Check returns nil when token allows tag (the snowflake mode's tag is
	// ignored), and token_required (token empty), token_refused or
	// store_unavailable otherwise.
	Check(token, tag string, snowflake bool) error
}

var (
	_ Access    = (*access.Checker)(nil)
	_ Segment   = (*segment.Allocator)(nil)
	_ Snowflake = (*snowflake.Generator)(nil)
	_ Snowflake = (*snowflake.Pool)(nil)
)

// ServiceName is the IDService's full name, under which the health service
// reports it as well as under "".
const ServiceName = "leafd.v1.IDService"

// DefaultReadyInterval is how often the health service's status is
// refreshed from Config.Ready.
const DefaultReadyInterval = time.Second

// Config wires a Server.
type Config struct {
	// Segment serves segment mode; nil means the mode is switched off and
	// its RPCs answer NOT_FOUND mode_disabled.
	Segment Segment
	// Snowflake serves snowflake mode; nil means the mode is switched off.
	Snowflake Snowflake
	// Access checks access tokens; nil requires none.
	Access Access
	// Ready is the readiness check of GET /readyz: nil when the server can
	// issue IDs. The health service reports SERVING while it returns nil,
	// NOT_SERVING otherwise. Nil means always ready.
	Ready func() error
	// ReadyInterval is how often Ready is asked; 0 means
	// DefaultReadyInterval.
	ReadyInterval time.Duration
	// Registerer receives the gRPC metrics (leafd_grpc_…); nil keeps them
	// unregistered.
	Registerer prometheus.Registerer
	// Logger receives failed requests (UNAVAILABLE, INTERNAL, …) and
	// panics. Default slog.Default().
	Logger *slog.Logger
	// Limits bound what clients can make the server hold.
	Limits Limits
	// ServerOptions are added to the gRPC server's own (tests use them).
	ServerOptions []grpc.ServerOption
}

// Server is leafd's gRPC server.
type Server struct {
	grpc    *grpc.Server
	health  *health.Server
	metrics *metrics
	log     *slog.Logger

	ready    func() error
	interval time.Duration
	limits   Limits

	watchMu sync.Mutex
	watches map[string]int // under watchMu: the open health Watch streams by connection (the peer's address)

	mu      sync.Mutex
	serving bool          // under mu: the readiness loop runs
	stopped bool          // under mu: Stop or GracefulStop was called
	healthy bool          // under mu: the last readiness check passed
	changed chan struct{} // under mu: closed and replaced when healthy or stopped changes
	quit    chan struct{} // closed by the first stop
	loop    sync.WaitGroup
}

// New returns a Server with the IDService, the health service and server
// reflection registered. Serve it, and stop it with GracefulStop, Shutdown
// or Stop.
//
// Errors: the metrics cannot be registered on cfg.Registerer (another
// Server registered them there already).
func New(cfg Config) (*Server, error) {
	s := &Server{log: cfg.Logger, ready: cfg.Ready, interval: cfg.ReadyInterval, limits: cfg.Limits,
		watches: make(map[string]int), quit: make(chan struct{}), changed: make(chan struct{})}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.interval <= 0 {
		s.interval = DefaultReadyInterval
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	s.metrics = m
	maxBatch := 1
	if cfg.Segment != nil {
		maxBatch = cfg.Segment.MaxBatch()
	}
	if cfg.Snowflake != nil {
		maxBatch = max(maxBatch, cfg.Snowflake.MaxBatch())
	}
	opts := append([]grpc.ServerOption{
		grpc.UnaryInterceptor(s.unary),
		grpc.StreamInterceptor(s.stream),
	}, cfg.Limits.serverOptions(MaxAnswerBytes(maxBatch))...)
	opts = append(opts, cfg.ServerOptions...)
	s.grpc = grpc.NewServer(opts...)
	svc := &service{seg: cfg.Segment, sf: cfg.Snowflake, access: cfg.Access, log: s.log, metrics: m}
	if cfg.Access != nil {
		svc.segToken, svc.sfToken = cfg.Access.Required(false), cfg.Access.Required(true)
	}
	leafdv1.RegisterIDServiceServer(s.grpc, svc)
	s.health = health.NewServer()
	healthpb.RegisterHealthServer(s.grpc, &healthService{Server: s.health, srv: s})
	reflection.Register(s.grpc)
	s.metrics.methods(s.grpc.GetServiceInfo())
	s.checkReady()
	return s, nil
}

// Serve answers RPCs on ln, at most Limits.MaxConnections connections at a
// time, until GracefulStop, Shutdown or Stop, and refreshes the health
// status meanwhile. It returns nil after a stop.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if !s.stopped && !s.serving {
		s.serving = true
		s.loop.Add(1)
		go s.readyLoop()
	}
	s.mu.Unlock()
	err := s.grpc.Serve(s.limits.listener(ln))
	if errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return err
}

// GracefulStop reports NOT_SERVING on the health service, stops accepting
// connections and waits for the RPCs in flight (and open streams, such as a
// health Watch) to end. Shutdown bounds the wait.
func (s *Server) GracefulStop() {
	s.beginStop()
	s.grpc.GracefulStop()
}

// Stop reports NOT_SERVING, closes every connection and cancels the RPCs
// in flight at once.
func (s *Server) Stop() {
	s.beginStop()
	s.grpc.Stop()
}

// Shutdown stops gracefully, as GracefulStop, until ctx ends; then it
// stops at once, as Stop, and returns ctx's error.
func (s *Server) Shutdown(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.GracefulStop()
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		s.Stop()
		<-done
		return ctx.Err()
	}
}

// beginStop ends the readiness loop and sets every service NOT_SERVING for
// good: the load balancers and the clients watching stop sending before
// the connections close.
func (s *Server) beginStop() {
	s.mu.Lock()
	if !s.stopped {
		s.stopped = true
		close(s.quit)
		s.changedLocked()
	}
	s.mu.Unlock()
	s.loop.Wait()
	s.health.Shutdown()
}

// changedLocked wakes every health Watch. Call it with mu held.
func (s *Server) changedLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// readyLoop refreshes the health status every interval until a stop.
func (s *Server) readyLoop() {
	defer s.loop.Done()
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		select {
		case <-s.quit:
			return
		case <-t.C:
			s.checkReady()
		}
	}
}

// checkReady sets the health status from the readiness check.
func (s *Server) checkReady() {
	ok := s.ready == nil || s.ready() == nil
	st := healthpb.HealthCheckResponse_SERVING
	if !ok {
		st = healthpb.HealthCheckResponse_NOT_SERVING
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return
	}
	s.health.SetServingStatus("", st)
	s.health.SetServingStatus(ServiceName, st)
	if ok != s.healthy {
		s.healthy = ok
		s.changedLocked()
	}
}

// healthService is the standard health service of package health, whose
// Watch streams end, once NOT_SERVING is sent, when the server stops:
// package health's would stay open, and keep a graceful stop waiting for
// as long as a client watches (as gRPC clients with health checking do).
type healthService struct {
	*health.Server
	srv *Server
}

// Watch sends the service's status at once and again each time it
// changes, and NOT_SERVING before it returns when the server stops. A
// service the server does not know is SERVICE_UNKNOWN. A connection may
// hold WatchesPerConnection streams at once: past them, RESOURCE_EXHAUSTED.
func (h *healthService) Watch(req *healthpb.HealthCheckRequest, stream healthpb.Health_WatchServer) error {
	release, err := h.srv.openWatch(stream.Context())
	if err != nil {
		return err
	}
	defer release()
	known := req.GetService() == "" || req.GetService() == ServiceName
	last := healthpb.HealthCheckResponse_ServingStatus(-1)
	for {
		h.srv.mu.Lock()
		st, changed, stopped := healthpb.HealthCheckResponse_NOT_SERVING, h.srv.changed, h.srv.stopped
		switch {
		case !known:
			st = healthpb.HealthCheckResponse_SERVICE_UNKNOWN
		case h.srv.healthy && !stopped:
			st = healthpb.HealthCheckResponse_SERVING
		}
		h.srv.mu.Unlock()
		if st != last {
			if err := stream.Send(&healthpb.HealthCheckResponse{Status: st}); err != nil {
				return err
			}
			last = st
		}
		if stopped {
			return nil
		}
		select {
		case <-changed:
		case <-stream.Context().Done():
			return status.FromContextError(stream.Context().Err()).Err()
		}
	}
}

// openWatch counts a Watch stream of ctx's connection, and returns the
// function that ends it; RESOURCE_EXHAUSTED when the connection holds
// WatchesPerConnection already. The count is by the peer's address, which
// names one connection of the listener.
func (s *Server) openWatch(ctx context.Context) (release func(), err error) {
	key := ""
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		key = p.Addr.String()
	}
	s.watchMu.Lock()
	defer s.watchMu.Unlock()
	if s.watches[key] >= WatchesPerConnection {
		return nil, status.Errorf(codes.ResourceExhausted,
			"this connection holds %d health Watch streams already, the most a connection may: end one, or watch from another connection",
			WatchesPerConnection)
	}
	s.watches[key]++
	return func() {
		s.watchMu.Lock()
		defer s.watchMu.Unlock()
		if s.watches[key]--; s.watches[key] == 0 {
			delete(s.watches, key)
		}
	}, nil
}
