package http_test

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leafd/leafd/internal/testkit/testenv"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/leafd/leafd"
	leafhttp "github.com/leafd/leafd/http"
	leafmetrics "github.com/leafd/leafd/metrics"
	"github.com/leafd/leafd/segment"
	"github.com/leafd/leafd/store"
)

// scrape is one parsed GET /metrics.
type scrape struct {
	raw      string
	families map[string]*dto.MetricFamily
}

func getMetrics(tb testing.TB, url string) scrape {
	tb.Helper()
	r := do(tb, "GET", url+"/metrics")
	if r.status != 200 || !strings.HasPrefix(r.contentType, "text/plain") {
		tb.Fatalf("GET /metrics = %d %q", r.status, r.contentType)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(r.body))
	if err != nil {
		tb.Fatalf("/metrics does not parse: %v", err)
	}
	return scrape{raw: r.body, families: fams}
}

// value returns the value of the series of name with exactly the given
// labels (name=value pairs), failing the test if there is none. For a
// histogram it returns the sample count.
func (s scrape) value(tb testing.TB, name string, labels ...string) float64 {
	tb.Helper()
	v, ok := s.lookup(name, labels...)
	if !ok {
		tb.Fatalf("no series %s%v in /metrics:\n%s", name, labels, s.raw)
	}
	return v
}

