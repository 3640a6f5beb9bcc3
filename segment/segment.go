package segment

import (
	"sync/atomic"
	"time"
)

// Range is a run of IDs: Start, Start+Stride, Start+2*Stride, … below End.
// Stride 0 or 1 means consecutive IDs, [Start, End); a range from a strided
// store (Allocation.Stride) has the same stride. End-Start is a multiple of
// the stride.
type Range struct {
	Start, End int64
	// Stride is the distance between consecutive IDs; 0 or 1 means 1.
	Stride int64
}

// Len returns the number of IDs in r.
func (r Range) Len() int64 {
	if r.Stride <= 1 {
		return r.End - r.Start
	}
	return (r.End - r.Start) / r.Stride
}

// buffer is one range handed out by the store, served from memory.
//
// used counts the IDs taken so far. It only grows, and it may grow past
// size: a take that finds it at or past size gets nothing, so once a buffer
// is exhausted it stays exhausted and no late caller can get an ID from it
// after the tag has switched to the next one. Counting offsets from 0 rather
// than IDs keeps the counter far from overflow whatever start is.
//
// The ID at offset off is start+off*stride; stride is at least 1, so that a
// contiguous range costs one multiply by 1 on the hot path rather than a
// branch.
type buffer struct {
	start, stride int64
	// size is the number of IDs of the range, not its width End-Start.
	size int64
	used atomic.Int64
	// preloadAt is the offset whose taking starts the load of the next range.
	preloadAt int64
	preloaded atomic.Bool
	// until is the end of the period of a dated tag's range (period.go),
	// zero for every other tag; watch is the instant, in Unix ms, from which
	// NextN reads the clock before it takes from the buffer: periodWatch
	// before until, noWatch for every other tag. Both are set by setPeriod.
	until time.Time
	watch int64
}

func newBuffer(a Allocation, preloadAt float64) *buffer {
	size := a.Count()
	return &buffer{
		start:     a.Start,
		stride:    a.stride(),
		size:      size,
		preloadAt: int64(float64(size) * preloadAt),
		watch:     noWatch,
	}
}

// id returns the ID at offset off.
func (b *buffer) id(off int64) int64 { return b.start + off*b.stride }

// take reserves up to n IDs and returns them, with the offset of the first
// and how many they are. An empty range (got 0) means the buffer is
// exhausted.
func (b *buffer) take(n int64) (r Range, off, got int64) {
	off = b.used.Add(n) - n
	if off >= b.size {
		return Range{}, off, 0
	}
	hi := min(off+n, b.size)
	return Range{Start: b.id(off), End: b.id(hi), Stride: b.stride}, off, hi - off
}

// carve reserves n consecutive IDs of the buffer, all or none: it reports
// false, and reserves nothing, when fewer than n are left. It returns the
// offset of the first.
func (b *buffer) carve(n int64) (r Range, off int64, ok bool) {
	for {
		off = b.used.Load()
		if off+n > b.size {
			return Range{}, off, false
		}
		if b.used.CompareAndSwap(off, off+n) {
			return Range{Start: b.id(off), End: b.id(off + n), Stride: b.stride}, off, true
		}
	}
}

// drain gives up the IDs left in the buffer: none of them is issued, and
// the buffer is exhausted.
func (b *buffer) drain() {
	for {
		u := b.used.Load()
		if u >= b.size || b.used.CompareAndSwap(u, b.size) {
			return
		}
	}
}

// taken returns how many of the buffer's IDs have been handed out.
func (b *buffer) taken() int64 { return min(b.used.Load(), b.size) }

func (b *buffer) exhausted() bool { return b.used.Load() >= b.size }

// state returns b as a BufferState: Next is the ID it would give next, End
// once it is used up.
func (b *buffer) state() BufferState {
	return BufferState{Start: b.start, End: b.id(b.size), Stride: b.stride, Next: b.id(b.taken()), Ready: !b.exhausted()}
}
