package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/access"
	"github.com/leafd/leafd/health"
	leafhttp "github.com/leafd/leafd/http"
	"github.com/leafd/leafd/internal/config"
	leafmetrics "github.com/leafd/leafd/metrics"
	"github.com/leafd/leafd/rpc"
	"github.com/leafd/leafd/segment"
	"github.com/leafd/leafd/snowflake"
	"github.com/leafd/leafd/store"
	"github.com/leafd/leafd/store/sharded"
)

// setup loads the configuration and builds the logger. Every error it
// returns is a usage error: the configuration is the caller's.
func setup(path string, stderr io.Writer) (*config.Config, *slog.Logger, error) {
	cfg, err := config.Load(path, checkDSNs)
	if err != nil {
		return nil, nil, usageError{err}
	}
	return cfg, newLogger(cfg.Log, stderr), nil
}

// checkDSNs is the store's judgement of the DSNs, made while the
// configuration loads so that a DSN that does not parse, or a SQLite DSN
// with a parameter that makes sharing the file unsafe, is reported with
// every other problem and with where it came from. (Opening the store
// checks them again: it is also the check of a configuration built
// without Load.)
func checkDSNs(c *config.Config) []*config.KeyError {
	if !slices.Contains(store.Drivers(), c.Store.Driver) {
		return nil
	}
	var ps []*config.KeyError
	check := func(key, dsn string) {
		if err := store.CheckDSN(c.Store.Driver, dsn); err != nil {
			ps = append(ps, &config.KeyError{Key: key, Message: err.Error()})
		}
	}
	if len(c.Store.Shards) == 0 { // with them, store.dsn is not used
		check("store.dsn", c.Store.DSN)
	}
	for i, dsn := range c.Store.FallbackDSNs {
		check(fmt.Sprintf("store.fallback_dsns[%d]", i), dsn)
	}
	for i, dsn := range c.Store.Shards {
		check(fmt.Sprintf("store.shards[%d]", i), dsn)
	}
	return ps
}

func newLogger(c config.Log, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(c.Level)) // validated by config
	opts := &slog.HandlerOptions{Level: level}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// openStore opens the configured database without connecting to it: a DSN
// that does not parse is an error, an unreachable database is not.
func openStore(cfg *config.Config, log *slog.Logger) (store.Store, error) {
	c := cfg.Store
	if len(c.Shards) > 0 {
		// Half of segment.wait_timeout: a load that gives up on a database
		// that hangs still lands, from another, before a request waiting
		// for it gives up.
		s, err := sharded.Open(c.Driver, c.Shards, sharded.Options{Slots: c.ShardSlots, Logger: log,
			AttemptTimeout: cfg.Segment.WaitTimeout / 2})
		if err != nil {
			return nil, usageError{err}
		}
		return s, nil
	}
	// Load has checked every DSN (checkDSNs).
	s, err := store.Open(c.Driver, c.DSN, store.WithFallbacks(c.FallbackDSNs...), store.WithLogger(log))
	if err != nil {
		return nil, usageError{fmt.Errorf("store.dsn: %w", err)}
	}
	return s, nil
}

