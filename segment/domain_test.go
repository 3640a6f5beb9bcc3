package segment_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/segment"
	"github.com/leafd/leafd/store/sharded"
)

// domainServer is one server of a 6-digit opaque tag in a test: an
// allocator whose clock moves 1ms per 1,000 IDs issued, a rate that grows
// the step at every load, as far as the domain lets it.
type domainServer struct {
	a     *segment.Allocator
	clock *fakeClock
	n     int
}

func startDomainServer(t *testing.T, s segment.Store) *domainServer {
	t.Helper()
	cfg := fastConfig()
	cfg.OpaqueKey = testOpaqueKey
	cfg.MaxBatch = 1000
	// Near the end of the domain every load brings one ID (on a sharded
	// store, the last thousand or so): a batch of 1,000 then waits for
	// a thousand loads.
	cfg.WaitTimeout = time.Minute
	clock := newFakeClock()
	cfg.Now = clock.Now
	return &domainServer{a: newAllocator(t, s, cfg), clock: clock}
}

// take issues up to n IDs of tag in batches, stopping early at an error,
// and returns them in the order issued, with the error that stopped it
// (nil when n were issued). seen, indexed by ID, marks every ID issued in
// the test: one issued twice fails it.
func (d *domainServer) take(t *testing.T, perm *segment.Perm, tag string, n int, seen []bool) ([]int64, error) {
	t.Helper()
	var ids []int64
	for len(ids) < n {
		batch := min(1000, n-len(ids))
		rs, err := d.a.NextN(context.Background(), tag, batch, nil)
		if err != nil {
			return ids, err
		}
		for _, r := range rs {
			if r.Start < 1 || r.Start > perm.Max() {
				t.Fatalf("ID %d outside [1, %d]", r.Start, perm.Max())
			}
			if seen[r.Start] {
				t.Fatalf("ID %d issued twice", r.Start)
			}
			seen[r.Start] = true
			ids = append(ids, r.Start)
		}
		d.n += len(rs)
		d.clock.Advance(time.Duration(len(rs)) * time.Microsecond)
	}
	return ids, nil
}

// count returns how many IDs seen marks.
func count(seen []bool) int64 {
	n := int64(0)
	for _, s := range seen {
		if s {
			n++
		}
	}
	return n
}