func (s scrape) lookup(name string, labels ...string) (float64, bool) {
	fam := s.families[name]
	if fam == nil {
		return 0, false
	}
	want := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
	for _, m := range fam.Metric {
		got := map[string]string{}
		for _, l := range m.Label {
			if l.GetValue() != "" {
				got[l.GetName()] = l.GetValue()
			}
		}
		if len(got) != len(want) {
			continue
		}
		match := true
		for k, v := range want {
			if got[k] != v {
				match = false
			}
		}
		if !match {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

// metricsServer is a live leafd, segment and snowflake mode over one real
// SQLite store, whose /metrics is m.
type metricsServer struct {
	url     string
	handler http.Handler
	alloc   *segment.Allocator
}

// newMetricsServer serves tags from s with the registry m (see
// newDashServer), and returns once its snowflake lease is held.
func newMetricsServer(tb testing.TB, m *leafmetrics.Registry, s store.Store, cfg segment.Config, tags ...leafd.Tag) *metricsServer {
	tb.Helper()
	d := newDashServerWith(tb, m, s, cfg, tags...)
	return &metricsServer{url: d.url, handler: d.handler, alloc: d.alloc}
}

func mustMetrics(tb testing.TB, perTag leafmetrics.PerTag) *leafmetrics.Registry {
	tb.Helper()
	m, err := leafmetrics.NewWith(leafmetrics.Options{PerTag: perTag})
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

// The leafd_ metrics of each per_tag mode, with SQLite and snowflake on.
var (
	metricsEveryMode = []string{
		"leafd_ids_issued_total", // snowflake's in every mode
		"leafd_segment_range_load_duration_seconds",
		"leafd_segment_all_ids_issued_total", "leafd_segment_all_range_loads_total",
		"leafd_segment_all_range_load_errors_total", "leafd_segment_all_waits_total",
		"leafd_segment_all_request_errors_total", "leafd_segment_tags", "leafd_segment_rewound_total",
		"leafd_snowflake_clock_backward_events_total", "leafd_snowflake_lease_renewals_total",
		"leafd_snowflake_worker_id", "leafd_snowflake_workers", "leafd_snowflake_lease_expiry_timestamp_seconds",
		"leafd_snowflake_last_timestamp_seconds", "leafd_snowflake_borrowed_seconds_total",
		"leafd_snowflake_borrow_lead_seconds", "leafd_snowflake_borrow_max_lead_seconds", "leafd_store_up",
		"leafd_http_requests_total", "leafd_http_request_duration_seconds", "leafd_errors_total",
	}
	metricsBasic = []string{
		"leafd_segment_request_errors_total", "leafd_segment_waits_total",
		"leafd_segment_buffer_remaining", "leafd_segment_load_failing",
	}
	metricsFull = []string{
		"leafd_segment_range_loads_total", "leafd_segment_range_load_errors_total",
		"leafd_segment_step", "leafd_segment_table_step", "leafd_segment_loading",
		"leafd_segment_last_period_seconds", "leafd_segment_tag_range_load_duration_seconds",
	}
)

func TestMetrics(t *testing.T) {
	t.Parallel()
	for _, mode := range []leafmetrics.PerTag{"", leafmetrics.PerTagBasic, leafmetrics.PerTagFull, leafmetrics.PerTagOff} {
		name := string(mode)
		if mode == "" {
			name = "Default"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			metrics := leafmetrics.New()
			if mode != "" {
				metrics = mustMetrics(t, mode)
			}
			testMetrics(t, metrics, cmp.Or(mode, leafmetrics.PerTagBasic))
		})
	}
	t.Run("BadPerTag", func(t *testing.T) {
		if _, err := leafmetrics.NewWith(leafmetrics.Options{PerTag: "some"}); err == nil ||
			!strings.Contains(err.Error(), "use full, basic or off") {
			t.Fatalf("NewWith(some) = %v; want an error naming the accepted values", err)
		}
	})
}

func testMetrics(t *testing.T, metrics *leafmetrics.Registry, mode leafmetrics.PerTag) {
	if metrics.PerTag() != mode {
		t.Fatalf("PerTag() = %q, want %q", metrics.PerTag(), mode)
	}
	d := newMetricsServer(t, metrics, openDefault(t), segment.Config{MaxStep: 10, WaitTimeout: time.Second},
		leafd.Tag{Name: "order", MaxID: 1, Step: 10}, leafd.Tag{Name: "idle", MaxID: 1, Step: 100})
	for _, req := range []struct {
		path   string
		status int
	}{
		{"/segment/order?count=4", 200},
		{"/segment/order", 200},
		{"/api/segment/get/order", 200},
		{"/snowflake?count=3", 200},
		{"/segment/nope", 404},          // unknown_tag
		{"/segment/order?count=0", 400}, // invalid_count
		{"/api/segment/get/nope", 500},  // unknown_tag, Leaf's way
		{"/no/such/route", 404},         // not_found
	} {
		if r := do(t, "GET", d.url+req.path); r.status != req.status {
			t.Fatalf("GET %s = %d, want %d: %s", req.path, r.status, req.status, r.body)
		}
	}
	if r := do(t, "BREW", d.url+"/segment/order"); r.status != http.StatusMethodNotAllowed {
		t.Fatalf("BREW = %d", r.status)
	}
	// Wait for the preload that the first batch started, so that the
	// numbers below are settled.
	eventuallyState(t, d.url, "next range loaded", func(st apiState) bool {
		o := st.tag(t, "order")
		return o.Loads == 2 && !o.Loading
	})
	m := getMetrics(t, d.url)
	full, off := mode == leafmetrics.PerTagFull, mode == leafmetrics.PerTagOff

	// absent fails the test if a series of name with the labels exists.
	absent := func(t *testing.T, name string, labels ...string) {
		t.Helper()
		if v, ok := m.lookup(name, labels...); ok {
			t.Errorf("%s%v = %v in per_tag %s mode, want no series", name, labels, v, mode)
		}
	}
	// perTag checks a per-tag series: want when the mode has it, absent
	// otherwise.
	perTag := func(t *testing.T, inMode bool, want float64, name string, labels ...string) {
		t.Helper()
		if !inMode {
			absent(t, name, labels...)
		} else if v := m.value(t, name, labels...); v != want {
			t.Errorf("%s%v = %v, want %v", name, labels, v, want)
		}
	}

	t.Run("IDsIssued", func(t *testing.T) {
		perTag(t, !off, 6, "leafd_ids_issued_total", "mode", "segment", "tag", "order")
		// Never asked for: nothing in basic mode, everything in full.
		perTag(t, full, 0, "leafd_ids_issued_total", "mode", "segment", "tag", "idle")
		if v := m.value(t, "leafd_segment_all_ids_issued_total"); v != 6 {
			t.Errorf("segment issued, all tags: %v, want 6", v)
		}
		if v := m.value(t, "leafd_ids_issued_total", "mode", "snowflake"); v != 3 {
			t.Errorf("snowflake issued %v, want 3", v)
		}
	})

	t.Run("RangeLoads", func(t *testing.T) {
		perTag(t, full, 2, "leafd_segment_range_loads_total", "tag", "order")
		perTag(t, full, 2, "leafd_segment_tag_range_load_duration_seconds", "tag", "order", "result", "ok")
		perTag(t, full, 0, "leafd_segment_range_load_errors_total", "tag", "order")
		perTag(t, !off, 1, "leafd_segment_waits_total", "tag", "order") // the first request
		perTag(t, !off, 0, "leafd_segment_load_failing", "tag", "order")
		for _, c := range []struct {
			name string
			want float64
		}{
			{"leafd_segment_all_range_loads_total", 2},
			{"leafd_segment_all_range_load_errors_total", 0},
			{"leafd_segment_all_waits_total", 1},
			{"leafd_segment_all_request_errors_total", 0},
		} {
			if v := m.value(t, c.name); v != c.want {
				t.Errorf("%s = %v, want %v", c.name, v, c.want)
			}
		}
		if v := m.value(t, "leafd_segment_range_load_duration_seconds", "result", "ok"); v != 2 {
			t.Errorf("load latency observations %v, want 2", v)
		}
		if v := m.value(t, "leafd_segment_range_load_duration_seconds", "result", "error"); v != 0 {
			t.Errorf("failed load observations %v, want 0", v)
		}
	})

	t.Run("Buffers", func(t *testing.T) {
		// 6 of the first range [1, 11) taken; the next one, [11, 21), full.
		perTag(t, !off, 4, "leafd_segment_buffer_remaining", "tag", "order", "buffer", "current")
		perTag(t, full, 10, "leafd_segment_buffer_remaining", "tag", "order", "buffer", "next")
		perTag(t, full, 10, "leafd_segment_step", "tag", "order")
		perTag(t, full, 100, "leafd_segment_table_step", "tag", "idle")
		perTag(t, full, 0, "leafd_segment_loading", "tag", "order")
	})

	t.Run("TagsByStatus", func(t *testing.T) {
		for status, want := range map[string]float64{"serving": 1, "idle": 1, "failing": 0, "waiting": 0, "loading": 0} {
			if v := m.value(t, "leafd_segment_tags", "status", status); v != want {
				t.Errorf("tags %s: %v, want %v", status, v, want)
			}
		}
	})

	t.Run("PerTagSeries", func(t *testing.T) {
		n := map[string]int{}
		for _, fam := range m.families {
			for _, s := range fam.Metric {
				for _, l := range s.Label {
					if l.GetName() == "tag" && l.GetValue() != "" {
						n[l.GetValue()] += seriesOf(s)
					}
				}
			}
		}
		switch mode {
		case leafmetrics.PerTagBasic:
			if n["order"] > 6 || n["order"] < 5 || n["idle"] != 0 {
				t.Errorf("series per tag %v: want 5 or 6 for order, none for idle", n)
			}
		case leafmetrics.PerTagOff:
			if len(n) != 0 {
				t.Errorf("series per tag %v: want none", n)
			}
		case leafmetrics.PerTagFull:
			if n["order"] < 12+16 || n["idle"] < 12 {
				t.Errorf("series per tag %v: want every detail", n)
			}
		}
		t.Logf("per_tag %s: series per tag %v", mode, n)
	})

	t.Run("Errors", func(t *testing.T) {
		for _, c := range []struct{ code, route string }{
			{leafd.EUnknownTag, "/segment/:tag"},
			{leafd.EInvalidCount, "/segment/:tag"},
			{leafd.EUnknownTag, "/api/segment/get/:tag"},
			{leafd.ENotFound, "unmatched"},
			{leafd.EMethodNotAllowed, "unmatched"},
		} {
			if v := m.value(t, "leafd_errors_total", "code", c.code, "route", c.route); v != 1 {
				t.Errorf("errors %s on %s: %v, want 1", c.code, c.route, v)
			}
		}
	})

	t.Run("HTTPByRouteTemplate", func(t *testing.T) {
		for _, c := range []struct {
			route, method, status string
			want                  float64
		}{
			{"/segment/:tag", "GET", "200", 2},
			{"/segment/:tag", "GET", "404", 1},
			{"/segment/:tag", "GET", "400", 1},
			{"/api/segment/get/:tag", "GET", "200", 1},
			{"/api/segment/get/:tag", "GET", "500", 1},
			{"/snowflake", "GET", "200", 1},
			{"unmatched", "GET", "404", 1},
			{"unmatched", "other", "405", 1},
		} {
			if v := m.value(t, "leafd_http_requests_total", "route", c.route, "method", c.method, "status", c.status); v != c.want {
				t.Errorf("requests %s %s %s: %v, want %v", c.method, c.route, c.status, v, c.want)
			}
		}
		// The latency histogram counts the same requests, without status.
		for _, c := range []struct {
			route, method string
			want          float64
		}{
			{"/segment/:tag", "GET", 4},
			{"/api/segment/get/:tag", "GET", 2},
			{"/snowflake", "GET", 1},
			{"unmatched", "GET", 1},
			{"unmatched", "other", 1},
		} {
			if v := m.value(t, "leafd_http_request_duration_seconds", "route", c.route, "method", c.method); v != c.want {
				t.Errorf("latency observations %s %s: %v, want %v", c.method, c.route, v, c.want)
			}
		}
		// Raw paths never become labels: a flood of made-up tags must not
		// make a flood of series.
		for _, raw := range []string{"/segment/nope", "/no/such/route", "/segment/order", "BREW"} {
			if strings.Contains(m.raw, `"`+raw+`"`) {
				t.Errorf("/metrics has the raw label value %q", raw)
			}
		}
	})

	t.Run("SnowflakeAndStore", func(t *testing.T) {
		if v := m.value(t, "leafd_snowflake_worker_id", "source", "lease"); v != 0 {
			t.Errorf("worker id %v, want 0", v)
		}
		if v := m.value(t, "leafd_snowflake_workers"); v != 2 {
			t.Errorf("worker ids held %v, want 2", v)
		}
		if v := m.value(t, "leafd_snowflake_clock_backward_events_total"); v != 0 {
			t.Errorf("backward events %v", v)
		}
		m.value(t, "leafd_snowflake_lease_renewals_total")
		// snowflake.max_borrow is off here: nothing borrowed, no lead.
		for _, name := range []string{"leafd_snowflake_borrowed_seconds_total", "leafd_snowflake_borrow_lead_seconds", "leafd_snowflake_borrow_max_lead_seconds"} {
			if v := m.value(t, name); v != 0 {
				t.Errorf("%s = %v with borrowing off", name, v)
			}
		}
		if v := m.value(t, "leafd_snowflake_lease_expiry_timestamp_seconds"); v < float64(time.Now().Unix()) {
			t.Errorf("lease expiry %v is in the past", v)
		}
		if v := m.value(t, "leafd_snowflake_last_timestamp_seconds"); v < float64(time.Now().Add(-time.Minute).Unix()) {
			t.Errorf("last timestamp %v is not recent", v)
		}
		if v := m.value(t, "leafd_store_up", "driver", store.DefaultDriver()); v != 1 {
			t.Errorf("store up %v, want 1", v)
		}
	})

	t.Run("NamesAndLint", func(t *testing.T) {
		var ours []string
		for name := range m.families {
			if strings.HasPrefix(name, "leafd_") {
				ours = append(ours, name)
			} else if !strings.HasPrefix(name, "go_") && !strings.HasPrefix(name, "process_") && !strings.HasPrefix(name, "promhttp_") {
				t.Errorf("metric %s is neither leafd_ nor the standard go_/process_ ones", name)
			}
		}
		want := slices.Clone(metricsEveryMode)
		if !off {
			want = append(want, metricsBasic...)
		}
		if full {
			want = append(want, metricsFull...)
		}
		slices.Sort(ours)
		slices.Sort(want)
		if !slices.Equal(ours, want) {
			t.Errorf("leafd_ metrics of per_tag %s:\n got %v\nwant %v", mode, ours, want)
		}
		problems, err := promlint.New(strings.NewReader(m.raw)).Lint()
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range problems {
			if strings.HasPrefix(p.Metric, "leafd_") {
				t.Errorf("promlint: %s: %s", p.Metric, p.Text)
			}
		}
	})
}

// seriesOf counts the series a sample of /metrics stands for: one for a
// counter or gauge, every bucket, +Inf, _sum and _count for a histogram.
func seriesOf(m *dto.Metric) int {
	if h := m.GetHistogram(); h != nil {
		n := len(h.GetBucket()) + 2
		if len(h.GetBucket()) == 0 || !math.IsInf(h.GetBucket()[len(h.GetBucket())-1].GetUpperBound(), 1) {
			n++ // the +Inf bucket, implied
		}
		return n
	}
	return 1
}

// Range loads that fail show in the metrics: the latency of the failed
// attempts, the failures, the failed request and the store's health.
func TestMetricsStoreDown(t *testing.T) {
	t.Parallel()
	s := openDefault(t)
	d := newDashServer(t, s, segment.Config{WaitTimeout: 100 * time.Millisecond},
		leafd.Tag{Name: "order", MaxID: 1, Step: 10})
	s.Close()
	if r := do(t, "GET", d.url+"/segment/order"); r.status != 503 {
		t.Fatalf("with the store closed: %d %s", r.status, r.body)
	}
	m := getMetrics(t, d.url)
	if v := m.value(t, "leafd_store_up", "driver", store.DefaultDriver()); v != 0 {
		t.Errorf("store up %v, want 0", v)
	}
	if v := m.value(t, "leafd_segment_range_load_duration_seconds", "result", "error"); v < 1 {
		t.Errorf("failed load observations %v, want at least 1", v)
	}
	if v := m.value(t, "leafd_segment_all_range_load_errors_total"); v < 1 {
		t.Errorf("load errors %v, want at least 1", v)
	}
	if v := m.value(t, "leafd_segment_load_failing", "tag", "order"); v != 1 {
		t.Errorf("load failing %v, want 1", v)
	}
	if v := m.value(t, "leafd_segment_tags", "status", "failing"); v != 1 {
		t.Errorf("failing tags %v, want 1", v)
	}
	if v := m.value(t, "leafd_segment_request_errors_total", "tag", "order"); v != 1 {
		t.Errorf("request errors %v, want 1", v)
	}
	if v := m.value(t, "leafd_segment_all_request_errors_total"); v != 1 {
		t.Errorf("request errors of all tags %v, want 1", v)
	}
	if v := m.value(t, "leafd_errors_total", "code", leafd.ESegmentUnavailable, "route", "/segment/:tag"); v != 1 {
		t.Errorf("segment_unavailable errors %v, want 1", v)
	}
}

// The cost of each per_tag mode at scale: 10,000 tags of which 2,000 were
// asked for, one real allocator over a real SQLite store, served by three
// servers whose registries differ only in metrics.per_tag. It asserts the
// bounds that docs/metrics.md promises and logs the series and bytes of one
// scrape of each (go test -run TestMetricsScale -v ./http/).
func TestMetricsScale(t *testing.T) {
	const tags, inUse = 10_000, 2_000
	testenv.Slow(t) // creates 10,000 tags
	t.Parallel()
	ctx := context.Background()
	s := openDefault(t)
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	name := func(i int) string { return fmt.Sprintf("tag%05d", i) }
	for i := range tags {
		if _, err := s.CreateTag(ctx, leafd.Tag{Name: name(i), MaxID: 1, Step: 1000}); err != nil {
			t.Fatal(err)
		}
	}
	modes := []leafmetrics.PerTag{leafmetrics.PerTagBasic, leafmetrics.PerTagFull, leafmetrics.PerTagOff}
	registries := make([]*leafmetrics.Registry, len(modes))
	for i, mode := range modes {
		registries[i] = mustMetrics(t, mode)
	}
	a, err := segment.New(s, segment.Config{Logger: quiet, WaitTimeout: 10 * time.Second,
		OnLoad: func(tag string, step int64, took time.Duration, err error) {
			for _, m := range registries {
				m.ObserveLoad(tag, step, took, err)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	if err := a.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	a.Start()
	handlers := make([]http.Handler, len(modes))
	for i, m := range registries {
		handlers[i] = leafhttp.New(leafhttp.Config{Segment: a, Store: s, Metrics: m, Logger: quiet}).Handler()
	}

	// Ask for the tags in use, a few clients at a time.
	var (
		wg      sync.WaitGroup
		clients = make(chan struct{}, 8)
		failed  = make(chan string, inUse)
	)
	for i := range inUse {
		wg.Go(func() {
			clients <- struct{}{}
			defer func() { <-clients }()
			w := httptest.NewRecorder()
			handlers[0].ServeHTTP(w, httptest.NewRequest("GET", "/segment/"+name(i), nil))
			if w.Code != 200 {
				failed <- fmt.Sprintf("GET /segment/%s = %d %s", name(i), w.Code, w.Body)
			}
		})
	}
	wg.Wait()
	close(failed)
	for f := range failed {
		t.Fatal(f)
	}

	for i, mode := range modes {
		w := httptest.NewRecorder()
		start := time.Now()
		handlers[i].ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
		took := time.Since(start)
		if w.Code != 200 {
			t.Fatalf("GET /metrics = %d", w.Code)
		}
		body := w.Body.Bytes()
		var gz bytes.Buffer
		zw := gzip.NewWriter(&gz)
		zw.Write(body)
		zw.Close()
		p := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
		if err != nil {
			t.Fatalf("per_tag %s: /metrics does not parse: %v", mode, err)
		}
		var total, server int
		perTag := map[string]int{}
		for _, fam := range fams {
			for _, m := range fam.Metric {
				n := seriesOf(m)
				total += n
				tag := ""
				for _, l := range m.Label {
					if l.GetName() == "tag" {
						tag = l.GetValue()
					}
				}
				if tag == "" {
					server += n
				} else {
					perTag[tag] += n
				}
			}
		}
		usedMin, usedMax, unusedMax := math.MaxInt, 0, 0
		for i := range tags {
			n := perTag[name(i)]
			if i < inUse {
				usedMin, usedMax = min(usedMin, n), max(usedMax, n)
			} else {
				unusedMax = max(unusedMax, n)
			}
		}
		t.Logf("per_tag %-5s: %6d series (%d server-wide, per tag in use %d..%d, per unused tag <= %d), %9d bytes (%d gzipped), scrape %v",
			mode, total, server, usedMin, usedMax, unusedMax, len(body), gz.Len(), took.Round(time.Millisecond))
		switch mode {
		case leafmetrics.PerTagBasic:
			if usedMin < 1 || usedMax > 6 || unusedMax != 0 {
				t.Errorf("basic: %d..%d series per tag in use (want 1..6), up to %d per unused tag (want 0)", usedMin, usedMax, unusedMax)
			}
		case leafmetrics.PerTagOff:
			if len(perTag) != 0 {
				t.Errorf("off: %d tags have series, want none", len(perTag))
			}
		case leafmetrics.PerTagFull:
			// 12 gauges and counters for every tag, and the 16 series of
			// the ok load latency histogram for each tag that loaded.
			if usedMin < 12+16 || unusedMax < 12 {
				t.Errorf("full: %d series per tag in use (want at least 28), %d per unused tag (want 12)", usedMin, unusedMax)
			}
		}
		if v := fams["leafd_segment_tags"]; v == nil {
			t.Errorf("per_tag %s: no leafd_segment_tags", mode)
		}
	}
}

// A dated tag exports how full its period is, in the default mode: the
// series an alert before the period fills reads.
func TestMetricsDatedPeriod(t *testing.T) {
	d := newMetricsServer(t, leafmetrics.New(), openDefault(t), segment.Config{WaitTimeout: time.Second},
		leafd.Tag{Name: "orders", MaxID: 1, Step: 10, Format: segment.FormatDated, Period: segment.PeriodDay, Digits: 2},
		leafd.Tag{Name: "order", MaxID: 1, Step: 10})
	for _, path := range []string{"/segment/orders?count=30", "/segment/order"} {
		if r := do(t, "GET", d.url+path); r.status != 200 {
			t.Fatalf("GET %s = %d: %s", path, r.status, r.body)
		}
	}
	var used int64
	eventuallyState(t, d.url, "the loads settled", func(st apiState) bool {
		o := st.tag(t, "orders")
		if o.PeriodUsed != nil {
			used = *o.PeriodUsed
		}
		return !o.Loading && used >= 30
	})
	m := getMetrics(t, d.url)
	if v := m.value(t, "leafd_segment_period_used_ratio", "tag", "orders"); v != float64(used)/99 {
		t.Errorf("period used ratio %v, want %d/99", v, used)
	}
	if v, ok := m.lookup("leafd_segment_period_used_ratio", "tag", "order"); ok {
		t.Errorf("a sequential tag exports a period used ratio (%v)", v)
	}
}

// An opaque tag exports how much of its domain is gone, in the default
// mode: the series an alert before the tag runs out reads. A sequential
// tag exports none.
func TestMetricsOpaqueDomain(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	d := newMetricsServer(t, leafmetrics.New(), openDefault(t), segment.Config{WaitTimeout: 5 * time.Second, OpaqueKey: key},
		leafd.Tag{Name: "user", MaxID: 900_001, Step: 1000, Format: segment.FormatOpaque, Digits: 6,
			KeyFingerprint: segment.KeyFingerprint(key, "user")},
		leafd.Tag{Name: "order", MaxID: 1, Step: 10})
	for _, path := range []string{"/segment/user?count=101", "/segment/order"} {
		if r := do(t, "GET", d.url+path); r.status != 200 {
			t.Fatalf("GET %s = %d: %s", path, r.status, r.body)
		}
	}
	var used int64
	eventuallyState(t, d.url, "the loads settled", func(st apiState) bool {
		u := st.tag(t, "user")
		if u.DomainUsed != nil {
			used = *u.DomainUsed
		}
		return !u.Loading && u.Loads == 2
	})
	if used < 900_101 {
		t.Fatalf("domain used %d, want at least 900,101", used)
	}
	m := getMetrics(t, d.url)
	if v := m.value(t, "leafd_segment_domain_used_ratio", "tag", "user"); v != float64(used)/999_999 {
		t.Errorf("domain used ratio %v, want %d/999999", v, used)
	}
	if v, ok := m.lookup("leafd_segment_domain_used_ratio", "tag", "order"); ok {
		t.Errorf("a sequential tag exports a domain used ratio (%v)", v)
	}
}
