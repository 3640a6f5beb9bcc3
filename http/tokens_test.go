package http_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/access"
	leafhttp "github.com/leafd/leafd/http"
	"github.com/leafd/leafd/internal/testkit/testdb"
	leafmetrics "github.com/leafd/leafd/metrics"
	"github.com/leafd/leafd/segment"
	"github.com/leafd/leafd/snowflake"
	"github.com/leafd/leafd/store"
)

// tokenServer is one server with both modes, segment.require_token and
// snowflake.require_token on, over a store of its own on a shared
// database.
type tokenServer struct {
	url     string
	metrics *leafmetrics.Registry
}

// flakyTokens is a store whose ListTokens can be made to fail, as an
// unreachable database would.
type flakyTokens struct {
	store.Store
	down atomic.Bool
}

func (f *flakyTokens) ListTokens(ctx context.Context) ([]store.Token, error) {
	if f.down.Load() {
		return nil, leafd.Errorf(leafd.EStoreUnavailable, "the database is down (test)")
	}
	return f.Store.ListTokens(ctx)
}

func newTokenServer(t *testing.T, driver, dsn string, workerID int64, tokens leafhttp.Tokens) *tokenServer {
	t.Helper()
	s, err := store.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	if tokens == nil {
		tokens = s
	}
	a := startAllocator(t, s, segment.Config{WaitTimeout: 5 * time.Second, TagRefresh: time.Hour, Logger: quiet})
	g, err := snowflake.New(snowflake.Settings{WorkerID: workerID, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	m := leafmetrics.New()
	acc := access.New(access.Config{Store: tokens, Segment: true, Snowflake: true, Registerer: m.Registerer(), Logger: quiet})
	t.Cleanup(acc.Close)
	srv := leafhttp.New(leafhttp.Config{
		Segment: a, Snowflake: g, Tags: s, Tokens: tokens, AdminToken: token, Logger: quiet, Metrics: m, Access: acc,
	})
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return &tokenServer{url: ts.URL, metrics: m}
}

// do sends a request with an optional bearer token and body, and returns
// the status and body.
func tokenDo(t *testing.T, method, url, bearer, contentType, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func wantStatus(t *testing.T, what string, status int, body string, want int, code string) {
	t.Helper()
	if status != want || !strings.Contains(body, code) {
		t.Fatalf("%s: %d %s, want %d with %q", what, status, body, want, code)
	}
}

// createToken makes a token through the admin route.
func createToken(t *testing.T, url string, tags ...string) (id, text string) {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"tags": tags, "description": "test"})
	status, body := tokenDo(t, "POST", url+"/api/tokens", token, "application/json", string(b))
	if status != http.StatusCreated {
		t.Fatalf("POST /api/tokens: %d %s", status, body)
	}
	var out struct {
		ID, Token, Created string
		Tags               []string
	}
	if err := json.Unmarshal([]byte(body), &out); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.Token, store.TokenPrefix) || out.ID == "" || strings.Contains(out.Token, "hash") || out.Created == "" {
		t.Fatalf("POST /api/tokens answered %s", body)
	}
	return out.ID, out.Token
}

func TestTokens(t *testing.T) {
	testdb.Each(t, store.Drivers(), func(t *testing.T, driver, dsn string) {
		t.Parallel() // the engines at once: most of it is waiting for a refresh
		testTokens(t, driver, dsn)
	})
}

