package main

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leafd/leafd/internal/testkit/faultproxy"
	"github.com/leafd/leafd/internal/testkit/testdb"
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
			// The tag commands refuse it too: a tag written into some of
			// the databases alone could be a second definition of one
			// that another database holds.
			for _, args := range [][]string{{"tag", "add", "t1"}, {"tag", "set-step", "t0", "60"}} {
				code, out := runLeafd(t, dir, append([]string{"LEAFD_STORE_MIGRATE=false"}, c.env...), args...)
				if code != 1 || !strings.Contains(out, c.want) {
					t.Fatalf("leafd %s: exit %d, want 1 and a refusal saying %q\n%s", strings.Join(args, " "), code, c.want, out)
				}
			}
		})
	}
	if code, out := runLeafd(t, dir, env, "tag", "list"); code != 0 || strings.Contains(out, "t1") {
		t.Fatalf("leafd tag list after the refused commands: exit %d\n%s", code, out)
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

// Over three databases on a server, the first of which hangs for 12 s (its
// connections stalled behind a fault proxy): every request of a client
// that keeps the server loading ranges is answered with IDs within
// segment.wait_timeout, so is the first request of each tag the server has
// not read yet (looked up in the databases that answer), and the server
// loads from the database again once it answers.
func TestShardsHungDatabaseProcess(t *testing.T) {
	driver := serverDriver(t)
	dsns := []string{testdb.DSN(t, driver), testdb.DSN(t, driver), testdb.DSN(t, driver)}
	proxy := faultproxy.New(t, testdb.Addr(t, driver, dsns[0]))
	dsns[0] = testdb.WithAddr(t, driver, dsns[0], proxy.Addr())
	dir := t.TempDir()
	// Ranges of 10 IDs, so that the server loads one every other request.
	env := []string{"LEAFD_STORE_DRIVER=" + driver, "LEAFD_STORE_DSN=" + dsns[1], "LEAFD_STORE_SHARDS=" + strings.Join(dsns, " "),
		"LEAFD_STORE_SHARD_SLOTS=6", "LEAFD_SEGMENT_WAIT_TIMEOUT=1s", "LEAFD_SEGMENT_MAX_STEP=10"}
	for _, args := range [][]string{{"migrate"}, {"tag", "add", "t", "--step", "10"}} {
		if code, out := runLeafd(t, dir, env, args...); code != 0 {
			t.Fatalf("leafd %s: exit %d\n%s", strings.Join(args, " "), code, out)
		}
	}
	p := startLeafdIn(t, dir, env...)
	client := &http.Client{Timeout: 20 * time.Second}
	// requestTag gets 5 IDs of tag and reports whether one came from a
	// slot of the first database (slots 0 and 3 of 6).
	requestTag := func(tag, what string) bool {
		t.Helper()
		start := time.Now()
		status, body := get(t, client, p.addr+"/segment/"+tag+"?count=5")
		if took := time.Since(start); status != 200 || took > 1500*time.Millisecond {
			t.Fatalf("a request %s: %d %s after %v; want IDs within segment.wait_timeout (1s)", what, status, body, took)
		}
		first := false
		for _, f := range strings.Fields(body) {
			id, err := strconv.ParseInt(f, 10, 64)
			if err != nil {
				t.Fatalf("a request %s: %q", what, body)
			}
			first = first || id%3 == 0
		}
		return first
	}
	request := func(what string) bool {
		t.Helper()
		return requestTag("t", what)
	}
	for range 20 {
		request("before")
	}
	// Tags the server does not know yet: it reads the tag list once a
	// minute.
	const unread = 3
	for i := range unread {
		if code, out := runLeafd(t, dir, env, "tag", "add", fmt.Sprintf("u%d", i), "--step", "10"); code != 0 {
			t.Fatalf("leafd tag add: exit %d\n%s", code, out)
		}
	}
	proxy.Stall()
	stalled, asked := time.Now(), 0
	for time.Since(stalled) < 12*time.Second {
		request("while store.shards[0] hangs")
		// At once, and twice later, past pass-overs that ended.
		if asked < unread && time.Since(stalled) >= time.Duration(asked)*4*time.Second {
			requestTag(fmt.Sprintf("u%d", asked), "of a tag not read yet while store.shards[0] hangs")
			asked++
		}
	}
	proxy.Up()
	back := false
	for deadline := time.Now().Add(30 * time.Second); !back && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		back = request("after")
	}
	if !back {
		t.Fatal("no ID from store.shards[0]'s slots after it answered again")
	}
	if p.stop(t) != 0 {
		t.Fatal("exit after SIGTERM")
	}
}

// The quick start of docs/shards.md runs as written, but for its three
// databases, which are real databases of the engine it names here: with store.shards,
// the default store.dsn is not used, and no longer stops start-up.
func TestShardsQuickStartProcess(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "shards.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, block, _ := strings.Cut(string(doc), "```console\n")
	block, _, _ = strings.Cut(block, "```")
	var env []string
	var commands [][]string
	driver := "" // the quick start's store.driver, exported before store.shards
	for _, line := range strings.Split(block, "\n") {
		line, _, _ = strings.Cut(line, "#")
		switch fields := strings.Fields(line); {
		case strings.HasPrefix(line, "$ export LEAFD_STORE_SHARDS="):
			if driver == "" {
				t.Fatal("the quick start of docs/shards.md exports no LEAFD_STORE_DRIVER before LEAFD_STORE_SHARDS")
			}
			env = append(env, "LEAFD_STORE_SHARDS="+testdb.DSN(t, driver)+" "+testdb.DSN(t, driver)+" "+testdb.DSN(t, driver))
		case strings.HasPrefix(line, "$ export "):
			v := strings.ReplaceAll(strings.TrimPrefix(strings.TrimSpace(line), "$ export "), "'", "")
			if d, ok := strings.CutPrefix(v, "LEAFD_STORE_DRIVER="); ok {
				driver = d
			}
			env = append(env, v)
		case len(fields) > 2 && fields[0] == "$" && fields[1] == "leafd" && fields[2] != "serve":
			commands = append(commands, fields[2:])
		}
	}
	if len(env) != 2 || len(commands) != 3 {
		t.Fatalf("the quick start of docs/shards.md changed: exports %q, runs %q", env, commands)
	}
	dir := t.TempDir()
	var out string
	for _, args := range commands {
		var code int
		if code, out = runLeafd(t, dir, env, args...); code != 0 {
			t.Fatalf("leafd %s: exit %d\n%s", strings.Join(args, " "), code, out)
		}
	}
	if !strings.Contains(out, "16 of 16 slots active") {
		t.Fatalf("leafd shards status:\n%s", out)
	}
	p := startLeafdIn(t, dir, env...)
	if status, body := get(t, http.DefaultClient, p.addr+"/segment/t0?count=3"); status != 200 || len(strings.Fields(body)) != 3 {
		t.Fatalf("GET /segment/t0?count=3: %d %s", status, body)
	}
	if p.stop(t) != 0 {
		t.Fatal("exit after SIGTERM")
	}
}
