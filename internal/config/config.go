// Package config reads leafd's configuration: config.yaml (or the file given
// with --config), overridden key by key by LEAFD_* environment variables, on
// top of built-in defaults. The keys, their defaults and their meaning are
// the contract of docs/contract.md section 7.
//
// Loading is strict on purpose: an unknown key in the file, an unknown
// LEAFD_ variable, a value that does not fit or a DSN written for the other
// driver stops start-up with a message that names the key, the values it
// accepts and where the value came from, because a typo that silently falls
// back to a default is how an ID service ends up handing out duplicates.
package config

import (
	"errors"
	"fmt"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/segment"
	"github.com/leafd/leafd/snowflake"
	"github.com/leafd/leafd/store"
)

// Config is the whole configuration of a leafd process. Build one with Load,
// or start from Default and check it with Validate.
type Config struct {
	HTTP      HTTP
	GRPC      GRPC
	Store     Store
	Segment   Segment
	Snowflake Snowflake
	Admin     Admin
	Log       Log
	Metrics   Metrics
}

// HTTP is the http section.
type HTTP struct {
	// Addr is the host:port the server listens on (http.addr).
	Addr string
	// ShutdownTimeout bounds how long SIGINT/SIGTERM waits for in-flight
	// requests (http.shutdown_timeout).
	ShutdownTimeout time.Duration
	// MaxConnections caps the connections served at once
	// (http.max_connections); past it, new connections wait to be
	// accepted. Default 1024.
	MaxConnections int
	// TrustedProxies are the IP addresses and CIDR ranges of the proxies
	// whose X-Forwarded-For and X-Real-IP name the client
	// (http.trusted_proxies). Empty, the default, trusts none.
	TrustedProxies []string
	// ReadHeaderTimeout, ReadTimeout, WriteTimeout and IdleTimeout bound
	// how long a client may take to send its headers, its whole request,
	// and to take its answer, and how long a keep-alive connection may
	// idle (http.read_header_timeout, …): a client slow on purpose is cut.
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration
}

// GRPC is the grpc section.
type GRPC struct {
	// Addr is the host:port the gRPC API listens on (grpc.addr); empty, the
	// default, serves no gRPC.
	Addr string
	// MaxConnections caps the gRPC connections served at once
	// (grpc.max_connections), apart from http.max_connections: past it,
	// new connections wait to be accepted. Default 128.
	MaxConnections int
	// MaxConcurrentStreams caps the RPCs open at once on one connection
	// (grpc.max_concurrent_streams), an answer not yet read included.
	// Default 100.
	MaxConcurrentStreams int
	// IdleTimeout closes a connection with no RPC open for that long
	// (grpc.idle_timeout). Default 2m.
	IdleTimeout time.Duration
	// KeepaliveTime is how long a connection may send nothing before it
	// is pinged, KeepaliveTimeout how long the ping may go unanswered
	// before it is closed (grpc.keepalive_time, grpc.keepalive_timeout).
	// Defaults 1m and 20s.
	KeepaliveTime, KeepaliveTimeout time.Duration
}

// Store is the store section.
type Store struct {
	// Driver is "mysql", "postgres" or "sqlite" (store.driver).
	Driver string
	// DSN is the driver's data source name (store.dsn). Its syntax is the
	// store package's business; config requires it to be non-empty and not
	// written for another engine (store.OtherEngine).
	DSN string
	// FallbackDSNs are further addresses of the same MySQL cluster, tried in
	// order (store.fallback_dsns). Empty means none.
	FallbackDSNs []string
	// Shards are the DSNs of independent databases that share every tag's
	// IDs (store.shards); empty means one database, DSN. With them, DSN is
	// not used: left at its default it is not checked, and set to anything
	// else it must be one of them.
	Shards []string
	// ShardSlots is the slot count S used when sharding is initialised
	// (store.shard_slots).
	ShardSlots int
	// Migrate applies the embedded migrations at start-up (store.migrate).
	Migrate bool
}

