package config_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/leafd/leafd/internal/config"
	"github.com/leafd/leafd/internal/testkit/testdb"
	"github.com/leafd/leafd/store"
)

// cleanEnv removes every LEAFD_* variable but the test harness's own for
// the duration of the test, so that the developer's environment does not
// leak into the configuration under test.
func cleanEnv(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "LEAFD_") && !strings.HasPrefix(name, "LEAFD_TEST_") {
			t.Setenv(name, "") // restores the value after the test
			os.Unsetenv(name)
		}
	}
}

// writeFile writes a configuration file into a fresh directory and returns
// its path.
func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "leafd.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// mustLoad loads path and fails the test on any error.
func mustLoad(t *testing.T, path string) *config.Config {
	t.Helper()
	c, err := config.Load(path)
	if err != nil {
		t.Fatalf("Load(%q): %v", path, err)
	}
	return c
}

// problems returns the *KeyErrors in err.
func problems(err error) []*config.KeyError {
	var ps []*config.KeyError
	var walk func(error)
	walk = func(err error) {
		var ke *config.KeyError
		switch {
		case err == nil:
		case errors.As(err, &ke) && ke == err:
			ps = append(ps, ke)
		default:
			if j, ok := err.(interface{ Unwrap() []error }); ok {
				for _, e := range j.Unwrap() {
					walk(e)
				}
			} else {
				walk(errors.Unwrap(err))
			}
		}
	}
	walk(err)
	return ps
}

// spec is the configuration of docs/contract.md section 7, the shipped config.yaml.
func spec() *config.Config {
	return &config.Config{
		HTTP: config.HTTP{Addr: "127.0.0.1:8080", ShutdownTimeout: 10 * time.Second,
			MaxConnections: 1024, TrustedProxies: []string{},
			ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 15 * time.Second,
			WriteTimeout: 60 * time.Second, IdleTimeout: 2 * time.Minute},
		GRPC: config.GRPC{MaxConnections: 128, MaxConcurrentStreams: 100, IdleTimeout: 2 * time.Minute,
			KeepaliveTime: time.Minute, KeepaliveTimeout: 20 * time.Second},
		Store: config.Store{Driver: store.DefaultDriver(), DSN: store.ExampleDSN(store.DefaultDriver()), FallbackDSNs: []string{}, Shards: []string{}, ShardSlots: 16, Migrate: true},
		Segment: config.Segment{
			Enabled: true, RefillMin: 15 * time.Minute, RefillMax: 30 * time.Minute, MaxStep: 1000000,
			PreloadAt: 0.1, TagRefresh: 60 * time.Second, WaitTimeout: 2 * time.Second, MaxBatch: 10000, MaxRange: 1000000, ClockTolerance: time.Second,
			SeedTags: []config.SeedTag{{Tag: "demo", Step: 1000}},
		},
		Snowflake: config.Snowflake{
			Enabled: true, WorkerID: config.WorkerID{Auto: true}, Epoch: 1288834974657,
			TimeBits: 41, WorkerBits: 10, SequenceBits: 12,
			MaxBackward: 5 * time.Millisecond, LeaseTTL: 30 * time.Second, Workers: 1, RandomStart: false,
		},
		Admin:   config.Admin{Token: ""},
		Log:     config.Log{Level: "info", Format: "text"},
		Metrics: config.Metrics{PerTag: "basic"},
	}
}

// builtIn is spec without the seed tags.
func builtIn() *config.Config {
	c := spec()
	c.Segment.SeedTags = []config.SeedTag{}
	return c
}

