// Package http serves leafd's HTTP API (docs/contract.md section 4) with gin. Import it
// as leafhttp.
//
// Handlers only translate: they parse and validate the request, call the
// allocators and write the answer. Errors carry a code (package leafd); the
// one map in error.go turns a code into a status.
package http

import (
	"context"
	"crypto/sha256"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/access"
	"github.com/leafd/leafd/health"
	"github.com/leafd/leafd/metrics"
	"github.com/leafd/leafd/segment"
	"github.com/leafd/leafd/snowflake"
)

// Segment is what the HTTP layer needs of segment mode; *segment.Allocator
// implements it.
type Segment interface {
	Next(ctx context.Context, tag string) (int64, error)
	NextN(ctx context.Context, tag string, n int, dst []segment.Range) ([]segment.Range, error)
	MaxBatch() int
	// Range leases size consecutive IDs of tag; MaxRange is the largest
	// size it takes.
	Range(ctx context.Context, tag string, size int64) (segment.Range, error)
	// RangeLease is Range for a caller that honours a range's validity
	// (expiring=true): it leases dated tags' ranges too, valid for the
	// duration it returns (0 for a range that never expires).
	RangeLease(ctx context.Context, tag string, size int64) (segment.Range, time.Duration, error)
	MaxRange() int64
	// Ready returns nil while the mode can issue IDs, and a not_ready error
	// saying why otherwise (/readyz).
	Ready() error
	// Upsert serves a tag created or changed through this server at once.
	Upsert(t leafd.Tag)
	// State and RefillWindow are what /api/state and /metrics show.
	State() []segment.TagState
	RefillWindow() (lo, hi time.Duration)
}

// Snowflake is what the HTTP layer needs of snowflake mode;
// *snowflake.Generator and *snowflake.Pool implement it.
type Snowflake interface {
	Next(ctx context.Context) (snowflake.ID, error)
	NextN(ctx context.Context, n int, dst []snowflake.ID) ([]snowflake.ID, error)
	MaxBatch() int
	Layout() snowflake.Layout
	// Ready is Segment.Ready's twin.
	Ready() error
	// State is what /api/state and /metrics show.
	State() snowflake.State
}

var (
	_ Segment   = (*segment.Allocator)(nil)
	_ Snowflake = (*snowflake.Generator)(nil)
	_ Snowflake = (*snowflake.Pool)(nil)
)

// Config wires a Server.
type Config struct {
	// Segment serves segment mode; nil means the mode is switched off and its
	// routes answer mode_disabled.
	Segment Segment
	// Snowflake serves snowflake mode; nil means the mode is switched off.
	Snowflake Snowflake
	// Store is the database whose health the dashboard, /api/state and
	// /metrics show; nil leaves it out.
	Store health.Pinger
	// Metrics is the registry /metrics serves, New registering the
	// server's state on it. Nil: New makes one.
	Metrics *metrics.Registry
	// Tags serves the admin routes /api/tags; nil answers them
	// admin_disabled.
	Tags Tags
	// AdminToken is the bearer token the admin routes require; empty
	// switches them off (403 admin_disabled).
	AdminToken string
	// ProtectDashboard requires the admin token for the dashboard and
	// /api/state too.
	ProtectDashboard bool
	// MaxStep bounds the table step set through the admin routes
	// (segment.max_step). Default 1,000,000.
	MaxStep int64
	// Tokens serves /api/tokens; nil answers those routes admin_disabled.
	Tokens Tokens
	// Access checks the ID routes' access tokens, and learns of the tokens
	// created and revoked through /api/tokens; nil requires none.
	Access *access.Checker
	// OpaqueKey is segment.opaque_key: with it, POST /api/tags creates
	// opaque tags and GET /api/tags/{tag}/decode/{id} maps their IDs back.
	OpaqueKey []byte
	// MaxConnections caps the connections served at once
	// (http.max_connections); past it, new connections wait to be accepted.
	// 0 means DefaultMaxConnections.
	MaxConnections int
	// TrustedProxies are the addresses and CIDR ranges of the proxies
	// whose X-Forwarded-For and X-Real-IP name the client
	// (http.trusted_proxies). Empty trusts none: the client is the socket's
	// peer. New logs and ignores the list if gin refuses it (config
	// validates it first).
	TrustedProxies []string
	// ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout and
	// MaxHeaderBytes replace the server's limits (see limits.go) when not
	// 0; tests shorten them.
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	WriteTimeout      time.Duration
	IdleTimeout       time.Duration
	MaxHeaderBytes    int
	// Logger receives failed requests (5xx) and admin changes. Default
	// slog.Default().
	Logger *slog.Logger
}

