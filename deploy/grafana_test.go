package deploy_test

import (
	"encoding/json"
	"fmt"
	"os"
	"testing"
)

const dashboardFile = "grafana-dashboard.json"

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

// Every metric that a query of the dashboard names is one that leafd
// exports: a renamed or removed metric fails here, naming the panel.
func TestGrafanaDashboardMetricsExist(t *testing.T) {
	ex := exportedMetrics(t)
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
			ex.checkName(t, fmt.Sprintf("%s (query %s)", q.where, q.expr), name)
		}
	}
	t.Logf("%d queries, %d metrics, checked against %d exported families (MySQL too: %v)", len(qs), len(used), len(ex.types), ex.mysqlToo)
}
