package deploy_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/access"
	"github.com/leafd/leafd/health"
	leafhttp "github.com/leafd/leafd/http"
	"github.com/leafd/leafd/internal/testkit/testdb"
	leafmetrics "github.com/leafd/leafd/metrics"
	"github.com/leafd/leafd/segment"
	"github.com/leafd/leafd/snowflake"
	"github.com/leafd/leafd/store"
)

// The checks of this file are shared by the files that name leafd's
// metrics: the Grafana dashboard (grafana_test.go), the Prometheus rules
// (prometheus_test.go) and docs/metrics.md (TestMetricsDocComplete).

const metricsDoc = "../docs/metrics.md"

// mysqlOnly are the metrics only a MySQL store exports. Without a MySQL
// server to test against, their use is not checked.
var mysqlOnly = []string{"leafd_store_address_index", "leafd_store_address_switches_total"}

// metricsStore is what a live leafd needs of a store.
type metricsStore interface {
	segment.Store
	snowflake.LeaseStore
	health.Pinger
	leafhttp.Tokens
	Migrate(ctx context.Context) error
	CreateTag(ctx context.Context, t leafd.Tag) (leafd.Tag, error)
	Close() error
}

// exported scrapes a real leafd over s, with metrics.per_tag full so that
// every metric shows: a segment allocator and a snowflake generator that
// leases its worker id, a few IDs of each served, one error answered. It
// returns the metric families of one GET /metrics, by name.
func exported(t *testing.T, s metricsStore) map[string]*dto.MetricFamily {
	t.Helper()
	ctx := context.Background()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	key := []byte("0123456789abcdef0123456789abcdef")
	for _, tag := range []leafd.Tag{{Name: "order", MaxID: 1, Step: 10},
		{Name: "bill", Step: 10, Format: segment.FormatDated, Period: segment.PeriodDay, Digits: 6},                                        // its period's series
		{Name: "user", MaxID: 1, Step: 10, Format: segment.FormatOpaque, Digits: 6, KeyFingerprint: segment.KeyFingerprint(key, "user")}} { // its domain's
		if _, err := s.CreateTag(ctx, tag); err != nil {
			t.Fatal(err)
		}
	}
	m, err := leafmetrics.NewWith(leafmetrics.Options{PerTag: leafmetrics.PerTagFull})
	if err != nil {
		t.Fatal(err)
	}
	a, err := segment.New(s, segment.Config{Logger: quiet, OnLoad: m.ObserveLoad, WaitTimeout: 5 * time.Second, OpaqueKey: key})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	if err := a.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	a.Start()
	g, err := snowflake.New(snowflake.Settings{Leases: s, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	g.Start()
	for deadline := time.Now().Add(10 * time.Second); g.Ready() != nil; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no worker id leased within 10s: %v", g.Ready())
		}
	}
	// Segment routes need a token, so that the refusal counter shows too.
	_, token, err := s.CreateToken(ctx, []string{"*"}, "grafana test")
	if err != nil {
		t.Fatal(err)
	}
	acc := access.New(access.Config{Store: s, Segment: true, Registerer: m.Registerer(), TagLabels: true, Logger: quiet})
	t.Cleanup(acc.Close)
	h := leafhttp.New(leafhttp.Config{Segment: a, Snowflake: g, Store: s, Metrics: m, Logger: quiet,
		Tokens: s, Access: acc}).Handler()
	get := func(path string, want int) string {
		t.Helper()
		w := httptest.NewRecorder()
		r := httptest.NewRequest("GET", path, nil)
		if strings.HasPrefix(path, "/segment/") && want != http.StatusUnauthorized || strings.HasPrefix(path, "/api/segment/") {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		h.ServeHTTP(w, r)
		if w.Code != want {
			t.Fatalf("GET %s = %d, want %d: %s", path, w.Code, want, w.Body)
		}
		return w.Body.String()
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("GET", "/segment/order", nil)
		r.Header.Set("Authorization", "Bearer "+token)
		if h.ServeHTTP(w, r); w.Code == http.StatusOK {
			break // the server has read the tokens
		}
		if time.Now().After(deadline) {
			t.Fatalf("the tokens were not read within 10s: %d %s", w.Code, w.Body)
		}
	}
	get("/segment/order?count=3", http.StatusOK)
	get("/segment/bill", http.StatusOK)
	get("/api/segment/get/order", http.StatusOK)
	get("/snowflake?count=2", http.StatusOK)
	get("/segment/nope", http.StatusNotFound)      // unknown_tag
	get("/segment/order", http.StatusUnauthorized) // no token: refused and counted
	callGRPC(t, m, a, g)                           // the gRPC API's series (grpc_test.go)
	body := get("/metrics", http.StatusOK)
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	return fams
}

// exports is what a real leafd's /metrics holds: each family's type, and
// the values seen of each of its labels.
type exports struct {
	types  map[string]dto.MetricType
	values map[string]map[string]map[string]bool // family → label → values
	// mysqlToo is whether a MySQL store was scraped too: without it the
	// mysqlOnly families are missing.
	mysqlToo bool
}

// exportedMetrics returns the metric families leafd exports over SQLite
// and, when a server answers, MySQL.
func exportedMetrics(t *testing.T) exports {
	t.Helper()
	ex := exports{types: map[string]dto.MetricType{}, values: map[string]map[string]map[string]bool{}}
	add := func(fams map[string]*dto.MetricFamily) {
		for name, f := range fams {
			ex.types[name] = f.GetType()
			if ex.values[name] == nil {
				ex.values[name] = map[string]map[string]bool{}
			}
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					if ex.values[name][l.GetName()] == nil {
						ex.values[name][l.GetName()] = map[string]bool{}
					}
					ex.values[name][l.GetName()][l.GetValue()] = true
				}
			}
		}
	}
	sqlite, err := store.Open("sqlite", testdb.SQLite(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sqlite.Close() })
	add(exported(t, sqlite))
	t.Run("MySQL", func(t *testing.T) {
		mysql, err := store.Open("mysql", testdb.MySQL(t)) // skips when no server answers
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { mysql.Close() })
		add(exported(t, mysql))
		ex.mysqlToo = true
	})
	return ex
}