func serve(ctx context.Context, configPath string, stderr io.Writer) error {
	cfg, log, err := setup(configPath, stderr)
	if err != nil {
		return err
	}
	for _, w := range cfg.Warnings() { // what the server would do is allowed, but likely not meant
		log.Warn(w)
	}
	if err := checkFileLimit(cfg); err != nil {
		return err
	}
	defer paceGC()()
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	db, err := openStore(cfg, log)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := verifyShards(ctx, db); err != nil {
		log.Error("the databases do not match the configuration; not starting", "err", err)
		return err
	}

	metrics, err := leafmetrics.NewWith(leafmetrics.Options{PerTag: leafmetrics.PerTag(cfg.Metrics.PerTag)})
	if err != nil {
		return usageError{err}
	}
	// The modes as the servers take them: nil interfaces when off.
	var (
		alloc      *segment.Allocator
		segHandler leafhttp.Segment
		gen        *snowflake.Pool
		sfHandler  leafhttp.Snowflake
		genDone    <-chan struct{}
	)
	if cfg.Segment.Enabled {
		alloc, err = segment.New(db, segment.Config{
			RefillMin:   cfg.Segment.RefillMin,
			RefillMax:   cfg.Segment.RefillMax,
			MaxStep:     cfg.Segment.MaxStep,
			PreloadAt:   cfg.Segment.PreloadAt,
			TagRefresh:  cfg.Segment.TagRefresh,
			WaitTimeout: cfg.Segment.WaitTimeout,
			MaxBatch:    cfg.Segment.MaxBatch,
			MaxRange:    cfg.Segment.MaxRange,
			Logger:      log,
			OnLoad:      metrics.ObserveLoad,
			OpaqueKey:   opaqueKey(cfg),
			// A dated tag's numbers carry the date of the server's clock.
			ClockTolerance: cfg.Segment.ClockTolerance,
		})
		if err != nil {
			return usageError{err}
		}
		defer alloc.Close()
		segHandler = alloc
	}
	if cfg.Snowflake.Enabled {
		if gen, err = newGenerator(cfg.Snowflake, cfg.Segment.MaxBatch, db, log); err != nil {
			return usageError{err}
		}
		defer gen.Close() // after the HTTP server drained: releases the lease
		sfHandler, genDone = gen, gen.Done()
	}

	// Bind synchronously so that a taken port fails start-up at once.
	ln, err := net.Listen("tcp", cfg.HTTP.Addr)
	if err != nil {
		return fmt.Errorf("http.addr: %w", err)
	}
	// The gRPC API, when grpc.addr is set, on a listener of its own,
	// bound here for the same reason.
	var grpcLn net.Listener
	if cfg.GRPC.Addr != "" {
		if grpcLn, err = net.Listen("tcp", cfg.GRPC.Addr); err != nil {
			ln.Close()
			return fmt.Errorf("grpc.addr: %w", err)
		}
	}
	acc := access.New(access.Config{Store: db, Segment: cfg.Segment.RequireToken, Snowflake: cfg.Snowflake.RequireToken,
		Registerer: metrics.Registerer(), TagLabels: metrics.PerTag() == leafmetrics.PerTagFull, Logger: log})
	defer acc.Close() // after both servers drained
	srv := leafhttp.New(leafhttp.Config{
		Segment: segHandler, Snowflake: sfHandler, Tags: db, MaxStep: cfg.Segment.MaxStep, OpaqueKey: opaqueKey(cfg),
		Store: db, Metrics: metrics,
		AdminToken: cfg.Admin.Token, ProtectDashboard: cfg.Admin.ProtectDashboard, Logger: log,
		Tokens: db, Access: acc,
		MaxConnections: cfg.HTTP.MaxConnections, TrustedProxies: cfg.HTTP.TrustedProxies,
		ReadHeaderTimeout: cfg.HTTP.ReadHeaderTimeout, ReadTimeout: cfg.HTTP.ReadTimeout,
		WriteTimeout: cfg.HTTP.WriteTimeout, IdleTimeout: cfg.HTTP.IdleTimeout,
	})
	grpcSrv, err := newGRPCServer(grpcLn, cfg.GRPC, acc, metrics, segHandler, sfHandler, log)
	if err != nil {
		ln.Close()
		return err
	}
	if grpcSrv != nil {
		defer grpcSrv.Stop() // at once, on the ways out that did not stop it gracefully
	}

	bootCtx, cancelBoot := context.WithCancel(ctx)
	bootDone := make(chan struct{})
	bootFailed := make(chan error, 1)
	go func() {
		defer close(bootDone)
		if err := bootstrap(bootCtx, cfg, db, alloc, gen, log); err != nil {
			bootFailed <- err
		}
	}()

	// Said before "leafd serving", which tells tests and scripts that both
	// listeners are bound.
	grpcServed := make(chan error, 1)
	if grpcSrv != nil {
		log.Info("leafd gRPC serving", "addr", grpcLn.Addr().String())
		go func() { grpcServed <- grpcSrv.Serve(grpcLn) }()
	}
	log.Info("leafd serving", "addr", ln.Addr().String(), "store", db.Driver(),
		"segment", cfg.Segment.Enabled, "snowflake", cfg.Snowflake.Enabled)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	var refused error
	select {
	case err := <-served:
		cancelBoot()
		<-bootDone
		return err
	case <-ctx.Done():
	case err := <-bootFailed:
		// The databases do not match the deployment's records, or a seed
		// tag was another tag before: serving could hand out IDs twice.
		// Exit 1.
		refused = err
	case <-genDone:
		// The fixed worker id is another live server's (or recorded far
		// ahead of this clock): this server must not run with it. Exit 1.
		refused = gen.Err()
	case err := <-grpcServed:
		// The gRPC listener failed: stop the HTTP server too, and exit 1.
		refused = fmt.Errorf("grpc.addr: %w", err)
		grpcServed <- nil
	}
	log.Info("leafd shutting down", "timeout", cfg.HTTP.ShutdownTimeout)
	cancelBoot()
	shutCtx, cancel := context.WithTimeout(context.Background(), cfg.HTTP.ShutdownTimeout)
	defer cancel()
	grpcStopped := make(chan error, 1)
	if grpcSrv != nil {
		// Together with the HTTP server, within the same timeout, then at once.
		go func() { grpcStopped <- grpcSrv.Shutdown(shutCtx) }()
	}
	err = srv.Shutdown(shutCtx)
	if grpcSrv != nil {
		// Both are waited for; the first error is kept.
		if grpcErr := cmp.Or(<-grpcStopped, <-grpcServed); grpcErr != nil && err == nil {
			err = fmt.Errorf("gRPC: %w", grpcErr)
		}
	}
	<-bootDone
	err = cmp.Or(err, <-served)
	if refused != nil {
		return refused
	}
	if err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	// The server has drained: nothing issues any more. Release the lease
	// (with its watermark) before saying so.
	if gen != nil {
		gen.Close()
	}
	log.Info("leafd stopped")
	return nil
}

