package config

import (
	"fmt"
	"maps"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/leafd/leafd"
	leafhttp "github.com/leafd/leafd/http"
	"github.com/leafd/leafd/rpc"
	"github.com/leafd/leafd/segment"
	"github.com/leafd/leafd/snowflake"
	"github.com/leafd/leafd/store"
	_ "github.com/leafd/leafd/store/all" // the engines store.driver accepts, registered before the defaults are read
)

// field declares one key, the one place that says what it is: its name
// (and so its environment variable, EnvName), its default, how a value is
// decoded, the values it accepts and what it refuses on its own. Default
// and Load read the declarations; tests hold docs/configuration.md,
// the defaults of docs/contract.md and config.yaml to them.
type field struct {
	key string
	// hint says which values the key accepts.
	hint string
	// nullOK means a key with no value in the file is the empty default,
	// not a mistake.
	nullOK bool
	// def is the default, in a form set accepts.
	def any
	// set decodes raw (from the file, the environment or def) into c. A
	// problem with an empty Key is about this field's key.
	set func(c *Config, raw any) []*KeyError
	// check returns the problems of the key's value on its own; those
	// that involve other keys are validate's. Nil accepts every value
	// set does.
	check func(c *Config) []*KeyError
}

// fields declares every key, in the order of docs/configuration.md (but
// for snowflake.worker_id, whose hint needs the bits).
func fields() []field {
	return []field{
		text("http.addr", hintAddr, "127.0.0.1:8080", func(c *Config) *string { return &c.HTTP.Addr }, checkAddr),
		duration("http.shutdown_timeout", 10*time.Second, func(c *Config) *time.Duration { return &c.HTTP.ShutdownTimeout }),
		number("http.max_connections", hintMaxConnections, leafhttp.DefaultMaxConnections, func(c *Config) *int { return &c.HTTP.MaxConnections }, between(1, maxConnectionsLimit)),
		listField("http.trusted_proxies", hintProxies, func(c *Config) *[]string { return &c.HTTP.TrustedProxies }, checkProxies),
		duration("http.read_header_timeout", leafhttp.DefaultReadHeaderTimeout, func(c *Config) *time.Duration { return &c.HTTP.ReadHeaderTimeout }),
		duration("http.read_timeout", leafhttp.DefaultReadTimeout, func(c *Config) *time.Duration { return &c.HTTP.ReadTimeout }),
		// Longer than segment.wait_timeout, which validate checks.
		newField("http.write_timeout", hintDuration, leafhttp.DefaultWriteTimeout, func(c *Config) *time.Duration { return &c.HTTP.WriteTimeout }, decodeDuration, nil),
		duration("http.idle_timeout", leafhttp.DefaultIdleTimeout, func(c *Config) *time.Duration { return &c.HTTP.IdleTimeout }),

		nullable(text("grpc.addr", hintGRPCAddr, "", func(c *Config) *string { return &c.GRPC.Addr }, checkGRPCAddr)),
		number("grpc.max_connections", hintMaxConnections, 128, func(c *Config) *int { return &c.GRPC.MaxConnections }, between(1, maxConnectionsLimit)),
		number("grpc.max_concurrent_streams", hintMaxStreams, rpc.DefaultMaxConcurrentStreams, func(c *Config) *int { return &c.GRPC.MaxConcurrentStreams }, between(1, maxStreamsLimit)),
		duration("grpc.idle_timeout", rpc.DefaultIdleTimeout, func(c *Config) *time.Duration { return &c.GRPC.IdleTimeout }),
		duration("grpc.keepalive_time", rpc.DefaultKeepaliveTime, func(c *Config) *time.Duration { return &c.GRPC.KeepaliveTime }),
		duration("grpc.keepalive_timeout", rpc.DefaultKeepaliveTimeout, func(c *Config) *time.Duration { return &c.GRPC.KeepaliveTimeout }),

		lower(text("store.driver", hintDriver, store.DefaultDriver(), func(c *Config) *string { return &c.Store.Driver }, func(v, hint string) string {
			if !slices.Contains(store.Drivers(), v) {
				return fmt.Sprintf("%q is not supported: %s", v, hint)
			}
			return ""
		})),
		text("store.dsn", hintDSN, store.ExampleDSN(store.DefaultDriver()), func(c *Config) *string { return &c.Store.DSN }, nil),
		listField("store.fallback_dsns", hintDSNs, func(c *Config) *[]string { return &c.Store.FallbackDSNs }, nil),
		listField("store.shards", hintDSNs, func(c *Config) *[]string { return &c.Store.Shards }, nil),
		number("store.shard_slots", fmt.Sprintf("use a whole number from 2 to %d", store.MaxShardSlots), store.DefaultShardSlots, func(c *Config) *int { return &c.Store.ShardSlots }, nil),
		flag("store.migrate", true, func(c *Config) *bool { return &c.Store.Migrate }),

		flag("segment.enabled", true, func(c *Config) *bool { return &c.Segment.Enabled }),
		duration("segment.refill_min", segment.DefaultRefillMin, func(c *Config) *time.Duration { return &c.Segment.RefillMin }),
		duration("segment.refill_max", segment.DefaultRefillMax, func(c *Config) *time.Duration { return &c.Segment.RefillMax }),
		number("segment.max_step", "use a whole number of at least 1", segment.DefaultMaxStep, func(c *Config) *int64 { return &c.Segment.MaxStep }, between[int64](1, math.MaxInt64)),
		newField("segment.preload_at", "use a fraction in (0, 1)", segment.DefaultPreloadAt, func(c *Config) *float64 { return &c.Segment.PreloadAt }, decodeFloat, func(v float64, hint string) string {
			if !(v > 0 && v < 1) { // also catches NaN
				return fmt.Sprintf("%s is out of range: %s", strconv.FormatFloat(v, 'g', -1, 64), hint)
			}
			return ""
		}),
		duration("segment.tag_refresh", segment.DefaultTagRefresh, func(c *Config) *time.Duration { return &c.Segment.TagRefresh }),
		duration("segment.wait_timeout", segment.DefaultWaitTimeout, func(c *Config) *time.Duration { return &c.Segment.WaitTimeout }),
		number("segment.max_batch", hintUpTo(MaxBatchLimit), segment.DefaultMaxBatch, func(c *Config) *int { return &c.Segment.MaxBatch }, between(1, MaxBatchLimit)),
		number("segment.max_range", hintUpTo(MaxRangeLimit), segment.DefaultMaxRange, func(c *Config) *int64 { return &c.Segment.MaxRange }, between[int64](1, MaxRangeLimit)),
		seedTagsField(),
		nullable(text("segment.opaque_key", "use at least 32 hex digits (128 bits)", "", func(c *Config) *string { return &c.Segment.OpaqueKey }, func(v, _ string) string {
			if _, err := segment.ParseOpaqueKey(v); v != "" && err != nil {
				return err.Error() // never the key itself
			}
			return ""
		})),
		duration("segment.clock_tolerance", segment.DefaultClockTolerance, func(c *Config) *time.Duration { return &c.Segment.ClockTolerance }),
		flag("segment.require_token", false, func(c *Config) *bool { return &c.Segment.RequireToken }),

		flag("snowflake.enabled", true, func(c *Config) *bool { return &c.Snowflake.Enabled }),
		number("snowflake.epoch", hintEpoch, snowflake.DefaultEpoch, func(c *Config) *int64 { return &c.Snowflake.Epoch }, nil),
		number("snowflake.time_bits", hintBits, snowflake.DefaultTimeBits, func(c *Config) *int { return &c.Snowflake.TimeBits }, nil),
		number("snowflake.worker_bits", hintBits, snowflake.DefaultWorkerBits, func(c *Config) *int { return &c.Snowflake.WorkerBits }, nil),
		number("snowflake.sequence_bits", hintBits, snowflake.DefaultSequenceBits, func(c *Config) *int { return &c.Snowflake.SequenceBits }, nil),
		workerIDField(), // after the bits: its hint names the bound they set
		newField("snowflake.max_backward", hintDuration, snowflake.DefaultMaxBackward, func(c *Config) *time.Duration { return &c.Snowflake.MaxBackward }, decodeDuration, func(v time.Duration, _ string) string {
			if v < time.Millisecond || v > time.Second {
				return fmt.Sprintf("%v is out of range: use 1ms to 1s (a request waits this long at most)", v)
			}
			return ""
		}),
		newField("snowflake.lease_ttl", hintDuration, snowflake.DefaultLeaseTTL, func(c *Config) *time.Duration { return &c.Snowflake.LeaseTTL }, decodeDuration, func(v time.Duration, _ string) string {
			if v < time.Second {
				return fmt.Sprintf("%v is too short: use at least 1s (renewals come every third of it)", v)
			}
			return ""
		}),
		newField("snowflake.max_borrow", hintMaxBorrow, 0, func(c *Config) *time.Duration { return &c.Snowflake.MaxBorrow }, decodeDuration, func(v time.Duration, hint string) string {
			if v < 0 || v > time.Second {
				return fmt.Sprintf("%v is out of range: %s", v, hint)
			}
			return ""
		}),
		number("snowflake.workers", hintWorkers, 1, func(c *Config) *int { return &c.Snowflake.Workers }, between(1, MaxWorkers)),
		flag("snowflake.random_start", false, func(c *Config) *bool { return &c.Snowflake.RandomStart }),
		flag("snowflake.unprotected_fixed_id", false, func(c *Config) *bool { return &c.Snowflake.UnprotectedFixedID }),
		flag("snowflake.require_token", false, func(c *Config) *bool { return &c.Snowflake.RequireToken }),

		// Trimmed, so that a secret mounted from a file with a trailing
		// newline is the token it holds.
		trimmed(nullable(text("admin.token", hintToken, "", func(c *Config) *string { return &c.Admin.Token }, checkToken))),
		flag("admin.protect_dashboard", false, func(c *Config) *bool { return &c.Admin.ProtectDashboard }),

		oneOf("log.level", "a level", "info", func(c *Config) *string { return &c.Log.Level }, "debug", "info", "warn", "error"),
		oneOf("log.format", "a format", "text", func(c *Config) *string { return &c.Log.Format }, "text", "json"),

		oneOf("metrics.per_tag", "a level of detail", "basic", func(c *Config) *string { return &c.Metrics.PerTag }, "full", "basic", "off"),
	}
}

