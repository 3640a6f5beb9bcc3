package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leafd/leafd/internal/testkit/testenv"
)

// leafdBin is the leafd binary the tests start, built once from this
// repository at its first use.
var leafdBin testenv.Binary

// TestMain lets the test binary stand in for leafbench when the harness
// starts itself again as a baseline server.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == baselineCommand {
		os.Exit(serveBaseline(os.Args[2:], os.Stdout, os.Stderr))
	}
	code := m.Run()
	leafdBin.Remove()
	os.Exit(code)
}

// TestQuickRun runs the harness as CI does, -quick, against a leafd built
// from this repository and the baseline, and checks the JSON report's shape:
// every scenario measured, no request failed, latencies in order. It never
// judges a timing or a throughput.
func TestQuickRun(t *testing.T) {
	testenv.Slow(t)
	if testing.Short() {
		t.Skip("starts two servers and loads them for several seconds")
	}
	bin, err := leafdBin.Path()
	if err != nil {
		t.Fatal(err)
	}
	rep, _, md := runReport(t, 2*time.Minute, "-quick", "-concurrency", "16", "-leafd", bin)
	if !rep.OK {
		t.Errorf("report says ok: false")
	}
	if rep.Machine.CPUs < 1 || rep.Machine.Go == "" || rep.Machine.GOOS == "" {
		t.Errorf("machine not described: %+v", rep.Machine)
	}
	var names []string
	for _, s := range rep.Scenarios {
		names = append(names, s.Name)
		if s.Requests == 0 || s.RequestsPerS <= 0 {
			t.Errorf("%s: %d requests, %v/s: nothing measured", s.Name, s.Requests, s.RequestsPerS)
		}
		if s.Errors != 0 {
			t.Errorf("%s: %d errors: %v", s.Name, s.Errors, s.FirstErrors)
		}
		if !(0 < s.P50us && s.P50us <= s.P99us && s.P99us <= s.P999us) {
			t.Errorf("%s: latencies out of order: p50 %v, p99 %v, p999 %v µs", s.Name, s.P50us, s.P99us, s.P999us)
		}
		if s.RatioRequests == nil || *s.RatioRequests <= 0 {
			t.Errorf("%s: no ratio to the baseline", s.Name)
		}
		if s.IDsPerS != s.RequestsPerS*float64(s.IDsPerRequest) {
			t.Errorf("%s: %v IDs/s is not %v requests/s × %d", s.Name, s.IDsPerS, s.RequestsPerS, s.IDsPerRequest)
		}
	}
	if got, want := strings.Join(names, ","), "baseline,segment,segment_batch,snowflake,snowflake_batch"; got != want {
		t.Errorf("scenarios %s, want %s", got, want)
	}

	h := rep.HalfLoad
	if h == nil || len(h.Results) != 2 {
		t.Fatalf("half-load phase missing or incomplete: %+v", h)
	}
	for _, x := range h.Results {
		if x.Requests == 0 || x.Errors != 0 {
			t.Errorf("half load %s: %d requests, %d errors %v", x.Name, x.Requests, x.Errors, x.FirstErrors)
		}
		if !(0 < x.P50us && x.P50us <= x.P99us && x.P99us <= x.P999us) {
			t.Errorf("half load %s: latencies out of order: p50 %v, p99 %v, p999 %v µs", x.Name, x.P50us, x.P99us, x.P999us)
		}
	}

	for _, want := range []string{"| `segment_batch` | `GET /segment/bench?count=1000` |",
		"| `snowflake_batch` | `GET /snowflake?count=1000` |", "snowflake.workers 3, snowflake.max_borrow 5ms", "| scenario | offered/s |", "Machine: "} {
		if !strings.Contains(md, want) {
			t.Errorf("the Markdown report lacks %q:\n%s", want, md)
		}
	}
}

