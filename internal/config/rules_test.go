package config_test

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/leafd/leafd/internal/config"
	"github.com/leafd/leafd/internal/testkit/testdb"
	"github.com/leafd/leafd/store"
)

// loadWith loads the file (none when empty) from an empty directory with
// env as the only LEAFD_ variables.
func loadWith(t *testing.T, file string, env map[string]string, checks ...config.Check) (*config.Config, error, string) {
	t.Helper()
	cleanEnv(t)
	for k, v := range env {
		t.Setenv(k, v)
	}
	dir := t.TempDir()
	t.Chdir(dir)
	path := ""
	if file != "" {
		path = writeFile(t, file+"\n")
	}
	c, err := config.Load(path, checks...)
	return c, err, path
}

// serverDSNs returns an engine reached at network addresses, the first of
// store.FallbackDrivers, and n distinct DSNs of it: its example DSN naming
// the databases leaf0, leaf1, …, for the keys any such engine takes.
func serverDSNs(t *testing.T, n int) (driver string, dsns []string) {
	t.Helper()
	servers := store.FallbackDrivers()
	if len(servers) == 0 {
		t.Fatal("no engine reached at network addresses is registered")
	}
	driver = servers[0]
	for i := range n {
		dsns = append(dsns, testdb.WithDatabase(t, driver, store.ExampleDSN(driver), fmt.Sprintf("leaf%d", i)))
	}
	return driver, dsns
}

// defaultDSNs returns n distinct DSNs of the default engine
// (store.DefaultDriver), fresh databases of testdb.
func defaultDSNs(t *testing.T, n int) []string {
	t.Helper()
	var dsns []string
	for range n {
		dsns = append(dsns, testdb.DSN(t, store.DefaultDriver()))
	}
	return dsns
}

