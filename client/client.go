// Package client is a Go client of leafd's ID routes (docs/contract.md
// section 4): segment IDs per business tag and snowflake IDs, over one or
// more leafd servers. It speaks the HTTP API (New, base URLs) or the gRPC
// API (NewGRPC, the servers' grpc.addr):
//
//	c, err := client.New("http://leafd1:8080", client.WithFailover("http://leafd2:8080"))
//
//	c, err := client.NewGRPC("leafd1:9090", client.WithFailover("leafd2:9090"))
//
// The two give the same Client: the same methods, buffers, leases, failover
// rules and *Error values; only the requests differ (GET /segment/{tag} or
// IDService.NextSegment, and so on). Over HTTP it asks for JSON, whose IDs
// arrive as strings; either way the IDs are checked strictly (1 to 2^63-1,
// none twice, exactly as many as asked) and returned ascending. It fails
// over to the next server when one cannot be reached or answers an error
// that another server may not give, and stays on the server that worked.
// With WithBuffer it keeps IDs of each tag in memory and refills them in the
// background, as Didi Tinyid's client does, so that most calls of Next make
// no request at all.
//
// With WithRanges it leases runs of consecutive IDs per tag instead
// (GET /segment/{tag}/range?size=N, SegmentRange over gRPC): Next is then one atomic add on the
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
// Every method honours its context's deadline. Errors a server answers are
// *Error values carrying leafd's error code, the same over HTTP and gRPC;
// match them with errors.Is and the sentinels (ErrUnknownTag, …) or with
// IsCode.
//
// A Client is safe for concurrent use. Close it when done: that stops the
// background refills and drops the IDs the buffers and leases hold
// (skipped, never handed out).
package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/leafd/leafd"
)

// DefaultRefillTimeout bounds one background refill when WithRefillTimeout
// is not given.
const DefaultRefillTimeout = 10 * time.Second

// Client asks leafd servers for IDs. Create it with New (HTTP) or NewGRPC
// (gRPC); the zero value is not usable.
type Client struct {
	t    transport // the requests: HTTP or gRPC
	size int       // IDs per refill; 0 without a buffer
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

// Option configures a Client in New or NewGRPC.
type Option func(*settings)

type settings struct {
	more             []string
	hc               *http.Client
	hcSet            bool
	dial             []grpc.DialOption
	dialSet          bool
	size             int
	refillAt         float64
	buffered         bool
	refillTimeout    time.Duration
	refillTimeoutSet bool
	rangeSize        int64
	rangeRefillAt    float64
	ranged           bool
	token            string
	tokenSet         bool
}

// WithFailover adds further leafd servers of the same fleet (sharing one
// database): base URLs for New, gRPC addresses for NewGRPC. They are tried
// in order after the first when a server cannot be reached or answers a
// 5xx error that is not definite (every 5xx but tag_exhausted and
// period_exhausted). The client stays on the server that answered until it
// fails in turn. 4xx answers are definite and never retried elsewhere.
// Over gRPC the same rule holds for the HTTP status of the error's leafd
// code (UNAVAILABLE segment_unavailable is 503: the next address;
// NOT_FOUND unknown_tag is 404: the answer); see NewGRPC for statuses
// without one.
//
// Segment IDs from different servers are unique but only trend-increasing
// (docs/contract.md section 2): after a failover the next IDs may be lower than the
// last ones.
func WithFailover(servers ...string) Option {
	return func(s *settings) { s.more = append(s.more, servers...) }
}

// WithToken sends token, an access token made with POST /api/tokens or
// leafd token add, with every request: as Authorization: Bearer over HTTP,
// as the authorization metadata over gRPC. Servers with
// segment.require_token or snowflake.require_token need one that allows
// the tags asked for (snowflake for snowflake IDs); without it they answer
// token_required (ErrTokenRequired), and token_refused for a token that is
// unknown, revoked or not allowed (ErrTokenRefused).
func WithToken(token string) Option {
	return func(s *settings) { s.token, s.tokenSet = token, true }
}

// WithHTTPClient makes the Client send its requests through hc. Without
// it, the Client uses its own transport, whose idle connections Close
// closes. hc's Timeout, if any, bounds each request in addition to the
// caller's context. An option of New only: NewGRPC refuses it.
func WithHTTPClient(hc *http.Client) Option {
	return func(s *settings) { s.hc, s.hcSet = hc, true }
}

// WithBuffer keeps a local buffer of segment IDs per tag. Next and NextN
// (for up to size IDs) are served from it; a refill of size IDs
// (GET /segment/{tag}?count=size, or NextSegment over gRPC) starts in the background as soon as no
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
// one), speaking the HTTP API. It makes no request.
//
// Errors: a base URL that is not an absolute http or https URL, a nil
// *http.Client, WithGRPCDialOptions (an option of NewGRPC), a buffer or
// range size below 1, refillAt outside [0, 1), or a refill timeout that is
// not positive.
func New(baseURL string, opts ...Option) (*Client, error) {
	s := collect(opts)
	urls, err := baseURLs(append([]string{baseURL}, s.more...))
	if err != nil {
		return nil, err
	}
	switch {
	case s.hcSet && s.hc == nil:
		return nil, errors.New("leafd client: WithHTTPClient(nil)")
	case s.dialSet:
		return nil, errors.New("leafd client: WithGRPCDialOptions is an option of NewGRPC, not of New")
	}
	if err := s.check(); err != nil {
		return nil, err
	}
	t := newHTTPTransport(urls, s.hc)
	if s.token != "" {
		t.auth = "Bearer " + s.token
	}
	return newClient(s, t), nil
}

func collect(opts []Option) *settings {
	var s settings
	for _, o := range opts {
		o(&s)
	}
	return &s
}

// check refuses the settings that neither transport accepts.
func (s *settings) check() error {
	switch {
	case s.buffered && s.size < 1:
		return fmt.Errorf("leafd client: buffer size %d is below 1", s.size)
	case s.buffered && !(s.refillAt >= 0 && s.refillAt < 1):
		return fmt.Errorf("leafd client: refillAt %v is outside [0, 1)", s.refillAt)
	case s.ranged && s.rangeSize < 1:
		return fmt.Errorf("leafd client: range size %d is below 1", s.rangeSize)
	case s.ranged && !(s.rangeRefillAt >= 0 && s.rangeRefillAt < 1):
		return fmt.Errorf("leafd client: range refillAt %v is outside [0, 1)", s.rangeRefillAt)
	case s.tokenSet && (s.token == "" || strings.TrimSpace(s.token) != s.token || strings.ContainsAny(s.token, " \t\r\n")):
		return errors.New("leafd client: the access token is empty or holds whitespace: give the token's text as leafd token add printed it")
	case s.refillTimeoutSet && s.refillTimeout <= 0:
		return fmt.Errorf("leafd client: refill timeout %v is not positive", s.refillTimeout)
	}
	return nil
}

// newClient makes the Client of checked settings over t.
func newClient(s *settings, t transport) *Client {
	c := &Client{t: t, refillTimeout: DefaultRefillTimeout, bufs: make(map[string]*buffer)}
	if s.refillTimeoutSet {
		c.refillTimeout = s.refillTimeout
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
	return c
}

// Close stops the background refills, waits for them to end, and drops
// every buffered ID: those IDs are never handed out. Callers waiting for a
// refill get ErrClosed, and so does every later call. Then it closes the
// idle connections of its own HTTP transport, or its gRPC connections
// (calls still in flight on them end with ErrClosed). Close is safe to
// call more than once; it always returns nil.
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
	c.t.close()
	return nil
}

// Next returns one segment ID of tag: from the tag's range lease with
// WithRanges, from the buffer with WithBuffer, otherwise from
// GET /segment/{tag} (NextSegment over gRPC).
//
// Errors: an *Error with the server's code (unknown_tag, mode_disabled,
// segment_unavailable, tag_exhausted, …); an invalid_tag *Error, without a
// request, for a tag the server would refuse; a network error when no base
// URL or address answered; the context's error when it ended first;
// ErrClosed.
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
// request, NextSegment over gRPC (IDs of such a larger batch are not ordered against the IDs a
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

// Snowflake returns one snowflake ID from GET /snowflake (NextSnowflake
// over gRPC). Snowflake IDs are never buffered: an ID carries the time it
// was made.
//
// Errors: an *Error with the server's code (mode_disabled,
// snowflake_unavailable, …); a network error when no server answered;
// the context's error; ErrClosed.
func (c *Client) Snowflake(ctx context.Context) (int64, error) {
	ids, err := c.SnowflakeN(ctx, 1)
	if err != nil {
		return 0, err
	}
	return ids[0], nil
}

// SnowflakeN returns n snowflake IDs, ascending, from
// GET /snowflake?count=n (NextSnowflake over gRPC). n must be in 1..the servers' batch limit
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
	return c.t.snowflake(ctx, n)
}

