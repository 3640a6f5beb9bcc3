package snowflake_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/snowflake"
)

// A Pool holds several worker ids, each leased by a Generator of its own,
// so that it issues more than one worker id's 2^sequence_bits IDs a
// millisecond.

// quad is a layout with a 2-bit sequence: 4 IDs use up a millisecond.
var quad = snowflake.Layout{Epoch: snowflake.DefaultEpoch, TimeBits: 43, WorkerBits: 18, SequenceBits: 2}

// fourWorkers is a layout with 4 worker ids and a 4-bit sequence, so that
// a Pool of 3 leaves one spare worker id.
var fourWorkers = snowflake.Layout{Epoch: snowflake.DefaultEpoch, TimeBits: 57, WorkerBits: 2, SequenceBits: 4}

// memLeases is an in-memory LeaseStore with the claim rule of the real
// ones (the lowest worker id whose lease has ended and whose watermark is
// below the claimant's clock), on the real clock as the database's.
type memLeases struct {
	mu   sync.Mutex
	rows map[int64]*memLease
}

type memLease struct {
	owner string
	until time.Time
	wm    int64
}

func newMemLeases() *memLeases { return &memLeases{rows: map[int64]*memLease{}} }

func (m *memLeases) ClaimWorker(_ context.Context, c snowflake.Claim) (snowflake.Lease, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	for w := int64(0); w < c.Workers; w++ {
		r := m.rows[w]
		if r == nil {
			r = &memLease{}
			m.rows[w] = r
		}
		if now.Before(r.until) || strings.HasPrefix(r.owner, snowflake.FixedOwnerPrefix) || r.wm >= c.NowMs {
			continue
		}
		prev := r.wm
		r.owner, r.until, r.wm = c.Owner, now.Add(c.TTL), c.WatermarkMs
		return snowflake.Lease{WorkerID: w, Owner: c.Owner, PrevWatermarkMs: prev}, nil
	}
	return snowflake.Lease{}, snowflake.ErrNoFreeWorker
}

func (m *memLeases) RenewWorker(_ context.Context, l snowflake.Lease, ttl time.Duration, wm int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.rows[l.WorkerID]
	if r == nil || r.owner != l.Owner {
		return snowflake.ErrLeaseLost
	}
	r.until, r.wm = time.Now().Add(ttl), max(r.wm, wm)
	return nil
}

func (m *memLeases) ReleaseWorker(_ context.Context, l snowflake.Lease, wm int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.rows[l.WorkerID]
	if r == nil || r.owner != l.Owner {
		return snowflake.ErrLeaseLost
	}
	r.owner, r.until, r.wm = "", time.Time{}, wm
	return nil
}

func (m *memLeases) ClaimFixedWorker(context.Context, snowflake.FixedClaim) (snowflake.Lease, error) {
	return snowflake.Lease{}, errors.New("memLeases: no fixed worker ids")
}

// newPool creates and starts a pool, closing it when the test ends.
func newPool(tb testing.TB, s snowflake.Settings, workers int) *snowflake.Pool {
	tb.Helper()
	if s.Logger == nil {
		s.Logger = quiet
	}
	p, err := snowflake.NewPool(s, workers)
	if err != nil {
		tb.Fatal(err)
	}
	if err := p.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { p.Close() })
	return p
}

