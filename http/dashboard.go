package http

import (
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
)

// The dashboard is one page with its style and script inlined at start-up
// from the files in dashboard/: nothing is fetched from anywhere but
// /api/state, so it works in a closed network, and the Content Security
// Policy can name the exact script and style by hash.
//
//go:embed dashboard/index.html dashboard/style.css dashboard/app.js
var dashboardFiles embed.FS

var dashboardPage, dashboardCSP = buildDashboard()

func buildDashboard() ([]byte, string) {
	read := func(name string) string {
		b, err := dashboardFiles.ReadFile("dashboard/" + name)
		if err != nil {
			panic(err) // embedded: cannot happen
		}
		return string(b)
	}
	css, js := read("style.css"), read("app.js")
	page := strings.Replace(read("index.html"), "{{style}}", css, 1)
	page = strings.Replace(page, "{{script}}", js, 1)
	hash := func(s string) string {
		sum := sha256.Sum256([]byte(s))
		return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
	}
	csp := "default-src 'none'; script-src " + hash(js) + "; style-src " + hash(css) +
		"; connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
	return []byte(page), csp
}

// getDashboard answers GET /dashboard: the page, which then polls
// /api/state.
func (s *Server) getDashboard(c *gin.Context) {
	h := c.Writer.Header()
	h.Set("Content-Security-Policy", dashboardCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-cache")
	c.Data(http.StatusOK, "text/html; charset=utf-8", dashboardPage)
}

// redirectDashboard answers GET / with a redirect to the dashboard.
func (s *Server) redirectDashboard(c *gin.Context) {
	// A relative Location (RFC 9110), so that the redirect also works behind
	// a proxy that serves leafd under a path prefix; http.Redirect would make
	// it absolute.
	loc := "dashboard"
	if q := c.Request.URL.RawQuery; q != "" {
		loc += "?" + q // ?poll= and the like
	}
	c.Header("Location", loc)
	c.Status(http.StatusFound)
}