func TestLoad(t *testing.T) {
	t.Run("DefaultsWithoutFile", func(t *testing.T) {
		cleanEnv(t)
		t.Chdir(t.TempDir())
		c := mustLoad(t, "")
		if !reflect.DeepEqual(c, builtIn()) {
			t.Fatalf("got  %+v\nwant %+v", c, builtIn())
		}
		if !reflect.DeepEqual(config.Default(), builtIn()) {
			t.Fatalf("Default() = %+v\nwant %+v", config.Default(), builtIn())
		}
	})
	t.Run("ShippedConfig", func(t *testing.T) {
		cleanEnv(t)
		c := mustLoad(t, "../../config.yaml")
		if !reflect.DeepEqual(c, spec()) {
			t.Fatalf("got  %+v\nwant %+v", c, spec())
		}
	})
	t.Run("ConfigYAMLInWorkingDirectory", func(t *testing.T) {
		cleanEnv(t)
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte("http: {addr: \":9999\"}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		t.Chdir(dir)
		if c := mustLoad(t, ""); c.HTTP.Addr != ":9999" {
			t.Fatalf("http.addr = %q, want :9999 from ./config.yaml", c.HTTP.Addr)
		}
	})
	t.Run("EmptyFile", func(t *testing.T) {
		cleanEnv(t)
		if c := mustLoad(t, writeFile(t, "")); !reflect.DeepEqual(c, builtIn()) {
			t.Fatalf("got %+v, want the defaults", c)
		}
	})
	t.Run("MissingExplicitFile", func(t *testing.T) {
		cleanEnv(t)
		path := filepath.Join(t.TempDir(), "nonexistent.yaml")
		_, err := config.Load(path)
		if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "nonexistent.yaml") {
			t.Fatalf("Load(missing) = %v; want a not-exist error naming the file", err)
		}
	})
	t.Run("NotYAML", func(t *testing.T) {
		cleanEnv(t)
		path := writeFile(t, "http: [unclosed\n")
		if _, err := config.Load(path); err == nil || !strings.Contains(err.Error(), path) {
			t.Fatalf("Load(bad yaml) = %v; want an error naming the file", err)
		}
	})
	t.Run("DuplicateKey", func(t *testing.T) {
		cleanEnv(t)
		if _, err := config.Load(writeFile(t, "log:\n  level: info\n  level: debug\n")); err == nil {
			t.Fatal("Load accepted a key given twice")
		}
	})
	t.Run("NullValueMeaningEmpty", func(t *testing.T) {
		cleanEnv(t)
		c := mustLoad(t, writeFile(t, "admin:\n  token:\nstore:\n  fallback_dsns:\nsegment:\n  seed_tags:\nlog:\n"))
		if c.Admin.Token != "" || len(c.Store.FallbackDSNs) != 0 || len(c.Segment.SeedTags) != 0 {
			t.Fatalf("got %+v", c)
		}
	})
	t.Run("KeysAreCaseInsensitive", func(t *testing.T) {
		cleanEnv(t)
		if c := mustLoad(t, writeFile(t, "Log:\n  Level: DEBUG\n")); c.Log.Level != "debug" {
			t.Fatalf("log.level = %q, want debug", c.Log.Level)
		}
	})
}

