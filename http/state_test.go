package http_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/leafd/leafd"
	leafhttp "github.com/leafd/leafd/http"
	"github.com/leafd/leafd/internal/faultproxy"
	"github.com/leafd/leafd/internal/testdb"
	"github.com/leafd/leafd/segment"
	"github.com/leafd/leafd/snowflake"
	"github.com/leafd/leafd/store"
)

// dashStore is what the dashboard tests need of store.SQLite and
// store.MySQL.
type dashStore interface {
	segment.Store
	snowflake.LeaseStore
	leafhttp.Store
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
	url   string
	store dashStore
	held  *heldStore
	alloc *segment.Allocator
	gen   *snowflake.Generator
}

// newDashServer serves tags from s, with cfg completed by quiet logging and
// the metrics' load hook, and a snowflake generator that leases its worker
// id from s. It returns once the lease is held.
func newDashServer(tb testing.TB, s dashStore, cfg segment.Config, tags ...leafd.Tag) *dashServer {
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
	metrics := leafhttp.NewMetrics()
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
	g, err := snowflake.New(snowflake.Settings{Leases: s, Logger: quiet})
	if err != nil {
		tb.Fatal(err)
	}
	g.Start()
	srv := httptest.NewServer(leafhttp.New(leafhttp.Config{
		Segment: a, Snowflake: g, Store: s, Metrics: metrics, Logger: quiet,
	}).Handler())
	tb.Cleanup(func() {
		srv.Close()
		close(held.release)
		a.Close()
		g.Close()
	})
	deadline := time.Now().Add(5 * time.Second)
	for g.Ready() != nil {
		if time.Now().After(deadline) {
			tb.Fatalf("no worker id leased within 5s: %v", g.Ready())
		}
		time.Sleep(5 * time.Millisecond)
	}
	return &dashServer{url: srv.URL, store: s, held: held, alloc: a, gen: g}
}

func openSQLite(tb testing.TB) *store.SQLite {
	tb.Helper()
	s, err := store.OpenSQLite(testdb.SQLite(tb))
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
	} `json:"store"`
	Segment *struct {
		Tags        []apiTag `json:"tags"`
		RefillMinMs int64    `json:"refill_min_ms"`
		RefillMaxMs int64    `json:"refill_max_ms"`
	} `json:"segment"`
	Snowflake *struct {
		WorkerID       *int64  `json:"worker_id"`
		WorkerSource   string  `json:"worker_source"`
		LeaseUntil     *string `json:"lease_until"`
		LastMs         int64   `json:"last_ms"`
		BackwardEvents int64   `json:"backward_events"`
		Issued         int64   `json:"issued"`
		Renewals       int64   `json:"renewals"`
		Error          string  `json:"error"`
	} `json:"snowflake"`
	Time string `json:"time"`
}

type apiTag struct {
	Tag          string      `json:"tag"`
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
}

type apiBuffer struct {
	Start   int64 `json:"start"`
	End     int64 `json:"end"`
	Next    int64 `json:"next"`
	Ready   bool  `json:"ready"`
	Loading bool  `json:"loading"`
	Size    int64 `json:"size"`
	Used    int64 `json:"used"`
}

func getState(tb testing.TB, url string) (apiState, string) {
	tb.Helper()
	r := do(tb, "GET", url+"/api/state")
	if r.status != 200 || !strings.HasPrefix(r.contentType, "application/json") {
		tb.Fatalf("GET /api/state = %d %q %s", r.status, r.contentType, r.body)
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
	d := newDashServer(t, openSQLite(t), segment.Config{
		MaxStep: 10, RefillMin: time.Minute, RefillMax: 2 * time.Minute, WaitTimeout: time.Second,
	}, leafd.Tag{Name: "order", MaxID: 1, Step: 10}, leafd.Tag{Name: "idle", MaxID: 1, Step: 100})
	started := time.Now().Add(-time.Second)

	t.Run("BeforeAnyRequest", func(t *testing.T) {
		st, body := getState(t, d.url)
		if st.Store == nil || st.Store.Driver != "sqlite" || !st.Store.OK || st.Store.Error != "" {
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

	t.Run("ShapeOfSPEC", func(t *testing.T) {
		// SPEC section 5: start, end and next are JSON numbers; no field of
		// the example is missing.
		_, body := getState(t, d.url)
		for _, want := range []string{`"store":{"driver":"sqlite","ok":true`, `"buffers":[{"start":0,"end":0,"next":0,"ready":false,"loading":false,"size":0,"used":0},{"start":11,"end":21,"next":12,"ready":true`,
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
	s := openSQLite(t)
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
	leafhttp.Store
	pings atomic.Int64
}

func (c *countingStore) Ping(ctx context.Context) error {
	c.pings.Add(1)
	return c.Store.Ping(ctx)
}

// However many dashboards poll, the store is pinged at most once a second.
func TestStorePingCached(t *testing.T) {
	t.Parallel()
	s := openSQLite(t)
	counted := &countingStore{Store: s}
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
	s := openSQLite(t)
	d := newDashServer(t, s, segment.Config{WaitTimeout: 100 * time.Millisecond},
		leafd.Tag{Name: "order", MaxID: 1, Step: 10})
	s.Close() // before the first ping: nothing cached yet
	if r := do(t, "GET", d.url+"/segment/order"); r.status != 503 || errorCode(t, r) != leafd.ESegmentUnavailable {
		t.Fatalf("with the store closed: %d %s", r.status, r.body)
	}
	st, body := getState(t, d.url)
	if st.Store.OK || !strings.Contains(st.Store.Error, "closed") || st.Store.Driver != "sqlite" {
		t.Fatalf("store: %s", body)
	}
	o := st.tag(t, "order")
	if o.Errors != 1 || o.LoadErrors < 1 || o.Error == "" || o.Buffers[0].Ready || o.Buffers[1].Ready {
		t.Fatalf("tag with the store down: %+v", o)
	}
}

// On MariaDB, an outage through a proxy shows in the state within a second
// or two, and so does the recovery.
func TestStateMySQLOutage(t *testing.T) {
	t.Parallel()
	cfg, err := mysql.ParseDSN(testdb.MySQL(t))
	if err != nil {
		t.Fatal(err)
	}
	proxy := faultproxy.New(t, cfg.Addr)
	cfg.Addr = proxy.Addr()
	cfg.Timeout = 500 * time.Millisecond
	s, err := store.OpenMySQL(cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	d := newDashServer(t, s, segment.Config{WaitTimeout: 200 * time.Millisecond},
		leafd.Tag{Name: "order", MaxID: 1, Step: 100})
	if r := do(t, "GET", d.url+"/segment/order?count=5"); r.status != 200 {
		t.Fatalf("GET: %d %s", r.status, r.body)
	}
	st, body := getState(t, d.url)
	if st.Store.Driver != "mysql" || !st.Store.OK {
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
// and IDs keep flowing through it.
func TestStateMySQLFallback(t *testing.T) {
	t.Parallel()
	dsn := testdb.MySQL(t)
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	var proxies []*faultproxy.Proxy
	var dsns []string
	for range 2 {
		p := faultproxy.New(t, cfg.Addr)
		c := cfg.Clone()
		c.Addr = p.Addr()
		proxies, dsns = append(proxies, p), append(dsns, c.FormatDSN())
	}
	s, err := store.OpenMySQL(dsns[0], store.WithFallbacks(dsns[1]), store.WithLogger(quiet))
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
