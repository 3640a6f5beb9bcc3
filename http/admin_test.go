package http_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/leafd/leafd"
	leafhttp "github.com/leafd/leafd/http"
	"github.com/leafd/leafd/internal/testkit/testdb"
	"github.com/leafd/leafd/segment"
	"github.com/leafd/leafd/store"
)

const token = "s3cret-token"

// adminStore is what these tests use of a store.
type adminStore interface {
	segment.Store
	leafhttp.Tags
	Migrate(context.Context) error
	Close() error
}

// adminServer is one leafd HTTP server with segment mode and the admin
// routes over a real store.
type adminServer struct {
	url   string
	store adminStore
	alloc *segment.Allocator
}

func openAdminStore(tb testing.TB, driver, dsn string) adminStore {
	tb.Helper()
	s, err := store.Open(driver, dsn)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	if err := s.Migrate(context.Background()); err != nil {
		tb.Fatal(err)
	}
	return s
}

// newAdminServer starts a server over the database dsn; token "" switches
// the admin routes off.
func newAdminServer(tb testing.TB, driver, dsn, adminToken string) *adminServer {
	tb.Helper()
	s := openAdminStore(tb, driver, dsn)
	a := startAllocator(tb, s, segment.Config{MaxStep: 100, WaitTimeout: time.Second, TagRefresh: time.Hour, Logger: quiet})
	srv := httptest.NewServer(leafhttp.New(leafhttp.Config{
		Segment: a, Tags: s, AdminToken: adminToken, MaxStep: 5000, Logger: quiet,
	}).Handler())
	tb.Cleanup(srv.Close)
	return &adminServer{url: srv.URL, store: s, alloc: a}
}

// forEachDriver runs f on a fresh database of every engine.
func forEachDriver(t *testing.T, f func(t *testing.T, driver, dsn string)) {
	testdb.Each(t, store.Drivers(), f)
}

func send(tb testing.TB, method, url, body string, header ...string) response {
	tb.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		tb.Fatal(err)
	}
	return response{res.StatusCode, res.Header.Get("Content-Type"), string(b)}
}

func authed(tb testing.TB, method, url, body string) response {
	tb.Helper()
	return send(tb, method, url, body, "Authorization", "Bearer "+token, "Content-Type", "application/json")
}

type tagBody struct {
	Tag, MaxID, Description, UpdateTime string
	Step                                int64
}

func decodeTag(tb testing.TB, r response) tagBody {
	tb.Helper()
	var raw struct {
		Tag         string `json:"tag"`
		MaxID       string `json:"max_id"`
		Step        int64  `json:"step"`
		Description string `json:"description"`
		UpdateTime  string `json:"update_time"`
	}
	if err := json.Unmarshal([]byte(r.body), &raw); err != nil {
		tb.Fatalf("body %q is not a tag: %v", r.body, err)
	}
	if _, err := time.Parse(time.RFC3339, raw.UpdateTime); err != nil || !strings.HasSuffix(raw.UpdateTime, "Z") {
		tb.Fatalf("update_time %q is not RFC 3339 UTC", raw.UpdateTime)
	}
	return tagBody{raw.Tag, raw.MaxID, raw.Description, raw.UpdateTime, raw.Step}
}

func TestAdminAuth(t *testing.T) {
	driver := store.DefaultDriver()
	dsn := testdb.DSN(t, driver)
	off := newAdminServer(t, driver, dsn, "")
	on := newAdminServer(t, driver, dsn, token)
	routes := [][2]string{{"GET", "/api/tags"}, {"POST", "/api/tags"}, {"PATCH", "/api/tags/x"}}
	for _, rt := range routes {
		r := send(t, rt[0], off.url+rt[1], `{"tag":"x"}`, "Authorization", "Bearer "+token)
		if r.status != 403 || errorCode(t, r) != leafd.EAdminDisabled {
			t.Fatalf("%s %s with no token configured = %d %q, want 403 admin_disabled", rt[0], rt[1], r.status, r.body)
		}
		for name, header := range map[string][]string{
			"Missing":     nil,
			"Wrong":       {"Authorization", "Bearer " + token + "x"},
			"Prefix":      {"Authorization", "Bearer " + token[:5]},
			"Empty":       {"Authorization", "Bearer "},
			"OtherScheme": {"Authorization", "Basic " + token},
			"NoScheme":    {"Authorization", token},
		} {
			r := send(t, rt[0], on.url+rt[1], `{"tag":"x"}`, header...)
			if r.status != 401 || errorCode(t, r) != leafd.EUnauthorized {
				t.Fatalf("%s %s, token %s = %d %q, want 401 unauthorized", rt[0], rt[1], name, r.status, r.body)
			}
		}
	}
	// The scheme word is case-insensitive.
	if r := send(t, "GET", on.url+"/api/tags", "", "Authorization", "bEaReR "+token); r.status != 200 {
		t.Fatalf("lower-case scheme: %d %q", r.status, r.body)
	}
}

