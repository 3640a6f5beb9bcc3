package http_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/health"
	leafhttp "github.com/leafd/leafd/http"
	"github.com/leafd/leafd/internal/testkit/faultproxy"
	"github.com/leafd/leafd/internal/testkit/testdb"
	leafmetrics "github.com/leafd/leafd/metrics"
	"github.com/leafd/leafd/segment"
	"github.com/leafd/leafd/snowflake"
	"github.com/leafd/leafd/store"
	"github.com/leafd/leafd/store/sharded"
)

// dashStore is what the dashboard tests need of a store.
type dashStore interface {
	segment.Store
	snowflake.LeaseStore
	health.Pinger
	Migrate(ctx context.Context) error
	CreateTag(ctx context.Context, t leafd.Tag) (leafd.Tag, error)
	Close() error
}

// heldStore is a real store whose range loads of some tags hang once those
// tags have had their allowed loads, until the test ends: a database that
// holds a row lock. The dashboard shows such a tag as loading.
type heldStore struct {
	dashStore
	mu      sync.Mutex
	allowed map[string]int // loads left before the tag hangs; absent: no limit
	release chan struct{}
}

func (h *heldStore) hold(tag string, afterLoads int) {
	h.mu.Lock()
	h.allowed[tag] = afterLoads
	h.mu.Unlock()
}

func (h *heldStore) Allocate(ctx context.Context, tag string, step int64) (segment.Allocation, error) {
	h.mu.Lock()
	left, limited := h.allowed[tag]
	if limited && left > 0 {
		h.allowed[tag] = left - 1
	}
	h.mu.Unlock()
	if limited && left == 0 {
		select {
		case <-h.release:
		case <-ctx.Done():
		}
		return segment.Allocation{}, ctx.Err()
	}
	return h.dashStore.Allocate(ctx, tag, step)
}

// dashServer is a live leafd: segment and snowflake mode over one real
// store, served by httptest.
type dashServer struct {
	url     string
	handler http.Handler
	store   dashStore
	held    *heldStore
	alloc   *segment.Allocator
	gen     *snowflake.Pool
	// driver and dsn are the database of manyTagsServer, for a test's own
	// SQL.
	driver, dsn string
}

// newDashServer serves tags from s, with cfg completed by quiet logging and
// the metrics' load hook, and a snowflake generator that leases its worker
// id from s. It returns once the lease is held.
func newDashServer(tb testing.TB, s dashStore, cfg segment.Config, tags ...leafd.Tag) *dashServer {
	tb.Helper()
	return newDashServerWith(tb, leafmetrics.New(), s, cfg, tags...)
}