// Segment is the segment section.
type Segment struct {
	// Enabled switches segment mode on (segment.enabled).
	Enabled bool
	// RefillMin and RefillMax are the window one range should last
	// (segment.refill_min, segment.refill_max); RefillMin < RefillMax.
	RefillMin, RefillMax time.Duration
	// MaxStep caps the step a server chooses (segment.max_step), unless the
	// table step is larger.
	MaxStep int64
	// PreloadAt is the used fraction of a range, in (0, 1), at which the
	// next range starts loading (segment.preload_at).
	PreloadAt float64
	// TagRefresh is how often the tag list is re-read (segment.tag_refresh).
	TagRefresh time.Duration
	// WaitTimeout bounds how long a request waits for a range to load
	// (segment.wait_timeout).
	WaitTimeout time.Duration
	// MaxBatch is the largest count=N, 1..1,000,000 (segment.max_batch).
	MaxBatch int
	// MaxRange is the largest size of a range lease, 1..MaxRangeLimit
	// (segment.max_range).
	MaxRange int64
	// SeedTags are created at start-up when absent and never altered
	// (segment.seed_tags). The built-in default is none.
	SeedTags []SeedTag
	// OpaqueKey is the master key of opaque tags, hex (segment.opaque_key);
	// empty means none. It is never logged.
	OpaqueKey string
	// RequireToken makes every segment ID route need an access token
	// allowed for the tag (segment.require_token); off by default.
	RequireToken bool
}

// SeedTag is one entry of segment.seed_tags.
type SeedTag struct {
	// Tag is the business tag, valid by leafd.ValidateTag.
	Tag string
	// Step is the table step the tag is created with, at least 1.
	Step int64
}

// Snowflake is the snowflake section.
type Snowflake struct {
	// Enabled switches snowflake mode on (snowflake.enabled).
	Enabled bool
	// WorkerID is "auto" (leased from the store) or a fixed number
	// (snowflake.worker_id).
	WorkerID WorkerID
	// Epoch is the Unix time in milliseconds that timestamp 0 stands for
	// (snowflake.epoch); it must not be in the future.
	Epoch int64
	// TimeBits, WorkerBits and SequenceBits are the ID layout; they add up
	// to 63 (snowflake.time_bits, worker_bits, sequence_bits).
	TimeBits, WorkerBits, SequenceBits int
	// MaxBackward is how far the clock may go back before the generator
	// stops waiting for it (snowflake.max_backward).
	MaxBackward time.Duration
	// LeaseTTL is the lifetime of a worker id lease (snowflake.lease_ttl).
	LeaseTTL time.Duration
	// MaxBorrow is how far ahead of the clock the generator may take
	// milliseconds when one's sequence is used up (snowflake.max_borrow):
	// 0 (the default) to 1s, and at most a tenth of LeaseTTL; 0 is off.
	MaxBorrow time.Duration
	// Workers is how many worker ids the server holds and issues under
	// at once (snowflake.workers): 1 (the default) to MaxWorkers, more
	// than one only with WorkerID auto. Each adds 2^SequenceBits IDs a
	// millisecond to what the server sustains.
	Workers int
	// RandomStart starts each millisecond's sequence at a small random
	// number (snowflake.random_start).
	RandomStart bool
	// UnprotectedFixedID uses a fixed WorkerID without recording it in the
	// store's lease table (snowflake.unprotected_fixed_id): nothing then
	// stops a second server with the same worker id, nor a restart with
	// the clock set back. Only with a fixed worker id; off by default.
	UnprotectedFixedID bool
	// RequireToken makes the snowflake ID routes need an access token
	// allowed for the name snowflake (snowflake.require_token); off by
	// default.
	RequireToken bool
}

// WorkerID is the value of snowflake.worker_id: either auto, a worker id
// leased from the store, or a fixed number. The zero value is the fixed
// worker id 0.
type WorkerID struct {
	// Auto means: lease a worker id from the store. ID is then unused.
	Auto bool
	// ID is the fixed worker id, 0..2^worker_bits-1.
	ID int64
}

// String returns "auto" or the decimal worker id, the form the file takes.
func (w WorkerID) String() string {
	if w.Auto {
		return "auto"
	}
	return strconv.FormatInt(w.ID, 10)
}

// MarshalText returns the same text as String.
func (w WorkerID) MarshalText() ([]byte, error) { return []byte(w.String()), nil }

// UnmarshalText accepts "auto" (any case) or a non-negative decimal number.
// The upper bound depends on snowflake.worker_bits and is checked by
// Validate.
func (w *WorkerID) UnmarshalText(text []byte) error {
	v, err := ParseWorkerID(string(text))
	if err != nil {
		return err
	}
	*w = v
	return nil
}

