package config

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/viper"
)

// DefaultFile is the file Load reads when it is given no path and the file
// exists in the working directory.
const DefaultFile = "config.yaml"

// envPrefix starts the environment variable of every key:
// segment.max_step is LEAFD_SEGMENT_MAX_STEP.
const envPrefix = "LEAFD_"

// EnvName returns the environment variable that overrides key, e.g.
// LEAFD_STORE_DSN for store.dsn.
func EnvName(key string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// Load reads the configuration: the built-in defaults, then the file at
// path, then LEAFD_* environment variables, each overriding the one before
// key by key. An empty path means ./config.yaml when it exists and the
// defaults alone when it does not; a path that is given must exist.
//
// Lists come from the environment space-separated:
// LEAFD_STORE_FALLBACK_DSNS="dsn2 dsn3", LEAFD_SEGMENT_SEED_TAGS="order:1000
// pay:500" (tag:step pairs). An environment variable set to the empty
// string counts as not set.
//
// A variable whose name starts with LEAFD_ (in any case) but is no key's is
// refused like an unknown key in the file, unless it starts with a prefix
// reserved for leafd's tests and tools: LEAFD_TEST_, LEAFD_E2E, LEAFD_BENCH_
// or LEAFD_DASHBOARD_PNG.
//
// Load returns an error when the file cannot be read or is not YAML, and
// otherwise every problem it finds at once, joined with errors.Join: each is
// a *KeyError (an unknown key in the file or variable in the environment, a
// value of the wrong kind, a value Validate refuses, or a problem one of
// checks finds) and prints as one line that ends with where the value came
// from.
func Load(path string, checks ...Check) (*Config, error) {
	return load(path, time.Now(), checks)
}

// Check judges what the config package cannot, after the values have
// decoded and been validated: cmd/leafd passes the store's DSN parser. It
// returns a *KeyError with Key and Message for each problem; Load adds
// where the value came from, and drops a problem about a key it has already
// reported.
type Check func(c *Config) []*KeyError

// reservedEnvPrefixes start the LEAFD_ environment variables that are not
// configuration keys but belong to leafd's tests and tools
// (LEAFD_TEST_MYSQL_DSN, LEAFD_E2E_BIN, LEAFD_BENCH_LARGE,
// LEAFD_DASHBOARD_PNG): Load leaves them alone. A new test or tool variable
// takes one of them; docs/configuration.md lists them.
var reservedEnvPrefixes = []string{"LEAFD_TEST_", "LEAFD_E2E", "LEAFD_BENCH_", "LEAFD_DASHBOARD_PNG"}

// load is Load with the clock that judges snowflake.epoch.
func load(path string, now time.Time, checks []Check) (*Config, error) {
	file := path
	if file == "" {
		switch _, err := os.Stat(DefaultFile); {
		case err == nil:
			file = DefaultFile
		case !errors.Is(err, fs.ErrNotExist):
			return nil, fmt.Errorf("configuration file %s: %w", DefaultFile, err)
		}
	}

	v := viper.New()
	v.SetConfigType("yaml")
	var ps []*KeyError
	if file != "" {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("configuration file: %w", err)
		}
		if err := v.ReadConfig(bytes.NewReader(data)); err != nil {
			return nil, fmt.Errorf("configuration file %s: %w", file, err)
		}
		// Before any default is set, AllKeys holds the file's keys only.
		ps = checkKeys(v, v.AllKeys(), file)
	}

	fields := fields()
	c := Default()
	for _, f := range fields {
		v.SetDefault(f.key, f.get(c)) // viper#761: env only reaches keys viper knows
	}
	v.SetEnvPrefix(strings.TrimSuffix(envPrefix, "_"))
	v.SetEnvKeyReplacer(strings.NewReplacer(".", "_"))
	v.AutomaticEnv()

	from := func(key string) origin {
		key = baseKey(key)
		if s, ok := os.LookupEnv(EnvName(key)); ok && s != "" {
			return origin{fromEnv, EnvName(key)}
		}
		if file != "" && v.InConfig(key) {
			return origin{fromFile, file}
		}
		return origin{kind: fromDefault}
	}
	// locate fills in where the value of p's key, or of each of its keys,
	// came from.
	locate := func(p *KeyError) {
		keys := strings.Split(p.Key, ", ")
		if len(keys) == 1 {
			o := from(p.Key)
			p.Source, p.where = o.source(), o.String()
			return
		}
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = k + " " + from(k).String()
		}
		p.where = strings.Join(parts, ", ")
	}
	ps = append(ps, checkEnv(os.Environ())...)

	// failed holds the keys, list entries and sections already reported:
	// what Validate says about them would only repeat it.
	failed := make(map[string]bool)
	fail := func(key string) {
		failed[key] = true
		failed[entryKey(key)] = true
	}
	for _, p := range ps {
		fail(p.Key)
	}
	for _, f := range fields {
		// viper reads a variable named after a section (LEAFD_SEGMENT,
		// refused above) for each of the section's keys.
		if section, _, _ := strings.Cut(f.key, "."); failed[EnvName(section)] {
			fail(section)
		}
	}
	for _, f := range fields {
		if section, _, _ := strings.Cut(f.key, "."); failed[f.key] || failed[section] {
			fail(f.key)
			continue // already reported by checkKeys, e.g. a null value
		}
		var raw any
		if s, ok := os.LookupEnv(EnvName(f.key)); ok && s != "" {
			// Read the environment directly rather than through v.Get,
			// which a variable named after a section (LEAFD_SEGMENT)
			// would shadow.
			raw = s
		} else {
			raw = v.Get(f.key)
		}
		for _, p := range f.set(c, raw) {
			if p.Key == "" {
				p.Key = f.key
			}
			locate(p)
			fail(p.Key)
			ps = append(ps, p)
		}
	}

	// Validate what decoded, leaving out problems that only follow from a
	// value already reported (it was left at its default).
	moot := func(p *KeyError) bool {
		return failed[p.Key] || failed[entryKey(p.Key)] || failed[baseKey(p.Key)] ||
			slices.ContainsFunc(p.related, func(k string) bool { return failed[k] })
	}
	var invalid []*KeyError
	for _, p := range c.validate(now, from) {
		if !moot(p) {
			locate(p)
			invalid = append(invalid, p)
		}
	}
	for _, p := range invalid {
		fail(p.Key)
	}
	ps = append(ps, invalid...)
	// The checks judge what passed: a value already reported is left out.
	for _, check := range checks {
		for _, p := range check(c) {
			if !moot(p) {
				locate(p)
				fail(p.Key)
				ps = append(ps, p)
			}
		}
	}
	if len(ps) > 0 {
		return nil, errors.Join(toErrors(ps)...)
	}
	return c, nil
}