func TestLoadDSNMustFitDriver(t *testing.T) {
	type dsnCase struct {
		name string
		file string
		env  map[string]string
		want []string // parts of the one message, about store.dsn
	}
	// The example DSN of every engine given to every other, as every
	// origin of the two keys has it; what each engine reads as its own
	// is its package's test (store.DSNKinds).
	dflt, dfltDSN := store.DefaultDriver(), config.Default().Store.DSN
	var tests []dsnCase
	for _, driver := range store.Drivers() {
		for _, kind := range store.Drivers() {
			if kind == driver {
				continue
			}
			dsn := store.ExampleDSN(kind)
			is := func(dsn string) string {
				return fmt.Sprintf("%q is a %s DSN but store.driver is %s", store.MaskDSN(dsn), store.EngineName(kind), driver)
			}
			// The two fixes, the likelier first: the other driver, but
			// for a DSN of the default engine, most likely the default
			// DSN left as it was.
			fix := func(driverKey, dsnKey string) string {
				fixDriver := driverKey + " to " + kind
				fixDSN := fmt.Sprintf("%s to a %s DSN such as %s", dsnKey, store.EngineName(driver), store.ExampleDSN(driver))
				if kind == dflt {
					fixDriver, fixDSN = fixDSN, fixDriver
				}
				return "set " + fixDriver + ", or " + fixDSN
			}
			name := kind + "DSNWith" + driver
			tests = append(tests,
				dsnCase{name + "/FromEnv", "", map[string]string{"LEAFD_STORE_DRIVER": driver, "LEAFD_STORE_DSN": dsn},
					[]string{is(dsn) + " (from LEAFD_STORE_DRIVER)", fix("LEAFD_STORE_DRIVER", "LEAFD_STORE_DSN"), "(from LEAFD_STORE_DSN)"}},
				dsnCase{name + "/InFile", fmt.Sprintf("store: {driver: %s, dsn: %q}", driver, dsn), nil,
					[]string{is(dsn) + " (in ", fix("store.driver", "store.dsn")}},
				dsnCase{name + "/InFileWithDriverFromEnv", fmt.Sprintf("store: {driver: %s, dsn: %q}", kind, dsn),
					map[string]string{"LEAFD_STORE_DRIVER": driver},
					[]string{is(dsn) + " (from LEAFD_STORE_DRIVER)", fix("LEAFD_STORE_DRIVER", "store.dsn"), "(in "}})
			if driver == dflt {
				tests = append(tests, dsnCase{name + "/DefaultDriver", "", map[string]string{"LEAFD_STORE_DSN": dsn},
					[]string{is(dsn) + " (built-in default)", fix("store.driver", "LEAFD_STORE_DSN"), "(from LEAFD_STORE_DSN)"}})
			}
			if kind == dflt {
				tests = append(tests, dsnCase{name + "/DefaultDSN", "", map[string]string{"LEAFD_STORE_DRIVER": driver},
					[]string{is(dfltDSN) + " (from LEAFD_STORE_DRIVER)", fix("LEAFD_STORE_DRIVER", "store.dsn"), "(built-in default)"}})
			}
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err, _ := loadWith(t, tt.file, tt.env)
			ps := problems(err)
			if len(ps) != 1 || ps[0].Key != "store.dsn" {
				t.Fatalf("Load: %v; want one problem with store.dsn", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q\ndoes not say %q", err, w)
				}
			}
		})
	}
	// The password of a DSN of each engine with accounts, given to the
	// default engine; how each engine masks its DSNs is its package's test.
	for _, kind := range store.FallbackDrivers() {
		t.Run("PasswordMasked/"+kind, func(t *testing.T) {
			dsn := testdb.WithLogin(t, kind, store.ExampleDSN(kind), "leafd", "s3cr/et")
			_, err, _ := loadWith(t, "", map[string]string{"LEAFD_STORE_DSN": dsn})
			masked := store.MaskDSN(dsn)
			if err == nil || masked == dsn || strings.Contains(err.Error(), "s3cr") || !strings.Contains(err.Error(), strconv.Quote(masked)) {
				t.Fatalf("Load: %v; want the DSN with its password masked, %q", err, masked)
			}
		})
	}
	// A fallback of another engine than store.driver's, on every engine
	// that takes fallbacks.
	for _, driver := range store.FallbackDrivers() {
		for _, kind := range store.Drivers() {
			if kind == driver {
				continue
			}
			t.Run("Fallback/"+kind+"DSNWith"+driver, func(t *testing.T) {
				ex := store.ExampleDSN(driver)
				file := fmt.Sprintf("store: {driver: %s, dsn: %q, fallback_dsns: [%q, %q]}",
					driver, ex, testdb.WithAddr(t, driver, ex, "b:3306"), store.ExampleDSN(kind))
				_, err, _ := loadWith(t, file, nil)
				ps := problems(err)
				if len(ps) != 1 || ps[0].Key != "store.fallback_dsns[1]" || !strings.Contains(ps[0].Message, "is a "+store.EngineName(kind)+" DSN") {
					t.Fatalf("Load: %v; want store.fallback_dsns[1] refused", err)
				}
			})
		}
	}
	for _, driver := range store.Drivers() {
		t.Run("BadDriverIsNotAlsoAMismatch/"+driver, func(t *testing.T) {
			_, err, _ := loadWith(t, "", map[string]string{"LEAFD_STORE_DRIVER": "oracle", "LEAFD_STORE_DSN": store.ExampleDSN(driver)})
			if ps := problems(err); len(ps) != 1 || ps[0].Key != "store.driver" {
				t.Fatalf("Load: %v; want only store.driver", err)
			}
		})
		// Which DSNs each engine takes as its own is its package's test
		// (store.OtherEngine).
		t.Run("Accepts/"+driver, func(t *testing.T) {
			if _, err, _ := loadWith(t, "", map[string]string{"LEAFD_STORE_DRIVER": driver, "LEAFD_STORE_DSN": store.ExampleDSN(driver)}); err != nil {
				t.Fatal(err)
			}
		})
		if driver == store.DefaultDriver() {
			continue
		}
		t.Run("Validate/"+driver, func(t *testing.T) {
			c := config.Default()
			c.Store.Driver = driver
			ps := problems(c.Validate())
			if len(ps) != 1 || ps[0].Key != "store.dsn" || strings.Contains(ps[0].Error(), "(") && strings.Contains(ps[0].Error(), "default)") {
				t.Fatalf("Validate: %v; want store.dsn, with no origin on a hand-built config", c.Validate())
			}
		})
	}
}