// A tag created through the API is served at once by the server that
// created it and by another server on the same database (which looks it up
// in the store before its next refresh); its step changes through PATCH;
// GET lists it.
func TestAdminTagLifecycle(t *testing.T) {
	forEachDriver(t, func(t *testing.T, driver, dsn string) {
		one := newAdminServer(t, driver, dsn, token)
		two := newAdminServer(t, driver, dsn, token)

		r := authed(t, "POST", one.url+"/api/tags", `{"tag":"order","step":50,"max_id":"1001","description":"orders"}`)
		if r.status != 201 {
			t.Fatalf("POST = %d %q", r.status, r.body)
		}
		if got := decodeTag(t, r); got.Tag != "order" || got.MaxID != "1001" || got.Step != 50 || got.Description != "orders" {
			t.Fatalf("POST answered %+v", got)
		}
		// Served at once by the server that created it ...
		if r := do(t, "GET", one.url+"/segment/order"); r.status != 200 || r.body != "1001\n" {
			t.Fatalf("first ID from the creating server = %d %q, want 1001", r.status, r.body)
		}
		// ... and at once by the other one, which looks a tag it has not
		// read yet up in the store, with a range of its own.
		if r := do(t, "GET", two.url+"/segment/order"); r.status != 200 || r.body == "1001\n" {
			t.Fatalf("the other server before its refresh = %d %q, want 200 and an ID of another range", r.status, r.body)
		}
		if err := two.alloc.Refresh(context.Background()); err != nil {
			t.Fatal(err)
		}
		if r := do(t, "GET", two.url+"/segment/order"); r.status != 200 || r.body == "1001\n" {
			t.Fatalf("the other server after its refresh = %d %q", r.status, r.body)
		}

		r = authed(t, "POST", two.url+"/api/tags", `{"tag":"order"}`)
		if r.status != 409 || errorCode(t, r) != leafd.ETagExists {
			t.Fatalf("POST of an existing tag = %d %q, want 409 tag_exists", r.status, r.body)
		}
		r = authed(t, "POST", two.url+"/api/tags", `{"tag":"pay"}`)
		if got := decodeTag(t, r); r.status != 201 || got.Step != 1000 || got.MaxID != "1" || got.Description != "" {
			t.Fatalf("POST with defaults = %d %+v, want step 1000, max_id 1", r.status, got)
		}

		r = authed(t, "PATCH", one.url+"/api/tags/order", `{"step":2000}`)
		if got := decodeTag(t, r); r.status != 200 || got.Step != 2000 || got.Description != "orders" {
			t.Fatalf("PATCH step = %d %q", r.status, r.body)
		}
		if st, _ := one.alloc.TagState("order"); st.MinStep != 2000 {
			t.Fatalf("the server's table step after PATCH = %d, want 2000 for its next load", st.MinStep)
		}
		r = authed(t, "PATCH", one.url+"/api/tags/order", `{"description":""}`)
		if got := decodeTag(t, r); r.status != 200 || got.Description != "" || got.Step != 2000 {
			t.Fatalf("PATCH description = %d %q", r.status, r.body)
		}

		r = authed(t, "GET", one.url+"/api/tags", "")
		var list struct {
			Tags []struct {
				Tag   string `json:"tag"`
				MaxID string `json:"max_id"`
				Step  int64  `json:"step"`
			} `json:"tags"`
		}
		if err := json.Unmarshal([]byte(r.body), &list); err != nil || r.status != 200 || len(list.Tags) != 2 ||
			list.Tags[0].Tag != "order" || list.Tags[0].Step != 2000 || list.Tags[1].Tag != "pay" {
			t.Fatalf("GET /api/tags = %d %q", r.status, r.body)
		}
	})
}

