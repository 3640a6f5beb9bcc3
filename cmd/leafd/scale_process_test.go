package main

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jmoiron/sqlx"

	"github.com/leafd/leafd/internal/testkit/testdb"
	"github.com/leafd/leafd/internal/testkit/testenv"
	"github.com/leafd/leafd/internal/testkit/wirecount"
	"github.com/leafd/leafd/store"
)

// The scale the server must hold: 10,000 rows in leaf_alloc, 2,000 of them
// in use.
const (
	scaleTags   = 10_000
	scaleActive = 2_000
	// scaleUnknown is how many requests for distinct tags that exist
	// nowhere the server must answer with at most scaleUnknownQueries
	// queries to the database in all.
	scaleUnknown        = 3_000
	scaleUnknownQueries = 20
	// scaleMaxRSS bounds the server's resident memory at this scale.
	scaleMaxRSS = 150 << 20
)

func scaleTag(i int) string { return fmt.Sprintf("scale%05d", i) }

// A server over a database server holding 10,000 tags, 2,000 of them in use:
//   - while one tag's row is held by a long transaction (SELECT … FOR
//     UPDATE) and that tag runs dry, /readyz stays 200, the other tags keep
//     serving, and the tag shows failing for its row lock on the first page
//     the dashboard asks /api/state for, and on the dashboard's first
//     screen in Chromium (where there is one);
//   - a tag inserted by plain SQL is served within 3 seconds, long before
//     the next tag_refresh;
//   - 3,000 requests for distinct tags that exist nowhere cost at most 20
//     queries (counted on the wire, between leafd and the database);
//   - its resident memory stays under 150 MB.
//
// It also logs the size and time of /api/state and /metrics at this scale.
// The last two bounds, and the times, are those of leafd built without
// -race, started again on the same database: the race detector multiplies
// memory, and slows requests so much that a look-up limit per second lets
// more look-ups through the same requests.
//
// It runs on the engines at network addresses whose wire protocol the
// proxy that counts the queries reads (wirecount.Drivers).
func TestScaleTenThousandTags(t *testing.T) {
	var drivers []string
	for _, driver := range store.FallbackDrivers() {
		if slices.Contains(wirecount.Drivers(), driver) {
			drivers = append(drivers, driver)
		}
	}
	if len(drivers) == 0 {
		t.Fatalf("wirecount reads the protocol of none of the engines at network addresses %v", store.FallbackDrivers())
	}
	testdb.Each(t, drivers, testScaleTenThousandTags)
}