// baseKey returns the key a list entry belongs to:
// segment.seed_tags[1].step → segment.seed_tags.
func baseKey(key string) string {
	if i := strings.IndexByte(key, '['); i >= 0 {
		return key[:i]
	}
	return key
}

// entryKey returns the list entry a key belongs to:
// segment.seed_tags[1].step → segment.seed_tags[1].
func entryKey(key string) string {
	if i := strings.IndexByte(key, ']'); i >= 0 {
		return key[:i+1]
	}
	return key
}

// checkKeys reports every key of the file that is not a key of the
// configuration, every section that is not a mapping and every key with no
// value.
func checkKeys(v *viper.Viper, keys []string, file string) []*KeyError {
	sort.Strings(keys)
	known := make(map[string]field)
	sections := make(map[string][]string) // section → its keys, in order
	var top []string
	for _, f := range fields() {
		known[f.key] = f
		sec, name, _ := strings.Cut(f.key, ".")
		if _, ok := sections[sec]; !ok {
			top = append(top, sec)
		}
		sections[sec] = append(sections[sec], name)
	}

	var ps []*KeyError
	reported := make(map[string]bool)
	report := func(key, format string, args ...any) {
		if reported[key] {
			return
		}
		reported[key] = true
		o := origin{fromFile, file}
		ps = append(ps, &KeyError{Key: key, Message: fmt.Sprintf(format, args...), Source: o.source(), where: o.String()})
	}
	for _, key := range keys {
		if f, ok := known[key]; ok {
			if !v.InConfig(key) && !f.nullOK {
				report(key, "has no value: %s, or remove the key", f.hint)
			}
			continue
		}
		parts := strings.Split(key, ".")
		if names, ok := sections[key]; ok { // a section that is not a mapping
			if v.Get(key) != nil {
				report(key, "%s is not a mapping: use the keys %s", show(v.Get(key)), strings.Join(names, ", "))
			}
			continue
		}
		if len(parts) > 2 {
			if f, ok := known[parts[0]+"."+parts[1]]; ok { // a value that is a mapping
				report(f.key, "is a mapping: %s", f.hint)
				continue
			}
		}
		if names, ok := sections[parts[0]]; ok {
			unknown := parts[0] + "." + parts[1]
			report(unknown, "unknown key%s: the keys of %s are %s", suggest(parts[1], names, parts[0]+"."),
				parts[0], strings.Join(names, ", "))
			continue
		}
		report(parts[0], "unknown key%s: the top-level keys are %s", suggest(parts[0], top, ""), strings.Join(top, ", "))
	}
	return ps
}

