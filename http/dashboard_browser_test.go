package http_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leafd/leafd/internal/testkit/testenv"
	"github.com/leafd/leafd/store"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/internal/testkit/testdb"
	"github.com/leafd/leafd/segment"
	"github.com/leafd/leafd/store/sharded"
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
//	                                         longer run of traffic (docs/dashboard.png), and the
//	                                         first screen at 10,000 tags beside it
//	                                         (dashboard-10000.png)

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
// one waiting for its first range, one never asked for; snowflake on two
// leased worker ids.
func scenario(t *testing.T) *dashServer {
	t.Helper()
	clock := &movableClock{}
	d := newDashServer(t, openDefault(t), segment.Config{
		Now: clock.Now, WaitTimeout: time.Second, LoadTimeout: time.Minute,
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

// cardJS reads the open card as a person sees it.
const cardJS = `(() => {
	const el = document.querySelector('#detail [data-tag]');
	if (!el) return null;
	return {
		Tag: el.dataset.tag,
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
	};
})()`

type bufferView struct {
	State, Current, Range, Next, Pct string
}

type cardView struct {
	Tag, Status, Chip, Step, MinStep, Issued, Lasted, Verdict string
	Buffers                                                   []bufferView
}

// rowsJS lists the table's rows: tag, state, the error shown on the line
// below, and the cause shown under the state.
const rowsJS = `[...document.querySelectorAll('#rows tr[data-tag]')].map(r => ({
	Tag: r.dataset.tag, State: r.querySelector('.st').textContent,
	Error: r.nextElementSibling?.dataset.for === r.dataset.tag ? r.nextElementSibling.textContent : '',
	Why: r.querySelector('.why').hidden ? '' : r.querySelector('.why').textContent,
}))`

type rowView struct{ Tag, State, Error, Why string }

// openCard clicks the row of tag and waits for its card and the range in
// it.
func (b *browser) openCard(t *testing.T, ctx context.Context, tag string) cardView {
	t.Helper()
	b.openCardOf(t, ctx, tag)
	waitFor(t, ctx, "the range in the card of "+tag, fmt.Sprintf(`document.querySelector('#detail [data-tag=%q] .range')?.textContent !== ''`, tag))
	return eval[cardView](t, ctx, cardJS)
}

// openCardOf clicks the row of tag and waits for its card, which may have
// no range (a failing tag). The table is drawn anew at each poll, so the
// row found may be gone before the click reaches it ("Could not find node
// with given id", and no click was made): then the row is found again, a
// few times.
func (b *browser) openCardOf(t *testing.T, ctx context.Context, tag string) cardView {
	t.Helper()
	click := chromedp.Click(fmt.Sprintf(`#rows tr[data-tag=%q]`, tag))
	for attempt := 1; ; attempt++ {
		cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		err := chromedp.Do(cctx, click)
		cancel()
		if err == nil {
			break
		}
		if attempt == 5 || !strings.Contains(err.Error(), "Could not find node") {
			t.Fatalf("click the row of %s: %v\nconsole: %q", tag, err, b.consoleErrors())
		}
	}
	waitFor(t, ctx, "the card of "+tag, fmt.Sprintf(`document.querySelector('#detail [data-tag=%q] .tag-status')?.textContent !== ''`, tag))
	return eval[cardView](t, ctx, cardJS)
}

// typeSearch types text into the search box, as a person would, in place of
// what it held.
func (b *browser) typeSearch(t *testing.T, ctx context.Context, text string) {
	t.Helper()
	eval[bool](t, ctx, `(() => { const s = document.getElementById('search'); s.focus(); s.select(); return true })()`)
	b.do(t, ctx, "type "+text, chromedp.KeyEvent(text))
}

// TestDashboardInBrowser loads the dashboard of a live server in headless
// Chromium: a row per tag, problems first; a tag's card with its buffers
// and numbers, which move as IDs are issued without a reload; the page fits
// a phone, the store-down banner shows when the store breaks, and a server
// without tags says so.
func TestDashboardInBrowser(t *testing.T) {
	testenv.Slow(t)
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

	t.Run("RowsProblemsFirst", func(t *testing.T) {
		rows := eval[[]rowView](t, ctx, rowsJS)
		want := []rowView{{"invoice", "waiting", "", ""}, {"payment", "loading", "", ""}, {"order", "serving", "", ""}, {"refund", "idle", "", ""}}
		if fmt.Sprint(rows) != fmt.Sprint(want) {
			t.Errorf("rows %v, want %v", rows, want)
		}
		counts := eval[map[string]string](t, ctx, `Object.fromEntries([...document.querySelectorAll('[data-count]')].map(e => [e.dataset.count, e.textContent]))`)
		if fmt.Sprint(counts) != fmt.Sprint(map[string]string{"all": "4", "failing": "0", "waiting": "1", "loading": "1", "serving": "1", "idle": "1"}) {
			t.Errorf("the counts show %v", counts)
		}
		if got := eval[string](t, ctx, `document.getElementById('page-range').textContent`); got != "1–4 of 4" {
			t.Errorf("the pager says %q", got)
		}
		// With nothing chosen, the card of the first row is open.
		if c := eval[cardView](t, ctx, cardJS); c.Tag != "invoice" {
			t.Errorf("the open card is %q, want the first row's, invoice", c.Tag)
		}
	})

	t.Run("BuffersAndNumbers", func(t *testing.T) {
		st, _ := getState(t, d.url)
		order := b.openCard(t, ctx, "order")
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
		if u := eval[string](t, ctx, `location.search`); !strings.Contains(u, "tag=order") {
			t.Errorf("the URL %q does not keep the open card", u)
		}

		pay, p := b.openCard(t, ctx, "payment"), st.tag(t, "payment")
		if pay.Status != "loading" || pay.Chip != "serving · loading next" || pay.Step != commas(p.Step) ||
			!strings.HasPrefix(pay.MinStep, "table 500 (×") || pay.Lasted != "Last range lasted 3m" ||
			pay.Verdict != "shorter: the step grows" {
			t.Errorf("payment shows %+v; the state is %+v", pay, p)
		}
		if pay.Buffers[1-p.Current].State != "loading" || pay.Buffers[p.Current].State != "ready" {
			t.Errorf("payment's buffers show %+v", pay.Buffers)
		}
		if inv := b.openCard(t, ctx, "invoice"); inv.Status != "loading" || inv.Buffers[0].State != "loading" || inv.Buffers[0].Current != "true" {
			t.Errorf("invoice (first range loading) shows %+v", inv)
		}
		if ref := b.openCard(t, ctx, "refund"); ref.Status != "idle" || ref.Buffers[0].State != "empty" || ref.Buffers[1].State != "empty" {
			t.Errorf("refund (never asked for) shows %+v", ref)
		}

		sf := eval[map[string]string](t, ctx, `Object.fromEntries([...document.querySelectorAll('#snowflake [data-field]')].map(e => [e.dataset.field, e.textContent]))`)
		if sf["worker_id"] != "0, 1" || sf["worker_label"] != "Worker ids" || sf["worker_source"] != "leased from the store" || !strings.HasPrefix(sf["lease"], "expires in") ||
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
		b.openCard(t, ctx, "order")
		eval[bool](t, ctx, `window.leafdSamePage = true`)
		st, _ := getState(t, d.url)
		o := st.tag(t, "order")
		want := o.Buffers[o.Current].Next + 37
		if r := do(t, "GET", d.url+"/segment/order?count=37"); r.status != 200 {
			t.Fatalf("GET: %d", r.status)
		}
		waitFor(t, ctx, "order's position moves to "+strconv.FormatInt(want, 10),
			fmt.Sprintf(`document.querySelector('#detail [data-tag=order] [data-current=true] .next').dataset.value === '%d'`, want))
		if !eval[bool](t, ctx, `window.leafdSamePage === true`) {
			t.Fatal("the page was reloaded")
		}
		if got := eval[string](t, ctx, `document.querySelector('#detail [data-tag=order] [data-field=issued]').textContent`); got != "188" {
			t.Errorf("order issued shows %q, want 188", got)
		}
	})

	t.Run("FilterAndSearch", func(t *testing.T) {
		b.do(t, ctx, "click the idle count", chromedp.Click(`#filters [data-filter=idle]`))
		waitFor(t, ctx, "the idle tags alone", `document.querySelectorAll('#rows tr[data-tag]').length === 1 && document.querySelector('#rows tr[data-tag]').dataset.tag === 'refund'`)
		if u := eval[string](t, ctx, `location.search`); !strings.Contains(u, "state=idle") {
			t.Errorf("the URL %q does not keep the filter", u)
		}
		b.do(t, ctx, "click All", chromedp.Click(`#filters [data-filter=""]`))
		b.typeSearch(t, ctx, "PAY")
		waitFor(t, ctx, "the tags with pay in their name", `document.querySelectorAll('#rows tr[data-tag]').length === 1 && document.querySelector('#rows tr[data-tag]').dataset.tag === 'payment'`)
		b.typeSearch(t, ctx, "zzz")
		waitFor(t, ctx, "no match", `!document.getElementById('no-match').hidden && document.querySelectorAll('#rows tr[data-tag]').length === 0`)
		b.do(t, ctx, "show every tag", chromedp.Click(`#clear`))
		waitFor(t, ctx, "every tag again", `document.querySelectorAll('#rows tr[data-tag]').length === 4 && document.getElementById('search').value === ''`)
		b.openCard(t, ctx, "order")
	})

	t.Run("RateSparkline", func(t *testing.T) {
		run := 2 * time.Second
		readme := os.Getenv("LEAFD_DASHBOARD_PNG")
		if readme != "" {
			run = 12 * time.Second
		}
		traffic(t, d, run)
		points := eval[int](t, ctx, `document.querySelector('#detail [data-tag=order] .spark .line').points.numberOfItems`)
		if points < 4 {
			t.Errorf("order's sparkline has %d points after %v of polling every 250 ms", points, run)
		}
		if rate := eval[string](t, ctx, `document.querySelector('#detail [data-tag=order] .rate-num').textContent`); rate == "–/s" {
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
		if w := eval[int](t, ctx, `Math.round(document.querySelector('#detail [data-tag=order]').getBoundingClientRect().width)`); w < 300 {
			t.Errorf("the card is %d px wide on a phone", w)
		}
		if w := eval[int](t, ctx, `Math.round(document.querySelector('#rows tr[data-tag]').getBoundingClientRect().width)`); w < 300 || w > 390 {
			t.Errorf("a row is %d px wide on a phone", w)
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

	t.Run("Shards", func(t *testing.T) {
		for _, driver := range store.FallbackDrivers() { // shards on servers, which have addresses
			t.Run(driver, func(t *testing.T) {
				sh, err := sharded.Open(driver, []string{testdb.DSN(t, driver), testdb.DSN(t, driver)}, sharded.Options{Slots: 4, Logger: quiet})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { sh.Close() })
				d := newDashServer(t, sh, segment.Config{WaitTimeout: 5 * time.Second}, leafd.Tag{Name: "order", MaxID: 1, Step: 10})
				if r := do(t, "GET", d.url+"/segment/order"); r.status != 200 {
					t.Fatalf("GET: %d %s", r.status, r.body)
				}
				tab, cancel := chromedp.NewContext(ctx)
				defer cancel()
				b.listen(tab)
				b.do(t, tab, "open a sharded dashboard", chromedp.Navigate(d.url+"/dashboard?poll=250"))
				waitFor(t, tab, "the shards in the store chip", `document.getElementById('store-text').textContent.includes('shard')`)
				if chip := eval[string](t, tab, `document.getElementById('store-text').textContent`); chip != driver+" · healthy · 2 of 2 shard databases up" {
					t.Errorf("store chip %q", chip)
				}
				if title := eval[string](t, tab, `document.getElementById('store-chip').title`); !strings.Contains(title, "#0 ") || !strings.Contains(title, "slots 0,2") ||
					!strings.Contains(title, "#1 ") || !strings.Contains(title, "slots 1,3") {
					t.Errorf("store chip's title %q does not list the databases and their slots", title)
				}
				// The range of a strided buffer ends at its last ID: the first
				// range of slot 0 of 4 is 4, 8, … 40.
				card := b.openCard(t, tab, "order")
				if cur := card.Buffers[0]; !strings.HasSuffix(cur.Range, "– 40") {
					t.Errorf("the strided range reads %q, want it to end at 40", cur.Range)
				}
			})
		}
	})
	t.Run("OpaqueDomain", func(t *testing.T) {
		key := []byte("0123456789abcdef0123456789abcdef")
		d := newDashServer(t, openDefault(t), segment.Config{WaitTimeout: 5 * time.Second, OpaqueKey: key},
			leafd.Tag{Name: "user", MaxID: 900_001, Step: 1000, Format: segment.FormatOpaque, Digits: 6,
				KeyFingerprint: segment.KeyFingerprint(key, "user")},
			leafd.Tag{Name: "order", MaxID: 1, Step: 1000})
		for _, path := range []string{"/segment/user?count=101", "/segment/order"} {
			if r := do(t, "GET", d.url+path); r.status != 200 {
				t.Fatalf("GET %s: %d %s", path, r.status, r.body)
			}
		}
		var u apiTag
		eventuallyState(t, d.url, "user's next range loaded", func(st apiState) bool {
			u = st.tag(t, "user")
			return u.Loads == 2 && !u.Loading
		})
		if u.Domain == nil || *u.Domain != 999_999 || *u.DomainUsed != 900_101 {
			t.Fatalf("the state of user: %+v, want domain 999999 of which 900,101 used", u)
		}
		tab, cancel := chromedp.NewContext(ctx)
		defer cancel()
		b.listen(tab)
		b.do(t, tab, "open the dashboard of an opaque tag", chromedp.Navigate(d.url+"/dashboard?poll=250&sort=name"))
		waitFor(t, tab, "the rows", `document.querySelectorAll('#rows tr[data-tag]').length === 2`)
		b.openCard(t, tab, "user")
		waitFor(t, tab, "the domain in the card", `!document.querySelector('#detail [data-tag=user] .domain').hidden`)
		text := eval[string](t, tab, `document.querySelector('#detail [data-tag=user] [data-field=domain]').textContent`)
		left := 999_999 - *u.DomainUsed - *u.DomainReserved
		want := fmt.Sprintf("90.0%% used · %.1f%% reserved · %s of 999,999 left", float64(*u.DomainReserved)*100/999_999, commas(left))
		if text != want {
			t.Errorf("the card's domain reads %q, want %q", text, want)
		}
		if tone := eval[string](t, tab, `document.querySelector('#detail [data-tag=user] .dom-bar').dataset.tone || ''`); tone != "warn" {
			t.Errorf("the domain bar of a tag with %d of 999,999 IDs taken has tone %q, want warn", *u.DomainUsed+*u.DomainReserved, tone)
		}
		row := eval[map[string]string](t, tab, `(() => { const d = document.querySelector('#rows tr[data-tag=user] .dom');
			return {hidden: String(d.hidden), text: d.textContent, tone: d.dataset.tone || ''} })()`)
		taken := fmt.Sprintf("domain %.1f%% taken", float64(*u.DomainUsed+*u.DomainReserved)*100/999_999)
		if row["hidden"] != "false" || row["text"] != taken || row["tone"] != "warn" {
			t.Errorf("user's row shows the domain as %v, want %q in tone warn", row, taken)
		}
		screenshot(t, tab, filepath.Join(artifacts, "dashboard-opaque-domain.png"))
		// A sequential tag has no domain, in its row or its card.
		if shown := eval[bool](t, tab, `!document.querySelector('#rows tr[data-tag=order] .dom').hidden`); shown {
			t.Error("the row of a sequential tag shows a domain")
		}
		b.openCard(t, tab, "order")
		if shown := eval[bool](t, tab, `!document.querySelector('#detail [data-tag=order] .domain').hidden`); shown {
			t.Error("the card of a sequential tag shows a domain")
		}
	})
	t.Run("DatedPeriod", func(t *testing.T) {
		d := newDashServer(t, openDefault(t), segment.Config{WaitTimeout: 5 * time.Second},
			leafd.Tag{Name: "orders", MaxID: 1, Step: 10, Format: segment.FormatDated, Period: segment.PeriodDay, Digits: 3})
		before := time.Now().UTC().Format("2006-01-02")
		if r := do(t, "GET", d.url+"/segment/orders?count=850"); r.status != 200 {
			t.Fatalf("GET: %d %s", r.status, r.body)
		}
		var o apiTag
		eventuallyState(t, d.url, "the numbers of the day used", func(st apiState) bool {
			o = st.tag(t, "orders")
			return !o.Loading && o.PeriodUsed != nil && *o.PeriodUsed >= 850
		})
		today := o.Period
		if after := time.Now().UTC().Format("2006-01-02"); (today != before && today != after) || *o.PeriodCapacity != 999 {
			t.Fatalf("the state of orders: %+v, want the period %s of 999 numbers", o, after)
		}
		tab, cancel := chromedp.NewContext(ctx)
		defer cancel()
		b.listen(tab)
		b.do(t, tab, "open the dashboard of a dated tag", chromedp.Navigate(d.url+"/dashboard?poll=250"))
		waitFor(t, tab, "the row", `document.querySelectorAll('#rows tr[data-tag=orders]').length === 1`)
		b.openCard(t, tab, "orders")
		waitFor(t, tab, "the period in the card", `!document.querySelector('#detail [data-tag=orders] .domain').hidden`)
		label := eval[string](t, tab, `document.querySelector('#detail [data-tag=orders] .dom-label').textContent`)
		text := eval[string](t, tab, `document.querySelector('#detail [data-tag=orders] [data-field=domain]').textContent`)
		want := fmt.Sprintf("%.1f%% used · %d of 999 left", float64(*o.PeriodUsed)*100/999, 999-*o.PeriodUsed)
		if label != "Period "+today || !strings.HasPrefix(text, want) {
			t.Errorf("the card reads %q %q, want %q %q", label, text, "Period "+today, want)
		}
		if tone := eval[string](t, tab, `document.querySelector('#detail [data-tag=orders] .dom-bar').dataset.tone || ''`); tone != "warn" {
			t.Errorf("the period bar of a day with %d of 999 numbers gone has tone %q, want warn", *o.PeriodUsed, tone)
		}
		row := eval[string](t, tab, `document.querySelector('#rows tr[data-tag=orders] .dom').textContent`)
		if taken := fmt.Sprintf("period %s %.1f%% taken", today, float64(*o.PeriodUsed)*100/999); row != taken {
			t.Errorf("the row reads %q, want %q", row, taken)
		}
		screenshot(t, tab, filepath.Join(artifacts, "dashboard-dated-period.png"))
	})
	t.Run("NoTags", func(t *testing.T) {
		empty := newDashServer(t, openDefault(t), segment.Config{})
		tab, cancel := chromedp.NewContext(ctx)
		defer cancel()
		b.listen(tab)
		b.do(t, tab, "open an empty dashboard", darkMode(true), chromedp.Navigate(empty.url+"/dashboard?poll=250"))
		waitFor(t, tab, "the empty state", `!document.getElementById('seg-empty').hidden`)
		if n := eval[int](t, tab, `document.querySelectorAll('#rows tr, #detail [data-tag]').length`); n != 0 {
			t.Errorf("%d rows or cards without tags", n)
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

// TestDashboardManyTags loads the dashboard of a server with 10,000 tags
// (a real allocator over a real SQLite file), a few hundred of them in use
// and two failing: one behind a row lock that makes each of its range loads
// time out, one rewound (its max_id lowered by SQL below IDs it issued).
// The failing tags show on the first screen, each with its cause; the page
// stays small (in the DOM and on the wire), search finds the last tag,
// every count of the header and of the filters filters to its state, and a
// row opens its card.
func TestDashboardManyTags(t *testing.T) {
	testenv.Slow(t)
	b := startBrowser(t)
	artifacts := artifactDir(t)
	const n = 10_000
	failing := manyTagName(6_800) // payment-6800, far from the first page by name
	rewound := manyTagName(7_777) // refund-7777: not among the tags in use below
	d := manyTagsServer(t, n, failing)
	rewind(t, d, rewound)

	// Some hundreds in use: every 30th tag, a few IDs each, at rates that
	// differ; three with their next load held (loading), one waiting for
	// its first range.
	ctx := context.Background()
	var wg sync.WaitGroup
	used := make(chan int)
	for range 4 {
		wg.Go(func() {
			for i := range used {
				if _, err := d.alloc.NextN(ctx, manyTagName(i), 1+i%17, nil); err != nil {
					t.Errorf("%s: %v", manyTagName(i), err)
				}
			}
		})
	}
	for i := 0; i < n; i += 30 {
		used <- i
	}
	close(used)
	wg.Wait()
	for _, i := range []int{1_230, 4_530, 8_130} { // in use, and not among the traffic's tags below
		tag := manyTagName(i)
		d.held.hold(tag, 0)
		if _, err := d.alloc.NextN(ctx, tag, manyTagStep(i)/5, nil); err != nil { // past the preload point of its first range
			t.Fatal(err)
		}
	}
	waiting := manyTagName(3_333)
	d.held.hold(waiting, 0)
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, _ = d.alloc.Next(short, waiting)
	cancel()
	short, cancel = context.WithTimeout(ctx, 300*time.Millisecond)
	if _, err := d.alloc.Next(short, failing); err == nil {
		t.Fatalf("%s served an ID through a store that fails its loads", failing)
	}
	cancel()
	// Traffic on a few tags meanwhile, so that rates move.
	stop := make(chan struct{})
	var traffic sync.WaitGroup
	traffic.Go(func() {
		for k := 0; ; k++ {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			for j := range 12 {
				_, _ = d.alloc.NextN(ctx, manyTagName(j*30*27), 1+(k+j)%5*j, nil)
			}
		}
	})
	t.Cleanup(func() { close(stop); traffic.Wait() })

	tab := b.ctx
	b.do(t, tab, "open the dashboard", darkMode(true), chromedp.EmulateViewport(1280, 900), chromedp.Navigate(d.url+"/dashboard"))
	waitFor(t, tab, "first update", `Number(document.body.dataset.polls) >= 1`)

	t.Run("FailingFirst", func(t *testing.T) {
		rows := eval[[]rowView](t, tab, rowsJS)
		if len(rows) < 2 {
			t.Fatalf("%d rows", len(rows))
		}
		first := map[string]rowView{rows[0].Tag: rows[0], rows[1].Tag: rows[1]}
		// The row lock: failing, "row locked" under it, the timeout below.
		if r := first[failing]; r.State != "failing" || r.Why != "row locked" ||
			!strings.HasPrefix(r.Error, "row locked (lock wait timeout): ") || !strings.Contains(r.Error, "Lock wait timeout exceeded") {
			t.Errorf("the first rows are %+v, want %s failing for its row lock, with the lock wait timeout", rows[:2], failing)
		}
		// The rewound tag: "rewound" in place of failing, and the message,
		// which carries the UPDATE that repairs it, not "last load failed".
		if r := first[rewound]; r.State != "rewound" || !strings.HasPrefix(r.Error, "rewound: ") ||
			!strings.Contains(r.Error, "UPDATE leaf_alloc SET max_id = ") || strings.Contains(r.Error, "last load failed") {
			t.Errorf("the first rows are %+v, want %s shown rewound with its repair", rows[:2], rewound)
		}
		for _, tag := range []string{failing, rewound} {
			inView := eval[bool](t, tab, fmt.Sprintf(`(() => { const r = document.querySelector('#rows tr[data-tag=%q]').getBoundingClientRect(); return r.top >= 0 && r.bottom <= innerHeight })()`, tag))
			if !inView {
				t.Errorf("the row of %s is not on the first screen", tag)
			}
			cell := fmt.Sprintf(`document.querySelector('#rows tr[data-tag=%q] .c-state')`, tag)
			if w := eval[[]int](t, tab, `[`+cell+`.scrollWidth, `+cell+`.clientWidth]`); w[0] > w[1] {
				t.Errorf("the state of %s is cut: %d px wide in a cell of %d", tag, w[0], w[1])
			}
		}
		if got := eval[string](t, tab, `document.querySelector('#head-counts [data-filter=failing]').textContent`); got != "2 failing" {
			t.Errorf("the header's failing count says %q, want 2 failing", got)
		}
		if c := eval[cardView](t, tab, cardJS); c.Status != "failing" || (c.Tag != failing && c.Tag != rewound) {
			t.Errorf("the open card is %+v, want a failing tag's", c)
		}
		if got := eval[string](t, tab, `document.getElementById('page-range').textContent`); got != "1–50 of 10,000" {
			t.Errorf("the pager says %q", got)
		}
	})

	t.Run("SmallDOM", func(t *testing.T) {
		if n := eval[int](t, tab, `document.getElementsByTagName('*').length`); n >= 10_000 {
			t.Errorf("%d elements in the DOM", n)
		} else {
			t.Logf("%d elements in the DOM at 10,000 tags", n)
		}
	})

	t.Run("BytesPerSecond", func(t *testing.T) {
		// What polling moves, measured by the browser: every answer of
		// api/state over 4 s, headers included.
		eval[bool](t, tab, `performance.clearResourceTimings(), true`)
		time.Sleep(4 * time.Second)
		type transfer struct{ Polls, Bytes, Encoded, Decoded int }
		tr := eval[transfer](t, tab, `(() => {
			const e = performance.getEntriesByType('resource').filter(e => e.name.includes('/api/state'));
			const sum = (f) => e.reduce((s, x) => s + x[f], 0);
			return {Polls: e.length, Bytes: sum('transferSize'), Encoded: sum('encodedBodySize'), Decoded: sum('decodedBodySize')};
		})()`)
		perSecond := tr.Bytes / 4
		t.Logf("10,000 tags: %d requests in 4 s, %d bytes (%d B/s); bodies %d bytes gzip, %d decoded", tr.Polls, tr.Bytes, perSecond, tr.Encoded, tr.Decoded)
		if tr.Polls < 4 || tr.Bytes == 0 {
			t.Fatalf("%d requests measured, %d bytes: the Performance API saw no polls", tr.Polls, tr.Bytes)
		}
		if perSecond > 200_000 {
			t.Errorf("polling moves %d bytes a second at 10,000 tags, more than 200 KB", perSecond)
		}
		if tr.Encoded*3 > tr.Decoded {
			t.Errorf("the answers are not compressed: %d bytes on the wire for %d", tr.Encoded, tr.Decoded)
		}
		paths := []string{filepath.Join(artifacts, "dashboard-10000.png")}
		if readme := os.Getenv("LEAFD_DASHBOARD_PNG"); readme != "" {
			paths = append(paths, filepath.Join(filepath.Dir(readme), "dashboard-10000.png"))
		}
		viewportShot(t, tab, paths...)
	})

	t.Run("SearchFindsTheLast", func(t *testing.T) {
		last := manyTagName(n - 1)
		b.typeSearch(t, tab, last)
		waitFor(t, tab, "the search for "+last, fmt.Sprintf(`document.querySelectorAll('#rows tr[data-tag]').length === 1 && document.querySelector('#rows tr[data-tag]').dataset.tag === %q`, last))
		if u := eval[string](t, tab, `location.search`); !strings.Contains(u, "q="+last) {
			t.Errorf("the URL %q does not keep the search", u)
		}
		b.typeSearch(t, tab, "wallet-99")
		waitFor(t, tab, "wallet-99xx", `document.getElementById('page-range').textContent === '1–50 of 100'`)
		b.do(t, tab, "clear the search", chromedp.KeyEvent(kb.Escape))
		waitFor(t, tab, "every tag again", `document.getElementById('page-range').textContent === '1–50 of 10,000'`)
	})

	t.Run("RewoundCard", func(t *testing.T) {
		c := b.openCardOf(t, tab, rewound)
		if c.Status != "failing" || c.Chip != "empty · rewound" {
			t.Errorf("the card of the rewound tag shows %+v, want its chip to say empty · rewound", c)
		}
		if msg := eval[string](t, tab, `document.querySelector('#detail .tag-error').textContent`); !strings.HasPrefix(msg, "rewound: ") ||
			!strings.Contains(msg, "UPDATE leaf_alloc SET max_id = ") {
			t.Errorf("the card of the rewound tag says %q, want rewound and the UPDATE that repairs it", msg)
		}
		c = b.openCardOf(t, tab, failing)
		if c.Chip != "empty · row locked" {
			t.Errorf("the card of the locked tag shows %+v, want its chip to say empty · row locked", c)
		}
		b.do(t, tab, "close the card", chromedp.Click(`#detail .close`))
		waitFor(t, tab, "no tag in the URL", `!location.search.includes('tag=')`)
	})

	t.Run("FailingCountFilters", func(t *testing.T) {
		b.do(t, tab, "click the failing count", chromedp.Click(`#filters [data-filter=failing]`))
		waitFor(t, tab, "the failing tags alone", fmt.Sprintf(`(() => { const r = [...document.querySelectorAll('#rows tr[data-tag]')].map(r => r.dataset.tag).sort(); return r.join() === %q })()`, failing+","+rewound))
		if u := eval[string](t, tab, `location.search`); u != "?state=failing" {
			t.Errorf("the URL is %q, want ?state=failing", u)
		}
		b.do(t, tab, "click All", chromedp.Click(`#filters [data-filter=""]`))
		waitFor(t, tab, "every tag again", `document.getElementById('page-range').textContent === '1–50 of 10,000'`)
	})

	// Each count in the header is a link to its state: clicked, the table
	// holds that state's tags alone, as many as the count says; clicked
	// again, every tag. The idle one is followed from the keyboard.
	t.Run("HeaderCountsFilter", func(t *testing.T) {
		shown := eval[[]string](t, tab, `[...document.querySelectorAll('#head-counts [data-status]')].filter(a => !a.hidden).map(a => a.dataset.status)`)
		if want := []string{"failing", "waiting", "loading", "serving", "idle"}; !slices.Equal(shown, want) {
			t.Fatalf("the header shows the counts of %v, want %v", shown, want)
		}
		for _, state := range shown {
			link := fmt.Sprintf(`#head-counts [data-filter=%s]`, state)
			if !eval[bool](t, tab, fmt.Sprintf(`(() => { const a = document.querySelector(%q); return a.tagName === 'A' && a.getAttribute('href') === '?state=%s' && a.tabIndex === 0 })()`, link, state)) {
				t.Errorf("the header's %s count is not a link to ?state=%s that the keyboard reaches", state, state)
			}
			if state == "idle" {
				eval[bool](t, tab, fmt.Sprintf(`document.querySelector(%q).focus(), true`, link))
				b.do(t, tab, "press Enter on the idle count", chromedp.KeyEvent(kb.Enter))
			} else {
				b.do(t, tab, "click the header's "+state+" count", chromedp.Click(link))
			}
			// The rows and the count come from the same answer: the table
			// shows as many as the header's count, every one in the state.
			waitFor(t, tab, "the "+state+" tags alone", fmt.Sprintf(`(() => {
				const rows = [...document.querySelectorAll('#rows tr[data-tag]')];
				const n = document.querySelector(%q).textContent.split(' ')[0];
				return location.search === '?state=%s' && rows.length > 0 && rows.every(r => r.dataset.status === %q) &&
					document.getElementById('page-range').textContent.endsWith(' of ' + n) &&
					document.querySelector(%q).getAttribute('aria-current') === 'true';
			})()`, link, state, state, link))
			b.do(t, tab, "click the "+state+" count again", chromedp.Click(link))
			waitFor(t, tab, "every tag again after "+state, `location.search === '' && document.getElementById('page-range').textContent === '1–50 of 10,000'`)
		}
		// The header's clear link shows every tag too.
		b.do(t, tab, "click the header's waiting count", chromedp.Click(`#head-counts [data-filter=waiting]`))
		waitFor(t, tab, "the waiting tags alone", `location.search === '?state=waiting' && !document.getElementById('head-clear').hidden`)
		b.do(t, tab, "click the header's clear link", chromedp.Click(`#head-clear`))
		waitFor(t, tab, "every tag again", `location.search === '' && document.getElementById('page-range').textContent === '1–50 of 10,000' && document.getElementById('head-clear').hidden`)
	})

	t.Run("RowOpensCard", func(t *testing.T) {
		b.do(t, tab, "show the serving tags", chromedp.Click(`#filters [data-filter=serving]`))
		waitFor(t, tab, "serving rows", `[...document.querySelectorAll('#rows tr[data-tag]')].every(r => r.dataset.status === 'serving')`)
		tag := eval[string](t, tab, `document.querySelectorAll('#rows tr[data-tag]')[2].dataset.tag`)
		c := b.openCard(t, tab, tag)
		if c.Status != "serving" || len(c.Buffers) != 2 || !slices.ContainsFunc(c.Buffers, func(b bufferView) bool {
			return b.Current == "true" && b.State == "ready" && strings.Contains(b.Range, " – ")
		}) {
			t.Errorf("the card of %s shows %+v", tag, c)
		}
		waitFor(t, tab, "the card's own poll", fmt.Sprintf(`performance.getEntriesByType('resource').some(e => e.name.endsWith('/api/state?tag=%s'))`, tag))
		// Clicked by script: the table re-renders at every poll, and a
		// mouse click aimed at the button's box before a re-render moved it
		// can land beside it.
		eval[bool](t, tab, `(document.getElementById('next').click(), true)`)
		waitFor(t, tab, "page 2", `document.getElementById('page-range').textContent.startsWith('51–')`)
		if got := eval[string](t, tab, `document.querySelector('#detail [data-tag]')?.dataset.tag`); got != tag {
			t.Errorf("on the next page the card shows %q, want %s still", got, tag)
		}
	})

	t.Run("LinkToTheFailing", func(t *testing.T) {
		other, cancel := chromedp.NewContext(tab)
		defer cancel()
		b.listen(other)
		b.do(t, other, "open the link", darkMode(true), chromedp.Navigate(d.url+"/dashboard?state=failing"))
		waitFor(t, other, "the failing tags alone", `document.querySelectorAll('#rows tr[data-tag]').length === 2 && document.getElementById('page-range').textContent === '1–2 of 2'`)
	})

	if errs := b.consoleErrors(); len(errs) > 0 {
		t.Errorf("the pages logged errors (script errors, CSP violations, failed requests): %q", errs)
	}
}

// viewportShot saves what the window shows, the first screen.
func viewportShot(t *testing.T, ctx context.Context, paths ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
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
