package http

import (
	"net/url"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/leafd/leafd"
)

// Every route reads its query string through queryRule.read, in one pass
// over the raw string and without building url.Values: the values are
// substrings of raw unless they hold an escape, so that the ID routes'
// common query costs no allocation. Where url.ParseQuery (and so gin's
// c.GetQuery) would drop a pair it cannot read, or keep the first of two
// values, and the request would go on with a default (count=5;format=json
// answered one ID), a route refuses. Each route declares its rule once,
// below.
var (
	// The native ID routes: their parameters once each, nothing else.
	segmentQuery   = queryRule{only: true, takes: []param{{"count", leafd.EInvalidCount}, {"format", leafd.EInvalidQuery}}}
	snowflakeQuery = queryRule{only: true, takes: []param{{"count", leafd.EInvalidCount}, {"format", leafd.EInvalidQuery}}}
	// The range route, whose answer is JSON whatever format says;
	// expiring=true is a client's word that it honours valid_ms.
	rangeQuery = queryRule{only: true, takes: []param{{"format", leafd.EInvalidQuery}, {"size", leafd.EInvalidSize}, {"expiring", leafd.EInvalidQuery}}}
	// The Leaf-compatible ID routes read as Leaf does, ignoring what they
	// do not take, a ';' included; their token is read at most once.
	// leafQuery refuses a malformed escape anywhere, as the handler's
	// check; tokenQuery reads the token alone, for the token's check,
	// before it.
	leafParams = []param{{"token", leafd.EInvalidQuery}}
	leafQuery  = queryRule{escapes: true, takes: leafParams}
	tokenQuery = queryRule{takes: leafParams}
	// The other routes, whose handlers read what they take: no ';', no
	// malformed escape and no parameter twice (whose first value the
	// handler would read).
	onceQuery       = queryRule{once: true}
	decodeLeafQuery = queryRule{once: true, takes: []param{{"snowflakeId", leafd.EInvalidID}}}
	apiStateQuery   = queryRule{once: true, takes: []param{{"tag", leafd.EInvalidQuery}, {"q", leafd.EInvalidQuery},
		{"state", leafd.EInvalidQuery}, {"sort", leafd.EInvalidQuery}, {"offset", leafd.EInvalidQuery}, {"limit", leafd.EInvalidQuery}}}
)

// queryRule is how a route reads its query string.
type queryRule struct {
	// takes are the parameters the route reads, each with the code of the
	// error when it is given twice; query keeps their values in this order
	// (at most len(query.values)).
	takes []param
	// only refuses a ';' and every parameter the route does not take.
	only bool
	// once refuses a ';', a malformed escape in any name or value, and any
	// parameter given twice, taken or not.
	once bool
	// escapes refuses a malformed %-escape anywhere, before anything else.
	escapes bool
}

// param is one parameter a route takes.
type param struct{ name, repeated string }

// query is what a route read: the value of each parameter its rule takes,
// and whether it was given.
type query struct {
	rule   *queryRule
	values [6]string
	has    [6]bool
}

// get returns the value of the parameter name and whether it was given.
func (q *query) get(name string) (string, bool) {
	if i := q.rule.index(name); i >= 0 {
		return q.values[i], q.has[i]
	}
	return "", false
}

