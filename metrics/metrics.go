// Package metrics is leafd's Prometheus registry, served by GET /metrics
// and shared by both transports: the range loads, the requests, and the
// allocators' and store's state read at scrape time.
package metrics

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/health"
	"github.com/leafd/leafd/segment"
	"github.com/leafd/leafd/snowflake"
)

// PerTag says how much /metrics tells about each segment tag: the
// metrics.per_tag setting. A server with thousands of tags cannot afford a
// dozen series each, so the default is PerTagBasic.
type PerTag string

// The levels of per-tag detail.
const (
	// PerTagBasic exports what an alert about a tag needs, at most five
	// series per tag (six for a dated tag), and only for tags that were
	// asked for: IDs issued, failed requests, waits, IDs left in the
	// current buffer, whether the last range load failed, and how full a
	// dated tag's period is. A tag that is idle and has counted nothing
	// since the server started exports nothing.
	PerTagBasic PerTag = "basic"
	// PerTagFull exports every per-tag series for every tag: both
	// buffers, steps, loads, load errors, loading, the last period, and a
	// per-tag twin of the range load latency histogram.
	PerTagFull PerTag = "full"
	// PerTagOff exports no per-tag series: the server-wide totals only.
	PerTagOff PerTag = "off"
)

// Options configures NewWith. The zero value is the default:
// PerTagBasic.
type Options struct {
	// PerTag is the per-tag detail; empty means PerTagBasic.
	PerTag PerTag
}

// Registry is the Prometheus registry that GET /metrics serves: a registry
// of its own, never the global one, so that servers (and tests) do not
// share counters.
//
// Almost everything is read from the allocators' State snapshots when
// /metrics is scraped, so that issuing an ID costs nothing more. Two things
// cannot be read afterwards and are counted as they happen: the latency of
// each range load (ObserveLoad, the segment.Config.OnLoad hook, called on
// the load goroutine) and each HTTP request with its route, status, latency
// and error code (one counter increment and one histogram observation per
// request, through series cached per route, method and status).
//
// A Registry serves one server: Watch registers its state, and panics if
// called twice.
type Registry struct {
	reg    *prometheus.Registry
	perTag PerTag
	// loads is the server-wide load latency by result, loadOK and
	// loadErr its two series; tagLoads the per-tag twin (PerTagFull only).
	loads           *prometheus.HistogramVec
	loadOK, loadErr prometheus.Observer
	tagLoads        *prometheus.HistogramVec
	requests        *prometheus.CounterVec
	latency         *prometheus.HistogramVec
	errors          *prometheus.CounterVec
	handler         http.Handler

	// rewound counts range loads refused as tag_rewound, all tags
	// together (the tag is in the log and in leafd_segment_load_failing).
	rewound prometheus.Counter

	// series caches the request counter and latency histogram of each
	// route, method and status seen: an immutable map, replaced whole
	// under seriesMu when a new combination appears, so that counting a
	// request takes no lock and allocates nothing.
	series   atomic.Pointer[map[requestKey]requestSeries]
	seriesMu sync.Mutex
}

type requestKey struct {
	route, method string
	status        int
}

// requestSeries are the series one request updates. took is shared by every
// status of a route and method: latency is not labelled by status.
type requestSeries struct {
	count prometheus.Counter
	took  prometheus.Observer
}

// loadBuckets span a local SQLite file to a remote cluster that retries a
// certification conflict, up to segment's 10 s load timeout.
var loadBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// requestBuckets span an ID served from memory (tens of microseconds) to a
// request that waited out segment.wait_timeout for a range.
var requestBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}

// New returns a registry with the default options (PerTagBasic); see
// NewWith.
func New() *Registry {
	m, err := NewWith(Options{})
	if err != nil {
		panic(err) // the zero options are valid
	}
	return m
}