// checkEnv reports every variable of environ whose name starts with LEAFD_
// (in any case) and is neither a key's nor reserved. A variable set to the
// empty string counts as unset, here as for the keys.
func checkEnv(environ []string) []*KeyError {
	var names []string
	known := make(map[string]bool)
	for _, f := range fields() {
		names = append(names, EnvName(f.key))
		known[EnvName(f.key)] = true
	}
	var unknown []string
	for _, kv := range environ {
		name, value, _ := strings.Cut(kv, "=")
		upper := strings.ToUpper(name)
		if value == "" || known[name] || !strings.HasPrefix(upper, envPrefix) ||
			slices.ContainsFunc(reservedEnvPrefixes, func(p string) bool { return strings.HasPrefix(name, p) }) {
			continue
		}
		unknown = append(unknown, name)
	}
	sort.Strings(unknown)
	ps := make([]*KeyError, 0, len(unknown))
	for _, name := range unknown {
		// Names are compared in upper case: leafd_http_addr is a typo too.
		ps = append(ps, &KeyError{Key: name, Source: name, Message: fmt.Sprintf(
			"unknown environment variable%s: leafd reads LEAFD_ plus a key in upper case with dots as underscores (LEAFD_STORE_DSN), "+
				"and leaves alone the names that start with %s; rename or unset it",
			suggest(strings.ToUpper(name), names, ""), strings.Join(reservedEnvPrefixes, ", "))})
	}
	return ps
}

// suggest returns " (did you mean X?)" for the name closest to typo, or ""
// when none is close.
func suggest(typo string, names []string, prefix string) string {
	best, bestDist := "", len(typo)/2+1
	if bestDist > 3 {
		bestDist = 3
	}
	for _, n := range names {
		if d := distance(typo, n); d <= bestDist && (best == "" || d < distance(typo, best)) {
			best = n
		}
	}
	if best == "" {
		return ""
	}
	return " (did you mean " + prefix + best + "?)"
}

// distance is the Levenshtein distance of a and b, bytewise.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// field is one key of the configuration: how to read it into a Config and
// what its default is.
type field struct {
	key string
	// hint says which values the key accepts.
	hint string
	// nullOK means a key with no value in the file is the empty default,
	// not a mistake.
	nullOK bool
	// get returns the key's value in c, the form SetDefault is given.
	get func(c *Config) any
	// set decodes raw (from the file, the environment or the default)
	// into c. A problem with an empty Key is about this field's key.
	set func(c *Config, raw any) []*KeyError
}