// family returns the family that a series name belongs to: the name
// itself, or for the _bucket, _sum and _count series of a histogram or
// summary, its family.
func (ex exports) family(name string) (string, bool) {
	if _, ok := ex.types[name]; ok {
		return name, true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			if typ, ok := ex.types[base]; ok && (typ == dto.MetricType_HISTOGRAM || typ == dto.MetricType_SUMMARY) {
				return base, true
			}
		}
	}
	return "", false
}

// checkName fails t unless leafd exports the series name, used where:
// a MySQL-only name is only logged when no MySQL server was scraped.
func (ex exports) checkName(t *testing.T, where, name string) {
	t.Helper()
	switch _, ok := ex.family(name); {
	case ok:
	case !ex.mysqlToo && slices.Contains(mysqlOnly, name):
		t.Logf("%s: %s is MySQL only and no MySQL server answered: not checked", where, name)
	default:
		t.Errorf("%s: %s is not a metric leafd exports", where, name)
	}
}

var (
	// Strings, label matchers and range selectors hold no metric names.
	promStrings   = regexp.MustCompile("\"(?:[^\"\\\\]|\\\\.)*\"|'(?:[^'\\\\]|\\\\.)*'|`[^`]*`")
	promMatchers  = regexp.MustCompile(`\{[^}]*\}`)
	promRanges    = regexp.MustCompile(`\[[^\]]*\]`)
	promGrouping  = regexp.MustCompile(`(?i)\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promVariables = regexp.MustCompile(`\$\{?[A-Za-z_][A-Za-z0-9_]*\}?`)
	// promIdent is an identifier, with whether a call follows it.
	promIdent = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*(\s*\()?`)
)

// metricNames returns the metric names of a PromQL expression: the
// identifiers of leafd and of the Go and process collectors, leaving out
// functions, label names in grouping and matchers, keywords, strings and
// Grafana variables.
func metricNames(expr string) []string {
	e := promStrings.ReplaceAllString(expr, `""`)
	e = promMatchers.ReplaceAllString(e, " ")
	e = promRanges.ReplaceAllString(e, " ")
	e = promGrouping.ReplaceAllString(e, " ")
	e = promVariables.ReplaceAllString(e, " ")
	var names []string
	for _, m := range promIdent.FindAllStringSubmatch(e, -1) {
		if m[1] != "" { // a function
			continue
		}
		name := m[0]
		for _, prefix := range []string{"leafd_", "go_", "process_", "promhttp_"} {
			if strings.HasPrefix(name, prefix) && !slices.Contains(names, name) {
				names = append(names, name)
			}
		}
	}
	return names
}

func TestMetricNames(t *testing.T) {
	for _, tt := range []struct {
		expr string
		want []string
	}{
		{`sum by (route, le) (rate(leafd_http_request_duration_seconds_bucket{job=~"$job",route="leafd_x"}[$__rate_interval]))`,
			[]string{"leafd_http_request_duration_seconds_bucket"}},
		{`leafd_segment_buffer_remaining{buffer="current"} and ignoring(buffer) (leafd_segment_load_failing == 1)`,
			[]string{"leafd_segment_buffer_remaining", "leafd_segment_load_failing"}},
		{`label_values(leafd_store_up{job=~"$job"}, instance)`, []string{"leafd_store_up"}},
		{`sum without (tag) (go_goroutines) / on(instance) group_left(job) process_open_fds offset 5m`,
			[]string{"go_goroutines", "process_open_fds"}},
		{`min(leafd_snowflake_lease_expiry_timestamp_seconds) - time()`, []string{"leafd_snowflake_lease_expiry_timestamp_seconds"}},
	} {
		if got := metricNames(tt.expr); !slices.Equal(got, tt.want) {
			t.Errorf("metricNames(%s) = %v, want %v", tt.expr, got, tt.want)
		}
	}
}

// docs/metrics.md names every leafd_ metric leafd exports, and names no
// leafd_ metric that it does not.
func TestMetricsDocComplete(t *testing.T) {
	ex := exportedMetrics(t)
	names, mysqlToo := ex.types, ex.mysqlToo
	data, err := os.ReadFile(metricsDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	for name := range names {
		if strings.HasPrefix(name, "leafd_") && !strings.Contains(doc, "`"+name+"`") && !strings.Contains(doc, "`"+name+"{") {
			t.Errorf("%s does not document %s", metricsDoc, name)
		}
	}
	for _, at := range regexp.MustCompile(`leafd_[a-z0-9_]*[a-z0-9]`).FindAllStringIndex(doc, -1) {
		name := doc[at[0]:at[1]]
		if strings.HasPrefix(doc[at[1]:], "_") {
			continue // a prefix, as in leafd_segment_all_…
		}
		base := name
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(name, suffix); ok && names[b] == dto.MetricType_HISTOGRAM {
				base = b
			}
		}
		if _, ok := names[base]; !ok && (mysqlToo || !slices.Contains(mysqlOnly, base)) {
			t.Errorf("%s names %s, which leafd does not export", metricsDoc, name)
		}
	}
}
