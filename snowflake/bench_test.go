package snowflake_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leafd/leafd/snowflake"
)

// The baseline is the layout's own limit: 2^sequence_bits IDs per
// millisecond and worker id, 4,096,000 IDs/s for the default layout. Next
// in one goroutine should reach at least 97% of it; the benchmarks report
// ids/s and pct_of_limit beside ns/op.
func reportRate(b *testing.B, l snowflake.Layout, idsPerOp int) {
	perSec := float64(b.N) * float64(idsPerOp) / b.Elapsed().Seconds()
	b.ReportMetric(perSec, "ids/s")
	b.ReportMetric(100*perSec/float64(l.Sequences()*1000), "pct_of_limit")
}

// BenchmarkAtomicAdd is the cost of a bare counter, for scale.
func BenchmarkAtomicAdd(b *testing.B) {
	var n atomic.Int64
	for b.Loop() {
		n.Add(1)
	}
}

// fixedGenerator is a generator with worker id 1 and the default layout.
func fixedGenerator(b *testing.B) *snowflake.Generator {
	g, err := snowflake.New(snowflake.Settings{WorkerID: 1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { g.Close() })
	return g
}

func BenchmarkNext(b *testing.B) {
	g := fixedGenerator(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := g.Next(ctx); err != nil {
			b.Fatal(err)
		}
	}
	reportRate(b, g.Layout(), 1)
}

func BenchmarkNextParallel(b *testing.B) {
	g := fixedGenerator(b)
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := g.Next(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
	reportRate(b, g.Layout(), 1)
}

// BenchmarkNextN1000 takes 1000 IDs a call; ids/s counts IDs.
func BenchmarkNextN1000(b *testing.B) {
	g := fixedGenerator(b)
	ctx := context.Background()
	buf := make([]snowflake.ID, 0, 1000)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := g.NextN(ctx, 1000, buf[:0]); err != nil {
			b.Fatal(err)
		}
	}
	reportRate(b, g.Layout(), 1000)
}

// borrowGenerator is fixedGenerator with Settings.MaxBorrow set.
func borrowGenerator(b *testing.B, borrow time.Duration) *snowflake.Generator {
	g, err := snowflake.New(snowflake.Settings{WorkerID: 1, MaxBorrow: borrow})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { g.Close() })
	return g
}

var borrowCases = []time.Duration{0, time.Millisecond, 5 * time.Millisecond, 50 * time.Millisecond}

// BenchmarkNextNBorrow takes 1000 IDs a call in a loop, with borrowing off
// (max_borrow=0s) and on. In a loop that outruns the layout the lead soon
// reaches max_borrow and the generator waits as without it: the sustained
// rate stays at the layout's limit (pct_of_limit), borrowing or not.
func BenchmarkNextNBorrow(b *testing.B) {
	for _, borrow := range borrowCases {
		b.Run("max_borrow="+borrow.String(), func(b *testing.B) {
			g := borrowGenerator(b, borrow)
			ctx := context.Background()
			buf := make([]snowflake.ID, 0, 1000)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := g.NextN(ctx, 1000, buf[:0]); err != nil {
					b.Fatal(err)
				}
			}
			reportRate(b, g.Layout(), 1000)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*1000), "ns/id")
		})
	}
}

// BenchmarkNextNBorrowBurst times a burst of 20 NextN(1000), 20,000 IDs
// (4.9 ms of sequence in the default layout), from a generator at rest (the
// clock past its last ID); ns/op is the time of one burst. That is what borrowing is for: without it the
// burst waits for the clock; with max_borrow ≥ 5ms it does not.
//
// Each burst gets a new generator (made and closed outside the timed part),
// which is at rest at once. Waiting for one generator's clock to pass its
// last ID instead would add up to max_borrow of untimed waiting to a burst
// that takes well under a millisecond when it borrows: b.Loop, which sizes
// the run by the timed part alone, would then wait for minutes.
func BenchmarkNextNBorrowBurst(b *testing.B) {
	for _, borrow := range borrowCases {
		b.Run("max_borrow="+borrow.String(), func(b *testing.B) {
			ctx := context.Background()
			buf := make([]snowflake.ID, 0, 1000)
			var layout snowflake.Layout
			n := 0
			for b.Loop() {
				b.StopTimer()
				g, err := snowflake.New(snowflake.Settings{WorkerID: 1, MaxBorrow: borrow})
				if err != nil {
					b.Fatal(err)
				}
				layout = g.Layout()
				b.StartTimer()
				for range 20 {
					if _, err := g.NextN(ctx, 1000, buf[:0]); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				g.Close()
				b.StartTimer()
				n++
			}
			perID := float64(b.Elapsed().Nanoseconds()) / float64(n*20_000)
			b.ReportMetric(perID, "ns/id")
			b.ReportMetric(1e9/perID, "ids/s")
			b.ReportMetric(100*1e9/perID/float64(layout.Sequences()*1000), "pct_of_limit")
		})
	}
}

// BenchmarkPoolNextN1000 takes 1000 IDs a call from a Pool of 1, 3 and 4
// worker ids, leased from an in-memory store (memLeases), with borrowing
// off and on. pct_of_limit is against one worker id's limit, as elsewhere;
// pct_of_pool_limit against the pool's, workers times that. In a loop that
// outruns the layout a pool of k sustains up to k times one worker id's
// rate, when one goroutine can take IDs that fast.
func BenchmarkPoolNextN1000(b *testing.B) {
	for _, workers := range []int{1, 3, 4} {
		for _, borrow := range []time.Duration{0, 5 * time.Millisecond} {
			b.Run(fmt.Sprintf("workers=%d/max_borrow=%v", workers, borrow), func(b *testing.B) {
				p, err := snowflake.NewPool(snowflake.Settings{Leases: newMemLeases(), MaxBorrow: borrow, Logger: quiet}, workers)
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { p.Close() })
				if err := p.Start(); err != nil {
					b.Fatal(err)
				}
				waitLeased(b, p, workers)
				ctx := context.Background()
				buf := make([]snowflake.ID, 0, 1000)
				b.ReportAllocs()
				for b.Loop() {
					if _, err := p.NextN(ctx, 1000, buf[:0]); err != nil {
						b.Fatal(err)
					}
				}
				reportRate(b, p.Layout(), 1000)
				perSec := float64(b.N) * 1000 / b.Elapsed().Seconds()
				b.ReportMetric(100*perSec/float64(int64(workers)*p.Layout().Sequences()*1000), "pct_of_pool_limit")
			})
		}
	}
}
