package http

import (
	"github.com/gin-gonic/gin"
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

// securityHeaders sets the headers every answer carries, before the handler
// runs, so that errors written by any layer carry them too. The dashboard
// page replaces the CSP and Cache-Control with its own.
func securityHeaders(c *gin.Context) {
	h := c.Writer.Header()
	h["X-Content-Type-Options"] = nosniff
	h["Referrer-Policy"] = noReferrer
	h["Content-Security-Policy"] = apiCSP
	h["Cache-Control"] = noStore
	c.Next()
}
