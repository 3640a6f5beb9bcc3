package deploy_test

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"go.yaml.in/yaml/v3"

	"github.com/leafd/leafd"
	leafhttp "github.com/leafd/leafd/http"
	leafdv1 "github.com/leafd/leafd/proto/leafd/v1"
	"github.com/leafd/leafd/segment"
)

const (
	rulesDir      = "prometheus"
	rulesFile     = "leafd-alerts.yaml"      // in rulesDir
	rulesTestFile = "leafd-alerts_test.yaml" // in rulesDir
	// requirePromtool makes a missing promtool fail the test instead of
	// skipping it.
	requirePromtool = "LEAFD_TEST_REQUIRE_PROMTOOL"
)

// targetLabels are the labels Prometheus adds to every series it scrapes;
// the rules keep them and the unit tests' series carry them.
var targetLabels = []string{"job", "instance"}

// prometheusSeries are the series Prometheus itself writes for each target
// it scrapes (LeafdDown reads up), with only the target's labels.
var prometheusSeries = []string{"up"}

// alertRule is one rule of the rule file.
type alertRule struct {
	Alert       string            `yaml:"alert"`
	Record      string            `yaml:"record"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

// alertRules returns the rules of the rule file, failing t when there are
// fewer than a dozen.
func alertRules(t *testing.T) []alertRule {
	t.Helper()
	var f struct {
		Groups []struct {
			Name  string      `yaml:"name"`
			Rules []alertRule `yaml:"rules"`
		} `yaml:"groups"`
	}
	readYAML(t, filepath.Join(rulesDir, rulesFile), &f)
	var rules []alertRule
	for _, g := range f.Groups {
		rules = append(rules, g.Rules...)
	}
	if len(rules) < 12 {
		t.Fatalf("%s holds %d rules: is it still the rule file?", rulesFile, len(rules))
	}
	return rules
}

// ruleTests is the unit test file of promtool test rules.
type ruleTests struct {
	RuleFiles []string `yaml:"rule_files"`
	Tests     []struct {
		Name        string `yaml:"name"`
		InputSeries []struct {
			Series string `yaml:"series"`
			Values string `yaml:"values"`
		} `yaml:"input_series"`
		AlertRuleTest []struct {
			EvalTime  string `yaml:"eval_time"`
			Alertname string `yaml:"alertname"`
			ExpAlerts []struct {
				ExpLabels      map[string]string `yaml:"exp_labels"`
				ExpAnnotations map[string]string `yaml:"exp_annotations"`
			} `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	} `yaml:"tests"`
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// promtool returns the path of promtool, skipping t when it is not
// installed, or failing it with LEAFD_TEST_REQUIRE_PROMTOOL=1.
func promtool(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		msg := "promtool is not installed (Debian: apt-get install --no-install-recommends prometheus)"
		if os.Getenv(requirePromtool) == "1" {
			t.Fatalf("%s (%s=1)", msg, requirePromtool)
		}
		t.Skip(msg)
	}
	return path
}

// The rule file is valid for Prometheus, and every alert behaves as its
// unit tests say: promtool check rules, then promtool test rules.
func TestPrometheusRulesPromtool(t *testing.T) {
	bin := promtool(t)
	for _, args := range [][]string{{"check", "rules", rulesFile}, {"test", "rules", rulesTestFile}} {
		cmd := exec.Command(bin, args...)
		cmd.Dir = rulesDir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
			continue
		}
		if !strings.Contains(string(out), "SUCCESS") {
			t.Errorf("promtool %s said no SUCCESS:\n%s", strings.Join(args, " "), out)
		}
		t.Logf("promtool %s: %s", strings.Join(args, " "), strings.Join(strings.Fields(string(out)), " "))
	}
}

// selector is a vector selector of a PromQL expression or of a unit
// test's series: a metric name and its label matchers.
type selector struct {
	name     string
	matchers []matcher
}

type matcher struct{ label, op, value string }

var (
	promSelector = regexp.MustCompile(`([A-Za-z_:][A-Za-z0-9_:]*)\s*\{((?:[^}"']|"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')*)\}`)
	promMatcher  = regexp.MustCompile(`([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')`)
	// promGroupLabels captures the labels of a grouping or matching clause.
	promGroupLabels = regexp.MustCompile(`(?i)\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)`)
)

