package segment_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/internal/testkit/testdb"
	"github.com/leafd/leafd/segment"
	"github.com/leafd/leafd/store"
)

// The baselines: a bare atomic add, the least any ID counter costs. The
// steady-state Next should stay within 3x of it.
func BenchmarkAtomicAdd(b *testing.B) {
	var n atomic.Int64
	for b.Loop() {
		n.Add(1)
	}
}

func BenchmarkAtomicAddParallel(b *testing.B) {
	var n atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			n.Add(1)
		}
	})
}

// BenchmarkMapLookup is the other floor under Next: finding a tag by name in
// a Go map behind an atomic pointer, as Next does, with the counter add.
// Next can cost no less than this while tags are named by strings.
func BenchmarkMapLookup(b *testing.B) {
	type counter struct{ n atomic.Int64 }
	m := map[string]*counter{"bench": {}, "order": {}, "pay": {}}
	var p atomic.Pointer[map[string]*counter]
	p.Store(&m)
	name := "bench"
	for b.Loop() {
		(*p.Load())[name].n.Add(1)
	}
}

// benchAllocator serves one tag from a real store of the default engine
// with large ranges, so that the benchmark measures the steady state: loads
// happen in the background, as in production.
func benchAllocator(b *testing.B) *segment.Allocator {
	return benchAllocatorOf(b, tagRow("bench", 1_000_000))
}

// benchDated serves a dated tag "bench" the same way: numbers of the day in
// UTC with a counter of 10 digits, so that the ranges are as large.
func benchDated(b *testing.B) *segment.Allocator {
	row := tagRow("bench", 1_000_000)
	row.Format, row.Period, row.Digits = segment.FormatDated, segment.PeriodDay, 10
	return benchAllocatorOf(b, row)
}

func benchAllocatorOf(b *testing.B, row leafd.Tag) *segment.Allocator {
	b.Helper()
	s := openStore(b, store.DefaultDriver(), testdb.DSN(b, store.DefaultDriver()))
	ctx := context.Background()
	if err := s.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	if _, err := s.CreateTag(ctx, row); err != nil {
		b.Fatal(err)
	}
	cfg := fastConfig()
	cfg.MaxStep = 10_000_000
	a := newAllocator(b, s, cfg)
	if _, err := a.Next(ctx, "bench"); err != nil { // first load
		b.Fatal(err)
	}
	return a
}

func BenchmarkNext(b *testing.B) {
	benchNext(b, benchAllocator(b))
}

// BenchmarkNextDated is Next of a dated tag: the same hot path, which
// reads no clock (a timer ends each period's buffers).
func BenchmarkNextDated(b *testing.B) {
	benchNext(b, benchDated(b))
}

func benchNext(b *testing.B, a *segment.Allocator) {
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := a.Next(ctx, "bench"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkNextParallel(b *testing.B) {
	a := benchAllocator(b)
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := a.Next(ctx, "bench"); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkNextN1000 reserves 1000 IDs a call; b.N counts calls.
func BenchmarkNextN1000(b *testing.B) {
	a := benchAllocator(b)
	ctx := context.Background()
	var buf []segment.Range
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = a.NextN(ctx, "bench", 1000, buf[:0]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHandleNext is Next through a Handle: no lookup by name, the
// atomic add on the current buffer and the checks around it.
func BenchmarkHandleNext(b *testing.B) {
	a := benchAllocator(b)
	h, err := a.Handle("bench")
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := h.Next(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkHandleNextParallel(b *testing.B) {
	a := benchAllocator(b)
	h, err := a.Handle("bench")
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := h.Next(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkNextOpaque is BenchmarkNext for an opaque tag: the cost of the
// keyed bijection beside the plain hot path.
func BenchmarkNextOpaque(b *testing.B) {
	s := openStore(b, store.DefaultDriver(), testdb.DSN(b, store.DefaultDriver()))
	ctx := context.Background()
	if err := s.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	t := tagRow("bench", 1_000_000)
	t.Format, t.KeyFingerprint = segment.FormatOpaque, segment.KeyFingerprint(testOpaqueKey, "bench")
	if _, err := s.CreateTag(ctx, t); err != nil {
		b.Fatal(err)
	}
	cfg := fastConfig()
	cfg.MaxStep = 10_000_000
	cfg.OpaqueKey = testOpaqueKey
	a := newAllocator(b, s, cfg)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := a.Next(ctx, "bench"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkNextN1 and BenchmarkNextN1Dated are the call of the HTTP and
// gRPC routes for one ID: for a dated tag it reads the coarse clock, and
// the clock itself only in the last minute of a period.
func BenchmarkNextN1(b *testing.B) {
	benchNextN1(b, benchAllocator(b))
}

func BenchmarkNextN1Dated(b *testing.B) {
	benchNextN1(b, benchDated(b))
}

func benchNextN1(b *testing.B, a *segment.Allocator) {
	ctx := context.Background()
	var buf [1]segment.Range
	b.ReportAllocs()
	for b.Loop() {
		if _, err := a.NextN(ctx, "bench", 1, buf[:0]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkNextDatedStepOne is a dated tag with max_step 1 on each engine:
// one transaction per number, so no number is skipped but by a server
// that stops. Its cost is the database's.
func BenchmarkNextDatedStepOne(b *testing.B) {
	for _, driver := range store.Drivers() {
		b.Run(driver, func(b *testing.B) {
			db := newDatabase(b, driver)
			row := tagRow("bench", 1)
			row.Format, row.Period, row.Digits, row.MaxStep = segment.FormatDated, segment.PeriodDay, 10, 1
			ctx := context.Background()
			if _, err := db.store(b).CreateTag(ctx, row); err != nil {
				b.Fatal(err)
			}
			a := newAllocator(b, db.store(b), fastConfig())
			var buf [1]segment.Range
			for b.Loop() {
				if _, err := a.NextN(ctx, "bench", 1, buf[:0]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