// Limits of the values the keys accept.
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
	// layoutBits is what the three snowflake bit counts add up to.
	layoutBits = 63
)

// Hints: what each key accepts, appended to every message about it.
const (
	hintAddr      = "use host:port, such as 127.0.0.1:8080 or :8080"
	hintGRPCAddr  = "use host:port, such as 127.0.0.1:9090 or :9090, or leave it empty to serve no gRPC"
	hintDuration  = "use a Go duration greater than 0, such as 10s, 15m or 500ms"
	hintBool      = "use true or false"
	hintProxies   = "use a list of IP addresses or CIDR ranges, such as 10.0.0.0/8 (space-separated in the environment); empty trusts no proxy"
	hintMaxBorrow = "use a Go duration from 0 (off) to 1s, such as 5ms, and at most a tenth of snowflake.lease_ttl"
	hintDSNs      = "use a list of data source names (space-separated in the environment)"
	hintSeedTags  = "use a list of {tag: NAME, step: N} in the file, or tag:step pairs separated by spaces in the environment (order:1000 pay:500)"
)

var (
	hintDriver = "use " + orList(store.Drivers())
	hintDSN    = func() string { // an example of every engine's
		var ex []string
		for _, d := range store.Drivers() {
			ex = append(ex, store.ExampleDSN(d)+" ("+d+")")
		}
		return "use a data source name, such as " + orList(ex)
	}()
	hintBits = fmt.Sprintf("use whole numbers of at least 1 that add up to 63 (default %d, %d, %d)",
		snowflake.DefaultTimeBits, snowflake.DefaultWorkerBits, snowflake.DefaultSequenceBits)
	hintEpoch = fmt.Sprintf("use a Unix time in milliseconds that is not in the future (default %d, Twitter's and Leaf's)", snowflake.DefaultEpoch)
	hintToken = fmt.Sprintf("use a random string of at least %d characters without whitespace, such as the output of openssl rand -hex 24; "+
		"empty switches the admin routes off", MinTokenLen)
	hintWorkers        = fmt.Sprintf("use a whole number from 1 (the default) to %d", MaxWorkers)
	hintMaxConnections = hintUpTo(maxConnectionsLimit)
	hintMaxStreams     = hintUpTo(maxStreamsLimit)
	hintSeedStep       = hintUpTo(store.MaxTableStep)
)

