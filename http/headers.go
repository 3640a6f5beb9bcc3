package http

import (
	"net/http"
	"sync/atomic"
	"time"
)

// The security headers of every answer (docs/contract.md section 4, "HTTP
// server"). The values are built once and shared: net/http only reads a
// header's value slice, so assigning the same slice to every answer costs
// no allocation, which the ID routes' fast path counts on. Header names are
// written in canonical form, so the map is indexed directly.
var (
	// nosniff keeps a browser from reading a text or JSON answer, such as
	// the Leaf route's error that repeats the requested tag, as HTML.
	nosniff = []string{"nosniff"}
	// noReferrer keeps the dashboard's URL (and its ?poll=) out of other
	// sites' logs.
	noReferrer = []string{"no-referrer"}
	// apiCSP is the policy of every answer but the dashboard's page, which
	// sets its own: nothing here is a document that loads anything.
	apiCSP = []string{"default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"}
	// noStore: an ID, a state or a token check is never to be replayed
	// from a cache.
	noStore = []string{"no-store"}
)

// setAnswerHeaders sets the security headers and the Date of an answer
// started at now. The dashboard page replaces the CSP and Cache-Control
// with its own.
//
// The Date is set here, not by net/http, which would read the clock again
// and format the date for every answer: the value is formatted once a
// second and shared (dateValue). It is the second the request began: an
// answer that waited for a range (at most segment.wait_timeout) carries
// that second, not the one of its first byte. Answers are no-store (the
// dashboard page no-cache), so no cache ages one from its Date.
func setAnswerHeaders(h http.Header, now time.Time) {
	h["X-Content-Type-Options"] = nosniff
	h["Referrer-Policy"] = noReferrer
	h["Content-Security-Policy"] = apiCSP
	h["Cache-Control"] = noStore
	h["Date"] = dateValue(now)
}

// httpDate is a Date header's value and the second it stands for.
type httpDate struct {
	unix  int64
	value []string
}

var lastDate atomic.Pointer[httpDate]

// dateValue returns the Date header of now, in net/http's format, from the
// last one formatted when now is in the same second.
func dateValue(now time.Time) []string {
	sec := now.Unix()
	if d := lastDate.Load(); d != nil && d.unix == sec {
		return d.value
	}
	d := &httpDate{unix: sec, value: []string{now.UTC().Format(http.TimeFormat)}}
	lastDate.Store(d)
	return d.value
}
