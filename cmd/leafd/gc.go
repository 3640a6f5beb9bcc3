package main

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// gcHeadroom is the least that the server allocates between two garbage
// collections while its live heap is small.
//
// leafd's live heap is a few MiB, and every request allocates some 2 KiB
// (mostly net/http's, see docs/performance.md): with Go's default GOGC=100
// the collector would run every few MiB allocated, tens of times a second
// under load, and its marking, assists and write barriers would cost some
// 5% of the CPU of a request. The pacer sets the GC percentage after every
// collection so that the heap may grow to about live + max(live, gcHeadroom)
// before the next one: the same as GOGC=100 once the live heap passes gcHeadroom,
// and never more than gcHeadroom above what GOGC=100 would allow. (Go counts
// goroutine stacks and globals with the live heap, and so does the pacer.)
// The headroom is kept small so that the server's resident memory stays
// within a few MiB of what it is with GOGC=100, as the hostile-client tests
// require.
const gcHeadroom = 8 << 20

// gcPacer keeps the heap goal at least gcHeadroom above the live heap.
type gcPacer struct {
	mu      sync.Mutex // stop against an adjust in flight
	stopped bool
	percent int              // last set
	live    []metrics.Sample // what GOGC is a percentage of
}

// paceGC starts pacing the collector unless the operator set GOGC (which
// then governs it, as in any Go program). stop ends the pacing and gives
// the collector back its default.
func paceGC() (stop func()) {
	if _, ok := os.LookupEnv("GOGC"); ok {
		return func() {}
	}
	p := &gcPacer{percent: 100, live: []metrics.Sample{
		{Name: "/gc/heap/live:bytes"}, {Name: "/gc/scan/stack:bytes"}, {Name: "/gc/scan/globals:bytes"},
	}}
	p.adjust()
	p.arm()
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.stopped = true
		debug.SetGCPercent(100)
	}
}

// gcSentinel is an object that nothing references: its finalizer runs
// after the collection that found it unreachable, that is after every
// collection, and arms the next one.
type gcSentinel struct{ _ *int }

func (p *gcPacer) arm() {
	runtime.SetFinalizer(&gcSentinel{}, func(*gcSentinel) {
		if p.adjust() {
			p.arm()
		}
	})
}

// adjust sets the GC percentage for the live heap the last collection
// left, with the stacks and globals. It reports false once stopped.
func (p *gcPacer) adjust() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return false
	}
	metrics.Read(p.live)
	var v [3]uint64
	for i, s := range p.live {
		if s.Value.Kind() != metrics.KindUint64 {
			return true
		}
		v[i] = s.Value.Uint64()
	}
	percent := gcPercent(v[0], v[0]+v[1]+v[2])
	// Small changes are not worth the call: within an eighth.
	if d := percent - p.percent; d > p.percent/8 || -d > p.percent/8 {
		p.percent = percent
		debug.SetGCPercent(percent)
	}
	return true
}

// gcMinHeap is the runtime's smallest heap goal at GOGC=100; at GOGC=p it is
// p/100 of it (see the Go GC guide).
const gcMinHeap = 4 << 20

// gcPercent is the GC percentage that lets a heap of live bytes (base with
// the stacks and globals, of which GOGC is a percentage) grow to about
// live + max(base, gcHeadroom) before the next collection: 100 once base
// reaches gcHeadroom, and never a minimum heap goal past live + gcHeadroom.
func gcPercent(live, base uint64) int {
	if base >= gcHeadroom {
		return 100
	}
	p := 100 * gcHeadroom / max(base, 1)
	p = min(p, 100*(live+gcHeadroom)/gcMinHeap)
	return int(max(p, 100))
}
