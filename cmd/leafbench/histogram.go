package main

import (
	"math"
	"math/bits"
	"time"
)

// The histogram is log-linear, as HdrHistogram is: every power of two is cut
// into subCount linear buckets. Values below 2*subCount nanoseconds have a
// bucket each; above that a bucket is at most 1/subCount of its lower bound
// wide, so a quantile read from the middle of its bucket is within 0.4% of
// the true sample.
const (
	subBits  = 7
	subCount = 1 << subBits // linear buckets per power of two
	// maxValue is the largest latency told apart: about 68 s, far beyond any
	// request timeout of the harness. Longer samples count as maxValue.
	maxValue = 1<<36 - 1
	// numBuckets is index(maxValue) + 1.
	numBuckets = (36-subBits)*subCount + subCount
)

// Histogram counts latencies (nanoseconds) in fixed log-linear buckets.
// Record allocates nothing and takes constant time, so a worker records
// every request without keeping the samples. The zero value is an empty
// histogram ready to use. A Histogram is not safe for concurrent use: each
// worker keeps its own and they are merged afterwards.
type Histogram struct {
	counts   [numBuckets]uint64
	total    uint64
	min, max int64
}

// index returns the bucket of v, 0 ≤ v ≤ maxValue.
func index(v int64) int {
	if v < 2*subCount {
		return int(v)
	}
	shift := bits.Len64(uint64(v)) - subBits - 1 // ≥ 1 here
	return (shift+1)*subCount + int(v>>shift) - subCount
}

// bucketBounds returns the smallest and largest value of bucket i.
func bucketBounds(i int) (lo, hi int64) {
	if i < 2*subCount {
		return int64(i), int64(i)
	}
	shift := i/subCount - 1
	sub := int64(i%subCount + subCount)
	return sub << shift, (sub+1)<<shift - 1
}

// Record adds one sample. A negative duration counts as 0 and one above
// about 68 s as 68 s.
func (h *Histogram) Record(d time.Duration) {
	v := min(max(int64(d), 0), maxValue)
	h.counts[index(v)]++
	if h.total == 0 || v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
	h.total++
}

// Merge adds every sample of o to h.
func (h *Histogram) Merge(o *Histogram) {
	if o.total == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.total == 0 || o.min < h.min {
		h.min = o.min
	}
	h.max = max(h.max, o.max)
	h.total += o.total
}

// Quantile returns the q-quantile (0 < q ≤ 1) of the samples: the smallest
// sample that at least q of all samples do not exceed (nearest rank), read
// as the middle of its bucket and kept within the smallest and largest
// sample; the largest sample itself is exact. It returns 0 when there is no
// sample.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.total == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.total)))
	rank = min(max(rank, 1), h.total)
	if rank == h.total {
		return time.Duration(h.max) // known exactly
	}
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			lo, hi := bucketBounds(i)
			v := lo + (hi-lo)/2
			return time.Duration(min(max(v, h.min), h.max))
		}
	}
	return time.Duration(h.max) // not reached: the counts add up to total
}