// newGRPCServer builds the gRPC API's server for ln (nil: none, grpc.addr
// is empty), served by the same modes as the HTTP server (nil: off), with
// the same token check, readiness and metrics registry.
func newGRPCServer(ln net.Listener, cfg config.GRPC, acc *access.Checker, metrics *leafmetrics.Registry,
	seg leafhttp.Segment, sf leafhttp.Snowflake, log *slog.Logger) (*rpc.Server, error) {
	if ln == nil {
		return nil, nil
	}
	return rpc.New(rpc.Config{Segment: seg, Snowflake: sf, Access: acc, Ready: health.Ready(seg, sf),
		Registerer: metrics.Registerer(), Logger: log,
		Limits: rpc.Limits{MaxConnections: cfg.MaxConnections, MaxConcurrentStreams: cfg.MaxConcurrentStreams,
			IdleTimeout: cfg.IdleTimeout, KeepaliveTime: cfg.KeepaliveTime, KeepaliveTimeout: cfg.KeepaliveTimeout}})
}

// fileReserve is the open files kept apart from the listeners' connection
// caps: the listeners themselves, the database connections (16 a
// database at most), the SQLite files and the log.
const fileReserve = 128

// checkFileLimit refuses to serve both APIs when their connection caps and
// fileReserve do not fit under the open-file limit: at the cap, one
// listener's clients would take the descriptors the other needs to accept
// (idle gRPC connections kept /healthz from answering). The limit is the
// hard one, to which the Go runtime raises the soft one.
func checkFileLimit(cfg *config.Config) error {
	limit, ok := openFileLimit()
	if cfg.GRPC.Addr == "" || !ok {
		return nil
	}
	need := uint64(cfg.HTTP.MaxConnections) + uint64(cfg.GRPC.MaxConnections) + fileReserve
	if need <= limit {
		return nil
	}
	return usageError{fmt.Errorf("http.max_connections, grpc.max_connections: %d and %d connections and %d other files "+
		"do not fit under the open-file limit (RLIMIT_NOFILE) of %d: lower them so that they add up to at most %d, "+
		"or raise the limit (ulimit -n, LimitNOFILE= in systemd, --ulimit nofile= in Docker)",
		cfg.HTTP.MaxConnections, cfg.GRPC.MaxConnections, fileReserve, limit, int64(limit)-fileReserve)}
}