func testScaleTenThousandTags(t *testing.T, driver, dsn string) {
	raw := testdb.SQL(t, driver, dsn)
	env := []string{"LEAFD_STORE_DRIVER=" + driver, "LEAFD_STORE_DSN=" + dsn}
	if code, out := runLeafd(t, t.TempDir(), env, "migrate"); code != 0 {
		t.Fatalf("leafd migrate: exit %d\n%s", code, out)
	}
	insertTags(t, raw, scaleTags)
	// The tag that will be locked takes one-ID steps (the server grows
	// them, ten times at most per load), so that it needs loads and runs
	// dry soon after its row is locked.
	locked := scaleTag(0)
	if _, err := raw.Exec(raw.Rebind("UPDATE leaf_alloc SET step = 1 WHERE biz_tag = ?"), locked); err != nil {
		t.Fatal(err)
	}

	// leafd reaches the database through a proxy that counts the
	// commands it sends: robust to other tests using the same server.
	proxy := wirecount.New(t, driver, testdb.Addr(t, driver, dsn))
	started := time.Now()
	// tag_refresh is long, so that nothing in this test is served
	// through a refresh of the list.
	p := startLeafd(t, "LEAFD_STORE_DRIVER="+driver, "LEAFD_STORE_DSN="+testdb.WithAddr(t, driver, dsn, proxy.Addr()),
		"LEAFD_SEGMENT_TAG_REFRESH=10m")
	waitReady(t, p)
	t.Logf("leafd ready %v after its start, with %d tags", time.Since(started).Round(time.Millisecond), scaleTags)

	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}}
	segment := segmentGetter(client, p.addr)
	// 2,000 tags in use; the one to be locked a few times over, so that
	// its steps stay tiny.
	useTags(t, segment)
	for range 3 {
		if code, body := segment(locked); code != 200 {
			t.Fatalf("GET /segment/%s = %d %s", locked, code, body)
		}
	}

	t.Run("RowLocked", func(t *testing.T) { scaleRowLocked(t, p, raw, client, segment, locked) })

	t.Run("InsertedBySQLServedWithin3s", func(t *testing.T) {
		name := "scalenew"
		if _, err := raw.Exec(raw.Rebind("INSERT INTO leaf_alloc (biz_tag, max_id, step, description) VALUES (?, 1, 1000, 'by SQL')"), name); err != nil {
			t.Fatal(err)
		}
		inserted := time.Now()
		code, body := 0, ""
		_ = testenv.Eventually(t.Context(), 5*time.Second, 50*time.Millisecond, func() error {
			if code, body = segment(name); code != 200 {
				return fmt.Errorf("GET /segment/%s = %d %s", name, code, body)
			}
			return nil
		})
		took := time.Since(inserted)
		t.Logf("a tag inserted by SQL: GET /segment/%s = %d after %v", name, code, took.Round(time.Millisecond))
		if code != 200 || took > 3*time.Second {
			t.Errorf("a tag inserted by SQL was not served within 3s (tag_refresh is 10m): %d %s after %v", code, body, took)
		}
	})

	// The bound on queries is asserted on the binary without -race below,
	// as fast as production: the look-ups are limited per second, so a
	// binary five times slower spreads the same requests over more of them.
	t.Run("UnknownTags", func(t *testing.T) { askUnknownTags(t, proxy, segment) })

	// Memory and response times of a binary built with -race mean nothing
	// for production (the race detector multiplies memory several times):
	// they are measured on a leafd built without it, brought to the same
	// state.
	if code := p.stop(t); code != 0 {
		t.Errorf("leafd exited %d after SIGTERM", code)
	}
	t.Run("PlainBinary", func(t *testing.T) {
		bin := plainLeafd(t)
		saved := leafdBin
		leafdBin = bin // the tests of this package run one at a time
		defer func() { leafdBin = saved }()
		started := time.Now()
		p := startLeafd(t, "LEAFD_STORE_DRIVER="+driver, "LEAFD_STORE_DSN="+testdb.WithAddr(t, driver, dsn, proxy.Addr()), "LEAFD_SEGMENT_TAG_REFRESH=10m")
		waitReady(t, p)
		t.Logf("leafd (no -race) ready %v after its start, with %d tags", time.Since(started).Round(time.Millisecond), scaleTags+1)
		segment := segmentGetter(client, p.addr)
		useTags(t, segment)
		t.Run("UnknownTagsCostFewQueries", func(t *testing.T) {
			if queries := askUnknownTags(t, proxy, segment); queries > scaleUnknownQueries {
				t.Errorf("%d requests for distinct unknown tags cost %d queries, want at most %d", scaleUnknown, queries, scaleUnknownQueries)
			}
		})
		for _, path := range []string{"/api/state", "/api/state?limit=50&sort=problems", "/metrics"} {
			for _, gz := range []bool{false, true} {
				var (
					size  int
					times []time.Duration
					body  []byte
				)
				for range 3 {
					var took time.Duration
					size, took, body = timedGet(t, p.addr+path, gz)
					times = append(times, took.Round(100*time.Microsecond))
				}
				note := ""
				if strings.HasPrefix(path, "/api/state") && !gz {
					note = fmt.Sprintf(", %d tags in it", len(stateTags(t, body)))
				}
				t.Logf("GET %s (gzip %v): %d bytes, read in %v%s", path, gz, size, times, note)
			}
		}
		rss := vmRSS(t, p.Pid())
		t.Logf("leafd (no -race) VmRSS: %.1f MB with %d tags, %d in use", float64(rss)/(1<<20), scaleTags+1, scaleActive)
		if rss > scaleMaxRSS {
			t.Errorf("leafd uses %.1f MB of resident memory with %d tags, %d in use; want at most %d MB",
				float64(rss)/(1<<20), scaleTags+1, scaleActive, scaleMaxRSS>>20)
		}
	})
}

