package main

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestHistogramQuantiles holds the histogram's quantiles against the exact
// nearest-rank quantiles of the sorted samples, on random data of several
// shapes: each must fall in the reference sample's bucket, so within 0.4%.
func TestHistogramQuantiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	shapes := []struct {
		name string
		draw func() int64
	}{
		{"Exponential", func() int64 { return int64(rng.ExpFloat64() * 300e3) }},
		{"LogNormal", func() int64 { return int64(math.Exp(rng.NormFloat64()*1.5 + 12)) }},
		{"Uniform", func() int64 { return rng.Int64N(5e6) }},
		{"Small", func() int64 { return rng.Int64N(300) }},
		{"Bimodal", func() int64 {
			if rng.IntN(100) == 0 {
				return 40e6 + rng.Int64N(1e6)
			}
			return 200e3 + rng.Int64N(50e3)
		}},
	}
	quantiles := []float64{0.001, 0.1, 0.5, 0.9, 0.99, 0.999, 0.9999, 1}
	for _, shape := range shapes {
		t.Run(shape.name, func(t *testing.T) {
			for _, n := range []int{1, 7, 1000, 200_000} {
				var h Histogram
				ref := make([]int64, n)
				for i := range ref {
					ref[i] = shape.draw()
					h.Record(time.Duration(ref[i]))
				}
				slices.Sort(ref)
				if h.total != uint64(n) {
					t.Fatalf("n=%d: total = %d", n, h.total)
				}
				for _, q := range quantiles {
					rank := max(int(math.Ceil(q*float64(n))), 1)
					want := ref[rank-1]
					got := int64(h.Quantile(q))
					lo, hi := bucketBounds(index(want))
					if got < lo || got > hi {
						t.Errorf("n=%d q=%v: got %d, want %d (its bucket is %d..%d)", n, q, got, want, lo, hi)
					}
					if diff := math.Abs(float64(got - want)); diff > float64(want)/256+1 {
						t.Errorf("n=%d q=%v: got %d, want %d: off by more than 1/256", n, q, got, want)
					}
				}
				if h.max != ref[n-1] {
					t.Errorf("n=%d: max = %d, want %d", n, h.max, ref[n-1])
				}
			}
		})
	}
}

// TestHistogramBuckets checks that the buckets tile the range: each value
// lies within its bucket's bounds, and consecutive buckets touch.
func TestHistogramBuckets(t *testing.T) {
	for i := 0; i < numBuckets; i++ {
		lo, hi := bucketBounds(i)
		if index(lo) != i || index(hi) != i {
			t.Fatalf("bucket %d: bounds %d..%d map to buckets %d and %d", i, lo, hi, index(lo), index(hi))
		}
		if i+1 < numBuckets {
			if next, _ := bucketBounds(i + 1); next != hi+1 {
				t.Fatalf("bucket %d ends at %d but bucket %d starts at %d", i, hi, i+1, next)
			}
		}
		if lo >= 2*subCount && float64(hi-lo+1) > float64(lo)/subCount {
			t.Fatalf("bucket %d (%d..%d) is wider than 1/%d of its start", i, lo, hi, subCount)
		}
	}
	if _, hi := bucketBounds(numBuckets - 1); hi != maxValue {
		t.Fatalf("the last bucket ends at %d, want %d", hi, maxValue)
	}
}

func TestHistogramEdges(t *testing.T) {
	t.Run("Empty", func(t *testing.T) {
		var h Histogram
		if h.Quantile(0.99) != 0 || h.total != 0 || h.max != 0 {
			t.Fatal("an empty histogram must answer 0")
		}
	})
	t.Run("Clamped", func(t *testing.T) {
		var h Histogram
		h.Record(-5)
		h.Record(10 * time.Minute)
		if got := h.Quantile(0.5); got != 0 {
			t.Errorf("p50 = %v, want 0 (a negative sample counts as 0)", got)
		}
		if got := h.Quantile(1); got != maxValue {
			t.Errorf("p100 = %v, want %v (the largest value told apart)", got, time.Duration(maxValue))
		}
	})
	t.Run("Merge", func(t *testing.T) {
		var a, b, all Histogram
		for i := range 10_000 {
			d := time.Duration(i*i) * time.Nanosecond
			all.Record(d)
			if i%3 == 0 {
				a.Record(d)
			} else {
				b.Record(d)
			}
		}
		var m Histogram
		m.Merge(&a)
		m.Merge(&b)
		m.Merge(&Histogram{})
		if m != all {
			t.Fatal("merging two halves differs from recording everything in one")
		}
	})
}

func TestHistogramRecordAllocatesNothing(t *testing.T) {
	h := new(Histogram)
	if n := testing.AllocsPerRun(1000, func() { h.Record(1234567) }); n != 0 {
		t.Fatalf("Record allocates %v times", n)
	}
}

func BenchmarkHistogramRecord(b *testing.B) {
	h := new(Histogram)
	for i := 0; b.Loop(); i++ {
		h.Record(time.Duration(i & 0xffffff))
	}
}