// waitLeased waits until p holds n worker ids.
func waitLeased(tb testing.TB, p *snowflake.Pool, n int) {
	tb.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for len(p.State().WorkerIDs) != n {
		if time.Now().After(deadline) {
			tb.Fatalf("the pool holds worker ids %v after 20s, want %d of them (%v)", p.State().WorkerIDs, n, p.State().Err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// workerOwners returns the owner of every row of the lease table.
func (d *leaseDB) workerOwners(tb testing.TB) map[int64]string {
	tb.Helper()
	rows, err := d.raw.Query("SELECT worker_id, owner FROM leaf_worker")
	if err != nil {
		tb.Fatal(err)
	}
	defer rows.Close()
	owners := map[int64]string{}
	for rows.Next() {
		var (
			w     int64
			owner string
		)
		if err := rows.Scan(&w, &owner); err != nil {
			tb.Fatal(err)
		}
		owners[w] = owner
	}
	if err := rows.Err(); err != nil {
		tb.Fatal(err)
	}
	return owners
}

// burstOf asks p for n IDs count times and returns them, with the last
// millisecond issued under each worker id.
func burstOf(tb testing.TB, p *snowflake.Pool, count, n int) (issued map[snowflake.ID]bool, lastMs map[int64]int64) {
	tb.Helper()
	issued, lastMs = map[snowflake.ID]bool{}, map[int64]int64{}
	for range count {
		ids, err := p.NextN(context.Background(), n, nil)
		if err != nil {
			tb.Fatal(err)
		}
		for _, id := range ids {
			d := p.Layout().Decode(id)
			issued[id] = true
			lastMs[d.WorkerID] = max(lastMs[d.WorkerID], d.UnixMs)
		}
	}
	return issued, lastMs
}

// takeFresh asks p for n IDs count times and fails unless each batch is
// ascending, no ID is in issued, and each lies after last[its worker id]
// (when there is one). It adds them to issued and returns the worker ids
// they came from.
func takeFresh(tb testing.TB, p *snowflake.Pool, count, n int, issued map[snowflake.ID]bool, last map[int64]int64) map[int64]bool {
	tb.Helper()
	used := map[int64]bool{}
	for range count {
		ids, err := p.NextN(context.Background(), n, nil)
		if err != nil {
			tb.Fatal(err)
		}
		checkBatch(tb, ids)
		for _, id := range ids {
			d := p.Layout().Decode(id)
			if issued[id] {
				tb.Fatalf("ID %d issued twice", id)
			}
			if l, ok := last[d.WorkerID]; ok && d.UnixMs <= l {
				tb.Fatalf("an ID under worker id %d at %d, not after its last before, %d", d.WorkerID, d.UnixMs, l)
			}
			issued[id] = true
			used[d.WorkerID] = true
		}
	}
	return used
}

// checkBatch fails unless ids is strictly ascending.
func checkBatch(tb testing.TB, ids []snowflake.ID) {
	tb.Helper()
	for i := 1; i < len(ids); i++ {
		if ids[i] <= ids[i-1] {
			tb.Fatalf("batch of %d: ID %d = %d after %d, not ascending", len(ids), i, ids[i], ids[i-1])
		}
	}
}

func TestNewPoolValidation(t *testing.T) {
	mem := newMemLeases()
	for _, c := range []struct {
		name    string
		s       snowflake.Settings
		workers int
		want    error
	}{
		{"0", snowflake.Settings{Leases: mem}, 0, snowflake.ErrInvalidWorkers},
		{"-1", snowflake.Settings{Leases: mem}, -1, snowflake.ErrInvalidWorkers},
		{"17", snowflake.Settings{Leases: mem}, 17, snowflake.ErrInvalidWorkers},
		{"5 of a layout of 4", snowflake.Settings{Leases: mem, Layout: fourWorkers}, 5, snowflake.ErrInvalidWorkers},
		{"2 without leases", snowflake.Settings{WorkerID: 1}, 2, snowflake.ErrInvalidWorkers},
		{"2 fixed", snowflake.Settings{Leases: mem, Fixed: true, WorkerID: 1}, 2, snowflake.ErrInvalidWorkers},
		{"2 with a bad max_borrow", snowflake.Settings{Leases: mem, MaxBorrow: 2 * time.Second}, 2, snowflake.ErrInvalidMaxBorrow},
		{"1 fixed", snowflake.Settings{Leases: mem, Fixed: true, WorkerID: 1}, 1, nil},
		{"1 unprotected", snowflake.Settings{WorkerID: 3}, 1, nil},
		{"4 of a layout of 4", snowflake.Settings{Leases: mem, Layout: fourWorkers}, 4, nil},
		{"16", snowflake.Settings{Leases: mem}, snowflake.MaxPoolWorkers, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.s.Logger = quiet
			p, err := snowflake.NewPool(c.s, c.workers)
			if !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
				t.Fatalf("NewPool(%d) = %v, want %v", c.workers, err, c.want)
			}
			if err != nil {
				if p != nil {
					t.Fatalf("NewPool(%d) failed with %v but returned a pool", c.workers, err)
				}
				return
			}
			defer p.Close()
			if p.Workers() != c.workers {
				t.Fatalf("Workers() = %d, want %d", p.Workers(), c.workers)
			}
		})
	}
	// A pool of one unprotected worker id issues under it at once.
	p, err := snowflake.NewPool(snowflake.Settings{WorkerID: 3, Logger: quiet}, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ids, err := p.NextN(context.Background(), 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkBatch(t, ids)
	for _, id := range ids {
		if w := p.Layout().Decode(id).WorkerID; w != 3 {
			t.Fatalf("ID %d under worker id %d, want 3", id, w)
		}
	}
	if s := p.State(); s.WorkerID != 3 || !slices.Equal(s.WorkerIDs, []int64{3}) || s.Issued != 10 {
		t.Fatalf("State = worker %d %v, issued %d; want 3 [3] 10", s.WorkerID, s.WorkerIDs, s.Issued)
	}
	// Counts outside 1..MaxBatch, for one worker id and several.
	q := newPool(t, snowflake.Settings{Leases: newMemLeases(), MaxBatch: 50}, 2)
	for _, pool := range []*snowflake.Pool{p, q} {
		for _, n := range []int{0, -1, pool.MaxBatch() + 1} {
			if ids, err := pool.NextN(context.Background(), n, nil); leafd.ErrorCode(err) != leafd.EInvalidCount || ids != nil {
				t.Fatalf("NextN(%d) of a pool of %d = %v, %v; want invalid_count", n, pool.Workers(), ids, err)
			}
		}
	}
	// After Close: Start refuses, requests get 503.
	q.Close()
	if err := q.Start(); !errors.Is(err, snowflake.ErrClosed) {
		t.Fatalf("Start after Close = %v, want ErrClosed", err)
	}
	_, err = q.Next(context.Background())
	wantCode(t, err, leafd.ESnowflakeUnavailable)
	_, err = q.NextN(context.Background(), 5, nil)
	wantCode(t, err, leafd.ESnowflakeUnavailable)
}

// A pool of 3 leases 3 distinct worker ids, each under an owner of its
// own: the pool's owner followed by /1, /2, /3 (the default owner too).
func TestPoolLeasesDistinctWorkers(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, db *leaseDB) {
		a := newPool(t, snowflake.Settings{Layout: burst, Leases: db.store(t), Owner: "srv-a"}, 3)
		waitLeased(t, a, 3)
		b := newPool(t, snowflake.Settings{Layout: burst, Leases: db.store(t)}, 3)
		waitLeased(t, b, 3)
		owners := db.workerOwners(t)
		if len(owners) != 6 {
			t.Fatalf("lease table %v, want 6 rows", owners)
		}
		var defaultStem string
		for i, p := range []*snowflake.Pool{a, b} {
			s := p.State()
			if len(s.WorkerIDs) != 3 || !slices.IsSorted(s.WorkerIDs) || len(slices.Compact(slices.Clone(s.WorkerIDs))) != 3 {
				t.Fatalf("pool %d holds %v: want 3 distinct worker ids, ascending", i, s.WorkerIDs)
			}
			if s.WorkerID != s.WorkerIDs[0] || s.Source != "lease" {
				t.Fatalf("pool %d: WorkerID %d (source %q), want the lowest of %v (lease)", i, s.WorkerID, s.Source, s.WorkerIDs)
			}
			seen := map[string]bool{}
			for _, w := range s.WorkerIDs {
				owner, _, ok := strings.Cut(owners[w], "#")
				stem, n, ok2 := cutLast(owner, "/")
				if !ok || !ok2 || (n != "1" && n != "2" && n != "3") {
					t.Fatalf("worker id %d has owner %q, want OWNER/{1,2,3}#claim", w, owners[w])
				}
				seen[n] = true
				switch {
				case i == 0 && stem != "srv-a":
					t.Fatalf("worker id %d has owner %q, want srv-a/N#claim", w, owners[w])
				case i == 1 && defaultStem == "":
					defaultStem = stem
				case i == 1 && stem != defaultStem:
					t.Fatalf("worker id %d has owner %q, want the pool's one default owner %q/N", w, owners[w], defaultStem)
				}
			}
			if len(seen) != 3 {
				t.Fatalf("pool %d: owners %v, want /1, /2 and /3", i, owners)
			}
			// Every ID is under one of the pool's worker ids.
			for range 5 {
				ids, err := p.NextN(context.Background(), 100, nil)
				if err != nil {
					t.Fatal(err)
				}
				checkBatch(t, ids)
				for _, id := range ids {
					if w := burst.Decode(id).WorkerID; !slices.Contains(s.WorkerIDs, w) {
						t.Fatalf("pool %d issued ID %d under worker id %d, not one of its %v", i, id, w, s.WorkerIDs)
					}
				}
			}
		}
		if defaultStem == "srv-a" || defaultStem == "" {
			t.Fatalf("the default owner is %q", defaultStem)
		}
		if sa, sb := a.State().WorkerIDs, b.State().WorkerIDs; slices.ContainsFunc(sa, func(w int64) bool { return slices.Contains(sb, w) }) {
			t.Fatalf("two pools share a worker id: %v and %v", sa, sb)
		}
	})
}

// cutLast is strings.Cut at the last sep.
func cutLast(s, sep string) (before, after string, found bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}

// frozenPool is a pool of 3 over the quad layout (4 IDs a millisecond) on
// a clock that does not move, with its 3 worker ids leased; ms is the
// clock's millisecond.
func frozenPool(t *testing.T, borrow time.Duration) (p *snowflake.Pool, ms int64) {
	t.Helper()
	clock := newStepClock(0)
	p = newPool(t, snowflake.Settings{Layout: quad, Leases: newMemLeases(), MaxBorrow: borrow,
		Now: clock.Now, Sleep: clock.Sleep}, 3)
	waitLeased(t, p, 3)
	return p, clock.Now().UnixMilli()
}

// A pool of 3 issues 3 × 2^sequence_bits IDs in one millisecond of a
// clock that does not move, all before it borrows any time; then it
// borrows up to max_borrow under every worker id, and no further: a
// request past that waits for the clock.
func TestPoolBeyondLayoutLimit(t *testing.T) {
	ctx := context.Background()
	t.Run("Next", func(t *testing.T) {
		p, ms := frozenPool(t, 5*time.Millisecond)
		seen := map[snowflake.ID]bool{}
		workers := map[int64]int{}
		for i := range 12 {
			id, err := p.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			d := quad.Decode(id)
			if seen[id] || d.UnixMs != ms {
				t.Fatalf("ID %d: %d at %+d ms (seen before: %v); want a new one in the clock's millisecond", i, id, d.UnixMs-ms, seen[id])
			}
			if s := p.State(); s.BorrowedMs != 0 {
				t.Fatalf("after %d IDs, %d ms borrowed: the 3 worker ids' millisecond was not used up", i+1, s.BorrowedMs)
			}
			seen[id] = true
			workers[d.WorkerID]++
		}
		if len(workers) != 3 {
			t.Fatalf("12 IDs under worker ids %v, want 4 under each of 3", workers)
		}
		for w, n := range workers {
			if n != 4 {
				t.Fatalf("12 IDs under worker ids %v: %d under %d, want 4 under each", workers, n, w)
			}
		}
		id, err := p.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if d := quad.Decode(id); seen[id] || d.UnixMs != ms+1 {
			t.Fatalf("13th ID at %+d ms, want the borrowed next millisecond", d.UnixMs-ms)
		}
		if s := p.State(); s.BorrowedMs != 1 {
			t.Fatalf("after the 13th ID, %d ms borrowed, want 1", s.BorrowedMs)
		}
	})
	t.Run("NextN", func(t *testing.T) {
		p, ms := frozenPool(t, 5*time.Millisecond)
		ids, err := p.NextN(ctx, 12, nil)
		if err != nil {
			t.Fatal(err)
		}
		checkBatch(t, ids)
		workers := map[int64]bool{}
		for _, id := range ids {
			if d := quad.Decode(id); d.UnixMs != ms {
				t.Fatalf("NextN(12) gave an ID at %+d ms, want all in the clock's millisecond", d.UnixMs-ms)
			} else {
				workers[d.WorkerID] = true
			}
		}
		if s := p.State(); len(workers) != 3 || s.BorrowedMs != 0 || s.Issued != 12 {
			t.Fatalf("NextN(12): worker ids %v, %d ms borrowed, %d issued; want 3, none, 12", workers, s.BorrowedMs, s.Issued)
		}
		// 5 ms borrowed under each worker id: 60 more, each batch
		// ascending, all above the first batch (they are later).
		all := slices.Clone(ids)
		for _, n := range []int{1, 7, 12, 40} {
			ids, err := p.NextN(ctx, n, nil)
			if err != nil {
				t.Fatalf("NextN(%d) after %d IDs: %v", n, len(all), err)
			}
			checkBatch(t, ids)
			all = append(all, ids...)
		}
		slices.Sort(all)
		if len(slices.Compact(all)) != 72 {
			t.Fatalf("72 IDs with duplicates")
		}
		for _, id := range all {
			if lead := quad.Decode(id).UnixMs - ms; lead < 0 || lead > 5 {
				t.Fatalf("ID %d ms ahead of the clock, max_borrow 5ms", lead)
			}
		}
		if s := p.State(); s.BorrowedMs != 15 || s.MaxLeadMs != 5 || s.Issued != 72 {
			t.Fatalf("State: %d ms borrowed, max lead %d, %d issued; want 15 (5 under each worker id), 5, 72", s.BorrowedMs, s.MaxLeadMs, s.Issued)
		}
		// Nothing more can be had before the clock moves, which it never
		// does: the request waits until its context ends, issuing nothing.
		wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		if ids, err := p.NextN(wctx, 1, nil); !errors.Is(err, context.DeadlineExceeded) || ids != nil {
			t.Fatalf("NextN past max_borrow on a frozen clock = %v, %v; want to wait until the deadline", ids, err)
		}
		if err := p.Ready(); err != nil {
			t.Fatalf("Ready with every worker id's time used up to max_borrow = %v, want nil: the clock merely has to move", err)
		}
		if s := p.State(); s.Issued != 72 {
			t.Fatalf("%d issued, want 72", s.Issued)
		}
	})
	t.Run("NoBorrow", func(t *testing.T) {
		p, ms := frozenPool(t, 0)
		ids, err := p.NextN(ctx, 12, nil)
		if err != nil {
			t.Fatal(err)
		}
		checkBatch(t, ids)
		if first, last := quad.Decode(ids[0]), quad.Decode(ids[11]); first.UnixMs != ms || last.UnixMs != ms {
			t.Fatalf("NextN(12) from %+d to %+d ms, want all in the clock's millisecond", first.UnixMs-ms, last.UnixMs-ms)
		}
		wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		if id, err := p.Next(wctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a 13th ID in the millisecond without borrowing = %d, %v; want a wait until the deadline", id, err)
		}
		if s := p.State(); s.BorrowedMs != 0 || s.Issued != 12 {
			t.Fatalf("State: %d ms borrowed, %d issued; want 0, 12", s.BorrowedMs, s.Issued)
		}
	})
}

// State sums the counters of the pool's generators, takes the largest
// last millisecond and lists every worker id held.
func TestPoolStateAggregates(t *testing.T) {
	ctx := context.Background()
	p, ms := frozenPool(t, 5*time.Millisecond)
	ids, err := p.NextN(ctx, 12, nil) // 4 under each worker id, at ms
	if err != nil {
		t.Fatal(err)
	}
	id, err := p.Next(ctx) // borrows ms+1 under one of them
	if err != nil {
		t.Fatal(err)
	}
	ids = append(ids, id)
	per := map[int64]int64{}
	for _, id := range ids {
		per[quad.Decode(id).WorkerID]++
	}
	held := slices.Sorted(maps.Keys(per))
	s := p.State()
	if s.Issued != 13 {
		t.Fatalf("Issued = %d, want 13, the sum of %v", s.Issued, per)
	}
	if s.LastMs != ms+1 {
		t.Fatalf("LastMs = %+d ms, want +1, the largest", s.LastMs-ms)
	}
	if !slices.Equal(s.WorkerIDs, held) || s.WorkerID != held[0] {
		t.Fatalf("WorkerIDs %v, WorkerID %d; want %v and its lowest", s.WorkerIDs, s.WorkerID, held)
	}
	if s.BorrowedMs != 1 || s.MaxLeadMs != 1 || s.LeadMs != 1 || s.MaxBorrow != 5*time.Millisecond || s.Source != "lease" {
		t.Fatalf("State = %+v; want 1 ms borrowed, lead 1, max_borrow 5ms, source lease", s)
	}
	if s.LeaseUntil.IsZero() || s.Err != nil || s.BackwardEvents != 0 {
		t.Fatalf("State = %+v; want a lease end, no error, no backward event", s)
	}
}

// Several goroutines take single IDs and batches of various sizes from one
// pool, and from a second pool (another server) over the same store:
// every batch is ascending and no ID is issued twice.
func TestPoolConcurrentUnique(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, db *leaseDB) {
		pools := []*snowflake.Pool{
			newPool(t, snowflake.Settings{Layout: burst, Leases: db.store(t), Owner: "srv-a", MaxBorrow: 10 * time.Millisecond}, 3),
			newPool(t, snowflake.Settings{Layout: burst, Leases: db.store(t), Owner: "srv-b"}, 3),
		}
		for _, p := range pools {
			waitLeased(t, p, 3)
		}
		const goroutines, ops = 4, 120
		sizes := []int{2, 17, 64, 300}
		var (
			wg      sync.WaitGroup
			results = make([][]snowflake.ID, len(pools)*goroutines)
		)
		for i := range results {
			p := pools[i%len(pools)]
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx := context.Background()
				var mine []snowflake.ID
				for op := range ops {
					if op%5 == 0 {
						id, err := p.Next(ctx)
						if err != nil {
							t.Error(err)
							return
						}
						mine = append(mine, id)
						continue
					}
					n := sizes[(op+i)%len(sizes)]
					ids, err := p.NextN(ctx, n, nil)
					if err != nil {
						t.Error(err)
						return
					}
					if len(ids) != n {
						t.Errorf("NextN(%d) gave %d IDs", n, len(ids))
						return
					}
					for j := 1; j < n; j++ {
						if ids[j] <= ids[j-1] {
							t.Errorf("NextN(%d): ID %d = %d after %d, not ascending", n, j, ids[j], ids[j-1])
							return
						}
					}
					mine = append(mine, ids...)
				}
				results[i] = mine
			}()
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		seen := map[snowflake.ID]int{}
		for i, ids := range results {
			held := pools[i%len(pools)].State().WorkerIDs
			for _, id := range ids {
				if j, ok := seen[id]; ok {
					t.Fatalf("ID %d issued twice (goroutines %d and %d)", id, j, i)
				}
				seen[id] = i
				if w := burst.Decode(id).WorkerID; !slices.Contains(held, w) {
					t.Fatalf("ID %d under worker id %d, not one of its pool's %v", id, w, held)
				}
			}
		}
		var issued int64
		for _, p := range pools {
			issued += p.State().Issued
		}
		if issued != int64(len(seen)) {
			t.Fatalf("the pools count %d IDs issued, the requests got %d", issued, len(seen))
		}
	})
}

