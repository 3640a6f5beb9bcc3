package http_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/segment"
)

// The browser tests load the dashboard of a live server in headless
// Chromium and read the page as a person would see it.
//
// Environment:
//
//	LEAFD_TEST_CHROMIUM=/path/to/chromium   the browser (default: chromium, chromium-browser,
//	                                         google-chrome or headless-shell on PATH)
//	LEAFD_TEST_REQUIRE_BROWSER=1            fail, rather than skip, when there is none
//	LEAFD_TEST_ARTIFACTS=DIR                keep the screenshots there (default: the test's
//	                                         temporary directory, removed afterwards)
//	LEAFD_DASHBOARD_PNG=FILE                also write the README's screenshot there, after a
//	                                         longer run of traffic (docs/dashboard.png)

// chromiumPath finds a Chromium to drive, or skips the test.
func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("LEAFD_TEST_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	const msg = "no Chromium found (looked for chromium, chromium-browser, google-chrome, headless-shell on PATH): " +
		"install Debian's chromium package or set LEAFD_TEST_CHROMIUM"
	if os.Getenv("LEAFD_TEST_REQUIRE_BROWSER") == "1" {
		t.Fatal(msg + " (LEAFD_TEST_REQUIRE_BROWSER=1)")
	}
	t.Skip(msg)
	return ""
}

// artifactDir is where screenshots go.
func artifactDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("LEAFD_TEST_ARTIFACTS")
	if dir == "" {
		return t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// browser is one headless Chromium whose tabs the subtests share.
type browser struct {
	ctx    context.Context
	output *bytes.Buffer // what Chromium wrote, for failures

	mu      sync.Mutex
	console []chromedp.ConsoleMessage
}

func startBrowser(t *testing.T) *browser {
	t.Helper()
	path := chromiumPath(t)
	userData := t.TempDir() // removed after the browser is stopped: cleanups run in reverse
	out := &lockedBuffer{}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.UserDataDir(userData),
		chromedp.WindowSize(1280, 900),
		chromedp.CombinedOutput(out),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(cancel)
	b := &browser{ctx: ctx, output: &out.Buffer}
	// The first Run starts the browser; it must not carry a timeout.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start %s: %v\n%s", path, err, out.String())
	}
	b.listen(ctx)
	return b
}

type lockedBuffer struct {
	mu sync.Mutex
	bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.Buffer.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.Buffer.String()
}

// listen records the console of the tab of ctx: script errors, CSP
// violations, failed requests.
func (b *browser) listen(ctx context.Context) {
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			b.mu.Lock()
			b.console = append(b.console, m)
			b.mu.Unlock()
		}
	}()
}

// consoleErrors returns the errors and exceptions the pages logged.
func (b *browser) consoleErrors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, m := range b.console {
		if m.Type == chromedp.ConsoleError || m.IsException() {
			out = append(out, m.String())
		}
	}
	return out
}

// do runs steps on the tab of ctx within 15 seconds.
func (b *browser) do(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v\nconsole: %q", what, err, b.consoleErrors())
	}
}

// eval evaluates a JavaScript expression on the tab of ctx.
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// waitFor polls a JavaScript expression until it is truthy.
func waitFor(t *testing.T, ctx context.Context, what, expr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](expr,
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(8*time.Second))); err != nil {
		html := eval[string](t, context.WithoutCancel(ctx), `document.getElementById('main').innerText`)
		t.Fatalf("%s: %v\nthe page says:\n%s", what, err, html)
	}
}

func darkMode(on bool) chromedp.Action[chromedp.Void] {
	value := "light"
	if on {
		value = "dark"
	}
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: value}},
		})
		return err
	})
}

