// Package client is a Go client of leafd's HTTP API (docs/contract.md section 4): segment
// IDs per business tag and snowflake IDs, over one or more leafd servers.
//
// It asks for JSON (IDs arrive as strings and are parsed strictly: no sign,
// no leading zero, 1 to 2^63-1, none twice, exactly as many as asked, and
// are returned ascending), fails
// over to the next base URL when a server cannot be reached or answers a
// 5xx that another server may not give, and stays on the URL that worked.
// With WithBuffer it keeps IDs of each tag in memory and refills them in the
// background, as Didi Tinyid's client does, so that most calls of Next make
// no request at all.
//
// With WithRanges it leases runs of consecutive IDs per tag instead
// (GET /segment/{tag}/range?size=N): Next is then one atomic add on the
// tag's lease, a few nanoseconds, and the next lease is fetched in the
// background before the current one runs out:
//
//	c, err := client.New("http://leafd1:8080",
//		client.WithFailover("http://leafd2:8080"),
//		client.WithRanges(100_000, 0.2), // leases of 100,000 IDs, the next fetched at 20,000 left
//	)
//	…
//	id, err := c.Next(ctx, "order")
//
// Tags whose IDs are not consecutive (opaque tags, tags of a sharded store)
// are served as without WithRanges, from the buffer of WithBuffer if given.
//
// The client speaks HTTP. (A gRPC transport will be an option here.)
//
// Every method honours its context's deadline. Errors a server answers are
// *Error values carrying leafd's error code; match them with errors.Is and
// the sentinels (ErrUnknownTag, …) or with IsCode.
//
// A Client is safe for concurrent use. Close it when done: that stops the
// background refills and drops the IDs the buffers and leases hold
// (skipped, never handed out).
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
	"sync"
	"sync/atomic"
	"time"

	"github.com/leafd/leafd"
)

// DefaultRefillTimeout bounds one background refill when WithRefillTimeout
// is not given.
const DefaultRefillTimeout = 10 * time.Second

// Client asks leafd servers for IDs. Create it with New; the zero value is
// not usable.
type Client struct {
	urls []string
	// cur is the index in urls of the URL that answered last: every request
	// starts there.
	cur  atomic.Int32
	hc   *http.Client
	own  *http.Transport // the transport New made, closed by Close; nil if the caller gave hc
	size int             // IDs per refill; 0 without a buffer
	// low is the number of IDs left in a buffer at or below which a
	// background refill starts.
	low           int
	refillTimeout time.Duration

	// ctx is the parent of every background refill; Close cancels it.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // background refills

	closed atomic.Bool
	mu     sync.Mutex // guards bufs; never held while taking a buffer's lock
	bufs   map[string]*buffer

	// Range leases (WithRanges); rangeSize is 0 without them.
	rangeSize int64
	// rangeLow is the number of IDs left in a lease at or below which the
	// next lease is fetched.
	rangeLow int64
	// ranges maps every tag served in ranges to its *rangeTag; slots
	// caches some of them, found by a few bytes of the name, for Next.
	ranges sync.Map
	slots  [rangeSlots]atomic.Pointer[rangeTag]
	epoch  time.Time // the origin of clock()
}

// Option configures a Client in New.
type Option func(*settings)

type settings struct {
	more             []string
	hc               *http.Client
	hcSet            bool
	size             int
	refillAt         float64
	buffered         bool
	refillTimeout    time.Duration
	refillTimeoutSet bool
	rangeSize        int64
	rangeRefillAt    float64
	ranged           bool
}

// WithFailover adds base URLs of further leafd servers of the same fleet
// (sharing one database), tried in order after the first when a server
// cannot be reached or answers a 5xx error that is not definite (every 5xx
// but tag_exhausted). The client stays on the URL that answered until it
// fails in turn. 4xx answers are definite and never retried elsewhere.
//
// Segment IDs from different servers are unique but only trend-increasing
// (docs/contract.md section 2): after a failover the next IDs may be lower than the
// last ones.
func WithFailover(baseURLs ...string) Option {
	return func(s *settings) { s.more = append(s.more, baseURLs...) }
}