func TestLoadEnv(t *testing.T) {
	// The file sets http.addr, store.driver and segment.max_step; the
	// environment overrides keys both in it and absent from it.
	file := "http:\n  addr: \"127.0.0.1:1\"\nstore:\n  driver: " + store.DefaultDriver() + "\nsegment:\n  max_step: 5\n"
	dsn := testdb.DSN(t, store.DefaultDriver()) // another database of the driver the file sets
	server := store.FallbackDrivers()[0]        // an engine at network addresses, which takes fallbacks
	tests := []struct {
		name  string
		env   map[string]string
		check func(*config.Config) bool
	}{
		{"KeyAbsentFromFile", map[string]string{"LEAFD_STORE_DSN": dsn},
			func(c *config.Config) bool { return c.Store.DSN == dsn }},
		{"KeyPresentInFile", map[string]string{"LEAFD_HTTP_ADDR": "0.0.0.0:8080"},
			func(c *config.Config) bool { return c.HTTP.Addr == "0.0.0.0:8080" }},
		{"IntegerPresentInFile", map[string]string{"LEAFD_SEGMENT_MAX_STEP": "77"},
			func(c *config.Config) bool { return c.Segment.MaxStep == 77 }},
		{"Duration", map[string]string{"LEAFD_SEGMENT_REFILL_MIN": "1m", "LEAFD_HTTP_SHUTDOWN_TIMEOUT": "1500ms"},
			func(c *config.Config) bool {
				return c.Segment.RefillMin == time.Minute && c.HTTP.ShutdownTimeout == 1500*time.Millisecond
			}},
		{"Bool", map[string]string{"LEAFD_SNOWFLAKE_ENABLED": "false", "LEAFD_SNOWFLAKE_RANDOM_START": "true"},
			func(c *config.Config) bool { return !c.Snowflake.Enabled && c.Snowflake.RandomStart }},
		{"Float", map[string]string{"LEAFD_SEGMENT_PRELOAD_AT": "0.25"},
			func(c *config.Config) bool { return c.Segment.PreloadAt == 0.25 }},
		{"Words", map[string]string{"LEAFD_STORE_DRIVER": strings.ToUpper(server), "LEAFD_STORE_DSN": store.ExampleDSN(server), "LEAFD_LOG_LEVEL": "WARN", "LEAFD_LOG_FORMAT": "json"},
			func(c *config.Config) bool {
				return c.Store.Driver == server && c.Log.Level == "warn" && c.Log.Format == "json"
			}},
		{"AdminToken", map[string]string{"LEAFD_ADMIN_TOKEN": "s3cret-0123456789"},
			func(c *config.Config) bool { return c.Admin.Token == "s3cret-0123456789" }},
		// A Kubernetes secret mounted with a trailing newline: the token
		// is what it holds, as the token a client presents is trimmed.
		{"AdminTokenTrimmed", map[string]string{"LEAFD_ADMIN_TOKEN": " s3cret-0123456789\n"},
			func(c *config.Config) bool { return c.Admin.Token == "s3cret-0123456789" }},
		{"MaxConnections", map[string]string{"LEAFD_HTTP_MAX_CONNECTIONS": "50"},
			func(c *config.Config) bool { return c.HTTP.MaxConnections == 50 }},
		{"GRPCLimits", map[string]string{"LEAFD_GRPC_MAX_CONNECTIONS": "40", "LEAFD_GRPC_MAX_CONCURRENT_STREAMS": "8",
			"LEAFD_GRPC_IDLE_TIMEOUT": "30s", "LEAFD_GRPC_KEEPALIVE_TIME": "15s", "LEAFD_GRPC_KEEPALIVE_TIMEOUT": "5s"},
			func(c *config.Config) bool {
				return c.GRPC == config.GRPC{MaxConnections: 40, MaxConcurrentStreams: 8, IdleTimeout: 30 * time.Second,
					KeepaliveTime: 15 * time.Second, KeepaliveTimeout: 5 * time.Second}
			}},
		{"TrustedProxies", map[string]string{"LEAFD_HTTP_TRUSTED_PROXIES": "10.0.0.0/8  192.168.1.7 ::1"},
			func(c *config.Config) bool {
				return reflect.DeepEqual(c.HTTP.TrustedProxies, []string{"10.0.0.0/8", "192.168.1.7", "::1"})
			}},
		{"ProtectDashboard", map[string]string{"LEAFD_ADMIN_PROTECT_DASHBOARD": "true", "LEAFD_ADMIN_TOKEN": "t0123456789abcdef"},
			func(c *config.Config) bool { return c.Admin.ProtectDashboard }},
		{"EmptyMeansUnset", map[string]string{"LEAFD_HTTP_ADDR": ""},
			func(c *config.Config) bool { return c.HTTP.Addr == "127.0.0.1:1" }},
		{"FallbackDSNs", map[string]string{"LEAFD_STORE_DRIVER": server, "LEAFD_STORE_DSN": "dsn1", "LEAFD_STORE_FALLBACK_DSNS": " dsn2  dsn3\tdsn4 "},
			func(c *config.Config) bool {
				return reflect.DeepEqual(c.Store.FallbackDSNs, []string{"dsn2", "dsn3", "dsn4"})
			}},
		{"SeedTags", map[string]string{"LEAFD_SEGMENT_SEED_TAGS": "order:1000 pay:500 a:b:7"},
			func(c *config.Config) bool {
				return reflect.DeepEqual(c.Segment.SeedTags, []config.SeedTag{{"order", 1000}, {"pay", 500}, {"a:b", 7}})
			}},
		{"WorkerIDNumber", map[string]string{"LEAFD_SNOWFLAKE_WORKER_ID": "1023"},
			func(c *config.Config) bool { return c.Snowflake.WorkerID == config.WorkerID{ID: 1023} }},
		{"WorkerIDAuto", map[string]string{"LEAFD_SNOWFLAKE_WORKER_ID": "AUTO"},
			func(c *config.Config) bool { return c.Snowflake.WorkerID == config.WorkerID{Auto: true} }},
		{"MetricsPerTag", map[string]string{"LEAFD_METRICS_PER_TAG": "Full"},
			func(c *config.Config) bool { return c.Metrics.PerTag == "full" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cleanEnv(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			c := mustLoad(t, writeFile(t, file))
			if !tt.check(c) {
				t.Fatalf("env %v: got %+v", tt.env, c)
			}
			if tt.name != "KeyPresentInFile" && tt.name != "EmptyMeansUnset" && c.HTTP.Addr != "127.0.0.1:1" {
				t.Fatalf("http.addr from the file was lost: %q", c.HTTP.Addr)
			}
		})
	}
	t.Run("WithoutFile", func(t *testing.T) {
		cleanEnv(t)
		t.Chdir(t.TempDir())
		t.Setenv("LEAFD_SEGMENT_MAX_BATCH", "12")
		t.Setenv("LEAFD_SEGMENT_SEED_TAGS", "x:3")
		c := mustLoad(t, "")
		if c.Segment.MaxBatch != 12 || !reflect.DeepEqual(c.Segment.SeedTags, []config.SeedTag{{"x", 3}}) {
			t.Fatalf("got %+v", c.Segment)
		}
	})
	t.Run("OverridesFileList", func(t *testing.T) {
		cleanEnv(t)
		t.Setenv("LEAFD_SEGMENT_SEED_TAGS", "b:2")
		c := mustLoad(t, "../../config.yaml")
		if !reflect.DeepEqual(c.Segment.SeedTags, []config.SeedTag{{"b", 2}}) {
			t.Fatalf("seed tags = %+v, want only b:2", c.Segment.SeedTags)
		}
	})
}

func TestLoadFileValues(t *testing.T) {
	server := store.FallbackDrivers()[0] // an engine at network addresses, which takes fallbacks
	tests := []struct {
		name, file string
		check      func(*config.Config) bool
	}{
		{"WorkerIDAuto", "snowflake: {worker_id: auto}",
			func(c *config.Config) bool { return c.Snowflake.WorkerID == config.WorkerID{Auto: true} }},
		{"WorkerIDNumber", "snowflake: {worker_id: 7}",
			func(c *config.Config) bool { return c.Snowflake.WorkerID == config.WorkerID{ID: 7} }},
		{"WorkerIDZero", "snowflake: {worker_id: 0}",
			func(c *config.Config) bool { return c.Snowflake.WorkerID == config.WorkerID{ID: 0} }},
		{"WorkerIDQuotedNumber", "snowflake: {worker_id: \"12\"}",
			func(c *config.Config) bool { return c.Snowflake.WorkerID == config.WorkerID{ID: 12} }},
		{"WorkerIDWiderLayout", "snowflake: {worker_id: 4000, time_bits: 39, worker_bits: 12, sequence_bits: 12}",
			func(c *config.Config) bool { return c.Snowflake.WorkerID == config.WorkerID{ID: 4000} }},
		{"FallbackDSNs", "store: {driver: " + server + ", dsn: a, fallback_dsns: [b, c]}",
			func(c *config.Config) bool { return reflect.DeepEqual(c.Store.FallbackDSNs, []string{"b", "c"}) }},
		{"SeedTagMappings", "segment:\n  seed_tags:\n    - {tag: order, step: 1000}\n    - tag: pay\n      step: 5\n",
			func(c *config.Config) bool {
				return reflect.DeepEqual(c.Segment.SeedTags, []config.SeedTag{{"order", 1000}, {"pay", 5}})
			}},
		{"SeedTagWords", "segment: {seed_tags: [\"order:1000\"]}",
			func(c *config.Config) bool {
				return reflect.DeepEqual(c.Segment.SeedTags, []config.SeedTag{{"order", 1000}})
			}},
		{"ScientificInteger", "segment: {max_step: 1e6}",
			func(c *config.Config) bool { return c.Segment.MaxStep == 1000000 }},
		{"PreloadAtEdge", "segment: {preload_at: 0.999}",
			func(c *config.Config) bool { return c.Segment.PreloadAt == 0.999 }},
		{"MaxBatchLimit", "segment: {max_batch: 1000000}",
			func(c *config.Config) bool { return c.Segment.MaxBatch == 1000000 }},
		{"GRPCAddrPortZero", "http: {addr: \"127.0.0.1:0\"}\ngrpc: {addr: \"127.0.0.1:0\"}",
			func(c *config.Config) bool { return c.GRPC.Addr == "127.0.0.1:0" }},
		{"MaxRange", "segment: {max_range: 1000000000}",
			func(c *config.Config) bool { return c.Segment.MaxRange == 1000000000 }},
		{"MetricsPerTagOff", "metrics: {per_tag: off}",
			func(c *config.Config) bool { return c.Metrics.PerTag == "off" }},
		{"MetricsPerTagFull", "metrics: {per_tag: FULL}",
			func(c *config.Config) bool { return c.Metrics.PerTag == "full" }},
		{"HTTPTimeouts", "http: {read_header_timeout: 2s, read_timeout: 3s, write_timeout: 4s, idle_timeout: 5s}",
			func(c *config.Config) bool {
				h := c.HTTP
				return h.ReadHeaderTimeout == 2*time.Second && h.ReadTimeout == 3*time.Second &&
					h.WriteTimeout == 4*time.Second && h.IdleTimeout == 5*time.Second
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cleanEnv(t)
			c := mustLoad(t, writeFile(t, tt.file+"\n"))
			if !tt.check(c) {
				t.Fatalf("%s: got %+v", tt.file, c)
			}
		})
	}
}

func TestLoadUnknownKey(t *testing.T) {
	tests := []struct {
		name, file, key string
	}{
		{"Nested", "segment:\n  refil_min: 1m\n", "segment.refil_min"},
		{"TopLevelSection", "stor:\n  driver: " + store.DefaultDriver() + "\n", "stor"},
		{"TopLevelScalar", "debug: true\n", "debug"},
		{"DeepUnderSection", "segment:\n  extra:\n    deep: 1\n", "segment.extra"},
		{"SeedTagEntry", "segment:\n  seed_tags:\n    - {tag: demo, stpe: 10}\n", "segment.seed_tags[0].stpe"},
		{"AmongGoodKeys", "http:\n  addr: \":1\"\n  shutdown_timout: 5s\nlog:\n  level: info\n", "http.shutdown_timout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cleanEnv(t)
			_, err := config.Load(writeFile(t, tt.file))
			ps := problems(err)
			if len(ps) == 0 || ps[0].Key != tt.key || !strings.Contains(ps[0].Message, "unknown key") {
				t.Fatalf("Load: %v; want an unknown key error for %s", err, tt.key)
			}
			if !strings.HasPrefix(err.Error(), tt.key+": unknown key") {
				t.Fatalf("error %q does not start with the key", err)
			}
		})
	}
	t.Run("Suggestion", func(t *testing.T) {
		cleanEnv(t)
		_, err := config.Load(writeFile(t, "segment:\n  refil_min: 1m\n"))
		if err == nil || !strings.Contains(err.Error(), "did you mean segment.refill_min?") {
			t.Fatalf("Load: %v; want a suggestion", err)
		}
	})
}

