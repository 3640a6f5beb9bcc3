// Package access checks the access tokens of the ID requests
// (docs/contract.md, "Access tokens") for every transport. With
// segment.require_token or snowflake.require_token on, an ID request needs
// a token that allows the tag asked for (the snowflake requests ask for the
// name "snowflake"). A Checker keeps the live tokens in memory, keyed by the
// id their text carries, and reads them again from the store every Refresh
// (and at once after Reload): a revocation reaches every server within a
// few seconds, and a check costs a SHA-256 and a map lookup.
package access

import (
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/store"
)

// Store is where a Checker reads the tokens; every store.Store implements it.
type Store interface {
	ListTokens(ctx context.Context) ([]store.Token, error)
}

var _ Store = store.Store(nil)

// DefaultRefresh is how often a Checker reads the tokens again.
const DefaultRefresh = 2 * time.Second

// SnowflakeTag is the name a token's patterns must allow for the snowflake
// ID requests: "snowflake" itself, "*", or a prefix of it.
const SnowflakeTag = "snowflake"

const requiredHint = "send the header Authorization: Bearer TOKEN, with a token made by POST /api/tokens or leafd token add"

// Config wires a Checker.
type Config struct {
	// Store holds the tokens; nil requires none.
	Store Store
	// Segment and Snowflake make the mode's ID requests need a token
	// (segment.require_token, snowflake.require_token).
	Segment, Snowflake bool
	// Refresh is how often the tokens are read again; 0 means
	// DefaultRefresh.
	Refresh time.Duration
	// Registerer receives leafd_token_refusals_total; nil keeps it
	// unregistered.
	Registerer prometheus.Registerer
	// TagLabels labels the refusals with the segment tag (metrics.per_tag
	// full); otherwise the label is empty.
	TagLabels bool
	// Logger receives the failures to read the tokens. Default
	// slog.Default().
	Logger *slog.Logger
}

// entry is one live token as the check needs it.
type entry struct {
	hash     [sha256.Size]byte
	exact    map[string]struct{}
	prefixes []string // "" allows every tag
}

// allows reports whether the token's patterns allow tag.
func (e *entry) allows(tag string) bool {
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

// set is the live tokens by id: immutable once published.
type set map[string]*entry

func newSet(tokens []store.Token) set {
	s := make(set, len(tokens))
	for _, t := range tokens {
		b, err := hex.DecodeString(t.Hash)
		if err != nil || len(b) != sha256.Size {
			continue // not a hash this server wrote: no text matches it
		}
		e := &entry{hash: [sha256.Size]byte(b), exact: map[string]struct{}{}}
		for _, p := range t.Tags {
			if prefix, ok := strings.CutSuffix(p, "*"); ok {
				e.prefixes = append(e.prefixes, prefix)
			} else {
				e.exact[p] = struct{}{}
			}
		}
		s[t.ID] = e
	}
	return s
}

// Checker holds the live tokens and reads them again every refresh. It owns
// its goroutine: Close stops it and waits. A nil Checker requires no token.
type Checker struct {
	store              Store
	segment, snowflake bool
	log                *slog.Logger
	refresh            time.Duration
	set                atomic.Pointer[set] // nil until the first reading succeeded
	mu                 sync.Mutex          // one reading at a time, so that an older never replaces a newer
	failing            bool                // under mu: the last reading failed (logged once)
	stop               context.CancelFunc
	done               chan struct{}

	// refusals counts the refused ID requests by mode, tag and reason. The
	// tag label is "" unless TagLabels; then it is one of the names of
	// byTag, a request for any other counted under "(other)", so that a
	// flood of made-up tags makes no flood of series.
	refusals  *prometheus.CounterVec
	tagLabels bool
	tagsMu    sync.Mutex
	// byTag counts the refusals of each segment tag for /api/state and the
	// dashboard, whatever the labels: at most maxRefusalTags names (under
	// tagsMu), so that made-up tags cannot grow it.
	byTag map[string]*atomic.Int64
}

// maxRefusalTags bounds the tag label of leafd_token_refusals_total.
const maxRefusalTags = 1000

// New returns a Checker reading cfg.Store, or nil when no mode requires a
// token or there is no store. It panics if cfg.Registerer already holds
// leafd_token_refusals_total.
func New(cfg Config) *Checker {
	if cfg.Store == nil || (!cfg.Segment && !cfg.Snowflake) {
		return nil
	}
	k := &Checker{store: cfg.Store, segment: cfg.Segment, snowflake: cfg.Snowflake, log: cmp.Or(cfg.Logger, slog.Default()),
		refresh: cmp.Or(max(cfg.Refresh, 0), DefaultRefresh), done: make(chan struct{}),
		tagLabels: cfg.TagLabels, byTag: map[string]*atomic.Int64{},
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leafd_token_refusals_total",
			Help: "ID requests refused for their access token, by mode (segment or snowflake), tag (with metrics.per_tag full; empty for snowflake, or with basic or off) and reason (missing or refused).",
		}, []string{"mode", "tag", "reason"}),
	}
	if cfg.Registerer != nil {
		cfg.Registerer.MustRegister(k.refusals)
	}
	ctx, stop := context.WithCancel(context.Background())
	k.stop = stop
	go k.run(ctx)
	return k
}

