package snowflake_test

import (
	"context"
	"sync/atomic"
	"testing"

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
