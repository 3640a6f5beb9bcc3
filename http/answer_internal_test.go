package http

import (
	"math"
	"math/rand/v2"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/segment"
)

// appendRunReference is what appendRun must write: every ID formatted
// afresh.
func appendRunReference(b []byte, start, end int64, before, after string) []byte {
	for id := start; id < end; id++ {
		b = append(b, before...)
		b = strconv.AppendInt(b, id, 10)
		b = append(b, after...)
	}
	return b
}

func checkRun(t *testing.T, start, end int64) {
	t.Helper()
	for _, sep := range [][2]string{{"", "\n"}, {`"`, `",`}} {
		got := string(appendRun([]byte("x"), start, end, sep[0], sep[1]))
		want := string(appendRunReference([]byte("x"), start, end, sep[0], sep[1]))
		if got != want {
			t.Fatalf("appendRun(%d, %d, %q, %q):\ngot  %q\nwant %q", start, end, sep[0], sep[1], got, want)
		}
	}
}

// Runs across every kind of carry, up to the largest ID, and at random.
func TestAppendRun(t *testing.T) {
	for _, r := range [][2]int64{
		{0, 0}, {5, 5}, {0, 1}, {0, 25}, {1, 1001}, {95, 105}, {9990, 10_010},
		{999_999_990, 1_000_000_010}, {math.MaxInt64 - 30, math.MaxInt64},
		{999_999_999_999_999_990, 1_000_000_000_000_000_010},
	} {
		checkRun(t, r[0], r[1])
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		start := rng.Int64N(math.MaxInt64 - 3000)
		if rng.IntN(2) == 0 {
			start = rng.Int64N(1_000_000)
		}
		checkRun(t, start, start+rng.Int64N(3000))
	}
}

func FuzzAppendRun(f *testing.F) {
	f.Add(int64(0), uint16(10))
	f.Add(int64(99), uint16(3))
	f.Add(int64(math.MaxInt64-5), uint16(5))
	f.Fuzz(func(t *testing.T, start int64, n uint16) {
		if start < 0 || start > math.MaxInt64-int64(n) {
			t.Skip()
		}
		checkRun(t, start, start+int64(n))
	})
}

// A strided range (from a sharded store) is written ID by ID, the stride
// apart, whatever its digits, up to the largest ID; a contiguous one, of
// stride 0 or 1, as appendRun writes it.
func TestAppendRange(t *testing.T) {
	for _, r := range []segment.Range{
		{Start: 3, End: 43, Stride: 4},
		{Start: 97, End: 1097, Stride: 100},
		{Start: 5, End: 9, Stride: 4},
		{Start: math.MaxInt64 - 12, End: math.MaxInt64, Stride: 4},
		{Start: math.MaxInt64 - 10, End: math.MaxInt64, Stride: 4}, // no ID at End-Stride: no overflow past it
		{Start: 1, End: 26},
		{Start: 95, End: 105, Stride: 1},
	} {
		for _, sep := range [][2]string{{"", "\n"}, {`"`, `",`}} {
			var want []byte
			for id := r.Start; id < r.End && id >= r.Start; id += max(r.Stride, 1) {
				want = append(want, sep[0]...)
				want = strconv.AppendInt(want, id, 10)
				want = append(want, sep[1]...)
			}
			if got := appendRange([]byte("x"), r, sep[0], sep[1]); string(got) != "x"+string(want) {
				t.Fatalf("appendRange(%+v, %q, %q):\ngot  %q\nwant %q", r, sep[0], sep[1], got, "x"+string(want))
			}
		}
	}
}

// allIDParams reads every parameter an ID route may take, for the tests.
const allIDParams = takesCount | takesFormat | takesSize

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
		got, err := readIDQuery(tc.raw, allIDParams)
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
		if n := testing.AllocsPerRun(1000, func() { _, _ = readIDQuery(raw, allIDParams) }); n != 0 {
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
		got, err := readIDQuery(raw, allIDParams)
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
