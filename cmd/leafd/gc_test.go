package main

import (
	"os"
	"runtime"
	"runtime/metrics"
	"testing"
	"time"
)

func TestGCPercent(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		live, base uint64
		want       int
	}{
		{0, 0, 200},             // the minimum heap goal, 8 MiB
		{1 * mib, 1 * mib, 225}, // goal max(9 MiB, 1 + 2.25 MiB): 1 + 8
		{1 * mib, 2 * mib, 225}, // the stacks and globals count
		{2 * mib, 2 * mib, 250}, // goal max(10, 2 + 5): 2 + 8
		{4 * mib, 4 * mib, 200}, // goal max(8, 4 + 8)
		{4 * mib, 6 * mib, 133}, // goal max(5.3, 4 + 8)
		{6 * mib, 6 * mib, 133}, // goal max(5.3, 6 + 8)
		{8 * mib, 8 * mib, 100}, // Go's default from here on
		{1024 * mib, 1024 * mib, 100},
	} {
		if got := gcPercent(c.live, c.base); got != c.want {
			t.Errorf("gcPercent(%d MiB, %d MiB) = %d, want %d", c.live/mib, c.base/mib, got, c.want)
		}
	}
}

// gogc is the collector's GC percentage now.
func gogc() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int(s[0].Value.Uint64())
}

// waitGOGC collects until the GC percentage satisfies ok (the pacer sets it
// from a finalizer, after the collection).
func waitGOGC(t *testing.T, what string, ok func(int) bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; {
		runtime.GC()
		if p := gogc(); ok(p) {
			return
		} else if time.Now().After(deadline) {
			t.Fatalf("GC percentage %d, want %s", p, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestPaceGC: with a small live heap the collector may let the heap grow
// by gcHeadroom; with a live heap past gcHeadroom it is Go's default again;
// stop gives the default back for good.
func TestPaceGC(t *testing.T) {
	if v, ok := os.LookupEnv("GOGC"); ok {
		t.Setenv("GOGC", v) // restored after the test
		os.Unsetenv("GOGC")
	}
	stop := paceGC()
	defer stop()
	waitGOGC(t, "above 100 for a small live heap", func(p int) bool { return p > 100 })

	big := make([]*[1 << 20]byte, 2*gcHeadroom>>20) // live, pointers to scan
	for i := range big {
		big[i] = new([1 << 20]byte)
	}
	waitGOGC(t, "100 for a live heap twice the headroom", func(p int) bool { return p == 100 })
	runtime.KeepAlive(big)
	big = nil
	waitGOGC(t, "above 100 once the heap is small again", func(p int) bool { return p > 100 })

	stop()
	waitGOGC(t, "100 after stop", func(p int) bool { return p == 100 })
	runtime.GC()
	time.Sleep(50 * time.Millisecond)
	if p := gogc(); p != 100 {
		t.Errorf("GC percentage %d after stop and a collection, want 100", p)
	}
}

// TestPaceGCLeavesGOGC: an operator's GOGC governs the collector.
func TestPaceGCLeavesGOGC(t *testing.T) {
	t.Setenv("GOGC", "100")
	defer paceGC()()
	for range 3 {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
		if p := gogc(); p != 100 {
			t.Fatalf("GC percentage %d with GOGC=100 in the environment, want 100", p)
		}
	}
}