// A generator of the pool that cannot lease a worker id (another server
// holds the others) stalls no request: the pool issues under the worker
// ids it holds, is ready, and takes the last one once it is freed.
func TestPoolServesWithoutAllLeases(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, db *leaseDB) {
		other := newPool(t, snowflake.Settings{Layout: fourWorkers, Leases: db.store(t), Owner: "other"}, 2)
		waitLeased(t, other, 2)
		leases := &faultyLeases{LeaseStore: db.store(t)}
		// A request that waited on the generator without a lease would
		// fail after WaitTimeout, well before the test's deadline.
		p := newPool(t, snowflake.Settings{Layout: fourWorkers, Leases: leases, Owner: "ours", WaitTimeout: 10 * time.Second}, 3)
		waitLeased(t, p, 2)
		for leases.claims.Load() < 3 {
			time.Sleep(5 * time.Millisecond) // the third has tried
		}
		if err := p.Ready(); err != nil {
			t.Fatalf("Ready with 2 of 3 worker ids leased = %v", err)
		}
		held := p.State().WorkerIDs
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		seen := map[snowflake.ID]bool{}
		check := func(ids ...snowflake.ID) {
			t.Helper()
			for _, id := range ids {
				if w := fourWorkers.Decode(id).WorkerID; seen[id] || !slices.Contains(held, w) {
					t.Fatalf("ID %d under worker id %d (seen before: %v), want a new one under %v", id, w, seen[id], held)
				}
				seen[id] = true
			}
		}
		for i := range 300 {
			id, err := p.Next(ctx)
			if err != nil {
				t.Fatalf("Next %d with 2 of 3 worker ids leased: %v", i, err)
			}
			check(id)
			if i%10 == 0 {
				ids, err := p.NextN(ctx, 1+i, nil)
				if err != nil {
					t.Fatalf("NextN(%d) with 2 of 3 worker ids leased: %v", 1+i, err)
				}
				checkBatch(t, ids)
				check(ids...)
			}
		}
		if got := p.State().WorkerIDs; !slices.Equal(got, held) {
			t.Fatalf("worker ids %v, then %v", held, got)
		}
		// The other server leaves: the third generator leases a worker id.
		other.Close()
		waitLeased(t, p, 3)
		held = p.State().WorkerIDs
		ids, err := p.NextN(ctx, 1000, nil)
		if err != nil {
			t.Fatal(err)
		}
		checkBatch(t, ids)
		check(ids...)
	})
}

