package segment

import "sync/atomic"

// Range is a run of consecutive IDs, [Start, End).
type Range struct {
	Start, End int64
}

// Len returns the number of IDs in r.
func (r Range) Len() int64 { return r.End - r.Start }

// buffer is one range handed out by the store, served from memory.
//
// used counts the IDs taken so far. It only grows, and it may grow past
// size: a take that finds it at or past size gets nothing, so once a buffer
// is exhausted it stays exhausted and no late caller can get an ID from it
// after the tag has switched to the next one. Counting offsets from 0 rather
// than IDs keeps the counter far from overflow whatever start is.
type buffer struct {
	start, size int64
	used        atomic.Int64
	// preloadAt is the offset whose taking starts the load of the next range.
	preloadAt int64
	preloaded atomic.Bool
}

func newBuffer(a Allocation, preloadAt float64) *buffer {
	size := a.End - a.Start
	return &buffer{
		start:     a.Start,
		size:      size,
		preloadAt: int64(float64(size) * preloadAt),
	}
}

// take reserves up to n IDs and returns them with the offset of the first.
// An empty range means the buffer is exhausted.
func (b *buffer) take(n int64) (r Range, off int64) {
	off = b.used.Add(n) - n
	if off >= b.size {
		return Range{}, off
	}
	hi := min(off+n, b.size)
	return Range{Start: b.start + off, End: b.start + hi}, off
}

// taken returns how many of the buffer's IDs have been handed out.
func (b *buffer) taken() int64 { return min(b.used.Load(), b.size) }

func (b *buffer) exhausted() bool { return b.used.Load() >= b.size }
