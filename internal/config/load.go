package config

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"sort"
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
// value of the wrong kind, a value validate refuses, or a problem one of
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
		v.SetDefault(f.key, f.def) // viper#761: env only reaches keys viper knows
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
	// what validate says about them would only repeat it.
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
		section, _, _ := strings.Cut(f.key, ".")
		if failed[EnvName(section)] {
			fail(section)
		}
		if failed[f.key] || failed[section] {
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
			p.Key = cmp.Or(p.Key, f.key)
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
	for _, f := range fields() {
		names = append(names, EnvName(f.key))
	}
	var unknown []string
	for _, kv := range environ {
		name, value, _ := strings.Cut(kv, "=")
		upper := strings.ToUpper(name)
		if value == "" || slices.Contains(names, name) || !strings.HasPrefix(upper, envPrefix) ||
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
	best, bestDist := "", min(len(typo)/2+1, 3)
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