// A pool that borrowed time is stopped and restarted over the same store,
// after a clean Close or a kill -9 (the store cut off, so that nothing is
// released, and the leases expired): the new pool takes the old worker ids
// again (the layout has only one more), and under each it issues nothing
// at or before the last millisecond the old pool issued under it.
func TestPoolBorrowRestartIssuesNothingTwice(t *testing.T) {
	for _, kill := range []bool{false, true} {
		t.Run(map[bool]string{false: "Close", true: "Kill"}[kill], func(t *testing.T) {
			forEachDatabase(t, func(t *testing.T, db *leaseDB) {
				const ttl, borrow = time.Second, 50 * time.Millisecond
				settings := func(l snowflake.LeaseStore, owner string) snowflake.Settings {
					return snowflake.Settings{Layout: fourWorkers, Leases: l, LeaseTTL: ttl, MaxBorrow: borrow, Owner: owner}
				}
				leases := &faultyLeases{LeaseStore: db.store(t)}
				old := newPool(t, settings(leases, "old"), 3)
				waitLeased(t, old, 3)
				issued := map[snowflake.ID]bool{}
				oldMax := map[int64]int64{}
				for range 4 {
					ids, err := old.NextN(context.Background(), 1000, nil)
					if err != nil {
						t.Fatal(err)
					}
					checkBatch(t, ids)
					for _, id := range ids {
						p := fourWorkers.Decode(id)
						issued[id] = true
						oldMax[p.WorkerID] = max(oldMax[p.WorkerID], p.UnixMs)
					}
				}
				top := slices.Max(slices.Collect(maps.Values(oldMax)))
				if s := old.State(); s.BorrowedMs == 0 || top <= time.Now().UnixMilli() || len(oldMax) != 3 {
					t.Fatalf("the burst borrowed %d ms and reached %d (clock %d) under %d worker ids: want it ahead, under 3",
						s.BorrowedMs, top, time.Now().UnixMilli(), len(oldMax))
				}
				if kill {
					leases.broken.Store(true)
				}
				old.Close()
				if kill {
					db.exec(t, "UPDATE leaf_worker SET lease_until_ms = 0 WHERE owner LIKE 'old/%'")
				}
				for w, ms := range oldMax {
					if rec := db.watermark(t, w); rec < ms {
						t.Fatalf("worker id %d: recorded watermark %d below the last millisecond issued, %d", w, rec, ms)
					}
				}
				p := newPool(t, settings(db.store(t), "new"), 3)
				waitLeased(t, p, 3)
				held := p.State().WorkerIDs
				reused := 0
				for _, w := range held {
					if _, ok := oldMax[w]; ok {
						reused++
					}
				}
				if reused < 2 {
					t.Fatalf("the new pool holds %v, the old one issued under %v: want 2 of them taken again", held, oldMax)
				}
				used := takeFresh(t, p, 4, 1000, issued, oldMax)
				if len(used) != 3 {
					t.Fatalf("the new pool issued under %v only, want all of %v", used, held)
				}
			})
		})
	}
}