func TestLoadUnknownEnv(t *testing.T) {
	tests := []struct {
		name, variable, suggestion string
	}{
		{"MissingUnderscore", "LEAFD_HTTPADDR", "did you mean LEAFD_HTTP_ADDR?"},
		{"Misspelt", "LEAFD_SEGMENT_REFIL_MIN", "did you mean LEAFD_SEGMENT_REFILL_MIN?"},
		{"LowerCase", "leafd_log_level", "did you mean LEAFD_LOG_LEVEL?"},
		{"SectionName", "LEAFD_SEGMENT", ""},
		{"NothingClose", "LEAFD_COLOUR", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err, _ := loadWith(t, "", map[string]string{tt.variable: "x"})
			ps := problems(err)
			if len(ps) != 1 || ps[0].Key != tt.variable || ps[0].Source != tt.variable {
				t.Fatalf("Load: %v; want one problem named %s", err, tt.variable)
			}
			line := err.Error()
			if !strings.HasPrefix(line, tt.variable+": unknown environment variable") ||
				!strings.Contains(line, "LEAFD_TEST_, LEAFD_E2E, LEAFD_BENCH_") {
				t.Fatalf("%q does not name the variable and the reserved prefixes", line)
			}
			if tt.suggestion != "" && !strings.Contains(line, tt.suggestion) {
				t.Fatalf("%q does not say %q", line, tt.suggestion)
			}
			if tt.suggestion == "" && strings.Contains(line, "did you mean") {
				t.Fatalf("%q suggests a name", line)
			}
		})
	}
	t.Run("Reserved", func(t *testing.T) {
		env := map[string]string{"LEAFD_TEST_ANYTHING": "1", "LEAFD_E2E": "chaos", "LEAFD_E2E_BIN": "/x",
			"LEAFD_BENCH_LARGE": "1", "LEAFD_DASHBOARD_PNG": "/tmp/x.png"}
		if _, err, _ := loadWith(t, "", env); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("EmptyCountsAsUnset", func(t *testing.T) {
		if _, err, _ := loadWith(t, "", map[string]string{"LEAFD_HTTPADDR": ""}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("AmongOtherProblems", func(t *testing.T) {
		_, err, _ := loadWith(t, "log: {level: loud}", map[string]string{"LEAFD_HTTPADDR": ":1", "LEAFD_SEGMENT_MAX_STEP": "0"})
		var keys []string
		for _, p := range problems(err) {
			keys = append(keys, p.Key)
		}
		slices.Sort(keys)
		if !slices.Equal(keys, []string{"LEAFD_HTTPADDR", "log.level", "segment.max_step"}) {
			t.Fatalf("problems %v in %v", keys, err)
		}
	})
}

// TestEveryLEAFDVariableOfTheRepository: each LEAFD_ name the repository's
// code, scripts and deployment files use is a key's or reserved, so that
// none of them stops a leafd that inherits it. (This package's own tests
// and the process test of unknown variables name typos on purpose.)
func TestEveryLEAFDVariableOfTheRepository(t *testing.T) {
	cleanEnv(t)
	root := "../.."
	name := regexp.MustCompile(`LEAFD_[A-Z0-9_]+`)
	found := make(map[string]string) // name → a file using it
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") && rel != "." || rel == "internal/config" {
				return filepath.SkipDir
			}
			return nil
		}
		base := d.Name()
		ext := filepath.Ext(base)
		if ext != ".go" && ext != ".sh" && ext != ".yml" && ext != ".yaml" && base != "Dockerfile" && base != "run" ||
			base == "config_process_test.go" && filepath.Dir(rel) == "cmd/leafd" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, n := range name.FindAllString(string(b), -1) {
			found[n] = rel
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) < 20 {
		t.Fatalf("found only %d LEAFD_ names: not the repository?", len(found))
	}
	for n, file := range found {
		err := func() error {
			t.Setenv(n, "1")
			defer os.Unsetenv(n)
			_, err := config.Load("", func(*config.Config) []*config.KeyError { return nil })
			return err
		}()
		for _, p := range problems(err) {
			if p.Key == n {
				t.Errorf("%s (in %s) is refused: %v", n, file, p)
			}
		}
	}
}

func TestLoadSaysWhereEachValueCameFrom(t *testing.T) {
	t.Run("SeveralKeys", func(t *testing.T) {
		_, err, path := loadWith(t, "snowflake: {sequence_bits: 13}", map[string]string{"LEAFD_SNOWFLAKE_WORKER_BITS": "10"})
		want := "(snowflake.time_bits built-in default, snowflake.worker_bits from LEAFD_SNOWFLAKE_WORKER_BITS, snowflake.sequence_bits in " + path + ")"
		if err == nil || !strings.HasSuffix(err.Error(), want) {
			t.Fatalf("Load: %v\nwant it to end with %s", err, want)
		}
	})
	t.Run("SecondKeyOfAMessage", func(t *testing.T) {
		_, fallbacks := serverDSNs(t, 1)
		_, err, _ := loadWith(t, "", map[string]string{"LEAFD_STORE_FALLBACK_DSNS": fallbacks[0]})
		if err == nil || !strings.Contains(err.Error(), "is set but store.driver is "+store.DefaultDriver()+" (built-in default)") ||
			!strings.HasSuffix(err.Error(), "(from LEAFD_STORE_FALLBACK_DSNS)") {
			t.Fatalf("Load: %v", err)
		}
	})
	t.Run("DefaultFile", func(t *testing.T) {
		cleanEnv(t)
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte("segment: {max_batch: 0}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		t.Chdir(dir)
		_, err := config.Load("")
		if ps := problems(err); len(ps) != 1 || ps[0].Source != "config.yaml" || !strings.HasSuffix(err.Error(), "(in config.yaml)") {
			t.Fatalf("Load: %v", err)
		}
	})
}

func TestLoadChecks(t *testing.T) {
	check := func(c *config.Config) []*config.KeyError {
		var ps []*config.KeyError
		if c.Store.DSN != "good" {
			ps = append(ps, &config.KeyError{Key: "store.dsn", Message: "is not good"})
		}
		return append(ps, &config.KeyError{Key: "store.fallback_dsns[0]", Message: "is not good either"})
	}
	t.Run("ReportedWithTheOthers", func(t *testing.T) {
		server, _ := serverDSNs(t, 0)
		_, err, path := loadWith(t, "store: {driver: "+server+", dsn: bad, fallback_dsns: [x]}\nlog: {level: loud}", nil, check)
		got := err.Error()
		for _, want := range []string{"log.level: ", "store.dsn: is not good (in " + path + ")", "store.fallback_dsns[0]: is not good either (in " + path + ")"} {
			if !strings.Contains(got, want) {
				t.Errorf("%q\ndoes not say %q", got, want)
			}
		}
	})
	t.Run("NotAfterTheSameKeyFailed", func(t *testing.T) {
		server, _ := serverDSNs(t, 0)
		_, err, _ := loadWith(t, "", map[string]string{"LEAFD_STORE_DRIVER": server}, check)
		ps := problems(err)
		if len(ps) != 2 || ps[0].Key != "store.dsn" || !strings.Contains(ps[0].Message, store.EngineName(store.DefaultDriver())+" DSN") {
			t.Fatalf("Load: %v; want the mismatch, not the check's store.dsn", err)
		}
	})
	t.Run("Passing", func(t *testing.T) {
		pass := func(*config.Config) []*config.KeyError { return nil }
		if _, err, _ := loadWith(t, "", nil, pass); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("FileErrorsAreNotKeyErrors", func(t *testing.T) {
		_, err := config.Load(filepath.Join(t.TempDir(), "missing.yaml"), check)
		if !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
	})
}

func TestWarnings(t *testing.T) {
	c := config.Default()
	if w := c.Warnings(); len(w) != 0 {
		t.Fatalf("defaults warn: %v", w)
	}
	for _, seg := range []bool{true, false} {
		c.Segment.Enabled, c.Snowflake.Enabled = seg, !seg
		if w := c.Warnings(); len(w) != 0 {
			t.Fatalf("one mode on warns: %v", w)
		}
	}
	c.Segment.Enabled, c.Snowflake.Enabled = false, false
	w := c.Warnings()
	if len(w) != 1 || !strings.Contains(w[0], "segment.enabled and snowflake.enabled are both false") {
		t.Fatalf("Warnings() = %q", w)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("both modes off is refused, want allowed: %v", err)
	}
}

func TestLoadShards(t *testing.T) {
	server, dsns := serverDSNs(t, 4)
	dflt := defaultDSNs(t, 3)
	c, err, _ := loadWith(t, "", map[string]string{"LEAFD_STORE_DRIVER": server,
		"LEAFD_STORE_DSN": dsns[0], "LEAFD_STORE_SHARDS": strings.Join(dsns[:3], " ")})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Store.Shards) != 3 || c.Store.ShardSlots != 16 {
		t.Fatalf("store: %+v", c.Store)
	}
	for _, tt := range []struct {
		name string
		env  map[string]string
		key  string
		want string
	}{
		{"One", map[string]string{"LEAFD_STORE_SHARDS": dflt[0]}, "store.shards", "list at least two"},
		{"WithFallbacks", map[string]string{"LEAFD_STORE_DRIVER": server, "LEAFD_STORE_DSN": dsns[0],
			"LEAFD_STORE_SHARDS": dsns[0] + " " + dsns[1], "LEAFD_STORE_FALLBACK_DSNS": dsns[3]}, "store.fallback_dsns", "each database of store.shards stands alone"},
		{"SlotsBelowDatabases", map[string]string{"LEAFD_STORE_SHARDS": strings.Join(dflt, " "), "LEAFD_STORE_SHARD_SLOTS": "2"}, "store.shard_slots", "from 3"},
		{"SlotsTooMany", map[string]string{"LEAFD_STORE_SHARD_SLOTS": "5000"}, "store.shard_slots", "to 1024"},
		{"OtherKind", map[string]string{"LEAFD_STORE_SHARDS": dflt[0] + " " + dsns[1]}, "store.shards[1]",
			"is a " + store.EngineName(server) + " DSN but store.driver is " + store.DefaultDriver()},
		// Split at its spaces, each piece would have been a SQLite file.
		{"KeywordValueWithSpacesSplit", map[string]string{"LEAFD_STORE_SHARDS": "host = a dbname = l host = b dbname = l"},
			"store.shards[1]", "a piece of a keyword=value DSN split at its spaces"},
		// With no space after '=', the pieces are "host", "=a", …: "=secret" would be a file.
		{"KeywordValueSpaceBeforeEqualsSplit", map[string]string{"LEAFD_STORE_SHARDS": "host =a password =secret dbname =l"},
			"store.shards[1]", "a piece of a keyword=value DSN split at its spaces"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err, _ := loadWith(t, "", tt.env)
			ps := problems(err)
			if len(ps) == 0 || ps[0].Key != tt.key || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Load: %v; want %s saying %q", err, tt.key, tt.want)
			}
		})
	}
}

// shardsQuickStart returns the variables the quick start of
// docs/shards.md exports, as it writes them.
func shardsQuickStart(t *testing.T) map[string]string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "shards.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, block, _ := strings.Cut(string(doc), "```console\n")
	block, _, _ = strings.Cut(block, "```")
	env := map[string]string{}
	for _, line := range strings.Split(block, "\n") {
		if kv, ok := strings.CutPrefix(line, "$ export "); ok {
			name, value, _ := strings.Cut(kv, "=")
			env[name] = strings.Trim(value, "'")
		}
	}
	if env["LEAFD_STORE_SHARDS"] == "" {
		t.Fatalf("the quick start of docs/shards.md exports no LEAFD_STORE_SHARDS: %v", env)
	}
	return env
}

// The quick start of docs/shards.md, as written, passes: with
// store.shards, store.dsn is not used, and its default is not judged
// against store.driver. Set to a database store.shards does not list, it
// is refused, naming both.
func TestShardsQuickStart(t *testing.T) {
	env := shardsQuickStart(t)
	checkShards := func(c *config.Config) []*config.KeyError {
		var ps []*config.KeyError
		for i, dsn := range c.Store.Shards {
			if err := store.CheckDSN(c.Store.Driver, dsn); err != nil {
				ps = append(ps, &config.KeyError{Key: fmt.Sprintf("store.shards[%d]", i), Message: err.Error()})
			}
		}
		return ps
	}
	c, err, _ := loadWith(t, "", env, checkShards)
	if err != nil {
		t.Fatalf("the quick start of docs/shards.md: %v", err)
	}
	if len(c.Store.Shards) != 3 || c.Store.Driver != env["LEAFD_STORE_DRIVER"] || !store.HasAddresses(c.Store.Driver) {
		t.Fatalf("store: %+v; want the quick start's three databases of an engine at network addresses", c.Store)
	}
	shards := strings.Fields(env["LEAFD_STORE_SHARDS"])
	// A database the shards do not list, with a password.
	outside := testdb.WithLogin(t, c.Store.Driver, testdb.WithDatabase(t, c.Store.Driver, shards[0], "leaf_outside"), "leafd", "pw")
	for dsn, refused := range map[string]bool{shards[0]: false, shards[2]: false, outside: true} {
		with := maps.Clone(env)
		with["LEAFD_STORE_DSN"] = dsn
		_, err, _ := loadWith(t, "", with, checkShards)
		ps := problems(err)
		switch {
		case refused && (len(ps) != 1 || ps[0].Key != "store.dsn" || !strings.Contains(err.Error(), "is not one of store.shards") ||
			strings.Contains(err.Error(), ":pw@")):
			t.Errorf("store.dsn %s beside the quick start's store.shards: %v; want it refused, the password masked", dsn, err)
		case !refused && err != nil:
			t.Errorf("store.dsn %s, one of store.shards: %v", dsn, err)
		}
	}
}

// The shipped config.yaml sets store.dsn to the default SQLite file. With
// store.driver sqlite that file may be the database the deployment grew
// from, and SQLite shards without it are refused like any other store.dsn;
// with another driver it cannot be, and the shards are taken.
func TestShardsBesideTheDefaultSQLiteFile(t *testing.T) {
	file := "store:\n  dsn: \"" + config.Default().Store.DSN + "\""
	_, err, _ := loadWith(t, file, map[string]string{"LEAFD_STORE_SHARDS": strings.Join(defaultDSNs(t, 2), " ")})
	if ps := problems(err); len(ps) != 1 || ps[0].Key != "store.dsn" || !strings.Contains(err.Error(), "is not one of store.shards") {
		t.Errorf("shards of the default engine without the store.dsn the file sets: %v; want store.dsn refused", err)
	}
	server, dsns := serverDSNs(t, 2)
	_, err, _ = loadWith(t, file, map[string]string{"LEAFD_STORE_DRIVER": server, "LEAFD_STORE_SHARDS": strings.Join(dsns, " ")})
	if err != nil {
		t.Errorf("%s shards beside the shipped store.dsn: %v", server, err)
	}
}

func TestLoadOpaqueKey(t *testing.T) {
	c, err, _ := loadWith(t, "", map[string]string{"LEAFD_SEGMENT_OPAQUE_KEY": "00112233445566778899aabbccddeeff"})
	if err != nil || c.Segment.OpaqueKey != "00112233445566778899aabbccddeeff" {
		t.Fatalf("Load: %v, %q", err, c.Segment.OpaqueKey)
	}
	for key, want := range map[string]string{"xyz-not-hex-at-all-but-long-enough": "is not hex", "0011223344556677": "has 64 bits"} {
		_, err, _ := loadWith(t, "", map[string]string{"LEAFD_SEGMENT_OPAQUE_KEY": key})
		if ps := problems(err); len(ps) != 1 || ps[0].Key != "segment.opaque_key" || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), key) {
			t.Errorf("key %q: %v; want segment.opaque_key saying %q, without the key", key, err, want)
		}
	}
}