func TestLoadBadValue(t *testing.T) {
	server := store.FallbackDrivers()[0] // an engine at network addresses, which takes fallbacks
	drivers := store.Drivers()
	accepted := strings.Join(drivers[:len(drivers)-1], ", ") + " or " + drivers[len(drivers)-1]
	tests := []struct {
		name string
		file string            // YAML
		env  map[string]string // environment
		key  string            // the key the error names
		want string            // a part of the message: the accepted values
	}{
		{"PreloadAtTooLarge", "segment: {preload_at: 1.5}", nil,
			"segment.preload_at", "1.5 is out of range: use a fraction in (0, 1)"},
		{"PreloadAtOne", "segment: {preload_at: 1}", nil, "segment.preload_at", "fraction in (0, 1)"},
		{"PreloadAtZero", "segment: {preload_at: 0}", nil, "segment.preload_at", "fraction in (0, 1)"},
		{"PreloadAtText", "segment: {preload_at: half}", nil, "segment.preload_at", "fraction in (0, 1)"},
		{"DriverUnsupported", "store: {driver: oracle}", nil,
			"store.driver", `"oracle" is not supported: use ` + accepted},
		{"DriverFromEnv", "", map[string]string{"LEAFD_STORE_DRIVER": "oracle"}, "store.driver", "use " + accepted},
		{"DSNEmpty", "store: {dsn: \"\"}", nil, "store.dsn", "is empty"},
		{"DSNNull", "store: {dsn: }", nil, "store.dsn", "has no value"},
		{"FallbackWithTheDefaultEngine", "store: {fallback_dsns: [a]}", nil, "store.fallback_dsns", "store.driver is " + store.DefaultDriver()},
		{"FallbackEmptyEntry", "store: {driver: " + server + ", dsn: a, fallback_dsns: [b, \"\"]}", nil, "store.fallback_dsns[1]", "is empty"},
		{"FallbackMapping", "store: {driver: " + server + ", dsn: a, fallback_dsns: {a: b}}", nil, "store.fallback_dsns", "is a mapping: use a list"},
		{"WorkerIDText", "snowflake: {worker_id: x}", nil,
			"snowflake.worker_id", `"x": use auto or a number 0..1023`},
		{"WorkerIDTooLarge", "snowflake: {worker_id: 1024}", nil,
			"snowflake.worker_id", "use auto or a number 0..1023"},
		{"WorkerIDNegative", "snowflake: {worker_id: -1}", nil, "snowflake.worker_id", "use auto or a number"},
		{"WorkerIDFromEnv", "", map[string]string{"LEAFD_SNOWFLAKE_WORKER_ID": "x"}, "snowflake.worker_id", "use auto or a number 0..1023"},
		{"WorkerIDNarrowLayout", "snowflake: {worker_id: 8, time_bits: 48, worker_bits: 3, sequence_bits: 12}", nil,
			"snowflake.worker_id", "use auto or a number 0..7"},
		{"DurationNotParsing", "segment: {wait_timeout: soon}", nil,
			"segment.wait_timeout", `"soon" is not a duration: use a Go duration`},
		{"DurationFromEnv", "", map[string]string{"LEAFD_SEGMENT_WAIT_TIMEOUT": "soon"}, "segment.wait_timeout", "Go duration"},
		{"DurationWithoutUnit", "http: {shutdown_timeout: 10}", nil, "http.shutdown_timeout", "has no unit"},
		{"DurationZero", "segment: {tag_refresh: 0s}", nil, "segment.tag_refresh", "greater than 0"},
		{"IdleTimeoutZero", "http: {idle_timeout: 0s}", nil, "http.idle_timeout", "greater than 0"},
		{"ReadHeaderTimeoutFromEnv", "", map[string]string{"LEAFD_HTTP_READ_HEADER_TIMEOUT": "-1s"}, "http.read_header_timeout", "greater than 0"},
		{"WriteTimeoutBelowWait", "http: {write_timeout: 2s}\nsegment: {wait_timeout: 2s}", nil,
			"http.write_timeout", "not longer than segment.wait_timeout (2s)"},
		{"DurationNegative", "segment: {wait_timeout: -5ms}", nil, "segment.wait_timeout", "greater than 0"},
		{"MaxBackwardNegative", "snowflake: {max_backward: -5ms}", nil, "snowflake.max_backward", "use 1ms to 1s"},
		{"MaxBackwardTooLong", "snowflake: {max_backward: 2s}", nil, "snowflake.max_backward", "use 1ms to 1s"},
		{"LeaseTTLTooShort", "snowflake: {lease_ttl: 500ms}", nil, "snowflake.lease_ttl", "at least 1s"},
		{"MaxBorrowNegative", "snowflake: {max_borrow: -1ms}", nil, "snowflake.max_borrow", "use a Go duration from 0 (off) to 1s"},
		{"MaxBorrowTooLong", "snowflake: {max_borrow: 2s, lease_ttl: 60s}", nil, "snowflake.max_borrow", "2s is out of range"},
		{"MaxBorrowNoUnit", "snowflake: {max_borrow: 5}", nil, "snowflake.max_borrow", "from 0 (off) to 1s"},
		{"MaxBorrowAboveLeaseTTL", "snowflake: {max_borrow: 200ms, lease_ttl: 1s}", nil, "snowflake.max_borrow",
			"200ms is more than a tenth of the lease (snowflake.lease_ttl is 1s (in "},
		{"WorkersZero", "snowflake: {workers: 0}", nil, "snowflake.workers", "0 is out of range: use a whole number from 1"},
		{"WorkersTooMany", "snowflake: {workers: 17}", nil, "snowflake.workers", "17 is out of range"},
		{"WorkersNotANumber", "", map[string]string{"LEAFD_SNOWFLAKE_WORKERS": "three"}, "snowflake.workers", "is not a whole number"},
		{"WorkersWithFixedID", "snowflake: {workers: 2, worker_id: 5}", nil, "snowflake.workers", "needs snowflake.worker_id: auto, not the fixed 5"},
		{"WorkersAboveLayout", "snowflake: {workers: 5, time_bits: 51, worker_bits: 2, sequence_bits: 10}", nil, "snowflake.workers",
			"more than the 4 worker ids of the layout"},
		{"MaxBorrowFromEnv", "", map[string]string{"LEAFD_SNOWFLAKE_MAX_BORROW": "soon"}, "snowflake.max_borrow", `"soon" is not a duration`},
		{"TagRefreshZero", "segment: {tag_refresh: 0s}", nil, "segment.tag_refresh", "greater than 0"},
		{"RefillMinAboveMax", "segment: {refill_min: 40m}", nil, "segment.refill_min", "not below segment.refill_max"},
		{"RefillMinEqualMax", "segment: {refill_min: 30m, refill_max: 30m}", nil, "segment.refill_min", "not below segment.refill_max"},
		{"MaxStepZero", "segment: {max_step: 0}", nil, "segment.max_step", "at least 1"},
		{"MaxStepText", "", map[string]string{"LEAFD_SEGMENT_MAX_STEP": "lots"}, "segment.max_step", "not a whole number"},
		{"MaxStepFraction", "segment: {max_step: 1.5}", nil, "segment.max_step", "not a whole number"},
		{"MaxBatchZero", "segment: {max_batch: 0}", nil, "segment.max_batch", "from 1 to 1000000"},
		{"MaxBatchTooLarge", "segment: {max_batch: 1000001}", nil, "segment.max_batch", "from 1 to 1000000"},
		{"MaxRangeZero", "segment: {max_range: 0}", nil, "segment.max_range", "from 1 to 1000000000"},
		{"MaxRangeTooLarge", "", map[string]string{"LEAFD_SEGMENT_MAX_RANGE": "1000000001"}, "segment.max_range", "from 1 to 1000000000"},
		{"GRPCAddrNotHostPort", "grpc: {addr: nine}", nil, "grpc.addr", "not host:port"},
		{"GRPCAddrSameAsHTTP", "", map[string]string{"LEAFD_GRPC_ADDR": "127.0.0.1:8080"}, "grpc.addr", "port of its own"},
		{"BitsNot63", "snowflake: {sequence_bits: 13}", nil,
			"snowflake.time_bits, snowflake.worker_bits, snowflake.sequence_bits", "add up to 63"},
		{"BitsZero", "snowflake: {time_bits: 41, worker_bits: 22, sequence_bits: 0}", nil,
			"snowflake.time_bits, snowflake.worker_bits, snowflake.sequence_bits", "at least 1"},
		{"EpochInFuture", "snowflake: {epoch: 99999999999999}", nil, "snowflake.epoch", "in the future"},
		{"EpochNegative", "snowflake: {epoch: -1}", nil, "snowflake.epoch", "not in the future"},
		{"LayoutRanOut", "snowflake: {time_bits: 30, worker_bits: 21, sequence_bits: 12}", nil,
			"snowflake.time_bits", "ran out on 2010-"},
		{"SeedTagInvalidName", "segment: {seed_tags: [{tag: \"a b\", step: 1}]}", nil,
			"segment.seed_tags[0].tag", "A-Z a-z 0-9 _ . : -"},
		{"SeedTagStepZero", "segment: {seed_tags: [{tag: a, step: 1}, {tag: b, step: 0}]}", nil,
			"segment.seed_tags[1].step", "out of range"},
		{"SeedTagStepMissing", "segment: {seed_tags: [{tag: a}]}", nil, "segment.seed_tags[0].step", "is missing"},
		{"SeedTagTagMissing", "segment: {seed_tags: [{step: 5}]}", nil, "segment.seed_tags[0].tag", "is missing"},
		{"SeedTagTwice", "segment: {seed_tags: [{tag: a, step: 1}, {tag: a, step: 2}]}", nil,
			"segment.seed_tags[1].tag", "already listed"},
		{"SeedTagNotMapping", "segment: {seed_tags: [5]}", nil, "segment.seed_tags[0]", "{tag, step}"},
		{"SeedTagEnvWithoutStep", "", map[string]string{"LEAFD_SEGMENT_SEED_TAGS": "order"}, "segment.seed_tags[0]", "tag:step"},
		{"SeedTagEnvBadStep", "", map[string]string{"LEAFD_SEGMENT_SEED_TAGS": "a:1 order:x"}, "segment.seed_tags[1]", "tag:step"},
		{"SeedTagEnvBadName", "", map[string]string{"LEAFD_SEGMENT_SEED_TAGS": "a/b:1"}, "segment.seed_tags[0].tag", "not valid"},
		{"LogLevel", "log: {level: verbose}", nil, "log.level", "use debug, info, warn or error"},
		{"LogFormat", "log: {format: xml}", nil, "log.format", "use text or json"},
		{"MetricsPerTag", "metrics: {per_tag: some}", nil,
			"metrics.per_tag", `"some" is not a level of detail: use full, basic or off`},
		{"MetricsPerTagFromEnv", "", map[string]string{"LEAFD_METRICS_PER_TAG": "all"}, "metrics.per_tag", "use full, basic or off"},
		{"MetricsPerTagEmpty", "metrics: {per_tag: \"\"}", nil, "metrics.per_tag", "use full, basic or off"},
		{"MetricsPerTagNumber", "metrics: {per_tag: 5}", nil, "metrics.per_tag", "use full, basic or off"},
		{"MetricsUnknownKey", "metrics: {per_tags: full}", nil, "metrics.per_tags", "did you mean metrics.per_tag?"},
		{"HTTPAddrEmpty", "http: {addr: \"\"}", nil, "http.addr", "is empty: use host:port"},
		{"HTTPAddrNoPort", "", map[string]string{"LEAFD_HTTP_ADDR": "8080"}, "http.addr", "use host:port"},
		{"BoolText", "store: {migrate: maybe}", nil, "store.migrate", "use true or false"},
		{"AdminTokenShort", "admin: {token: x}", nil, "admin.token", "is 1 characters, too short"},
		{"AdminTokenShortEnv", "", map[string]string{"LEAFD_ADMIN_TOKEN": "e2e-token\n"}, "admin.token", "at least 16 characters"},
		{"AdminTokenInnerSpace", "admin: {token: \"abcdefgh ijklmnopq\"}", nil, "admin.token", "holds whitespace inside"},
		{"MaxConnectionsZero", "http: {max_connections: 0}", nil, "http.max_connections", "use a whole number from 1 to"},
		{"MaxConnectionsText", "", map[string]string{"LEAFD_HTTP_MAX_CONNECTIONS": "many"}, "http.max_connections", "not a whole number"},
		{"GRPCMaxConnectionsZero", "grpc: {max_connections: 0}", nil, "grpc.max_connections", "use a whole number from 1 to"},
		{"GRPCMaxStreamsTooMany", "", map[string]string{"LEAFD_GRPC_MAX_CONCURRENT_STREAMS": "20000"}, "grpc.max_concurrent_streams", "use a whole number from 1 to 10000"},
		{"GRPCIdleTimeoutZero", "grpc: {idle_timeout: 0s}", nil, "grpc.idle_timeout", "not greater than 0"},
		{"GRPCKeepaliveTimeoutNegative", "", map[string]string{"LEAFD_GRPC_KEEPALIVE_TIMEOUT": "-1s"}, "grpc.keepalive_timeout", "not greater than 0"},
		{"TrustedProxyBad", "http: {trusted_proxies: [10.0.0.1, proxy.local]}", nil,
			"http.trusted_proxies[1]", "neither an IP address nor a CIDR range"},
		{"StringGivenNumber", "admin: {token: 12345}", nil, "admin.token", "quote it"},
		{"ProtectDashboardWithoutToken", "admin: {protect_dashboard: true}", nil, "admin.protect_dashboard", "needs admin.token"},
		{"SectionNotMapping", "segment: 5", nil, "segment", "not a mapping"},
		{"KeyGivenMapping", "http:\n  addr:\n    host: x\n", nil, "http.addr", "is a mapping"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cleanEnv(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			t.Chdir(t.TempDir()) // no ./config.yaml when there is no file
			path := ""
			if tt.file != "" {
				path = writeFile(t, tt.file+"\n")
			}
			c, err := config.Load(path)
			if err == nil {
				t.Fatalf("Load accepted it: %+v", c)
			}
			ps := problems(err)
			if len(ps) != 1 {
				t.Fatalf("want one problem, got %d: %v", len(ps), err)
			}
			if ps[0].Key != tt.key || !strings.Contains(ps[0].Message, tt.want) {
				t.Fatalf("got %q\nwant key %s and a message containing %q", err, tt.key, tt.want)
			}
			line := err.Error()
			if strings.Contains(line, "\n") || !strings.HasPrefix(line, tt.key+": ") {
				t.Fatalf("error %q is not one line starting with the key", line)
			}
			if len(tt.env) > 0 && !strings.Contains(line, "(from LEAFD_") {
				t.Fatalf("error %q does not name the environment variable", line)
			}
			if tt.file != "" && len(tt.env) == 0 && !strings.Contains(ps[0].Key, ",") && ps[0].Source != path {
				t.Fatalf("source = %q, want %s", ps[0].Source, path)
			}
		})
	}
}

