package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/leafd/leafd/internal/testkit/testdb"
	"github.com/leafd/leafd/store"
)

// The binary with segment.require_token: leafd token add prints a token
// once, two servers over one database serve it for its tags only,
// leafd token list shows it without its secret, and leafd token revoke
// reaches both running servers within 5 s.
func TestTokenCommandsAndServers(t *testing.T) {
	dir := t.TempDir()
	env := []string{"LEAFD_STORE_DRIVER=" + store.DefaultDriver(), "LEAFD_STORE_DSN=" + testdb.DSN(t, store.DefaultDriver()),
		"LEAFD_SEGMENT_SEED_TAGS=order:100 payment:100 other:100", "LEAFD_SEGMENT_REQUIRE_TOKEN=true"}
	code, out := runLeafd(t, dir, env, "token", "add", "--tags", "order,pay*", "--description", "billing")
	if code != 0 {
		t.Fatalf("leafd token add: exit %d\n%s", code, out)
	}
	var text string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "leafd_") {
			text = strings.TrimSpace(l)
		}
	}
	if text == "" {
		t.Fatalf("leafd token add printed no token:\n%s", out)
	}
	id := strings.SplitN(strings.TrimPrefix(text, "leafd_"), "_", 2)[0]
	for _, args := range [][]string{{"token", "add"}, {"token", "add", "--tags", "a*b"}} {
		if code, out := runLeafd(t, dir, env, args...); code != 2 {
			t.Fatalf("leafd %s: exit %d, want 2\n%s", strings.Join(args, " "), code, out)
		}
	}
	code, out = runLeafd(t, dir, env, "token", "list")
	if code != 0 || !strings.Contains(out, id) || !strings.Contains(out, "order,pay*") || !strings.Contains(out, "billing") || strings.Contains(out, text) {
		t.Fatalf("leafd token list: exit %d\n%s", code, out)
	}

	procs := []*process{startLeafdIn(t, dir, env...), startLeafdIn(t, dir, env...)}
	for _, p := range procs {
		waitReady(t, p)
	}
	ask := func(p *process, tag, bearer string) int {
		req, _ := http.NewRequest("GET", p.addr+"/segment/"+tag, nil)
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	for i, p := range procs {
		for _, c := range []struct {
			tag, bearer string
			want        int
		}{{"order", "", 401}, {"other", text, 403}, {"order", text, 200}, {"payment", text, 200}} {
			if got := ask(p, c.tag, c.bearer); got != c.want {
				t.Fatalf("server %d: /segment/%s with token %v: %d, want %d", i, c.tag, c.bearer != "", got, c.want)
			}
		}
	}
	if code, out := runLeafd(t, dir, env, "token", "revoke", id); code != 0 {
		t.Fatalf("leafd token revoke: exit %d\n%s", code, out)
	}
	start := time.Now()
	for i, p := range procs {
		for ask(p, "order", text) != http.StatusForbidden {
			if time.Since(start) > 5*time.Second {
				t.Fatalf("server %d still serves a token revoked %v ago", i, time.Since(start))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if code, out := runLeafd(t, dir, env, "token", "revoke", id); code != 1 || !strings.Contains(out, "no token has the id") {
		t.Fatalf("leafd token revoke of a revoked token: exit %d, want 1\n%s", code, out)
	}
	for i, p := range procs {
		if code := p.stop(t); code != 0 {
			t.Errorf("server %d exited %d after SIGTERM\n%s", i, code, p.Output())
		}
	}
}
