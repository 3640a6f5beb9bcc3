package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/leafd/leafd/internal/testkit/testdb"
	"github.com/leafd/leafd/store"
)

// The binary wires the dashboard, /api/state and /metrics to its store and
// allocators: the store's health, the tags' state, the snowflake lease, and
// the range-load hook behind the latency histogram.
func TestDashboardStateAndMetricsOfTheBinary(t *testing.T) {
	driver := store.DefaultDriver() // LEAFD_STORE_DRIVER unset
	p := startLeafd(t, "LEAFD_STORE_DSN="+testdb.DSN(t, driver), "LEAFD_SEGMENT_SEED_TAGS=order:100",
		"LEAFD_SNOWFLAKE_ENABLED=true")
	waitReady(t, p)
	if code, body := get(t, http.DefaultClient, p.addr+"/segment/order?count=3"); code != 200 {
		t.Fatalf("GET /segment/order: %d %s", code, body)
	}

	code, body := get(t, http.DefaultClient, p.addr+"/") // follows the redirect
	if code != 200 || !strings.Contains(body, "<title>leafd</title>") {
		t.Fatalf("GET / = %d, not the dashboard", code)
	}

	code, body = get(t, http.DefaultClient, p.addr+"/api/state")
	var st struct {
		Store struct {
			Driver string
			OK     bool
		}
		Segment struct {
			Tags []struct {
				Tag    string
				Issued int64
			}
		}
		Snowflake struct {
			WorkerSource string `json:"worker_source"`
		}
	}
	if err := json.Unmarshal([]byte(body), &st); code != 200 || err != nil {
		t.Fatalf("GET /api/state = %d %v: %s", code, err, body)
	}
	if st.Store.Driver != driver || !st.Store.OK || len(st.Segment.Tags) != 1 || st.Segment.Tags[0].Issued != 3 ||
		st.Snowflake.WorkerSource != "lease" {
		t.Fatalf("state: %s", body)
	}

	code, body = get(t, http.DefaultClient, p.addr+"/metrics")
	for _, want := range []string{
		`leafd_segment_range_load_duration_seconds_count{result="ok"} 1`,
		`leafd_ids_issued_total{mode="segment",tag="order"} 3`,
		`leafd_store_up{driver="` + driver + `"} 1`,
		`leafd_snowflake_worker_id{source="lease"} 0`,
		`leafd_http_requests_total{method="GET",route="/segment/:tag",status="200"} 1`,
	} {
		if code != 200 || !strings.Contains(body, want) {
			t.Errorf("/metrics (%d) lacks %s", code, want)
		}
	}
}