// WithHTTPClient makes the Client send its requests through hc. Without
// it, the Client uses its own transport, whose idle connections Close
// closes. hc's Timeout, if any, bounds each request in addition to the
// caller's context.
func WithHTTPClient(hc *http.Client) Option {
	return func(s *settings) { s.hc, s.hcSet = hc, true }
}

// WithBuffer keeps a local buffer of segment IDs per tag. Next and NextN
// (for up to size IDs) are served from it; a refill of size IDs
// (GET /segment/{tag}?count=size) starts in the background as soon as no
// more than refillAt×size IDs remain, and callers that find the buffer
// empty wait for that one refill (at most one per tag is in flight) until
// it lands or their context ends.
//
// size must be at least 1 and at most the servers' segment.max_batch
// (default 10,000), or every refill fails with invalid_count. refillAt is in
// [0, 1); 0 refills only once the buffer is empty. A buffer holds at most
// size + refillAt×size IDs. Within one server, the IDs a buffer hands out
// are strictly increasing, across all goroutines.
//
// Buffered IDs are not handed out after Close, nor after their tag
// stopped existing on the server; they are skipped, as leafd skips the IDs
// in its own buffers at shutdown.
func WithBuffer(size int, refillAt float64) Option {
	return func(s *settings) { s.size, s.refillAt, s.buffered = size, refillAt, true }
}

// WithRefillTimeout bounds each background refill of a buffer (default
// DefaultRefillTimeout, 10 s), failover included. A refill is not bound to
// the context of the caller that started it, so that one caller's short
// deadline does not fail the refill other callers wait for.
func WithRefillTimeout(d time.Duration) Option {
	return func(s *settings) { s.refillTimeout, s.refillTimeoutSet = d, true }
}

// New returns a Client of the leafd server at baseURL (such as
// "http://leafd:8080", or with a path prefix when a proxy serves leafd under
// one). It makes no request.
//
// Errors: a base URL that is not an absolute http or https URL, a nil
// *http.Client, a buffer or range size below 1, refillAt outside [0, 1),
// or a refill timeout that is not positive.
func New(baseURL string, opts ...Option) (*Client, error) {
	var s settings
	for _, o := range opts {
		o(&s)
	}
	c := &Client{refillTimeout: DefaultRefillTimeout, bufs: make(map[string]*buffer)}
	for _, raw := range append([]string{baseURL}, s.more...) {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			return nil, fmt.Errorf("leafd client: base URL %q is not valid: use an absolute http or https URL without a query, such as http://leafd:8080", raw)
		}
		c.urls = append(c.urls, strings.TrimRight(u.String(), "/"))
	}
	switch {
	case s.hcSet && s.hc == nil:
		return nil, errors.New("leafd client: WithHTTPClient(nil)")
	case s.buffered && s.size < 1:
		return nil, fmt.Errorf("leafd client: buffer size %d is below 1", s.size)
	case s.buffered && !(s.refillAt >= 0 && s.refillAt < 1):
		return nil, fmt.Errorf("leafd client: refillAt %v is outside [0, 1)", s.refillAt)
	case s.ranged && s.rangeSize < 1:
		return nil, fmt.Errorf("leafd client: range size %d is below 1", s.rangeSize)
	case s.ranged && !(s.rangeRefillAt >= 0 && s.rangeRefillAt < 1):
		return nil, fmt.Errorf("leafd client: range refillAt %v is outside [0, 1)", s.rangeRefillAt)
	case s.refillTimeoutSet && s.refillTimeout <= 0:
		return nil, fmt.Errorf("leafd client: refill timeout %v is not positive", s.refillTimeout)
	}
	if s.refillTimeoutSet {
		c.refillTimeout = s.refillTimeout
	}
	c.hc = s.hc
	if c.hc == nil {
		if t, ok := http.DefaultTransport.(*http.Transport); ok {
			c.own = t.Clone()
		} else {
			c.own = &http.Transport{Proxy: http.ProxyFromEnvironment}
		}
		// Many goroutines share one Client: keep their connections.
		c.own.MaxIdleConnsPerHost = 64
		c.hc = &http.Client{Transport: c.own}
	}
	if s.buffered {
		c.size = s.size
		c.low = int(s.refillAt * float64(s.size))
	}
	if s.ranged {
		c.rangeSize = s.rangeSize
		c.rangeLow = int64(s.rangeRefillAt * float64(s.rangeSize))
	}
	c.epoch = time.Now()
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c, nil
}