// fields lists every key, in the order of docs/contract.md section 7 (but for
// snowflake.worker_id).
func fields() []field {
	return []field{
		stringField("http.addr", hintAddr, false, func(c *Config) *string { return &c.HTTP.Addr }),
		durationField("http.shutdown_timeout", func(c *Config) *time.Duration { return &c.HTTP.ShutdownTimeout }),
		smallIntField("http.max_connections", hintMaxConnections(), func(c *Config) *int { return &c.HTTP.MaxConnections }),
		listField("http.trusted_proxies", hintProxies, func(c *Config) *[]string { return &c.HTTP.TrustedProxies }),
		durationField("http.read_header_timeout", func(c *Config) *time.Duration { return &c.HTTP.ReadHeaderTimeout }),
		durationField("http.read_timeout", func(c *Config) *time.Duration { return &c.HTTP.ReadTimeout }),
		durationField("http.write_timeout", func(c *Config) *time.Duration { return &c.HTTP.WriteTimeout }),
		durationField("http.idle_timeout", func(c *Config) *time.Duration { return &c.HTTP.IdleTimeout }),

		stringField("grpc.addr", hintGRPCAddr, true, func(c *Config) *string { return &c.GRPC.Addr }),
		smallIntField("grpc.max_connections", hintMaxConnections(), func(c *Config) *int { return &c.GRPC.MaxConnections }),
		smallIntField("grpc.max_concurrent_streams", hintMaxStreams(), func(c *Config) *int { return &c.GRPC.MaxConcurrentStreams }),
		durationField("grpc.idle_timeout", func(c *Config) *time.Duration { return &c.GRPC.IdleTimeout }),
		durationField("grpc.keepalive_time", func(c *Config) *time.Duration { return &c.GRPC.KeepaliveTime }),
		durationField("grpc.keepalive_timeout", func(c *Config) *time.Duration { return &c.GRPC.KeepaliveTimeout }),

		lowerField("store.driver", hintDriver, func(c *Config) *string { return &c.Store.Driver }),
		stringField("store.dsn", hintDSN, false, func(c *Config) *string { return &c.Store.DSN }),
		listField("store.fallback_dsns", hintFallbackDSNs, func(c *Config) *[]string { return &c.Store.FallbackDSNs }),
		listField("store.shards", hintFallbackDSNs, func(c *Config) *[]string { return &c.Store.Shards }),
		smallIntField("store.shard_slots", "use a whole number from 2 to 1024", func(c *Config) *int { return &c.Store.ShardSlots }),
		boolField("store.migrate", func(c *Config) *bool { return &c.Store.Migrate }),

		boolField("segment.enabled", func(c *Config) *bool { return &c.Segment.Enabled }),
		durationField("segment.refill_min", func(c *Config) *time.Duration { return &c.Segment.RefillMin }),
		durationField("segment.refill_max", func(c *Config) *time.Duration { return &c.Segment.RefillMax }),
		intField("segment.max_step", hintMaxStep, func(c *Config) *int64 { return &c.Segment.MaxStep }),
		floatField("segment.preload_at", hintPreload, func(c *Config) *float64 { return &c.Segment.PreloadAt }),
		durationField("segment.tag_refresh", func(c *Config) *time.Duration { return &c.Segment.TagRefresh }),
		durationField("segment.wait_timeout", func(c *Config) *time.Duration { return &c.Segment.WaitTimeout }),
		smallIntField("segment.max_batch", hintMaxBatch(), func(c *Config) *int { return &c.Segment.MaxBatch }),
		intField("segment.max_range", hintMaxRange(), func(c *Config) *int64 { return &c.Segment.MaxRange }),
		seedTagsField(),
		stringField("segment.opaque_key", "use at least 32 hex digits (128 bits)", true, func(c *Config) *string { return &c.Segment.OpaqueKey }),
		boolField("segment.require_token", func(c *Config) *bool { return &c.Segment.RequireToken }),

		boolField("snowflake.enabled", func(c *Config) *bool { return &c.Snowflake.Enabled }),
		intField("snowflake.epoch", hintEpoch(), func(c *Config) *int64 { return &c.Snowflake.Epoch }),
		smallIntField("snowflake.time_bits", hintBits, func(c *Config) *int { return &c.Snowflake.TimeBits }),
		smallIntField("snowflake.worker_bits", hintBits, func(c *Config) *int { return &c.Snowflake.WorkerBits }),
		smallIntField("snowflake.sequence_bits", hintBits, func(c *Config) *int { return &c.Snowflake.SequenceBits }),
		workerIDField(), // after the bits: its hint names the bound they set
		durationField("snowflake.max_backward", func(c *Config) *time.Duration { return &c.Snowflake.MaxBackward }),
		durationField("snowflake.lease_ttl", func(c *Config) *time.Duration { return &c.Snowflake.LeaseTTL }),
		durationHintField("snowflake.max_borrow", hintMaxBorrow, func(c *Config) *time.Duration { return &c.Snowflake.MaxBorrow }),
		smallIntField("snowflake.workers", hintWorkers, func(c *Config) *int { return &c.Snowflake.Workers }),
		boolField("snowflake.random_start", func(c *Config) *bool { return &c.Snowflake.RandomStart }),
		boolField("snowflake.unprotected_fixed_id", func(c *Config) *bool { return &c.Snowflake.UnprotectedFixedID }),
		boolField("snowflake.require_token", func(c *Config) *bool { return &c.Snowflake.RequireToken }),

		tokenField(),
		boolField("admin.protect_dashboard", func(c *Config) *bool { return &c.Admin.ProtectDashboard }),

		lowerField("log.level", hintLevel, func(c *Config) *string { return &c.Log.Level }),
		lowerField("log.format", hintFormat, func(c *Config) *string { return &c.Log.Format }),

		lowerField("metrics.per_tag", hintPerTag, func(c *Config) *string { return &c.Metrics.PerTag }),
	}
}

