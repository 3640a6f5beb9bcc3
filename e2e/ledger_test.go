package e2e

import (
	"cmp"
	"iter"
	"runtime"
	"slices"
	"sync"
	"testing"
)

// stamp is an ID and the process that issued it.
type stamp struct {
	id   int64
	proc int32
}

// ledger holds every ID the scenario received.
type ledger struct {
	mu  sync.Mutex
	seg map[string]*stamps
	sf  stamps
}

func (l *ledger) add(mode, tag string, proc int, ids []int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	to := &l.sf
	if mode == modeSegment {
		if to = l.seg[tag]; to == nil {
			to = &stamps{}
			l.seg[tag] = to
		}
	}
	for _, id := range ids {
		to.add(stamp{id, int32(proc)})
	}
}

// blockLen is how many stamps a block holds: 16 MiB of them.
const blockLen = 1 << 20

// stamps is a list of stamps kept in blocks of blockLen that never move.
//
// A scenario may gather a hundred million IDs (the snowflake bursts of
// scenario 1 alone bring two million a second). In one slice grown by
// append, each growth copies and clears gigabytes in calls the Go runtime
// cannot preempt (golang/go#69327, #31222): a garbage collection that starts
// meanwhile stops every other goroutine of the test process for seconds.
// Those goroutines are the load's clients, whose latencies then read as
// hangs, and the faultproxy connections of every server, which then hold
// each server's transactions open with their row locks taken, so that the
// other servers' loads wait for those locks and time out. Blocks keep each
// growth to one small allocation.
type stamps struct {
	blocks [][]stamp
	n      int
	// sorted: the stamps are in one block, by ID.
	sorted bool
}

func (s *stamps) add(st stamp) {
	if len(s.blocks) == 0 || len(s.blocks[len(s.blocks)-1]) == cap(s.blocks[len(s.blocks)-1]) {
		s.blocks = append(s.blocks, make([]stamp, 0, blockLen))
	}
	last := &s.blocks[len(s.blocks)-1]
	*last = append(*last, st)
	s.n++
	s.sorted = false
}

// len returns how many stamps s holds.
func (s *stamps) len() int { return s.n }

// from yields the stamps from the i-th on, in the order they were added
// (or by ID after byID).
func (s *stamps) from(i int) iter.Seq[stamp] {
	return func(yield func(stamp) bool) {
		skip := i
		for _, b := range s.blocks {
			if skip >= len(b) {
				skip -= len(b)
				continue
			}
			for _, st := range b[skip:] {
				if !yield(st) {
					return
				}
			}
			skip = 0
		}
	}
}

// byID sorts the stamps by ID and returns them. They are copied into one
// slice, block by block, the first time: call it once no more IDs come.
func (s *stamps) byID() []stamp {
	if s.n == 0 {
		return nil
	}
	if !s.sorted {
		all := make([]stamp, 0, s.n)
		for _, b := range s.blocks {
			all = append(all, b...)
		}
		slices.SortFunc(all, func(a, b stamp) int { return cmp.Compare(a.id, b.id) })
		s.blocks, s.sorted = [][]stamp{all}, true
	}
	return s.blocks[0]
}

func TestLedger(t *testing.T) {
	batch := func(from, n int) []int64 {
		ids := make([]int64, n)
		for i := range ids {
			ids[i] = int64(from + i)
		}
		return ids
	}
	t.Run("KeepsEveryID", func(t *testing.T) {
		l := &ledger{seg: map[string]*stamps{}}
		n := 2*blockLen + 3
		// Added in descending batches, so that sorting has work to do.
		var want []stamp
		for from := n - 1000; from > -1000; from -= 1000 {
			ids := batch(max(from, 0), min(1000, from+1000))
			l.add(modeSnowflake, "", 7, ids)
			for _, id := range ids {
				want = append(want, stamp{id, 7})
			}
		}
		l.add(modeSegment, "a", 1, []int64{5, 3})
		if got := l.sf.len(); got != n {
			t.Fatalf("len %d, want %d", got, n)
		}
		for _, i := range []int{0, 1, blockLen - 1, blockLen, blockLen + 1, n - 1, n} {
			if got := slices.Collect(l.sf.from(i)); !slices.Equal(got, want[i:]) {
				t.Errorf("from(%d): %d stamps, want %d, or not in the order added", i, len(got), n-i)
			}
		}
		sorted := l.sf.byID()
		if len(sorted) != n {
			t.Fatalf("byID: %d stamps, want %d", len(sorted), n)
		}
		for i, st := range sorted {
			if st != (stamp{int64(i), 7}) {
				t.Fatalf("byID()[%d] = %v, want {%d 7}", i, st, i)
			}
		}
		l.add(modeSnowflake, "", 8, []int64{-1})
		if got := l.sf.byID(); len(got) != n+1 || got[0] != (stamp{-1, 8}) {
			t.Errorf("after one more add, byID: %d stamps beginning %v, want %d beginning {-1 8}", len(got), got[0], n+1)
		}
		if got := slices.Collect(l.seg["a"].from(0)); !slices.Equal(got, []stamp{{5, 1}, {3, 1}}) {
			t.Errorf("tag a: %v, want [{5 1} {3 1}]", got)
		}
	})
	// The property the scenarios rely on: however many IDs the ledger
	// holds, an add allocates at most one block, and never copies what it
	// holds.
	t.Run("GrowsByBlocks", func(t *testing.T) {
		l := &ledger{seg: map[string]*stamps{}}
		ids := batch(0, 10_000)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		const blocks = 8
		for range blocks * blockLen / len(ids) {
			l.add(modeSnowflake, "", 0, ids)
		}
		runtime.ReadMemStats(&after)
		block := uint64(blockLen) * 16 // bytes
		if got := after.TotalAlloc - before.TotalAlloc; got > (blocks+1)*block {
			t.Errorf("adding %d blocks of stamps allocated %d MiB, want at most %d MiB: stamps were copied as the ledger grew",
				blocks, got>>20, (blocks+1)*block>>20)
		}
	})
}
