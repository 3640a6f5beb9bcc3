package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const adminToken = "e2e-admin-token-0123456789"

// badCase is a request and the answer docs/contract.md section 4 gives it.
type badCase struct {
	name   string
	method string
	path   string
	auth   string // the Authorization header, if any
	body   []byte
	status int
	code   string // the error code; for Leaf routes the text before ':'
	leaf   bool   // a Leaf-compatible route: text errors
}

func badCases() []badCase {
	bearer := "Bearer " + adminToken
	long := strings.Repeat("t", 129)
	huge := strings.Repeat("x", 16<<10)
	// Bodies well-formed as far as they go, so that the cap is what they
	// hit (a body is decoded as it streams in: one malformed early is
	// invalid_body, however long).
	over := []byte(`{"tag":"x","description":"` + strings.Repeat("d", 70<<10) + `"}`) // just over 64 KiB
	megabyte := bytes.Repeat([]byte(" "), 1<<20)                                      // far over it
	return []badCase{
		{name: "EmptyTag", path: "/segment/", status: 404, code: "not_found"},
		{name: "ExtraSegment", path: "/segment/a/b", status: 404, code: "not_found"},
		{name: "EncodedSlash", path: "/segment/a%2Fb", status: 404, code: "not_found"},
		{name: "NoRoute", path: "/no/such/route", status: 404, code: "not_found"},
		{name: "DotDot", path: "/segment/../../etc/passwd", status: 404, code: "not_found"},
		{name: "BadTagChar", path: "/segment/bad$tag", status: 400, code: "invalid_tag"},
		{name: "NULTag", path: "/segment/%00", status: 400, code: "invalid_tag"},
		{name: "UnicodeTag", path: "/segment/%E2%82%AC", status: 400, code: "invalid_tag"},
		{name: "TagTooLong", path: "/segment/" + long, status: 400, code: "invalid_tag"},
		{name: "HugeTag", path: "/segment/" + huge, status: 400, code: "invalid_tag"},
		{name: "UnknownTag", path: "/segment/no-such-tag", status: 404, code: "unknown_tag"},
		{name: "CountZero", path: "/segment/a?count=0", status: 400, code: "invalid_count"},
		{name: "CountNegative", path: "/segment/a?count=-1", status: 400, code: "invalid_count"},
		{name: "CountEmpty", path: "/segment/a?count=", status: 400, code: "invalid_count"},
		{name: "CountOverMax", path: "/segment/a?count=10001", status: 400, code: "invalid_count"},
		{name: "CountHuge", path: "/segment/a?count=99999999999999999999999", status: 400, code: "invalid_count"},
		{name: "CountFloat", path: "/segment/a?count=1e3", status: 400, code: "invalid_count"},
		{name: "CountHex", path: "/segment/a?count=0x10", status: 400, code: "invalid_count"},
		{name: "CountOnUnknownTag", path: "/segment/no-such-tag?count=10001", status: 400, code: "invalid_count"},
		{name: "SnowflakeCountHuge", path: "/snowflake?count=10000000000", status: 400, code: "invalid_count"},
		{name: "SnowflakeCountZero", path: "/snowflake?count=0", status: 400, code: "invalid_count"},
		{name: "DecodeNotANumber", path: "/snowflake/abc", status: 400, code: "invalid_id"},
		{name: "DecodeZero", path: "/snowflake/0", status: 400, code: "invalid_id"},
		{name: "DecodeNegative", path: "/snowflake/-5", status: 400, code: "invalid_id"},
		{name: "DecodeOverflow", path: "/snowflake/9223372036854775808", status: 400, code: "invalid_id"},
		{name: "LeafDecodeMissing", path: "/decodeSnowflakeId", status: 400, code: "invalid_id"},
		{name: "LeafDecodeBad", path: "/decodeSnowflakeId?snowflakeId=x", status: 400, code: "invalid_id"},
		{name: "LeafBadTag", path: "/api/segment/get/bad$tag", status: 500, code: "invalid_tag", leaf: true},
		{name: "LeafUnknownTag", path: "/api/segment/get/no-such-tag", status: 500, code: "unknown_tag", leaf: true},
		{name: "PostSegment", method: "POST", path: "/segment/a", status: 405, code: "method_not_allowed"},
		{name: "DeleteSnowflake", method: "DELETE", path: "/snowflake", status: 405, code: "method_not_allowed"},
		{name: "PutTags", method: "PUT", path: "/api/tags", auth: bearer, status: 405, code: "method_not_allowed"},
		{name: "AdminNoToken", path: "/api/tags", status: 401, code: "unauthorized"},
		{name: "AdminWrongToken", method: "POST", path: "/api/tags", auth: "Bearer wrong", body: []byte(`{"tag":"x"}`), status: 401, code: "unauthorized"},
		{name: "AdminWrongScheme", path: "/api/tags", auth: "Basic " + adminToken, status: 401, code: "unauthorized"},
		{name: "BodyTruncated", method: "POST", path: "/api/tags", auth: bearer, body: []byte(`{"tag":`), status: 400, code: "invalid_body"},
		{name: "BodyArray", method: "POST", path: "/api/tags", auth: bearer, body: []byte(`[]`), status: 400, code: "invalid_body"},
		{name: "BodyEmpty", method: "POST", path: "/api/tags", auth: bearer, status: 400, code: "invalid_body"},
		{name: "BodyTwoValues", method: "POST", path: "/api/tags", auth: bearer, body: []byte(`{"tag":"x"}{"tag":"y"}`), status: 400, code: "invalid_body"},
		{name: "BodyUnknownField", method: "POST", path: "/api/tags", auth: bearer, body: []byte(`{"tag":"x","bogus":1}`), status: 400, code: "invalid_body"},
		{name: "BodyBadStep", method: "POST", path: "/api/tags", auth: bearer, body: []byte(`{"tag":"x","step":-1}`), status: 400, code: "invalid_body"},
		{name: "BodyHugeStep", method: "POST", path: "/api/tags", auth: bearer, body: []byte(`{"tag":"x","step":1e30}`), status: 400, code: "invalid_body"},
		{name: "BodyBadMaxID", method: "POST", path: "/api/tags", auth: bearer, body: []byte(`{"tag":"x","max_id":"9223372036854775808"}`), status: 400, code: "invalid_body"},
		{name: "BodyBinary", method: "POST", path: "/api/tags", auth: bearer, body: []byte{0xff, 0xfe, 0, 1, 2}, status: 400, code: "invalid_body"},
		{name: "BodyBadTag", method: "POST", path: "/api/tags", auth: bearer, body: []byte(`{"tag":"bad$"}`), status: 400, code: "invalid_tag"},
		{name: "BodyOver64KiB", method: "POST", path: "/api/tags", auth: bearer, body: over, status: 413, code: "body_too_large"},
		{name: "Body1MiB", method: "POST", path: "/api/tags", auth: bearer, body: megabyte, status: 413, code: "body_too_large"},
		{name: "TagExists", method: "POST", path: "/api/tags", auth: bearer, body: []byte(`{"tag":"a"}`), status: 409, code: "tag_exists"},
		{name: "PatchMaxID", method: "PATCH", path: "/api/tags/a", auth: bearer, body: []byte(`{"max_id":"1"}`), status: 400, code: "invalid_body"},
		{name: "PatchUnknownTag", method: "PATCH", path: "/api/tags/no-such-tag", auth: bearer, body: []byte(`{"step":5}`), status: 404, code: "unknown_tag"},
		{name: "PatchOver64KiB", method: "PATCH", path: "/api/tags/a", auth: bearer, body: over, status: 413, code: "body_too_large"},
	}
}

