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
	"cmp"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/leafd/leafd/store"
)

// Config is the whole configuration of a leafd process. Build one with Load
// (Default holds the built-in defaults). Each field is the key
// named beside it; fields() in keys.go declares its default and the values
// it accepts, and docs/configuration.md says what it means.
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

// HTTP is the http section: the HTTP server's address and limits.
type HTTP struct {
	Addr            string        // http.addr
	ShutdownTimeout time.Duration // http.shutdown_timeout
	MaxConnections  int           // http.max_connections
	TrustedProxies  []string      // http.trusted_proxies
	// http.read_header_timeout, http.read_timeout, http.write_timeout,
	// http.idle_timeout: a client slow on purpose is cut.
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration
}

// GRPC is the grpc section: the gRPC API's address, empty for none, and
// limits.
type GRPC struct {
	Addr                            string        // grpc.addr
	MaxConnections                  int           // grpc.max_connections
	MaxConcurrentStreams            int           // grpc.max_concurrent_streams
	IdleTimeout                     time.Duration // grpc.idle_timeout
	KeepaliveTime, KeepaliveTimeout time.Duration // grpc.keepalive_time, grpc.keepalive_timeout
}

// Store is the store section. The syntax of a DSN is the store package's
// business; config requires it to be non-empty and not written for another
// engine (store.OtherEngine).
type Store struct {
	Driver       string   // store.driver
	DSN          string   // store.dsn; with Shards, unused unless set to one of them
	FallbackDSNs []string // store.fallback_dsns: further addresses of the same cluster
	Shards       []string // store.shards: independent databases sharing every tag's IDs
	ShardSlots   int      // store.shard_slots
	Migrate      bool     // store.migrate
}

// Segment is the segment section.
type Segment struct {
	Enabled              bool          // segment.enabled
	RefillMin, RefillMax time.Duration // segment.refill_min < segment.refill_max
	MaxStep              int64         // segment.max_step
	PreloadAt            float64       // segment.preload_at
	TagRefresh           time.Duration // segment.tag_refresh
	WaitTimeout          time.Duration // segment.wait_timeout
	MaxBatch             int           // segment.max_batch
	MaxRange             int64         // segment.max_range
	SeedTags             []SeedTag     // segment.seed_tags
	OpaqueKey            string        // segment.opaque_key, hex; never logged
	ClockTolerance       time.Duration // segment.clock_tolerance
	RequireToken         bool          // segment.require_token
}

// SeedTag is one entry of segment.seed_tags.
type SeedTag struct {
	// Tag is the business tag, valid by leafd.ValidateTag.
	Tag string
	// Step is the table step the tag is created with, 1..store.MaxTableStep.
	Step int64
}

// Snowflake is the snowflake section.
type Snowflake struct {
	Enabled  bool     // snowflake.enabled
	WorkerID WorkerID // snowflake.worker_id
	Epoch    int64    // snowflake.epoch
	// snowflake.time_bits, snowflake.worker_bits, snowflake.sequence_bits,
	// which add up to 63.
	TimeBits, WorkerBits, SequenceBits int
	MaxBackward                        time.Duration // snowflake.max_backward
	LeaseTTL                           time.Duration // snowflake.lease_ttl
	MaxBorrow                          time.Duration // snowflake.max_borrow
	Workers                            int           // snowflake.workers
	RandomStart                        bool          // snowflake.random_start
	// UnprotectedFixedID is snowflake.unprotected_fixed_id: nothing then
	// stops a second server with the same worker id, nor a restart with
	// the clock set back.
	UnprotectedFixedID bool
	RequireToken       bool // snowflake.require_token
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

// ParseWorkerID parses "auto" (any case) or a non-negative decimal number.
// The upper bound depends on snowflake.worker_bits and is checked by Load.
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
	// Token is admin.token, trimmed (a secret mounted with a trailing
	// newline); empty switches the admin routes off.
	Token            string
	ProtectDashboard bool // admin.protect_dashboard
}

// Log is the log section.
type Log struct {
	Level  string // log.level
	Format string // log.format
}