// Close stops the background refills, waits for them to end, and drops
// every buffered ID: those IDs are never handed out. Callers waiting for a
// refill get ErrClosed, and so does every later call. Close is safe to call
// more than once; it always returns nil.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed.Swap(true) {
		c.mu.Unlock()
		return nil
	}
	bufs := c.bufs
	c.bufs = nil
	c.mu.Unlock()
	c.cancel()
	for _, b := range bufs {
		b.drop()
	}
	c.dropRanges()
	c.wg.Wait()
	if c.own != nil {
		c.own.CloseIdleConnections()
	}
	return nil
}

// Next returns one segment ID of tag: from the tag's range lease with
// WithRanges, from the buffer with WithBuffer, otherwise from
// GET /segment/{tag}.
//
// Errors: an *Error with the server's code (unknown_tag, mode_disabled,
// segment_unavailable, tag_exhausted, …); an invalid_tag *Error, without a
// request, for a tag the server would refuse; a network error when no base
// URL answered; the context's error when it ended first; ErrClosed.
func (c *Client) Next(ctx context.Context, tag string) (int64, error) {
	// The fast path of WithRanges: the tag's lease from its cache slot,
	// and one atomic add on it.
	if s := c.slot(tag).Load(); s != nil && s.same(tag) {
		l := s.cur.Load()
		o := l.taken.Add(1)
		if o < l.mark.Load() {
			return l.base + o, nil
		}
		return c.nextRange(ctx, tag, s, l, o)
	}
	return c.next(ctx, tag)
}

// next is Next past its fast path.
func (c *Client) next(ctx context.Context, tag string) (int64, error) {
	if c.rangeSize == 0 {
		return c.nextUnranged(ctx, tag)
	}
	if s := c.slot(tag).Load(); s != nil && s.tag == tag {
		// The tag, in another string than the one the state was made
		// with.
		l := s.cur.Load()
		return c.nextRange(ctx, tag, s, l, l.taken.Add(1))
	}
	return c.nextRange(ctx, tag, nil, nil, 0)
}

// nextUnranged is Next without range leases: from the buffer or a request.
func (c *Client) nextUnranged(ctx context.Context, tag string) (int64, error) {
	if err := c.check(tag); err != nil {
		return 0, err
	}
	if c.size == 0 {
		ids, err := c.fetchSegment(ctx, tag, 1)
		if err != nil {
			return 0, err
		}
		return ids[0], nil
	}
	var id int64
	err := c.take(ctx, tag, 1, func(ids []int64) { id = ids[0] })
	return id, err
}

// NextN returns n segment IDs of tag, ascending and unique: with
// WithRanges and n no larger than the range size, one contiguous run from
// the tag's lease; with WithBuffer and n no larger than the buffer's size
// from the buffer; otherwise from GET /segment/{tag}?count=n in one
// request (IDs of such a larger batch are not ordered against the IDs a
// buffer or lease holds). n must be in 1..segment.max_batch of the
// servers (default 10,000) when it comes from a request.
//
// Errors: those of Next; invalid_count for n out of range (below 1 found by
// the client). If a batch from the buffer fails midway, the IDs it had
// taken are dropped, never handed out.
func (c *Client) NextN(ctx context.Context, tag string, n int) ([]int64, error) {
	if err := c.check(tag); err != nil {
		return nil, err
	}
	if n < 1 {
		return nil, localError(http.StatusBadRequest, leafd.EInvalidCount, "count %d is not valid: ask for at least 1 ID", n)
	}
	if int64(n) <= c.rangeSize {
		return c.nextNRange(ctx, tag, n)
	}
	return c.nextNUnranged(ctx, tag, n)
}