// testTokens: the ID routes refuse a request without a token (401), with
// a token for other tags (403), and serve one with a token that allows the
// tag, exactly or by prefix, on the Leaf route with ?token= too; a token
// revoked on one server is refused by both within 5 s.
func testTokens(t *testing.T, driver, dsn string) {
	a := newTokenServer(t, driver, dsn, 1, nil)
	b := newTokenServer(t, driver, dsn, 2, nil)
	for _, tag := range []string{"order", "payment", "other"} {
		if status, body := tokenDo(t, "POST", a.url+"/api/tags", token, "", `{"tag":"`+tag+`"}`); status != http.StatusCreated {
			t.Fatalf("create %s: %d %s", tag, status, body)
		}
	}
	orderID, order := createToken(t, a.url, "order", "pay*")
	_, sf := createToken(t, a.url, "snowflake")
	_, all := createToken(t, a.url, "*")
	// b reads the tokens made through a within its refresh (2 s).
	for start := time.Now(); ; time.Sleep(50 * time.Millisecond) {
		if status, _ := tokenDo(t, "GET", b.url+"/snowflake", all, "", ""); status == http.StatusOK {
			break
		}
		if time.Since(start) > 5*time.Second {
			t.Fatal("the other server does not know a new token after 5 s")
		}
	}

	for _, srv := range []*tokenServer{a, b} {
		status, body := tokenDo(t, "GET", srv.url+"/segment/order", "", "", "")
		wantStatus(t, "no token", status, body, http.StatusUnauthorized, leafd.ETokenRequired)
		status, body = tokenDo(t, "GET", srv.url+"/segment/order", "leafd_nonsense", "", "")
		wantStatus(t, "a made-up token", status, body, http.StatusForbidden, leafd.ETokenRefused)
		status, body = tokenDo(t, "GET", srv.url+"/segment/order", order[:len(order)-1]+"x", "", "")
		wantStatus(t, "a wrong secret", status, body, http.StatusForbidden, leafd.ETokenRefused)
		status, body = tokenDo(t, "GET", srv.url+"/segment/other", order, "", "")
		wantStatus(t, "another tag", status, body, http.StatusForbidden, leafd.ETokenRefused)
		status, body = tokenDo(t, "GET", srv.url+"/segment/order", sf, "", "")
		wantStatus(t, "the snowflake token on segment", status, body, http.StatusForbidden, leafd.ETokenRefused)
		status, body = tokenDo(t, "GET", srv.url+"/segment/order?count=2", order, "", "")
		wantStatus(t, "the right token", status, body, http.StatusOK, "\n")
		status, body = tokenDo(t, "GET", srv.url+"/segment/payment", order, "", "")
		wantStatus(t, "a prefix pattern", status, body, http.StatusOK, "\n")
		status, body = tokenDo(t, "GET", srv.url+"/segment/other", all, "", "")
		wantStatus(t, "*", status, body, http.StatusOK, "\n")
		status, body = tokenDo(t, "GET", srv.url+"/segment/a%20b", order, "", "")
		wantStatus(t, "an invalid tag", status, body, http.StatusBadRequest, leafd.EInvalidTag)
		// A token in the URL of a native route is refused, saying where it
		// goes, not answered token_required.
		status, body = tokenDo(t, "GET", srv.url+"/segment/order?token="+order, "", "", "")
		wantStatus(t, "?token= on a native route", status, body, http.StatusBadRequest, leafd.EInvalidQuery)
		if !strings.Contains(body, "Authorization: Bearer") {
			t.Errorf("?token= on a native route: %s; want the message to name the header", body)
		}
		status, body = tokenDo(t, "GET", srv.url+"/snowflake?%74oken="+sf, "", "", "")
		wantStatus(t, "?%74oken= on the snowflake route", status, body, http.StatusBadRequest, leafd.EInvalidQuery)

		// Leaf's route: ?token= or the header; refusals with their status.
		status, body = tokenDo(t, "GET", srv.url+"/api/segment/get/order?token="+order, "", "", "")
		wantStatus(t, "Leaf route with ?token=", status, body, http.StatusOK, "")
		status, body = tokenDo(t, "GET", srv.url+"/api/segment/get/order", order, "", "")
		wantStatus(t, "Leaf route with the header", status, body, http.StatusOK, "")
		status, body = tokenDo(t, "GET", srv.url+"/api/segment/get/order", "", "", "")
		wantStatus(t, "Leaf route without a token", status, body, http.StatusUnauthorized, leafd.ETokenRequired+": ")
		status, body = tokenDo(t, "GET", srv.url+"/api/segment/get/other?token="+order, "", "", "")
		wantStatus(t, "Leaf route, another tag", status, body, http.StatusForbidden, leafd.ETokenRefused+": ")
		status, body = tokenDo(t, "GET", srv.url+"/api/segment/get/order?token="+order+"&token="+order, "", "", "")
		wantStatus(t, "Leaf route, token twice", status, body, http.StatusInternalServerError, leafd.EInvalidQuery+": ")
		// Names are %-decoded, as everywhere in a query.
		status, body = tokenDo(t, "GET", srv.url+"/api/segment/get/order?%74oken="+order, "", "", "")
		wantStatus(t, "Leaf route with ?%74oken=", status, body, http.StatusOK, "")
		status, body = tokenDo(t, "GET", srv.url+"/api/segment/get/order?token="+order+"&%74oken="+order, "", "", "")
		wantStatus(t, "Leaf route, token twice, once escaped", status, body, http.StatusInternalServerError, leafd.EInvalidQuery+": ")

		// The refusals show per tag in /api/state, never the tokens.
		status, body = tokenDo(t, "GET", srv.url+"/api/state", "", "", "")
		var st struct {
			Segment struct {
				Tags []struct {
					Tag           string `json:"tag"`
					TokenRefusals int64  `json:"token_refusals"`
				} `json:"tags"`
			} `json:"segment"`
		}
		if err := json.Unmarshal([]byte(body), &st); status != http.StatusOK || err != nil {
			t.Fatalf("GET /api/state: %d %v", status, err)
		}
		refusals := map[string]int64{}
		for _, tag := range st.Segment.Tags {
			refusals[tag.Tag] = tag.TokenRefusals
		}
		if refusals["order"] < 5 || refusals["other"] < 2 || refusals["payment"] != 0 || strings.Contains(body, order) {
			t.Errorf("token refusals in /api/state: %v (want order >= 5, other >= 2, payment 0; no token text)", refusals)
		}

		// Snowflake: the name snowflake.
		status, body = tokenDo(t, "GET", srv.url+"/snowflake", "", "", "")
		wantStatus(t, "snowflake without a token", status, body, http.StatusUnauthorized, leafd.ETokenRequired)
		status, body = tokenDo(t, "GET", srv.url+"/snowflake", order, "", "")
		wantStatus(t, "snowflake, a segment token", status, body, http.StatusForbidden, leafd.ETokenRefused)
		for _, tok := range []string{sf, all} {
			status, body = tokenDo(t, "GET", srv.url+"/snowflake", tok, "", "")
			wantStatus(t, "snowflake", status, body, http.StatusOK, "\n")
			status, body = tokenDo(t, "GET", srv.url+"/api/snowflake/get/x?token="+tok, "", "", "")
			wantStatus(t, "Leaf snowflake", status, body, http.StatusOK, "")
		}
		// Decoding issues nothing and needs no token.
		status, body = tokenDo(t, "GET", srv.url+"/snowflake/12345", "", "", "")
		wantStatus(t, "decode", status, body, http.StatusOK, "worker_id")
	}

	// The list shows neither the text nor the hash.
	status, body := tokenDo(t, "GET", b.url+"/api/tokens", token, "", "")
	if status != http.StatusOK || !strings.Contains(body, orderID) || strings.Contains(body, order) ||
		strings.Contains(body, store.HashToken(order)) || !strings.Contains(body, `"pay*"`) {
		t.Fatalf("GET /api/tokens: %d %s", status, body)
	}

	// Revoked on a: refused by a at once, by b within 5 s.
	if status, body := tokenDo(t, "DELETE", a.url+"/api/tokens/"+orderID, token, "", ""); status != http.StatusNoContent {
		t.Fatalf("DELETE: %d %s", status, body)
	}
	status, body = tokenDo(t, "GET", a.url+"/segment/order", order, "", "")
	wantStatus(t, "revoked, same server", status, body, http.StatusForbidden, leafd.ETokenRefused)
	start := time.Now()
	for {
		status, body = tokenDo(t, "GET", b.url+"/segment/order", order, "", "")
		if status == http.StatusForbidden {
			break
		}
		if time.Since(start) > 5*time.Second {
			t.Fatalf("the other server still answers %d %s to a token revoked %v ago", status, body, time.Since(start))
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("revocation reached the other server after %v", time.Since(start).Round(time.Millisecond))
	status, body = tokenDo(t, "DELETE", b.url+"/api/tokens/"+orderID, token, "", "")
	wantStatus(t, "DELETE again", status, body, http.StatusNotFound, leafd.EUnknownToken)

	// Refusals are counted by mode and reason, never with the token; by
	// tag only with metrics.per_tag full (this server has the default,
	// basic, whose few series per tag leave them out).
	status, body = tokenDo(t, "GET", a.url+"/metrics", "", "", "")
	if status != http.StatusOK || !strings.Contains(body, `leafd_token_refusals_total{mode="segment",reason="missing",tag=""}`) ||
		strings.Contains(body, `leafd_token_refusals_total{mode="segment",reason="missing",tag="order"}`) ||
		!strings.Contains(body, `leafd_token_refusals_total{mode="snowflake",reason="refused",tag=""}`) || strings.Contains(body, order) {
		t.Fatalf("metrics: %s", grepLines(body, "token"))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestTokenAdminValidation: bad patterns, bodies and content types, an
// unknown id, and the admin token itself.
func TestTokenAdminValidation(t *testing.T) {
	srv := newTokenServer(t, store.DefaultDriver(), testdb.DSN(t, store.DefaultDriver()), 1, nil)
	for name, c := range map[string]struct {
		ct, body string
		status   int
		code     string
	}{
		"NoTags":       {"", `{"description":"x"}`, 400, leafd.EInvalidBody},
		"EmptyTags":    {"", `{"tags":[]}`, 400, leafd.EInvalidBody},
		"Space":        {"", `{"tags":["a b"]}`, 400, `pattern \"a b\" is not valid`},
		"MiddleStar":   {"", `{"tags":["a*b"]}`, 400, leafd.EInvalidBody},
		"TwoStars":     {"", `{"tags":["a**"]}`, 400, leafd.EInvalidBody},
		"LeadingStar":  {"", `{"tags":["*a"]}`, 400, leafd.EInvalidBody},
		"NotAList":     {"", `{"tags":"order"}`, 400, leafd.EInvalidBody},
		"UnknownField": {"", `{"tags":["a"],"secret":"x"}`, 400, "unknown field"},
		"TwoObjects":   {"", `{"tags":["a"]}{}`, 400, leafd.EInvalidBody},
		"LongDesc":     {"", `{"tags":["a"],"description":"` + strings.Repeat("x", 257) + `"}`, 400, leafd.EInvalidBody},
		"WrongType":    {"text/plain", `{"tags":["a"]}`, 415, leafd.EUnsupportedMediaType},
		"JSONCharset":  {"application/json; charset=utf-8", `{"tags":["a"]}`, 201, `"token":"leafd_`},
		"TooLarge":     {"", `{"tags":["a"],"description":"` + strings.Repeat(" ", 70<<10) + `"}`, 413, leafd.EBodyTooLarge},
	} {
		t.Run(name, func(t *testing.T) {
			status, body := tokenDo(t, "POST", srv.url+"/api/tokens", token, c.ct, c.body)
			wantStatus(t, name, status, body, c.status, c.code)
		})
	}
	status, body := tokenDo(t, "DELETE", srv.url+"/api/tokens/0123456789abcdef", token, "", "")
	wantStatus(t, "unknown id", status, body, http.StatusNotFound, leafd.EUnknownToken)
	status, body = tokenDo(t, "GET", srv.url+"/api/tokens", "", "", "")
	wantStatus(t, "no admin token", status, body, http.StatusUnauthorized, leafd.EUnauthorized)
	status, body = tokenDo(t, "POST", srv.url+"/api/tokens", "wrong-token-wrong", "", `{"tags":["a"]}`)
	wantStatus(t, "wrong admin token", status, body, http.StatusUnauthorized, leafd.EUnauthorized)
	// An access token is not the admin token.
	_, access := createToken(t, srv.url, "*")
	status, body = tokenDo(t, "GET", srv.url+"/api/tokens", access, "", "")
	wantStatus(t, "access token on admin", status, body, http.StatusUnauthorized, leafd.EUnauthorized)
}

// TestTokensKeptWhileStoreDown: a server whose store cannot be read keeps
// the tokens it read last, and takes up changes once it can again.
func TestTokensKeptWhileStoreDown(t *testing.T) {
	driver := store.DefaultDriver()
	dsn := testdb.DSN(t, driver)
	s, err := store.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	flaky := &flakyTokens{Store: s}
	srv := newTokenServer(t, driver, dsn, 1, flaky)
	if status, body := tokenDo(t, "POST", srv.url+"/api/tags", token, "", `{"tag":"order"}`); status != http.StatusCreated {
		t.Fatalf("create: %d %s", status, body)
	}
	id, text := createToken(t, srv.url, "order")
	flaky.down.Store(true)
	if err := s.RevokeToken(context.Background(), id); err != nil { // by another server, unseen
		t.Fatal(err)
	}
	time.Sleep(2*access.DefaultRefresh + 500*time.Millisecond) // refreshes fail meanwhile
	status, body := tokenDo(t, "GET", srv.url+"/segment/order", text, "", "")
	wantStatus(t, "store down: the last tokens", status, body, http.StatusOK, "\n")
	flaky.down.Store(false)
	start := time.Now()
	for {
		status, body = tokenDo(t, "GET", srv.url+"/segment/order", text, "", "")
		if status == http.StatusForbidden {
			break
		}
		if time.Since(start) > 5*time.Second {
			t.Fatalf("the store is back, the revoked token still answers %d %s", status, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestTokensNotReadYet: before the tokens were ever read, a token cannot
// be judged: 503 store_unavailable, neither a refusal nor an ID.
func TestTokensNotReadYet(t *testing.T) {
	driver := store.DefaultDriver()
	dsn := testdb.DSN(t, driver)
	s, err := store.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	flaky := &flakyTokens{Store: s}
	flaky.down.Store(true)
	srv := newTokenServer(t, driver, dsn, 1, flaky)
	status, body := tokenDo(t, "GET", srv.url+"/snowflake", store.TokenPrefix+"0123456789abcdef_"+strings.Repeat("A", 43), "", "")
	wantStatus(t, "not read yet", status, body, http.StatusServiceUnavailable, leafd.EStoreUnavailable)
	status, body = tokenDo(t, "GET", srv.url+"/snowflake", "", "", "")
	wantStatus(t, "no token", status, body, http.StatusUnauthorized, leafd.ETokenRequired)
}

// TestTokensOffByDefault: without require_token the ID routes need no
// token and ignore one.
func TestTokensOffByDefault(t *testing.T) {
	g, err := snowflake.New(snowflake.Settings{WorkerID: 1, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	ts := httptest.NewServer(leafhttp.New(leafhttp.Config{Snowflake: g, Logger: quiet}).Handler())
	t.Cleanup(ts.Close)
	status, body := tokenDo(t, "GET", ts.URL+"/snowflake", "anything", "", "")
	wantStatus(t, "off", status, body, http.StatusOK, "\n")
}