func TestCheckTarget(t *testing.T) {
	for _, c := range []struct {
		raw, want string
	}{
		{"http://127.0.0.1:8080", "http://127.0.0.1:8080"},
		{"http://127.9.9.9:1/", "http://127.9.9.9:1"},
		{"http://[::1]:8080", "http://[::1]:8080"},
		{"http://localhost:8080", "http://localhost:8080"},
	} {
		if got, err := checkTarget(c.raw, false); err != nil || got != c.want {
			t.Errorf("checkTarget(%q) = %q, %v; want %q", c.raw, got, err, c.want)
		}
	}
	for _, raw := range []string{"http://10.0.0.1:8080", "http://example.com", "http://0.0.0.0:8080", "http://[::]:80"} {
		_, err := checkTarget(raw, false)
		if err == nil || !strings.Contains(err.Error(), "-allow-remote") {
			t.Errorf("checkTarget(%q) = %v, want a refusal naming -allow-remote", raw, err)
		}
		if _, err := checkTarget(raw, true); err != nil {
			t.Errorf("checkTarget(%q, allowRemote) = %v", raw, err)
		}
	}
	for _, raw := range []string{"https://127.0.0.1", "127.0.0.1:8080", "http://127.0.0.1:8080/segment", "http://127.0.0.1?x=1"} {
		if _, err := checkTarget(raw, true); err == nil {
			t.Errorf("checkTarget(%q) = nil, want a usage error", raw)
		}
	}
}

// TestDialerRefusesRemote checks the last line of defence: the client's
// dialer connects to loopback addresses only.
func TestDialerRefusesRemote(t *testing.T) {
	client := newClient(1, false)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://192.0.2.1:9/", nil) // TEST-NET-1
	_, err := client.Do(req)
	if err == nil || !strings.Contains(err.Error(), "not a loopback address") {
		t.Fatalf("GET to 192.0.2.1 = %v, want a refusal before connecting", err)
	}
}

func TestFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-rounds", "0"}, {"-concurrency", "0"}, {"-duration", "1ms"}, {"-scenarios", "segment,nope"},
		{"-tag", "bad tag"}, {"-target", "http://10.1.1.1:80"}, {"-target", "http://127.0.0.1:1", "-leafd", "x"}, {"extra"},
		{"-snowflake-workers", "0"}, {"-snowflake-workers", "17"}, {"-snowflake-borrow", "-1ms"}, {"-snowflake-borrow", "2s"},
		{"-target", "http://127.0.0.1:1", "-snowflake-workers", "1"}, {"-target", "http://127.0.0.1:1", "-snowflake-borrow", "0"},
	} {
		var stderr bytes.Buffer
		if code := run(context.Background(), args, &stderr, &stderr); code != exitUsage {
			t.Errorf("leafbench %v exited %d, want %d (usage)\n%s", args, code, exitUsage, &stderr)
		}
	}
	o, err := parseFlags([]string{"-quick", "-rounds", "2"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if o.duration != time.Second || o.rounds != 2 || len(o.scenarios) != len(strings.Split(defaultScenarios, ",")) {
		t.Errorf("-quick -rounds 2: duration %v, rounds %d, %d scenarios", o.duration, o.rounds, len(o.scenarios))
	}
	if o.snowflake != (snowflakeSettings{workers: 3, borrow: 5 * time.Millisecond}) {
		t.Errorf("default snowflake settings %v, want 3 worker ids and max_borrow 5ms", o.snowflake)
	}
	o, err = parseFlags([]string{"-snowflake-workers", "1", "-snowflake-borrow", "0"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if o.snowflake != (snowflakeSettings{workers: 1}) {
		t.Errorf("-snowflake-workers 1 -snowflake-borrow 0: %v", o.snowflake)
	}
	env := strings.Join(leafdSettings("bench", false, o.snowflake), " ")
	for _, want := range []string{"LEAFD_SNOWFLAKE_WORKER_ID=auto", "LEAFD_SNOWFLAKE_WORKERS=1", "LEAFD_SNOWFLAKE_MAX_BORROW=0s"} {
		if !strings.Contains(env, want) {
			t.Errorf("leafd's settings %s lack %s", env, want)
		}
	}
}

// runReport runs leafbench with args and its JSON and Markdown reports
// written to a temporary directory, fails t unless it exits 0, and returns
// the decoded JSON report, what it printed and the Markdown report.
func runReport(t *testing.T, timeout time.Duration, args ...string) (rep Report, stdout, md string) {
	t.Helper()
	dir := t.TempDir()
	jsonPath, mdPath := filepath.Join(dir, "report.json"), filepath.Join(dir, "report.md")
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var out, stderr bytes.Buffer
	if code := run(ctx, append(args, "-json", jsonPath, "-markdown", mdPath), &out, &stderr); code != exitOK {
		t.Fatalf("leafbench exited %d\nstdout:\n%s\nstderr:\n%s", code, &out, &stderr)
	}
	t.Logf("stdout:\n%s", &out)
	data, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatalf("the JSON report does not decode: %v\n%s", err, data)
	}
	mdData, err := os.ReadFile(mdPath)
	if err != nil {
		t.Fatal(err)
	}
	return rep, out.String(), string(mdData)
}