func TestAdminBadInput(t *testing.T) {
	forEachDriver(t, func(t *testing.T, driver, dsn string) {
		srv := newAdminServer(t, driver, dsn, token)
		if r := authed(t, "POST", srv.url+"/api/tags", `{"tag":"order"}`); r.status != 201 {
			t.Fatalf("setup: %d %q", r.status, r.body)
		}
		long := strings.Repeat("é", 257)
		tests := []struct {
			name, method, path, body string
			status                   int
			code                     string
		}{
			{"NotJSON", "POST", "/api/tags", `tag=order`, 400, leafd.EInvalidBody},
			{"Empty", "POST", "/api/tags", ``, 400, leafd.EInvalidBody},
			{"Array", "POST", "/api/tags", `[{"tag":"a"}]`, 400, leafd.EInvalidBody},
			{"UnknownField", "POST", "/api/tags", `{"tag":"a","stepp":5}`, 400, leafd.EInvalidBody},
			{"TwoObjects", "POST", "/api/tags", `{"tag":"a"}{"tag":"b"}`, 400, leafd.EInvalidBody},
			{"NoTag", "POST", "/api/tags", `{"step":5}`, 400, leafd.EInvalidTag},
			{"BadTag", "POST", "/api/tags", `{"tag":"a b"}`, 400, leafd.EInvalidTag},
			{"TagTooLong", "POST", "/api/tags", `{"tag":"` + strings.Repeat("a", 129) + `"}`, 400, leafd.EInvalidTag},
			{"StepZero", "POST", "/api/tags", `{"tag":"a","step":0}`, 400, leafd.EInvalidBody},
			{"StepOverMax", "POST", "/api/tags", `{"tag":"a","step":5001}`, 400, leafd.EInvalidBody},
			{"StepString", "POST", "/api/tags", `{"tag":"a","step":"5"}`, 400, leafd.EInvalidBody},
			{"StepFraction", "POST", "/api/tags", `{"tag":"a","step":1.5}`, 400, leafd.EInvalidBody},
			{"MaxIDZero", "POST", "/api/tags", `{"tag":"a","max_id":0}`, 400, leafd.EInvalidBody},
			{"MaxIDNegative", "POST", "/api/tags", `{"tag":"a","max_id":"-4"}`, 400, leafd.EInvalidBody},
			{"MaxIDNearEnd", "POST", "/api/tags", `{"tag":"a","max_id":"9223372036854775000"}`, 400, leafd.EInvalidBody},
			{"MaxIDOverflow", "POST", "/api/tags", `{"tag":"a","max_id":"9223372036854775808"}`, 400, leafd.EInvalidBody},
			{"DescriptionLong", "POST", "/api/tags", `{"tag":"a","description":"` + long + `"}`, 400, leafd.EInvalidBody},
			{"BodyTooLarge", "POST", "/api/tags", `{"tag":"a","description":"` + strings.Repeat("x", 70<<10) + `"}`, 413, leafd.EBodyTooLarge},
			{"PatchUnknownTag", "PATCH", "/api/tags/nope", `{"step":5}`, 404, leafd.EUnknownTag},
			{"PatchBadTag", "PATCH", "/api/tags/a$b", `{"step":5}`, 400, leafd.EInvalidTag},
			{"PatchNothing", "PATCH", "/api/tags/order", `{}`, 400, leafd.EInvalidBody},
			{"PatchMaxID", "PATCH", "/api/tags/order", `{"max_id":"1"}`, 400, leafd.EInvalidBody},
			{"PatchTagField", "PATCH", "/api/tags/order", `{"tag":"other"}`, 400, leafd.EInvalidBody},
			{"PatchStepOverMax", "PATCH", "/api/tags/order", `{"step":5001}`, 400, leafd.EInvalidBody},
			{"PatchNull", "PATCH", "/api/tags/order", `null`, 400, leafd.EInvalidBody},
			{"PutNotAllowed", "PUT", "/api/tags/order", `{"step":5}`, 405, leafd.EMethodNotAllowed},
			{"DeleteNotAllowed", "DELETE", "/api/tags/order", ``, 405, leafd.EMethodNotAllowed},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				r := authed(t, tt.method, srv.url+tt.path, tt.body)
				if r.status != tt.status || errorCode(t, r) != tt.code {
					t.Fatalf("%s %s %.60q = %d %q, want %d %s", tt.method, tt.path, tt.body, r.status, r.body, tt.status, tt.code)
				}
			})
		}
		// Nothing of the above changed the table.
		tags, err := srv.store.ListTags(context.Background())
		if err != nil || len(tags) != 1 || tags[0].Name != "order" || tags[0].Step != 1000 || tags[0].MaxID != 1 {
			t.Fatalf("table after bad requests: %+v, %v", tags, err)
		}
	})
}