// problem is the usual result of a set function: one message about the
// field's own key.
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

func stringField(key, hint string, nullOK bool, p func(*Config) *string) field {
	return field{key: key, hint: hint, nullOK: nullOK,
		get: func(c *Config) any { return *p(c) },
		set: func(c *Config, raw any) []*KeyError {
			s, ok := raw.(string)
			if !ok {
				if raw == nil && nullOK {
					*p(c) = ""
					return nil
				}
				return problem("%s is not a string: %s (quote it)", show(raw), hint)
			}
			*p(c) = s
			return nil
		}}
}

// lowerField is a string field whose values are words: any case is
// accepted and kept in lower case.
func lowerField(key, hint string, p func(*Config) *string) field {
	f := stringField(key, hint, false, p)
	set := f.set
	f.set = func(c *Config, raw any) []*KeyError {
		if s, ok := raw.(string); ok {
			raw = strings.ToLower(strings.TrimSpace(s))
		}
		return set(c, raw)
	}
	return f
}

func durationField(key string, p func(*Config) *time.Duration) field {
	return durationHintField(key, hintDuration, p)
}

// durationHintField is durationField with a hint of its own, for a key
// whose range is not that of hintDuration.
func durationHintField(key, hint string, p func(*Config) *time.Duration) field {
	return field{key: key, hint: hint,
		get: func(c *Config) any { return p(c).String() },
		set: func(c *Config, raw any) []*KeyError {
			switch v := raw.(type) {
			case time.Duration:
				*p(c) = v
				return nil
			case string:
				d, err := time.ParseDuration(strings.TrimSpace(v))
				if err != nil {
					return problem("%q is not a duration: %s", v, hint)
				}
				*p(c) = d
				return nil
			case int, int64, uint64, float64:
				return problem("%v has no unit: %s", v, hint)
			}
			return problem("%s is not a duration: %s", show(raw), hint)
		}}
}

