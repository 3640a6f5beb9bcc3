package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os/signal"
	"syscall"
	"time"

	"github.com/leafd/leafd"
	leafhttp "github.com/leafd/leafd/http"
	"github.com/leafd/leafd/internal/config"
	"github.com/leafd/leafd/segment"
	"github.com/leafd/leafd/store"
)

// Store is what the command needs of a database; store.MySQL and
// store.SQLite implement it.
type Store interface {
	segment.Store
	Driver() string
	Migrate(ctx context.Context) error
	CreateTag(ctx context.Context, t leafd.Tag) (leafd.Tag, error)
	Close() error
}

var (
	_ Store = (*store.MySQL)(nil)
	_ Store = (*store.SQLite)(nil)
)

// setup loads the configuration and builds the logger. Every error it
// returns is a usage error: the configuration is the caller's.
func setup(path string, stderr io.Writer) (*config.Config, *slog.Logger, error) {
	cfg, err := config.Load(path)
	if err != nil {
		return nil, nil, usageError{err}
	}
	return cfg, newLogger(cfg.Log, stderr), nil
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
func openStore(c config.Store) (Store, error) {
	var (
		s   Store
		err error
	)
	switch c.Driver {
	case "mysql":
		s, err = store.OpenMySQL(c.DSN)
	case "sqlite":
		s, err = store.OpenSQLite(c.DSN)
	default:
		err = fmt.Errorf("store.driver %q is not supported: use mysql or sqlite", c.Driver)
	}
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
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	db, err := openStore(cfg.Store)
	if err != nil {
		return err
	}
	defer db.Close()

	var alloc *segment.Allocator
	if cfg.Segment.Enabled {
		alloc, err = segment.New(db, segment.Config{
			RefillMin:   cfg.Segment.RefillMin,
			RefillMax:   cfg.Segment.RefillMax,
			MaxStep:     cfg.Segment.MaxStep,
			PreloadAt:   cfg.Segment.PreloadAt,
			TagRefresh:  cfg.Segment.TagRefresh,
			WaitTimeout: cfg.Segment.WaitTimeout,
			MaxBatch:    cfg.Segment.MaxBatch,
			Logger:      log,
		})
		if err != nil {
			return usageError{err}
		}
		alloc.Start()
		defer alloc.Close()
	}
	if cfg.Snowflake.Enabled {
		log.Warn("snowflake mode is not built yet; /snowflake answers not_found")
	}

	// Bind synchronously so that a taken port fails start-up at once.
	ln, err := net.Listen("tcp", cfg.HTTP.Addr)
	if err != nil {
		return fmt.Errorf("http.addr: %w", err)
	}
	var segHandler leafhttp.Segment
	if alloc != nil {
		segHandler = alloc
	}
	srv := leafhttp.New(leafhttp.Config{Segment: segHandler, Logger: log})

	bootCtx, cancelBoot := context.WithCancel(ctx)
	bootDone := make(chan struct{})
	go func() {
		defer close(bootDone)
		bootstrap(bootCtx, cfg, db, alloc, log)
	}()

	log.Info("leafd serving", "addr", ln.Addr().String(), "store", db.Driver(),
		"segment", cfg.Segment.Enabled)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	select {
	case err := <-served:
		cancelBoot()
		<-bootDone
		return err
	case <-ctx.Done():
	}
	log.Info("leafd shutting down", "timeout", cfg.HTTP.ShutdownTimeout)
	cancelBoot()
	shutCtx, cancel := context.WithTimeout(context.Background(), cfg.HTTP.ShutdownTimeout)
	defer cancel()
	err = srv.Shutdown(shutCtx)
	<-bootDone
	if serveErr := <-served; serveErr != nil && err == nil {
		err = serveErr
	}
	if err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	log.Info("leafd stopped")
	return nil
}

// bootstrap prepares the database once it answers: migrations (when
// store.migrate is on) and seed tags, retried with backoff, so that a server
// can start before its database. Then it makes the allocator read the tags.
func bootstrap(ctx context.Context, cfg *config.Config, db Store, alloc *segment.Allocator, log *slog.Logger) {
	backoff := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := prepare(ctx, cfg, db, log)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return
		}
		if attempt == 1 || attempt%10 == 0 {
			log.Warn("database not ready; retrying", "attempt", attempt, "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 10*time.Second)
	}
	if alloc != nil {
		if err := alloc.Refresh(ctx); err != nil && ctx.Err() == nil {
			log.Warn("reading the tag list failed; the refresh loop retries", "err", err)
		}
	}
}

func prepare(ctx context.Context, cfg *config.Config, db Store, log *slog.Logger) error {
	if cfg.Store.Migrate {
		if err := db.Migrate(ctx); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
	}
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

func migrate(ctx context.Context, configPath string, stdout, stderr io.Writer) error {
	cfg, _, err := setup(configPath, stderr)
	if err != nil {
		return err
	}
	db, err := openStore(cfg.Store)
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