// A body the admin routes refuse is explained in the API's terms: which
// field wants what, or where the JSON breaks; never Go's types or struct
// names.
func TestAdminBodyErrorsSpeakJSON(t *testing.T) {
	const maxStep = 5000
	for _, c := range []struct {
		name, body string
		patch      bool
		want       []string
	}{
		{"StepString", `{"tag":"x","step":"abc"}`, false, []string{`"step" must be a whole number from 1 to 5000, not a string`}},
		{"StepFraction", `{"tag":"x","step":1.5}`, false, []string{`"step" must be a whole number from 1 to 5000, not 1.5`}},
		{"StepHuge", `{"tag":"x","step":99999999999999999999}`, false, []string{`"step" must be a whole number from 1 to 5000`}},
		{"StepBool", `{"tag":"x","step":true}`, false, []string{`"step" must be a whole number`, "not true or false"}},
		{"TagNumber", `{"tag":5}`, false, []string{`"tag" must be a string`, "not a number"}},
		{"DescriptionObject", `{"tag":"x","description":{}}`, false, []string{`"description" must be a string of at most 256 characters, not an object`}},
		{"MaxIDWord", `{"tag":"x","max_id":"abc"}`, false, []string{`"max_id" must be a whole number`, `not "abc"`}},
		{"Array", `[{"tag":"a"}]`, false, []string{"the body is an array, not a JSON object"}},
		{"String", `"order"`, false, []string{"the body is a string, not a JSON object"}},
		{"Syntax", `tag=order`, false, []string{"the body is not valid JSON at byte 2"}},
		{"TrailingComma", `{"tag":"a",}`, false, []string{"the body is not valid JSON at byte 12"}},
		{"Truncated", `{"tag":"a"`, false, []string{"the body ends before its JSON does"}},
		{"Empty", ``, false, []string{"the body is empty", `{"tag":"order","step":1000}`}},
		{"TwoObjects", `{"tag":"a"}{"tag":"b"}`, false, []string{"more than one JSON value"}},
		{"UnknownField", `{"tag":"a","stepp":5}`, false, []string{`unknown field "stepp"`, `"tag", "step", "max_id", "description"`}},
		{"PatchStepString", `{"step":"2000"}`, true, []string{`"step" must be a whole number from 1 to 5000, not a string`, `{"step":2000}`}},
		{"PatchUnknownField", `{"tag":"other"}`, true, []string{`unknown field "tag": the fields are "step", "description";`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var err error
			if c.patch {
				_, err = leafhttp.ParseUpdateTag(strings.NewReader(c.body), maxStep)
			} else {
				_, err = leafhttp.ParseCreateTag(strings.NewReader(c.body), maxStep)
			}
			if code := leafd.ErrorCode(err); code != leafd.EInvalidBody {
				t.Fatalf("%s: %v (code %q), want invalid_body", c.body, err, code)
			}
			msg := leafd.ErrorMessage(err)
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("%s: message %q does not say %q", c.body, msg, w)
				}
			}
			for _, never := range []string{"Go ", "struct", "int64", "unmarshal", "json:", "Request"} {
				if strings.Contains(msg, never) {
					t.Errorf("%s: message %q speaks Go (%q)", c.body, msg, never)
				}
			}
		})
	}
}