// ParseWorkerID parses "auto" (any case) or a non-negative decimal number.
func ParseWorkerID(s string) (WorkerID, error) {
	if strings.EqualFold(strings.TrimSpace(s), "auto") {
		return WorkerID{Auto: true}, nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n < 0 {
		return WorkerID{}, fmt.Errorf("%q is neither auto nor a worker id", s)
	}
	return WorkerID{ID: n}, nil
}

// Admin is the admin section.
type Admin struct {
	// Token is the bearer token of the admin routes (admin.token), with
	// surrounding whitespace trimmed (a secret mounted with a trailing
	// newline). Empty switches the admin routes off: they answer 403;
	// otherwise it must be at least MinTokenLen characters with no
	// whitespace inside.
	Token string
	// ProtectDashboard requires the token for /dashboard and /api/state
	// too (admin.protect_dashboard). Off by default.
	ProtectDashboard bool
}

// Log is the log section.
type Log struct {
	// Level is debug, info, warn or error (log.level).
	Level string
	// Format is text or json (log.format).
	Format string
}

// Metrics is the metrics section.
type Metrics struct {
	// PerTag is how much GET /metrics tells about each segment tag
	// (metrics.per_tag): full (every series, a dozen and a histogram per
	// tag), basic (at most five series per tag that was asked for since
	// start-up, none for the others) or off (server-wide totals only).
	PerTag string
}

// Default returns the built-in defaults: docs/contract.md section 7 with no seed tags,
// so that a production database never gets a demo tag by accident.
func Default() *Config {
	return &Config{
		HTTP: HTTP{Addr: "127.0.0.1:8080", ShutdownTimeout: 10 * time.Second,
			MaxConnections: 1024, TrustedProxies: []string{},
			ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 15 * time.Second,
			WriteTimeout: 60 * time.Second, IdleTimeout: 2 * time.Minute},
		GRPC: GRPC{MaxConnections: 128, MaxConcurrentStreams: 100, IdleTimeout: 2 * time.Minute,
			KeepaliveTime: time.Minute, KeepaliveTimeout: 20 * time.Second},
		Store: Store{Driver: "sqlite", DSN: "file:data/leafd.db", FallbackDSNs: []string{}, Shards: []string{}, ShardSlots: 16, Migrate: true},
		Segment: Segment{
			Enabled:     true,
			RefillMin:   15 * time.Minute,
			RefillMax:   30 * time.Minute,
			MaxStep:     1_000_000,
			PreloadAt:   0.1,
			TagRefresh:  60 * time.Second,
			WaitTimeout: 2 * time.Second,
			MaxBatch:    10_000,
			MaxRange:    1_000_000,
			SeedTags:    []SeedTag{},
		},
		Snowflake: Snowflake{
			Enabled:            true,
			WorkerID:           WorkerID{Auto: true},
			Epoch:              1288834974657,
			TimeBits:           41,
			WorkerBits:         10,
			SequenceBits:       12,
			MaxBackward:        5 * time.Millisecond,
			LeaseTTL:           30 * time.Second,
			MaxBorrow:          0,
			Workers:            1,
			RandomStart:        false,
			UnprotectedFixedID: false,
		},
		Admin:   Admin{Token: ""},
		Log:     Log{Level: "info", Format: "text"},
		Metrics: Metrics{PerTag: "basic"},
	}
}

// Limits of the values Validate accepts.
const (
	// MaxWorkers is the largest snowflake.workers.
	MaxWorkers = snowflake.MaxPoolWorkers
	// MaxBatchLimit is the largest segment.max_batch.
	MaxBatchLimit = 1_000_000
	// MaxRangeLimit is the largest segment.max_range.
	MaxRangeLimit = 1_000_000_000
	// MinTokenLen is the shortest admin.token accepted.
	MinTokenLen = 16
	// maxConnectionsLimit is the largest http.max_connections and
	// grpc.max_connections.
	maxConnectionsLimit = 1_000_000
	// maxStreamsLimit is the largest grpc.max_concurrent_streams.
	maxStreamsLimit = 10_000
	// maxSeedStep is the largest table step: leaf_alloc.step is an INT.
	maxSeedStep = math.MaxInt32
	// layoutBits is what the three snowflake bit counts add up to.
	layoutBits = 63
)

// maxShardSlots bounds store.shard_slots (store.MaxShardSlots).
const maxShardSlots = 1024

// Hints: what each key accepts, appended to every message about it.
const (
	hintAddr     = "use host:port, such as 127.0.0.1:8080 or :8080"
	hintGRPCAddr = "use host:port, such as 127.0.0.1:9090 or :9090, or leave it empty to serve no gRPC"
	hintDuration = "use a Go duration greater than 0, such as 10s, 15m or 500ms"
	hintDriver   = "use mysql, postgres or sqlite"
	hintBool     = "use true or false"
	hintMaxStep  = "use a whole number of at least 1"
	hintPreload  = "use a fraction in (0, 1)"
	hintLevel    = "use debug, info, warn or error"
	hintFormat   = "use text or json"
	hintBits     = "use whole numbers of at least 1 that add up to 63 (default 41, 10, 12)"
	hintToken    = "use a random string of at least 16 characters without whitespace, such as the output of openssl rand -hex 24; empty switches the admin routes off"
	hintProxies  = "use a list of IP addresses or CIDR ranges, such as 10.0.0.0/8 (space-separated in the environment); empty trusts no proxy"
	hintPerTag   = "use full, basic or off"
)

// hintDSN is store.dsn's: an example of every engine's.
var hintDSN = func() string {
	var ex []string
	for _, d := range store.Drivers() {
		ex = append(ex, store.ExampleDSN(d)+" ("+d+")")
	}
	return "use a data source name, such as " + strings.Join(ex[:len(ex)-1], ", ") + " or " + ex[len(ex)-1]
}()

// hintWorkers is snowflake.workers'.
var hintWorkers = fmt.Sprintf("use a whole number from 1 (the default) to %d", MaxWorkers)

// hintMaxBorrow is snowflake.max_borrow's, which may be 0.
const hintMaxBorrow = "use a Go duration from 0 (off) to 1s, such as 5ms, and at most a tenth of snowflake.lease_ttl"

func hintMaxConnections() string {
	return fmt.Sprintf("use a whole number from 1 to %d", maxConnectionsLimit)
}

func hintMaxStreams() string {
	return fmt.Sprintf("use a whole number from 1 to %d", maxStreamsLimit)
}

func hintMaxRange() string { return fmt.Sprintf("use a whole number from 1 to %d", MaxRangeLimit) }

func hintMaxBatch() string { return fmt.Sprintf("use a whole number from 1 to %d", MaxBatchLimit) }

func hintSeedStep() string { return fmt.Sprintf("use a whole number from 1 to %d", maxSeedStep) }

func hintEpoch() string {
	return "use a Unix time in milliseconds that is not in the future (default 1288834974657, Twitter's and Leaf's)"
}

// hintWorkerID names the accepted worker ids; bits < 0 means the layout is
// itself invalid, so the bound is not known.
func hintWorkerID(bits int) string {
	if bits < 1 || bits > 62 {
		return "use auto or a number 0..(2^snowflake.worker_bits-1)"
	}
	return fmt.Sprintf("use auto or a number 0..%d (2^snowflake.worker_bits-1)", int64(1)<<bits-1)
}

// Validate checks every value of c and returns all problems at once, joined
// with errors.Join: each is a *KeyError, printed as one line. It returns nil
// when c can be used.
func (c *Config) Validate() error {
	return errors.Join(toErrors(c.validate(time.Now(), nil))...)
}

// Warnings returns what c accepts but probably does not mean, one line
// each, for the log at start-up. Today that is one case: segment.enabled
// and snowflake.enabled both false, a server that issues no ID at all and
// answers only its health, metrics and admin routes. It is allowed (a
// server kept up for its dashboard while the modes are switched over) but
// never by accident.
func (c *Config) Warnings() []string {
	var ws []string
	if !c.Segment.Enabled && !c.Snowflake.Enabled {
		ws = append(ws, "segment.enabled and snowflake.enabled are both false: this server issues no IDs, "+
			"every /segment and /snowflake request answers 404 mode_disabled; set one of them to true")
	}
	return ws
}

func toErrors(ps []*KeyError) []error {
	errs := make([]error, len(ps))
	for i, p := range ps {
		errs[i] = p
	}
	return errs
}

// validate returns the problems of c, judging the epoch against now. from
// tells where the value of a key came from, for the messages that involve a
// second key; nil means nowhere known (a Config built by hand).
func (c *Config) validate(now time.Time, from func(key string) origin) []*KeyError {
	if from == nil {
		from = func(string) origin { return origin{} }
	}
	// other names a second key with its value and where that came from:
	// "store.driver is mysql (from LEAFD_STORE_DRIVER)".
	other := func(key string, value any) string {
		s := fmt.Sprintf("%s is %v", key, value)
		if w := from(key).String(); w != "" {
			s += " (" + w + ")"
		}
		return s
	}
	var ps []*KeyError
	bad := func(key, format string, args ...any) *KeyError {
		p := &KeyError{Key: key, Message: fmt.Sprintf(format, args...)}
		ps = append(ps, p)
		return p
	}
	positive := func(key string, d time.Duration) {
		if d <= 0 {
			bad(key, "%s is not greater than 0: %s", d, hintDuration)
		}
	}

	// http
	if c.HTTP.Addr == "" {
		bad("http.addr", "is empty: %s", hintAddr)
	} else if _, _, err := net.SplitHostPort(c.HTTP.Addr); err != nil {
		bad("http.addr", "%q is not host:port: %s", c.HTTP.Addr, hintAddr)
	}
	positive("http.shutdown_timeout", c.HTTP.ShutdownTimeout)
	positive("http.read_header_timeout", c.HTTP.ReadHeaderTimeout)
	positive("http.read_timeout", c.HTTP.ReadTimeout)
	positive("http.idle_timeout", c.HTTP.IdleTimeout)
	// The write timeout runs from the end of a request's headers to the end
	// of its answer: it must leave a request time to wait for a range.
	if c.HTTP.WriteTimeout <= c.Segment.WaitTimeout {
		bad("http.write_timeout", "%s is not longer than segment.wait_timeout (%s): a request that waits for a range would be cut before its answer; make it a few times longer", c.HTTP.WriteTimeout, c.Segment.WaitTimeout).
			also("segment.wait_timeout")
	}
	if c.GRPC.Addr != "" {
		if _, _, err := net.SplitHostPort(c.GRPC.Addr); err != nil {
			bad("grpc.addr", "%q is not host:port: %s", c.GRPC.Addr, hintGRPCAddr)
		} else if _, port, _ := net.SplitHostPort(c.GRPC.Addr); c.GRPC.Addr == c.HTTP.Addr && port != "0" {
			bad("grpc.addr", "%q is http.addr as well: give the gRPC API a port of its own", c.GRPC.Addr)
		}
	}
	if c.HTTP.MaxConnections < 1 || c.HTTP.MaxConnections > maxConnectionsLimit {
		bad("http.max_connections", "%d is out of range: %s", c.HTTP.MaxConnections, hintMaxConnections())
	}
	if c.GRPC.MaxConnections < 1 || c.GRPC.MaxConnections > maxConnectionsLimit {
		bad("grpc.max_connections", "%d is out of range: %s", c.GRPC.MaxConnections, hintMaxConnections())
	}
	if c.GRPC.MaxConcurrentStreams < 1 || c.GRPC.MaxConcurrentStreams > maxStreamsLimit {
		bad("grpc.max_concurrent_streams", "%d is out of range: %s", c.GRPC.MaxConcurrentStreams, hintMaxStreams())
	}
	positive("grpc.idle_timeout", c.GRPC.IdleTimeout)
	positive("grpc.keepalive_time", c.GRPC.KeepaliveTime)
	positive("grpc.keepalive_timeout", c.GRPC.KeepaliveTimeout)
	for i, p := range c.HTTP.TrustedProxies {
		if net.ParseIP(p) == nil {
			if _, _, err := net.ParseCIDR(p); err != nil {
				bad(fmt.Sprintf("http.trusted_proxies[%d]", i), "%q is neither an IP address nor a CIDR range: %s", p, hintProxies).
					also("http.trusted_proxies")
			}
		}
	}

	// store
	if !slices.Contains(store.Drivers(), c.Store.Driver) {
		bad("store.driver", "%q is not supported: %s", c.Store.Driver, hintDriver)
	}
	// A DSN written for another engine (store.OtherEngine) is refused: the
	// SQLite driver would take a PostgreSQL DSN for a file's name and a
	// MySQL one for a directory's, and serve from a new, empty file; the
	// others' own complaints do not say what is wrong.
	driverName, driverExample := store.EngineName(c.Store.Driver), store.ExampleDSN(c.Store.Driver)
	// With store.shards, store.dsn is not used: its default is left alone.
	// Set to a database that store.shards does not list, it is refused:
	// most likely the database the deployment grew from, left out of the
	// list, whose tags' IDs the shards would hand out again. The default
	// SQLite file set as such (the shipped config.yaml does) is such a
	// database only for the SQLite driver.
	dflt := Default().Store
	dsnSet := c.Store.DSN != "" && from("store.dsn").kind != fromDefault &&
		(c.Store.DSN != dflt.DSN || c.Store.Driver == dflt.Driver)
	switch kind := store.OtherEngine(c.Store.Driver, c.Store.DSN); {
	case len(c.Store.Shards) > 0:
		if dsnSet && !slices.Contains(c.Store.Shards, c.Store.DSN) {
			bad("store.dsn", "%q is not one of store.shards, which replaces it: remove store.dsn, or list its database in store.shards "+
				"(first, when the deployment grows from it)", store.MaskDSN(c.Store.DSN)).also("store.shards")
		}
	case c.Store.DSN == "":
		bad("store.dsn", "is empty: %s", hintDSN)
	case kind != "":
		fixDriver := fmt.Sprintf("%s to %s", setting("store.driver", from("store.driver")), kind)
		fixDSN := fmt.Sprintf("%s to a %s DSN such as %s", setting("store.dsn", from("store.dsn")), driverName, driverExample)
		if kind == dflt.Driver { // most likely the default DSN, left as it was
			fixDriver, fixDSN = fixDSN, fixDriver
		}
		bad("store.dsn", "%q is a %s DSN but %s: set %s, or %s",
			store.MaskDSN(c.Store.DSN), store.EngineName(kind), other("store.driver", c.Store.Driver), fixDriver, fixDSN).also("store.driver")
	}
	// An entry of a list of DSNs that begins with "=" is the middle of
	// libpq's key = value or key =value, a DSN split at its spaces: a list
	// in the environment is space-separated. Its pieces would be SQLite
	// files, one named after the password.
	const split = `an entry beginning with "=" is a piece of a keyword=value DSN split at its spaces (a list in the environment is space-separated): ` +
		`write each DSN without spaces, or as a postgres:// URL`
	for i, dsn := range c.Store.FallbackDSNs {
		key := fmt.Sprintf("store.fallback_dsns[%d]", i)
		switch kind := store.OtherEngine(c.Store.Driver, dsn); {
		case dsn == "":
			bad(key, "is empty: %s, or remove it", hintDSN)
		case strings.HasPrefix(dsn, "="):
			bad(key, split).also("store.fallback_dsns")
		case kind != "" && slices.Contains(store.FallbackDrivers(), c.Store.Driver):
			bad(key, "%q is a %s DSN: a fallback is another address of the same %s cluster, such as %s",
				store.MaskDSN(dsn), store.EngineName(kind), driverName, driverExample).also("store.fallback_dsns")
		}
	}
	for i, dsn := range c.Store.Shards {
		key := fmt.Sprintf("store.shards[%d]", i)
		switch kind := store.OtherEngine(c.Store.Driver, dsn); {
		case dsn == "":
			bad(key, "is empty: %s, or remove it", hintDSN)
		case strings.HasPrefix(dsn, "="):
			bad(key, split).also("store.shards")
		case kind != "":
			bad(key, "%q is a %s DSN but %s: every database of store.shards is of store.driver's kind, such as %s",
				store.MaskDSN(dsn), store.EngineName(kind), other("store.driver", c.Store.Driver), driverExample).also("store.shards")
		}
	}
	switch n := len(c.Store.Shards); {
	case n == 1:
		bad("store.shards", "lists one database: list at least two independent databases, or leave it empty and use store.dsn")
	case n > 1 && len(c.Store.FallbackDSNs) > 0:
		bad("store.fallback_dsns", "is set with store.shards: each database of store.shards stands alone; remove store.fallback_dsns").also("store.shards")
	}
	if c.Store.ShardSlots < max(2, len(c.Store.Shards)) || c.Store.ShardSlots > maxShardSlots {
		bad("store.shard_slots", "%d is out of range: use a whole number from %d (the number of databases of store.shards, at least 2) to %d",
			c.Store.ShardSlots, max(2, len(c.Store.Shards)), maxShardSlots)
	}
	if fb := store.FallbackDrivers(); slices.Contains(store.Drivers(), c.Store.Driver) && !slices.Contains(fb, c.Store.Driver) && len(c.Store.FallbackDSNs) > 0 {
		bad("store.fallback_dsns", "is set but %s: fallback addresses are for a %s cluster; remove them or change store.driver",
			other("store.driver", c.Store.Driver), strings.Join(fb, " or ")).also("store.driver")
	}

	// segment
	if k := c.Segment.OpaqueKey; k != "" {
		if _, err := segment.ParseOpaqueKey(k); err != nil {
			bad("segment.opaque_key", "%s", err) // never the key itself
		}
	}
	positive("segment.refill_min", c.Segment.RefillMin)
	positive("segment.refill_max", c.Segment.RefillMax)
	if c.Segment.RefillMin > 0 && c.Segment.RefillMax > 0 && c.Segment.RefillMin >= c.Segment.RefillMax {
		bad("segment.refill_min", "%s is not below segment.refill_max (%s): use a refill_min shorter than refill_max (default 15m and 30m)",
			c.Segment.RefillMin, c.Segment.RefillMax).also("segment.refill_max")
	}
	if c.Segment.MaxStep < 1 {
		bad("segment.max_step", "%d is out of range: %s", c.Segment.MaxStep, hintMaxStep)
	}
	if !(c.Segment.PreloadAt > 0 && c.Segment.PreloadAt < 1) { // also catches NaN
		bad("segment.preload_at", "%s is out of range: %s", strconv.FormatFloat(c.Segment.PreloadAt, 'g', -1, 64), hintPreload)
	}
	positive("segment.tag_refresh", c.Segment.TagRefresh)
	positive("segment.wait_timeout", c.Segment.WaitTimeout)
	if c.Segment.MaxRange < 1 || c.Segment.MaxRange > MaxRangeLimit {
		bad("segment.max_range", "%d is out of range: %s", c.Segment.MaxRange, hintMaxRange())
	}
	if c.Segment.MaxBatch < 1 || c.Segment.MaxBatch > MaxBatchLimit {
		bad("segment.max_batch", "%d is out of range: %s", c.Segment.MaxBatch, hintMaxBatch())
	}
	seen := make(map[string]int, len(c.Segment.SeedTags))
	for i, s := range c.Segment.SeedTags {
		key := fmt.Sprintf("segment.seed_tags[%d]", i)
		if err := leafd.ValidateTag(s.Tag); err != nil {
			bad(key+".tag", "%s", leafd.ErrorMessage(err)).also("segment.seed_tags")
		} else if j, dup := seen[s.Tag]; dup {
			bad(key+".tag", "%q is already listed as segment.seed_tags[%d]: list each tag once", s.Tag, j).also("segment.seed_tags")
		} else {
			seen[s.Tag] = i
		}
		if s.Step < 1 || s.Step > maxSeedStep {
			bad(key+".step", "%d is out of range: %s", s.Step, hintSeedStep()).also("segment.seed_tags")
		}
	}

	// snowflake
	sf := c.Snowflake
	bitsOK := sf.TimeBits >= 1 && sf.WorkerBits >= 1 && sf.SequenceBits >= 1 &&
		sf.TimeBits+sf.WorkerBits+sf.SequenceBits == layoutBits
	if !bitsOK {
		bad("snowflake.time_bits, snowflake.worker_bits, snowflake.sequence_bits", "%d + %d + %d = %d: %s",
			sf.TimeBits, sf.WorkerBits, sf.SequenceBits, sf.TimeBits+sf.WorkerBits+sf.SequenceBits, hintBits).
			also("snowflake.time_bits", "snowflake.worker_bits", "snowflake.sequence_bits")
	}
	nowMS := now.UnixMilli()
	switch {
	case sf.Epoch < 0:
		bad("snowflake.epoch", "%d is before 1970: %s", sf.Epoch, hintEpoch())
	case sf.Epoch > nowMS:
		bad("snowflake.epoch", "%d (%s) is in the future: %s", sf.Epoch, msTime(sf.Epoch), hintEpoch())
	case bitsOK:
		// The last millisecond the layout can express.
		last := sf.Epoch + (int64(1)<<sf.TimeBits - 1)
		if last < nowMS {
			bad("snowflake.time_bits", "%d bits from snowflake.epoch %d ran out on %s: use more time bits or a later epoch",
				sf.TimeBits, sf.Epoch, msTime(last)).also("snowflake.epoch", "snowflake.worker_bits", "snowflake.sequence_bits")
		}
	}
	if !sf.WorkerID.Auto {
		wb := -1
		if bitsOK {
			wb = sf.WorkerBits
		}
		if sf.WorkerID.ID < 0 || (bitsOK && sf.WorkerID.ID > int64(1)<<wb-1) {
			bad("snowflake.worker_id", "%d is out of range: %s", sf.WorkerID.ID, hintWorkerID(wb)).also("snowflake.worker_bits")
		}
	}
	if sf.MaxBackward < time.Millisecond || sf.MaxBackward > time.Second {
		bad("snowflake.max_backward", "%v is out of range: use 1ms to 1s (a request waits this long at most)", sf.MaxBackward)
	}
	if sf.LeaseTTL < time.Second {
		bad("snowflake.lease_ttl", "%v is too short: use at least 1s (renewals come every third of it)", sf.LeaseTTL)
	}
	switch {
	case sf.MaxBorrow < 0 || sf.MaxBorrow > time.Second:
		bad("snowflake.max_borrow", "%v is out of range: %s", sf.MaxBorrow, hintMaxBorrow)
	case sf.LeaseTTL >= time.Second && sf.MaxBorrow > sf.LeaseTTL/10:
		bad("snowflake.max_borrow", "%v is more than a tenth of the lease (%s): use at most %v, or a longer snowflake.lease_ttl "+
			"(the watermark, lease_ttl ahead of the clock, must cover the borrowed time)",
			sf.MaxBorrow, other("snowflake.lease_ttl", sf.LeaseTTL), sf.LeaseTTL/10).also("snowflake.lease_ttl")
	}
	switch {
	case sf.Workers < 1 || sf.Workers > MaxWorkers:
		bad("snowflake.workers", "%d is out of range: %s", sf.Workers, hintWorkers)
	case sf.Workers > 1 && !sf.WorkerID.Auto:
		bad("snowflake.workers", "%d needs snowflake.worker_id: auto, not the fixed %d: "+
			"set snowflake.workers to 1, or lease the worker ids with auto", sf.Workers, sf.WorkerID.ID).also("snowflake.worker_id")
	case bitsOK && int64(sf.Workers) > int64(1)<<sf.WorkerBits:
		bad("snowflake.workers", "%d is more than the %d worker ids of the layout (snowflake.worker_bits %d): use at most %d",
			sf.Workers, int64(1)<<sf.WorkerBits, sf.WorkerBits, int64(1)<<sf.WorkerBits).also("snowflake.worker_bits")
	}
	if sf.UnprotectedFixedID && sf.WorkerID.Auto {
		bad("snowflake.unprotected_fixed_id", "true needs a fixed snowflake.worker_id, not auto: "+
			"set it to false (a leased worker id is always recorded)").also("snowflake.worker_id")
	}

	// The token itself is never repeated in a message: it is a secret.
	switch t := c.Admin.Token; {
	case t == "":
	case strings.IndexFunc(t, unicode.IsSpace) >= 0:
		bad("admin.token", "holds whitespace inside: %s", hintToken)
	case utf8.RuneCountInString(t) < MinTokenLen:
		bad("admin.token", "is %d characters, too short to resist guessing: %s", utf8.RuneCountInString(t), hintToken)
	}
	if c.Admin.ProtectDashboard && c.Admin.Token == "" {
		bad("admin.protect_dashboard", "true needs admin.token: set a token, or leave the dashboard open").also("admin.token")
	}

	// log
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		bad("log.level", "%q is not a level: %s", c.Log.Level, hintLevel)
	}
	switch c.Log.Format {
	case "text", "json":
	default:
		bad("log.format", "%q is not a format: %s", c.Log.Format, hintFormat)
	}

	// metrics
	switch c.Metrics.PerTag {
	case "full", "basic", "off":
	default:
		bad("metrics.per_tag", "%q is not a level of detail: %s", c.Metrics.PerTag, hintPerTag)
	}
	return ps
}

