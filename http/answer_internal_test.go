package http

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/leafd/leafd/segment"
)

// appendRunReference is what appendRun must write: every ID formatted
// afresh.
func appendRunReference(b []byte, first, last int64, before, after string) []byte {
	for id := first; ; id++ {
		b = append(b, before...)
		b = strconv.AppendInt(b, id, 10)
		b = append(b, after...)
		if id == last {
			return b
		}
	}
}

// checkRun checks appendRun from first to last, into a buffer with room to
// spare and into one with none, so that both of its ways of writing a line
// are taken.
func checkRun(t *testing.T, first, last int64) {
	t.Helper()
	for _, sep := range [][2]string{{"", "\n"}, {`"`, `",`}} {
		want := string(appendRunReference([]byte("x"), first, last, sep[0], sep[1]))
		for _, b := range [][]byte{[]byte("x"), append(make([]byte, 0, len(want)+24), 'x')} {
			if got := string(appendRun(b, first, last, sep[0], sep[1])); got != want {
				t.Fatalf("appendRun(%d, %d, %q, %q) into a buffer of capacity %d:\ngot  %q\nwant %q",
					first, last, sep[0], sep[1], cap(b), got, want)
			}
		}
	}
}

// Runs across every kind of carry, up to the largest ID, and at random.
func TestAppendRun(t *testing.T) {
	for _, r := range [][2]int64{
		{0, 0}, {5, 5}, {0, 1}, {0, 25}, {1, 1001}, {95, 105}, {9990, 10_010},
		{999_999_990, 1_000_000_010}, {math.MaxInt64 - 30, math.MaxInt64},
		{math.MaxInt64, math.MaxInt64},
		{999_999_999_999_999_990, 1_000_000_000_000_000_010},
	} {
		checkRun(t, r[0], r[1])
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		first := rng.Int64N(math.MaxInt64 - 3000)
		if rng.IntN(2) == 0 {
			first = rng.Int64N(1_000_000)
		}
		checkRun(t, first, first+rng.Int64N(3000))
	}
}

func FuzzAppendRun(f *testing.F) {
	f.Add(int64(0), uint16(10))
	f.Add(int64(99), uint16(3))
	f.Add(int64(math.MaxInt64-5), uint16(5))
	f.Fuzz(func(t *testing.T, first int64, n uint16) {
		if first < 0 || first > math.MaxInt64-int64(n) {
			t.Skip()
		}
		checkRun(t, first, first+int64(n))
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

// BenchmarkAppendRun formats the IDs of a 1000-ID batch of 10 digits, as
// text and as JSON, into a buffer that holds them.
func BenchmarkAppendRun(b *testing.B) {
	for _, f := range []struct{ name, before, after string }{{"text", "", "\n"}, {"json", `"`, `",`}} {
		b.Run(f.name, func(b *testing.B) {
			buf := make([]byte, 0, 1000*maxIDBytes)
			for b.Loop() {
				buf = appendRun(buf[:0], 1_000_000_000, 1_000_000_999, f.before, f.after)
			}
		})
	}
}
