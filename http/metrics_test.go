package http_test

import (
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/segment"
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

func TestMetrics(t *testing.T) {
	t.Parallel()
	d := newDashServer(t, openSQLite(t), segment.Config{MaxStep: 10, WaitTimeout: time.Second},
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

	t.Run("IDsIssued", func(t *testing.T) {
		if v := m.value(t, "leafd_ids_issued_total", "mode", "segment", "tag", "order"); v != 6 {
			t.Errorf("segment order issued %v, want 6", v)
		}
		if v := m.value(t, "leafd_ids_issued_total", "mode", "segment", "tag", "idle"); v != 0 {
			t.Errorf("segment idle issued %v, want 0", v)
		}
		if v := m.value(t, "leafd_ids_issued_total", "mode", "snowflake"); v != 3 {
			t.Errorf("snowflake issued %v, want 3", v)
		}
	})

	t.Run("RangeLoads", func(t *testing.T) {
		if v := m.value(t, "leafd_segment_range_loads_total", "tag", "order"); v != 2 {
			t.Errorf("loads %v, want 2", v)
		}
		if v := m.value(t, "leafd_segment_range_load_duration_seconds", "tag", "order", "result", "ok"); v != 2 {
			t.Errorf("load latency observations %v, want 2", v)
		}
		if v := m.value(t, "leafd_segment_range_load_errors_total", "tag", "order"); v != 0 {
			t.Errorf("load errors %v, want 0", v)
		}
		if v := m.value(t, "leafd_segment_waits_total", "tag", "order"); v != 1 {
			t.Errorf("waits %v, want 1 (the first request)", v)
		}
	})

	t.Run("Buffers", func(t *testing.T) {
		// 6 of the first range [1, 11) taken; the next one, [11, 21), full.
		if v := m.value(t, "leafd_segment_buffer_remaining", "tag", "order", "buffer", "current"); v != 4 {
			t.Errorf("current buffer remaining %v, want 4", v)
		}
		if v := m.value(t, "leafd_segment_buffer_remaining", "tag", "order", "buffer", "next"); v != 10 {
			t.Errorf("next buffer remaining %v, want 10", v)
		}
		if v := m.value(t, "leafd_segment_step", "tag", "order"); v != 10 {
			t.Errorf("step %v, want 10", v)
		}
		if v := m.value(t, "leafd_segment_table_step", "tag", "idle"); v != 100 {
			t.Errorf("table step of idle %v, want 100", v)
		}
		if v := m.value(t, "leafd_segment_loading", "tag", "order"); v != 0 {
			t.Errorf("loading %v, want 0", v)
		}
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
		if v := m.value(t, "leafd_snowflake_clock_backward_events_total"); v != 0 {
			t.Errorf("backward events %v", v)
		}
		m.value(t, "leafd_snowflake_lease_renewals_total")
		if v := m.value(t, "leafd_snowflake_lease_expiry_timestamp_seconds"); v < float64(time.Now().Unix()) {
			t.Errorf("lease expiry %v is in the past", v)
		}
		if v := m.value(t, "leafd_snowflake_last_timestamp_seconds"); v < float64(time.Now().Add(-time.Minute).Unix()) {
			t.Errorf("last timestamp %v is not recent", v)
		}
		if v := m.value(t, "leafd_store_up", "driver", "sqlite"); v != 1 {
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
		sort.Strings(ours)
		if len(ours) != 19 {
			t.Errorf("%d leafd_ metrics, want the 19 of the README: %v", len(ours), ours)
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

// Range loads that fail show in the metrics: the latency of the failed
// attempts, the failures, the failed request and the store's health.
func TestMetricsStoreDown(t *testing.T) {
	t.Parallel()
	s := openSQLite(t)
	d := newDashServer(t, s, segment.Config{WaitTimeout: 100 * time.Millisecond},
		leafd.Tag{Name: "order", MaxID: 1, Step: 10})
	s.Close()
	if r := do(t, "GET", d.url+"/segment/order"); r.status != 503 {
		t.Fatalf("with the store closed: %d %s", r.status, r.body)
	}
	m := getMetrics(t, d.url)
	if v := m.value(t, "leafd_store_up", "driver", "sqlite"); v != 0 {
		t.Errorf("store up %v, want 0", v)
	}
	if v := m.value(t, "leafd_segment_range_load_duration_seconds", "tag", "order", "result", "error"); v < 1 {
		t.Errorf("failed load observations %v, want at least 1", v)
	}
	if v := m.value(t, "leafd_segment_range_load_errors_total", "tag", "order"); v < 1 {
		t.Errorf("load errors %v, want at least 1", v)
	}
	if v := m.value(t, "leafd_segment_request_errors_total", "tag", "order"); v != 1 {
		t.Errorf("request errors %v, want 1", v)
	}
	if v := m.value(t, "leafd_errors_total", "code", leafd.ESegmentUnavailable, "route", "/segment/:tag"); v != 1 {
		t.Errorf("segment_unavailable errors %v, want 1", v)
	}
}