func msTime(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02 15:04:05.000 UTC")
}

// KeyError is one problem with one configuration key. Its Error is a single
// line: the full dotted key, what is wrong with the value, and which values
// are accepted, followed by where the value came from when Load knows it:
// "(in ./config.yaml)", "(from LEAFD_STORE_DSN)" or "(built-in default)".
type KeyError struct {
	// Key is the full dotted key, e.g. "segment.preload_at", or
	// "segment.seed_tags[1].step" for an entry of a list. A problem that
	// involves several keys names them all, separated by commas. An
	// unknown environment variable is named as it is: "LEAFD_HTTPADDR".
	Key string
	// Message says what is wrong and what to use instead.
	Message string
	// Source is where the value came from: "config.yaml" (the file read),
	// "LEAFD_SEGMENT_PRELOAD_AT" (an environment variable) or "" (a
	// built-in default, several keys, or a Config built by hand).
	Source string

	// where is the text Error puts in parentheses after the message: the
	// origin of the value, or of each value of a problem about several
	// keys. Empty for a Config built by hand.
	where string
	// related are further keys whose own problems make this one moot.
	related []string
}

// Error returns "key: message", followed by where the value came from when
// known.
func (e *KeyError) Error() string {
	if e.where == "" {
		return e.Key + ": " + e.Message
	}
	return e.Key + ": " + e.Message + " (" + e.where + ")"
}

func (e *KeyError) also(keys ...string) *KeyError {
	e.related = append(e.related, keys...)
	return e
}

// origin is where the value of a key came from.
type origin struct {
	kind originKind
	// name is the file or the environment variable.
	name string
}

type originKind int

const (
	unknown     originKind = iota // a Config built by hand
	fromDefault                   // the built-in default
	fromFile                      // the configuration file, name
	fromEnv                       // the environment variable name
)

// String returns the origin as Error shows it, in parentheses:
// "in ./config.yaml", "from LEAFD_STORE_DSN", "built-in default", or "".
func (o origin) String() string {
	switch o.kind {
	case fromDefault:
		return "built-in default"
	case fromFile:
		return "in " + o.name
	case fromEnv:
		return "from " + o.name
	}
	return ""
}

// source is the KeyError.Source of the origin.
func (o origin) source() string {
	if o.kind == fromFile || o.kind == fromEnv {
		return o.name
	}
	return ""
}

// setting names key the way to change it where its value came from: the
// environment variable when the environment set it, the key otherwise.
func setting(key string, o origin) string {
	if o.kind == fromEnv {
		return o.name
	}
	return key
}
