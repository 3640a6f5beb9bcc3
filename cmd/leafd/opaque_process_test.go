package main

import (
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leafd/leafd/internal/testkit/testdb"
	"github.com/leafd/leafd/store"
)

// Three servers over one database on a server serve an opaque tag made with leafd tag
// add --format opaque: over 100,000 IDs, none twice, all in [1, 2^53), and
// no correlation between the order of issue and the value; a fourth
// server with another key refuses the tag; leafd decode-opaque maps an ID
// back to its position.
func TestOpaqueTagProcesses(t *testing.T) {
	driver := serverDriver(t)
	dsn := testdb.DSN(t, driver)
	const key = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
	env := []string{"LEAFD_STORE_DRIVER=" + driver, "LEAFD_STORE_DSN=" + dsn, "LEAFD_SEGMENT_OPAQUE_KEY=" + key,
		"LEAFD_SEGMENT_MAX_STEP=5000"}
	dir := t.TempDir()
	if code, out := runLeafd(t, dir, env, "tag", "add", "user", "--format", "opaque", "--step", "1000"); code != 0 ||
		!strings.Contains(out, "opaque") {
		t.Fatalf("leafd tag add --format opaque: exit %d\n%s", code, out)
	}
	if code, out := runLeafd(t, dir, []string{"LEAFD_STORE_DRIVER=" + driver, "LEAFD_STORE_DSN=" + dsn},
		"tag", "add", "other", "--format", "opaque"); code != 2 || !strings.Contains(out, "segment.opaque_key") {
		t.Fatalf("leafd tag add --format opaque without a key: exit %d, want 2\n%s", code, out)
	}

	procs := make([]*process, 3)
	for i := range procs {
		procs[i] = startLeafd(t, env...)
	}
	for _, p := range procs {
		waitReady(t, p)
	}
	const perServer, batch = 36_000, 4_000
	ids := make([][]int64, len(procs)) // each server's, in the order issued
	var wg sync.WaitGroup
	for i, p := range procs {
		wg.Go(func() {
			client := &http.Client{Timeout: 30 * time.Second}
			for len(ids[i]) < perServer {
				status, body := get(t, client, p.addr+"/segment/user?format=json&count="+strconv.Itoa(batch))
				if status != 200 {
					t.Errorf("server %d: %d %s", i, status, body)
					return
				}
				var b struct{ IDs []string }
				if err := json.Unmarshal([]byte(body), &b); err != nil {
					t.Errorf("server %d: %v", i, err)
					return
				}
				for _, s := range b.IDs {
					id, err := strconv.ParseInt(s, 10, 64)
					if err != nil {
						t.Errorf("server %d: ID %q", i, s)
						return
					}
					ids[i] = append(ids[i], id)
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	seen := map[int64]bool{}
	for i, list := range ids {
		for _, id := range list {
			if id < 1 || id >= 1<<53 {
				t.Fatalf("server %d: ID %d outside [1, 2^53)", i, id)
			}
			if seen[id] {
				t.Fatalf("ID %d issued twice", id)
			}
			seen[id] = true
		}
		if r := pearson(list); math.Abs(r) >= 0.05 {
			t.Errorf("server %d: Pearson r between issue order and ID %.4f over %d IDs", i, r, len(list))
		}
	}
	if len(seen) < 100_000 {
		t.Fatalf("%d IDs, want over 100,000", len(seen))
	}

	// decode-opaque maps an ID back to a position among those handed out.
	code, out := runLeafd(t, dir, env, "decode-opaque", "user", strconv.FormatInt(ids[0][0], 10))
	pos, err := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
	if code != 0 || err != nil || pos < 1 || pos > int64(3*perServer+3*5000) {
		t.Fatalf("leafd decode-opaque: exit %d, %q", code, out)
	}

	wrong := startLeafd(t, "LEAFD_STORE_DRIVER="+driver, "LEAFD_STORE_DSN="+dsn,
		"LEAFD_SEGMENT_OPAQUE_KEY=ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100")
	waitReady(t, wrong)
	if status, body := get(t, http.DefaultClient, wrong.addr+"/segment/user"); status != 503 || !strings.Contains(body, "opaque_key_mismatch") {
		t.Fatalf("a server with another key: %d %s, want 503 opaque_key_mismatch", status, body)
	}
}

// pearson is the correlation between the index and the value of xs.
func pearson(xs []int64) float64 {
	n := float64(len(xs))
	var sx, sy, sxx, syy, sxy float64
	for i, v := range xs {
		x, y := float64(i), float64(v)
		sx, sy, sxx, syy, sxy = sx+x, sy+y, sxx+x*x, syy+y*y, sxy+x*y
	}
	return (n*sxy - sx*sy) / (math.Sqrt(n*sxx-sx*sx) * math.Sqrt(n*syy-sy*sy))
}

// A seed tag whose name was an opaque tag before (its leaf_alloc row
// deleted by SQL, its past kept) cannot be created sequential: the server
// stops with exit 1 and the tag_conflict message, rather than retry for
// ever as if the database were not ready.
func TestSeedTagConflictStops(t *testing.T) {
	driver := store.DefaultDriver()
	dir, dsn := t.TempDir(), testdb.DSN(t, driver)
	const key = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
	env := []string{"LEAFD_STORE_DRIVER=" + driver, "LEAFD_STORE_DSN=" + dsn, "LEAFD_SEGMENT_OPAQUE_KEY=" + key}
	if code, out := runLeafd(t, dir, env, "tag", "add", "user", "--format", "opaque", "--digits", "6"); code != 0 {
		t.Fatalf("leafd tag add --format opaque: exit %d\n%s", code, out)
	}
	if _, err := testdb.SQL(t, driver, dsn).Exec("DELETE FROM leaf_alloc WHERE biz_tag = 'user'"); err != nil {
		t.Fatal(err)
	}
	code, out := runLeafd(t, dir, append(env, "LEAFD_SEGMENT_SEED_TAGS=user:100"), "serve")
	if code != 1 || !strings.Contains(out, "tag_conflict") && !strings.Contains(out, "opaque tag") || !strings.Contains(out, "a seed tag cannot be created") {
		t.Fatalf("leafd serve with a seed tag that was opaque: exit %d, want 1 naming the conflict\n%s", code, out)
	}
}