func hintUpTo(n int64) string { return fmt.Sprintf("use a whole number from 1 to %d", n) }

// hintWorkerID names the accepted worker ids; bits < 0 means the layout is
// itself invalid, so the bound is not known.
func hintWorkerID(bits int) string {
	if bits < 1 || bits > 62 {
		return "use auto or a number 0..(2^snowflake.worker_bits-1)"
	}
	return fmt.Sprintf("use auto or a number 0..%d (2^snowflake.worker_bits-1)", int64(1)<<bits-1)
}

// newField declares a key whose value is *p(c): decode turns a raw value
// into it or into a message, and check, when not nil, returns a message
// for a value the key refuses. Both are given the hint.
func newField[T any](key, hint string, def T, p func(*Config) *T, decode func(raw any, hint string) (T, string),
	check func(v T, hint string) string) field {
	f := field{key: key, hint: hint, def: def, set: func(c *Config, raw any) []*KeyError {
		v, msg := decode(raw, hint)
		if msg != "" {
			return problem("%s", msg)
		}
		*p(c) = v
		return nil
	}}
	if check != nil {
		f.check = func(c *Config) []*KeyError {
			if msg := check(*p(c), hint); msg != "" {
				return problem("%s", msg)
			}
			return nil
		}
	}
	return f
}