// fetchSegment asks a server for n IDs of tag.
func (c *Client) fetchSegment(ctx context.Context, tag string, n int) ([]int64, error) {
	return c.t.segment(ctx, tag, n)
}

// transport is how a Client asks its servers for IDs: over HTTP
// (httpTransport) or gRPC (grpcTransport). Each fails over across its
// servers, checks what they answer strictly, and returns a server's error
// answer as an *Error.
type transport interface {
	// segment returns n IDs of tag, ascending.
	segment(ctx context.Context, tag string, n int) ([]int64, error)
	// segmentRange reserves size consecutive IDs of tag and returns the
	// first and how many (size; for a range that expires, 1 to size), and
	// valid: how long from the server's answer the range may be used, 0
	// for a range that never expires (valid_ms).
	segmentRange(ctx context.Context, tag string, size int64) (start, n int64, valid time.Duration, err error)
	// snowflake returns n snowflake IDs, ascending.
	snowflake(ctx context.Context, n int) ([]int64, error)
	// close releases the connections. Calls in flight may fail.
	close()
}

// failover asks n servers in turn through try, starting at the one that
// answered last (*cur), until one answers or gives an error that try says
// not to retry (retry false); the server that did is where the next call
// starts. where names a server's request for an error of ctx, and noun the
// servers in the error when none answered.
func failover(ctx context.Context, cur *atomic.Int32, n int, noun string, where func(i int) string, try func(i int) (retry bool, err error)) error {
	start := int(cur.Load())
	var errs []error
	for k := range n {
		i := (start + k) % n
		retry, err := try(i)
		if ctx.Err() != nil {
			// The caller's deadline, not the server: say so, whatever the
			// transport made of it.
			return fmt.Errorf("leafd client: %s: %w", where(i), ctx.Err())
		}
		if err == nil || !retry {
			if i != start {
				cur.CompareAndSwap(int32(start), int32(i))
			}
			return err
		}
		errs = append(errs, err)
	}
	if len(errs) == 1 {
		return errs[0]
	}
	return fmt.Errorf("leafd client: none of %d %s answered: %w", len(errs), noun, errors.Join(errs...))
}
