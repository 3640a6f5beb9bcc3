package main

import (
	"net/http"
	"strings"
	"testing"
)

// leafd tag add / list / set-step work on the configured store with no
// server running, and exit 1 for a runtime error (exists, not defined,
// unreachable) and 2 for a bad value.
func TestTagCommands(t *testing.T) {
	for _, driver := range []string{"sqlite", "mysql"} {
		t.Run(driver, func(t *testing.T) {
			dsn := testDSN(t, driver)
			dir := t.TempDir()
			env := []string{"LEAFD_STORE_DRIVER=" + driver, "LEAFD_STORE_DSN=" + dsn}
			run := func(wantCode int, wantOut string, args ...string) string {
				t.Helper()
				code, out := runLeafd(t, dir, env, args...)
				if code != wantCode || !strings.Contains(out, wantOut) {
					t.Fatalf("leafd %s: exit %d, output %q; want exit %d and %q", strings.Join(args, " "), code, out, wantCode, wantOut)
				}
				return out
			}
			run(0, "no tags", "tag", "list")
			run(0, "created tag order: max_id 1, step 500", "tag", "add", "order", "--step", "500", "--description", "order IDs")
			run(0, "created tag pay: max_id 90001, step 1000", "tag", "add", "pay", "--max-id", "90001")
			run(1, "already exists", "tag", "add", "order")
			run(1, `a tag that differs only in letter case, "order", exists`, "tag", "add", "Order")
			run(2, "not valid", "tag", "add", "bad tag")
			run(2, "out of range", "tag", "add", "x", "--step", "0")
			run(2, "out of range", "tag", "add", "x", "--step", "1000001")
			run(2, "out of range", "tag", "add", "x", "--max-id", "0")
			run(2, "invalid argument", "tag", "add", "x", "--step", "ten")
			run(2, "accepts 1 arg", "tag", "add")
			run(0, "step 500 -> 2000", "tag", "set-step", "order", "2000")
			run(1, "not defined", "tag", "set-step", "nope", "10")
			run(1, `a tag that differs only in letter case, "order", exists`, "tag", "set-step", "ORDER", "10")
			run(2, "not a whole number", "tag", "set-step", "order", "two")
			run(2, "out of range", "tag", "set-step", "--", "order", "-1")
			out := run(0, "TAG", "tag", "list")
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if len(lines) != 3 || !strings.HasPrefix(lines[0], "TAG") ||
				strings.Join(strings.Fields(lines[1])[:3], " ") != "order 1 2000" || !strings.HasSuffix(lines[1], "order IDs") ||
				strings.Join(strings.Fields(lines[2])[:3], " ") != "pay 90001 1000" {
				t.Fatalf("leafd tag list:\n%s", out)
			}

			// A server on the same database serves the tags the command made.
			p := startLeafd(t, env...)
			waitReady(t, p)
			if code, body := get(t, http.DefaultClient, p.addr+"/segment/pay"); code != 200 || body != "90001\n" {
				t.Fatalf("GET /segment/pay after leafd tag add = %d %q", code, body)
			}
		})
	}
	t.Run("Unreachable", func(t *testing.T) {
		code, out := runLeafd(t, t.TempDir(), []string{"LEAFD_STORE_DRIVER=mysql", "LEAFD_STORE_DSN=root@tcp(127.0.0.1:1)/x?timeout=200ms"}, "tag", "list")
		if code != 1 || !strings.Contains(out, "cannot be reached") {
			t.Fatalf("exit %d, output %q; want exit 1 saying the database cannot be reached", code, out)
		}
	})
}

func TestVersionCommand(t *testing.T) {
	code, out := runLeafd(t, t.TempDir(), nil, "version")
	if code != 0 || !strings.HasPrefix(out, "leafd ") || !strings.Contains(out, "go1.") {
		t.Fatalf("leafd version: exit %d, output %q", code, out)
	}
}
