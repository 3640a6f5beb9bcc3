package http

import (
	"bufio"
	"io"
	"net/http"
	"testing"
	"time"
)

// TestDateValue: the Date of an answer is its second's, in net/http's
// format, formatted once a second and shared within it.
func TestDateValue(t *testing.T) {
	at := time.Date(2026, 11, 27, 23, 59, 59, 100e6, time.FixedZone("CST", 8*3600))
	first := dateValue(at)
	if len(first) != 1 || first[0] != at.UTC().Format(http.TimeFormat) || first[0] != "Fri, 27 Nov 2026 15:59:59 GMT" {
		t.Fatalf("dateValue = %q", first)
	}
	if again := dateValue(at.Add(800 * time.Millisecond)); &again[0] != &first[0] {
		t.Error("a Date of the same second was formatted again")
	}
	next := dateValue(at.Add(time.Second))
	if next[0] != "Fri, 27 Nov 2026 16:00:00 GMT" {
		t.Errorf("next second: %q", next)
	}
	if first[0] != "Fri, 27 Nov 2026 15:59:59 GMT" {
		t.Errorf("an earlier answer's Date changed to %q", first[0])
	}
	if back := dateValue(at); back[0] != "Fri, 27 Nov 2026 15:59:59 GMT" {
		t.Errorf("an earlier second after a later one: %q", back)
	}
}

// BenchmarkAnswerHeaders is net/http's work for an answer's header map
// (what its server does with it: the copy at WriteHeader, the look-ups
// that decide the framing, the sorted write) with leafd's headers against
// with only a Content-Type and net/http's own Date, as gin's c.Data sends:
// what the security headers cost a request.
//
//	go test -run '^$' -bench BenchmarkAnswerHeaders -count 8 ./http/
func BenchmarkAnswerHeaders(b *testing.B) {
	for _, c := range []struct {
		name string
		set  func(h http.Header, now time.Time)
	}{
		{"content-type", nil},
		{"leafd", setAnswerHeaders},
	} {
		b.Run(c.name, func(b *testing.B) {
			w := bufio.NewWriterSize(io.Discard, 4096)
			var date [len(http.TimeFormat)]byte
			for b.Loop() {
				h, now := make(http.Header), time.Now()
				if c.set != nil {
					c.set(h, now)
				}
				h["Content-Type"] = contentTextPlain
				sent := h.Clone()
				_, _, _ = sent.Get("Transfer-Encoding"), sent.Get("Content-Length"), sent.Get("Connection")
				_ = sent.WriteSubset(w, nil)
				if _, ok := sent["Date"]; !ok {
					_, _ = w.Write(now.UTC().AppendFormat(date[:0], http.TimeFormat))
				}
				if w.Buffered() > 3000 {
					_ = w.Flush()
				}
			}
		})
	}
}