// A clock that jumps back beyond max_backward after a burst: every
// generator of the pool switches to another worker id, the old ones are
// released with the last millisecond issued under them, and nothing is
// issued twice or under an old worker id.
func TestPoolRollbackSwitchesWorkers(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, db *leaseDB) {
		clock := &shiftClock{}
		p := newPool(t, snowflake.Settings{Layout: burst, Leases: db.store(t), LeaseTTL: 2 * time.Second,
			MaxBorrow: 50 * time.Millisecond, WaitTimeout: 10 * time.Second, Now: clock.Now, Sleep: clock.Sleep}, 3)
		waitLeased(t, p, 3)
		issued, lastMs := burstOf(t, p, 3, 1000)
		old := p.State().WorkerIDs
		if len(lastMs) != 3 {
			t.Fatalf("the burst used worker ids %v, want all 3 of %v", lastMs, old)
		}
		clock.Shift(-time.Minute)
		check := func(ids ...snowflake.ID) {
			t.Helper()
			for _, id := range ids {
				if w := burst.Decode(id).WorkerID; issued[id] || slices.Contains(old, w) {
					t.Fatalf("after a 1 min rollback: ID %d under worker id %d, issued before (%v) or under an old worker id %v", id, w, issued[id], old)
				}
				issued[id] = true
			}
		}
		ids, err := p.NextN(context.Background(), 1000, nil)
		if err != nil {
			t.Fatal(err)
		}
		checkBatch(t, ids)
		check(ids...)
		// Every generator switches (Ready asks each to).
		deadline := time.Now().Add(20 * time.Second)
		for {
			_ = p.Ready()
			now := p.State().WorkerIDs
			if len(now) == 3 && !slices.ContainsFunc(now, func(w int64) bool { return slices.Contains(old, w) }) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("20 s after the rollback the pool holds %v, old ones %v: want 3 others", now, old)
			}
			time.Sleep(5 * time.Millisecond)
		}
		for range 100 {
			id, err := p.Next(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			check(id)
		}
		ids, err = p.NextN(context.Background(), 1000, nil)
		if err != nil {
			t.Fatal(err)
		}
		checkBatch(t, ids)
		check(ids...)
		if s := p.State(); s.BackwardEvents < 1 {
			t.Fatalf("BackwardEvents = %d after a 1 min rollback", s.BackwardEvents)
		}
		for w, ms := range lastMs {
			deadline := time.Now().Add(10 * time.Second)
			for db.watermark(t, w) != ms {
				if time.Now().After(deadline) {
					t.Fatalf("old worker id %d: watermark %d, want the last millisecond issued under it, %d", w, db.watermark(t, w), ms)
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
	})
}

// The same with only one spare worker id: one generator switches to it and
// serves every request; the others wait for their clock, issuing nothing,
// and resume once it is back.
func TestPoolRollbackOneSpareWorker(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, db *leaseDB) {
		clock := &shiftClock{}
		p := newPool(t, snowflake.Settings{Layout: fourWorkers, Leases: db.store(t), LeaseTTL: 2 * time.Second,
			MaxBorrow: 50 * time.Millisecond, WaitTimeout: 10 * time.Second, Now: clock.Now, Sleep: clock.Sleep}, 3)
		waitLeased(t, p, 3)
		issued, lastMs := burstOf(t, p, 1, 1000)
		old := p.State().WorkerIDs
		if len(lastMs) != 3 {
			t.Fatalf("the burst used worker ids %v, want all 3 of %v", lastMs, old)
		}
		spare := int64(6) - old[0] - old[1] - old[2] // 0+1+2+3 less the three held
		clock.Shift(-time.Minute)
		// Let one generator switch before asking, so that every request
		// below is one the spare worker id serves.
		deadline := time.Now().Add(20 * time.Second)
		for !slices.Contains(p.State().WorkerIDs, spare) {
			_ = p.Ready()
			if time.Now().After(deadline) {
				t.Fatalf("20 s after the rollback the pool holds %v, want the spare worker id %d", p.State().WorkerIDs, spare)
			}
			time.Sleep(5 * time.Millisecond)
		}
		if err := p.Ready(); err != nil {
			t.Fatalf("Ready with one worker id switched = %v", err)
		}
		for i := range 50 {
			ids, err := p.NextN(context.Background(), 1+i, nil)
			if err != nil {
				t.Fatalf("NextN(%d) with one worker id switched: %v", 1+i, err)
			}
			checkBatch(t, ids)
			for _, id := range ids {
				if w := fourWorkers.Decode(id).WorkerID; issued[id] || w != spare {
					t.Fatalf("after the rollback: ID %d under worker id %d (issued before: %v), want only the spare %d", id, w, issued[id], spare)
				}
				issued[id] = true
			}
		}
		clock.Shift(time.Minute)
		takeFresh(t, p, 5, 500, issued, lastMs)
	})
}

