package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// httpTransport asks leafd's HTTP API: GET requests to base URLs, JSON
// answers.
type httpTransport struct {
	urls []string
	// cur is the index in urls of the URL that answered last: every request
	// starts there.
	cur atomic.Int32
	hc  *http.Client
	own *http.Transport // the transport New made, closed by close; nil if the caller gave hc
	// auth is the Authorization header of every request (WithToken), ""
	// for none.
	auth string
	// noExpiring marks, by index in urls, the servers that refused the
	// range route's expiring parameter (segmentRange).
	noExpiring []atomic.Bool
}

// baseURLs checks base URLs and returns them without a trailing slash.
func baseURLs(raw []string) ([]string, error) {
	urls := make([]string, 0, len(raw))
	for _, r := range raw {
		u, err := url.Parse(r)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			return nil, fmt.Errorf("leafd client: base URL %q is not valid: use an absolute http or https URL without a query, such as http://leafd:8080", r)
		}
		urls = append(urls, strings.TrimRight(u.String(), "/"))
	}
	return urls, nil
}

// newHTTPTransport sends requests to urls through hc, or through a
// transport of its own when hc is nil.
func newHTTPTransport(urls []string, hc *http.Client) *httpTransport {
	t := &httpTransport{urls: urls, hc: hc, noExpiring: make([]atomic.Bool, len(urls))}
	if t.hc == nil {
		if dt, ok := http.DefaultTransport.(*http.Transport); ok {
			t.own = dt.Clone()
		} else {
			t.own = &http.Transport{Proxy: http.ProxyFromEnvironment}
		}
		// Many goroutines share one Client: keep their connections.
		t.own.MaxIdleConnsPerHost = 64
		t.hc = &http.Client{Transport: t.own}
	}
	return t
}

func (t *httpTransport) close() {
	if t.own != nil {
		t.own.CloseIdleConnections()
	}
}

// segment asks a server for n IDs of tag: GET /segment/{tag}?count=n.
func (t *httpTransport) segment(ctx context.Context, tag string, n int) ([]int64, error) {
	path := "/segment/" + tag + "?format=json" // a valid tag needs no escaping
	if n > 1 {
		path += "&count=" + strconv.Itoa(n)
	}
	body, err := t.get(ctx, path, n)
	if err != nil {
		return nil, err
	}
	return parseIDs(body, n, &tag)
}

// snowflake asks a server for n snowflake IDs: GET /snowflake?count=n.
func (t *httpTransport) snowflake(ctx context.Context, n int) ([]int64, error) {
	path := "/snowflake?format=json"
	if n > 1 {
		path += "&count=" + strconv.Itoa(n)
	}
	body, err := t.get(ctx, path, n)
	if err != nil {
		return nil, err
	}
	return parseIDs(body, n, nil)
}

// get sends GET path to the base URLs in turn, starting at the one that
// answered last, and returns the body of the first 200 answer. n, the
// number of IDs asked for, bounds the size of the body it accepts.
func (t *httpTransport) get(ctx context.Context, path string, n int) ([]byte, error) {
	var body []byte
	err := failover(ctx, &t.cur, len(t.urls), "base URLs",
		func(i int) string { return "GET " + t.urls[i] + path },
		func(i int) (bool, error) {
			b, retry, err := t.try(ctx, t.urls[i]+path, n)
			body = b
			return retry, err
		})
	if err != nil {
		return nil, err
	}
	return body, nil
}

// try sends one request. retry reports whether the next base URL should be
// asked: after a network error or a 5xx answer that is not definite.
func (t *httpTransport) try(ctx context.Context, u string, n int) (body []byte, retry bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, false, err
	}
	req.Header.Set("Accept", "application/json")
	if t.auth != "" {
		req.Header.Set("Authorization", t.auth)
	}
	res, err := t.hc.Do(req)
	if err != nil {
		return nil, true, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b, err := io.ReadAll(io.LimitReader(res.Body, maxErrorBody))
		if err != nil && res.StatusCode >= 500 {
			return nil, true, fmt.Errorf("leafd client: GET %s: HTTP %d, reading the body: %w", u, res.StatusCode, err)
		}
		e := parseError(res.StatusCode, b)
		return nil, !e.definite(), e
	}
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		return nil, false, fmt.Errorf("leafd client: GET %s: answer of type %q, not JSON", u, ct)
	}
	// An ID is at most 19 digits, 2 quotes and a comma; the tag at most 128
	// bytes. A body past that is not leafd's.
	limit := int64(n)*22 + 256
	b, err := io.ReadAll(io.LimitReader(res.Body, limit+1))
	if err != nil {
		// The IDs of a cut answer are lost, never reissued by the server:
		// ask the next one.
		return nil, true, fmt.Errorf("leafd client: GET %s: reading the answer: %w", u, err)
	}
	if int64(len(b)) > limit {
		return nil, false, fmt.Errorf("leafd client: GET %s: answer longer than %d IDs can be", u, n)
	}
	return b, false, nil
}