// selectors returns the selectors of expr that carry label matchers.
func selectors(t *testing.T, expr string) []selector {
	t.Helper()
	var out []selector
	for _, m := range promSelector.FindAllStringSubmatch(expr, -1) {
		s := selector{name: m[1]}
		for _, lm := range promMatcher.FindAllStringSubmatch(m[2], -1) {
			v := lm[3]
			if v[0] == '\'' {
				v = `"` + strings.ReplaceAll(v[1:len(v)-1], `"`, `\"`) + `"`
			}
			value, err := strconv.Unquote(v)
			if err != nil {
				t.Errorf("%s: label value %s: %v", expr, lm[3], err)
				continue
			}
			s.matchers = append(s.matchers, matcher{lm[1], lm[2], value})
		}
		out = append(out, s)
	}
	return out
}

// labelRules holds what each label of leafd's metrics may be: the label
// names of each family, as a real leafd exports them, and for the labels
// whose values are a closed set, those values.
type labelRules struct {
	ex exports
	// closed maps family → label → the values it takes.
	closed map[string]map[string][]string
}

func newLabelRules(t *testing.T, ex exports) labelRules {
	t.Helper()
	var routes []string
	srv := leafhttp.New(leafhttp.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	for _, r := range srv.Routes() {
		routes = append(routes, regexp.MustCompile(`\{([^}]*)\}`).ReplaceAllString(r.Path, ":$1")) // gin's template
	}
	routes = append(routes, "unmatched")
	var methods []string
	for _, m := range leafdv1.IDService_ServiceDesc.Methods {
		methods = append(methods, leafdv1.IDService_ServiceDesc.ServiceName+"/"+m.MethodName)
	}
	var statuses []string
	for _, s := range segment.Statuses {
		statuses = append(statuses, string(s))
	}
	seen := func(family, label string) []string {
		var vs []string
		for v := range ex.values[family][label] {
			vs = append(vs, v)
		}
		if len(vs) == 0 {
			t.Fatalf("the scrape shows no value of %s's label %s", family, label)
		}
		return vs
	}
	codes := leafd.Codes()
	return labelRules{ex: ex, closed: map[string]map[string][]string{
		"leafd_errors_total":                  {"code": codes, "route": routes},
		"leafd_grpc_errors_total":             {"code": codes, "method": methods},
		"leafd_http_requests_total":           {"route": routes},
		"leafd_http_request_duration_seconds": {"route": routes},
		"leafd_segment_tags":                  {"status": statuses},
		"leafd_segment_buffer_remaining":      {"buffer": seen("leafd_segment_buffer_remaining", "buffer")},
		"leafd_ids_issued_total":              {"mode": seen("leafd_ids_issued_total", "mode")},
	}}
}

// labels returns the label names a series of name may carry: its
// family's, the target's, and le for a histogram's buckets.
func (lr labelRules) labels(name string) []string {
	family, ok := lr.ex.family(name)
	if !ok {
		return nil
	}
	names := slices.Clone(targetLabels)
	for l := range lr.ex.values[family] {
		names = append(names, l)
	}
	if strings.HasSuffix(name, "_bucket") && family != name {
		names = append(names, "le")
	}
	return names
}

// checkSelector fails t for a matcher of s on a label that s's family
// does not have, or on a value of a closed set that is not in it (every
// alternative of a plain regular expression such as "a|b" is checked).
func (lr labelRules) checkSelector(t *testing.T, where string, s selector) {
	t.Helper()
	family, ok := lr.ex.family(s.name)
	if !ok {
		return // checkName reports it
	}
	allowed := lr.labels(s.name)
	for _, m := range s.matchers {
		if !slices.Contains(allowed, m.label) {
			t.Errorf("%s: %s has no label %s (it has %v)", where, s.name, m.label, allowed)
			continue
		}
		values, closed := lr.closed[family][m.label]
		if !closed {
			continue
		}
		alternatives := []string{m.value}
		if m.op == "=~" || m.op == "!~" {
			alternatives = strings.Split(m.value, "|")
		}
		for _, v := range alternatives {
			if strings.ContainsAny(v, `.*+?[]()^$\`) {
				continue // a pattern, not a value
			}
			if !slices.Contains(values, v) {
				t.Errorf("%s: %s{%s%s%q}: leafd gives %s no value %q (it gives %v)", where, s.name, m.label, m.op, m.value, m.label, v, values)
			}
		}
	}
}

// Every metric that a rule's expression names is one that leafd exports,
// with the labels and label values it matches on; so are the series of
// the rules' unit tests. A renamed metric, label or error code fails here.
func TestPrometheusRulesMetricsExist(t *testing.T) {
	ex := exportedMetrics(t)
	lr := newLabelRules(t, ex)
	used := map[string]bool{}
	for _, r := range alertRules(t) {
		where := fmt.Sprintf("%s: alert %s", rulesFile, r.Alert)
		names := metricNames(r.Expr)
		if len(names) == 0 {
			t.Errorf("%s: no leafd metric in %s", where, r.Expr)
		}
		var labels []string
		for _, name := range names {
			used[name] = true
			ex.checkName(t, where, name)
			labels = append(labels, lr.labels(name)...)
		}
		for _, s := range selectors(t, r.Expr) {
			lr.checkSelector(t, where, s)
		}
		// The labels it groups and matches by are those of its metrics.
		for _, m := range promGroupLabels.FindAllStringSubmatch(r.Expr, -1) {
			for _, l := range strings.Split(m[1], ",") {
				if l = strings.TrimSpace(l); l != "" && !slices.Contains(labels, l) {
					t.Errorf("%s: groups or matches by %s, a label none of %v has", where, l, names)
				}
			}
		}
	}

	var tests ruleTests
	readYAML(t, filepath.Join(rulesDir, rulesTestFile), &tests)
	series := 0
	for _, tg := range tests.Tests {
		for _, in := range tg.InputSeries {
			where := fmt.Sprintf("%s: test %s: series %s", rulesTestFile, tg.Name, in.Series)
			ss := selectors(t, in.Series)
			if len(ss) != 1 || !strings.HasPrefix(strings.TrimSpace(in.Series), ss[0].name+"{") {
				t.Errorf("%s: not a metric name with labels", where)
				continue
			}
			series++
			if slices.Contains(prometheusSeries, ss[0].name) {
				for _, m := range ss[0].matchers {
					if !slices.Contains(targetLabels, m.label) {
						t.Errorf("%s: Prometheus gives %s only the target's labels %v, not %s", where, ss[0].name, targetLabels, m.label)
					}
				}
			} else {
				ex.checkName(t, where, ss[0].name)
				lr.checkSelector(t, where, ss[0])
			}
			for _, l := range targetLabels {
				if !slices.ContainsFunc(ss[0].matchers, func(m matcher) bool { return m.label == l }) {
					t.Errorf("%s: no %s label, which every scraped series has", where, l)
				}
			}
		}
	}
	if series < 20 {
		t.Errorf("only %d input series in %s", series, rulesTestFile)
	}
	t.Logf("%d metrics in the rules, %d input series, checked against %d exported families (MySQL too: %v)", len(used), series, len(ex.types), ex.mysqlToo)
}

// Every alert tells the on-call engineer what happened and what to do: a
// severity, a summary, a description, and a runbook_url that leads to a
// section of the documentation. docs/metrics.md lists it, and its unit
// tests hold a case where it fires and one where it must not.
func TestPrometheusRulesDocumented(t *testing.T) {
	rules := alertRules(t)
	doc, err := os.ReadFile(metricsDoc)
	if err != nil {
		t.Fatal(err)
	}
	var tests ruleTests
	readYAML(t, filepath.Join(rulesDir, rulesTestFile), &tests)
	if !slices.Equal(tests.RuleFiles, []string{rulesFile}) {
		t.Errorf("%s tests %v, want [%s]", rulesTestFile, tests.RuleFiles, rulesFile)
	}
	fires, silent := map[string]int{}, map[string]int{}
	for _, tg := range tests.Tests {
		for _, at := range tg.AlertRuleTest {
			if len(at.ExpAlerts) == 0 {
				silent[at.Alertname]++
				continue
			}
			fires[at.Alertname]++
			for _, a := range at.ExpAlerts {
				if len(a.ExpAnnotations) == 0 {
					t.Errorf("%s: test %s: %s at %s is expected without its annotations", rulesTestFile, tg.Name, at.Alertname, at.EvalTime)
				}
			}
		}
	}
	alerts := map[string]bool{}
	for _, r := range rules {
		if r.Alert == "" {
			t.Errorf("%s: a rule that is not an alert (record %q): put recording rules in a file of their own", rulesFile, r.Record)
			continue
		}
		if alerts[r.Alert] {
			t.Errorf("%s: alert %s twice", rulesFile, r.Alert)
		}
		alerts[r.Alert] = true
		where := fmt.Sprintf("%s: alert %s", rulesFile, r.Alert)
		if !strings.HasPrefix(r.Alert, "Leafd") {
			t.Errorf("%s: the name does not start with Leafd", where)
		}
		if s := r.Labels["severity"]; s != "critical" && s != "warning" {
			t.Errorf("%s: severity %q, want critical or warning", where, s)
		}
		for _, a := range []string{"summary", "description", "runbook_url"} {
			if strings.TrimSpace(r.Annotations[a]) == "" {
				t.Errorf("%s: no %s annotation", where, a)
			}
		}
		if u := r.Annotations["runbook_url"]; u != "" {
			if err := docSection(u); err != nil {
				t.Errorf("%s: runbook_url %s: %v", where, u, err)
			}
		}
		if !strings.Contains(string(doc), "`"+r.Alert+"`") {
			t.Errorf("%s does not list the alert %s", metricsDoc, r.Alert)
		}
		if fires[r.Alert] == 0 {
			t.Errorf("%s: no unit test in %s where it fires", where, rulesTestFile)
		}
		if silent[r.Alert] == 0 {
			t.Errorf("%s: no unit test in %s where it must not fire", where, rulesTestFile)
		}
	}
	for name := range fires {
		if !alerts[name] {
			t.Errorf("%s tests an alert %s that %s does not have", rulesTestFile, name, rulesFile)
		}
	}
	for name := range silent {
		if !alerts[name] {
			t.Errorf("%s tests an alert %s that %s does not have", rulesTestFile, name, rulesFile)
		}
	}
}

// docSection returns an error unless ref, a path from the repository's
// root with an #anchor, names a Markdown file of it with a heading of that
// anchor.
func docSection(ref string) error {
	path, anchor, ok := strings.Cut(ref, "#")
	if !ok || anchor == "" || !strings.HasSuffix(path, ".md") || filepath.IsAbs(path) || strings.Contains(path, "..") {
		return fmt.Errorf("want a path of the repository's documentation with an #anchor, such as docs/operations.md#runbook")
	}
	f, err := os.Open(filepath.Join("..", filepath.FromSlash(path)))
	if err != nil {
		return err
	}
	defer f.Close()
	fenced := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
		}
		if h, ok := strings.CutPrefix(strings.TrimLeft(line, "#"), " "); !fenced && ok && strings.HasPrefix(line, "#") && headingAnchor(h) == anchor {
			return nil
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return fmt.Errorf("%s has no heading with the anchor #%s", path, anchor)
}

// markdownLink is a link or an image of Markdown, whose text alone is in
// a heading's anchor.
var markdownLink = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)

// headingAnchor returns the anchor GitHub gives a heading: its text (links
// reduced to their text, emphasis and code marks dropped) in lower case,
// with every character but letters, digits, spaces, hyphens and
// underscores removed, and spaces turned into hyphens. It is the slug of
// the repository's docs_test.go, with which TestDocLinks resolves the
// documentation's own links (a test package cannot import another's, so
// TestHeadingAnchor holds both to the same cases).
func headingAnchor(h string) string {
	h = markdownLink.ReplaceAllString(h, "$1")
	h = strings.ReplaceAll(h, "**", "")
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case unicode.IsLetter(r), unicode.IsDigit(r), r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

func TestDocSection(t *testing.T) {
	for _, tt := range []struct {
		ref string
		ok  bool
	}{
		{"docs/operations.md#the-database-is-down", true},
		{"docs/operations.md#a-tags-row-is-locked", true},
		{"docs/errors.md#2-the-id-routes", true},
		{"docs/operations.md#no-such-section", false},
		{"docs/no-such-file.md#runbook", false},
		{"docs/operations.md", false},
		{"../README.md#leafd", false},
	} {
		if err := docSection(tt.ref); (err == nil) != tt.ok {
			t.Errorf("docSection(%s) = %v, want ok %v", tt.ref, err, tt.ok)
		}
	}
}

// LeafdServerErrors counts, on the Leaf-compatible ID routes (which answer
// every error with 500), the codes whose native status is 5xx: exactly
// those, so that a new server-side code is not missed and a client's
// mistake (unknown_tag, mode_disabled) never counts.
func TestPrometheusServerErrorsCodes(t *testing.T) {
	var want []string
	for _, c := range leafd.Codes() {
		if s, _ := leafd.HTTPStatus(c); s >= 500 {
			want = append(want, c)
		}
	}
	found := false
	for _, r := range alertRules(t) {
		if r.Alert != "LeafdServerErrors" {
			continue
		}
		for _, s := range selectors(t, r.Expr) {
			if s.name != "leafd_errors_total" {
				continue
			}
			for _, m := range s.matchers {
				if m.label != "code" {
					continue
				}
				found = true
				got := strings.Split(m.value, "|")
				slices.Sort(got)
				if m.op != "=~" || !slices.Equal(got, want) {
					t.Errorf("LeafdServerErrors: leafd_errors_total{code%s%q}: want code=~ the codes whose status is 5xx, %q", m.op, m.value, strings.Join(want, "|"))
				}
			}
		}
	}
	if !found {
		t.Errorf("LeafdServerErrors does not pick the Leaf-compatible routes' server errors from leafd_errors_total by code")
	}
}

func TestHeadingAnchor(t *testing.T) {
	for _, tt := range []struct{ heading, want string }{
		{"A tag's row is locked", "a-tags-row-is-locked"},
		{"2. The ID routes", "2-the-id-routes"},
		{"How much per tag: `metrics.per_tag`", "how-much-per-tag-metricsper_tag"},
		{"**Bold** words", "bold-words"},
		{"The [contract](contract.md#errors) says", "the-contract-says"},
		{"![logo](logo.png) leafd", "logo-leafd"},
		{"Upgrading from a server without `metrics.per_tag`", "upgrading-from-a-server-without-metricsper_tag"},
	} {
		if got := headingAnchor(tt.heading); got != tt.want {
			t.Errorf("headingAnchor(%q) = %q, want %q", tt.heading, got, tt.want)
		}
	}
}

// operationsDoc is the operations guide, whose "Metrics and alerts" table
// leads from each shipped alert to its incident.
const operationsDoc = "../docs/operations.md"

// The operations guide names the shipped alerts rather than expressions of
// its own: every Leafd… name in it is an alert of the rule file, and every
// alert of the rule file is in its table.
func TestPrometheusAlertsInOperations(t *testing.T) {
	doc, err := os.ReadFile(operationsDoc)
	if err != nil {
		t.Fatal(err)
	}
	alerts := map[string]bool{}
	for _, r := range alertRules(t) {
		alerts[r.Alert] = true
		if !strings.Contains(string(doc), "`"+r.Alert+"`") {
			t.Errorf("%s does not name the alert %s", operationsDoc, r.Alert)
		}
	}
	for _, m := range regexp.MustCompile("`(Leafd[A-Za-z]*)`").FindAllStringSubmatch(string(doc), -1) {
		if !alerts[m[1]] {
			t.Errorf("%s names an alert %s that %s does not have", operationsDoc, m[1], rulesFile)
		}
	}
	if regexp.MustCompile(`(?m)^\|[^|\n]*\b(?:increase|rate)\(|^\| ` + "`leafd_[a-z_]+[^`]*(?:==|>|<)").Match(doc) {
		t.Errorf("%s lists an alert's expression in a table: name the shipped alert instead", operationsDoc)
	}
}