// gatedLeases refuses every claim (no worker id free) except those of the
// pool's second generator (owner …/2), which wait until open is closed.
type gatedLeases struct {
	*memLeases
	open chan struct{}
}

func (g *gatedLeases) ClaimWorker(ctx context.Context, c snowflake.Claim) (snowflake.Lease, error) {
	if !strings.Contains(c.Owner, "/2#") {
		return snowflake.Lease{}, snowflake.ErrNoFreeWorker
	}
	select {
	case <-g.open:
	case <-ctx.Done():
		return snowflake.Lease{}, ctx.Err()
	}
	return g.memLeases.ClaimWorker(ctx, c)
}

// Requests that came while no generator could issue are served once any
// of the pool's generators can issue, not only the one each tried first.
func TestPoolWaitingRequestMovesToReadyWorker(t *testing.T) {
	leases := &gatedLeases{memLeases: newMemLeases(), open: make(chan struct{})}
	p := newPool(t, snowflake.Settings{Layout: burst, Leases: leases, Owner: "p", WaitTimeout: 5 * time.Second}, 3)
	errs := make(chan error, 3)
	for range 3 { // the three requests start at generators 1, 2 and 0
		go func() {
			_, err := p.Next(context.Background())
			errs <- err
		}()
	}
	time.Sleep(200 * time.Millisecond) // they wait (were they not, they would pass)
	close(leases.open)
	for range 3 {
		if err := <-errs; err != nil {
			t.Errorf("a request that waited while the pool had no worker id: %v (pool now holds %v)", err, p.State().WorkerIDs)
		}
	}
}