// Required reports whether the ID requests of a mode (snowflake, or segment
// when false) need a token.
func (k *Checker) Required(snowflake bool) bool {
	return k != nil && ((snowflake && k.snowflake) || (!snowflake && k.segment))
}

// Check checks the token text presented with an ID request: nil when the
// mode requires no token or token allows tag (the name snowflake for the
// snowflake mode, whose tag is ignored); otherwise token_required (token is
// empty), token_refused, or store_unavailable before the tokens were ever
// read, each refusal counted. A segment tag that is not valid is
// invalid_tag, before any token is looked at.
func (k *Checker) Check(token, tag string, snowflake bool) error {
	if !k.Required(snowflake) {
		return nil
	}
	mode := "segment"
	if snowflake {
		mode, tag = "snowflake", SnowflakeTag
	} else if err := leafd.ValidateTag(tag); err != nil {
		return err
	}
	reason := "refused"
	var err error
	if token = strings.TrimSpace(token); token == "" {
		reason = "missing"
		err = leafd.Errorf(leafd.ETokenRequired, "this route needs an access token: %s", requiredHint)
	} else {
		err = k.allowed(token, tag)
	}
	if err == nil {
		return nil
	}
	if code := leafd.ErrorCode(err); code == leafd.ETokenRequired || code == leafd.ETokenRefused {
		k.refused(mode, tag, reason)
	}
	return err
}

// refused counts one refusal; only a segment tag is counted by tag. The
// token is never a label.
func (k *Checker) refused(mode, tag, reason string) {
	// basic keeps to the few series per tag an alert needs; the refusals
	// of each tag are in /api/state either way.
	label := ""
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
		switch {
		case k.tagLabels && c != nil:
			label = tag
		case k.tagLabels:
			label = "(other)"
		}
	}
	k.refusals.WithLabelValues(mode, label, reason).Inc()
}

// RefusalsOf returns how many requests for segment tag were refused for
// their token.
func (k *Checker) RefusalsOf(tag string) int64 {
	if k == nil {
		return 0
	}
	k.tagsMu.Lock()
	c := k.byTag[tag]
	k.tagsMu.Unlock()
	if c == nil {
		return 0
	}
	return c.Load()
}

func (k *Checker) run(ctx context.Context) {
	defer close(k.done)
	t := time.NewTicker(k.refresh)
	defer t.Stop()
	for {
		k.Reload(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Reload reads the tokens from the store and publishes them: after a token
// is created or revoked, so that the change applies at once. A failure
// keeps the last set that was read: a database outage must not lock every
// client out, nor let anyone in.
func (k *Checker) Reload(parent context.Context) {
	if k == nil {
		return
	}
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
			k.log.Warn("access: the access tokens could not be read from the store; keeping the last ones read", "err", err)
		}
		return
	}
	if k.failing {
		k.failing = false
		k.log.Info("access: the access tokens are read from the store again", "tokens", len(tokens))
	}
	s := newSet(tokens)
	k.set.Store(&s)
}

// Close stops the refresh and waits for it. It may be called more than
// once.
func (k *Checker) Close() {
	if k == nil {
		return
	}
	k.stop()
	<-k.done
}

// dummyHash is compared against when a token's id is unknown, so that an
// unknown token takes as long as a known one with the wrong secret.
var dummyHash [sha256.Size]byte

// allowed checks a presented token for tag: nil, or token_refused, or
// store_unavailable before the tokens were ever read.
func (k *Checker) allowed(text, tag string) error {
	s := k.set.Load()
	if s == nil {
		return leafd.Errorf(leafd.EStoreUnavailable, "the access tokens have not been read from the store yet: try again in a few seconds")
	}
	id, _ := store.TokenID(text)
	e := (*s)[id]
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
