package http_test

import (
	"crypto/sha256"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	leafhttp "github.com/leafd/leafd/http"
)

// The page is self-contained: its script and style are inline and named by
// hash in the Content Security Policy, and nothing is loaded from another
// origin (leafd runs in closed networks).
func TestDashboardPage(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(leafhttp.New(leafhttp.Config{Logger: quiet}).Handler())
	t.Cleanup(srv.Close)
	res, err := http.Get(srv.URL + "/dashboard")
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	body := string(b)
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("GET /dashboard = %d %q", res.StatusCode, res.Header.Get("Content-Type"))
	}
	if strings.Contains(body, "{{") {
		t.Fatal("a placeholder of the page template is left")
	}
	csp := res.Header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "connect-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("Content-Security-Policy %q lacks %s", csp, want)
		}
	}
	for _, tag := range []string{"script", "style"} {
		m := regexp.MustCompile(`(?s)<`+tag+`>(.*?)</`+tag+`>`).FindAllStringSubmatch(body, -1)
		if len(m) != 1 {
			t.Fatalf("%d inline <%s> elements, want 1", len(m), tag)
		}
		sum := sha256.Sum256([]byte(m[0][1]))
		if hash := "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"; !strings.Contains(csp, tag+"-src "+hash) {
			t.Errorf("Content-Security-Policy %q does not allow the page's own %s (%s)", csp, tag, hash)
		}
	}
	if ext := regexp.MustCompile(`(?i)(src|href|url)\s*[=(]\s*["']?(https?:)?//`).FindString(body); ext != "" {
		t.Errorf("the page loads something from elsewhere: %q", ext)
	}
}

func TestRootRedirectsToDashboard(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(leafhttp.New(leafhttp.Config{Logger: quiet}).Handler())
	t.Cleanup(srv.Close)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for path, want := range map[string]string{"/": "dashboard", "/?poll=500": "dashboard?poll=500"} {
		res, err := client.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusFound || res.Header.Get("Location") != want {
			t.Errorf("GET %s = %d Location %q, want 302 %q", path, res.StatusCode, res.Header.Get("Location"), want)
		}
	}
}
