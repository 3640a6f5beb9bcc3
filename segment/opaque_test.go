package segment_test

import (
	"context"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/segment"
)

var testOpaqueKey = []byte("0123456789abcdef0123456789abcdef")

// Every counter value of a small domain maps to a distinct ID of the
// domain, and back.
func TestPermBijection(t *testing.T) {
	for _, n := range []int64{1, 2, 3, 7, 100, 1000, 4097, 65_536} {
		p, err := segment.NewPerm(segment.TagKey(testOpaqueKey, "t"), n)
		if err != nil {
			t.Fatal(err)
		}
		seen := make([]bool, n+1)
		for c := int64(1); c <= n; c++ {
			id := p.Map(c)
			if id < 1 || id > n {
				t.Fatalf("n=%d: Map(%d) = %d, outside [1, %d]", n, c, id, n)
			}
			if seen[id] {
				t.Fatalf("n=%d: ID %d twice", n, id)
			}
			seen[id] = true
			if back := p.Unmap(id); back != c {
				t.Fatalf("n=%d: Unmap(Map(%d)) = %d", n, c, back)
			}
		}
	}
}

// IDs below 2^53 by default, and a decimal domain of exactly N digits at
// most; the mapping round-trips.
func TestPermDomains(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, digits := range []int{0, 6, 12, 18} {
		n := segment.OpaqueDomain(digits)
		p, err := segment.NewPerm(segment.TagKey(testOpaqueKey, "order"), n)
		if err != nil {
			t.Fatal(err)
		}
		for range 2000 {
			c := 1 + rng.Int64N(n)
			id := p.Map(c)
			if id < 1 || id > n || p.Unmap(id) != c {
				t.Fatalf("digits %d: Map(%d) = %d (max %d), back %d", digits, c, id, n, p.Unmap(id))
			}
		}
	}
	if n := segment.OpaqueDomain(0); n != 1<<53-1 {
		t.Fatalf("default domain %d", n)
	}
}

// The order of issue says nothing of the value: over 100,000 consecutive
// counters, |Pearson r| between position and ID is below 0.05, and the IDs
// spread over the domain.
func TestOpaqueUncorrelated(t *testing.T) {
	p, err := segment.NewPerm(segment.TagKey(testOpaqueKey, "users"), segment.OpaqueDomain(0))
	if err != nil {
		t.Fatal(err)
	}
	const n = 100_000
	var sx, sy, sxx, syy, sxy float64
	below := 0
	for i := range n {
		x := float64(i)
		y := float64(p.Map(int64(i + 1)))
		if y < float64(segment.OpaqueDomain(0))/2 {
			below++
		}
		sx, sy, sxx, syy, sxy = sx+x, sy+y, sxx+x*x, syy+y*y, sxy+x*y
	}
	r := (n*sxy - sx*sy) / (math.Sqrt(n*sxx-sx*sx) * math.Sqrt(n*syy-sy*sy))
	if math.Abs(r) >= 0.05 {
		t.Fatalf("Pearson r between issue order and ID is %.4f", r)
	}
	if below < n*45/100 || below > n*55/100 {
		t.Fatalf("%d of %d IDs in the lower half of the domain", below, n)
	}
}

// createOpaque creates an opaque tag as the admin API does.
func createOpaque(t *testing.T, s interface {
	CreateTag(context.Context, leafd.Tag) (leafd.Tag, error)
}, name string, digits int) {
	t.Helper()
	_, err := s.CreateTag(context.Background(), leafd.Tag{Name: name, Step: 100, Format: segment.FormatOpaque, Digits: digits,
		KeyFingerprint: segment.KeyFingerprint(testOpaqueKey, name)})
	if err != nil {
		t.Fatal(err)
	}
}