// duration declares a duration that must be greater than 0.
func duration(key string, def time.Duration, p func(*Config) *time.Duration) field {
	return newField(key, hintDuration, def, p, decodeDuration, func(d time.Duration, hint string) string {
		if d <= 0 {
			return fmt.Sprintf("%s is not greater than 0: %s", d, hint)
		}
		return ""
	})
}

func text(key, hint, def string, p func(*Config) *string, check func(v, hint string) string) field {
	return newField(key, hint, def, p, func(raw any, hint string) (string, string) {
		if s, ok := raw.(string); ok {
			return s, ""
		}
		return "", fmt.Sprintf("%s is not a string: %s (quote it)", show(raw), hint)
	}, check)
}

// nullable makes a string key with no value in the file the empty string.
func nullable(f field) field {
	f.nullOK = true
	return f.wrap(func(raw any) any {
		if raw == nil {
			return ""
		}
		return raw
	})
}

// lower makes a string key whose values are words: any case is accepted
// and kept in lower case.
func lower(f field) field {
	return f.wrapString(func(s string) string { return strings.ToLower(strings.TrimSpace(s)) })
}

func trimmed(f field) field { return f.wrapString(strings.TrimSpace) }

// wrap makes f's set take the raw value through pre first.
func (f field) wrap(pre func(raw any) any) field {
	set := f.set
	f.set = func(c *Config, raw any) []*KeyError { return set(c, pre(raw)) }
	return f
}

// wrapString makes f's set take a raw string through pre first.
func (f field) wrapString(pre func(string) string) field {
	return f.wrap(func(raw any) any {
		if s, ok := raw.(string); ok {
			return pre(s)
		}
		return raw
	})
}