// NewWith returns a registry holding leafd's request and load
// metrics and the Go runtime and process collectors, with as much per-tag
// detail as o.PerTag says. Pass it to the HTTP server, and its ObserveLoad
// to segment.Config.OnLoad.
//
// It returns an error when o.PerTag is not one of the PerTag constants or
// empty.
func NewWith(o Options) (*Registry, error) {
	o.PerTag = cmp.Or(o.PerTag, PerTagBasic)
	if !slices.Contains([]PerTag{PerTagBasic, PerTagFull, PerTagOff}, o.PerTag) {
		return nil, fmt.Errorf("metrics per-tag detail %q: use full, basic or off", string(o.PerTag))
	}
	m := &Registry{
		reg:    prometheus.NewRegistry(),
		perTag: o.PerTag,
		loads: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "leafd_segment_range_load_duration_seconds",
			Help:    "Time the store took to hand out one range, per attempt, all tags; result is ok or error.",
			Buckets: loadBuckets,
		}, []string{"result"}),
		rewound: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "leafd_segment_rewound_total",
			Help: "Range loads refused because the tag was rewound (tag_rewound: max_id below IDs already issued), all tags together.",
		}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leafd_http_requests_total",
			Help: "HTTP requests answered, by route template, method and status.",
		}, []string{"route", "method", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "leafd_http_request_duration_seconds",
			Help:    "Time from a request's arrival to its answer in the server, by route template and method.",
			Buckets: requestBuckets,
		}, []string{"route", "method"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leafd_errors_total",
			Help: "Error answers, by error code (docs/contract.md section 4) and route template.",
		}, []string{"code", "route"}),
	}
	// Both results exist from the start, so that a rate of errors is 0
	// rather than absent before the first failure.
	m.loadOK, m.loadErr = m.loads.WithLabelValues("ok"), m.loads.WithLabelValues("error")
	m.reg.MustRegister(m.loads, m.rewound, m.requests, m.latency, m.errors,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if m.perTag == PerTagFull {
		m.tagLoads = prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "leafd_segment_tag_range_load_duration_seconds",
			Help:    "Time the store took to hand out one range of the tag, per attempt; result is ok or error (metrics.per_tag full only).",
			Buckets: loadBuckets,
		}, []string{"tag", "result"})
		m.reg.MustRegister(m.tagLoads)
	}
	m.handler = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
	m.series.Store(&map[requestKey]requestSeries{})
	return m, nil
}

// PerTag returns the per-tag detail the registry exports.
func (m *Registry) PerTag() PerTag { return m.perTag }

// ObserveLoad records one attempt to load a range of tag. Its signature is
// segment.Config.OnLoad's.
func (m *Registry) ObserveLoad(tag string, _ int64, took time.Duration, err error) {
	result, o := "ok", m.loadOK
	if err != nil {
		result, o = "error", m.loadErr
	}
	o.Observe(took.Seconds())
	if leafd.ErrorCode(err) == leafd.ETagRewound {
		m.rewound.Inc()
	}
	if m.tagLoads != nil {
		m.tagLoads.WithLabelValues(tag, result).Observe(took.Seconds())
	}
}

// ObserveLoad fits segment.Config.OnLoad.
var _ = segment.Config{OnLoad: (*Registry)(nil).ObserveLoad}

// Segment is the state of segment mode; *segment.Allocator implements it.
type Segment interface{ State() []segment.TagState }

// Snowflake is the state of snowflake mode; *snowflake.Generator and
// *snowflake.Pool implement it.
type Snowflake interface{ State() snowflake.State }

// Watch registers the state read at scrape time: the segment tags, the
// snowflake workers and the store's health; a nil one is left out.
func (m *Registry) Watch(seg Segment, sf Snowflake, st *health.Store) {
	m.reg.MustRegister(&stateCollector{seg: seg, sf: sf, health: st, perTag: m.perTag})
}

// ObserveRequest counts one request by route template (never the raw
// path: a flood of made-up tags must not make a flood of series), method
// and status, times it by route template and method, and counts an error
// answer (err not nil) by code.
func (m *Registry) ObserveRequest(route, method string, status int, took time.Duration, err error) {
	r := m.requestSeries(requestKey{route, boundMethod(method), status})
	r.count.Inc()
	r.took.Observe(took.Seconds())
	if err != nil {
		m.errors.WithLabelValues(leafd.ErrorCode(err), route).Inc()
	}
}

func (m *Registry) requestSeries(k requestKey) requestSeries {
	if r, ok := (*m.series.Load())[k]; ok {
		return r
	}
	m.seriesMu.Lock()
	defer m.seriesMu.Unlock()
	old := *m.series.Load()
	if r, ok := old[k]; ok {
		return r
	}
	r := requestSeries{
		count: m.requests.WithLabelValues(k.route, k.method, strconv.Itoa(k.status)),
		took:  m.latency.WithLabelValues(k.route, k.method),
	}
	next := make(map[requestKey]requestSeries, len(old)+1)
	maps.Copy(next, old)
	next[k] = r
	m.series.Store(&next)
	return r
}