func boolField(key string, p func(*Config) *bool) field {
	return field{key: key, hint: hintBool,
		get: func(c *Config) any { return *p(c) },
		set: func(c *Config, raw any) []*KeyError {
			switch v := raw.(type) {
			case bool:
				*p(c) = v
				return nil
			case string:
				b, err := strconv.ParseBool(strings.TrimSpace(v))
				if err != nil {
					return problem("%q is not a boolean: %s", v, hintBool)
				}
				*p(c) = b
				return nil
			}
			return problem("%s is not a boolean: %s", show(raw), hintBool)
		}}
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

func intField(key, hint string, p func(*Config) *int64) field {
	return field{key: key, hint: hint,
		get: func(c *Config) any { return *p(c) },
		set: func(c *Config, raw any) []*KeyError {
			n, ok := toInt64(raw)
			if !ok {
				return problem("%s is not a whole number: %s", show(raw), hint)
			}
			*p(c) = n
			return nil
		}}
}

// smallIntField is an int field whose accepted values are far inside the
// range of int32.
func smallIntField(key, hint string, p func(*Config) *int) field {
	return field{key: key, hint: hint,
		get: func(c *Config) any { return *p(c) },
		set: func(c *Config, raw any) []*KeyError {
			n, ok := toInt64(raw)
			if !ok {
				return problem("%s is not a whole number: %s", show(raw), hint)
			}
			if n < math.MinInt32 || n > math.MaxInt32 {
				return problem("%d is out of range: %s", n, hint)
			}
			*p(c) = int(n)
			return nil
		}}
}

func floatField(key, hint string, p func(*Config) *float64) field {
	return field{key: key, hint: hint,
		get: func(c *Config) any { return *p(c) },
		set: func(c *Config, raw any) []*KeyError {
			switch v := raw.(type) {
			case float64:
				*p(c) = v
				return nil
			case int:
				*p(c) = float64(v)
				return nil
			case string:
				f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
				if err != nil {
					return problem("%q is not a number: %s", v, hint)
				}
				*p(c) = f
				return nil
			}
			return problem("%s is not a number: %s", show(raw), hint)
		}}
}

const hintFallbackDSNs = "use a list of data source names (space-separated in the environment)"

// tokenField is admin.token: a string, trimmed, so that a secret mounted
// from a file with a trailing newline is the token it holds.
func tokenField() field {
	f := stringField("admin.token", hintToken, true, func(c *Config) *string { return &c.Admin.Token })
	set := f.set
	f.set = func(c *Config, raw any) []*KeyError {
		if s, ok := raw.(string); ok {
			raw = strings.TrimSpace(s)
		}
		return set(c, raw)
	}
	return f
}

// listField is a list of strings: a YAML list in the file, space-separated
// words in the environment.
func listField(key, hint string, p func(*Config) *[]string) field {
	return field{key: key, hint: hint, nullOK: true,
		get: func(c *Config) any { return slices.Clone(*p(c)) },
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

const hintSeedTags = "use a list of {tag: NAME, step: N} in the file, or tag:step pairs separated by spaces in the environment (order:1000 pay:500)"

// seedTagsField is segment.seed_tags: a list of {tag, step} mappings in the
// file, "tag:step" words in the environment.
func seedTagsField() field {
	const key = "segment.seed_tags"
	return field{key: key, hint: hintSeedTags, nullOK: true,
		get: func(c *Config) any { return slices.Clone(c.Segment.SeedTags) },
		set: func(c *Config, raw any) []*KeyError {
			var (
				tags []SeedTag
				ps   []*KeyError
			)
			bad := func(i int, format string, args ...any) {
				ps = append(ps, &KeyError{Key: fmt.Sprintf("%s[%d]", key, i), Message: fmt.Sprintf(format, args...)})
			}
			switch v := raw.(type) {
			case nil:
				tags = []SeedTag{}
			case []SeedTag:
				tags = slices.Clone(v)
			case string:
				for i, word := range strings.Fields(v) {
					t, err := parseSeedTag(word)
					if err != nil {
						bad(i, "%v: %s", err, hintSeedTags)
					}
					tags = append(tags, t)
				}
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
			// that Validate reports their problems too; the problems of an
			// entry that did not decode are about that entry only.
			if tags == nil {
				tags = []SeedTag{}
			}
			c.Segment.SeedTags = tags
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
	names := make([]string, 0, len(m))
	for name := range m {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
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
		bad(key+".step", "is missing: %s", hintSeedStep())
	} else if n, ok := toInt64(raw); !ok {
		bad(key+".step", "%s is not a whole number: %s", show(raw), hintSeedStep())
	} else {
		t.Step = n
	}
	return t, ps
}

func workerIDField() field {
	const key = "snowflake.worker_id"
	return field{key: key, hint: hintWorkerID(-1),
		get: func(c *Config) any { return c.Snowflake.WorkerID.String() },
		set: func(c *Config, raw any) []*KeyError {
			hint := hintWorkerID(-1)
			if sf := c.Snowflake; sf.TimeBits+sf.WorkerBits+sf.SequenceBits == layoutBits {
				hint = hintWorkerID(sf.WorkerBits) // the bits are decoded before
			}
			var (
				w  WorkerID
				ok = true
			)
			switch v := raw.(type) {
			case WorkerID:
				w = v
			case string:
				var err error
				w, err = ParseWorkerID(v)
				ok = err == nil
			default:
				var n int64
				n, ok = toInt64(raw)
				w = WorkerID{ID: n}
				ok = ok && n >= 0
			}
			if !ok {
				return problem("%s: %s", show(raw), hint)
			}
			c.Snowflake.WorkerID = w
			return nil
		}}
}