// oneOf declares a word out of values, what the message calls "a level".
func oneOf(key, what, def string, p func(*Config) *string, values ...string) field {
	hint := "use " + orList(values)
	return lower(text(key, hint, def, p, func(v, hint string) string {
		if !slices.Contains(values, v) {
			return fmt.Sprintf("%q is not %s: %s", v, what, hint)
		}
		return ""
	}))
}

func flag(key string, def bool, p func(*Config) *bool) field {
	return newField(key, hintBool, def, p, func(raw any, hint string) (bool, string) {
		switch v := raw.(type) {
		case bool:
			return v, ""
		case string:
			if b, err := strconv.ParseBool(strings.TrimSpace(v)); err == nil {
				return b, ""
			}
			return false, fmt.Sprintf("%q is not a boolean: %s", v, hint)
		}
		return false, fmt.Sprintf("%s is not a boolean: %s", show(raw), hint)
	}, nil)
}

// number declares a whole number. An int key's values are far inside the
// range of int32.
func number[T int | int64](key, hint string, def T, p func(*Config) *T, check func(v T, hint string) string) field {
	return newField(key, hint, def, p, func(raw any, hint string) (T, string) {
		n, ok := toInt64(raw)
		if !ok {
			return 0, fmt.Sprintf("%s is not a whole number: %s", show(raw), hint)
		}
		if _, small := any(def).(int); small && (n < math.MinInt32 || n > math.MaxInt32) {
			return 0, fmt.Sprintf("%d is out of range: %s", n, hint)
		}
		return T(n), ""
	}, check)
}

// between refuses a number outside lo..hi.
func between[T int | int64](lo, hi T) func(v T, hint string) string {
	return func(v T, hint string) string {
		if v < lo || v > hi {
			return fmt.Sprintf("%d is out of range: %s", v, hint)
		}
		return ""
	}
}

func decodeDuration(raw any, hint string) (time.Duration, string) {
	switch v := raw.(type) {
	case time.Duration:
		return v, ""
	case string:
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if err != nil {
			return 0, fmt.Sprintf("%q is not a duration: %s", v, hint)
		}
		return d, ""
	case int, int64, uint64, float64:
		return 0, fmt.Sprintf("%v has no unit: %s", v, hint)
	}
	return 0, fmt.Sprintf("%s is not a duration: %s", show(raw), hint)
}

func decodeFloat(raw any, hint string) (float64, string) {
	switch v := raw.(type) {
	case float64:
		return v, ""
	case int:
		return float64(v), ""
	case string:
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil {
			return 0, fmt.Sprintf("%q is not a number: %s", v, hint)
		}
		return f, ""
	}
	return 0, fmt.Sprintf("%s is not a number: %s", show(raw), hint)
}

// toInt64 converts a whole number from YAML (int, a large uint64, a float
// like 1e6) or the environment (a decimal string).
func toInt64(raw any) (int64, bool) {
	switch v := raw.(type) {
	case int:
		return int64(v), true
	case int64:
		return v, true
	case uint64:
		if v <= math.MaxInt64 {
			return int64(v), true
		}
	case float64:
		if v == math.Trunc(v) && v >= math.MinInt64 && v < math.MaxInt64 {
			return int64(v), true
		}
	case string:
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		return n, err == nil
	}
	return 0, false
}

func checkAddr(addr, hint string) string {
	if addr == "" {
		return "is empty: " + hint
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Sprintf("%q is not host:port: %s", addr, hint)
	}
	return ""
}

func checkGRPCAddr(addr, hint string) string {
	if addr == "" {
		return ""
	}
	return checkAddr(addr, hint)
}

// checkToken never repeats the token in a message: it is a secret.
func checkToken(t, hint string) string {
	switch {
	case t == "":
	case strings.IndexFunc(t, unicode.IsSpace) >= 0:
		return "holds whitespace inside: " + hint
	case utf8.RuneCountInString(t) < MinTokenLen:
		return fmt.Sprintf("is %d characters, too short to resist guessing: %s", utf8.RuneCountInString(t), hint)
	}
	return ""
}