// rawCase is bytes written on a fresh connection and the status line
// prefix expected back: malformed HTTP that no client library sends.
type rawCase struct {
	name, send, want string
}

func rawCases() []rawCase {
	return []rawCase{
		{"Garbage", "GARBAGE\r\n\r\n", "HTTP/1.1 400"},
		{"BinaryJunk", "\x00\x01\x02\xff\xfe\r\n\r\n", "HTTP/1.1 400"},
		{"NoHost", "GET /segment/a HTTP/1.1\r\n\r\n", "HTTP/1.1 400"},
		{"BadVersion", "GET /segment/a HTTP/9.9\r\nHost: e2e\r\n\r\n", "HTTP/1.1 505"},
		{"NegativeLength", "POST /api/tags HTTP/1.1\r\nHost: e2e\r\nContent-Length: -1\r\n\r\n", "HTTP/1.1 400"},
		// net/http's limit is MaxHeaderBytes (1 MiB) plus 4 KiB of slack.
		{"Header2MiB", "GET /segment/a HTTP/1.1\r\nHost: e2e\r\nX-Big: " + strings.Repeat("a", 2<<20) + "\r\n\r\n", "HTTP/1.1 431"},
		{"RawDotDot", "GET /../../etc/passwd HTTP/1.1\r\nHost: e2e\r\nConnection: close\r\n\r\n", "HTTP/1.1 404"},
	}
}