// Server is leafd's HTTP server.
type Server struct {
	seg  Segment
	sf   Snowflake
	tags Tags
	// adminToken is the SHA-256 of the admin token, nil when there is none.
	adminToken []byte
	maxStep    int64
	opaqueKey  []byte
	log        *slog.Logger
	health     *health.Store // the store's ping, cached; nil without a store
	ready      func() error
	metrics    *metrics.Registry
	engine     *gin.Engine
	http       *http.Server
	maxConns   int
	tokenStore Tokens
	access     *access.Checker
}

// New returns a Server with every route registered.
func New(cfg Config) *Server {
	gin.SetMode(gin.ReleaseMode)
	s := &Server{seg: cfg.Segment, sf: cfg.Snowflake, log: cfg.Logger}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.tags, s.maxStep, s.opaqueKey = cfg.Tags, cfg.MaxStep, cfg.OpaqueKey
	if s.maxStep == 0 {
		s.maxStep = defaultMaxStep
	}
	// Trimmed as the presented token is: a secret mounted with a trailing
	// newline must not lock the admin routes out.
	if token := strings.TrimSpace(cfg.AdminToken); token != "" && cfg.Tags != nil {
		sum := sha256.Sum256([]byte(token))
		s.adminToken = sum[:]
	}
	e := gin.New()
	e.HandleMethodNotAllowed = true
	e.RedirectTrailingSlash = false
	e.RedirectFixedPath = false
	// gin trusts every proxy unless told otherwise: then any client could
	// name itself in X-Forwarded-For, and the admin log would believe it.
	if err := e.SetTrustedProxies(cfg.TrustedProxies); err != nil {
		s.log.Error("http: trusted proxies refused; trusting none", "err", err)
		_ = e.SetTrustedProxies(nil)
	}
	s.health, s.metrics = health.NewStore(cfg.Store), cfg.Metrics
	s.ready = health.Ready(cfg.Segment, cfg.Snowflake)
	if s.metrics == nil {
		s.metrics = metrics.New()
	}
	s.metrics.Watch(cfg.Segment, cfg.Snowflake, s.health)
	s.tokenStore, s.access = cfg.Tokens, cfg.Access
	e.Use(s.around)
	e.NoRoute(func(c *gin.Context) {
		s.writeError(c, leafd.Errorf(leafd.ENotFound, "no route %s %s; see the API in the README", c.Request.Method, c.Request.URL.Path))
	})
	e.NoMethod(func(c *gin.Context) {
		s.writeError(c, leafd.Errorf(leafd.EMethodNotAllowed, "method %s is not allowed on %s", c.Request.Method, c.Request.URL.Path))
	})

	// Every GET route takes HEAD too: the same handler, whose body
	// net/http leaves out. (A HEAD of an ID route takes an ID, as a GET
	// would.)
	get := func(g gin.IRoutes, path string, h ...gin.HandlerFunc) {
		g.GET(path, h...)
		g.HEAD(path, h...)
	}
	// The routes that are not ID routes refuse a query that would be read
	// in part (onceQuery); the ID routes read theirs themselves.
	once := s.checkQuery(&onceQuery)
	get(e, "/healthz", once, s.healthz)
	get(e, "/readyz", once, s.readyz)
	get(e, "/segment/:tag", s.guard(false, false, s.getSegment)...)
	get(e, "/segment/:tag/range", s.guard(false, false, s.getSegmentRange)...)
	get(e, "/api/segment/get/:tag", s.guard(false, true, s.getLeafSegment)...)
	get(e, "/snowflake", s.guard(true, false, s.getSnowflake)...)
	get(e, "/snowflake/:id", once, s.decodeSnowflake)
	get(e, "/snowflake/at/:time", once, s.composeSnowflake)
	get(e, "/api/snowflake/get/:key", s.guard(true, true, s.getLeafSnowflake)...)
	get(e, "/decodeSnowflakeId", s.checkQuery(&decodeLeafQuery), s.decodeLeafSnowflake)
	// The dashboard, the state it shows and the metrics (which name every
	// tag), in groups built here so that one middleware in front guards
	// them all (admin.protect_dashboard).
	dash := e.Group("", gzipBody)
	scraped := e.Group("")
	if cfg.ProtectDashboard {
		dash.Use(s.requireDashboard)
		scraped.Use(s.requireDashboard)
	}
	dash.Use(once) // after the token, as on the admin routes
	scraped.Use(once)
	get(dash, "/", s.redirectDashboard)
	get(dash, "/dashboard", s.getDashboard)
	get(dash, "/api/state", s.getState)
	get(scraped, "/metrics", gin.WrapH(s.metrics))
	admin := e.Group("/api/tags", s.requireAdmin, once)
	get(admin, "", s.listTags)
	admin.POST("", s.createTag)
	admin.PATCH("/:tag", s.updateTag)
	admin.POST("/:tag/repair", s.repairTag)
	tokens := e.Group("/api/tokens", s.requireAdmin, once)
	get(tokens, "", s.listTokens)
	tokens.POST("", s.createToken)
	tokens.DELETE("/:id", s.revokeToken)
	get(admin, "/:tag/decode/:id", s.decodeOpaque)
	s.engine = e
	s.maxConns = cfg.MaxConnections
	if s.maxConns <= 0 {
		s.maxConns = DefaultMaxConnections
	}
	s.http = &http.Server{
		Handler:           e,
		ReadHeaderTimeout: orDefault(cfg.ReadHeaderTimeout, DefaultReadHeaderTimeout),
		ReadTimeout:       orDefault(cfg.ReadTimeout, DefaultReadTimeout),
		WriteTimeout:      orDefault(cfg.WriteTimeout, DefaultWriteTimeout),
		IdleTimeout:       orDefault(cfg.IdleTimeout, DefaultIdleTimeout),
		MaxHeaderBytes:    orDefault(cfg.MaxHeaderBytes, defaultMaxHeaderBytes),
	}
	return s
}

