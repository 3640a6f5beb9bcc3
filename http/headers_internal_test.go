package http

import (
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
