package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leafd/leafd/internal/testkit/testdb"
	"github.com/leafd/leafd/internal/testkit/testenv"
	"github.com/leafd/leafd/store"
)

// built is the leafd binary built once for the tests of this package, with
// -race unless LEAFD_TEST_NO_RACE_BINARY is set; leafdBin is its path (or
// another binary's, for a test that swaps it).
var (
	built    = &testenv.Binary{Race: os.Getenv("LEAFD_TEST_NO_RACE_BINARY") == "", Output: os.Stderr}
	leafdBin string
)

func TestMain(m *testing.M) {
	if !testenv.SlowPackage("cmd/leafd: the tests of the leafd command, which start it as processes") {
		return
	}
	var err error
	if leafdBin, err = built.Path(); err != nil {
		fmt.Fprintln(os.Stderr, "building leafd:", err)
		os.Exit(1)
	}
	code := m.Run()
	built.Remove()
	plainBinary.Remove()
	os.Exit(code)
}

// process is a running leafd.
type process struct {
	*testenv.Process
	addr string // http://127.0.0.1:port
}

// baseEnv isolates a test process from the developer's environment, on a
// free port and logging JSON; snowflake is off unless a test turns it on.
func baseEnv(t *testing.T) []string {
	return testenv.Env(t.TempDir(), "LEAFD_SNOWFLAKE_ENABLED=false")
}

// serverDriver is the first engine reached at network addresses
// (store.FallbackDrivers), for the tests of several servers, shards or a
// fault proxy over databases on a server rather than a file; the test
// fails when there is none.
func serverDriver(t *testing.T) string {
	t.Helper()
	drivers := store.FallbackDrivers()
	if len(drivers) == 0 {
		t.Fatal("no engine is reached at network addresses")
	}
	return drivers[0]
}

// startLeafd starts leafd with env in a directory of its own and waits
// until it listens.
func startLeafd(t *testing.T, env ...string) *process {
	t.Helper()
	return startLeafdIn(t, t.TempDir(), env...)
}

// startLeafdIn starts leafd in dir (where it finds config.yaml, if any).
// It is killed when the test ends; its log is shown if the test failed.
func startLeafdIn(t *testing.T, dir string, env ...string) *process {
	t.Helper()
	p := testenv.MustStart(t, testenv.Config{Path: leafdBin, Dir: dir, Env: append(baseEnv(t), env...)}, 30*time.Second)
	return &process{Process: p, addr: p.URL()}
}

// stop sends SIGTERM and returns the exit code.
func (p *process) stop(t *testing.T) int {
	t.Helper()
	code, err := p.Stop(20 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return code
}

func get(t *testing.T, client *http.Client, url string) (int, string) {
	t.Helper()
	res, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, string(b)
}

// waitReady waits until p's /readyz answers 200.
func waitReady(t *testing.T, p *process) {
	t.Helper()
	if err := p.WaitReady(t.Context(), http.DefaultClient, 30*time.Second); err != nil {
		t.Fatalf("%v\n%s", err, p.Output())
	}
}

// Several leafd processes on one database, hammered concurrently over
// several tags with small steps, never issue an ID twice, and each client
// sees strictly increasing IDs per tag from each server.
func TestProcessesShareOneDatabase(t *testing.T) {
	testdb.Each(t, store.Drivers(), func(t *testing.T, driver, dsn string) {
		env := []string{"LEAFD_STORE_DRIVER=" + driver, "LEAFD_STORE_DSN=" + dsn,
			"LEAFD_SEGMENT_SEED_TAGS=a:5 b:20 c:100", "LEAFD_SEGMENT_MAX_STEP=100"}
		const servers, clients, requests = 3, 4, 150
		procs := make([]*process, servers)
		for i := range procs {
			procs[i] = startLeafd(t, env...)
		}
		for _, p := range procs {
			waitReady(t, p)
		}
		type result struct {
			server int
			ids    map[string][]int64
		}
		results := make(chan result, servers*clients)
		var wg sync.WaitGroup
		for s, p := range procs {
			for c := range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					client := &http.Client{Timeout: 10 * time.Second}
					rng := rand.New(rand.NewPCG(uint64(s), uint64(c)))
					got := map[string][]int64{}
					for range requests {
						tag := []string{"a", "b", "c"}[rng.IntN(3)]
						n := 1
						if rng.IntN(3) == 0 {
							n = 1 + rng.IntN(30)
						}
						code, body := get(t, client, fmt.Sprintf("%s/segment/%s?count=%d", p.addr, tag, n))
						if code != 200 {
							t.Errorf("server %d: GET /segment/%s = %d %s", s, tag, code, body)
							return
						}
						lines := strings.Fields(body)
						if len(lines) != n {
							t.Errorf("server %d: asked %d IDs, got %d", s, n, len(lines))
							return
						}
						for _, l := range lines {
							id, err := strconv.ParseInt(l, 10, 64)
							if err != nil || id < 1 {
								t.Errorf("server %d: bad ID %q", s, l)
								return
							}
							got[tag] = append(got[tag], id)
						}
					}
					results <- result{s, got}
				}()
			}
		}
		wg.Wait()
		close(results)
		seen := map[string]map[int64]int{}
		for r := range results {
			for tag, ids := range r.ids {
				if seen[tag] == nil {
					seen[tag] = map[int64]int{}
				}
				for i, id := range ids {
					if i > 0 && id <= ids[i-1] {
						t.Fatalf("server %d tag %s: %d after %d", r.server, tag, id, ids[i-1])
					}
					if other, dup := seen[tag][id]; dup {
						t.Fatalf("tag %s: ID %d issued by servers %d and %d", tag, id, other, r.server)
					}
					seen[tag][id] = r.server
				}
			}
		}
		for i, p := range procs {
			if code := p.stop(t); code != 0 {
				t.Errorf("server %d exited %d after SIGTERM, want 0\n%s", i, code, p.Output())
			}
		}
	})
}

