package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leafd/leafd/internal/testdb"
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

// The quick start of docs/shards.md runs as written, but for its three
// databases, which are real MariaDB databases here: with store.shards,
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
	for _, line := range strings.Split(block, "\n") {
		line, _, _ = strings.Cut(line, "#")
		switch fields := strings.Fields(line); {
		case strings.HasPrefix(line, "$ export LEAFD_STORE_SHARDS="):
			env = append(env, "LEAFD_STORE_SHARDS="+testdb.MySQL(t)+" "+testdb.MySQL(t)+" "+testdb.MySQL(t))
		case strings.HasPrefix(line, "$ export "):
			env = append(env, strings.ReplaceAll(strings.TrimPrefix(strings.TrimSpace(line), "$ export "), "'", ""))
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