// nextNUnranged is NextN without range leases: from the buffer or a
// request.
func (c *Client) nextNUnranged(ctx context.Context, tag string, n int) ([]int64, error) {
	if c.size > 0 && n <= c.size {
		out := make([]int64, 0, n)
		err := c.take(ctx, tag, n, func(ids []int64) { out = append(out, ids...) })
		if err != nil {
			return nil, err
		}
		return out, nil
	}
	return c.fetchSegment(ctx, tag, n)
}

// check refuses calls after Close and tags the server would refuse.
func (c *Client) check(tag string) error {
	if c.closed.Load() {
		return ErrClosed
	}
	if err := leafd.ValidateTag(tag); err != nil {
		return localError(http.StatusBadRequest, leafd.EInvalidTag, "%s", leafd.ErrorMessage(err))
	}
	return nil
}

// Snowflake returns one snowflake ID from GET /snowflake. Snowflake IDs
// are never buffered: an ID carries the time it was made.
//
// Errors: an *Error with the server's code (mode_disabled,
// snowflake_unavailable, …); a network error when no base URL answered;
// the context's error; ErrClosed.
func (c *Client) Snowflake(ctx context.Context) (int64, error) {
	ids, err := c.SnowflakeN(ctx, 1)
	if err != nil {
		return 0, err
	}
	return ids[0], nil
}

// SnowflakeN returns n snowflake IDs, ascending, from
// GET /snowflake?count=n. n must be in 1..the servers' batch limit
// (segment.max_batch, default 10,000).
//
// Errors: those of Snowflake, and invalid_count for n out of range.
func (c *Client) SnowflakeN(ctx context.Context, n int) ([]int64, error) {
	if c.closed.Load() {
		return nil, ErrClosed
	}
	if n < 1 {
		return nil, localError(http.StatusBadRequest, leafd.EInvalidCount, "count %d is not valid: ask for at least 1 ID", n)
	}
	path := "/snowflake?format=json"
	if n > 1 {
		path += "&count=" + strconv.Itoa(n)
	}
	body, err := c.get(ctx, path, n)
	if err != nil {
		return nil, err
	}
	return parseIDs(body, n, nil)
}

// fetchSegment asks a server for n IDs of tag.
func (c *Client) fetchSegment(ctx context.Context, tag string, n int) ([]int64, error) {
	path := "/segment/" + tag + "?format=json" // a valid tag needs no escaping
	if n > 1 {
		path += "&count=" + strconv.Itoa(n)
	}
	body, err := c.get(ctx, path, n)
	if err != nil {
		return nil, err
	}
	return parseIDs(body, n, &tag)
}

// get sends GET path to the base URLs in turn, starting at the one that
// answered last, and returns the body of the first 200 answer. n, the
// number of IDs asked for, bounds the size of the body it accepts.
func (c *Client) get(ctx context.Context, path string, n int) ([]byte, error) {
	start := int(c.cur.Load())
	var errs []error
	for i := range c.urls {
		idx := (start + i) % len(c.urls)
		u := c.urls[idx] + path
		body, retry, err := c.try(ctx, u, n)
		if ctx.Err() != nil {
			// The caller's deadline, not the server: say so, whatever the
			// transport made of it.
			return nil, fmt.Errorf("leafd client: GET %s: %w", u, ctx.Err())
		}
		if err == nil || !retry {
			if idx != start {
				c.cur.CompareAndSwap(int32(start), int32(idx))
			}
			return body, err
		}
		errs = append(errs, err)
	}
	if len(errs) == 1 {
		return nil, errs[0]
	}
	return nil, fmt.Errorf("leafd client: none of %d base URLs answered: %w", len(errs), errors.Join(errs...))
}

// try sends one request. retry reports whether the next base URL should be
// asked: after a network error or a 5xx answer that is not definite.
func (c *Client) try(ctx context.Context, u string, n int) (body []byte, retry bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, false, err
	}
	req.Header.Set("Accept", "application/json")
	res, err := c.hc.Do(req)
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