func TestLoadReportsEveryProblem(t *testing.T) {
	cleanEnv(t)
	t.Setenv("LEAFD_LOG_LEVEL", "loud")
	path := writeFile(t, "stor: {}\nsegment:\n  refil_min: 1m\n  preload_at: 2\n  max_batch: 0\nstore:\n  driver: oracle\n")
	_, err := config.Load(path)
	var keys []string
	for _, p := range problems(err) {
		keys = append(keys, p.Key)
	}
	want := []string{"segment.refil_min", "store.driver", "segment.preload_at", "segment.max_batch", "log.level"}
	for _, k := range want {
		found := false
		for _, got := range keys {
			found = found || got == k
		}
		if !found {
			t.Errorf("no problem named %s in %v", k, keys)
		}
	}
	if got := strings.Count(err.Error(), "\n") + 1; got != len(keys) {
		t.Errorf("%d lines for %d problems:\n%v", got, len(keys), err)
	}
}

func TestValidate(t *testing.T) {
	t.Run("Defaults", func(t *testing.T) {
		if err := config.Default().Validate(); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("ShippedValues", func(t *testing.T) {
		if err := spec().Validate(); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("FixedWorkerID", func(t *testing.T) {
		c := config.Default()
		c.Snowflake.WorkerID = config.WorkerID{ID: 1023}
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
	})
	tests := []struct {
		name   string
		change func(*config.Config)
		key    string
	}{
		{"PreloadAt", func(c *config.Config) { c.Segment.PreloadAt = 1.5 }, "segment.preload_at"},
		{"Driver", func(c *config.Config) { c.Store.Driver = "MYSQL" }, "store.driver"},
		{"WorkerID", func(c *config.Config) { c.Snowflake.WorkerID = config.WorkerID{ID: 1024} }, "snowflake.worker_id"},
		{"RefillWindow", func(c *config.Config) { c.Segment.RefillMax = c.Segment.RefillMin }, "segment.refill_min"},
		{"SeedTag", func(c *config.Config) { c.Segment.SeedTags = []config.SeedTag{{Tag: "", Step: 1}} }, "segment.seed_tags[0].tag"},
		{"SeedStepTooLarge", func(c *config.Config) { c.Segment.SeedTags = []config.SeedTag{{Tag: "a", Step: 1 << 31}} }, "segment.seed_tags[0].step"},
		{"MetricsPerTag", func(c *config.Config) { c.Metrics.PerTag = "Full" }, "metrics.per_tag"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := config.Default()
			tt.change(c)
			ps := problems(c.Validate())
			if len(ps) != 1 || ps[0].Key != tt.key {
				t.Fatalf("Validate: %v; want one problem with %s", c.Validate(), tt.key)
			}
			if ps[0].Source != "" {
				t.Fatalf("source %q on a hand-built config", ps[0].Source)
			}
		})
	}
	t.Run("ZeroValue", func(t *testing.T) {
		var c config.Config
		ps := problems(c.Validate())
		if len(ps) < 10 {
			t.Fatalf("Validate(zero Config) found only %d problems: %v", len(ps), c.Validate())
		}
	})
}

func TestWorkerID(t *testing.T) {
	tests := []struct {
		in   string
		want config.WorkerID
		ok   bool
	}{
		{"auto", config.WorkerID{Auto: true}, true},
		{"Auto", config.WorkerID{Auto: true}, true},
		{"0", config.WorkerID{}, true},
		{"1023", config.WorkerID{ID: 1023}, true},
		{"-1", config.WorkerID{}, false},
		{"x", config.WorkerID{}, false},
		{"", config.WorkerID{}, false},
	}
	for _, tt := range tests {
		t.Run("Parse"+tt.in, func(t *testing.T) {
			got, err := config.ParseWorkerID(tt.in)
			if (err == nil) != tt.ok || got != tt.want {
				t.Fatalf("ParseWorkerID(%q) = %v, %v", tt.in, got, err)
			}
			if tt.ok {
				if w, err := config.ParseWorkerID(got.String()); err != nil || w != got {
					t.Fatalf("round trip of %v: %v, %v", got, w, err)
				}
			}
		})
	}
}

func TestEnvName(t *testing.T) {
	if got := config.EnvName("segment.max_step"); got != "LEAFD_SEGMENT_MAX_STEP" {
		t.Fatalf("EnvName = %s", got)
	}
}