// plainBinary is leafd built without -race, once per test process, when
// a test asks for it.
var plainBinary testenv.Binary

// plainLeafd returns the path of leafd built without -race: leafdBin when
// that already is (LEAFD_TEST_NO_RACE_BINARY), otherwise a build of its own.
func plainLeafd(t *testing.T) string {
	t.Helper()
	if !built.Race {
		return leafdBin
	}
	path, err := plainBinary.Path()
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// scaleRowLocked holds the row of locked in an open transaction, runs the
// tag dry and watches the server for 15 seconds: longer than the 10-second
// bound of one load attempt, after which the tag's failure is recorded.
func scaleRowLocked(t *testing.T, p *process, raw *sqlx.DB, client *http.Client, segment func(string) (int, string), locked string) {
	ctx := context.Background()
	conn, err := raw.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	released := false
	release := func() {
		if !released {
			released = true
			_ = tx.Rollback()
		}
	}
	defer release()
	var maxID int64
	if err := tx.QueryRowContext(ctx, raw.Rebind("SELECT max_id FROM leaf_alloc WHERE biz_tag = ? FOR UPDATE"), locked).Scan(&maxID); err != nil {
		t.Fatal(err)
	}

	// Run it dry: its buffered IDs go, then a request waits for the load
	// stuck behind the lock and fails.
	dry := false
	for i := 0; i < 1000 && !dry; i++ {
		code, _ := segment(locked)
		dry = code != 200
	}
	if !dry {
		t.Fatalf("tag %s still serves after 1,000 requests with its row locked", locked)
	}
	dryAt := time.Now()

	const window = 15 * time.Second
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var readyz, readyzBad, served, servedBad, loaded atomic.Int64
	var firstBad atomic.Value
	wg.Add(2)
	go func() { // /readyz, every 100ms
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			res, err := client.Get(p.addr + "/readyz")
			readyz.Add(1)
			if err != nil {
				readyzBad.Add(1)
				firstBad.CompareAndSwap(nil, "/readyz: "+err.Error())
				continue
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != 200 {
				readyzBad.Add(1)
				firstBad.CompareAndSwap(nil, fmt.Sprintf("/readyz %v after the tag ran dry: %d %s",
					time.Since(dryAt).Round(time.Millisecond), res.StatusCode, b))
			}
		}
	}()
	go func() {
		// The other tags in use, round after round, served from their
		// buffers; and every tenth request a tag never asked for before,
		// whose first range must be loaded from other rows of the table
		// while one row is locked.
		defer wg.Done()
		fresh := scaleActive
		for i, n := 1, 0; ; i, n = i%(scaleActive-1)+1, n+1 {
			select {
			case <-stop:
				return
			default:
			}
			tag := scaleTag(i)
			if n%10 == 0 && fresh < scaleTags {
				tag = scaleTag(fresh)
				fresh++
				loaded.Add(1)
			}
			code, body := segment(tag)
			served.Add(1)
			if code != 200 {
				servedBad.Add(1)
				firstBad.CompareAndSwap(nil, fmt.Sprintf("GET /segment/%s = %d %s", tag, code, body))
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	// The tag as the dashboard's first screen shows it: the page it asks
	// /api/state for (gzip, as a browser asks), polled until the tag is in
	// it, failing, with its row lock for a cause.
	var (
		shown    *scaleTagState
		shownAt  time.Duration
		lastSeen = "not in the page"
	)
	for time.Since(dryAt) < window && shown == nil {
		time.Sleep(500 * time.Millisecond)
		_, _, body := timedGet(t, p.addr+dashboardFirstPage, true)
		tags := stateTags(t, body)
		lastSeen = fmt.Sprintf("not among the %d tags of the page", len(tags))
		for i, st := range tags {
			if st.Tag != locked {
				continue
			}
			lastSeen = fmt.Sprintf("row %d: state %q, error_code %q, error %q", i+1, cmp.Or(st.State, st.Status), st.ErrorCode, st.Error)
			if cmp.Or(st.State, st.Status) == "failing" && rowLockCause(st.Error) {
				shown, shownAt = &st, time.Since(dryAt).Round(time.Millisecond)
			}
		}
	}
	// The dashboard itself, while the row is still locked.
	if shown != nil {
		t.Run("DashboardFirstScreen", func(t *testing.T) { dashboardShowsLocked(t, p.addr, locked) })
	}
	for time.Since(dryAt) < window {
		time.Sleep(100 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	release()

	t.Logf("row of %s locked, tag dry for %v: /readyz %d polls, %d not 200; other tags %d requests (%d of them first ones, loading a range), %d failed",
		locked, time.Since(dryAt).Round(time.Millisecond), readyz.Load(), readyzBad.Load(), served.Load(), loaded.Load(), servedBad.Load())
	if bad := firstBad.Load(); bad != nil {
		t.Logf("first failure: %s", bad)
	}
	if readyzBad.Load() > 0 {
		t.Errorf("/readyz answered other than 200 %d times of %d while one tag's row was locked", readyzBad.Load(), readyz.Load())
	}
	if servedBad.Load() > 0 || served.Load() == 0 {
		t.Errorf("other tags: %d of %d requests failed while one tag's row was locked", servedBad.Load(), served.Load())
	}
	if shown == nil {
		t.Errorf("GET %s never showed %s failing for its row lock (a cause that says the row is locked, lock wait timeout) in %v after it ran dry; last: %s",
			dashboardFirstPage, locked, window, lastSeen)
	} else {
		t.Logf("GET %s showed %s failing %v after it ran dry: error_code %q, error %q", dashboardFirstPage, locked, shownAt, shown.ErrorCode, shown.Error)
	}

	// Once the lock is gone the tag serves again.
	if err := testenv.Eventually(t.Context(), 15*time.Second, 100*time.Millisecond, func() error {
		if code, body := segment(locked); code != 200 {
			return fmt.Errorf("%d %s", code, body)
		}
		return nil
	}); err != nil {
		t.Errorf("tag %s not served after its row was released: %v", locked, err)
	}
}

// segmentGetter returns a function that asks the server at addr for one
// ID of a tag and returns the status and body.
func segmentGetter(client *http.Client, addr string) func(tag string) (int, string) {
	return func(tag string) (int, string) {
		res, err := client.Get(addr + "/segment/" + tag)
		if err != nil {
			return 0, err.Error()
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
}

// useTags asks for the first ID of the tags in use, 16 at a time.
func useTags(t *testing.T, segment func(string) (int, string)) {
	t.Helper()
	began := time.Now()
	failures := parallel(16, scaleActive, func(i int) string {
		if code, body := segment(scaleTag(i)); code != 200 {
			return fmt.Sprintf("GET /segment/%s = %d %s", scaleTag(i), code, body)
		}
		return ""
	})
	if len(failures) > 0 {
		t.Fatalf("%d of %d tags failed to serve, first: %s", len(failures), scaleActive, failures[0])
	}
	t.Logf("first IDs of %d tags in %v", scaleActive, time.Since(began).Round(time.Millisecond))
}

// askUnknownTags sends 3,000 requests for distinct tags that exist
// nowhere, 16 at a time, once the server has stopped querying, and returns
// how many queries the server sent the database meanwhile. None may answer
// 200.
func askUnknownTags(t *testing.T, proxy *wirecount.Proxy, segment func(string) (int, string)) int {
	t.Helper()
	proxy.WaitQuiet(t, 500*time.Millisecond, 10*time.Second)
	before := proxy.Counts()
	began := time.Now()
	var mu sync.Mutex
	statuses := map[int]int{}
	parallel(16, scaleUnknown, func(i int) string {
		code, _ := segment(fmt.Sprintf("nosuch%05d", i))
		mu.Lock()
		statuses[code]++
		mu.Unlock()
		return ""
	})
	took := time.Since(began)
	proxy.WaitQuiet(t, 300*time.Millisecond, 10*time.Second) // look-ups still in flight land
	after := proxy.Counts()
	queries := proxy.Statements(after) - proxy.Statements(before)
	t.Logf("%d requests for unknown tags in %v: statuses %v; %d queries (commands sent: %s)",
		scaleUnknown, took.Round(time.Millisecond), statuses, queries, after.Minus(before))
	if statuses[200] > 0 {
		t.Errorf("%d requests for tags that exist nowhere answered 200", statuses[200])
	}
	return queries
}

// insertTags inserts n tags, scaleTag(0) to scaleTag(n-1), with a step of
// 1,000, 1,000 rows a statement.
func insertTags(t *testing.T, raw *sqlx.DB, n int) {
	t.Helper()
	const batch = 1000
	for lo := 0; lo < n; lo += batch {
		hi := min(lo+batch, n)
		var q strings.Builder
		q.WriteString("INSERT INTO leaf_alloc (biz_tag, max_id, step, description) VALUES ")
		args := make([]any, 0, hi-lo)
		for i := lo; i < hi; i++ {
			if i > lo {
				q.WriteByte(',')
			}
			q.WriteString("(?, 1, 1000, 'scale test')")
			args = append(args, scaleTag(i))
		}
		if _, err := raw.Exec(raw.Rebind(q.String()), args...); err != nil {
			t.Fatal(err)
		}
	}
}

// parallel runs f(0) to f(n-1) on workers goroutines and returns the
// non-empty strings f returned.
func parallel(workers, n int, f func(i int) string) []string {
	var (
		mu   sync.Mutex
		out  []string
		next atomic.Int64
		wg   sync.WaitGroup
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if s := f(i); s != "" {
					mu.Lock()
					out = append(out, s)
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return out
}

// timedGet fetches url and returns the size of the body as sent (gzipped
// if gz and the server compresses), the time to read all of it, and the
// body, decompressed.
func timedGet(t *testing.T, url string, gz bool) (int, time.Duration, []byte) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if gz {
		req.Header.Set("Accept-Encoding", "gzip")
	}
	// A transport of its own, without transparent decompression, so that
	// the size is what went over the wire.
	tr := &http.Transport{DisableCompression: true}
	defer tr.CloseIdleConnections()
	began := time.Now()
	res, err := (&http.Client{Transport: tr, Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	took := time.Since(began)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != 200 {
		t.Fatalf("GET %s = %d %s", url, res.StatusCode, body)
	}
	size := len(body)
	if res.Header.Get("Content-Encoding") == "gzip" {
		body = gunzip(t, body)
	}
	return size, took, body
}

// scaleTagState is what these tests read of a tag in /api/state. Status and
// State cover either name of the tag's summary, where the server gives one.
type scaleTagState struct {
	Tag       string `json:"tag"`
	Error     string `json:"error"`
	ErrorCode string `json:"error_code"`
	Status    string `json:"status"`
	State     string `json:"state"`
}

// dashboardFirstPage is what the dashboard asks /api/state for on its
// first screen (pageQuery in http/dashboard/app.js, with its defaults:
// problems first, the first page of 50 rows).
const dashboardFirstPage = "/api/state?sort=problems&offset=0&limit=50"

// rowLockCause reports whether a tag's error says that its row is locked
// (MySQL's lock wait timeout), not that the database cannot be reached.
func rowLockCause(msg string) bool {
	m := strings.ToLower(msg)
	return (strings.Contains(m, "row is locked") || strings.Contains(m, "lock wait timeout")) &&
		!strings.Contains(m, "cannot be reached")
}

func stateTags(t *testing.T, body []byte) []scaleTagState {
	t.Helper()
	var st struct {
		Segment struct {
			Tags []scaleTagState `json:"tags"`
		} `json:"segment"`
	}
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatalf("/api/state: %v", err)
	}
	return st.Segment.Tags
}

// vmRSS returns the resident memory of process pid, from /proc.
func vmRSS(t *testing.T, pid int) int64 {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest) // "123456 kB"
			kb, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil || len(f) != 2 || f[1] != "kB" {
				t.Fatalf("/proc/%d/status: %q", pid, line)
			}
			return kb << 10
		}
	}
	t.Fatalf("/proc/%d/status has no VmRSS", pid)
	return 0
}

func gunzip(t *testing.T, b []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// dashboardShowsLocked opens the dashboard of the server at addr in
// headless Chromium, as a person would (no query: the first screen), and
// checks that the row of locked is on it, failing, with its row lock for a
// cause in the row itself. It skips where there is no Chromium, unless
// LEAFD_TEST_REQUIRE_BROWSER=1 (LEAFD_TEST_CHROMIUM names one, as for the
// browser tests of package http).
func dashboardShowsLocked(t *testing.T, addr, locked string) {
	path := os.Getenv("LEAFD_TEST_CHROMIUM")
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless-shell"} {
		if path != "" {
			break
		}
		path, _ = exec.LookPath(name)
	}
	if path == "" {
		const msg = "no Chromium found (chromium, chromium-browser, google-chrome, headless-shell on PATH, or LEAFD_TEST_CHROMIUM)"
		if os.Getenv("LEAFD_TEST_REQUIRE_BROWSER") == "1" {
			t.Fatal(msg + " (LEAFD_TEST_REQUIRE_BROWSER=1)")
		}
		t.Skip(msg)
	}
	var out bytes.Buffer
	var mu sync.Mutex
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900),
		chromedp.CombinedOutput(writerFunc(func(b []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return out.Write(b) })),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(allocCtx)
	defer cancel()
	if err := chromedp.Do(ctx); err != nil { // starts the browser: no timeout on it
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("start %s: %v\n%s", path, err, out.String())
	}
	tctx, tcancel := context.WithTimeout(ctx, 30*time.Second)
	defer tcancel()
	if err := chromedp.Do(tctx, chromedp.EmulateViewport(1280, 900), chromedp.Navigate("http://"+strings.TrimPrefix(addr, "http://")+"/dashboard")); err != nil {
		t.Fatalf("open the dashboard: %v", err)
	}
	// The row, on the first screen, and the cause in the row: the state
	// cell's note and the line below it.
	rowJS := fmt.Sprintf(`(() => {
		const r = document.querySelector('#rows tr[data-tag=%q]');
		if (!r) return null;
		const b = r.getBoundingClientRect();
		const why = r.querySelector('.why');
		const err = r.nextElementSibling && r.nextElementSibling.dataset.for === r.dataset.tag ? r.nextElementSibling.textContent : '';
		return {Status: r.dataset.status, Why: why && !why.hidden ? why.textContent : '', Error: err,
			InView: b.top >= 0 && b.bottom <= innerHeight};
	})()`, locked)
	type rowView struct {
		Status, Why, Error string
		InView             bool
	}
	if _, err := chromedp.Run(tctx, chromedp.Poll[chromedp.Void](
		fmt.Sprintf(`(() => { const v = %s; return v && v.Status === 'failing' && v.Error !== '' })()`, rowJS),
		chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		text, _ := chromedp.Run(context.WithoutCancel(tctx), chromedp.Evaluate[string](`document.getElementById('rows').innerText`))
		t.Fatalf("the dashboard's first screen has no failing row of %s: %v\nthe table says:\n%s", locked, err, text)
	}
	row, err := chromedp.Run(tctx, chromedp.Evaluate[rowView](rowJS))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the dashboard's row of %s: %+v", locked, row)
	if !row.InView {
		t.Errorf("the row of %s is on the first page but not on the first screen", locked)
	}
	if row.Why != "row locked" || !rowLockCause(row.Error) {
		t.Errorf("the row of %s says %q with %q below it; want \"row locked\" and the lock wait timeout", locked, row.Why, row.Error)
	}
}

// writerFunc is an io.Writer of a function.
type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }
