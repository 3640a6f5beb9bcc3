package http

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/store"
)

// Access tokens of the ID routes (docs/contract.md, "Access tokens"). With
// segment.require_token or snowflake.require_token on, an ID route needs
// Authorization: Bearer TOKEN, where TOKEN allows the tag asked for (the
// snowflake routes ask for the name "snowflake"). Each server keeps the
// live tokens in memory, keyed by the id their text carries, and reads them
// again from the store every TokenRefresh (and at once after a create or a
// revocation through it): a revocation reaches every server within a few
// seconds, and the check on the hot path costs a SHA-256 and a map lookup.

// Tokens is what the token routes and the ID routes' check need of the
// store; every store.Store implements it.
type Tokens interface {
	CreateToken(ctx context.Context, tags []string, description string) (store.Token, string, error)
	ListTokens(ctx context.Context) ([]store.Token, error)
	RevokeToken(ctx context.Context, id string) error
}

var _ Tokens = store.Store(nil)

// DefaultTokenRefresh is how often a server reads the tokens again.
const DefaultTokenRefresh = 2 * time.Second

// SnowflakeTokenTag is the name a token's patterns must allow for the
// snowflake ID routes: "snowflake" itself, "*", or a prefix of it.
const SnowflakeTokenTag = "snowflake"

const tokenRequiredHint = "send the header Authorization: Bearer TOKEN, with a token made by POST /api/tokens or leafd token add"

// tokenEntry is one live token as the check needs it.
type tokenEntry struct {
	hash     [sha256.Size]byte
	exact    map[string]struct{}
	prefixes []string // "" allows every tag
}

// allows reports whether the token's patterns allow tag.
func (e *tokenEntry) allows(tag string) bool {
	if _, ok := e.exact[tag]; ok {
		return true
	}
	for _, p := range e.prefixes {
		if strings.HasPrefix(tag, p) {
			return true
		}
	}
	return false
}

// tokenSet is the live tokens by id: immutable once published.
type tokenSet map[string]*tokenEntry

func newTokenSet(tokens []store.Token) tokenSet {
	set := make(tokenSet, len(tokens))
	for _, t := range tokens {
		e := &tokenEntry{exact: map[string]struct{}{}}
		if b, err := hex.DecodeString(t.Hash); err != nil || len(b) != sha256.Size {
			continue // not a hash this server wrote: no text matches it
		} else {
			copy(e.hash[:], b)
		}
		for _, p := range t.Tags {
			if prefix, ok := strings.CutSuffix(p, "*"); ok {
				e.prefixes = append(e.prefixes, prefix)
			} else {
				e.exact[p] = struct{}{}
			}
		}
		set[t.ID] = e
	}
	return set
}

// tokenKeeper holds the live tokens and reads them again every refresh.
// It owns its goroutine: close stops it and waits.
type tokenKeeper struct {
	store   Tokens
	log     *slog.Logger
	refresh time.Duration
	set     atomic.Pointer[tokenSet] // nil until the first reading succeeded
	mu      sync.Mutex               // one reading at a time, so that an older never replaces a newer
	failing bool                     // under mu: the last reading failed (logged once)
	stop    context.CancelFunc
	done    chan struct{}
	once    sync.Once

	// refusals counts the refused ID requests (leafd_token_refusals_total)
	// by mode, tag and reason. The tag label follows metrics.per_tag: ""
	// with basic and off; with full at most maxRefusalTags names, a
	// request for any other counted under "(other)", so that a flood of
	// made-up tags makes no flood of series.
	refusals *prometheus.CounterVec
	perTag   PerTag
	tagsMu   sync.Mutex
	tags     map[string]struct{}
	// byTag counts the refusals of each segment tag for /api/state and the
	// dashboard, whatever metrics.per_tag says: at most maxRefusalTags
	// names (under tagsMu), so that made-up tags cannot grow it.
	byTag map[string]*atomic.Int64
}

// maxRefusalTags bounds the tag label of leafd_token_refusals_total.
const maxRefusalTags = 1000

func newTokenKeeper(st Tokens, refresh time.Duration, log *slog.Logger, m *Metrics) *tokenKeeper {
	if refresh <= 0 {
		refresh = DefaultTokenRefresh
	}
	ctx, stop := context.WithCancel(context.Background())
	k := &tokenKeeper{store: st, log: log, refresh: refresh, stop: stop, done: make(chan struct{}),
		perTag: m.perTag, tags: map[string]struct{}{}, byTag: map[string]*atomic.Int64{},
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leafd_token_refusals_total",
			Help: "ID requests refused for their access token, by mode (segment or snowflake), tag (with metrics.per_tag full; empty for snowflake, or with basic or off) and reason (missing or refused).",
		}, []string{"mode", "tag", "reason"}),
	}
	m.reg.MustRegister(k.refusals)
	go k.run(ctx)
	return k
}

// refused counts one refusal. The token is never a label.
func (k *tokenKeeper) refused(mode, tag, reason string) {
	if mode == "segment" && tag != "" {
		k.tagsMu.Lock()
		c := k.byTag[tag]
		if c == nil && len(k.byTag) < maxRefusalTags {
			c = new(atomic.Int64)
			k.byTag[tag] = c
		}
		k.tagsMu.Unlock()
		if c != nil {
			c.Add(1)
		}
	}
	if k.perTag != PerTagFull {
		// basic keeps to the few series per tag an alert needs; the
		// refusals of each tag are in /api/state either way.
		tag = ""
	}
	if tag != "" {
		k.tagsMu.Lock()
		if _, ok := k.tags[tag]; !ok {
			if len(k.tags) < maxRefusalTags {
				k.tags[tag] = struct{}{}
			} else {
				tag = "(other)"
			}
		}
		k.tagsMu.Unlock()
	}
	k.refusals.WithLabelValues(mode, tag, reason).Inc()
}

// refusalsOf returns how many requests for segment tag were refused for
// their token.
func (k *tokenKeeper) refusalsOf(tag string) int64 {
	k.tagsMu.Lock()
	c := k.byTag[tag]
	k.tagsMu.Unlock()
	if c == nil {
		return 0
	}
	return c.Load()
}

func (k *tokenKeeper) run(ctx context.Context) {
	defer close(k.done)
	t := time.NewTicker(k.refresh)
	defer t.Stop()
	for {
		k.reload(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// reload reads the tokens from the store and publishes them. A failure
// keeps the last set that was read: a database outage must not lock every
// client out, nor let anyone in.
func (k *tokenKeeper) reload(parent context.Context) {
	ctx, cancel := context.WithTimeout(parent, max(k.refresh, time.Second))
	defer cancel()
	k.mu.Lock()
	defer k.mu.Unlock()
	tokens, err := k.store.ListTokens(ctx)
	if err != nil {
		if parent.Err() != nil {
			return // closing
		}
		if !k.failing {
			k.failing = true
			k.log.Warn("http: the access tokens could not be read from the store; keeping the last ones read", "err", err)
		}
		return
	}
	if k.failing {
		k.failing = false
		k.log.Info("http: the access tokens are read from the store again", "tokens", len(tokens))
	}
	set := newTokenSet(tokens)
	k.set.Store(&set)
}

// close stops the refresh and waits for it.
func (k *tokenKeeper) close() {
	k.once.Do(func() {
		k.stop()
		<-k.done
	})
}

// dummyHash is compared against when a token's id is unknown, so that an
// unknown token takes as long as a known one with the wrong secret.
var dummyHash [sha256.Size]byte

// allowed checks a presented token for tag: nil, or token_refused, or
// store_unavailable before the tokens were ever read.
func (k *tokenKeeper) allowed(text, tag string) error {
	set := k.set.Load()
	if set == nil {
		return leafd.Errorf(leafd.EStoreUnavailable, "the access tokens have not been read from the store yet: try again in a few seconds")
	}
	id, _ := store.TokenID(text)
	e := (*set)[id]
	want := &dummyHash
	if e != nil {
		want = &e.hash
	}
	sum := sha256.Sum256([]byte(text))
	if subtle.ConstantTimeCompare(sum[:], want[:]) != 1 || e == nil || !e.allows(tag) {
		return leafd.Errorf(leafd.ETokenRefused,
			"the token is not allowed for %q: it is unknown, revoked, or its tags do not match; ask an operator for a token whose tags allow it", tag)
	}
	return nil
}

// guard returns h behind the token check of its mode when that mode
// requires tokens. leaf routes take the token from ?token= as well (as
// Tinyid clients send it) and answer a refusal in their text shape.
func (s *Server) guard(snowflake, leaf bool, h gin.HandlerFunc) []gin.HandlerFunc {
	if s.tok == nil || (snowflake && !s.sfRequire) || (!snowflake && !s.segRequire) {
		return []gin.HandlerFunc{h}
	}
	return []gin.HandlerFunc{func(c *gin.Context) { s.checkIDToken(c, snowflake, leaf) }, h}
}

// checkIDToken lets an ID request through only with a token allowed for
// its tag (the name snowflake on the snowflake routes).
func (s *Server) checkIDToken(c *gin.Context, snowflake, leaf bool) {
	tag := SnowflakeTokenTag
	if !snowflake {
		tag = c.Param("tag")
		if leafd.ValidateTag(tag) != nil {
			c.Next() // the handler answers invalid_tag
			return
		}
	}
	var text string
	scheme, rest, _ := strings.Cut(strings.TrimSpace(c.GetHeader("Authorization")), " ")
	if strings.EqualFold(scheme, "Bearer") {
		text = strings.TrimSpace(rest)
	}
	var err error
	switch {
	case text == "" && leaf:
		text, err = queryToken(c.Request.URL.RawQuery)
	case text == "":
		// A token in the URL of a native route is refused as the handler
		// would refuse it, rather than answered token_required: the caller
		// learns where the token goes.
		if token, qerr := queryToken(c.Request.URL.RawQuery); qerr != nil || token != "" {
			s.writeError(c, unknownParam("token", 0))
			return
		}
	}
	if err == nil { // else a malformed query: not a refusal
		err = s.checkAccessToken(text, tag, snowflake)
	}
	if err == nil {
		c.Next()
		return
	}
	if leafd.ErrorCode(err) == leafd.ETokenRequired {
		c.Header("WWW-Authenticate", `Bearer realm="leafd"`)
	}
	if !leaf {
		s.writeError(c, err)
		return
	}
	code := leafd.ErrorCode(err)
	if code != leafd.ETokenRequired && code != leafd.ETokenRefused {
		s.writeLeafError(c, err) // 500, as every other error of these routes
		return
	}
	// The Leaf route's text shape, with the refusal's own status: a
	// client without a token must not read it as a server failure.
	status := ErrorStatus(err)
	_ = c.Error(err)
	c.Header("Content-Type", textPlain)
	c.AbortWithStatus(status)
	_, _ = c.Writer.WriteString(code + ": " + leafd.ErrorMessage(err))
}

// checkAccessToken checks the token text presented for tag (SnowflakeTokenTag
// for the snowflake mode): nil, token_required when text is empty,
// token_refused, or store_unavailable before the tokens were ever read.
// A refusal is counted (leafd_token_refusals_total, /api/state). s.tok must
// not be nil.
func (s *Server) checkAccessToken(text, tag string, snowflake bool) error {
	reason := "refused"
	var err error
	if text == "" {
		reason = "missing"
		err = leafd.Errorf(leafd.ETokenRequired, "this route needs an access token: %s", tokenRequiredHint)
	} else {
		err = s.tok.allowed(text, tag)
	}
	if err == nil {
		return nil
	}
	mode := "segment"
	if snowflake {
		mode, tag = "snowflake", ""
	}
	if code := leafd.ErrorCode(err); code == leafd.ETokenRequired || code == leafd.ETokenRefused {
		s.tok.refused(mode, tag, reason)
	}
	return err
}

// IDTokenRequired reports whether the ID requests of a mode (snowflake, or
// segment when false) need an access token: the mode's require_token is
// on and the server has a store of tokens. Another front end than HTTP
// (the gRPC API) asks it before it looks for a token at all.
func (s *Server) IDTokenRequired(snowflake bool) bool {
	return s.tok != nil && ((snowflake && s.sfRequire) || (!snowflake && s.segRequire))
}

// CheckIDToken checks the access token presented with an ID request that
// did not come through the HTTP routes (the gRPC API), as the ID routes
// check theirs: nil when the mode requires no token or token allows tag
// (the name snowflake for the snowflake mode, whose tag is ignored);
// otherwise token_required (token is empty), token_refused, or
// store_unavailable before the tokens were ever read, each refusal counted
// as the HTTP routes count theirs. token is the bearer token's text, the
// scheme word already removed. A segment tag that is not valid is
// invalid_tag, before any token is looked at.
func (s *Server) CheckIDToken(token, tag string, snowflake bool) error {
	if !s.IDTokenRequired(snowflake) {
		return nil
	}
	if snowflake {
		tag = SnowflakeTokenTag
	} else if err := leafd.ValidateTag(tag); err != nil {
		return err
	}
	return s.checkAccessToken(strings.TrimSpace(token), tag, snowflake)
}

// Registerer returns the registry that GET /metrics serves, so that another
// front end of the same server (the gRPC API) can add its metrics to it.
func (m *Metrics) Registerer() prometheus.Registerer { return m.reg }

// queryToken reads the token parameter of a Leaf route's query, given at
// most once. Names are %-decoded, as the rest of the query is read:
// %74oken is token.
func queryToken(raw string) (string, error) {
	var token string
	seen := false
	for raw != "" {
		var pair string
		pair, raw, _ = strings.Cut(raw, "&")
		key, value, _ := strings.Cut(pair, "=")
		key, err := unescapeQuery(key)
		if err != nil {
			return "", err
		}
		if key != "token" {
			continue
		}
		if seen {
			return "", leafd.Errorf(leafd.EInvalidQuery, "the query parameter token is repeated: give it once")
		}
		v, err := unescapeQuery(value)
		if err != nil {
			return "", err
		}
		token, seen = strings.TrimSpace(v), true
	}
	return token, nil
}

// tokenJSON is a token as the admin routes answer it: never its hash. The
// text is there only in the answer to its creation.
type tokenJSON struct {
	ID          string   `json:"id"`
	Token       string   `json:"token,omitempty"`
	Tags        []string `json:"tags"`
	Description string   `json:"description"`
	Created     string   `json:"created"`
}

func tokenToJSON(t store.Token, text string) tokenJSON {
	tags := t.Tags
	if tags == nil {
		tags = []string{}
	}
	return tokenJSON{ID: t.ID, Token: text, Tags: tags, Description: t.Description,
		Created: t.Created.UTC().Format(rfc3339Milli)}
}

// CreateTokenRequest is the body of POST /api/tokens.
type CreateTokenRequest struct {
	Tags        *[]string `json:"tags"`
	Description *string   `json:"description"`
}

// ParseCreateToken decodes and checks a POST /api/tokens body.
//
// Errors: invalid_body for a body that is not one JSON object of the known
// fields, no tags, a bad pattern or description; body_too_large past 64
// KiB.
func ParseCreateToken(body io.Reader) (tags []string, description string, err error) {
	const example = `{"tags":["order","pay*"],"description":"billing"}`
	var req CreateTokenRequest
	if err := decodeJSON(body, &req, defaultMaxStep, example); err != nil {
		return nil, "", err
	}
	if req.Tags == nil {
		return nil, "", leafd.Errorf(leafd.EInvalidBody, "the body names no tags: send %s", example)
	}
	if tags, err = store.ValidateTokenTags(*req.Tags); err != nil {
		return nil, "", err
	}
	if req.Description != nil {
		description = *req.Description
		if err := leafd.ValidateDescription(description); err != nil {
			return nil, "", err
		}
	}
	return tags, description, nil
}

func (s *Server) tokensDisabled(c *gin.Context) bool {
	if s.tokenStore == nil {
		s.writeError(c, leafd.Errorf(leafd.EAdminDisabled, "this server has no store for tokens"))
		return true
	}
	return false
}

// listTokens answers GET /api/tokens.
func (s *Server) listTokens(c *gin.Context) {
	if s.tokensDisabled(c) {
		return
	}
	tokens, err := s.tokenStore.ListTokens(c.Request.Context())
	if err != nil {
		s.writeError(c, err)
		return
	}
	out := make([]tokenJSON, len(tokens))
	for i, t := range tokens {
		out[i] = tokenToJSON(t, "")
	}
	c.JSON(http.StatusOK, gin.H{"tokens": out})
}

// createToken answers POST /api/tokens: 201 with the token's text, shown
// this once.
func (s *Server) createToken(c *gin.Context) {
	if s.tokensDisabled(c) {
		return
	}
	body, err := adminBody(c)
	if err != nil {
		s.writeError(c, err)
		return
	}
	tags, desc, err := ParseCreateToken(body)
	if err != nil {
		s.writeError(c, err)
		return
	}
	t, text, err := s.tokenStore.CreateToken(c.Request.Context(), tags, desc)
	if err != nil {
		s.writeError(c, err)
		return
	}
	if s.tok != nil {
		s.tok.reload(context.WithoutCancel(c.Request.Context()))
	}
	s.log.Info("admin: token created", append([]any{"id", t.ID, "tags", strings.Join(t.Tags, ","),
		"description", t.Description}, caller(c)...)...)
	c.JSON(http.StatusCreated, tokenToJSON(t, text))
}

// revokeToken answers DELETE /api/tokens/{id}: 204.
func (s *Server) revokeToken(c *gin.Context) {
	if s.tokensDisabled(c) {
		return
	}
	id := c.Param("id")
	if err := s.tokenStore.RevokeToken(c.Request.Context(), id); err != nil {
		s.writeError(c, err)
		return
	}
	if s.tok != nil {
		s.tok.reload(context.WithoutCancel(c.Request.Context()))
	}
	s.log.Info("admin: token revoked", append([]any{"id", id}, caller(c)...)...)
	c.Status(http.StatusNoContent)
}
