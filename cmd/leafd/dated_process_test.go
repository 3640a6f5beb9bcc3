package main

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The README's order numbers: leafd tag add orders --format dated --period
// day --zone Asia/Shanghai --digits 6, then GET /segment/orders answers
// today's date in Shanghai followed by 000001, and the next numbers follow
// it, of the same width.
func TestDatedTagOfTheReadme(t *testing.T) {
	dir := t.TempDir()
	if code, out := runLeafd(t, dir, nil, "tag", "add", "orders", "--format", "dated", "--period", "day",
		"--zone", "Asia/Shanghai", "--digits", "6"); code != 0 ||
		!strings.Contains(out, "created tag orders: max_id 1, step 1000, dated (day, Asia/Shanghai, 6 digits)") {
		t.Fatalf("leafd tag add: exit %d\n%s", code, out)
	}
	sh, err := time.LoadLocation("Asia/Shanghai")
	if err != nil {
		t.Fatal(err)
	}
	today := func(at time.Time) int64 {
		n, _ := strconv.ParseInt(at.In(sh).Format("20060102"), 10, 64)
		return n
	}
	p := startLeafdIn(t, dir)
	waitReady(t, p)
	before := time.Now()
	code, body := get(t, http.DefaultClient, p.addr+"/segment/orders")
	after := time.Now()
	if code != 200 {
		t.Fatalf("GET /segment/orders = %d %q", code, body)
	}
	first, err := strconv.ParseInt(strings.TrimSpace(body), 10, 64)
	if err != nil {
		t.Fatalf("GET /segment/orders = %q: %v", body, err)
	}
	if first != today(before)*1_000_000+1 && first != today(after)*1_000_000+1 {
		t.Fatalf("the first number is %d, want %d000001: today in Shanghai, then the counter from 1", first, today(before))
	}
	code, body = get(t, http.DefaultClient, p.addr+"/segment/orders?count=3")
	if code != 200 {
		t.Fatalf("GET /segment/orders?count=3 = %d %q", code, body)
	}
	prev := first
	for _, f := range strings.Fields(body) {
		id, err := strconv.ParseInt(f, 10, 64)
		if d := id / 1_000_000; err != nil || id <= prev || len(f) != 14 || (d != today(before) && d != today(time.Now())) {
			t.Fatalf("after %d came %q (%v): want greater numbers of 14 digits of the same day", prev, f, err)
		}
		prev = id
	}
}

// The zone database is in the binary: with every zone database of the
// system hidden (/usr/share/zoneinfo, and Go's own zoneinfo.zip, which a
// binary built here would find), as in a container image that has none,
// leafd still knows Asia/Shanghai. (Needs root and mount namespaces;
// skipped without them.)
func TestDatedZoneWithoutZoneDatabase(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("hiding the zone databases takes root")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("no unshare(1)")
	}
	hide := []string{"/usr/share/zoneinfo", "/usr/share/lib/zoneinfo", "/usr/lib/locale/TZ"}
	goroot := runtime.GOROOT()
	if out, err := exec.Command("go", "env", "GOROOT").Output(); err == nil {
		goroot = strings.TrimSpace(string(out))
	}
	if goroot != "" {
		hide = append(hide, filepath.Join(goroot, "lib", "time"))
	}
	var script strings.Builder
	for _, d := range hide {
		if _, err := os.Stat(d); err == nil {
			fmt.Fprintf(&script, "mount -t tmpfs none %q || exit 99; ", d)
		}
	}
	script.WriteString(`exec "$0" "$@"`)
	dir := t.TempDir()
	cmd := exec.Command(unshare, "-m", "sh", "-c", script.String(),
		leafdBin, "tag", "add", "orders", "--format", "dated", "--period", "day", "--zone", "Asia/Shanghai")
	cmd.Dir = dir
	cmd.Env = baseEnv(t)
	out, _ := cmd.CombinedOutput()
	switch code := cmd.ProcessState.ExitCode(); {
	case code == 99 || strings.Contains(string(out), "unshare failed"):
		t.Skipf("no mount namespace here: %s", out)
	case code != 0 || !strings.Contains(string(out), "dated (day, Asia/Shanghai, 6 digits)"):
		t.Fatalf("leafd tag add with no zone database on the system: exit %d\n%s", code, out)
	}
}
