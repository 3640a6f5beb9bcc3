package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/leafd/leafd/internal/testkit/testdb"
	"github.com/leafd/leafd/store"
)

// leafd tag add / list / set-step work on the configured store with no
// server running, and exit 1 for a runtime error (exists, not defined,
// unreachable) and 2 for a bad value.
func TestTagCommands(t *testing.T) {
	testdb.Each(t, store.Drivers(), func(t *testing.T, driver, dsn string) {
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

		// leafd tag repair: nothing to do on a tag never loaded or not
		// rewound; a tag created again below its mark is raised to it.
		p.stop(t)
		raw := testdb.SQL(t, driver, dsn)
		var mark int64
		if err := raw.QueryRow("SELECT max_id FROM leafd_tag_highwater WHERE biz_tag = 'pay'").Scan(&mark); err != nil || mark <= 90001 {
			t.Fatalf("the mark of pay: %d, %v", mark, err)
		}
		run(0, "tag order is not rewound: max_id 1, high-water mark none", "tag", "repair", "order")
		run(0, fmt.Sprintf("tag pay is not rewound: max_id %d, high-water mark %d; nothing changed", mark, mark), "tag", "repair", "pay")
		run(1, "not defined", "tag", "repair", "nope")
		run(2, "not valid", "tag", "repair", "bad tag")
		run(2, "accepts 1 arg", "tag", "repair")
		if _, err := raw.Exec("DELETE FROM leaf_alloc WHERE biz_tag = 'pay'"); err != nil {
			t.Fatal(err)
		}
		// Created again by the command: above its mark at once.
		run(0, fmt.Sprintf("created tag pay: max_id %d", mark), "tag", "add", "pay")
		run(0, fmt.Sprintf("tag pay is not rewound: max_id %d", mark), "tag", "repair", "pay")
		// Created again by SQL below its mark: raised to it.
		if _, err := raw.Exec("DELETE FROM leaf_alloc WHERE biz_tag = 'pay'"); err != nil {
			t.Fatal(err)
		}
		if _, err := raw.Exec("INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('pay', 1, 1000)"); err != nil {
			t.Fatal(err)
		}
		run(0, fmt.Sprintf("tag pay repaired: max_id 1 -> %d (its high-water mark)", mark), "tag", "repair", "pay")
		run(0, fmt.Sprintf("tag pay is not rewound: max_id %d", mark), "tag", "repair", "pay")
		p = startLeafd(t, env...)
		waitReady(t, p)
		if code, body := get(t, http.DefaultClient, p.addr+"/segment/pay"); code != 200 || body != fmt.Sprintf("%d\n", mark) {
			t.Fatalf("GET /segment/pay after leafd tag repair = %d %q, want %d", code, body, mark)
		}
	})
	t.Run("Unreachable", func(t *testing.T) {
		testdb.Each(t, store.FallbackDrivers(), func(t *testing.T, driver, dsn string) { // a server where nothing listens
			code, out := runLeafd(t, t.TempDir(), []string{"LEAFD_STORE_DRIVER=" + driver, "LEAFD_STORE_DSN=" + testdb.Unreachable(driver, dsn)}, "tag", "list")
			if code != 1 || !strings.Contains(out, "cannot be reached") {
				t.Fatalf("exit %d, output %q; want exit 1 saying the database cannot be reached", code, out)
			}
		})
	})
}

func TestVersionCommand(t *testing.T) {
	code, out := runLeafd(t, t.TempDir(), nil, "version")
	if code != 0 || !strings.HasPrefix(out, "leafd ") || !strings.Contains(out, "go1.") {
		t.Fatalf("leafd version: exit %d, output %q", code, out)
	}
}

// tagAdd returns run, which runs leafd tag add args over a fresh store of
// the default engine and fails t unless it exits wantCode saying wantOut, and the
// directory and environment it runs in.
func tagAdd(t *testing.T) (run func(wantCode int, wantOut string, args ...string), dir string, env []string) {
	dir = t.TempDir()
	driver := store.DefaultDriver()
	env = []string{"LEAFD_STORE_DRIVER=" + driver, "LEAFD_STORE_DSN=" + testdb.DSN(t, driver)}
	return func(wantCode int, wantOut string, args ...string) {
		t.Helper()
		code, out := runLeafd(t, dir, env, append([]string{"tag", "add"}, args...)...)
		if code != wantCode || !strings.Contains(out, wantOut) {
			t.Fatalf("leafd tag add %s: exit %d, output %q; want exit %d and %q", strings.Join(args, " "), code, out, wantCode, wantOut)
		}
	}, dir, env
}

// leafd tag add --format dated: a bad combination of flags exits 2 before
// the store is asked.
func TestTagAddDatedRefused(t *testing.T) {
	run, _, _ := tagAdd(t)
	run(2, "a dated tag needs a period: add --period day, month or year", "o", "--format", "dated")
	run(2, `period "week" is not known`, "o", "--format", "dated", "--period", "week")
	run(2, `zone "Mars/Olympus" is not a time zone`, "o", "--format", "dated", "--period", "day", "--zone", "Mars/Olympus")
	run(2, "use 1 to 10", "o", "--format", "dated", "--period", "day", "--digits", "11")
	run(2, "--max-step 0 is out of range: use 1 to 1000000", "o", "--format", "dated", "--period", "day", "--max-step", "0")
	run(2, "--period applies to a dated tag only: add --format dated", "o", "--period", "day")
	run(2, "--zone applies to a dated tag only", "o", "--format", "opaque", "--zone", "UTC")
	run(2, "--max-step applies to a dated tag only", "o", "--max-step", "1")
	run(2, "--digits applies to an opaque or dated tag only", "o", "--digits", "6")
	run(2, `--format "daily" is not known: use sequential, opaque or dated`, "o", "--format", "daily")
	run(2, "invalid argument", "o", "--format", "dated", "--period", "day", "--max-step", "one")
}

// leafd tag add --format dated creates a dated tag with its period, zone,
// digits (6 unless given) and max step, which leafd tag list shows.
func TestTagAddDated(t *testing.T) {
	run, dir, env := tagAdd(t)
	run(0, "created tag orders: max_id 1, step 1000, dated (day, Asia/Shanghai, 6 digits)",
		"orders", "--format", "dated", "--period", "day", "--zone", "Asia/Shanghai")
	run(0, "created tag invoices: max_id 1, step 10, dated (month, UTC, 4 digits, max step 1)",
		"invoices", "--format", "dated", "--period", "month", "--digits", "4", "--max-step", "1", "--step", "10")
	code, out := runLeafd(t, dir, env, "tag", "list")
	if code != 0 || !strings.Contains(out, "FORMAT") ||
		!strings.Contains(out, "dated (day, Asia/Shanghai, 6 digits)") || !strings.Contains(out, "dated (month, UTC, 4 digits, max step 1)") {
		t.Fatalf("leafd tag list: exit %d\n%s", code, out)
	}
}