// read reads raw, the query string, by r into q, a zero query. Its errors
// are invalid_query, or the code of the parameter given twice.
func (r *queryRule) read(raw string, q *query) error {
	q.rule = r
	if raw == "" {
		return nil
	}
	if r.escapes && !validEscapes(raw) {
		return leafd.Errorf(leafd.EInvalidQuery, "the query string %q does not parse: it holds a malformed %%-escape; write a %% as %%25", truncate(raw))
	}
	if (r.only || r.once) && strings.IndexByte(raw, ';') >= 0 {
		return leafd.Errorf(leafd.EInvalidQuery,
			`the query string %q does not parse: it holds ";", which is not a separator; separate parameters with "&", and write a ";" inside a value as %%3B`, truncate(raw))
	}
	var seen map[string]struct{} // with once: every name given
	for raw != "" {
		var pair string
		pair, raw, _ = strings.Cut(raw, "&")
		if pair == "" {
			continue
		}
		key, value, _ := strings.Cut(pair, "=")
		key, err := unescapeQuery(key)
		if err != nil {
			return err
		}
		i := r.index(key)
		if r.once {
			if _, err := unescapeQuery(value); err != nil {
				return err
			}
			if _, dup := seen[key]; dup {
				code := leafd.EInvalidQuery
				if i >= 0 {
					code = r.takes[i].repeated
				}
				return leafd.Errorf(code, "the query parameter %q is repeated: give it once", truncate(key))
			}
			if seen == nil {
				seen = make(map[string]struct{})
			}
			seen[key] = struct{}{}
		}
		if i < 0 {
			if r.only {
				return unknownParam(key, r)
			}
			continue
		}
		if q.has[i] {
			return leafd.Errorf(r.takes[i].repeated, "the query parameter %s is repeated: give it once", key)
		}
		if value, err = unescapeQuery(value); err != nil {
			return err
		}
		q.values[i], q.has[i] = value, true
	}
	return nil
}

// index returns where r takes the parameter name, -1 if it does not.
func (r *queryRule) index(name string) int {
	for i, p := range r.takes {
		if p.name == name {
			return i
		}
	}
	return -1
}

// unknownParam is the error of a parameter that a route taking only its
// own does not take.
func unknownParam(key string, r *queryRule) error {
	if key == "token" {
		return leafd.Errorf(leafd.EInvalidQuery,
			"the query parameter token is not read on this route: send an access token in the header Authorization: Bearer TOKEN, never in the URL (URLs end up in logs); only the Leaf-compatible routes take ?token=")
	}
	names := make([]string, len(r.takes))
	for i, p := range r.takes {
		names[i] = p.name
	}
	return leafd.Errorf(leafd.EInvalidQuery,
		"the query parameter %q is not one this route takes: it takes %s; leave the others out", truncate(key), strings.Join(names, ", "))
}

// parseCount reads the count of an ID route: a decimal integer in 1..max.
func parseCount(raw string, max int) (int, error) {
	n, err := strconv.Atoi(raw)
	if err != nil || n < 1 || n > max {
		return 0, leafd.Errorf(leafd.EInvalidCount, "count %q is not valid: use a whole number from 1 to %d", truncate(raw), max)
	}
	return n, nil
}

// truncate shortens a client's value for an error message.
func truncate(s string) string {
	if len(s) > 32 {
		return s[:32] + "…"
	}
	return s
}

// validEscapes reports whether every '%' in s starts an escape of two hex
// digits, the only thing url.QueryUnescape refuses.
func validEscapes(s string) bool {
	for i := strings.IndexByte(s, '%'); i >= 0; i = strings.IndexByte(s, '%') {
		if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
			return false
		}
		s = s[i+3:]
	}
	return true
}

func isHex(b byte) bool {
	return '0' <= b && b <= '9' || 'a' <= b && b <= 'f' || 'A' <= b && b <= 'F'
}

// unescapeQuery decodes a key or value of a query string as url.ParseQuery
// does ('+' is a space), returning s itself when it holds nothing to decode.
func unescapeQuery(s string) (string, error) {
	if strings.IndexByte(s, '%') < 0 && strings.IndexByte(s, '+') < 0 {
		return s, nil
	}
	u, err := url.QueryUnescape(s)
	if err != nil {
		return "", leafd.Errorf(leafd.EInvalidQuery, "the query string does not parse: it holds %q, a malformed %%-escape; write a %% as %%25", truncate(s))
	}
	return u, nil
}

// checkQuery is the middleware of the routes that are not ID routes: it
// refuses a query that r refuses, before the handler reads it.
func (s *Server) checkQuery(r *queryRule) gin.HandlerFunc {
	return func(c *gin.Context) {
		var q query
		if err := r.read(c.Request.URL.RawQuery, &q); err != nil {
			s.writeError(c, err)
			return
		}
		c.Next()
	}
}
