package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leafd/leafd/internal/testkit/testdb"
	"github.com/leafd/leafd/store"
)

// workerOf decodes an ID with the default layout: bits 12..21.
func workerOf(id int64) int64 { return id >> 12 & 1023 }

// Several leafd processes leasing worker ids from one database issue
// snowflake IDs concurrently with no duplicate; one killed with SIGKILL and
// restarted at once does not get its old worker id back (its lease is still
// live), and a SIGTERM releases the lease.
func TestSnowflakeProcessesShareOneDatabase(t *testing.T) {
	testdb.Each(t, store.Drivers(), func(t *testing.T, driver, dsn string) {
		env := []string{"LEAFD_STORE_DRIVER=" + driver, "LEAFD_STORE_DSN=" + dsn,
			"LEAFD_SNOWFLAKE_ENABLED=true", "LEAFD_SNOWFLAKE_WORKER_ID=auto", "LEAFD_SEGMENT_ENABLED=false"}
		const servers, clients, requests = 3, 4, 100
		procs := make([]*process, servers)
		for i := range procs {
			procs[i] = startLeafd(t, env...)
		}
		for _, p := range procs {
			waitReady(t, p)
		}
		var (
			mu      sync.Mutex
			seen    = map[int64]int{}
			workers = map[int]int64{}
		)
		hammer := func() {
			var wg sync.WaitGroup
			for s, p := range procs {
				for c := range clients {
					wg.Add(1)
					go func() {
						defer wg.Done()
						client := &http.Client{Timeout: 10 * time.Second}
						var prev int64
						for r := range requests {
							n := 1 + (r*7+c)%20
							code, body := get(t, client, fmt.Sprintf("%s/snowflake?count=%d", p.addr, n))
							if code != 200 {
								t.Errorf("server %d: GET /snowflake = %d %s", s, code, body)
								return
							}
							lines := strings.Fields(body)
							if len(lines) != n {
								t.Errorf("server %d: asked %d IDs, got %d", s, n, len(lines))
								return
							}
							mu.Lock()
							for _, l := range lines {
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
					}()
				}
			}
			wg.Wait()
		}
		hammer()
		if t.Failed() {
			return
		}
		distinct := map[int64]bool{}
		for _, w := range workers {
			distinct[w] = true
		}
		if len(distinct) != servers {
			t.Fatalf("worker ids by server: %v, want %d distinct", workers, servers)
		}

		// kill -9 server 0 and start it again at once.
		killed := workers[0]
		procs[0].Kill()
		procs[0] = startLeafd(t, env...)
		waitReady(t, procs[0])
		hammer()
		if workers[0] == killed {
			t.Fatalf("the restarted server leased worker id %d, still held by the killed one's live lease", killed)
		}

		// SIGTERM releases the lease: the row has no owner and a
		// watermark at the last timestamp issued, not ahead.
		last := workers[1]
		if code := procs[1].stop(t); code != 0 {
			t.Fatalf("exit %d after SIGTERM\n%s", code, procs[1].Output())
		}
		released := false
		for _, line := range strings.Split(procs[1].Output(), "\n") {
			var rec struct {
				Msg      string
				WorkerID int64 `json:"worker_id"`
			}
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "snowflake: released worker id" && rec.WorkerID == last {
				released = true
			}
		}
		if !released {
			t.Fatalf("no release of worker id %d logged at SIGTERM\n%s", last, procs[1].Output())
		}
		raw := testdb.SQL(t, driver, dsn)
		var owner string
		var until, watermark int64
		if err := raw.QueryRow(raw.Rebind("SELECT owner, lease_until_ms, watermark_ms FROM leaf_worker WHERE worker_id = ?"), last).
			Scan(&owner, &until, &watermark); err != nil {
			t.Fatal(err)
		}
		if owner != "" || until != 0 || watermark > time.Now().UnixMilli() {
			t.Fatalf("worker id %d after SIGTERM: owner %q, lease_until_ms %d, watermark_ms %d (now %d): not released",
				last, owner, until, watermark, time.Now().UnixMilli())
		}
	})
}

// A leafd with snowflake.workers 3 and borrowing leases three worker ids,
// shows them in /api/state, issues batches larger than a millisecond's
// sequence under all of them, ascending and without duplicates, and
// releases all three at SIGTERM.
func TestSnowflakeWorkersProcess(t *testing.T) {
	driver := store.DefaultDriver()
	dsn := testdb.DSN(t, driver)
	p := startLeafd(t, "LEAFD_STORE_DRIVER="+driver, "LEAFD_STORE_DSN="+dsn, "LEAFD_SEGMENT_ENABLED=false",
		"LEAFD_SNOWFLAKE_ENABLED=true", "LEAFD_SNOWFLAKE_WORKER_ID=auto", "LEAFD_SNOWFLAKE_WORKERS=3",
		"LEAFD_SNOWFLAKE_MAX_BORROW=5ms")
	waitReady(t, p)
	client := &http.Client{Timeout: 10 * time.Second}
	var held []int64
	deadline := time.Now().Add(10 * time.Second)
	for len(held) < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("10 s after start /api/state lists worker ids %v, want 3", held)
		}
		code, body := get(t, client, p.addr+"/api/state")
		var st struct {
			Snowflake struct {
				WorkerIDs []int64 `json:"worker_ids"`
			} `json:"snowflake"`
		}
		if code != 200 || json.Unmarshal([]byte(body), &st) != nil {
			t.Fatalf("GET /api/state = %d %s", code, body)
		}
		held = st.Snowflake.WorkerIDs
		time.Sleep(10 * time.Millisecond)
	}
	var (
		mu   sync.Mutex
		seen = map[int64]bool{}
		used = map[int64]bool{}
		wg   sync.WaitGroup
	)
	for range 4 {
		wg.Go(func() {
			for range 10 {
				code, body := get(t, client, p.addr+"/snowflake?count=10000")
				if code != 200 {
					t.Errorf("GET /snowflake?count=10000 = %d %s", code, body)
					return
				}
				lines := strings.Fields(body)
				mu.Lock()
				var prev int64
				for _, l := range lines {
					id, err := strconv.ParseInt(l, 10, 64)
					if err != nil || id <= prev || seen[id] {
						mu.Unlock()
						t.Errorf("ID %q after %d (issued before: %v)", l, prev, seen[id])
						return
					}
					prev, seen[id], used[workerOf(id)] = id, true, true
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for w := range used {
		if !slices.Contains(held, w) {
			t.Fatalf("an ID under worker id %d, not one of those held, %v", w, held)
		}
	}
	if len(used) != 3 {
		t.Fatalf("400,000 IDs in batches of 10,000 came from worker ids %v, want all of %v", used, held)
	}
	if code := p.stop(t); code != 0 {
		t.Fatalf("exit %d after SIGTERM\n%s", code, p.Output())
	}
	released := map[int64]bool{}
	for _, line := range strings.Split(p.Output(), "\n") {
		var rec struct {
			Msg      string
			WorkerID int64 `json:"worker_id"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "snowflake: released worker id" {
			released[rec.WorkerID] = true
		}
	}
	for _, w := range held {
		if !released[w] {
			t.Fatalf("worker id %d not released at SIGTERM (released: %v)\n%s", w, released, p.Output())
		}
	}
}