// Three allocators over one database serve an opaque tag: no ID twice,
// every ID in [1, 2^53), batches included; a fourth with another key
// refuses the tag and takes no range for it.
func TestOpaqueAllocators(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, db *database) {
		createOpaque(t, db.store(t), "order", 0)
		cfg := fastConfig()
		cfg.OpaqueKey = testOpaqueKey
		cfg.MaxStep = 500
		ctx := context.Background()
		var mu sync.Mutex
		seen := map[int64]bool{}
		var wg sync.WaitGroup
		var servers []*segment.Allocator
		for range 3 {
			a := newAllocator(t, db.store(t), cfg)
			servers = append(servers, a)
			wg.Go(func() {
				var local []int64
				for i := range 2000 {
					if i%10 == 0 {
						rs, err := a.NextN(ctx, "order", 7, nil)
						if err != nil {
							t.Error(err)
							return
						}
						for _, r := range rs {
							for id := r.Start; id < r.End; id++ {
								local = append(local, id)
							}
						}
						continue
					}
					id, err := a.Next(ctx, "order")
					if err != nil {
						t.Error(err)
						return
					}
					local = append(local, id)
				}
				mu.Lock()
				defer mu.Unlock()
				for _, id := range local {
					if id < 1 || id >= 1<<53 {
						t.Errorf("ID %d outside [1, 2^53)", id)
					}
					if seen[id] {
						t.Errorf("ID %d twice", id)
					}
					seen[id] = true
				}
			})
		}
		wg.Wait()
		for _, a := range servers {
			a.Close() // no background load after this
		}
		if len(seen) < 3*2000 {
			t.Fatalf("%d IDs", len(seen))
		}

		var before int64
		if err := db.raw.QueryRow("SELECT max_id FROM leaf_alloc WHERE biz_tag = 'order'").Scan(&before); err != nil {
			t.Fatal(err)
		}
		other := cfg
		other.OpaqueKey = []byte("another key of sixteen bytes or more")
		b := newAllocator(t, db.store(t), other)
		if _, err := b.Next(ctx, "order"); leafd.ErrorCode(err) != leafd.EOpaqueKeyMismatch {
			t.Fatalf("a server with another key: %v, want opaque_key_mismatch", err)
		}
		none := fastConfig()
		if _, err := newAllocator(t, db.store(t), none).Next(ctx, "order"); leafd.ErrorCode(err) != leafd.EOpaqueKeyMismatch {
			t.Fatalf("a server without a key: %v, want opaque_key_mismatch", err)
		}
		var after int64
		if err := db.raw.QueryRow("SELECT max_id FROM leaf_alloc WHERE biz_tag = 'order'").Scan(&after); err != nil {
			t.Fatal(err)
		}
		if after != before {
			t.Fatalf("the refusing servers took ranges: max_id %d -> %d", before, after)
		}
	})
}

// A batch of an opaque tag that spans several ranges holds every ID it
// reserved, each mapped from a counter of its own: the mapping must not
// overwrite ranges it has yet to read.
func TestOpaqueBatchAcrossRanges(t *testing.T) {
	db := newDatabase(t, defaultDriver())
	s := db.store(t)
	createOpaque(t, s, "order", 0) // table step 100
	cfg := fastConfig()
	cfg.OpaqueKey = testOpaqueKey
	cfg.MaxStep = 100
	cfg.MaxBatch = 1000
	a := newAllocator(t, s, cfg)
	perm, err := segment.NewPerm(segment.TagKey(testOpaqueKey, "order"), segment.OpaqueDomain(0))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]bool{}
	buf := make([]segment.Range, 0, 1000) // as the HTTP server passes its pooled slice
	for range 3 {
		rs, err := a.NextN(context.Background(), "order", 250, buf[:0])
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) != 250 {
			t.Fatalf("%d IDs for a batch of 250", len(rs))
		}
		for _, r := range rs {
			if r.Len() != 1 {
				t.Fatalf("range %+v: an opaque batch comes one ID per range", r)
			}
			c := perm.Unmap(r.Start)
			if seen[c] {
				t.Fatalf("counter %d (ID %d) handed out twice", c, r.Start)
			}
			seen[c] = true
		}
	}
}