// parseIDs reads {"tag":"…","ids":["1","2"]} (no tag for snowflake, when
// tag is nil) and checks it strictly: exactly n IDs, each a decimal string
// in 1..2^63-1 without sign or leading zero, no ID twice. It returns them
// ascending: a batch of an opaque tag holds its IDs in no particular order
// (docs/contract.md, Opaque tags), every other batch is ascending already.
func parseIDs(body []byte, n int, tag *string) ([]int64, error) {
	var m struct {
		Tag *string  `json:"tag"`
		IDs []string `json:"ids"`
	}
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, fmt.Errorf("leafd client: malformed answer: %w", err)
	}
	if tag != nil && (m.Tag == nil || *m.Tag != *tag) {
		return nil, fmt.Errorf("leafd client: malformed answer: asked for tag %q, got an answer for another", *tag)
	}
	if len(m.IDs) != n {
		return nil, fmt.Errorf("leafd client: malformed answer: asked for %d IDs, got %d", n, len(m.IDs))
	}
	ids := make([]int64, n)
	sorted := true
	for i, s := range m.IDs {
		id, ok := parseID(s)
		if !ok {
			return nil, fmt.Errorf("leafd client: malformed answer: %q is not an ID (a decimal from 1 to 2^63-1)", truncate(s))
		}
		if i > 0 && id <= ids[i-1] {
			sorted = false
		}
		ids[i] = id
	}
	if !sorted {
		slices.Sort(ids)
		for i := 1; i < n; i++ {
			if ids[i] == ids[i-1] {
				return nil, fmt.Errorf("leafd client: malformed answer: ID %d twice in one batch", ids[i])
			}
		}
	}
	return ids, nil
}

// parseID accepts exactly the IDs leafd writes: decimal digits, no sign, no
// leading zero, 1 to 2^63-1.
func parseID(s string) (int64, bool) {
	if len(s) == 0 || len(s) > 19 || s[0] < '1' || s[0] > '9' {
		return 0, false
	}
	for i := 1; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	id, err := strconv.ParseInt(s, 10, 64)
	return id, err == nil
}

func truncate(s string) string {
	if len(s) > 32 {
		return s[:32] + "…"
	}
	return s
}

// segmentRange asks a server for a range of size IDs of tag
// (GET /segment/{tag}/range?size=N&expiring=true: the client honours
// valid_ms, so a dated tag's range is leased too) and returns its first
// ID, its length and how long it may be used (valid_ms, 0 when it never
// expires). A server from before expiring leases refuses the parameter
// (400 invalid_query naming it); it is asked again without it, and from
// then on, as it leases no dated range anyway.
func (t *httpTransport) segmentRange(ctx context.Context, tag string, size int64) (start, n int64, valid time.Duration, err error) {
	path := "/segment/" + tag + "/range?size=" + strconv.FormatInt(size, 10) // a valid tag needs no escaping
	var body []byte
	err = failover(ctx, &t.cur, len(t.urls), "base URLs",
		func(i int) string { return "GET " + t.urls[i] + path },
		func(i int) (bool, error) {
			u := t.urls[i] + path
			if !t.noExpiring[i].Load() {
				b, retry, err := t.try(ctx, u+"&expiring=true", 1)
				if !refusesExpiring(err) {
					body = b
					return retry, err
				}
				t.noExpiring[i].Store(true)
			}
			b, retry, err := t.try(ctx, u, 1)
			body = b
			return retry, err
		})
	if err != nil {
		return 0, 0, 0, err
	}
	return parseRange(body, tag, size)
}

// refusesExpiring reports whether err is a server's refusal of the query
// parameter expiring, which servers before expiring leases do not take.
func refusesExpiring(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == http.StatusBadRequest && e.Code == "invalid_query" &&
		strings.Contains(e.Message, `"expiring"`)
}

// maxValidMS is the largest valid_ms a client takes: a year, the longest
// period of a dated tag.
const maxValidMS = 366 * 24 * 3600 * 1000

// parseRange reads {"tag":"…","start":"1001","end":"2001"}, with
// "valid_ms":N for a range that expires, and checks it strictly: the tag
// asked for, start an ID (decimal, 1..2^63-1, no sign, no leading zero),
// end at most 2^63, exactly size IDs (1 to size for a range that
// expires), valid_ms a whole number of milliseconds up to a year.
func parseRange(body []byte, tag string, size int64) (start, n int64, valid time.Duration, err error) {
	var m struct {
		Tag     *string `json:"tag"`
		Start   string  `json:"start"`
		End     string  `json:"end"`
		ValidMS int64   `json:"valid_ms"`
	}
	if err := json.Unmarshal(body, &m); err != nil {
		return 0, 0, 0, fmt.Errorf("leafd client: malformed range: %w", err)
	}
	if m.Tag == nil || *m.Tag != tag {
		return 0, 0, 0, fmt.Errorf("leafd client: malformed range: asked for tag %q, got an answer for another", tag)
	}
	if m.ValidMS < 0 || m.ValidMS > maxValidMS {
		return 0, 0, 0, fmt.Errorf("leafd client: malformed range: valid_ms %d is not a duration of at most a year", m.ValidMS)
	}
	start, ok := parseID(m.Start)
	if !ok {
		return 0, 0, 0, fmt.Errorf("leafd client: malformed range: start %q is not an ID (a decimal from 1 to 2^63-1)", truncate(m.Start))
	}
	var end uint64
	if m.End == "9223372036854775808" { // the end of the last ID, 2^63-1
		end = 1 << 63
	} else if e, ok := parseID(m.End); ok {
		end = uint64(e)
	} else {
		return 0, 0, 0, fmt.Errorf("leafd client: malformed range: end %q is not a decimal from 2 to 2^63", truncate(m.End))
	}
	if end <= uint64(start) || end-uint64(start) != uint64(size) && (m.ValidMS == 0 || end-uint64(start) > uint64(size)) {
		return 0, 0, 0, fmt.Errorf("leafd client: malformed range: [%s, %s) is not the %d IDs asked for", m.Start, m.End, size)
	}
	return start, int64(end - uint64(start)), time.Duration(m.ValidMS) * time.Millisecond, nil
}