// usage is what /proc and /metrics say of a process.
type usage struct {
	goroutines int64
	rssKB      int64
	heapBytes  int64 // in use, garbage included
	heapGoal   int64 // where the next GC runs: twice the heap live after the last
}

func (u usage) String() string {
	return fmt.Sprintf("%d goroutines, RSS %.1f MiB, heap in use %.1f MiB, heap goal %.1f MiB", u.goroutines,
		float64(u.rssKB)/1024, float64(u.heapBytes)/(1<<20), float64(u.heapGoal)/(1<<20))
}

func (p *process) usage() (usage, error) {
	m, err := p.metrics()
	if err != nil {
		return usage{}, err
	}
	u := usage{goroutines: int64(m["go_goroutines"]), heapBytes: int64(m["go_memstats_heap_inuse_bytes"]),
		heapGoal: int64(m["go_memstats_next_gc_bytes"])}
	if u.goroutines == 0 || u.heapGoal == 0 {
		return u, fmt.Errorf("/metrics has no go_goroutines or go_memstats_next_gc_bytes")
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.Pid()))
	if err != nil {
		return u, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			u.rssKB, _ = strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	return u, nil
}

// settle measures the process at rest: once idle connections are gone and
// the garbage collector has run twice since, so that nothing that was in
// flight is counted. leafd has no endpoint to force a collection; scrapes
// of /metrics allocate enough to bring one about.
func (p *process) settle() (usage, error) {
	time.Sleep(300 * time.Millisecond)
	gcs := func() (float64, error) {
		m, err := p.metrics()
		return m["go_gc_duration_seconds_count"], err
	}
	start, err := gcs()
	if err != nil {
		return usage{}, err
	}
	for i := 0; ; i++ {
		n, err := gcs()
		if err != nil {
			return usage{}, err
		}
		if n >= start+2 {
			break
		}
		if i == 5000 {
			return usage{}, fmt.Errorf("no garbage collection after %d scrapes of /metrics", i)
		}
	}
	return p.usage()
}