// boundMethod bounds the method label to the methods HTTP defines.
func boundMethod(m string) string {
	switch m {
	case "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE":
		return m
	}
	return "other"
}

// ServeHTTP answers GET /metrics in the Prometheus text format (or
// protobuf, as the scraper asks).
func (m *Registry) ServeHTTP(w http.ResponseWriter, r *http.Request) { m.handler.ServeHTTP(w, r) }

// Descriptions of the metrics read from state at scrape time. The per-tag
// ones carry a tag label and follow metrics.per_tag; the server-wide
// segment totals (leafd_segment_all_…) and leafd_segment_tags are there in
// every mode, so that alerts work whatever the per-tag detail.
var (
	descIssued = prometheus.NewDesc("leafd_ids_issued_total",
		"IDs issued since the server started (segment: since the tag was first served), by mode and tag; tag is empty for snowflake.",
		[]string{"mode", "tag"}, nil)
	descLoads = prometheus.NewDesc("leafd_segment_range_loads_total",
		"Ranges of the tag loaded from the store.", []string{"tag"}, nil)
	descLoadErrors = prometheus.NewDesc("leafd_segment_range_load_errors_total",
		"Failed attempts to load a range of the tag, each retry counted.", []string{"tag"}, nil)
	descWaits = prometheus.NewDesc("leafd_segment_waits_total",
		"Requests for the tag that found both buffers empty and had to wait for a range.", []string{"tag"}, nil)
	descTagErrors = prometheus.NewDesc("leafd_segment_request_errors_total",
		"Requests for the tag that failed: no range within segment.wait_timeout, tag exhausted.", []string{"tag"}, nil)
	descRemaining = prometheus.NewDesc("leafd_segment_buffer_remaining",
		"IDs left in a buffer of the tag; buffer is current or next (next with metrics.per_tag full only).", []string{"tag", "buffer"}, nil)
	descFailing = prometheus.NewDesc("leafd_segment_load_failing",
		"1 while the last attempt to load a range of the tag failed, else 0.", []string{"tag"}, nil)
	descStep = prometheus.NewDesc("leafd_segment_step",
		"Step of the last range this server loaded (its dynamic step).", []string{"tag"}, nil)
	descTableStep = prometheus.NewDesc("leafd_segment_table_step",
		"Step column of the table: the smallest step the server takes.", []string{"tag"}, nil)
	descLoading = prometheus.NewDesc("leafd_segment_loading",
		"1 while a range load is in flight.", []string{"tag"}, nil)
	descPeriodUsed = prometheus.NewDesc("leafd_segment_period_used_ratio",
		"Share of the numbers of a dated tag's current period that are gone, 0 to 1: at 1 the tag answers period_exhausted until the period ends.", []string{"tag"}, nil)
	descDomainUsed = prometheus.NewDesc("leafd_segment_domain_used_ratio",
		"Share of an opaque tag's IDs (1 to the largest its digits allow) that are gone, 0 to 1: at 1 the tag answers tag_exhausted.", []string{"tag"}, nil)
	descPeriod = prometheus.NewDesc("leafd_segment_last_period_seconds",
		"Time between the last two range loads: how long a range lasted.", []string{"tag"}, nil)

	descAllIssued = prometheus.NewDesc("leafd_segment_all_ids_issued_total",
		"IDs issued by segment mode, all tags together.", nil, nil)
	descAllLoads = prometheus.NewDesc("leafd_segment_all_range_loads_total",
		"Ranges loaded from the store, all tags together.", nil, nil)
	descAllLoadErrors = prometheus.NewDesc("leafd_segment_all_range_load_errors_total",
		"Failed attempts to load a range, all tags together, each retry counted.", nil, nil)
	descAllWaits = prometheus.NewDesc("leafd_segment_all_waits_total",
		"Requests that found both buffers of their tag empty and waited for a range, all tags together.", nil, nil)
	descAllErrors = prometheus.NewDesc("leafd_segment_all_request_errors_total",
		"Segment requests that failed (segment_unavailable, tag_exhausted), all tags together.", nil, nil)
	descTags = prometheus.NewDesc("leafd_segment_tags",
		"Tags served, by status: failing, waiting, loading, serving or idle.", []string{"status"}, nil)

	descBackward = prometheus.NewDesc("leafd_snowflake_clock_backward_events_total",
		"Times the clock was found behind the last ID by more than snowflake.max_backward.", nil, nil)
	descRenewals = prometheus.NewDesc("leafd_snowflake_lease_renewals_total",
		"Successful renewals of the worker id lease.", nil, nil)
	descWorker = prometheus.NewDesc("leafd_snowflake_worker_id",
		"Worker id in use (the lowest, with snowflake.workers above 1), -1 while none is held; source is lease or static.", []string{"source"}, nil)
	descWorkers = prometheus.NewDesc("leafd_snowflake_workers",
		"Worker ids held, each issuing up to 2^sequence_bits IDs a millisecond (snowflake.workers when all are leased).", nil, nil)
	descLeaseUntil = prometheus.NewDesc("leafd_snowflake_lease_expiry_timestamp_seconds",
		"When the worker id lease runs out unless renewed (Unix time).", nil, nil)
	descLastMs = prometheus.NewDesc("leafd_snowflake_last_timestamp_seconds",
		"Time of the last snowflake ID issued (Unix time).", nil, nil)
	descBorrowed = prometheus.NewDesc("leafd_snowflake_borrowed_seconds_total",
		"Time taken ahead of the clock, in whole milliseconds, because the sequence of a millisecond was used up (snowflake.max_borrow).", nil, nil)
	descLead = prometheus.NewDesc("leafd_snowflake_borrow_lead_seconds",
		"How far the last snowflake ID's millisecond is ahead of the clock now (0 when it is not).", nil, nil)
	descMaxLead = prometheus.NewDesc("leafd_snowflake_borrow_max_lead_seconds",
		"The largest lead over the clock that borrowing made since the server started (at most snowflake.max_borrow).", nil, nil)
	descStoreUp = prometheus.NewDesc("leafd_store_up",
		"1 when the store answered its last ping (pinged at most once a second), else 0.", []string{"driver"}, nil)
	descStoreAddress = prometheus.NewDesc("leafd_store_address_index",
		"Which database address is in use: 0 is store.dsn, 1 and up store.fallback_dsns (MySQL and PostgreSQL only).", []string{"address"}, nil)
	descStoreSwitches = prometheus.NewDesc("leafd_store_address_switches_total",
		"Moves from one database address of the cluster to another (MySQL and PostgreSQL only).", nil, nil)
)