func domainPerm(t *testing.T, tag string, digits int) *segment.Perm {
	t.Helper()
	p, err := segment.NewPerm(segment.TagKey(testOpaqueKey, tag), segment.OpaqueDomain(digits))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A 6-digit opaque tag that issued 100,000 IDs at a rate that grew its
// step, then restarted gracefully, goes on issuing: the restart gave up at
// most its buffers, each at most 1/64 of the domain left, and the tag
// issues nearly its whole domain before tag_exhausted.
func TestOpaqueDomainSurvivesRestart(t *testing.T) {
	db := newDatabase(t, defaultDriver())
	s := db.store(t)
	createOpaque(t, s, "user", 6)
	perm := domainPerm(t, "user", 6)
	seen := make([]bool, perm.Max()+1)

	first := startDomainServer(t, db.store(t))
	if _, err := first.take(t, perm, "user", 100_000, seen); err != nil {
		t.Fatal(err)
	}
	first.a.Close()

	second := startDomainServer(t, db.store(t))
	_, err := second.take(t, perm, "user", int(perm.Max()), seen)
	if code(err) != leafd.ETagExhausted {
		t.Fatalf("after the restart: %v, want tag_exhausted once the domain is used up", err)
	}
	if got, want := count(seen), perm.Max()*95/100; got < want {
		t.Fatalf("the tag issued %d of its %d IDs (a restart after 100,000), want at least %d", got, perm.Max(), want)
	}
	t.Logf("%d of %d IDs issued, with a restart after 100,000", count(seen), perm.Max())
	if _, err := second.a.Next(context.Background(), "user"); code(err) != leafd.ETagExhausted {
		t.Fatalf("Next after the end of the domain: %v, want tag_exhausted", err)
	}
}

// Every graceful restart gives up less than 1/31 of the domain left: at
// most two ranges (the current one, partly used, and the next one), each at
// most 1/64 of what was left when it was loaded. The table step is far
// above that bound, and the domain cap wins over it.
func TestOpaqueDomainRestartBound(t *testing.T) {
	db := newDatabase(t, defaultDriver())
	s := db.store(t)
	createOpaque(t, s, "order", 6)
	if _, _, err := s.UpdateTag(context.Background(), "order", leafd.TagUpdate{Step: new(int64(200_000))}); err != nil {
		t.Fatal(err)
	}
	perm := domainPerm(t, "order", 6)
	seen := make([]bool, perm.Max()+1)
	srv := startDomainServer(t, db.store(t))
	last := int64(0)
	for i, n := range []int{1, 5_000, 40_000, 777, 90_000, 12_345, 3, 60_000, 2_500, 30_000} {
		ids, err := srv.take(t, perm, "order", n, seen)
		if err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		if last > 0 {
			left := perm.Max() - last
			lost := perm.Unmap(ids[0]) - last - 1
			if lost < 0 || lost*31 > left {
				t.Fatalf("round %d: the restart gave up %d IDs of the %d left (more than 1/31)", i, lost, left)
			}
		}
		last = perm.Unmap(ids[len(ids)-1])
		if st, _ := srv.a.TagState("order"); st.Step*64 > perm.Max()-st.Buffers[st.Current].Start+1 {
			t.Fatalf("round %d: a range of %d IDs starting at %d: more than 1/64 of the domain left", i, st.Step, st.Buffers[st.Current].Start)
		}
		srv.a.Close()
		srv = startDomainServer(t, db.store(t))
	}
}

// The last IDs of a domain are issued, across restarts, and only then is
// the tag exhausted: with its counter 200 below the end of a 6-digit
// domain and a table step of 1,000, a server that restarts every 20 IDs
// still issues nearly all of the last 201.
func TestOpaqueDomainLastIDs(t *testing.T) {
	db := newDatabase(t, defaultDriver())
	s := db.store(t)
	createOpaque(t, s, "ticket", 6)
	perm := domainPerm(t, "ticket", 6)
	db.exec(t, "UPDATE leaf_alloc SET step = 1000, max_id = ? WHERE biz_tag = 'ticket'", perm.Max()-200)
	seen := make([]bool, perm.Max()+1)
	var err error
	for err == nil {
		srv := startDomainServer(t, db.store(t))
		var ids []int64
		ids, err = srv.take(t, perm, "ticket", 20, seen)
		for _, id := range ids {
			if c := perm.Unmap(id); c < perm.Max()-200 {
				t.Fatalf("counter %d: below the tag's max_id", c)
			}
		}
		srv.a.Close()
	}
	if code(err) != leafd.ETagExhausted {
		t.Fatalf("%v, want tag_exhausted", err)
	}
	if n := count(seen); n < 180 {
		t.Fatalf("%d of the last 201 IDs issued across restarts every 20 IDs, want at least 180", n)
	}
	// Without restarts, the last of them come one by one and the counter N
	// itself is issued before tag_exhausted.
	db2 := newDatabase(t, defaultDriver())
	createOpaque(t, db2.store(t), "ticket", 6)
	db2.exec(t, "UPDATE leaf_alloc SET step = 1000, max_id = ? WHERE biz_tag = 'ticket'", perm.Max()-200)
	srv := startDomainServer(t, db2.store(t))
	seen = make([]bool, perm.Max()+1)
	var ids []int64
	for err = nil; err == nil; {
		var got []int64
		got, err = srv.take(t, perm, "ticket", 1, seen)
		ids = append(ids, got...)
	}
	if code(err) != leafd.ETagExhausted || len(ids) != 201 || perm.Unmap(ids[200]) != perm.Max() {
		t.Fatalf("%d IDs, then %v; want all 201, the last mapped from N, then tag_exhausted", len(ids), err)
	}
	if st, _ := srv.a.TagState("ticket"); st.DomainUsed != perm.Max() || st.DomainReserved != 0 {
		t.Fatalf("state of the exhausted tag: used %d, reserved %d of %d", st.DomainUsed, st.DomainReserved, perm.Max())
	}
}

// On a sharded store a 6-digit opaque tag issues nearly its whole domain:
// the loads, which take the slots in turn, do not raise each slot above
// the last one this server used, and a slot that has passed the domain is
// passed over until every slot has.
func TestOpaqueDomainSharded(t *testing.T) {
	dsns := []string{newDatabase(t, defaultDriver()).dsn, newDatabase(t, defaultDriver()).dsn}
	open := func() *sharded.Store {
		sh, err := sharded.Open(defaultDriver(), dsns, sharded.Options{Logger: fastConfig().Logger})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sh.Close() })
		return sh
	}
	sh := open()
	if err := sh.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	createOpaque(t, sh, "user", 6)
	perm := domainPerm(t, "user", 6)
	seen := make([]bool, perm.Max()+1)
	srv := startDomainServer(t, open())
	if _, err := srv.take(t, perm, "user", 100_000, seen); err != nil {
		t.Fatalf("after %d IDs: %v", count(seen), err)
	}
	srv.a.Close()
	srv = startDomainServer(t, open())
	_, err := srv.take(t, perm, "user", int(perm.Max()), seen)
	if code(err) != leafd.ETagExhausted {
		t.Fatalf("%v, want tag_exhausted once the domain is used up", err)
	}
	if got, want := count(seen), perm.Max()*95/100; got < want {
		t.Fatalf("the tag issued %d of its %d IDs on a sharded store, want at least %d", got, perm.Max(), want)
	}
	t.Logf("%d of %d IDs issued, with a restart after 100,000", count(seen), perm.Max())
}

// Three servers over one sharded store hand out an opaque tag's IDs at
// once, each load taking its slot where that slot left off: no ID twice.
func TestOpaqueDomainShardedServers(t *testing.T) {
	dsns := []string{newDatabase(t, defaultDriver()).dsn, newDatabase(t, defaultDriver()).dsn}
	open := func() *sharded.Store {
		sh, err := sharded.Open(defaultDriver(), dsns, sharded.Options{Slots: 4, Logger: fastConfig().Logger})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sh.Close() })
		return sh
	}
	sh := open()
	if err := sh.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	createOpaque(t, sh, "user", 6)
	perm := domainPerm(t, "user", 6)
	got := make([][]int64, 3)
	var wg sync.WaitGroup
	for i := range got {
		srv := startDomainServer(t, open())
		wg.Go(func() {
			for range 200 {
				rs, err := srv.a.NextN(context.Background(), "user", 100, nil)
				if err != nil {
					t.Error(err)
					return
				}
				for _, r := range rs {
					got[i] = append(got[i], r.Start)
				}
			}
		})
	}
	wg.Wait()
	seen := make([]bool, perm.Max()+1)
	for _, ids := range got {
		for _, id := range ids {
			if id < 1 || id > perm.Max() || seen[id] {
				t.Fatalf("ID %d: twice, or outside [1, %d]", id, perm.Max())
			}
			seen[id] = true
		}
	}
	if n := count(seen); n != 3*200*100 {
		t.Fatalf("%d IDs, want %d", n, 3*200*100)
	}
}
