package mysql_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/leafd/leafd"
	leafhttp "github.com/leafd/leafd/http"
	"github.com/leafd/leafd/internal/testkit/testdb"
	"github.com/leafd/leafd/segment"
	"github.com/leafd/leafd/store"
)

// On a leaf_alloc made by Leaf's own DDL (CHARSET=utf8), a description with
// an emoji is 400 invalid_body naming the column's character set and the
// ALTER that widens it, on POST and PATCH alike, never 500.
func TestMySQLDescriptionCharsetOverHTTP(t *testing.T) {
	const token = "s3cret-token"
	quiet := slog.New(slog.DiscardHandler)
	dsn := testdb.MySQL(t)
	if _, err := testdb.SQL(t, "mysql", dsn).Exec(leafTableUTF8); err != nil {
		t.Fatal(err)
	}
	s, err := store.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx := context.Background()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	a, err := segment.New(s, segment.Config{MaxStep: 100, WaitTimeout: time.Second, TagRefresh: time.Hour, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	a.Start()
	t.Cleanup(func() { a.Close() })
	srv := httptest.NewServer(leafhttp.New(leafhttp.Config{
		Segment: a, Tags: s, AdminToken: token, MaxStep: 5000, Logger: quiet,
	}).Handler())
	t.Cleanup(srv.Close)

	authed := func(method, path, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		return res.StatusCode, string(b)
	}
	errorCode := func(body string) string {
		t.Helper()
		var e struct {
			Error struct{ Code, Message string }
		}
		if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error.Message == "" {
			t.Fatalf("body %q is not the JSON error model (%v)", body, err)
		}
		return e.Error.Code
	}
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/api/tags", `{"tag":"order","description":"launch 🚀"}`},
		{"PATCH", "/api/tags/plain", `{"description":"launch 🚀"}`},
	} {
		if c.method == "PATCH" {
			if status, body := authed("POST", "/api/tags", `{"tag":"plain"}`); status != 201 {
				t.Fatalf("POST /api/tags = %d %s", status, body)
			}
		}
		status, body := authed(c.method, c.path, c.body)
		if status != 400 || errorCode(body) != leafd.EInvalidBody || !strings.Contains(body, "utf8mb4") {
			t.Fatalf("%s %s with an emoji = %d %s, want 400 invalid_body naming utf8mb4", c.method, c.path, status, body)
		}
	}
}