// stateCollector reads the state when /metrics is scraped.
type stateCollector struct {
	seg    Segment
	sf     Snowflake
	health *health.Store
	perTag PerTag

	// The server-wide totals must never go down, yet a tag's counters
	// leave with the tag (deleted) or restart (deleted and created
	// again). last holds each tag's counts at the last scrape and gone
	// the counts of tags since left, added to every total.
	mu   sync.Mutex
	last map[string]tagCounts
	gone tagCounts
}

// tagCounts are the counters of a tag that the server-wide totals sum.
type tagCounts struct{ issued, loads, loadErrors, waits, errors int64 }

func countsOf(t segment.TagState) tagCounts {
	return tagCounts{t.Issued, t.Loads, t.LoadErrors, t.Waits, t.Errors}
}

func (a *tagCounts) add(b tagCounts) {
	a.issued += b.issued
	a.loads += b.loads
	a.loadErrors += b.loadErrors
	a.waits += b.waits
	a.errors += b.errors
}

// below reports whether any count of a is below b's: the tag restarted.
func (a tagCounts) below(b tagCounts) bool {
	return a.issued < b.issued || a.loads < b.loads || a.loadErrors < b.loadErrors ||
		a.waits < b.waits || a.errors < b.errors
}

// totals sums the counts of tags, and of the tags gone since the server
// started, so that each total only grows.
func (c *stateCollector) totals(tags []segment.TagState) tagCounts {
	c.mu.Lock()
	defer c.mu.Unlock()
	seen := make(map[string]tagCounts, len(tags))
	var sum tagCounts
	for _, t := range tags {
		n := countsOf(t)
		if p, ok := c.last[t.Tag]; ok && n.below(p) {
			c.gone.add(p)
		}
		seen[t.Tag] = n
		sum.add(n)
	}
	for tag, p := range c.last {
		if _, ok := seen[tag]; !ok {
			c.gone.add(p)
		}
	}
	c.last = seen
	sum.add(c.gone)
	return sum
}