// Handler returns the routes as an http.Handler, for tests and embedding.
func (s *Server) Handler() http.Handler { return s.engine }

func orDefault[T time.Duration | int](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}

// Route is one registered route: its method and its path template, written
// as OpenAPI writes it ("/segment/{tag}", not gin's "/segment/:tag").
type Route struct {
	Method string
	Path   string
}

// Routes returns every route the server registered, so that a test can hold
// the API description (api/openapi.yaml) against what is really served.
// HEAD is left out: every GET route takes it (docs/contract.md section 4).
func (s *Server) Routes() []Route {
	var out []Route
	for _, r := range s.engine.Routes() {
		if r.Method == http.MethodHead {
			continue
		}
		parts := strings.Split(r.Path, "/")
		for i, p := range parts {
			if len(p) > 1 && (p[0] == ':' || p[0] == '*') {
				parts[i] = "{" + p[1:] + "}"
			}
		}
		out = append(out, Route{Method: r.Method, Path: strings.Join(parts, "/")})
	}
	return out
}

// Serve answers requests on ln until Shutdown, at most MaxConnections at a
// time, net/http's own error answers in the JSON error shape (see
// connListener). It returns nil after a Shutdown. Call it once.
func (s *Server) Serve(ln net.Listener) error {
	ll := newConnListener(ln, s.maxConns, s.http.MaxHeaderBytes)
	s.http.ConnState = ll.connState
	if err := s.http.Serve(ll); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Shutdown stops accepting connections and waits for in-flight requests
// until ctx ends.
func (s *Server) Shutdown(ctx context.Context) error {
	return s.http.Shutdown(ctx)
}

// around is the one middleware of every route. Before the handler it sets
// the headers every answer carries (headers.go), so that errors written by
// any layer carry them too; it turns a panic in the handler into a 500
// internal error, so that no panic reaches a client as a dropped
// connection; after it, it counts the request in the metrics by route
// template (c.FullPath), method and status, with its error code if it
// failed. One clock reading serves the request's duration and its Date
// header.
func (s *Server) around(c *gin.Context) {
	start := time.Now()
	setAnswerHeaders(c.Writer.Header(), start)
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			s.writeError(c, leafd.Wrap(leafd.EInternal, panicError{p}, "internal error; see the server log"))
		}
		route := c.FullPath()
		if route == "" {
			route = "unmatched"
		}
		var err error
		if len(c.Errors) > 0 {
			err = c.Errors.Last().Err
		}
		s.metrics.ObserveRequest(route, c.Request.Method, c.Writer.Status(), time.Since(start), err)
	}()
	c.Next()
}

type panicError struct{ v any }

func (p panicError) Error() string { return "panic: " + slog.AnyValue(p.v).String() }

func (s *Server) healthz(c *gin.Context) {
	c.JSON(http.StatusOK, gin.H{"status": "ok"})
}

// readyz answers 200 when every enabled mode can issue IDs, and the
// not_ready error of the first that cannot otherwise.
func (s *Server) readyz(c *gin.Context) {
	if err := s.ready(); err != nil {
		s.writeError(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"status": "ready"})
}
