package http

import (
	"net/url"
	"strings"
	"testing"

	"github.com/leafd/leafd"
)

// allIDParams reads every parameter an ID route may take, for the tests.
var allIDParams = queryRule{only: true, takes: []param{
	{"count", leafd.EInvalidCount}, {"format", leafd.EInvalidQuery}, {"size", leafd.EInvalidSize}}}

// idQuery is what an ID route reads, as the tests compare it.
type idQuery struct {
	count, format, size          string
	hasCount, hasFormat, hasSize bool
}

// readIDQuery reads raw with allIDParams.
func readIDQuery(raw string) (idQuery, error) {
	var q query
	err := allIDParams.read(raw, &q)
	return idQuery{q.values[0], q.values[1], q.values[2], q.has[0], q.has[1], q.has[2]}, err
}

func TestReadIDQuery(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		want idQuery
		code string // the error's code, "" for none
	}{
		{"", idQuery{}, ""},
		{"count=5", idQuery{count: "5", hasCount: true}, ""},
		{"count=1000&format=json", idQuery{count: "1000", format: "json", hasCount: true, hasFormat: true}, ""},
		{"format=json&count=3&size=9", idQuery{count: "3", format: "json", size: "9", hasCount: true, hasFormat: true, hasSize: true}, ""},
		{"count", idQuery{hasCount: true}, ""}, // an empty count: parseCount refuses it
		{"count=&format=", idQuery{hasCount: true, hasFormat: true}, ""},
		{"&&count=2&", idQuery{count: "2", hasCount: true}, ""},
		{"co%75nt=7&form%61t=js%6Fn", idQuery{count: "7", format: "json", hasCount: true, hasFormat: true}, ""},
		{"count=+3", idQuery{count: " 3", hasCount: true}, ""},

		// Parameters a route does not take, a cache-buster or a token
		// among them, and names in another case.
		{"format=json&count=3&_=1700000000", idQuery{}, leafd.EInvalidQuery},
		{"x=1&x=2&count=4", idQuery{}, leafd.EInvalidQuery},
		{"=5&count=6", idQuery{}, leafd.EInvalidQuery},
		{"Count=5", idQuery{}, leafd.EInvalidQuery},
		{"count=5&token=leafd_x", idQuery{}, leafd.EInvalidQuery},

		{"count=1&count=2", idQuery{}, leafd.EInvalidCount},
		{"count=1&count=1", idQuery{}, leafd.EInvalidCount},
		{"count=1&co%75nt=2", idQuery{}, leafd.EInvalidCount},
		{"count&count", idQuery{}, leafd.EInvalidCount},
		{"format=json&format=text", idQuery{}, leafd.EInvalidQuery},
		{"format=json&format=json", idQuery{}, leafd.EInvalidQuery},
		{"count=5;format=json", idQuery{}, leafd.EInvalidQuery},
		{"count=5&format=json;", idQuery{}, leafd.EInvalidQuery},
		{"x=a;b&count=5", idQuery{}, leafd.EInvalidQuery},
		{"count=%zz", idQuery{}, leafd.EInvalidQuery},
		{"count=5&x=%", idQuery{}, leafd.EInvalidQuery},
		{"%zz=1&count=5", idQuery{}, leafd.EInvalidQuery},
	} {
		got, err := readIDQuery(tc.raw)
		if code := leafd.ErrorCode(err); code != tc.code {
			t.Errorf("readIDQuery(%q): error %v (code %q), want code %q", tc.raw, err, code, tc.code)
			continue
		}
		if err == nil && got != tc.want {
			t.Errorf("readIDQuery(%q) = %+v, want %+v", tc.raw, got, tc.want)
		}
		if err != nil && leafd.ErrorMessage(err) == "" {
			t.Errorf("readIDQuery(%q): an error without a message", tc.raw)
		}
	}
}

// Reading the query of an ID route allocates nothing unless a value holds
// an escape.
func TestReadIDQueryAllocates(t *testing.T) {
	if testing.CoverMode() != "" {
		t.Skip("coverage counters change allocation counts")
	}
	for _, raw := range []string{"", "count=1000", "count=1000&format=json", "format=json&size=5"} {
		if n := testing.AllocsPerRun(1000, func() { _, _ = readIDQuery(raw) }); n != 0 {
			t.Errorf("readIDQuery(%q): %v allocations, want 0", raw, n)
		}
	}
}

// FuzzReadIDQuery holds readIDQuery against url.ParseQuery, which gin's
// c.GetQuery uses: where url.ParseQuery reads the whole query, it names
// only count, format and size, and each comes at most once, both read the
// same values; everything else is refused.
func FuzzReadIDQuery(f *testing.F) {
	for _, s := range []string{"", "count=5", "count=5&format=json", "count=1&count=2", "count=5;format=json",
		"format=json&format=json", "count=%zz", "co%75nt=3", "a=b&&c", "count=+1", "=&=", "count"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		got, err := readIDQuery(raw)
		want, perr := url.ParseQuery(raw)
		refused := len(want["count"]) > 1 || len(want["format"]) > 1 || len(want["size"]) > 1
		for key := range want {
			if key != "count" && key != "format" && key != "size" {
				refused = true // not a parameter of an ID route
			}
		}
		switch {
		case perr != nil && strings.Count(raw, "&") >= 1000:
			// url.ParseQuery also limits the number of parameters; the
			// scan has no need to.
		case perr != nil || refused:
			if err == nil {
				t.Fatalf("readIDQuery(%q) = %+v, nil; url.ParseQuery: %v, %v", raw, got, want, perr)
			}
		case err != nil:
			t.Fatalf("readIDQuery(%q): %v; url.ParseQuery reads %v", raw, err, want)
		default:
			if got.hasCount != want.Has("count") || got.count != want.Get("count") ||
				got.hasFormat != want.Has("format") || got.format != want.Get("format") ||
				got.hasSize != want.Has("size") || got.size != want.Get("size") {
				t.Fatalf("readIDQuery(%q) = %+v; url.ParseQuery reads %v", raw, got, want)
			}
		}
	})
}
