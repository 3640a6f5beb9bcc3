package main

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leafd/leafd/internal/testkit/testdb"
	"github.com/leafd/leafd/store"
)

// runLeafdFor runs leafd (serve) until it exits, at most 60 s, and
// returns its exit code and output.
func runLeafdFor(t *testing.T, env ...string) (int, string) {
	t.Helper()
	return runLeafd(t, t.TempDir(), env)
}

// A server whose fixed worker id another live server holds, fixed or
// leasing, refuses to start: exit 1 and a message naming the holder and
// when its lease ends. Servers with distinct fixed ids and a leasing one
// issue no ID twice; a SIGTERM releases the fixed id for the next start.
func TestFixedWorkerIDProcesses(t *testing.T) {
	testdb.Each(t, store.Drivers(), func(t *testing.T, driver, dsn string) {
		env := []string{"LEAFD_STORE_DRIVER=" + driver, "LEAFD_STORE_DSN=" + dsn,
			"LEAFD_SNOWFLAKE_ENABLED=true", "LEAFD_SEGMENT_ENABLED=false"}
		with := func(extra ...string) []string { return append(append([]string{}, env...), extra...) }

		fixed5 := startLeafd(t, with("LEAFD_SNOWFLAKE_WORKER_ID=5")...)
		waitReady(t, fixed5)
		code, out := runLeafdFor(t, with("LEAFD_SNOWFLAKE_WORKER_ID=5")...)
		if code != 1 || !strings.Contains(out, "leafd: snowflake.worker_id 5 cannot be used: worker id 5 is held by fixed:") ||
			!strings.Contains(out, " until ") {
			t.Fatalf("a second server with worker id 5: exit %d, want 1 naming the holder and its lease's end; output:\n%s", code, out)
		}

		auto := startLeafd(t, with("LEAFD_SNOWFLAKE_WORKER_ID=auto")...)
		waitReady(t, auto)
		fixed6 := startLeafd(t, with("LEAFD_SNOWFLAKE_WORKER_ID=6")...)
		waitReady(t, fixed6)

		procs := []*process{fixed5, fixed6, auto}
		workers := snowflakeLoad(t, procs)
		if workers[0] != 5 || workers[1] != 6 || workers[2] == 5 || workers[2] == 6 {
			t.Fatalf("worker ids by server: %v, want 5, 6 and a leased one that is neither", workers)
		}

		// A fixed id that a leasing server holds.
		code, out = runLeafdFor(t, with(fmt.Sprintf("LEAFD_SNOWFLAKE_WORKER_ID=%d", workers[2]))...)
		if code != 1 || !strings.Contains(out, fmt.Sprintf("worker id %d is held by ", workers[2])) ||
			strings.Contains(out, fmt.Sprintf("held by %s", "fixed:")) {
			t.Fatalf("a fixed id held by a leasing server: exit %d, want 1 naming the leasing holder; output:\n%s", code, out)
		}

		// SIGTERM releases worker id 5, keeping it a fixed one's; the
		// next server with it starts.
		if code := fixed5.stop(t); code != 0 {
			t.Fatalf("exit %d after SIGTERM\n%s", code, fixed5.Output())
		}
		raw := testdb.SQL(t, driver, dsn)
		var owner string
		var until int64
		if err := raw.QueryRow("SELECT owner, lease_until_ms FROM leaf_worker WHERE worker_id = 5").Scan(&owner, &until); err != nil {
			t.Fatal(err)
		}
		if owner != "fixed:" || until != 0 {
			t.Fatalf("worker id 5 after SIGTERM: owner %q, lease_until_ms %d; want released and kept fixed", owner, until)
		}
		again := startLeafd(t, with("LEAFD_SNOWFLAKE_WORKER_ID=5")...)
		waitReady(t, again)
		if w := snowflakeLoad(t, []*process{again, fixed6, auto}); w[0] != 5 {
			t.Fatalf("the restarted server issues under worker id %d, want 5", w[0])
		}

		// The explicit escape: no record, no refusal, a loud warning.
		unsafe := startLeafd(t, with("LEAFD_SNOWFLAKE_WORKER_ID=5", "LEAFD_SNOWFLAKE_UNPROTECTED_FIXED_ID=true")...)
		waitReady(t, unsafe)
		if !strings.Contains(unsafe.Output(), `"level":"WARN","msg":"UNSAFE: snowflake.unprotected_fixed_id is true`) {
			t.Fatalf("no UNSAFE warning at start-up:\n%s", unsafe.Output())
		}
	})
}

// snowflakeLoad has four clients per server take batches of snowflake IDs
// at once, fails on any ID issued twice or out of order for a client, and
// returns the worker id each server issued under.
func snowflakeLoad(t *testing.T, procs []*process) []int64 {
	t.Helper()
	var (
		mu      sync.Mutex
		seen    = map[int64]int{}
		workers = make([]int64, len(procs))
		wg      sync.WaitGroup
	)
	for s, p := range procs {
		for c := range 4 {
			wg.Go(func() {
				client := &http.Client{Timeout: 10 * time.Second}
				var prev int64
				for r := range 60 {
					n := 1 + (r*7+c)%20
					code, body := get(t, client, fmt.Sprintf("%s/snowflake?count=%d", p.addr, n))
					if code != 200 {
						t.Errorf("server %d: GET /snowflake = %d %s", s, code, body)
						return
					}
					mu.Lock()
					for _, l := range strings.Fields(body) {
						id, err := strconv.ParseInt(l, 10, 64)
						if err != nil || id <= prev {
							mu.Unlock()
							t.Errorf("server %d: ID %q after %d", s, l, prev)
							return
						}
						prev = id
						if other, dup := seen[id]; dup {
							mu.Unlock()
							t.Errorf("ID %d issued by servers %d and %d", id, other, s)
							return
						}
						seen[id] = s
						workers[s] = workerOf(id)
					}
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	return workers
}
