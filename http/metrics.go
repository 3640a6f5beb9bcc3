package http

import (
	"context"
	"maps"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/segment"
)

// Metrics is the Prometheus registry that GET /metrics serves: a registry
// of its own, never the global one, so that servers (and tests) do not
// share counters.
//
// Almost everything is read from the allocators' State snapshots when
// /metrics is scraped, so that issuing an ID costs nothing more. Two things
// cannot be read afterwards and are counted as they happen: the latency of
// each range load (ObserveLoad, the segment.Config.OnLoad hook, called on
// the load goroutine) and each HTTP request with its route, status and error
// code (one counter increment per request).
//
// A Metrics serves one Server: New registers the Server's state on it, and
// panics if it is given a Metrics that already serves another.
type Metrics struct {
	reg      *prometheus.Registry
	loads    *prometheus.HistogramVec
	requests *prometheus.CounterVec
	errors   *prometheus.CounterVec
	handler  http.Handler

	// counters caches the request counter of each route, method and status
	// seen: an immutable map, replaced whole under countersMu when a new
	// combination appears, so that counting a request takes no lock and
	// allocates nothing.
	counters   atomic.Pointer[map[requestKey]prometheus.Counter]
	countersMu sync.Mutex
}

type requestKey struct {
	route, method string
	status        int
}

// NewMetrics returns a registry holding leafd's request and load metrics
// and the Go runtime and process collectors. Pass it to New in
// Config.Metrics, and its ObserveLoad to segment.Config.OnLoad.
func NewMetrics() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		loads: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "leafd_segment_range_load_duration_seconds",
			Help: "Time the store took to hand out one range, per attempt; result is ok or error.",
			// From a local SQLite file to a remote cluster that retries a
			// certification conflict, up to segment's 10 s load timeout.
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"tag", "result"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leafd_http_requests_total",
			Help: "HTTP requests answered, by route template, method and status.",
		}, []string{"route", "method", "status"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leafd_errors_total",
			Help: "Error answers, by error code (SPEC section 3) and route template.",
		}, []string{"code", "route"}),
	}
	m.reg.MustRegister(m.loads, m.requests, m.errors,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.handler = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
	m.counters.Store(&map[requestKey]prometheus.Counter{})
	return m
}

// ObserveLoad records one attempt to load a range of tag. Its signature is
// segment.Config.OnLoad's.
func (m *Metrics) ObserveLoad(tag string, _ int64, took time.Duration, err error) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.loads.WithLabelValues(tag, result).Observe(took.Seconds())
}

// ObserveLoad fits segment.Config.OnLoad.
var _ = segment.Config{OnLoad: (*Metrics)(nil).ObserveLoad}

// watch registers the state of s: segment tags, snowflake worker and store
// health, read at scrape time.
func (m *Metrics) watch(s *Server) {
	m.reg.MustRegister(&stateCollector{s: s})
}

// countRequests is the middleware that counts every request by route
// template (never the raw path: a flood of made-up tags must not make a
// flood of series), method and status, and every error answer by code.
func (m *Metrics) countRequests(c *gin.Context) {
	c.Next()
	route := c.FullPath()
	if route == "" {
		route = "unmatched"
	}
	m.requestCounter(requestKey{route, method(c.Request.Method), c.Writer.Status()}).Inc()
	if len(c.Errors) > 0 {
		m.errors.WithLabelValues(leafd.ErrorCode(c.Errors.Last().Err), route).Inc()
	}
}

func (m *Metrics) requestCounter(k requestKey) prometheus.Counter {
	if c, ok := (*m.counters.Load())[k]; ok {
		return c
	}
	m.countersMu.Lock()
	defer m.countersMu.Unlock()
	old := *m.counters.Load()
	if c, ok := old[k]; ok {
		return c
	}
	c := m.requests.WithLabelValues(k.route, k.method, strconv.Itoa(k.status))
	next := make(map[requestKey]prometheus.Counter, len(old)+1)
	maps.Copy(next, old)
	next[k] = c
	m.counters.Store(&next)
	return c
}

// method bounds the method label to the methods HTTP defines.
func method(m string) string {
	switch m {
	case "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE":
		return m
	}
	return "other"
}

// getMetrics answers GET /metrics in the Prometheus text format (or
// protobuf, as the scraper asks).
func (s *Server) getMetrics(c *gin.Context) {
	s.metrics.handler.ServeHTTP(c.Writer, c.Request)
}