// bootstrap prepares the database once it answers, retrying with backoff
// so that a server can start before its database: the migrations (when
// store.migrate is on), then the snowflake generator leases its worker id,
// then the seed tags, then the allocator reads the tag list. A seed tag
// that keeps failing does not keep snowflake mode from serving. It returns
// an error, after which the server must stop, when the databases do not
// match the deployment's records (sharded.ErrMismatch), whatever
// store.migrate is: retrying would not change them.
func bootstrap(ctx context.Context, cfg *config.Config, db store.Store, alloc *segment.Allocator, gen *snowflake.Pool, log *slog.Logger) error {
	schema := func() error { return db.Migrate(ctx) }
	if !cfg.Store.Migrate {
		schema = func() error { return migrated(ctx, db) }
	}
	prepare := func() error {
		if err := schema(); err != nil {
			return err
		}
		// Checked again once the database answers: the check at start-up
		// passes over one that does not answer in time, and a shard served
		// alone would hand out its slots' IDs again.
		return sharded.CheckNotShard(ctx, db)
	}
	if ok, err := retry(ctx, log, "migrations", prepare); !ok {
		if err != nil {
			log.Error("the databases do not match the configuration; stopping", "err", err)
		}
		return err
	}
	if gen != nil {
		// Start fails only on a generator already closed: the server is
		// shutting down.
		if err := gen.Start(); err != nil {
			log.Info("snowflake: not started", "err", err)
			return nil
		}
	}
	if ok, err := retry(ctx, log, "seed tags", func() error { return seed(ctx, cfg, db, log) }); !ok {
		if err != nil {
			log.Error("a seed tag cannot be created; stopping", "err", err)
		}
		return err
	}
	if alloc != nil {
		alloc.Start() // reads the tag list at once, then every tag_refresh
	}
	return nil
}

// migrated returns nil when the database holds every migration this leafd
// needs. With store.migrate false another process (`leafd migrate`) applies
// them; until it has, the server neither serves nor reads the tag list,
// and /readyz answers 503, rather than fail every range load against a
// schema that is behind it.
func migrated(ctx context.Context, db store.Store) error {
	// The deployment's records are checked first: an emptied database
	// lacks migrations too, and is a mismatch, not a wait.
	var verr error
	if sh, ok := db.(*sharded.Store); ok {
		if verr = sh.Verify(ctx); errors.Is(verr, sharded.ErrMismatch) {
			return verr
		}
	}
	pending, err := db.PendingMigrations(ctx)
	if err != nil {
		return err
	}
	if pending {
		return errors.New("the database lacks migrations this leafd needs, and store.migrate is false: run leafd migrate")
	}
	return verr
}

// retry runs f until it succeeds, with backoff, and reports whether it did
// before ctx ended. An error wrapping sharded.ErrMismatch, or a
// tag_conflict (a seed tag that was another tag before), is not retried: it
// is returned, since no retry can change it.
func retry(ctx context.Context, log *slog.Logger, what string, f func() error) (bool, error) {
	backoff := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := f()
		if err == nil {
			return true, nil
		}
		if errors.Is(err, sharded.ErrMismatch) || leafd.ErrorCode(err) == leafd.ETagConflict {
			return false, err
		}
		if ctx.Err() != nil {
			return false, nil
		}
		if attempt == 1 || attempt%10 == 0 {
			log.Warn("database not ready; retrying", "step", what, "attempt", attempt, "err", err)
		}
		select {
		case <-ctx.Done():
			return false, nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 10*time.Second)
	}
}