// Scenario 6: bad input at volume, beside normal traffic: malformed paths,
// huge counts, invalid tags, oversized and malformed admin bodies, bad
// tokens, malformed HTTP, clients that send their headers byte by byte,
// and connections that never finish their headers. Every answer must be
// the one docs/contract.md section 4 gives; the server must not crash, answer 500
// internal, or leak: goroutines and RSS after the rounds are compared with
// their values after a first warm-up round.
func TestBadInput(t *testing.T) {
	enabled(t)
	c := newCluster(t, "6 bad input at volume", clusterOptions{servers: 1, env: []string{
		"LEAFD_SEGMENT_SEED_TAGS=a:1000", "LEAFD_ADMIN_TOKEN=" + adminToken, "LEAFD_SNOWFLAKE_LEASE_TTL=10s"}})
	c.startAll()
	p := c.servers[0].current()
	var (
		sent, wrong atomic.Int64
		created     atomic.Int64
	)
	round := func(r int) {
		l := c.startLoad(loadSpec{tags: []string{"a"}, snowflake: true, clients: 2})
		defer l.Stop()
		var wg sync.WaitGroup
		const workers = 8
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableCompression: true}}
				defer hc.CloseIdleConnections()
				cases := badCases()
				rand.Shuffle(len(cases), func(i, j int) { cases[i], cases[j] = cases[j], cases[i] })
				// A tag created through the API is answered 201 once, and
				// 409 after.
				name := fmt.Sprintf("new_%d_%d", r, w)
				cases = append(cases, badCase{name: "Create", method: "POST", path: "/api/tags", auth: "Bearer " + adminToken,
					body: []byte(`{"tag":"` + name + `","step":10}`), status: 201})
				cases = append(cases, badCase{name: "CreateAgain", method: "POST", path: "/api/tags", auth: "Bearer " + adminToken,
					body: []byte(`{"tag":"` + name + `","step":10}`), status: 409, code: "tag_exists"})
				for _, bc := range cases {
					sent.Add(1)
					if bc.status == 201 {
						created.Add(1)
					}
					if err := sendBad(hc, p.addr, bc); err != nil {
						wrong.Add(1)
						c.violate("%s: %v", bc.name, err)
					}
				}
				for _, rc := range rawCases() {
					sent.Add(1)
					if err := sendRaw(p.addr, rc); err != nil {
						wrong.Add(1)
						c.violate("%s: %v", rc.name, err)
					}
				}
			}()
		}
		// Clients that send a request's headers a byte at a time, well
		// within leafd's ReadHeaderTimeout (10s): answered, IDs valid.
		for i := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sent.Add(1)
				path := "/segment/a?count=" + strconv.Itoa(1+i)
				body, err := slowRequest(p.addr, "GET "+path+" HTTP/1.1\r\nHost: e2e\r\nConnection: close\r\n\r\n", 5*time.Millisecond)
				if err != nil {
					wrong.Add(1)
					c.violate("slow client: %v", err)
					return
				}
				c.record(p, path, body)
			}()
		}
		wg.Wait()
	}

	round(0) // warm up: pools, buffers and caches reach their size
	l := c.startLoad(loadSpec{tags: []string{"a"}, snowflake: true, clients: 1})
	l.Stop()
	before, err := p.settle()
	if err != nil {
		t.Fatal(err)
	}
	for r := 1; r <= prof.badRounds; r++ {
		round(r)
	}
	c.slowloris(p)
	after, err := p.settle()
	if err != nil {
		t.Fatal(err)
	}
	// Flat means, measured at rest (settle): a few goroutines of slack
	// (timers, the scrape itself); the GC's heap goal (twice the heap live
	// after the last collection) within half or 8 MiB (the tags created
	// are real state, a few KiB each); RSS at most doubled, or 32 MiB:
	// the Go runtime keeps freed pages for a while after a peak (here 1-2
	// MiB bodies and headers in flight at once) and returns them to the
	// system gradually, so RSS catches only a gross leak. 200 rounds
	// without tag creation left the heap flat and RSS 12 MiB above its
	// warm value, the same as 30 rounds.
	if after.goroutines > before.goroutines+10 {
		c.violate("goroutines grew from %d to %d over %d rounds: a leak", before.goroutines, after.goroutines, prof.badRounds)
	}
	// The race detector's shadow memory grows with the memory touched,
	// whatever the heap does: RSS says nothing then.
	if grew := after.rssKB - before.rssKB; grew > max(before.rssKB, 32<<10) && !raceBinary() {
		c.violate("RSS grew by %d KiB (from %d KiB to %d KiB) over %d rounds: a leak", grew, before.rssKB, after.rssKB, prof.badRounds)
	}
	if grew := after.heapGoal - before.heapGoal; grew > max(before.heapGoal/2, 8<<20) {
		c.violate("the heap goal grew by %d bytes (from %d to %d) over %d rounds: a leak", grew, before.heapGoal, after.heapGoal, prof.badRounds)
	}
	m, err := p.metrics()
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range m {
		if strings.HasPrefix(k, "leafd_errors_total{") && strings.Contains(k, `code="internal"`) && v > 0 {
			c.violate("%s = %v: leafd answered 500 internal", k, v)
		}
	}
	if !p.alive() {
		c.violate("leafd died")
	}
	c.note("%d bad or odd requests in %d rounds after a warm-up, %d answered otherwise than the contract says; %d tags created; "+
		"after warm-up: %v; after: %v", sent.Load(), prof.badRounds, wrong.Load(), created.Load(), before, after)
	c.finish()
}