// Descriptions of the metrics read from state at scrape time.
var (
	descIssued = prometheus.NewDesc("leafd_ids_issued_total",
		"IDs issued since the server started (segment: since the tag was first served), by mode and tag.",
		[]string{"mode", "tag"}, nil)
	descLoads = prometheus.NewDesc("leafd_segment_range_loads_total",
		"Ranges loaded from the store.", []string{"tag"}, nil)
	descLoadErrors = prometheus.NewDesc("leafd_segment_range_load_errors_total",
		"Failed attempts to load a range, each retry counted.", []string{"tag"}, nil)
	descWaits = prometheus.NewDesc("leafd_segment_waits_total",
		"Requests that found both buffers empty and had to wait for a range.", []string{"tag"}, nil)
	descTagErrors = prometheus.NewDesc("leafd_segment_request_errors_total",
		"Requests for the tag that failed: no range within segment.wait_timeout, tag exhausted.", []string{"tag"}, nil)
	descRemaining = prometheus.NewDesc("leafd_segment_buffer_remaining",
		"IDs left in a buffer; buffer is current or next.", []string{"tag", "buffer"}, nil)
	descStep = prometheus.NewDesc("leafd_segment_step",
		"Step of the last range this server loaded (its dynamic step).", []string{"tag"}, nil)
	descTableStep = prometheus.NewDesc("leafd_segment_table_step",
		"Step column of the table: the smallest step the server takes.", []string{"tag"}, nil)
	descLoading = prometheus.NewDesc("leafd_segment_loading",
		"1 while a range load is in flight.", []string{"tag"}, nil)
	descPeriod = prometheus.NewDesc("leafd_segment_last_period_seconds",
		"Time between the last two range loads: how long a range lasted.", []string{"tag"}, nil)
	descBackward = prometheus.NewDesc("leafd_snowflake_clock_backward_events_total",
		"Times the clock was found behind the last ID by more than snowflake.max_backward.", nil, nil)
	descRenewals = prometheus.NewDesc("leafd_snowflake_lease_renewals_total",
		"Successful renewals of the worker id lease.", nil, nil)
	descWorker = prometheus.NewDesc("leafd_snowflake_worker_id",
		"Worker id in use, -1 while none is held; source is lease or static.", []string{"source"}, nil)
	descLeaseUntil = prometheus.NewDesc("leafd_snowflake_lease_expiry_timestamp_seconds",
		"When the worker id lease runs out unless renewed (Unix time).", nil, nil)
	descLastMs = prometheus.NewDesc("leafd_snowflake_last_timestamp_seconds",
		"Time of the last snowflake ID issued (Unix time).", nil, nil)
	descStoreUp = prometheus.NewDesc("leafd_store_up",
		"1 when the store answered its last ping (pinged at most once a second), else 0.", []string{"driver"}, nil)
	descStoreAddress = prometheus.NewDesc("leafd_store_address_index",
		"Which database address is in use: 0 is store.dsn, 1 and up store.fallback_dsns (MySQL only).", []string{"address"}, nil)
	descStoreSwitches = prometheus.NewDesc("leafd_store_address_switches_total",
		"Moves from one database address of the cluster to another (MySQL only).", nil, nil)
)

// stateCollector reads the Server's state when /metrics is scraped.
type stateCollector struct{ s *Server }

// Describe sends every description, whether or not the mode is on.
func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descIssued, descLoads, descLoadErrors, descWaits, descTagErrors,
		descRemaining, descStep, descTableStep, descLoading, descPeriod, descBackward, descRenewals,
		descWorker, descLeaseUntil, descLastMs, descStoreUp, descStoreAddress, descStoreSwitches} {
		ch <- d
	}
}

// Collect reads the snapshots once per scrape.
func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	if st, ok := c.s.seg.(segmentStater); ok {
		for _, t := range st.State() {
			counter(descIssued, t.Issued, "segment", t.Tag)
			counter(descLoads, t.Loads, t.Tag)
			counter(descLoadErrors, t.LoadErrors, t.Tag)
			counter(descWaits, t.Waits, t.Tag)
			counter(descTagErrors, t.Errors, t.Tag)
			cur, next := t.Buffers[t.Current], t.Buffers[1-t.Current]
			gauge(descRemaining, float64(cur.End-cur.Next), t.Tag, "current")
			gauge(descRemaining, float64(next.End-next.Next), t.Tag, "next")
			gauge(descStep, float64(t.Step), t.Tag)
			gauge(descTableStep, float64(t.MinStep), t.Tag)
			gauge(descLoading, boolFloat(t.Loading), t.Tag)
			gauge(descPeriod, t.LastPeriod.Seconds(), t.Tag)
		}
	}
	if st, ok := c.s.sf.(snowflakeStater); ok {
		sf := st.State()
		counter(descIssued, sf.Issued, "snowflake", "")
		counter(descBackward, sf.BackwardEvents)
		counter(descRenewals, sf.Renewals)
		gauge(descWorker, float64(sf.WorkerID), sf.Source)
		if !sf.LeaseUntil.IsZero() {
			gauge(descLeaseUntil, float64(sf.LeaseUntil.UnixMilli())/1000)
		}
		if sf.LastMs > 0 {
			gauge(descLastMs, float64(sf.LastMs)/1000)
		}
	}
	if c.s.health != nil {
		h := c.s.health.check(context.Background())
		gauge(descStoreUp, boolFloat(h.ok), c.s.health.store.Driver())
		if a, ok := c.s.health.store.(storeAddresser); ok {
			addr := a.Address()
			gauge(descStoreAddress, float64(addr.Index), addr.Name)
			counter(descStoreSwitches, addr.Switches)
		}
	}
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