// newGenerator builds the snowflake generator of the configuration:
// snowflake.workers worker ids leased from db when snowflake.worker_id is
// auto; a fixed one
// otherwise, leased from db alone unless snowflake.unprotected_fixed_id is
// true. It logs when the layout runs out.
func newGenerator(c config.Snowflake, maxBatch int, db store.Store, log *slog.Logger) (*snowflake.Pool, error) {
	set := snowflake.Settings{
		Layout:      layoutOf(c),
		WorkerID:    c.WorkerID.ID,
		LeaseTTL:    c.LeaseTTL,
		MaxBackward: c.MaxBackward,
		MaxBorrow:   c.MaxBorrow,
		MaxBatch:    maxBatch,
		RandomStart: c.RandomStart,
		Logger:      log,
	}
	switch {
	case c.WorkerID.Auto:
		set.Leases = db
	case c.UnprotectedFixedID:
		log.Warn("UNSAFE: snowflake.unprotected_fixed_id is true: fixed snowflake.worker_id is not recorded in the store; "+
			"nothing stops another server with the same worker id from issuing the same IDs, nor a restart with the clock set back "+
			"from issuing IDs again", "worker_id", c.WorkerID.ID)
	default:
		// Recorded in the lease table like a leased id: a second server
		// with it refuses to start (serve watches gen.Done).
		set.Leases, set.Fixed = db, true
	}
	gen, err := snowflake.NewPool(set, c.Workers)
	if err != nil {
		return nil, err
	}
	log.Info("snowflake layout", "time_bits", c.TimeBits, "worker_bits", c.WorkerBits, "sequence_bits", c.SequenceBits,
		"epoch", c.Epoch, "runs_out", set.Layout.End().Format(time.RFC3339), "worker_id", c.WorkerID.String(), "workers", c.Workers)
	return gen, nil
}

func layoutOf(c config.Snowflake) snowflake.Layout {
	return snowflake.Layout{Epoch: c.Epoch, TimeBits: c.TimeBits, WorkerBits: c.WorkerBits, SequenceBits: c.SequenceBits}
}

// seed creates the configured seed tags that do not exist yet.
func seed(ctx context.Context, cfg *config.Config, db store.Store, log *slog.Logger) error {
	for _, seed := range cfg.Segment.SeedTags {
		_, err := db.CreateTag(ctx, leafd.Tag{Name: seed.Tag, Step: seed.Step, MaxID: 1, Description: "seed tag from the configuration"})
		switch {
		case err == nil:
			log.Info("created seed tag", "tag", seed.Tag, "step", seed.Step)
		case leafd.ErrorCode(err) == leafd.ETagExists:
		default:
			return fmt.Errorf("seed tag %q: %w", seed.Tag, err)
		}
	}
	return nil
}

// verifyShards refuses to serve from databases that do not match
// store.shards (another deployment, another order or slot count, a slot
// active twice), or from one database of store.shards alone: serving could
// hand out IDs twice. Databases that do not answer within the time are
// checked when they are first used (with store.shards), or once the
// database answers, before anything is served (bootstrap).
func verifyShards(ctx context.Context, db store.Store) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	check := func(ctx context.Context) error { return sharded.CheckNotShard(ctx, db) }
	if sh, ok := db.(*sharded.Store); ok {
		check = sh.Verify
	}
	if err := check(ctx); errors.Is(err, sharded.ErrMismatch) {
		return err
	}
	return nil
}

// openConfigured loads the configuration and opens its store, for the
// commands that work on the store without serving. The caller closes it.
func openConfigured(configPath string, stderr io.Writer) (*config.Config, store.Store, error) {
	cfg, log, err := setup(configPath, stderr)
	if err != nil {
		return nil, nil, err
	}
	db, err := openStore(cfg, log)
	if err != nil {
		return nil, nil, err
	}
	return cfg, db, nil
}

func migrate(ctx context.Context, configPath string, stdout, stderr io.Writer) error {
	_, db, err := openConfigured(configPath, stderr)
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := db.Migrate(ctx); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("migrate: the database did not answer within 2 minutes: %w", err)
		}
		return fmt.Errorf("migrate: %w", err)
	}
	fmt.Fprintf(stdout, "migrations applied (%s)\n", db.Driver())
	return nil
}

// decode prints the JSON of GET /snowflake/{id} for raw.
func decode(configPath, raw string, stdout, stderr io.Writer) error {
	cfg, _, err := setup(configPath, stderr)
	if err != nil {
		return err
	}
	id, err := snowflake.ParseID(raw)
	if err != nil {
		return usageError{errors.New(leafd.ErrorMessage(err))}
	}
	return printJSON(stdout, snowflake.DecodeJSON(layoutOf(cfg.Snowflake), id))
}

// opaqueKey is segment.opaque_key decoded (validated by config); nil when
// it is not set.
func opaqueKey(cfg *config.Config) []byte {
	key, err := segment.ParseOpaqueKey(cfg.Segment.OpaqueKey)
	if err != nil {
		return nil // config refused it already
	}
	return key
}