// sendBad sends bc and checks the answer.
func sendBad(hc *http.Client, addr string, bc badCase) error {
	method := bc.method
	if method == "" {
		method = "GET"
	}
	req, err := http.NewRequest(method, addr+bc.path, bytes.NewReader(bc.body))
	if err != nil {
		return err
	}
	// Send the path as written: no cleaning, no re-escaping.
	req.URL.Opaque = "//" + req.URL.Host + strings.SplitN(bc.path, "?", 2)[0]
	if bc.auth != "" {
		req.Header.Set("Authorization", bc.auth)
	}
	res, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %v", method, bc.path[:min(len(bc.path), 60)], err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return err
	}
	var code string
	if bc.leaf {
		code, _, _ = strings.Cut(string(body), ":")
	} else if res.StatusCode >= 400 {
		var e struct{ Error struct{ Code string } }
		if err := json.Unmarshal(body, &e); err != nil {
			return fmt.Errorf("%s %s: %d with a body that is not a JSON error: %.200q", method, bc.path, res.StatusCode, body)
		}
		code = e.Error.Code
	}
	if res.StatusCode != bc.status || code != bc.code {
		return fmt.Errorf("%s %.60s: %d %q, want %d %q (%.200s)", method, bc.path, res.StatusCode, code, bc.status, bc.code, body)
	}
	return nil
}

// sendRaw writes rc on a fresh connection and checks the status line.
func sendRaw(addr string, rc rawCase) error {
	conn, err := net.DialTimeout("tcp", strings.TrimPrefix(addr, "http://"), 5*time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	// The server may answer and close before reading everything (a header
	// over its limit): a failed write is fine if the answer came.
	_, werr := io.WriteString(conn, rc.send)
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return fmt.Errorf("no status line (write: %v): %v", werr, err)
	}
	if !strings.HasPrefix(line, rc.want) {
		return fmt.Errorf("status line %q, want %q", strings.TrimSpace(line), rc.want)
	}
	return nil
}

// slowRequest writes req one byte at a time, gap apart, and returns the
// body of a 200 answer.
func slowRequest(addr, req string, gap time.Duration) (string, error) {
	conn, err := net.DialTimeout("tcp", strings.TrimPrefix(addr, "http://"), 5*time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	for i := range len(req) {
		if _, err := conn.Write([]byte{req[i]}); err != nil {
			return "", fmt.Errorf("byte %d: %v", i, err)
		}
		time.Sleep(gap)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return "", err
	}
	if res.StatusCode != 200 {
		return "", fmt.Errorf("%d %s", res.StatusCode, body)
	}
	return string(body), nil
}

// slowloris opens connections that send part of their headers and then
// nothing. Meanwhile normal traffic must be served. In the long profile
// they are left to leafd's ReadHeaderTimeout (10s), which must close each
// one; in the short one the client closes them after a second.
func (c *cluster) slowloris(p *process) {
	const conns = 200
	var open []net.Conn
	for range conns {
		conn, err := net.DialTimeout("tcp", strings.TrimPrefix(p.addr, "http://"), 5*time.Second)
		if err != nil {
			c.violate("slowloris: connection %d: %v", len(open), err)
			break
		}
		open = append(open, conn)
		_, _ = io.WriteString(conn, "GET /segment/a HTTP/1.1\r\nHost: e2e\r\nX-Slow: ")
	}
	defer func() {
		for _, conn := range open {
			conn.Close()
		}
	}()
	l := c.startLoad(loadSpec{tags: []string{"a"}, snowflake: true, clients: 2})
	time.Sleep(time.Second)
	l.Stop()
	if !prof.slowlorisTimeout {
		c.note("%d connections left with unfinished headers for 1s beside normal traffic", len(open))
		return
	}
	began := time.Now()
	closed := 0
	for _, conn := range open {
		_ = conn.SetReadDeadline(began.Add(15 * time.Second))
		if _, err := conn.Read(make([]byte, 512)); err != nil && !isTimeout(err) {
			closed++
		} else if err == nil {
			closed++ // an answer (408) counts: the server gave up on it
		}
	}
	if closed != len(open) {
		c.violate("slowloris: leafd closed %d of %d connections with unfinished headers within 15s", closed, len(open))
	}
	c.note("%d connections with unfinished headers: all closed by leafd after %v", len(open), time.Since(began).Round(100*time.Millisecond))
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}