// A clock past the end of the layout fails a request at once, with that
// reason, as under one worker id: no worker id can help, so none is
// waited for.
func TestPoolClockOutsideLayoutFailsAtOnce(t *testing.T) {
	lay := snowflake.Layout{Epoch: time.Now().Add(-24 * time.Hour).UnixMilli(), TimeBits: 30, WorkerBits: 20, SequenceBits: 13}
	for _, k := range []int{1, 3} {
		clock := &shiftClock{}
		p := newPool(t, snowflake.Settings{Layout: lay, Leases: newMemLeases(), Owner: "r", Now: clock.Now, WaitTimeout: 5 * time.Second}, k)
		waitLeased(t, p, k)
		if _, err := p.Next(context.Background()); err != nil {
			t.Fatal(err)
		}
		clock.Shift(20 * 24 * time.Hour) // the layout's 30 bits of ms last 12.4 days
		for _, n := range []int{1, 100} {
			t0 := time.Now()
			_, err := p.NextN(context.Background(), n, nil)
			wantCode(t, err, leafd.ESnowflakeUnavailable)
			if took := time.Since(t0); took > 2*time.Second || !strings.Contains(err.Error(), "outside the ID layout") {
				t.Errorf("%d worker ids, NextN(%d) with the clock outside the layout: %v after %v, want that reason at once", k, n, err, took)
			}
		}
	}
}