func screenshot(t *testing.T, ctx context.Context, paths ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	for _, p := range paths {
		if err := os.WriteFile(p, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s (%d KB)", p, len(png)/1024)
	}
}

// commas formats n as the dashboard does: 12,345.
func commas(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// scenario is a server in the states the dashboard must show: a tag whose
// next range is ready, one whose step grew and whose next range is loading,
// one waiting for its first range, one never asked for; snowflake on a
// leased worker id.
func scenario(t *testing.T) *dashServer {
	t.Helper()
	clock := &movableClock{}
	d := newDashServer(t, openSQLite(t), segment.Config{
		Now: clock.Now, WaitTimeout: 200 * time.Millisecond, LoadTimeout: time.Minute,
	},
		leafd.Tag{Name: "order", MaxID: 1, Step: 1000},
		leafd.Tag{Name: "payment", MaxID: 1, Step: 500},
		leafd.Tag{Name: "invoice", MaxID: 1, Step: 200},
		leafd.Tag{Name: "refund", MaxID: 1, Step: 1000},
	)
	get := func(path string, status int) {
		t.Helper()
		if r := do(t, "GET", d.url+path); r.status != status {
			t.Fatalf("GET %s = %d: %s", path, r.status, r.body)
		}
	}
	waitLoads := func(tag string, n int64) {
		t.Helper()
		eventuallyState(t, d.url, tag+" loaded", func(st apiState) bool {
			o := st.tag(t, tag)
			return o.Loads == n && !o.Loading
		})
	}
	// The clock of the allocator runs in the past, so that ranges seem to
	// have lasted minutes, as they do in production.
	clock.shift(-47 * time.Minute)
	get("/segment/order", 200)
	clock.shift(22 * time.Minute) // order's first range lasted 22 minutes
	get("/segment/order?count=150", 200)
	waitLoads("order", 2)

	clock.shift(16 * time.Minute) // -9m
	get("/segment/payment", 200)
	clock.shift(3 * time.Minute) // -6m: 400 IDs in 3 minutes: the step grows
	get("/segment/payment?count=400", 200)
	waitLoads("payment", 2)
	clock.shift(6 * time.Minute) // now
	d.held.hold("payment", 0)
	get("/segment/payment?count=450", 200) // into the second range, past its preload point

	d.held.hold("invoice", 0)
	get("/segment/invoice", 503) // waits for a range that does not come
	get("/snowflake?count=5", 200)
	return d
}

// TestDashboardInBrowser loads the dashboard of a live server in headless
// Chromium: the tags' buffers and numbers appear, they move as IDs are
// issued without a reload, the page fits a phone, the store-down banner
// shows when the store breaks, and a server without tags says so.
func TestDashboardInBrowser(t *testing.T) {
	b := startBrowser(t)
	artifacts := artifactDir(t)
	d := scenario(t)
	ctx := b.ctx
	b.do(t, ctx, "open the dashboard", darkMode(true), chromedp.EmulateViewport(1280, 900),
		chromedp.Navigate(d.url+"/?poll=250"))
	waitFor(t, ctx, "first update", `Number(document.body.dataset.polls) >= 2`)
	if loc := eval[string](t, ctx, `location.pathname`); loc != "/dashboard" {
		t.Fatalf("/ led to %s, want /dashboard", loc)
	}

	t.Run("BuffersAndNumbers", func(t *testing.T) {
		st, _ := getState(t, d.url)
		type bufferView struct {
			State, Current, Range, Next, Pct string
		}
		type tagView struct {
			Status, Chip, Step, MinStep, Issued, Lasted, Verdict string
			Buffers                                              []bufferView
		}
		views := eval[map[string]tagView](t, ctx, `Object.fromEntries([...document.querySelectorAll('#tags [data-tag]')].map(el => [el.dataset.tag, {
			Status: el.dataset.status,
			Chip: el.querySelector('.tag-status').textContent,
			Step: el.querySelector('[data-field=step]').textContent,
			MinStep: el.querySelector('[data-field=min_step]').textContent,
			Issued: el.querySelector('[data-field=issued]').textContent,
			Lasted: el.querySelector('.lasted').textContent,
			Verdict: el.querySelector('.verdict').textContent,
			Buffers: [...el.querySelectorAll('[data-buffer]')].map(b => ({
				State: b.dataset.state, Current: b.dataset.current,
				Range: b.querySelector('.range').textContent,
				Next: b.querySelector('.next').dataset.value,
				Pct: b.querySelector('.pct').textContent,
			})),
		}]))`)
		if got := fmt.Sprint(len(views)); got != "4" {
			t.Fatalf("%s tag cards, want 4: %+v", got, views)
		}
		order := views["order"]
		o := st.tag(t, "order")
		cur := order.Buffers[o.Current]
		if cur.Current != "true" || cur.State != "ready" || cur.Range != "1 – 1,000" || cur.Next != strconv.FormatInt(o.Buffers[o.Current].Next, 10) ||
			cur.Pct != "15.1% used" {
			t.Errorf("order's current buffer shows %+v; the state is %+v", cur, o)
		}
		if next := order.Buffers[1-o.Current]; next.State != "ready" || next.Current != "false" || next.Range != "1,001 – 2,000" {
			t.Errorf("order's next buffer shows %+v", next)
		}
		if order.Status != "serving" || order.Step != "1,000" || order.Issued != "151" ||
			order.Lasted != "Last range lasted 22m" || order.Verdict != "inside" {
			t.Errorf("order shows %+v", order)
		}

		pay, p := views["payment"], st.tag(t, "payment")
		if pay.Status != "loading" || pay.Chip != "serving · loading next" || pay.Step != commas(p.Step) ||
			!strings.HasPrefix(pay.MinStep, "table 500 (×") || pay.Lasted != "Last range lasted 3m" ||
			pay.Verdict != "shorter: the step grows" {
			t.Errorf("payment shows %+v; the state is %+v", pay, p)
		}
		if pay.Buffers[1-p.Current].State != "loading" || pay.Buffers[p.Current].State != "ready" {
			t.Errorf("payment's buffers show %+v", pay.Buffers)
		}
		if inv := views["invoice"]; inv.Status != "loading" || inv.Buffers[0].State != "loading" || inv.Buffers[0].Current != "true" {
			t.Errorf("invoice (first range loading) shows %+v", inv)
		}
		if ref := views["refund"]; ref.Status != "idle" || ref.Buffers[0].State != "empty" || ref.Buffers[1].State != "empty" {
			t.Errorf("refund (never asked for) shows %+v", ref)
		}

		sf := eval[map[string]string](t, ctx, `Object.fromEntries([...document.querySelectorAll('#snowflake [data-field]')].map(e => [e.dataset.field, e.textContent]))`)
		if sf["worker_id"] != "0" || sf["worker_source"] != "leased from the store" || !strings.HasPrefix(sf["lease"], "expires in") ||
			sf["issued"] != "5" || sf["backward_events"] != "0" || !strings.HasSuffix(sf["last"], "UTC") {
			t.Errorf("snowflake shows %v", sf)
		}
		if chip := eval[string](t, ctx, `document.getElementById('store-text').textContent`); chip != "sqlite · healthy" {
			t.Errorf("store chip %q", chip)
		}
		if eval[bool](t, ctx, `!document.getElementById('store-banner').hidden`) {
			t.Error("the store-down banner shows while the store is up")
		}
	})

	t.Run("UpdatesWithoutReload", func(t *testing.T) {
		eval[bool](t, ctx, `window.leafdSamePage = true`)
		st, _ := getState(t, d.url)
		o := st.tag(t, "order")
		want := o.Buffers[o.Current].Next + 37
		if r := do(t, "GET", d.url+"/segment/order?count=37"); r.status != 200 {
			t.Fatalf("GET: %d", r.status)
		}
		waitFor(t, ctx, "order's position moves to "+strconv.FormatInt(want, 10),
			fmt.Sprintf(`document.querySelector('[data-tag=order] [data-current=true] .next').dataset.value === '%d'`, want))
		if !eval[bool](t, ctx, `window.leafdSamePage === true`) {
			t.Fatal("the page was reloaded")
		}
		if got := eval[string](t, ctx, `document.querySelector('[data-tag=order] [data-field=issued]').textContent`); got != "188" {
			t.Errorf("order issued shows %q, want 188", got)
		}
	})

	t.Run("RateSparkline", func(t *testing.T) {
		run := 2 * time.Second
		readme := os.Getenv("LEAFD_DASHBOARD_PNG")
		if readme != "" {
			run = 12 * time.Second
		}
		traffic(t, d, run)
		points := eval[int](t, ctx, `document.querySelector('[data-tag=order] .spark .line').points.numberOfItems`)
		if points < 4 {
			t.Errorf("order's sparkline has %d points after %v of polling every 250 ms", points, run)
		}
		if rate := eval[string](t, ctx, `document.querySelector('[data-tag=order] .rate-num').textContent`); rate == "–/s" {
			t.Errorf("order's rate shows %q", rate)
		}
		paths := []string{filepath.Join(artifacts, "dashboard.png")}
		if readme != "" {
			paths = append(paths, readme)
		}
		screenshot(t, ctx, paths...)
	})

	t.Run("Phone", func(t *testing.T) {
		b.do(t, ctx, "phone viewport", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulateTouch))
		defer b.do(t, ctx, "laptop viewport", chromedp.EmulateViewport(1280, 900))
		waitFor(t, ctx, "an update at phone width", `document.documentElement.clientWidth === 390`)
		if w := eval[int](t, ctx, `document.documentElement.scrollWidth`); w > 390 {
			t.Errorf("the page is %d px wide on a 390 px phone: it scrolls sideways", w)
		}
		if w := eval[int](t, ctx, `Math.round(document.querySelector('[data-tag=order]').getBoundingClientRect().width)`); w < 300 {
			t.Errorf("a tag card is %d px wide on a phone", w)
		}
		screenshot(t, ctx, filepath.Join(artifacts, "dashboard-phone.png"))
	})

	t.Run("StoreDownBanner", func(t *testing.T) {
		d.store.Close()
		waitFor(t, ctx, "the store-down banner", `!document.getElementById('store-banner').hidden`)
		if chip := eval[string](t, ctx, `document.getElementById('store-text').textContent`); chip != "sqlite · unreachable" {
			t.Errorf("store chip %q", chip)
		}
		if msg := eval[string](t, ctx, `document.getElementById('store-error').textContent`); !strings.Contains(msg, "closed") {
			t.Errorf("the banner does not say why: %q", msg)
		}
		screenshot(t, ctx, filepath.Join(artifacts, "dashboard-store-down.png"))
	})

	t.Run("NoTags", func(t *testing.T) {
		empty := newDashServer(t, openSQLite(t), segment.Config{})
		tab, cancel := chromedp.NewContext(ctx)
		defer cancel()
		b.listen(tab)
		b.do(t, tab, "open an empty dashboard", darkMode(true), chromedp.Navigate(empty.url+"/dashboard?poll=250"))
		waitFor(t, tab, "the empty state", `!document.getElementById('seg-empty').hidden`)
		if n := eval[int](t, tab, `document.querySelectorAll('#tags [data-tag]').length`); n != 0 {
			t.Errorf("%d tag cards without tags", n)
		}
		if text := eval[string](t, tab, `document.getElementById('seg-empty').innerText`); !strings.Contains(text, "No tags yet") {
			t.Errorf("the empty state says %q", text)
		}
	})

	if errs := b.consoleErrors(); len(errs) > 0 {
		t.Errorf("the pages logged errors (script errors, CSP violations, failed requests): %q", errs)
	}
}

// traffic issues IDs for a while, about 20 rounds a second, at a rate that
// rises and falls, so that the sparklines have a shape. It stays within the
// ranges the scenario's tags hold (a few hundred IDs), so that the picture
// stays the scenario's.
func traffic(t *testing.T, d *dashServer, run time.Duration) {
	t.Helper()
	end := time.Now().Add(run)
	for i := 0; time.Now().Before(end); i++ {
		x := i % 120
		n := 1 + x*(120-x)/720 + (i*7919)%3 // 1..8, a hump every 120 rounds
		for _, path := range []string{
			"/segment/order?count=" + strconv.Itoa(n),
			"/segment/payment?count=" + strconv.Itoa(1+n/2),
			"/snowflake?count=" + strconv.Itoa(3*n),
		} {
			if r := do(t, "GET", d.url+path); r.status != 200 {
				t.Fatalf("GET %s = %d: %s", path, r.status, r.body)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
}