// A server whose database is unreachable (a server where nothing listens)
// still starts: /healthz answers, /readyz says 503 until the database can
// be used.
func TestServeWithoutDatabase(t *testing.T) {
	testdb.Each(t, store.FallbackDrivers(), func(t *testing.T, driver, dsn string) {
		testServeWithoutDatabase(t, driver, testdb.Unreachable(driver, dsn))
	})
}

func testServeWithoutDatabase(t *testing.T, driver, dsn string) {
	p := startLeafd(t, "LEAFD_STORE_DRIVER="+driver, "LEAFD_STORE_DSN="+dsn)
	if code, _ := get(t, http.DefaultClient, p.addr+"/healthz"); code != 200 {
		t.Fatalf("/healthz = %d", code)
	}
	code, body := get(t, http.DefaultClient, p.addr+"/readyz")
	if code != 503 || !strings.Contains(body, "reason") {
		t.Fatalf("/readyz = %d %s, want 503 with a reason", code, body)
	}
	if code := p.stop(t); code != 0 {
		t.Fatalf("exit %d after SIGTERM", code)
	}
}

// A server started with store.migrate false on a database that lacks its
// migrations (here Meituan Leaf's database, leaf_alloc and nothing of
// leafd's) is not ready, and says why in its log, until `leafd migrate`
// has run; then it serves without a restart. Without the check it would be
// ready at once and fail every range load.
func TestMigrateFalseWaitsForMigrations(t *testing.T) {
	testdb.Each(t, store.Drivers(), func(t *testing.T, driver, dsn string) {
		dir := t.TempDir()
		raw := testdb.SQL(t, driver, dsn)
		for _, q := range []string{testdb.LeafTable(driver), "INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('order', 1, 100)"} {
			if _, err := raw.Exec(q); err != nil {
				t.Fatal(err)
			}
		}
		env := []string{"LEAFD_STORE_DRIVER=" + driver, "LEAFD_STORE_DSN=" + dsn}
		p := startLeafdIn(t, dir, append(env, "LEAFD_STORE_MIGRATE=false")...)
		deadline := time.Now().Add(1500 * time.Millisecond)
		for time.Now().Before(deadline) {
			if code, body := get(t, http.DefaultClient, p.addr+"/readyz"); code != http.StatusServiceUnavailable {
				t.Fatalf("/readyz = %d %s before the migrations ran, want 503", code, body)
			}
			time.Sleep(100 * time.Millisecond)
		}
		if out := p.Output(); !strings.Contains(out, "store.migrate is false: run leafd migrate") {
			t.Fatalf("the log does not say the migrations are missing:\n%s", out)
		}
		if code, out := runLeafd(t, dir, env, "migrate"); code != 0 {
			t.Fatalf("leafd migrate: exit %d\n%s", code, out)
		}
		waitReady(t, p)
		if code, body := get(t, http.DefaultClient, p.addr+"/segment/order"); code != http.StatusOK {
			t.Fatalf("/segment/order = %d %s once migrated", code, body)
		}
	})
}