func checkProxies(c *Config) []*KeyError {
	var ps []*KeyError
	for i, p := range c.HTTP.TrustedProxies {
		if _, _, err := net.ParseCIDR(p); err != nil && net.ParseIP(p) == nil {
			ps = append(ps, (&KeyError{Key: fmt.Sprintf("http.trusted_proxies[%d]", i),
				Message: fmt.Sprintf("%q is neither an IP address nor a CIDR range: %s", p, hintProxies)}).also("http.trusted_proxies"))
		}
	}
	return ps
}

// problem is the usual result of a set or check function: one message
// about the field's own key.
func problem(format string, args ...any) []*KeyError {
	return []*KeyError{{Message: fmt.Sprintf(format, args...)}}
}

// show formats a raw value for a message: strings quoted, the rest as Go
// prints them.
func show(raw any) string {
	switch v := raw.(type) {
	case string:
		return strconv.Quote(v)
	case nil:
		return "an empty value"
	case []any:
		return "a list"
	case map[string]any:
		return "a mapping"
	}
	return fmt.Sprint(raw)
}

// listField is a list of strings: a YAML list in the file, space-separated
// words in the environment. Its default is empty.
func listField(key, hint string, p func(*Config) *[]string, check func(c *Config) []*KeyError) field {
	return field{key: key, hint: hint, nullOK: true, def: []string{}, check: check,
		set: func(c *Config, raw any) []*KeyError {
			switch v := raw.(type) {
			case nil:
				*p(c) = []string{}
			case []string:
				*p(c) = slices.Clone(v)
			case string:
				*p(c) = strings.Fields(v)
			case []any:
				list := make([]string, 0, len(v))
				var ps []*KeyError
				for i, e := range v {
					s, ok := e.(string)
					if !ok {
						ps = append(ps, &KeyError{Key: fmt.Sprintf("%s[%d]", key, i),
							Message: fmt.Sprintf("%s is not a string: %s", show(e), hint)})
						continue
					}
					list = append(list, s)
				}
				if ps != nil {
					return ps
				}
				*p(c) = list
			default:
				return problem("%s is not a list: %s", show(raw), hint)
			}
			return nil
		}}
}

// seedTagsField is segment.seed_tags: a list of {tag, step} mappings in the
// file, "tag:step" words in the environment. The built-in default is none,
// so that a production database never gets a demo tag by accident.
func seedTagsField() field {
	const key = "segment.seed_tags"
	return field{key: key, hint: hintSeedTags, nullOK: true, def: []SeedTag{},
		set: func(c *Config, raw any) []*KeyError {
			var (
				tags []SeedTag
				ps   []*KeyError
			)
			bad := func(i int, format string, args ...any) {
				ps = append(ps, &KeyError{Key: fmt.Sprintf("%s[%d]", key, i), Message: fmt.Sprintf(format, args...)})
			}
			if s, ok := raw.(string); ok { // tag:step words, as a list of the file's would be
				var words []any
				for _, w := range strings.Fields(s) {
					words = append(words, w)
				}
				raw = words
			}
			switch v := raw.(type) {
			case nil:
			case []SeedTag:
				tags = slices.Clone(v)
			case []any:
				for i, e := range v {
					switch e := e.(type) {
					case string:
						t, err := parseSeedTag(e)
						if err != nil {
							bad(i, "%v: %s", err, hintSeedTags)
						}
						tags = append(tags, t)
					case map[string]any:
						t, entryProblems := seedTagEntry(fmt.Sprintf("%s[%d]", key, i), e)
						ps = append(ps, entryProblems...)
						tags = append(tags, t)
					default:
						bad(i, "%s is not a {tag, step} mapping: %s", show(e), hintSeedTags)
						tags = append(tags, SeedTag{})
					}
				}
			default:
				return problem("%s is not a list: %s", show(raw), hintSeedTags)
			}
			// Entries that decoded are kept even when others did not, so
			// that validate reports their problems too; the problems of an
			// entry that did not decode are about that entry only.
			if tags == nil {
				tags = []SeedTag{}
			}
			c.Segment.SeedTags = tags
			return ps
		},
		check: func(c *Config) []*KeyError {
			var ps []*KeyError
			bad := func(key, format string, args ...any) {
				ps = append(ps, (&KeyError{Key: key, Message: fmt.Sprintf(format, args...)}).also("segment.seed_tags"))
			}
			seen := make(map[string]int, len(c.Segment.SeedTags))
			for i, s := range c.Segment.SeedTags {
				key := fmt.Sprintf("segment.seed_tags[%d]", i)
				if err := leafd.ValidateTag(s.Tag); err != nil {
					bad(key+".tag", "%s", leafd.ErrorMessage(err))
				} else if j, dup := seen[s.Tag]; dup {
					bad(key+".tag", "%q is already listed as segment.seed_tags[%d]: list each tag once", s.Tag, j)
				} else {
					seen[s.Tag] = i
				}
				if s.Step < 1 || s.Step > store.MaxTableStep {
					bad(key+".step", "%d is out of range: %s", s.Step, hintSeedStep)
				}
			}
			return ps
		}}
}