// With the database unreachable (a server where nothing listens), the
// admin routes answer 503 store_unavailable.
func TestAdminStoreUnavailable(t *testing.T) {
	testdb.Each(t, store.FallbackDrivers(), func(t *testing.T, driver, dsn string) {
		testAdminStoreUnavailable(t, driver, testdb.Unreachable(driver, dsn))
	})
}

func testAdminStoreUnavailable(t *testing.T, driver, dsn string) {
	s, err := store.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	srv := httptest.NewServer(leafhttp.New(leafhttp.Config{Tags: s, AdminToken: token, Logger: quiet}).Handler())
	defer srv.Close()
	for _, rt := range [][3]string{{"GET", "/api/tags", ""}, {"POST", "/api/tags", `{"tag":"a"}`}, {"PATCH", "/api/tags/a", `{"step":5}`}} {
		r := authed(t, rt[0], srv.URL+rt[1], rt[2])
		if r.status != 503 || errorCode(t, r) != leafd.EStoreUnavailable {
			t.Fatalf("%s %s with the store closed = %d %q, want 503 store_unavailable", rt[0], rt[1], r.status, r.body)
		}
	}
}

// With admin.protect_dashboard, the dashboard and /api/state need the
// admin token: as a bearer token, or as the password of HTTP Basic, which
// a browser asks for; so does /metrics, which names every tag. The ID
// routes stay open.
func TestProtectDashboard(t *testing.T) {
	s := openAdminStore(t, store.DefaultDriver(), testdb.DSN(t, store.DefaultDriver()))
	srv := httptest.NewServer(leafhttp.New(leafhttp.Config{Tags: s, AdminToken: token, ProtectDashboard: true, Logger: quiet}).Handler())
	defer srv.Close()
	for _, path := range []string{"/dashboard", "/api/state"} {
		r := send(t, "GET", srv.URL+path, "")
		if r.status != 401 || errorCode(t, r) != leafd.EUnauthorized {
			t.Fatalf("%s without credentials = %d %q, want 401", path, r.status, r.body)
		}
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if !strings.HasPrefix(res.Header.Get("WWW-Authenticate"), "Basic ") {
			t.Fatalf("%s: WWW-Authenticate %q, want a Basic challenge a browser answers", path, res.Header.Get("WWW-Authenticate"))
		}
		for name, header := range map[string][]string{
			"WrongBasic":  {"Authorization", "Basic " + base64.StdEncoding.EncodeToString([]byte("ops:nope"))},
			"WrongBearer": {"Authorization", "Bearer nope"},
		} {
			if r := send(t, "GET", srv.URL+path, "", header...); r.status != 401 {
				t.Fatalf("%s with %s = %d", path, name, r.status)
			}
		}
		for name, header := range map[string][]string{
			"Basic":  {"Authorization", "Basic " + base64.StdEncoding.EncodeToString([]byte("ops:"+token))},
			"Bearer": {"Authorization", "Bearer " + token},
		} {
			if r := send(t, "GET", srv.URL+path, "", header...); r.status != 200 {
				t.Fatalf("%s with the token as %s = %d %q", path, name, r.status, r.body)
			}
		}
	}
	// /metrics names every tag: it is guarded with the dashboard.
	if r := send(t, "GET", srv.URL+"/metrics", ""); r.status != 401 {
		t.Fatalf("/metrics without the token = %d, want 401: it lists every tag", r.status)
	}
	if r := send(t, "GET", srv.URL+"/metrics", "", "Authorization", "Bearer "+token); r.status != 200 {
		t.Fatalf("/metrics with the token = %d", r.status)
	}
	// The admin routes themselves take only the bearer token.
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("ops:"+token))
	if r := send(t, "GET", srv.URL+"/api/tags", "", "Authorization", basic); r.status != 401 {
		t.Fatalf("/api/tags with Basic = %d, want 401", r.status)
	}
}
