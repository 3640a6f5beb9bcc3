package api_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A dated tag's answers match the spec, and every field /api/state shows
// of it (its period, capacity, numbers used and when they would run out)
// is a documented property of TagState.
func TestDatedTagMatchesSpec(t *testing.T) {
	sp := loadSpec(t)
	v := newValidator(t, sp)
	srv := httptest.NewServer(newServer(t, options{}).Handler())
	t.Cleanup(srv.Close)
	jsonBody := []string{"Authorization", "Bearer " + adminToken, "Content-Type", "application/json"}
	var state []byte
	for _, ex := range []exchange{
		{method: "POST", path: "/api/tags", header: jsonBody, body: `{"tag":"orders","format":"dated","period":"day","zone":"Asia/Shanghai","digits":6}`, status: 201},
		{method: "GET", path: "/segment/orders?count=5&format=json", status: 200},
		{method: "GET", path: "/segment/orders/range?size=5", status: 409, code: "range_unsupported"},          // without expiring=true
		{method: "GET", path: "/segment/orders/range?size=5&expiring=yes", status: 400, code: "invalid_query"}, // true is its only value
		{method: "GET", path: "/segment/orders/range?size=5&expiring=true", status: 200},                       // with valid_ms, checked against the spec
		{method: "GET", path: "/api/state?q=orders", status: 200},
	} {
		req, err := http.NewRequest(ex.method, srv.URL+ex.path, strings.NewReader(ex.body))
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+1 < len(ex.header); i += 2 {
			req.Header.Set(ex.header[i], ex.header[i+1])
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode != ex.status || (ex.code != "" && !strings.Contains(string(body), `"code":"`+ex.code+`"`)) {
			t.Fatalf("%s %s: %d %.300q, want %d %s", ex.method, ex.path, res.StatusCode, body, ex.status, ex.code)
		}
		v.check(t, ex, res, body)
		if strings.Contains(ex.path, "/range") && ex.status == 200 && !strings.Contains(string(body), `"valid_ms":`) {
			t.Fatalf("%s: %s, want a valid_ms", ex.path, body)
		}
		state = body
	}
	var st struct {
		Segment struct {
			Tags []map[string]json.RawMessage `json:"tags"`
		} `json:"segment"`
	}
	if err := json.Unmarshal(state, &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Segment.Tags) != 1 {
		t.Fatalf("/api/state?q=orders lists %d tags, want orders alone: %.500s", len(st.Segment.Tags), state)
	}
	tag := st.Segment.Tags[0]
	for _, key := range []string{"period", "period_end", "period_capacity", "period_used"} {
		if _, ok := tag[key]; !ok {
			t.Errorf("the state of a dated tag has no %s: %s", key, state)
		}
	}
	for key := range tag {
		if sp.at("/components/schemas/TagState/properties/"+escape(key)) == nil {
			t.Errorf("/api/state shows %s of a dated tag, which the spec's TagState does not document", key)
		}
	}
}