// runLeafd runs a leafd command in dir to completion, at most 60 s, and
// returns its exit code and output.
func runLeafd(t *testing.T, dir string, env []string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, leafdBin, args...)
	cmd.Dir = dir
	cmd.Env = append(baseEnv(t), env...)
	out, _ := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("leafd still ran after 60s; output:\n%s", out)
	}
	return cmd.ProcessState.ExitCode(), string(out)
}

func TestBadConfigurationStopsStartup(t *testing.T) {
	// An engine at network addresses, which takes fallbacks, and its
	// example DSN at an address where nothing listens.
	server := store.FallbackDrivers()[0]
	dsn := testdb.WithAddr(t, server, store.ExampleDSN(server), "127.0.0.1:1")
	tests := []struct {
		name, file string
		env        []string
		key        string
	}{
		{"UnknownKeyInFile", "segment:\n  refil_min: 1m\n", nil, "segment.refil_min"},
		{"BadValueInFile", "segment:\n  preload_at: 2\n", nil, "segment.preload_at"},
		{"BadDriverFromEnv", "", []string{"LEAFD_STORE_DRIVER=" + server}, "store.driver"}, // for the default store.dsn
		{"BadDurationFromEnv", "", []string{"LEAFD_SEGMENT_WAIT_TIMEOUT=soon"}, "segment.wait_timeout"},
		{"DSNThatDoesNotParse", "", []string{"LEAFD_STORE_DRIVER=" + server, "LEAFD_STORE_DSN=not a dsn"}, "store.dsn"},
		{"FallbackDSNWithoutDatabase", "", []string{"LEAFD_STORE_DRIVER=" + server, "LEAFD_STORE_DSN=" + dsn,
			"LEAFD_STORE_FALLBACK_DSNS=" + testdb.WithAddr(t, server, dsn, "127.0.0.1:2") + " " + testdb.WithDatabase(t, server, testdb.WithAddr(t, server, dsn, "127.0.0.1:3"), "")},
			"store.fallback_dsns[1]"},
		{"LayoutBitsDoNotAddUp", "snowflake:\n  enabled: true\n  sequence_bits: 13\n", nil, "snowflake.sequence_bits"},
		{"LayoutRanOut", "", []string{"LEAFD_SNOWFLAKE_ENABLED=true", "LEAFD_SNOWFLAKE_EPOCH=0",
			"LEAFD_SNOWFLAKE_TIME_BITS=31", "LEAFD_SNOWFLAKE_WORKER_BITS=20"}, "snowflake.time_bits"},
		{"EpochInFuture", "", []string{"LEAFD_SNOWFLAKE_EPOCH=99999999999999"}, "snowflake.epoch"},
		{"WorkerIDOutsideLayout", "", []string{"LEAFD_SNOWFLAKE_WORKER_ID=1024"}, "snowflake.worker_id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			args := []string{"serve"}
			if tt.file != "" {
				path := filepath.Join(dir, "leafd.yaml")
				if err := os.WriteFile(path, []byte(tt.file), 0o600); err != nil {
					t.Fatal(err)
				}
				args = append(args, "--config", path)
			}
			code, out := runLeafd(t, dir, tt.env, args...)
			if code != 2 || !strings.Contains(out, tt.key) {
				t.Fatalf("exit %d, output %q; want exit 2 naming %s", code, out, tt.key)
			}
		})
	}
	t.Run("MissingConfigFile", func(t *testing.T) {
		code, out := runLeafd(t, t.TempDir(), nil, "--config", "/nonexistent/leafd.yaml")
		if code != 2 || !strings.Contains(out, "nonexistent") {
			t.Fatalf("exit %d, output %q", code, out)
		}
	})
	t.Run("UnknownCommand", func(t *testing.T) {
		if code, out := runLeafd(t, t.TempDir(), nil, "frobnicate"); code != 2 {
			t.Fatalf("exit %d, output %q; want 2", code, out)
		}
	})
}

