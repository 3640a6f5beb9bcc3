package http_test

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
	"github.com/leafd/leafd/segment"
)

// panicking is a segment mode whose NextN panics with v.
type panicking struct{ v any }

func (p panicking) Next(context.Context, string) (int64, error) { panic(p.v) }
func (p panicking) NextN(context.Context, string, int, []segment.Range) ([]segment.Range, error) {
	panic(p.v)
}
func (panicking) MaxBatch() int { return 10 }
func (panicking) Range(context.Context, string, int64) (segment.Range, error) {
	return segment.Range{}, nil
}
func (panicking) RangeLease(context.Context, string, int64) (segment.Range, time.Duration, error) {
	return segment.Range{}, 0, nil
}
func (panicking) MaxRange() int64                      { return 10 }
func (panicking) Ready() error                         { return nil }
func (panicking) Upsert(leafd.Tag)                     {}
func (panicking) State() []segment.TagState            { return nil }
func (panicking) RefillWindow() (lo, hi time.Duration) { return time.Minute, time.Minute }

// TestPanicIsInternalError: a panic in a handler answers 500 internal in
// the JSON error shape, with the security headers, is logged with its value
// and counted; net/http's ErrAbortHandler still aborts the answer; the
// server goes on serving.
func TestPanicIsInternalError(t *testing.T) {
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	srv := httptest.NewServer(leafhttp.New(leafhttp.Config{Segment: panicking{"boom in the allocator"}, Logger: log}).Handler())
	defer srv.Close()
	res, err := http.Get(srv.URL + "/segment/t")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	var e struct {
		Error struct{ Code, Message string }
	}
	if res.StatusCode != 500 || json.Unmarshal(body, &e) != nil || e.Error.Code != leafd.EInternal || strings.Contains(e.Error.Message, "boom") {
		t.Errorf("a panicking handler answered %d %s, want 500 internal without the panic's value", res.StatusCode, body)
	}
	if res.Header.Get("X-Content-Type-Options") != "nosniff" || res.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("the 500 lost the security headers: %v", res.Header)
	}
	if !strings.Contains(logs.String(), "boom in the allocator") {
		t.Errorf("the panic's value is not in the log: %s", logs.String())
	}
	res, err = http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(res.Body)
	res.Body.Close()
	for _, want := range []string{
		`leafd_http_requests_total{method="GET",route="/segment/:tag",status="500"} 1`,
		`leafd_errors_total{code="internal",route="/segment/:tag"} 1`,
	} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	abort := httptest.NewServer(leafhttp.New(leafhttp.Config{Segment: panicking{http.ErrAbortHandler}, Logger: quiet}).Handler())
	defer abort.Close()
	if res, err := http.Get(abort.URL + "/segment/t"); err == nil {
		res.Body.Close()
		t.Errorf("ErrAbortHandler answered %d, want the answer aborted", res.StatusCode)
	}
	if res, err := http.Get(abort.URL + "/healthz"); err != nil || res.StatusCode != 200 {
		t.Errorf("after an aborted answer: %v %v", res, err)
	} else {
		res.Body.Close()
	}
}