// newDashServerWith is newDashServer with the registry metrics.
func newDashServerWith(tb testing.TB, metrics *leafmetrics.Registry, s dashStore, cfg segment.Config, tags ...leafd.Tag) *dashServer {
	tb.Helper()
	ctx := context.Background()
	if err := s.Migrate(ctx); err != nil {
		tb.Fatal(err)
	}
	for _, t := range tags {
		if _, err := s.CreateTag(ctx, t); err != nil {
			tb.Fatal(err)
		}
	}
	held := &heldStore{dashStore: s, allowed: map[string]int{}, release: make(chan struct{})}
	cfg.Logger, cfg.OnLoad = quiet, metrics.ObserveLoad
	if cfg.RetryMin == 0 {
		cfg.RetryMin, cfg.RetryMax = time.Millisecond, 20*time.Millisecond
	}
	a, err := segment.New(held, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	if err := a.Refresh(ctx); err != nil {
		tb.Fatal(err)
	}
	a.Start()
	// Two worker ids (snowflake.workers 2), so that what shows them all
	// is exercised.
	g, err := snowflake.NewPool(snowflake.Settings{Leases: s, Logger: quiet}, 2)
	if err != nil {
		tb.Fatal(err)
	}
	g.Start()
	h := leafhttp.New(leafhttp.Config{Segment: a, Snowflake: g, Store: s, Metrics: metrics, Logger: quiet}).Handler()
	srv := httptest.NewServer(h)
	tb.Cleanup(func() {
		srv.Close()
		close(held.release)
		a.Close()
		g.Close()
	})
	deadline := time.Now().Add(5 * time.Second)
	for len(g.State().WorkerIDs) < 2 {
		if time.Now().After(deadline) {
			tb.Fatalf("not both worker ids leased within 5s: %v", g.State().WorkerIDs)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return &dashServer{url: srv.URL, handler: h, store: s, held: held, alloc: a, gen: g}
}

// openDefault opens a fresh database of the default engine.
func openDefault(tb testing.TB) store.Store {
	tb.Helper()
	s, err := store.Open(store.DefaultDriver(), testdb.DSN(tb, store.DefaultDriver()))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// The JSON of /api/state, decoded as a client would.
type apiState struct {
	Store *struct {
		Driver    string  `json:"driver"`
		OK        bool    `json:"ok"`
		Error     string  `json:"error"`
		CheckedAt *string `json:"checked_at"`
		// MySQL only.
		Address          string  `json:"address"`
		AddressIndex     *int    `json:"address_index"`
		Addresses        int     `json:"addresses"`
		Switches         *int64  `json:"switches"`
		LastSwitch       *string `json:"last_switch"`
		LastSwitchReason string  `json:"last_switch_reason"`
		Shards           []struct {
			Index   int     `json:"index"`
			Address string  `json:"address"`
			Up      bool    `json:"up"`
			Slots   []int64 `json:"slots"`
		} `json:"shards"`
	} `json:"store"`
	Segment *struct {
		Tags        []apiTag       `json:"tags"`
		Total       int            `json:"total"`
		Counts      map[string]int `json:"counts"`
		Offset      *int           `json:"offset"`
		Limit       *int           `json:"limit"`
		RefillMinMs int64          `json:"refill_min_ms"`
		RefillMaxMs int64          `json:"refill_max_ms"`
	} `json:"segment"`
	Snowflake *struct {
		WorkerID       *int64  `json:"worker_id"`
		WorkerSource   string  `json:"worker_source"`
		LeaseUntil     *string `json:"lease_until"`
		LastMs         int64   `json:"last_ms"`
		BackwardEvents int64   `json:"backward_events"`
		Issued         int64   `json:"issued"`
		Renewals       int64   `json:"renewals"`
		MaxBorrowMs    *int64  `json:"max_borrow_ms"`
		LeadMs         *int64  `json:"lead_ms"`
		MaxLeadMs      *int64  `json:"max_lead_ms"`
		BorrowedMs     *int64  `json:"borrowed_ms"`
		WorkerIDs      []int64 `json:"worker_ids"`
		Error          string  `json:"error"`
	} `json:"snowflake"`
	Time string `json:"time"`
}

type apiTag struct {
	Tag          string      `json:"tag"`
	State        string      `json:"state"`
	Step         int64       `json:"step"`
	MinStep      int64       `json:"min_step"`
	Current      int         `json:"current"`
	Loading      bool        `json:"loading"`
	Buffers      []apiBuffer `json:"buffers"`
	LastLoad     *string     `json:"last_load"`
	LastPeriodMs int64       `json:"last_period_ms"`
	Rate         float64     `json:"rate"`
	Issued       int64       `json:"issued"`
	Waits        int64       `json:"waits"`
	Loads        int64       `json:"loads"`
	Errors       int64       `json:"errors"`
	LoadErrors   int64       `json:"load_errors"`
	Error        string      `json:"error"`
	ErrorCode    string      `json:"error_code"`
	// An opaque tag's only.
	Domain         *int64 `json:"domain"`
	DomainUsed     *int64 `json:"domain_used"`
	DomainReserved *int64 `json:"domain_reserved"`
	Period         string `json:"period"`
	PeriodEnd      string `json:"period_end"`
	PeriodCapacity *int64 `json:"period_capacity"`
	PeriodUsed     *int64 `json:"period_used"`
}

type apiBuffer struct {
	Start   int64 `json:"start"`
	End     int64 `json:"end"`
	Next    int64 `json:"next"`
	Ready   bool  `json:"ready"`
	Loading bool  `json:"loading"`
	Size    int64 `json:"size"`
	Used    int64 `json:"used"`
	Stride  int64 `json:"stride"`
}

func getState(tb testing.TB, url string) (apiState, string) {
	tb.Helper()
	return getStateQuery(tb, url, "")
}

// getStateQuery answers GET /api/state?query.
func getStateQuery(tb testing.TB, url, query string) (apiState, string) {
	tb.Helper()
	path := "/api/state"
	if query != "" {
		path += "?" + query
	}
	r := do(tb, "GET", url+path)
	if r.status != 200 || !strings.HasPrefix(r.contentType, "application/json") {
		tb.Fatalf("GET %s = %d %q %s", path, r.status, r.contentType, r.body)
	}
	var st apiState
	if err := json.Unmarshal([]byte(r.body), &st); err != nil {
		tb.Fatalf("GET /api/state: %v in %s", err, r.body)
	}
	return st, r.body
}

func (st apiState) tag(tb testing.TB, name string) apiTag {
	tb.Helper()
	if st.Segment == nil {
		tb.Fatal("no segment state")
	}
	for _, t := range st.Segment.Tags {
		if t.Tag == name {
			return t
		}
	}
	tb.Fatalf("tag %q is not in the state", name)
	return apiTag{}
}

// utcMillis parses an RFC 3339 UTC timestamp with milliseconds.
func utcMillis(tb testing.TB, what string, s *string) time.Time {
	tb.Helper()
	if s == nil {
		tb.Fatalf("%s is null", what)
	}
	t, err := time.Parse(time.RFC3339, *s)
	if err != nil || !strings.HasSuffix(*s, "Z") || len(*s) != len("2006-01-02T15:04:05.000Z") {
		tb.Fatalf("%s = %q: not RFC 3339 UTC with milliseconds (%v)", what, *s, err)
	}
	return t
}

func eventuallyState(tb testing.TB, url, what string, cond func(apiState) bool) apiState {
	tb.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, body := getState(tb, url)
		if cond(st) {
			return st
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s: not within 5s; last state %s", what, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestStateJSON(t *testing.T) {
	t.Parallel()
	d := newDashServer(t, openDefault(t), segment.Config{
		MaxStep: 10, RefillMin: time.Minute, RefillMax: 2 * time.Minute, WaitTimeout: time.Second,
	}, leafd.Tag{Name: "order", MaxID: 1, Step: 10}, leafd.Tag{Name: "idle", MaxID: 1, Step: 100})
	started := time.Now().Add(-time.Second)

	t.Run("BeforeAnyRequest", func(t *testing.T) {
		st, body := getState(t, d.url)
		if st.Store == nil || st.Store.Driver != store.DefaultDriver() || !st.Store.OK || st.Store.Error != "" {
			t.Fatalf("store: %s", body)
		}
		utcMillis(t, "store.checked_at", st.Store.CheckedAt)
		utcMillis(t, "time", &st.Time)
		if st.Segment.RefillMinMs != 60_000 || st.Segment.RefillMaxMs != 120_000 {
			t.Fatalf("refill window: %s", body)
		}
		if len(st.Segment.Tags) != 2 || st.Segment.Tags[0].Tag != "idle" || st.Segment.Tags[1].Tag != "order" {
			t.Fatalf("tags are not idle, order (sorted): %s", body)
		}
		idle := st.tag(t, "idle")
		if idle.Step != 0 || idle.MinStep != 100 || idle.Loads != 0 || idle.LastLoad != nil || idle.Loading ||
			idle.Buffers[0] != (apiBuffer{}) || idle.Buffers[1] != (apiBuffer{}) {
			t.Fatalf("a tag never asked for: %+v", idle)
		}
	})

	t.Run("SegmentBuffers", func(t *testing.T) {
		if r := do(t, "GET", d.url+"/segment/order?count=2"); r.status != 200 { // 1, 2: past the preload point
			t.Fatalf("count=2: %d %s", r.status, r.body)
		}
		st := eventuallyState(t, d.url, "next range loaded", func(st apiState) bool {
			o := st.tag(t, "order")
			return o.Buffers[1-o.Current].Ready
		})
		o := st.tag(t, "order")
		cur, next := o.Buffers[o.Current], o.Buffers[1-o.Current]
		if o.Current != 0 || cur != (apiBuffer{Start: 1, End: 11, Next: 3, Ready: true, Size: 10, Used: 2}) {
			t.Fatalf("current buffer: %+v", o)
		}
		if next != (apiBuffer{Start: 11, End: 21, Next: 11, Ready: true, Size: 10}) {
			t.Fatalf("next buffer: %+v", next)
		}
		if o.Step != 10 || o.MinStep != 10 || o.Issued != 2 || o.Loads != 2 || o.Waits != 1 || o.Errors != 0 || o.Loading {
			t.Fatalf("counters: %+v", o)
		}
		if at := utcMillis(t, "last_load", o.LastLoad); at.Before(started) || at.After(time.Now()) {
			t.Fatalf("last_load %v is not between %v and now", at, started)
		}
		if o.LastPeriodMs < 0 || o.LastPeriodMs > time.Since(started).Milliseconds() || o.Rate < 0 {
			t.Fatalf("last_period_ms %d, rate %v", o.LastPeriodMs, o.Rate)
		}

		if r := do(t, "GET", d.url+"/segment/order?count=9"); r.status != 200 { // 3..11: switches buffers
			t.Fatalf("count=9: %d %s", r.status, r.body)
		}
		st, _ = getState(t, d.url)
		o = st.tag(t, "order")
		if o.Current != 1 || o.Buffers[1].Start != 11 || o.Buffers[1].Next != 12 || o.Buffers[1].Used != 1 || o.Issued != 11 {
			t.Fatalf("after the switch: %+v", o)
		}
	})

	t.Run("Snowflake", func(t *testing.T) {
		before := time.Now().UnixMilli()
		if r := do(t, "GET", d.url+"/snowflake?count=3"); r.status != 200 {
			t.Fatalf("/snowflake: %d %s", r.status, r.body)
		}
		st, body := getState(t, d.url)
		sf := st.Snowflake
		if sf == nil || sf.WorkerID == nil || *sf.WorkerID != 0 || sf.WorkerSource != "lease" || sf.Issued != 3 ||
			sf.BackwardEvents != 0 || sf.Error != "" {
			t.Fatalf("snowflake: %s", body)
		}
		if sf.LastMs < before || sf.LastMs > time.Now().UnixMilli() {
			t.Fatalf("last_ms %d is not the time of the IDs just issued", sf.LastMs)
		}
		if until := utcMillis(t, "lease_until", sf.LeaseUntil); !until.After(time.Now()) {
			t.Fatalf("lease_until %v is not in the future", until)
		}
	})

	t.Run("BorrowingOff", func(t *testing.T) {
		st, body := getState(t, d.url)
		sf := st.Snowflake
		for _, f := range []*int64{sf.MaxBorrowMs, sf.LeadMs, sf.MaxLeadMs, sf.BorrowedMs} {
			if f == nil || *f != 0 {
				t.Fatalf("with snowflake.max_borrow 0, max_borrow_ms, lead_ms, max_lead_ms and borrowed_ms are 0: %s", body)
			}
		}
	})

	t.Run("ShapeOfContract", func(t *testing.T) {
		// docs/contract.md section 6: start, end and next are JSON numbers; no field of
		// the example is missing.
		_, body := getState(t, d.url)
		for _, want := range []string{`"store":{"driver":"` + store.DefaultDriver() + `","ok":true`, `"buffers":[{"start":0,"end":0,"next":0,"ready":false,"loading":false,"size":0,"used":0},{"start":11,"end":21,"next":12,"ready":true`,
			`"tag":"order","step":10,"min_step":10,"current":1,"loading":false`, `"last_period_ms":`, `"rate":`, `"issued":11,"waits":1`,
			`"snowflake":{"worker_id":0,"worker_source":"lease","lease_until":"`, `"last_ms":`, `"backward_events":0`} {
			if !strings.Contains(body, want) {
				t.Errorf("the state lacks %s: %s", want, body)
			}
		}
	})
}

// A state with no tags and no snowflake mode: the dashboard's empty state.
func TestStateEmptyAndModesOff(t *testing.T) {
	t.Parallel()
	s := openDefault(t)
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	a, err := segment.New(s, segment.Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	srv := httptest.NewServer(leafhttp.New(leafhttp.Config{Segment: a, Logger: quiet}).Handler())
	t.Cleanup(srv.Close)
	_, body := getState(t, srv.URL)
	if !strings.HasPrefix(body, `{"store":null,"segment":{"tags":[],`) || !strings.Contains(body, `"snowflake":null`) {
		t.Fatalf("no store, no tags, snowflake off: %s", body)
	}
}

// countingStore counts the pings that reach the store.
type countingStore struct {
	health.Pinger
	pings atomic.Int64
}

func (c *countingStore) Ping(ctx context.Context) error {
	c.pings.Add(1)
	return c.Pinger.Ping(ctx)
}

// However many dashboards poll, the store is pinged at most once a second.
func TestStorePingCached(t *testing.T) {
	t.Parallel()
	s := openDefault(t)
	counted := &countingStore{Pinger: s}
	srv := httptest.NewServer(leafhttp.New(leafhttp.Config{Store: counted, Logger: quiet}).Handler())
	t.Cleanup(srv.Close)
	began := time.Now()
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10 {
				if st, _ := getState(t, srv.URL); !st.Store.OK {
					t.Errorf("store not ok: %+v", st.Store)
				}
				do(t, "GET", srv.URL+"/metrics")
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(began)
	if n, most := counted.pings.Load(), 1+int64(elapsed/time.Second); n < 1 || n > most {
		t.Fatalf("160 polls in %v pinged the store %d times; want 1..%d", elapsed, n, most)
	}
}

// A store that is down shows in the state, with its error, and in the tags
// that can no longer load.
func TestStateStoreDown(t *testing.T) {
	t.Parallel()
	s := openDefault(t)
	d := newDashServer(t, s, segment.Config{WaitTimeout: 100 * time.Millisecond},
		leafd.Tag{Name: "order", MaxID: 1, Step: 10})
	s.Close() // before the first ping: nothing cached yet
	if r := do(t, "GET", d.url+"/segment/order"); r.status != 503 || errorCode(t, r) != leafd.ESegmentUnavailable {
		t.Fatalf("with the store closed: %d %s", r.status, r.body)
	}
	st, body := getState(t, d.url)
	if st.Store.OK || !strings.Contains(st.Store.Error, "closed") || st.Store.Driver != store.DefaultDriver() {
		t.Fatalf("store: %s", body)
	}
	o := st.tag(t, "order")
	if o.Errors != 1 || o.LoadErrors < 1 || o.Error == "" || o.Buffers[0].Ready || o.Buffers[1].Ready {
		t.Fatalf("tag with the store down: %+v", o)
	}
}

// On every engine reached at network addresses, an outage through a proxy
// shows in the state within a second or two, and so does the recovery.
func TestStateOutage(t *testing.T) {
	t.Parallel()
	for _, driver := range store.FallbackDrivers() { // the engines a fault proxy can come between
		t.Run(driver, func(t *testing.T) { testStateOutage(t, driver) })
	}
}

func testStateOutage(t *testing.T, driver string) {
	dsn := testdb.DSN(t, driver)
	proxy := faultproxy.New(t, testdb.Addr(t, driver, dsn))
	s, err := store.Open(driver, testdb.WithAddr(t, driver, dsn, proxy.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	d := newDashServer(t, s, segment.Config{WaitTimeout: 5 * time.Second},
		leafd.Tag{Name: "order", MaxID: 1, Step: 100})
	if r := do(t, "GET", d.url+"/segment/order?count=5"); r.status != 200 {
		t.Fatalf("GET: %d %s", r.status, r.body)
	}
	st, body := getState(t, d.url)
	if st.Store.Driver != driver || !st.Store.OK {
		t.Fatalf("store before the outage: %s", body)
	}
	proxy.Down()
	st = eventuallyState(t, d.url, "the outage shown", func(st apiState) bool { return !st.Store.OK })
	if st.Store.Error == "" {
		t.Fatal("a store that is down has no error message")
	}
	// IDs keep flowing from the buffer meanwhile.
	if r := do(t, "GET", d.url+"/segment/order"); r.status != 200 || r.body != "6\n" {
		t.Fatalf("GET during the outage: %d %q", r.status, r.body)
	}
	proxy.Up()
	eventuallyState(t, d.url, "the recovery shown", func(st apiState) bool { return st.Store.OK && st.Store.Error == "" })
}

// With store.fallback_dsns, the state names the address in use; when the
// first goes away, the move to the next shows, with its time and reason,
// and IDs keep flowing through it. On every engine fallback_dsns applies
// to.
func TestStateFallback(t *testing.T) {
	t.Parallel()
	for _, driver := range store.FallbackDrivers() {
		t.Run(driver, func(t *testing.T) { testStateFallback(t, driver) })
	}
}

func testStateFallback(t *testing.T, driver string) {
	dsn := testdb.DSN(t, driver)
	var proxies []*faultproxy.Proxy
	var dsns []string
	for range 2 {
		p := faultproxy.New(t, testdb.Addr(t, driver, dsn))
		proxies, dsns = append(proxies, p), append(dsns, testdb.WithAddr(t, driver, dsn, p.Addr()))
	}
	s, err := store.Open(driver, dsns[0], store.WithFallbacks(dsns[1]), store.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	d := newDashServer(t, s, segment.Config{WaitTimeout: time.Second},
		leafd.Tag{Name: "order", MaxID: 1, Step: 5})
	st, body := getState(t, d.url)
	if a := st.Store; a.Address != proxies[0].Addr() || a.AddressIndex == nil || *a.AddressIndex != 0 ||
		a.Addresses != 2 || a.Switches == nil || *a.Switches != 0 || a.LastSwitch != nil {
		t.Fatalf("store before any switch: %s", body)
	}
	proxies[0].Down()
	// Ranges of 5 make every few requests load one, through the second
	// address once the first is gone.
	for i := range 20 {
		if r := do(t, "GET", d.url+"/segment/order"); r.status != 200 || r.body != fmt.Sprintf("%d\n", i+1) {
			t.Fatalf("GET %d with the first address down: %d %q", i, r.status, r.body)
		}
	}
	st = eventuallyState(t, d.url, "the switch shown", func(st apiState) bool {
		return st.Store.OK && st.Store.AddressIndex != nil && *st.Store.AddressIndex == 1
	})
	if a := st.Store; a.Address != proxies[1].Addr() || *a.Switches != 1 || a.LastSwitch == nil ||
		!strings.Contains(a.LastSwitchReason, proxies[0].Addr()) {
		t.Fatalf("store after the switch: %+v", a)
	}
	utcMillis(t, "last_switch", st.Store.LastSwitch)
	m := getMetrics(t, d.url)
	if v := m.value(t, "leafd_store_address_index", "address", proxies[1].Addr()); v != 1 {
		t.Errorf("leafd_store_address_index = %v, want 1", v)
	}
	if v := m.value(t, "leafd_store_address_switches_total"); v != 1 {
		t.Errorf("leafd_store_address_switches_total = %v, want 1", v)
	}
}

// errLockWait is what a MySQL whose row stays locked answers a range load.
var errLockWait = errors.New("Error 1205 (HY000): Lock wait timeout exceeded; try restarting transaction")

// failingStore is a real store whose range loads of one tag fail, as they
// do behind a row lock that is never released: the dashboard shows that
// tag failing among the healthy ones.
type failingStore struct {
	dashStore
	tag string
}

func (f *failingStore) Allocate(ctx context.Context, tag string, step int64) (segment.Allocation, error) {
	if tag == f.tag {
		return segment.Allocation{}, errLockWait
	}
	return f.dashStore.Allocate(ctx, tag, step)
}

// queryServer serves eight tags, one of each status and a few serving at
// known rates (the allocator's clock moves 100 s after the IDs are issued):
//
//	alpha       serving  0.1/s      kappa    idle
//	Beta-Order  serving  0.3/s      order-eu serving 0.5/s
//	gamma       failing             order-us loading
//	queue       waiting             zulu    idle
func queryServer(t *testing.T) *dashServer {
	t.Helper()
	clock := &movableClock{}
	tag := func(name string, step int64) leafd.Tag { return leafd.Tag{Name: name, MaxID: 1, Step: step} }
	d := newDashServer(t, &failingStore{dashStore: openDefault(t), tag: "gamma"}, segment.Config{
		Now: clock.Now, WaitTimeout: 100 * time.Millisecond, LoadTimeout: time.Minute,
		RetryMin: 50 * time.Millisecond, RetryMax: time.Second,
	}, tag("alpha", 1000), tag("Beta-Order", 1000), tag("gamma", 1000), tag("kappa", 1000),
		tag("order-eu", 1000), tag("order-us", 10), tag("queue", 1000), tag("zulu", 1000))
	get := func(path string, status int) {
		t.Helper()
		r := do(t, "GET", d.url+path)
		// A first load slower than the 100 ms wait_timeout (a loaded
		// machine) answers 503 with nothing taken: asked again.
		for i := 0; i < 50 && status == 200 && r.status == 503; i++ {
			time.Sleep(20 * time.Millisecond)
			r = do(t, "GET", d.url+path)
		}
		if r.status != status {
			t.Fatalf("GET %s = %d: %s", path, r.status, r.body)
		}
	}
	// Under a tenth of each range: no second load resets the rate.
	get("/segment/alpha?count=10", 200)
	get("/segment/Beta-Order?count=30", 200)
	get("/segment/order-eu?count=50", 200)
	get("/segment/order-us?count=2", 200) // past its preload point
	st := eventuallyState(t, d.url, "order-us's next range", func(st apiState) bool {
		o := st.tag(t, "order-us")
		return o.Buffers[1-o.Current].Ready && !o.Loading
	})
	d.held.hold("order-us", 0)
	// Past the second range's preload point (its step may have grown): the
	// third load hangs.
	o := st.tag(t, "order-us")
	cur, next := o.Buffers[o.Current], o.Buffers[1-o.Current]
	get(fmt.Sprintf("/segment/order-us?count=%d", cur.End-cur.Next+next.Size/5+1), 200)
	d.held.hold("queue", 0)
	get("/segment/queue", 503)
	get("/segment/gamma", 503)
	clock.shift(100 * time.Second)
	eventuallyState(t, d.url, "one tag of each status", func(st apiState) bool {
		c := st.Segment.Counts
		return c["failing"] == 1 && c["waiting"] == 1 && c["loading"] == 1 && c["serving"] == 3 && c["idle"] == 2
	})
	return d
}

func names(st apiState) []string {
	var out []string
	for _, t := range st.Segment.Tags {
		out = append(out, t.Tag)
	}
	return out
}

// GET /api/state filters, orders and pages the tags on request; without a
// query it answers every tag by name, as before it took one.
func TestStateQuery(t *testing.T) {
	t.Parallel()
	d := queryServer(t)
	all := []string{"Beta-Order", "alpha", "gamma", "kappa", "order-eu", "order-us", "queue", "zulu"}
	wantCounts := map[string]int{"all": 8, "failing": 1, "waiting": 1, "loading": 1, "serving": 3, "idle": 2}

	for _, tc := range []struct {
		name, query string
		want        []string
		total       int
	}{
		{"None", "", all, 8},
		{"EmptyValues", "tag=&q=&state=&sort=&offset=&limit=", all, 8},
		{"UnknownParameterIgnored", "poll=250", all, 8},
		{"Tag", "tag=alpha", []string{"alpha"}, 1},
		{"TagIsExact", "tag=ALPHA", nil, 0},
		{"TagUnknown", "tag=nope", nil, 0},
		{"QAnyCase", "q=ORDER", []string{"Beta-Order", "order-eu", "order-us"}, 3},
		{"QNone", "q=xyz", nil, 0},
		{"QMiddle", "q=pp", []string{"kappa"}, 1},
		{"QPart", "q=a-o", []string{"Beta-Order"}, 1},
		{"StateFailing", "state=failing", []string{"gamma"}, 1},
		{"StateWaiting", "state=waiting", []string{"queue"}, 1},
		{"StateLoading", "state=loading", []string{"order-us"}, 1},
		{"StateServing", "state=serving", []string{"Beta-Order", "alpha", "order-eu"}, 3},
		{"StateIdle", "state=idle", []string{"kappa", "zulu"}, 2},
		{"SortName", "sort=name", all, 8},
		{"SortProblems", "sort=problems", []string{"gamma", "queue", "order-us", "order-eu", "Beta-Order", "alpha", "kappa", "zulu"}, 8},
		{"Limit", "limit=3", all[:3], 8},
		{"OffsetLimit", "offset=3&limit=3", all[3:6], 8},
		{"LastPage", "offset=6&limit=3", all[6:], 8},
		{"PastTheEnd", "offset=8&limit=3", nil, 8},
		{"FarPastTheEnd", "offset=1000000", nil, 8},
		{"OffsetAlone", "offset=7", all[7:], 8},
		{"LimitMax", "limit=1000", all, 8},
		{"Combined", "q=order&sort=problems&limit=2", []string{"order-us", "order-eu"}, 3},
		{"CombinedPaged", "q=order&sort=problems&offset=2&limit=2", []string{"Beta-Order"}, 3},
		{"StateAndQ", "state=serving&q=order", []string{"Beta-Order", "order-eu"}, 2},
		{"TagAndState", "tag=alpha&state=idle", nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, body := getStateQuery(t, d.url, tc.query)
			if got := names(st); strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("tags %v, want %v", got, tc.want)
			}
			if st.Segment.Total != tc.total {
				t.Errorf("total %d, want %d", st.Segment.Total, tc.total)
			}
			if fmt.Sprint(st.Segment.Counts) != fmt.Sprint(wantCounts) {
				t.Errorf("counts %v, want %v (every tag, whatever the query)", st.Segment.Counts, wantCounts)
			}
			if st.Segment.Tags == nil {
				t.Errorf("tags is null, want []: %s", body)
			}
		})
	}

	t.Run("StateField", func(t *testing.T) {
		st, _ := getState(t, d.url)
		want := map[string]string{"alpha": "serving", "Beta-Order": "serving", "gamma": "failing", "kappa": "idle",
			"order-eu": "serving", "order-us": "loading", "queue": "waiting", "zulu": "idle"}
		for _, tag := range st.Segment.Tags {
			if tag.State != want[tag.Tag] {
				t.Errorf("%s: state %q, want %q", tag.Tag, tag.State, want[tag.Tag])
			}
		}
		if g := st.tag(t, "gamma"); g.Error != errLockWait.Error() || g.LoadErrors < 1 {
			t.Errorf("the failing tag: %+v", g)
		}
	})

	t.Run("SortRate", func(t *testing.T) {
		st, body := getStateQuery(t, d.url, "sort=rate")
		got := names(st)
		if len(got) != 8 || strings.Join(got[:2], ",") != "order-eu,Beta-Order" || strings.Join(got[5:], ",") != "kappa,queue,zulu" {
			t.Fatalf("sort=rate: %v, want order-eu, Beta-Order first, kappa, queue, zulu (never served) last", got)
		}
		for i := 1; i < len(st.Segment.Tags); i++ {
			a, b := st.Segment.Tags[i-1], st.Segment.Tags[i]
			if a.Rate < b.Rate || a.Rate == b.Rate && a.Tag > b.Tag {
				t.Errorf("sort=rate puts %s (%v/s) before %s (%v/s): %s", a.Tag, a.Rate, b.Tag, b.Rate, body)
			}
		}
		if r := st.Segment.Tags[0].Rate; r < 0.45 || r > 0.5 {
			t.Errorf("order-eu's rate %v, want 0.5/s (50 IDs in 100 s and the test's own time)", r)
		}
	})

	t.Run("EchoesPaging", func(t *testing.T) {
		_, body := getStateQuery(t, d.url, "offset=2&limit=3")
		for _, want := range []string{`"total":8,"counts":{"all":8,"failing":1,"waiting":1,"loading":1,"serving":3,"idle":2},"offset":2,"limit":3,`} {
			if !strings.Contains(body, want) {
				t.Errorf("the state lacks %s: %s", want, body)
			}
		}
		_, body = getState(t, d.url)
		if strings.Contains(body, `"offset"`) || strings.Contains(body, `"limit"`) {
			t.Errorf("offset or limit echoed without being asked for: %s", body)
		}
	})

	t.Run("BadParameters", func(t *testing.T) {
		for query, says := range map[string]string{
			"limit=0":        "limit",
			"limit=1001":     "limit",
			"limit=-1":       "limit",
			"limit=ten":      "limit",
			"offset=-1":      "offset",
			"offset=1.5":     "offset",
			"offset=x":       "offset",
			"state=broken":   "failing, waiting, loading, serving, idle",
			"state=FAILING":  "state",
			"sort=size":      "name, problems or rate",
			"sort=problems,": "sort",
			"limit=%zz":      "does not parse",
			"limit=5;sort=x": "does not parse",
		} {
			r := do(t, "GET", d.url+"/api/state?"+query)
			if r.status != 400 || errorCode(t, r) != leafd.EInvalidQuery {
				t.Errorf("?%s = %d %s, want 400 invalid_query", query, r.status, r.body)
				continue
			}
			if !strings.Contains(r.body, says) {
				t.Errorf("?%s: the message does not say %q: %s", query, says, r.body)
			}
		}
	})
}

// At ten thousand tags, a page of 50 is a small answer, and so is one tag's.
func TestStateManyTags(t *testing.T) {
	t.Parallel()
	d := manyTagsServer(t, 10_000, "")
	st, body := getStateQuery(t, d.url, "sort=problems&limit=50")
	if len(st.Segment.Tags) != 50 || st.Segment.Total != 10_000 || st.Segment.Counts["all"] != 10_000 {
		t.Fatalf("a page of 50 of 10,000: %d tags, total %d, counts %v", len(st.Segment.Tags), st.Segment.Total, st.Segment.Counts)
	}
	if len(body) > 40_000 {
		t.Errorf("a page of 50 tags is %d bytes", len(body))
	}
	last := manyTagName(9_999)
	st, _ = getStateQuery(t, d.url, "tag="+last)
	if len(st.Segment.Tags) != 1 || st.Segment.Tags[0].Tag != last || st.Segment.Total != 1 {
		t.Fatalf("tag=%s: %v", last, names(st))
	}
	_, body = getState(t, d.url)
	if n := strings.Count(body, `"tag":`); n != 10_000 {
		t.Fatalf("without a query: %d tags, want every one of 10,000", n)
	}
}

// manyServices name the tags of manyTagsServer, in alphabetical order.
var manyServices = []string{"billing", "cart", "checkout", "coupon", "inventory", "invoice",
	"ledger", "order", "payment", "refund", "shipment", "wallet"}

// manyTagName is the name of tag i of 10,000: names sort in the order of
// i, from billing-0000 to wallet-9999.
func manyTagName(i int) string {
	return fmt.Sprintf("%s-%04d", manyServices[i*len(manyServices)/10_000], i)
}

// manyTagStep is the table step of tag i of manyTagsServer: 100 to 1,000.
func manyTagStep(i int) int { return 100 + i%7*150 }

// manyTagsServer is a live server over a real database of the default
// engine holding n tags
// (manyTagName; n at most 10,000), written in one transaction, since
// CreateTag one by one would take a while. The range loads of the tag
// failing, if any, fail.
func manyTagsServer(t *testing.T, n int, failing string) *dashServer {
	t.Helper()
	driver := store.DefaultDriver()
	dsn := testdb.DSN(t, driver)
	s, err := store.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx := context.Background()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	raw := testdb.SQL(t, driver, dsn)
	tx, err := raw.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for from := 0; from < n; from += 500 { // 500 rows a statement
		var values []string
		var args []any
		for i := from; i < min(from+500, n); i++ {
			values = append(values, "(?, 1, ?)")
			args = append(args, manyTagName(i), manyTagStep(i))
		}
		if _, err := tx.ExecContext(ctx, tx.Rebind("INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES "+strings.Join(values, ", ")), args...); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	var st dashStore = s
	if failing != "" {
		st = &failingStore{dashStore: s, tag: failing}
	}
	d := newDashServer(t, st, segment.Config{
		WaitTimeout: 5 * time.Second, RetryMin: 100 * time.Millisecond, RetryMax: time.Second, // slow loads on a busy machine
		LoadTimeout: 5 * time.Minute, // a held load stays loading, whatever the test's length
	})
	d.driver, d.dsn = driver, dsn
	return d
}

// rewind rewinds tag of d, a server over the database d.dsn, for real:
// it takes an ID, so that the store's high-water mark passes 1, lowers the
// tag's max_id below it by SQL, as an operator's mistaken UPDATE would, and
// takes IDs until the buffered ones are gone and a range load is refused as
// tag_rewound. It returns that error's message.
func rewind(t *testing.T, d *dashServer, tag string) string {
	t.Helper()
	ctx := context.Background()
	if _, err := d.alloc.Next(ctx, tag); err != nil {
		t.Fatalf("%s: %v", tag, err)
	}
	raw := testdb.SQL(t, d.driver, d.dsn) // waits for the stores' transactions rather than fail
	if _, err := raw.ExecContext(ctx, raw.Rebind("UPDATE leaf_alloc SET max_id = 1 WHERE biz_tag = ?"), tag); err != nil {
		t.Fatal(err)
	}
	for range 1000 {
		_, err := d.alloc.NextN(ctx, tag, 100, nil)
		if err == nil {
			continue
		}
		if !strings.Contains(err.Error(), "rewound") {
			t.Fatalf("%s after its max_id was lowered: %v, want tag_rewound", tag, err)
		}
		return err.Error()
	}
	t.Fatalf("%s still serves 100,000 IDs after its max_id was lowered", tag)
	return ""
}

// A rewound tag (its max_id lowered below IDs already issued) shows failing
// in /api/state with error_code tag_rewound and the message that repairs
// it; a tag whose loads fail without a code says internal; a healthy tag
// has neither error nor error_code.
func TestStateRewoundTag(t *testing.T) {
	d := manyTagsServer(t, 3, manyTagName(2))
	rewound, healthy, locked := manyTagName(0), manyTagName(1), manyTagName(2)
	rewind(t, d, rewound)
	if _, err := d.alloc.Next(context.Background(), healthy); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	_, _ = d.alloc.Next(short, locked)
	cancel()
	st := eventuallyState(t, d.url, "the rewound tag failing", func(st apiState) bool {
		return st.tag(t, rewound).State == "failing" && st.tag(t, locked).State == "failing"
	})
	r := st.tag(t, rewound)
	if r.ErrorCode != leafd.ETagRewound || !strings.Contains(r.Error, "was rewound") ||
		!strings.Contains(r.Error, "UPDATE leaf_alloc SET max_id = ") {
		t.Errorf("the rewound tag shows error_code %q, error %q; want tag_rewound and the UPDATE that repairs it", r.ErrorCode, r.Error)
	}
	if l := st.tag(t, locked); l.ErrorCode != leafd.EInternal || !strings.Contains(l.Error, "Lock wait timeout") {
		t.Errorf("the tag whose loads fail without a code shows error_code %q, error %q", l.ErrorCode, l.Error)
	}
	if h := st.tag(t, healthy); h.ErrorCode != "" || h.Error != "" {
		t.Errorf("the healthy tag shows error_code %q, error %q", h.ErrorCode, h.Error)
	}
	// The query finds it by its state, as the dashboard's first screen does.
	page, _ := getStateQuery(t, d.url, "sort=problems&offset=0&limit=50")
	if len(page.Segment.Tags) == 0 || page.Segment.Tags[0].State != "failing" || page.Segment.Tags[0].ErrorCode == "" {
		t.Errorf("the first page begins with %+v, want a failing tag with its error_code", page.Segment.Tags)
	}
}

// A store that refuses the login, or whose database does not exist, shows
// why in /api/state, without the database account's name or the
// database's: /api/state is open to anyone unless admin.protect_dashboard
// is set.
func TestStateHidesDatabaseAccount(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, user, password, database, says string
		hidden                               []string
	}{
		{"Account", "leafd_no_such_user", "wrong-password", "", "refused the login", []string{"leafd_no_such_user", "wrong-password"}},
		// The server's message that the database does not exist, and leafd's advice to
		// create it, whatever the name holds.
		{"Database", "", "", "leafd_no_such_db", "does not exist", []string{"leafd_no_such_db"}},
		{"DatabaseWithSpaces", "", "", "Qxz absentdb", "does not exist", []string{"Qxz", "absentdb"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, driver := range store.FallbackDrivers() { // the engines with accounts and database names
				t.Run(driver, func(t *testing.T) {
					dsn := testdb.DSN(t, driver)
					if c.user != "" {
						dsn = testdb.WithLogin(t, driver, dsn, c.user, c.password)
					}
					if c.database != "" {
						dsn = testdb.WithDatabase(t, driver, dsn, c.database)
					}
					s, err := store.Open(driver, dsn)
					if err != nil {
						t.Fatal(err)
					}
					stateHides(t, s, c.says, c.hidden)
				})
			}
		})
	}
}

// stateHides serves s and checks that /api/state says its store fails
// with an error holding says, and shows none of hidden. It closes s.
func stateHides(t *testing.T, s store.Store, says string, hidden []string) {
	t.Helper()
	t.Cleanup(func() { s.Close() })
	srv := httptest.NewServer(leafhttp.New(leafhttp.Config{Store: s}).Handler())
	t.Cleanup(srv.Close)
	st, body := getState(t, srv.URL)
	if st.Store.OK || !strings.Contains(st.Store.Error, says) {
		t.Fatalf("store: %s; want an error saying %q", body, says)
	}
	for _, name := range hidden {
		if strings.Contains(body, name) {
			t.Errorf("/api/state shows %q: %s", name, body)
		}
	}
}

// With store.shards, /api/state lists every database with its slots, and
// a tag's buffers show their stride.
// The shards are databases on servers, which have addresses to show.
func TestStateShards(t *testing.T) {
	t.Parallel()
	for _, driver := range store.FallbackDrivers() {
		t.Run(driver, func(t *testing.T) { testStateShards(t, driver) })
	}
}

func testStateShards(t *testing.T, driver string) {
	t.Parallel()
	dsns := []string{testdb.DSN(t, driver), testdb.DSN(t, driver)}
	s, err := sharded.Open(driver, dsns, sharded.Options{Slots: 4, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	d := newDashServer(t, s, segment.Config{WaitTimeout: 5 * time.Second}, leafd.Tag{Name: "order", MaxID: 1, Step: 10})
	r := do(t, "GET", d.url+"/segment/order?count=3")
	if r.status != 200 {
		t.Fatalf("GET: %d %s", r.status, r.body)
	}
	st, body := getState(t, d.url)
	if len(st.Store.Shards) != 2 || st.Store.Addresses != 2 {
		t.Fatalf("store: %s", body)
	}
	for i, sh := range st.Store.Shards {
		if sh.Index != i || !sh.Up || len(sh.Slots) != 2 || sh.Slots[0] != int64(i) || sh.Address == "" {
			t.Fatalf("shard %d: %+v in %s", i, sh, body)
		}
	}
	o := st.tag(t, "order")
	if b := o.Buffers[o.Current]; b.Stride != 4 || b.Used != 3 || b.Size != 10 {
		t.Fatalf("current buffer %+v, want stride 4, 3 of 10 used: %s", b, body)
	}
}

// With snowflake.max_borrow on, a burst that outruns the sequence borrows:
// /api/state and /metrics show the bound, the lead, the largest lead and
// the milliseconds borrowed.
func TestStateSnowflakeBorrowing(t *testing.T) {
	t.Parallel()
	const borrow = 50 * time.Millisecond
	// 16 IDs a millisecond: any burst outruns the clock.
	l := snowflake.Layout{Epoch: snowflake.DefaultEpoch, TimeBits: 41, WorkerBits: 18, SequenceBits: 4}
	g, err := snowflake.New(snowflake.Settings{Layout: l, WorkerID: 2, MaxBorrow: borrow, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	m := leafmetrics.New()
	srv := httptest.NewServer(leafhttp.New(leafhttp.Config{Snowflake: g, Metrics: m, Logger: quiet}).Handler())
	t.Cleanup(srv.Close)
	ids, err := g.NextN(context.Background(), 2000, nil)
	if err != nil {
		t.Fatal(err)
	}
	top := l.Decode(ids[len(ids)-1]).UnixMs
	st, body := getState(t, srv.URL)
	sf := st.Snowflake
	if sf == nil || sf.MaxBorrowMs == nil || *sf.MaxBorrowMs != 50 || *sf.BorrowedMs < 1 || *sf.MaxLeadMs < 1 || *sf.MaxLeadMs > 50 ||
		*sf.LeadMs < 0 || *sf.LeadMs > 50 || sf.LastMs != top {
		t.Fatalf("after a burst of 2000 IDs at 16 a millisecond with max_borrow 50ms: %s", body)
	}
	sc := getMetrics(t, srv.URL)
	if v := sc.value(t, "leafd_snowflake_borrowed_seconds_total"); v < float64(*sf.BorrowedMs)/1000 {
		t.Errorf("leafd_snowflake_borrowed_seconds_total %v, below the state's %d ms", v, *sf.BorrowedMs)
	}
	if v := sc.value(t, "leafd_snowflake_borrow_max_lead_seconds"); v != float64(*sf.MaxLeadMs)/1000 {
		t.Errorf("leafd_snowflake_borrow_max_lead_seconds %v, want %d ms", v, *sf.MaxLeadMs)
	}
	if v := sc.value(t, "leafd_snowflake_borrow_lead_seconds"); v < 0 || v > 0.05 {
		t.Errorf("leafd_snowflake_borrow_lead_seconds %v, want 0..0.05", v)
	}
}

// With snowflake.workers 3, a batch larger than a millisecond's sequence
// comes from several worker ids and still ascending; /api/state lists the
// three worker ids held and /metrics counts them; the counters add up.
func TestStateSnowflakeWorkers(t *testing.T) {
	t.Parallel()
	s := openDefault(t)
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	// 16 IDs a millisecond: a batch of 1000 outruns one worker id at once.
	l := snowflake.Layout{Epoch: snowflake.DefaultEpoch, TimeBits: 49, WorkerBits: 10, SequenceBits: 4}
	p, err := snowflake.NewPool(snowflake.Settings{Layout: l, Leases: s, Logger: quiet}, 3)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	srv := httptest.NewServer(leafhttp.New(leafhttp.Config{Snowflake: p, Metrics: leafmetrics.New(), Logger: quiet}).Handler())
	t.Cleanup(srv.Close)
	deadline := time.Now().Add(10 * time.Second)
	for len(p.State().WorkerIDs) < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("10 s after start the pool holds %v, want 3 worker ids", p.State().WorkerIDs)
		}
		time.Sleep(5 * time.Millisecond)
	}
	seen := map[int64]bool{}
	workers := map[int64]bool{}
	for range 5 {
		r := do(t, "GET", srv.URL+"/snowflake?count=1000")
		if r.status != 200 {
			t.Fatalf("GET /snowflake?count=1000 = %d: %s", r.status, r.body)
		}
		ids := parseIDs(t, r.body)
		if len(ids) != 1000 {
			t.Fatalf("%d IDs, want 1000", len(ids))
		}
		for i, id := range ids {
			if i > 0 && id <= ids[i-1] {
				t.Fatalf("batch not ascending at %d: %d after %d", i, id, ids[i-1])
			}
			if seen[id] {
				t.Fatalf("ID %d issued twice", id)
			}
			seen[id] = true
			workers[l.Decode(snowflake.ID(id)).WorkerID] = true
		}
	}
	st, body := getState(t, srv.URL)
	sf := st.Snowflake
	if sf == nil || len(sf.WorkerIDs) != 3 || sf.WorkerID == nil || *sf.WorkerID != sf.WorkerIDs[0] ||
		sf.WorkerIDs[0] >= sf.WorkerIDs[1] || sf.WorkerIDs[1] >= sf.WorkerIDs[2] || sf.Issued != 5000 || sf.WorkerSource != "lease" {
		t.Fatalf("after 5000 IDs under three worker ids: %s", body)
	}
	for w := range workers {
		if !slices.Contains(sf.WorkerIDs, w) {
			t.Fatalf("an ID under worker id %d, not one of %v", w, sf.WorkerIDs)
		}
	}
	if len(workers) != 3 {
		t.Fatalf("5 batches of 1000 at 16 IDs a millisecond came from worker ids %v, want all three of %v", workers, sf.WorkerIDs)
	}
	if v := getMetrics(t, srv.URL).value(t, "leafd_snowflake_workers"); v != 3 {
		t.Errorf("leafd_snowflake_workers %v, want 3", v)
	}
}