// Metrics is the metrics section.
type Metrics struct {
	PerTag string // metrics.per_tag: how much GET /metrics tells about each segment tag
}

// Default returns the built-in defaults: docs/contract.md section 7 with no
// seed tags, so that a production database never gets a demo tag by
// accident.
func Default() *Config {
	c := new(Config)
	for _, f := range fields() {
		f.set(c, f.def)
	}
	return c
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

// validate returns the problems of c, judging the epoch against now: each
// key's own (its field's check), then those that involve several keys,
// leaving out a key already refused on its own. from tells where the value
// of a key came from, for the messages that involve a second key; nil means
// nowhere known (a Config built by hand).
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
	refused := make(map[string]bool)
	for _, f := range fields() {
		if f.check == nil {
			continue
		}
		for _, p := range f.check(c) {
			p.Key = cmp.Or(p.Key, f.key)
			refused[p.Key] = true
			ps = append(ps, p)
		}
	}
	bad := func(key, format string, args ...any) *KeyError {
		p := &KeyError{Key: key, Message: fmt.Sprintf(format, args...)}
		if !refused[key] {
			ps = append(ps, p)
		}
		return p
	}

	// The write timeout runs from the end of a request's headers to the end
	// of its answer: it must leave a request time to wait for a range.
	if c.HTTP.WriteTimeout <= c.Segment.WaitTimeout {
		bad("http.write_timeout", "%s is not longer than segment.wait_timeout (%s): a request that waits for a range would be cut before its answer; make it a few times longer", c.HTTP.WriteTimeout, c.Segment.WaitTimeout).
			also("segment.wait_timeout")
	}
	if _, port, _ := net.SplitHostPort(c.GRPC.Addr); c.GRPC.Addr != "" && c.GRPC.Addr == c.HTTP.Addr && port != "0" {
		bad("grpc.addr", "%q is http.addr as well: give the gRPC API a port of its own", c.GRPC.Addr)
	}
	// store
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
		case kind != "" && store.HasAddresses(c.Store.Driver):
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
	if c.Store.ShardSlots < max(2, len(c.Store.Shards)) || c.Store.ShardSlots > store.MaxShardSlots {
		bad("store.shard_slots", "%d is out of range: use a whole number from %d (the number of databases of store.shards, at least 2) to %d",
			c.Store.ShardSlots, max(2, len(c.Store.Shards)), store.MaxShardSlots)
	}
	if slices.Contains(store.Drivers(), c.Store.Driver) && !store.HasAddresses(c.Store.Driver) && len(c.Store.FallbackDSNs) > 0 {
		bad("store.fallback_dsns", "is set but %s: fallback addresses are for a %s cluster; remove them or change store.driver",
			other("store.driver", c.Store.Driver), strings.Join(store.FallbackDrivers(), " or ")).also("store.driver")
	}

	// segment
	if c.Segment.RefillMax > 0 && c.Segment.RefillMin >= c.Segment.RefillMax {
		bad("segment.refill_min", "%s is not below segment.refill_max (%s): use a refill_min shorter than refill_max (default 15m and 30m)",
			c.Segment.RefillMin, c.Segment.RefillMax).also("segment.refill_max")
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
		bad("snowflake.epoch", "%d is before 1970: %s", sf.Epoch, hintEpoch)
	case sf.Epoch > nowMS:
		bad("snowflake.epoch", "%d (%s) is in the future: %s", sf.Epoch, msTime(sf.Epoch), hintEpoch)
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
	if sf.LeaseTTL >= time.Second && sf.MaxBorrow > sf.LeaseTTL/10 {
		bad("snowflake.max_borrow", "%v is more than a tenth of the lease (%s): use at most %v, or a longer snowflake.lease_ttl "+
			"(the watermark, lease_ttl ahead of the clock, must cover the borrowed time)",
			sf.MaxBorrow, other("snowflake.lease_ttl", sf.LeaseTTL), sf.LeaseTTL/10).also("snowflake.lease_ttl")
	}
	switch {
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

	if c.Admin.ProtectDashboard && c.Admin.Token == "" {
		bad("admin.protect_dashboard", "true needs admin.token: set a token, or leave the dashboard open").also("admin.token")
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