// leafd decode prints the JSON of GET /snowflake/{id}, decoded with the
// configured layout.
func TestDecodeCommand(t *testing.T) {
	dir := t.TempDir()
	// 2020-03-02T19:54:56.824Z, worker 664, sequence 277 in the default layout.
	code, out := runLeafd(t, dir, nil, "decode", "1234567890123456789")
	want := `{"id":"1234567890123456789","time":"2020-03-02T19:54:56.824Z","unix_ms":1583178896824,"worker_id":664,"sequence":277}`
	if code != 0 || strings.TrimSpace(out) != want {
		t.Fatalf("leafd decode: exit %d, output %q; want %s", code, out, want)
	}
	code, out = runLeafd(t, dir, []string{"LEAFD_SNOWFLAKE_WORKER_BITS=8", "LEAFD_SNOWFLAKE_SEQUENCE_BITS=14"}, "decode", "1234567890123456789")
	if code != 0 || !strings.Contains(out, `"worker_id":166,"sequence":277`) {
		t.Fatalf("leafd decode with an 8/14 layout: exit %d, output %q", code, out)
	}
	for _, bad := range [][]string{{"abc"}, {"0"}, {"--", "-1"}, {"9223372036854775808"}} {
		if code, out := runLeafd(t, dir, nil, append([]string{"decode"}, bad...)...); code != 2 || !strings.Contains(out, "not valid") {
			t.Fatalf("leafd decode %s: exit %d, output %q; want exit 2 and a message", bad, code, out)
		}
	}
}

func TestMigrateCommand(t *testing.T) {
	dir := t.TempDir()
	driver := store.DefaultDriver()
	dsn := testdb.DSN(t, driver)
	env := []string{"LEAFD_STORE_DRIVER=" + driver, "LEAFD_STORE_DSN=" + dsn}
	for range 2 { // idempotent
		if code, out := runLeafd(t, dir, env, "migrate"); code != 0 {
			t.Fatalf("leafd migrate: exit %d\n%s", code, out)
		}
	}
	if tables := testdb.Tables(t, driver, dsn); !slices.Contains(tables, "leaf_alloc") {
		t.Fatalf("the database's tables after leafd migrate: %v, want leaf_alloc among them", tables)
	}
}

// The shipped config.yaml serves the demo tag from the embedded store: the
// README's first command.
func TestShippedConfigServesDemo(t *testing.T) {
	dir := t.TempDir()
	shipped, err := os.ReadFile("../../config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), shipped, 0o600); err != nil {
		t.Fatal(err)
	}
	proc := startLeafdIn(t, dir)
	waitReady(t, proc)
	code, body := get(t, http.DefaultClient, proc.addr+"/segment/demo")
	if code != 200 || body != "1\n" {
		t.Fatalf("GET /segment/demo = %d %q, want 200 \"1\\n\"", code, body)
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "leafd.db")); err != nil {
		t.Fatalf("data/leafd.db not created: %v", err)
	}
}

// A server killed with SIGKILL, or stopped with SIGTERM, and started again
// on the same database never reissues an ID: what it had buffered is
// skipped, and every ID after the restart is above every ID before.
func TestRestartNeverReissues(t *testing.T) {
	testdb.Each(t, store.Drivers(), func(t *testing.T, driver, dsn string) {
		env := []string{"LEAFD_STORE_DRIVER=" + driver, "LEAFD_STORE_DSN=" + dsn, "LEAFD_SEGMENT_SEED_TAGS=t:50"}
		var highest int64
		for round, stop := range []syscall.Signal{syscall.SIGKILL, syscall.SIGTERM, syscall.SIGKILL} {
			p := startLeafd(t, env...)
			waitReady(t, p)
			for i := range 30 { // crosses ranges of 50 and the preload
				code, body := get(t, http.DefaultClient, p.addr+"/segment/t?count=3")
				if code != 200 {
					t.Fatalf("round %d: %d %s", round, code, body)
				}
				for _, l := range strings.Fields(body) {
					id, _ := strconv.ParseInt(l, 10, 64)
					if id <= highest {
						t.Fatalf("round %d request %d: ID %d, not above %d issued before the restart", round, i, id, highest)
					}
					highest = id
				}
			}
			if err := p.Signal(stop); err != nil {
				t.Fatal(err)
			}
			p.Wait()
		}
	})
}
