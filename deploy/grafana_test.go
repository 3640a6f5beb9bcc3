package deploy_test

import (
	"context"
	"encoding/json"
	"fmt"
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

const (
	dashboardFile = "grafana-dashboard.json"
	metricsDoc    = "../docs/metrics.md"
)

// mysqlOnly are the metrics only a MySQL store exports. Without a MySQL
// server to test against, the dashboard's use of them is not checked.
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
	for _, tag := range []leafd.Tag{{Name: "order", MaxID: 1, Step: 10},
		{Name: "bill", Step: 10, Format: segment.FormatDated, Period: segment.PeriodDay, Digits: 6}} { // its period's series
		if _, err := s.CreateTag(ctx, tag); err != nil {
			t.Fatal(err)
		}
	}
	m, err := leafmetrics.NewWith(leafmetrics.Options{PerTag: leafmetrics.PerTagFull})
	if err != nil {
		t.Fatal(err)
	}
	a, err := segment.New(s, segment.Config{Logger: quiet, OnLoad: m.ObserveLoad, WaitTimeout: 5 * time.Second})
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

// exportedNames returns the metric families leafd exports over SQLite and,
// when a server answers, MySQL, and whether MySQL was among them.
func exportedNames(t *testing.T) (map[string]dto.MetricType, bool) {
	t.Helper()
	names := map[string]dto.MetricType{}
	add := func(fams map[string]*dto.MetricFamily) {
		for name, f := range fams {
			names[name] = f.GetType()
		}
	}
	sqlite, err := store.Open("sqlite", testdb.SQLite(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sqlite.Close() })
	add(exported(t, sqlite))
	mysqlToo := false
	t.Run("MySQL", func(t *testing.T) {
		mysql, err := store.Open("mysql", testdb.MySQL(t)) // skips when no server answers
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { mysql.Close() })
		add(exported(t, mysql))
		mysqlToo = true
	})
	return names, mysqlToo
}

// query is one PromQL expression of the dashboard and where it is.
type query struct{ where, expr string }

// dashboardQueries returns every PromQL expression of the dashboard: the
// targets of its panels, of the panels nested in rows, and the queries of
// its template variables.
func dashboardQueries(t *testing.T) []query {
	t.Helper()
	data, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		SchemaVersion int             `json:"schemaVersion"`
		Panels        []dashboardItem `json:"panels"`
		Templating    struct {
			List []struct {
				Name  string `json:"name"`
				Type  string `json:"type"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	if dash.SchemaVersion < 36 {
		t.Errorf("schemaVersion %d, want a current one (39)", dash.SchemaVersion)
	}
	var qs []query
	var walk func(prefix string, ps []dashboardItem)
	walk = func(prefix string, ps []dashboardItem) {
		for _, p := range ps {
			where := prefix + fmt.Sprintf("panel %q", p.Title)
			for _, tg := range p.Targets {
				if tg.Expr == "" {
					t.Errorf("%s: target %s has no expr", where, tg.RefID)
					continue
				}
				qs = append(qs, query{where + " target " + tg.RefID, tg.Expr})
			}
			walk(where+" > ", p.Panels)
		}
	}
	walk("", dash.Panels)
	hasDatasource := false
	for _, v := range dash.Templating.List {
		switch q := v.Query.(type) {
		case string:
			if v.Type == "datasource" {
				hasDatasource = hasDatasource || q == "prometheus"
				continue
			}
			qs = append(qs, query{fmt.Sprintf("variable %q", v.Name), q})
		case map[string]any:
			if s, ok := q["query"].(string); ok {
				qs = append(qs, query{fmt.Sprintf("variable %q", v.Name), s})
			}
		}
	}
	if !hasDatasource {
		t.Errorf("%s has no Prometheus data source variable", dashboardFile)
	}
	return qs
}

// dashboardItem is a panel, or a row with its nested panels.
type dashboardItem struct {
	Title   string `json:"title"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	Panels []dashboardItem `json:"panels"`
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

// Every metric that a query of the dashboard names is one that leafd
// exports: a renamed or removed metric fails here, naming the panel.
func TestGrafanaDashboardMetricsExist(t *testing.T) {
	names, mysqlToo := exportedNames(t)
	known := func(name string) bool {
		if _, ok := names[name]; ok {
			return true
		}
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, suffix); ok {
				if typ, ok := names[base]; ok && (typ == dto.MetricType_HISTOGRAM || typ == dto.MetricType_SUMMARY) {
					return true
				}
			}
		}
		return false
	}
	qs := dashboardQueries(t)
	if len(qs) < 15 {
		t.Fatalf("only %d queries found in %s", len(qs), dashboardFile)
	}
	used := map[string]bool{}
	for _, q := range qs {
		found := metricNames(q.expr)
		if len(found) == 0 {
			t.Errorf("%s: no leafd, Go or process metric in %s", q.where, q.expr)
		}
		for _, name := range found {
			used[name] = true
			switch {
			case known(name):
			case !mysqlToo && slices.Contains(mysqlOnly, name):
				t.Logf("%s: %s is MySQL only and no MySQL server answered: not checked", q.where, name)
			default:
				t.Errorf("%s: %s is not a metric leafd exports (query %s)", q.where, name, q.expr)
			}
		}
	}
	t.Logf("%d queries, %d metrics, checked against %d exported families (MySQL too: %v)", len(qs), len(used), len(names), mysqlToo)
}

// docs/metrics.md names every leafd_ metric leafd exports, and names no
// leafd_ metric that it does not.
func TestMetricsDocComplete(t *testing.T) {
	names, mysqlToo := exportedNames(t)
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