// used reports whether t was asked for, or did anything, since the server
// started. In PerTagBasic a tag that was not exports nothing: most tags of
// a large installation sit unused on any one server.
func used(t segment.TagState) bool {
	return t.Status != segment.StatusIdle || countsOf(t) != (tagCounts{})
}

// remaining returns how many IDs b has left: fewer than End-Next when its
// range is strided.
func remaining(b segment.BufferState) int64 {
	return (b.End - b.Next) / max(b.Stride, 1)
}

// Describe sends every description, whether or not the mode is on.
func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descIssued, descLoads, descLoadErrors, descWaits, descTagErrors,
		descRemaining, descFailing, descPeriodUsed, descDomainUsed, descStep, descTableStep, descLoading, descPeriod,
		descAllIssued, descAllLoads, descAllLoadErrors, descAllWaits, descAllErrors, descTags,
		descBackward, descRenewals, descWorker, descWorkers, descLeaseUntil, descLastMs, descBorrowed, descLead, descMaxLead,
		descStoreUp, descStoreAddress, descStoreSwitches} {
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
	if c.seg != nil {
		tags := c.seg.State()
		byStatus := make(map[segment.Status]int, len(segment.Statuses))
		for _, t := range tags {
			byStatus[t.Status]++
			if c.perTag == PerTagOff || (c.perTag == PerTagBasic && !used(t)) {
				continue
			}
			cur, next := t.Buffers[t.Current], t.Buffers[1-t.Current]
			counter(descIssued, t.Issued, "segment", t.Tag)
			counter(descTagErrors, t.Errors, t.Tag)
			counter(descWaits, t.Waits, t.Tag)
			gauge(descRemaining, float64(remaining(cur)), t.Tag, "current")
			gauge(descFailing, boolFloat(t.Err != nil || t.Status == segment.StatusFailing), t.Tag)
			if t.PeriodCapacity > 0 {
				gauge(descPeriodUsed, float64(t.PeriodUsed)/float64(t.PeriodCapacity), t.Tag)
			}
			if t.Domain > 0 {
				gauge(descDomainUsed, float64(t.DomainUsed)/float64(t.Domain), t.Tag)
			}
			if c.perTag != PerTagFull {
				continue
			}
			counter(descLoads, t.Loads, t.Tag)
			counter(descLoadErrors, t.LoadErrors, t.Tag)
			gauge(descRemaining, float64(remaining(next)), t.Tag, "next")
			gauge(descStep, float64(t.Step), t.Tag)
			gauge(descTableStep, float64(t.MinStep), t.Tag)
			gauge(descLoading, boolFloat(t.Loading), t.Tag)
			gauge(descPeriod, t.LastPeriod.Seconds(), t.Tag)
		}
		sum := c.totals(tags)
		counter(descAllIssued, sum.issued)
		counter(descAllLoads, sum.loads)
		counter(descAllLoadErrors, sum.loadErrors)
		counter(descAllWaits, sum.waits)
		counter(descAllErrors, sum.errors)
		for _, status := range segment.Statuses {
			gauge(descTags, float64(byStatus[status]), string(status))
		}
	}
	if c.sf != nil {
		sf := c.sf.State()
		counter(descIssued, sf.Issued, "snowflake", "")
		counter(descBackward, sf.BackwardEvents)
		counter(descRenewals, sf.Renewals)
		gauge(descWorker, float64(sf.WorkerID), sf.Source)
		gauge(descWorkers, float64(len(sf.WorkerIDs)))
		if !sf.LeaseUntil.IsZero() {
			gauge(descLeaseUntil, float64(sf.LeaseUntil.UnixMilli())/1000)
		}
		if sf.LastMs > 0 {
			gauge(descLastMs, float64(sf.LastMs)/1000)
		}
		ch <- prometheus.MustNewConstMetric(descBorrowed, prometheus.CounterValue, float64(sf.BorrowedMs)/1000)
		gauge(descLead, float64(sf.LeadMs)/1000)
		gauge(descMaxLead, float64(sf.MaxLeadMs)/1000)
	}
	if c.health != nil {
		h := c.health.Check(context.Background())
		gauge(descStoreUp, boolFloat(h.OK), c.health.Driver())
		if addr, ok := c.health.Address(); ok {
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

// Registerer returns the registry that GET /metrics serves, so that the
// access tokens' check and the gRPC API can add their metrics to it.
func (m *Registry) Registerer() prometheus.Registerer { return m.reg }