// parseSeedTag parses "tag:step". Tags may contain colons, so the step is
// what follows the last one.
func parseSeedTag(word string) (SeedTag, error) {
	i := strings.LastIndexByte(word, ':')
	if i < 0 {
		return SeedTag{}, fmt.Errorf("%q has no step", word)
	}
	step, err := strconv.ParseInt(word[i+1:], 10, 64)
	if err != nil {
		return SeedTag{}, fmt.Errorf("%q: step %q is not a whole number", word, word[i+1:])
	}
	return SeedTag{Tag: word[:i], Step: step}, nil
}

// seedTagEntry decodes one {tag, step} mapping of the file.
func seedTagEntry(key string, m map[string]any) (SeedTag, []*KeyError) {
	var (
		t  SeedTag
		ps []*KeyError
	)
	bad := func(k, format string, args ...any) {
		ps = append(ps, &KeyError{Key: k, Message: fmt.Sprintf(format, args...)})
	}
	for _, name := range slices.Sorted(maps.Keys(m)) {
		switch name {
		case "tag", "step":
		default:
			bad(key+"."+name, "unknown key%s: an entry has the keys tag and step", suggest(name, []string{"tag", "step"}, ""))
		}
	}
	switch tag := m["tag"].(type) {
	case string:
		t.Tag = tag
	case nil:
		bad(key+".tag", "is missing: %s", hintSeedTags)
	default:
		bad(key+".tag", "%s is not a string: use a tag name", show(tag))
	}
	if raw, ok := m["step"]; !ok || raw == nil {
		bad(key+".step", "is missing: %s", hintSeedStep)
	} else if n, ok := toInt64(raw); !ok {
		bad(key+".step", "%s is not a whole number: %s", show(raw), hintSeedStep)
	} else {
		t.Step = n
	}
	return t, ps
}

func workerIDField() field {
	return field{key: "snowflake.worker_id", hint: hintWorkerID(-1), def: WorkerID{Auto: true},
		set: func(c *Config, raw any) []*KeyError {
			hint := hintWorkerID(-1)
			if sf := c.Snowflake; sf.TimeBits+sf.WorkerBits+sf.SequenceBits == layoutBits {
				hint = hintWorkerID(sf.WorkerBits) // the bits are decoded before
			}
			w, ok := WorkerID{}, true
			switch v := raw.(type) {
			case WorkerID:
				w = v
			case string:
				var err error
				w, err = ParseWorkerID(v)
				ok = err == nil
			default:
				w.ID, ok = toInt64(raw)
				ok = ok && w.ID >= 0
			}
			if !ok {
				return problem("%s: %s", show(raw), hint)
			}
			c.Snowflake.WorkerID = w
			return nil
		}}
}

// orList joins items as "a, b or c".
func orList(items []string) string {
	if len(items) < 2 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " or " + items[len(items)-1]
}
