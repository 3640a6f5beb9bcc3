package client_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/leafd/leafd/client"
	"github.com/leafd/leafd/internal/testkit/testdb"
	"github.com/leafd/leafd/store"
)

// BenchmarkAtomicAdd is the floor BenchmarkNext is compared with: one
// atomic add on a counter, as a lease's claim is.
func BenchmarkAtomicAdd(b *testing.B) {
	var n atomic.Int64
	var sink int64
	for b.Loop() {
		sink = n.Add(1)
	}
	_ = sink
}

// BenchmarkNext measures Next with the range buffer warm: leases of
// 10,000,000 IDs from a local fake server, so that a refill (in the
// background, at 20% left) comes once per 8 million calls.
func BenchmarkNext(b *testing.B) {
	st := newRangeStore("order")
	st.maxRange = 10_000_000
	srv := newRangeServer(b, st)
	c, err := client.New(srv.URL, client.WithRanges(10_000_000, 0.2))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if _, err := c.Next(ctx, "order"); err != nil {
		b.Fatal(err)
	}
	var sink int64
	for b.Loop() {
		id, err := c.Next(ctx, "order")
		if err != nil {
			b.Fatal(err)
		}
		sink = id
	}
	_ = sink
}

// BenchmarkNextParallel is BenchmarkNext from GOMAXPROCS goroutines at
// once, beside BenchmarkAtomicAddParallel.
func BenchmarkNextParallel(b *testing.B) {
	st := newRangeStore("order")
	st.maxRange = 10_000_000
	srv := newRangeServer(b, st)
	c, err := client.New(srv.URL, client.WithRanges(10_000_000, 0.2))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if _, err := c.Next(ctx, "order"); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.Next(ctx, "order"); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkAtomicAddParallel is BenchmarkAtomicAdd from GOMAXPROCS
// goroutines on one counter.
func BenchmarkAtomicAddParallel(b *testing.B) {
	var n atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			n.Add(1)
		}
	})
}

// BenchmarkNextGRPC measures Next with neither buffer nor lease: one
// NextSegment RPC per call, to a real leafd in-process over loopback
// (steps of 1,000,000 IDs, so that the store is seldom asked), from
// GOMAXPROCS goroutines; BenchmarkNextHTTP is the same as one
// GET /segment/{tag} per call, to the same server.
func BenchmarkNextGRPC(b *testing.B) {
	benchmarkNextDirect(b, func(p *leafdPair) (*client.Client, error) { return client.NewGRPC(p.addr) })
}

// BenchmarkNextHTTP is BenchmarkNextGRPC over HTTP.
func BenchmarkNextHTTP(b *testing.B) {
	benchmarkNextDirect(b, func(p *leafdPair) (*client.Client, error) { return client.New(p.url) })
}

func benchmarkNextDirect(b *testing.B, newClient func(*leafdPair) (*client.Client, error)) {
	s := openStore(b, testdb.DSN(b, store.DefaultDriver()))
	createTag(b, s, "order", 1_000_000)
	c, err := newClient(newPair(b, s, bothModes))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if _, err := c.Next(ctx, "order"); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.Next(ctx, "order"); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
