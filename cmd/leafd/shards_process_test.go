package main

import (
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// With store.shards: leafd migrate initialises sharding over the databases,
// leafd tag add creates the tag in all of them, leafd shards status shows
// every slot placed, leafd shards move moves one, the server serves IDs of
// the slots, and a server whose list is in another order refuses to start,
// as does one of the databases served alone.
func TestShardsCommands(t *testing.T) {
	dir := t.TempDir()
	env := []string{"LEAFD_STORE_SHARDS=a.db b.db c.db", "LEAFD_STORE_SHARD_SLOTS=6"}
	for _, args := range [][]string{{"migrate"}, {"tag", "add", "t0", "--step", "50"}} {
		if code, out := runLeafd(t, dir, env, args...); code != 0 {
			t.Fatalf("leafd %s: exit %d\n%s", strings.Join(args, " "), code, out)
		}
	}
	code, out := runLeafd(t, dir, env, "shards", "status")
	if code != 0 || !strings.Contains(out, "6 of 6 slots active") || !strings.Contains(out, "0,3") {
		t.Fatalf("leafd shards status: exit %d\n%s", code, out)
	}
	if code, out := runLeafd(t, dir, env, "shards", "move", "0", "2"); code != 0 || !strings.Contains(out, "slot 0 is in store.shards[2]") {
		t.Fatalf("leafd shards move: exit %d\n%s", code, out)
	}
	if code, out := runLeafd(t, dir, env, "shards", "move", "x", "2"); code != 2 {
		t.Fatalf("leafd shards move x 2: exit %d, want 2 (usage)\n%s", code, out)
	}

	p := startLeafdIn(t, dir, env...)
	status, body := get(t, http.DefaultClient, p.addr+"/segment/t0?count=12")
	if status != 200 {
		t.Fatalf("GET /segment/t0: %d %s", status, body)
	}
	ids := strings.Fields(body)
	if len(ids) != 12 {
		t.Fatalf("GET /segment/t0?count=12: %q", body)
	}
	if p.stop(t) != 0 {
		t.Fatal("exit after SIGTERM")
	}

	for _, c := range []struct {
		name string
		env  []string
		want string
	}{
		{"Order", []string{"LEAFD_STORE_SHARDS=b.db a.db c.db", "LEAFD_STORE_SHARD_SLOTS=6"}, "keep store.shards in the order"},
		{"OneAlone", []string{"LEAFD_STORE_DSN=b.db"}, "serving it alone would hand out its slots' IDs again"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out := runLeafd(t, dir, c.env, "serve")
			if code == 0 || !strings.Contains(out, c.want) {
				t.Fatalf("leafd serve: exit %d, want a refusal saying %q\n%s", code, c.want, out)
			}
		})
	}
}

// A database in the middle of store.shards emptied (its file removed and
// made anew) no longer matches the deployment's records: the server stops
// at once with exit 1, logging at ERROR which database and what
// disagrees, whatever store.migrate is, rather than retry for ever or
// serve without that database's slots.
func TestShardsEmptiedDatabaseStops(t *testing.T) {
	dir := t.TempDir()
	env := []string{"LEAFD_STORE_SHARDS=a.db b.db c.db", "LEAFD_STORE_SHARD_SLOTS=6"}
	if code, out := runLeafd(t, dir, env, "migrate"); code != 0 {
		t.Fatalf("leafd migrate: exit %d\n%s", code, out)
	}
	for _, f := range []string{"b.db", "b.db-wal", "b.db-shm"} {
		if err := os.Remove(filepath.Join(dir, f)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
	}
	for _, migrate := range []string{"true", "false"} {
		t.Run("Migrate"+migrate, func(t *testing.T) {
			code, out := runLeafd(t, dir, append(env, "LEAFD_STORE_MIGRATE="+migrate), "serve")
			if code != 1 || !strings.Contains(out, `"level":"ERROR"`) || !strings.Contains(out, "store.shards[1] has no record of the deployment") {
				t.Fatalf("leafd serve: exit %d, want 1 with an ERROR naming store.shards[1]\n%s", code, out)
			}
		})
	}
}
