package sharded_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/internal/testkit/faultproxy"
	"github.com/leafd/leafd/internal/testkit/testdb"
	"github.com/leafd/leafd/segment"
	"github.com/leafd/leafd/store"
	"github.com/leafd/leafd/store/sharded"
)

// shardSlots is S in these tests.
const shardSlots = 8

// quiet drops the log of the stores under test.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// shardDSNs returns n fresh databases of driver (skipping the test when its
// server does not answer).
func shardDSNs(t *testing.T, driver string, n int) []string {
	t.Helper()
	var dsns []string
	for range n {
		dsns = append(dsns, testdb.DSN(t, driver))
	}
	return dsns
}

// openSharded opens a sharded store, as one server would, closed at the
// end of the test.
func openSharded(t *testing.T, driver string, dsns []string, slots int) *sharded.Store {
	t.Helper()
	s, err := sharded.Open(driver, dsns, sharded.Options{Slots: slots, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// forEachDriver runs f as a subtest for each engine of drivers:
// store.Drivers(), every engine, or store.FallbackDrivers(), the engines
// reached at network addresses, where a fault proxy can come between a
// store and its database.
func forEachDriver(t *testing.T, drivers []string, f func(t *testing.T, driver string)) {
	for _, driver := range drivers {
		t.Run(driver, func(t *testing.T) { f(t, driver) })
	}
}

// ids expands a strided range.
func ids(a segment.Allocation) []int64 {
	var out []int64
	for id := a.Start; id < a.End; id += a.Stride {
		out = append(out, id)
	}
	return out
}

// idLedger records every ID handed out and fails on the second sight of
// one.
type idLedger struct {
	mu   sync.Mutex
	seen map[int64]string
}

func (l *idLedger) add(t *testing.T, who string, a segment.Allocation) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen == nil {
		l.seen = map[int64]string{}
	}
	for _, id := range ids(a) {
		if by, ok := l.seen[id]; ok {
			t.Errorf("ID %d handed out twice: to %s and to %s", id, by, who)
			return
		}
		l.seen[id] = who
	}
}

// Three servers initialise sharding at once over three databases, one of
// which already holds a tag, and load ranges concurrently: no ID twice,
// every range strided by S within one slot, each server's IDs of a tag
// increasing, the old tag continued above its max_id.
func TestShardedNoDuplicates(t *testing.T) {
	forEachDriver(t, store.Drivers(), func(t *testing.T, driver string) {
		dsns := shardDSNs(t, driver, 3)
		ctx := context.Background()
		plain, err := store.Open(driver, dsns[0])
		if err != nil {
			t.Fatal(err)
		}
		defer plain.Close()
		if err := plain.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := plain.CreateTag(ctx, leafd.Tag{Name: "old", MaxID: 5000, Step: 10}); err != nil {
			t.Fatal(err)
		}

		servers := make([]*sharded.Store, 3)
		var wg sync.WaitGroup
		errs := make([]error, len(servers))
		for i := range servers {
			servers[i] = openSharded(t, driver, dsns, shardSlots)
			wg.Add(1)
			go func() {
				defer wg.Done()
				// As bootstrap does: again until it passes.
				for range 20 {
					if errs[i] = servers[i].Migrate(ctx); errs[i] == nil || errors.Is(errs[i], sharded.ErrMismatch) {
						return
					}
				}
			}()
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("server %d: Migrate: %v", i, err)
			}
		}
		if _, err := servers[1].CreateTag(ctx, leafd.Tag{Name: "t", Step: 7}); err != nil {
			t.Fatal(err)
		}

		// One ledger per tag: IDs are unique within a tag, and the two
		// tags' numbers meet once "t" passes 5000.
		ledgers := map[string]*idLedger{"t": {}, "old": {}}
		for i, s := range servers {
			for _, tag := range []string{"t", "old"} {
				ledger := ledgers[tag]
				wg.Add(1)
				go func() {
					defer wg.Done()
					last := int64(0)
					for n := range 40 {
						a, err := s.Allocate(ctx, tag, int64(5+n%7))
						if err != nil {
							t.Errorf("server %d: Allocate(%s): %v", i, tag, err)
							return
						}
						if a.Stride != shardSlots || (a.End-a.Start)%shardSlots != 0 || a.Count() != int64(5+n%7) {
							t.Errorf("server %d: range %+v is not %d IDs strided by %d", i, a, 5+n%7, shardSlots)
						}
						if a.Start <= last {
							t.Errorf("server %d: tag %s: range %+v starts at or below its last ID %d", i, tag, a, last)
						}
						if tag == "old" && a.Start < 5000 {
							t.Errorf("server %d: tag old: range %+v below its max_id before sharding, 5000", i, a)
						}
						last = a.Last()
						ledger.add(t, fmt.Sprintf("server %d", i), a)
					}
				}()
			}
		}
		wg.Wait()
		// The slots advanced evenly: every slot served.
		residues := map[int64]bool{}
		for id := range ledgers["t"].seen {
			residues[id%shardSlots] = true
		}
		if len(residues) != shardSlots {
			t.Errorf("only %d of %d slots served", len(residues), shardSlots)
		}
		if err := servers[0].Verify(ctx); err != nil {
			t.Fatalf("Verify after the load: %v", err)
		}
	})
}

// proxied returns dsn through a fault proxy of its own.
func proxied(t *testing.T, driver, dsn string) (string, *faultproxy.Proxy) {
	t.Helper()
	p := faultproxy.New(t, testdb.Addr(t, driver, dsn))
	return testdb.WithAddr(t, driver, dsn, p.Addr()), p
}

// One database of three unreachable: every load is served by the others
// at once, and the database is used again once it is back.
func TestShardedDatabaseDown(t *testing.T) {
	for _, driver := range store.FallbackDrivers() { // the engines a fault proxy can come between
		t.Run(driver, func(t *testing.T) {
			dsns := shardDSNs(t, driver, 3)
			var proxy *faultproxy.Proxy
			dsns[1], proxy = proxied(t, driver, dsns[1])
			s := openSharded(t, driver, dsns, shardSlots)
			ctx := context.Background()
			if err := s.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := s.CreateTag(ctx, leafd.Tag{Name: "t", Step: 10}); err != nil {
				t.Fatal(err)
			}
			onDB1 := map[int64]bool{} // slots of store.shards[1]
			for _, st := range s.Status(ctx) {
				if st.Index == 1 {
					for _, k := range st.Active {
						onDB1[k] = true
					}
				}
			}
			if len(onDB1) == 0 {
				t.Fatal("store.shards[1] has no slot")
			}
			var ledger idLedger
			proxy.Down()
			for n := range 60 {
				a, err := s.Allocate(ctx, "t", 10)
				if err != nil {
					t.Fatalf("load %d with one database down: %v", n, err)
				}
				if onDB1[a.Start%shardSlots] {
					t.Fatalf("load %d served by slot %d of the database that is down", n, a.Start%shardSlots)
				}
				ledger.add(t, "down", a)
			}
			proxy.Up()
			// A database that failed is passed over for a second, then
			// tried again.
			back := false
			for deadline := time.Now().Add(10 * time.Second); !back && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				a, err := s.Allocate(ctx, "t", 10)
				if err != nil {
					t.Fatalf("a load after the database came back: %v", err)
				}
				back = onDB1[a.Start%shardSlots]
				ledger.add(t, "up", a)
			}
			if !back {
				t.Fatal("the database that came back is not used again")
			}
		})
	}
}

// A slot moved while servers load ranges, with the move stopped after each
// of its steps and then run again: the slot is never active in two
// databases, no ID is handed out twice, and the move completes.
func TestShardedMoveSlot(t *testing.T) {
	forEachDriver(t, store.Drivers(), func(t *testing.T, driver string) {
		dsns := shardDSNs(t, driver, 3)
		ctx := context.Background()
		a, b := openSharded(t, driver, dsns, shardSlots), openSharded(t, driver, dsns, shardSlots)
		if err := a.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := a.CreateTag(ctx, leafd.Tag{Name: "t", Step: 10}); err != nil {
			t.Fatal(err)
		}
		var ledger idLedger
		load := func(s *sharded.Store, who string, n int) {
			for range n {
				al, err := s.Allocate(ctx, "t", 10)
				if err != nil {
					t.Fatalf("%s: Allocate: %v", who, err)
				}
				ledger.add(t, who, al)
			}
		}
		load(a, "a", 3*shardSlots)
		load(b, "b", 3*shardSlots)

		const slot = 0 // in store.shards[0] after initialisation
		crash := errors.New("crash injected")
		for _, step := range []sharded.MoveStep{sharded.MoveLeaving, sharded.MoveActivated, sharded.MoveGone} {
			to := 2
			if step == sharded.MoveActivated {
				to = 1
			}
			err := a.MoveSlot(ctx, slot, to, func(s sharded.MoveStep) error {
				if s == step {
					return crash
				}
				return nil
			})
			if !errors.Is(err, crash) {
				t.Fatalf("move stopped after step %d: %v", step, err)
			}
			if err := b.Verify(ctx); err != nil {
				t.Fatalf("after a move stopped at step %d: %v", step, err)
			}
			load(b, "b", 2*shardSlots) // the slot may be unavailable; the others serve
			if err := a.MoveSlot(ctx, slot, to, nil); err != nil {
				t.Fatalf("the move run again after step %d: %v", step, err)
			}
			active := 0
			for _, st := range a.Status(ctx) {
				for _, k := range st.Active {
					if k == slot {
						active++
						if st.Index != to {
							t.Fatalf("slot %d active in store.shards[%d], moved to %d", slot, st.Index, to)
						}
					}
				}
			}
			if active != 1 {
				t.Fatalf("slot %d active in %d databases", slot, active)
			}
			load(a, "a", 2*shardSlots)
			load(b, "b", 2*shardSlots)
		}
		served := false
		for id := range ledger.seen {
			served = served || id%shardSlots == slot
		}
		if !served {
			t.Fatal("the moved slot never served")
		}
	})
}

// A server whose store.shards does not match what the databases record
// refuses, saying what is wrong; so does one whose database was emptied.
func TestShardedMismatch(t *testing.T) {
	driver := store.DefaultDriver()
	dsns := shardDSNs(t, driver, 3)
	ctx := context.Background()
	if err := openSharded(t, driver, dsns, shardSlots).Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	other := shardDSNs(t, driver, 2)
	if err := openSharded(t, driver, other, shardSlots).Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		dsns  []string
		slots int
		want  string
	}{
		{"Order", []string{dsns[1], dsns[0], dsns[2]}, shardSlots, "keep store.shards in the order"},
		{"Slots", dsns, shardSlots * 2, "set store.shard_slots to 8"},
		{"Missing", dsns[:2], shardSlots, "a database is missing from the list"},
		{"OtherDeployment", []string{dsns[0], dsns[1], other[1]}, shardSlots, "belongs to another deployment"},
		{"Twice", []string{dsns[0], dsns[1], testdb.Respelled(t, driver, dsns[1])}, shardSlots, "are the same database"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := openSharded(t, driver, c.dsns, c.slots)
			for _, f := range []func(context.Context) error{s.Verify, s.Migrate} {
				err := f(ctx)
				if !errors.Is(err, sharded.ErrMismatch) || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("%v; want a mismatch saying %q", err, c.want)
				}
			}
		})
	}
	t.Run("Emptied", func(t *testing.T) {
		fresh := shardDSNs(t, driver, 1)
		s := openSharded(t, driver, []string{dsns[0], fresh[0], dsns[2]}, shardSlots)
		if err := s.Migrate(ctx); !errors.Is(err, sharded.ErrMismatch) || !strings.Contains(err.Error(), "not the database that was there") {
			t.Fatalf("Migrate with an emptied database: %v", err)
		}
	})
}

// Sharding grows from two databases to three: the third gets every tag
// and no slot until one is moved to it, and then serves.
func TestShardedExtend(t *testing.T) {
	driver := store.DefaultDriver()
	dsns := shardDSNs(t, driver, 3)
	ctx := context.Background()
	two := openSharded(t, driver, dsns[:2], shardSlots)
	if err := two.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := two.CreateTag(ctx, leafd.Tag{Name: "t", Step: 10}); err != nil {
		t.Fatal(err)
	}
	var ledger idLedger
	for range 10 {
		a, err := two.Allocate(ctx, "t", 10)
		if err != nil {
			t.Fatal(err)
		}
		ledger.add(t, "two", a)
	}
	three := openSharded(t, driver, dsns, shardSlots)
	if err := three.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if st := three.Status(ctx)[2]; len(st.Active) != 0 || st.Count != 3 || !st.Initialised {
		t.Fatalf("the added database: %+v", st)
	}
	if err := three.MoveSlot(ctx, 1, 2, nil); err != nil {
		t.Fatal(err)
	}
	if st := three.Status(ctx)[2]; len(st.Active) != 1 || st.Active[0] != 1 {
		t.Fatalf("after the move: %+v", st)
	}
	for range 3 * shardSlots {
		a, err := three.Allocate(ctx, "t", 10)
		if err != nil {
			t.Fatal(err)
		}
		ledger.add(t, "three", a)
	}
}

// leafd shards move with a store.shards that is not the deployment's is
// refused before anything moves: moved into a database of another
// deployment, or one that the deployment's servers do not read, the slot
// would be lost, or served beside that deployment's own.
func TestShardedMoveSlotMismatch(t *testing.T) {
	driver := store.DefaultDriver()
	dsns := shardDSNs(t, driver, 2)
	other := shardDSNs(t, driver, 2)
	ctx := context.Background()
	if err := openSharded(t, driver, dsns, shardSlots).Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := openSharded(t, driver, other, shardSlots).Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	// A database migrated alone: the schema, no record of any deployment.
	fresh := shardDSNs(t, driver, 1)[0]
	p, err := store.Open(driver, fresh)
	if err != nil {
		t.Fatal(err)
	}
	err = p.Migrate(ctx)
	p.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		dsns []string
		want string
	}{
		{"OtherDeployment", []string{dsns[0], dsns[1], other[0]}, "belongs to another deployment"},
		{"Replaced", []string{dsns[0], fresh}, "not the database that was there"},
		{"NoRecord", []string{dsns[0], dsns[1], fresh}, "has no record of the deployment"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := openSharded(t, driver, c.dsns, shardSlots)
			err := s.MoveSlot(ctx, 0, len(c.dsns)-1, nil)
			if !errors.Is(err, sharded.ErrMismatch) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("%v; want a mismatch saying %q", err, c.want)
			}
			if st := openSharded(t, driver, dsns, shardSlots).Status(ctx)[0]; !slices.Contains(st.Active, 0) {
				t.Fatalf("slot 0 left store.shards[0]: %+v", st)
			}
		})
	}
}

// A database of store.shards emptied while servers run, and initialised
// again by another deployment whose tag has the same name: a server that
// had checked it before loads no range from it (before: it loaded the
// slot's IDs again from the other deployment's counters).
func TestShardedDatabaseReplacedWhileServing(t *testing.T) {
	driver := store.DefaultDriver()
	dsns := shardDSNs(t, driver, 2)
	ctx := context.Background()
	one := openSharded(t, driver, dsns, shardSlots)
	if err := one.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := one.CreateTag(ctx, leafd.Tag{Name: "t", Step: 10}); err != nil {
		t.Fatal(err)
	}
	two := openSharded(t, driver, dsns, shardSlots)
	var ledger idLedger
	a, err := two.Allocate(ctx, "t", 10)
	if err != nil {
		t.Fatal(err)
	}
	ledger.add(t, "two", a)
	for range 4 * shardSlots {
		a, err := one.Allocate(ctx, "t", 10)
		if err != nil {
			t.Fatal(err)
		}
		ledger.add(t, "one", a)
	}

	// Empty store.shards[1] in place, as DROP DATABASE and CREATE DATABASE
	// would, and let another deployment initialise it.
	db := testdb.SQL(t, driver, dsns[1])
	for _, n := range testdb.Tables(t, driver, dsns[1]) {
		if n == "goose_db_version" {
			continue
		}
		if _, err := db.ExecContext(ctx, "DELETE FROM "+n); err != nil {
			t.Fatal(err)
		}
	}
	other := openSharded(t, driver, []string{shardDSNs(t, driver, 1)[0], dsns[1]}, shardSlots)
	if err := other.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	// Its counters start above 100: below what one handed out from slot 1.
	if _, err := other.CreateTag(ctx, leafd.Tag{Name: "t", Step: 10, MaxID: 100}); err != nil {
		t.Fatal(err)
	}

	for range 4 * shardSlots {
		a, err := two.Allocate(ctx, "t", 10)
		if err != nil {
			t.Fatal(err)
		}
		ledger.add(t, "two", a)
		if a.Start%shardSlots%2 == 1 {
			t.Fatalf("a range of slot %d, which lived in the replaced database: %+v", a.Start%shardSlots, a)
		}
	}
}

// A store of one database refuses a database of store.shards.
func TestCheckNotShard(t *testing.T) {
	driver := store.DefaultDriver()
	dsns := shardDSNs(t, driver, 2)
	ctx := context.Background()
	plain, err := store.Open(driver, dsns[1])
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if err := plain.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sharded.CheckNotShard(ctx, plain); err != nil {
		t.Fatalf("a database that is no shard: %v", err)
	}
	if err := openSharded(t, driver, dsns, shardSlots).Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sharded.CheckNotShard(ctx, plain); !errors.Is(err, sharded.ErrMismatch) || !strings.Contains(err.Error(), "store.shards[1]") {
		t.Fatalf("a database of store.shards served alone: %v", err)
	}
	// A store it cannot look into (here one wrapped, as a decorator would)
	// fails closed: it may be that shard.
	wrapped := struct{ store.Store }{plain}
	if err := sharded.CheckNotShard(ctx, wrapped); err == nil || !strings.Contains(err.Error(), "cannot tell") {
		t.Fatalf("a wrapped store of a shard passed: %v", err)
	}
}

// An opaque tag of the database sharding starts from keeps its format in
// every database, so that no database serves its counters unmapped.
func TestShardedKeepsOpaqueFormat(t *testing.T) {
	driver := store.DefaultDriver()
	dsns := shardDSNs(t, driver, 2)
	ctx := context.Background()
	plain, err := store.Open(driver, dsns[0])
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if err := plain.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := plain.CreateTag(ctx, leafd.Tag{Name: "user", Step: 10, Format: "opaque", Digits: 9, KeyFingerprint: "f00d"}); err != nil {
		t.Fatal(err)
	}
	if err := openSharded(t, driver, dsns, shardSlots).Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	second, err := store.Open(driver, dsns[1])
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	got, err := second.LookupTag(ctx, "user")
	if err != nil || got.Format != "opaque" || got.Digits != 9 || got.KeyFingerprint != "f00d" {
		t.Fatalf("the tag in the second database: %+v, %v", got, err)
	}
}

// initStepper drives one server's initialisation a database at a time:
// its Migrate runs in a goroutine that stops before each database's step
// until the test lets it take it.
type initStepper struct {
	at   chan int      // the database the initialisation is about to write
	next chan struct{} // let it write
	done chan error    // Migrate's result
	err  error
	over bool
}

func startStepped(s *sharded.Store) *initStepper {
	st := &initStepper{at: make(chan int), next: make(chan struct{}), done: make(chan error, 1)}
	sharded.SetBeforeClaim(s, func(int) { st.at <- 0; <-st.next })
	go func() { st.done <- s.Migrate(context.Background()) }()
	return st
}

// arrive waits until the initialisation stands before its next step, or
// finished.
func (st *initStepper) arrive(t *testing.T) {
	t.Helper()
	select {
	case <-st.at:
	case st.err = <-st.done:
		st.over = true
	case <-time.After(time.Minute):
		t.Fatal("an initialisation neither reached its next step nor finished")
	}
}

// step lets the initialisation, standing before a step, take it and waits
// until it stands before the next one; it reports whether it is still
// running.
func (st *initStepper) step(t *testing.T) bool {
	t.Helper()
	if st.over {
		return false
	}
	st.next <- struct{}{}
	st.arrive(t)
	return !st.over
}

func (st *initStepper) finish(t *testing.T) error {
	for st.step(t) {
	}
	return st.err
}

// Two servers whose store.shards differ initialise sharding at the same
// time over databases they share, their steps interleaved every way: one
// store.shards takes one step, or a few, then the other runs, in turn, or
// all at once. Exactly one succeeds; the other is refused with a mismatch,
// and stays refused, so that no two databases ever hold the same slots.
func TestShardedInitialiseDifferentLists(t *testing.T) {
	forEachDriver(t, store.Drivers(), func(t *testing.T, driver string) {
		for _, c := range []struct {
			pre   []int // initialised before, when not nil
			lists [2][]int
		}{
			{nil, [2][]int{{0, 1}, {0, 2}}}, // one database shared, another each
			{nil, [2][]int{{0, 1}, {1, 0}}}, // the same databases in another order
			{nil, [2][]int{{0, 1, 2}, {0, 1}}},
			{[]int{0, 1}, [2][]int{{0, 1, 2}, {0, 1, 3}}}, // two servers growing one deployment differently
		} {
			lists := c.lists
			// Interleavings: a takes k steps, then b runs to the end, then
			// a; b first likewise; and the two in turn, step by step.
			type order struct {
				name  string
				first int // 0: a leads, 1: b leads
				k     int // steps of the leader before the other runs; -1: in turn
			}
			var orders []order
			for first := range 2 {
				for k := range len(lists[first]) + 1 {
					orders = append(orders, order{fmt.Sprintf("%c%dsteps", "ab"[first], k), first, k})
				}
				orders = append(orders, order{fmt.Sprintf("inTurn%c", "ab"[first]), first, -1})
			}
			databases := 1 + slices.Max(slices.Concat(c.pre, lists[0], lists[1]))
			for _, o := range orders {
				t.Run(fmt.Sprintf("%v%v%v/%s", c.pre, lists[0], lists[1], o.name), func(t *testing.T) {
					t.Parallel() // each with databases of its own
					dsns := shardDSNs(t, driver, databases)
					pick := func(l []int) []string {
						var out []string
						for _, i := range l {
							out = append(out, dsns[i])
						}
						return out
					}
					if c.pre != nil {
						if err := openSharded(t, driver, pick(c.pre), shardSlots).Migrate(context.Background()); err != nil {
							t.Fatal(err)
						}
					}
					servers := [2]*sharded.Store{openSharded(t, driver, pick(lists[0]), shardSlots), openSharded(t, driver, pick(lists[1]), shardSlots)}
					// Both past their checks of the databases, before their
					// first write: at the same time.
					lead, other := startStepped(servers[o.first]), startStepped(servers[1-o.first])
					lead.arrive(t)
					other.arrive(t)
					if o.k < 0 {
						for a, b := true, true; a || b; {
							a, b = lead.step(t), other.step(t)
						}
					} else {
						for range o.k {
							lead.step(t)
						}
						other.finish(t)
					}
					errs := [2]error{}
					errs[o.first], errs[1-o.first] = lead.finish(t), other.finish(t)

					ok := 0
					for i, err := range errs {
						switch {
						case err == nil:
							ok++
						case !errors.Is(err, sharded.ErrMismatch):
							t.Fatalf("server %d: %v; want a mismatch or success", i, err)
						}
					}
					if ok != 1 {
						t.Fatalf("%d of the two initialisations succeeded (%v); want exactly one", ok, errs)
					}
					// Across restarts too: both check again, the winner first.
					// The loser may succeed only by growing the winner's
					// deployment.
					winner := slices.IndexFunc(errs[:], func(err error) bool { return err == nil })
					for _, i := range []int{winner, 1 - winner} {
						again := openSharded(t, driver, pick(lists[i]), shardSlots)
						for _, f := range []func(context.Context) error{again.Verify, again.Migrate} {
							err := f(context.Background())
							grows := i != winner && len(lists[i]) > len(lists[winner]) && slices.Equal(lists[i][:len(lists[winner])], lists[winner])
							if (err == nil) != (i == winner) && (err != nil || !grows) {
								t.Fatalf("server %d, which initialised with %v, checked again: %v", i, errs[i], err)
							}
						}
					}
				})
			}
		}
	})
}

// Two servers with different lists initialise at once: the loser can
// leave its record in a database the winner does not use, which every
// deployment then refuses. The runbook of docs/shards.md ("A database left
// by a refused initialisation") clears it, and the database then joins
// the winner's deployment.
func TestShardedRefusedInitialisationCleared(t *testing.T) {
	driver := store.DefaultDriver()
	dsns := shardDSNs(t, driver, 3)
	ctx := context.Background()
	exec := func(dsn string, queries ...string) {
		t.Helper()
		db := testdb.SQL(t, driver, dsn)
		for _, q := range queries {
			if _, err := db.ExecContext(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
	}
	// Ids that make the loser write its own database first.
	for i, uid := range []string{"b0", "b1", "a2"} {
		p, err := store.Open(driver, dsns[i])
		if err != nil {
			t.Fatal(err)
		}
		err = p.Migrate(ctx)
		p.Close()
		if err != nil {
			t.Fatal(err)
		}
		exec(dsns[i], fmt.Sprintf("INSERT INTO leafd_database (id, uid) VALUES (1, '%s')", uid))
	}
	winner := startStepped(openSharded(t, driver, []string{dsns[0], dsns[1]}, shardSlots))
	loser := startStepped(openSharded(t, driver, []string{dsns[0], dsns[2]}, shardSlots))
	winner.arrive(t)
	loser.arrive(t)
	if err := winner.finish(t); err != nil {
		t.Fatal(err)
	}
	if err := loser.finish(t); !errors.Is(err, sharded.ErrMismatch) {
		t.Fatalf("the second initialisation: %v, want a mismatch", err)
	}
	grown := []string{dsns[0], dsns[1], dsns[2]}
	if err := openSharded(t, driver, grown, shardSlots).Migrate(ctx); !errors.Is(err, sharded.ErrMismatch) {
		t.Fatalf("growing the deployment by the database the loser wrote: %v, want a mismatch", err)
	}
	// The runbook's checks: its id is not in the deployment's list, and
	// no range was ever loaded from it.
	read := func(dsn, query string) string {
		t.Helper()
		db := testdb.SQL(t, driver, dsn)
		var v string
		if err := db.QueryRowContext(ctx, query).Scan(&v); err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		return v
	}
	if uid, members := read(dsns[2], "SELECT uid FROM leafd_database"), read(dsns[0], "SELECT members FROM leafd_shard"); slices.Contains(strings.Split(members, ","), uid) {
		t.Fatalf("the deployment lists the loser's database (%s in %s)", uid, members)
	}
	if n := read(dsns[2], "SELECT COUNT(*) FROM leafd_slot_alloc"); n != "0" {
		t.Fatalf("%s counters in the loser's database", n)
	}
	exec(dsns[2], "DELETE FROM leafd_slot", "DELETE FROM leafd_shard")

	s := openSharded(t, driver, grown, shardSlots)
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("growing the deployment by the cleared database: %v", err)
	}
	if _, err := s.CreateTag(ctx, leafd.Tag{Name: "t", Step: 10}); err != nil {
		t.Fatal(err)
	}
	if err := s.MoveSlot(ctx, 0, 2, nil); err != nil {
		t.Fatal(err)
	}
	var ledger idLedger
	served := false
	for range 2 * shardSlots {
		a, err := s.Allocate(ctx, "t", 10)
		if err != nil {
			t.Fatal(err)
		}
		ledger.add(t, "grown", a)
		served = served || a.Start%shardSlots == 0
	}
	if !served {
		t.Fatal("slot 0, moved to the cleared database, served nothing")
	}
}

// One database of three hangs (its connections stall: what a database
// stopped with SIGSTOP, or a network that drops packets, looks like):
// every load is served by the others within the wait a request allows,
// for as long as it hangs, the store still answers Ping, and the database
// is used again once it answers.
func TestShardedDatabaseHung(t *testing.T) {
	t.Parallel() // with the other tests that wait for a database that hangs
	const (
		waitTimeout = time.Second // segment.wait_timeout of the server
		refresh     = time.Second // of the slot placement, 10 s in a server
	)
	for _, driver := range store.FallbackDrivers() { // the engines a fault proxy can come between
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			dsns := shardDSNs(t, driver, 3)
			var proxy *faultproxy.Proxy
			dsns[0], proxy = proxied(t, driver, dsns[0]) // the first, which every other loop asks first
			s, err := sharded.Open(driver, dsns, sharded.Options{Slots: shardSlots, Logger: quiet, AttemptTimeout: waitTimeout / 2})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			sharded.SetOwnersRefresh(s, refresh)
			ctx := context.Background()
			if err := s.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := s.CreateTag(ctx, leafd.Tag{Name: "t", Step: 10}); err != nil {
				t.Fatal(err)
			}
			onDB0 := map[int64]bool{} // slots of store.shards[0]
			for _, st := range s.Status(ctx) {
				if st.Index == 0 {
					for _, k := range st.Active {
						onDB0[k] = true
					}
				}
			}
			var ledger idLedger
			// load is one range load as the segment allocator makes it:
			// with its load timeout, here 10 s; it must land within the
			// request's wait.
			load := func(what string) segment.Allocation {
				t.Helper()
				lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				start := time.Now()
				a, err := s.Allocate(lctx, "t", 10)
				if took := time.Since(start); err != nil || took > waitTimeout {
					t.Fatalf("a load %s: %v after %v; want a range within %v", what, err, took, waitTimeout)
				}
				ledger.add(t, what, a)
				return a
			}
			for range 2 * shardSlots {
				load("before")
			}
			proxy.Stall()
			// Longer than a second's pass-over and the next two
			// seconds', and past the slot placement's refresh, so that
			// the database is tried again while it still hangs.
			for deadline := time.Now().Add(3*refresh + time.Second/2); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				if a := load("while store.shards[0] hangs"); onDB0[a.Start%shardSlots] {
					t.Fatalf("served by slot %d of the database that hangs", a.Start%shardSlots)
				}
				// Readiness asks the store with a second's timeout.
				pctx, cancel := context.WithTimeout(ctx, time.Second)
				err := s.Ping(pctx)
				cancel()
				if err != nil {
					t.Fatalf("Ping while store.shards[0] hangs: %v", err)
				}
			}
			proxy.Up()
			back := false
			for deadline := time.Now().Add(30 * time.Second); !back && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				back = onDB0[load("after").Start%shardSlots]
			}
			if !back {
				t.Fatal("the database that answers again is not used again")
			}
		})
	}
}

// While one database of three hangs, reading tags costs no more than when
// it is dead: a tag the server has not read yet is looked up and its first
// range loaded within the wait a request allows, the tag list is read
// within an attempt (and at once while the database is passed over), and
// creating a tag is refused within an attempt, not after the caller's
// whole time: 503, since it needs every database, or 409 when another
// database has it.
func TestShardedTagReadsDatabaseHung(t *testing.T) {
	const (
		waitTimeout = time.Second // segment.wait_timeout of the server
		attempt     = waitTimeout / 2
		slack       = 300 * time.Millisecond // scheduling on a busy machine
	)
	// With the other tests that wait for a database that hangs.
	t.Parallel()

	for _, driver := range store.FallbackDrivers() { // the engines a fault proxy can come between
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			dsns := shardDSNs(t, driver, 3)
			var proxy *faultproxy.Proxy
			dsns[0], proxy = proxied(t, driver, dsns[0])
			s, err := sharded.Open(driver, dsns, sharded.Options{Slots: shardSlots, Logger: quiet, AttemptTimeout: attempt})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			if err := s.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			const tags = 20
			for i := range tags {
				if _, err := s.CreateTag(ctx, leafd.Tag{Name: fmt.Sprintf("t%d", i), Step: 10}); err != nil {
					t.Fatal(err)
				}
			}
			// timed runs f with the caller's time of a server (10 s, as
			// a range load has) and returns how long it took.
			timed := func(f func(ctx context.Context)) time.Duration {
				tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				start := time.Now()
				f(tctx)
				return time.Since(start)
			}
			proxy.Stall()
			defer proxy.Up()

			// The list: the first read gives up on the database that
			// hangs after an attempt; the next ones pass it over.
			for i := range 3 {
				var list []leafd.Tag
				took := timed(func(ctx context.Context) { list, err = s.ListTags(ctx) })
				limit := attempt + slack
				if i > 0 {
					limit = slack
				}
				if err != nil || len(list) != tags || took > limit {
					t.Errorf("ListTags %d while store.shards[0] hangs: %d tags, %v after %v; want %d within %v", i, len(list), err, took, tags, limit)
					break
				}
			}
			// Creating a tag needs every database: refused at once.
			for i := range 2 {
				took := timed(func(ctx context.Context) { _, err = s.CreateTag(ctx, leafd.Tag{Name: "new", Step: 10}) })
				if leafd.ErrorCode(err) != leafd.EStoreUnavailable || !strings.Contains(leafd.ErrorMessage(err), "store.shards[0] does not answer") || took > attempt+slack {
					t.Errorf("CreateTag %d while store.shards[0] hangs: %v after %v; want store_unavailable naming it within %v", i, err, took, attempt+slack)
					break
				}
			}
			// A tag the others have exists, whether or not it answers.
			took := timed(func(ctx context.Context) { _, err = s.CreateTag(ctx, leafd.Tag{Name: "t0", Step: 10}) })
			if leafd.ErrorCode(err) != leafd.ETagExists || took > attempt+slack {
				t.Errorf("CreateTag of an existing tag while store.shards[0] hangs: %v after %v; want tag_exists within %v", err, took, attempt+slack)
			}
			// Each tag looked up and loaded for the first time, past
			// pass-overs that end while the database still hangs.
			for i := range tags {
				name := fmt.Sprintf("t%d", i)
				took := timed(func(ctx context.Context) {
					var tag leafd.Tag
					if tag, err = s.LookupTag(ctx, name); err == nil && tag.Name == name {
						_, err = s.Allocate(ctx, name, 10)
					}
				})
				if err != nil || took > waitTimeout {
					t.Fatalf("the first request of %s while store.shards[0] hangs: %v after %v; want a range within %v", name, err, took, waitTimeout)
				}
				time.Sleep(150 * time.Millisecond)
			}
			proxy.Up()
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
				if _, err = s.CreateTag(ctx, leafd.Tag{Name: "new", Step: 10}); err == nil || time.Now().After(deadline) {
					break
				}
			}
			if err != nil {
				t.Fatalf("CreateTag once store.shards[0] answers again: %v", err)
			}
		})
	}
}

// A deployment initialised before the databases had ids and member lists
// gets them at the next Migrate with every database answering, and is
// checked against them from then on.
func TestShardedMembersFilledIn(t *testing.T) {
	driver := store.DefaultDriver()
	dsns := shardDSNs(t, driver, 3)
	ctx := context.Background()
	if err := openSharded(t, driver, dsns, shardSlots).Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	exec := func(dsn, query string) {
		t.Helper()
		db := testdb.SQL(t, driver, dsn)
		if _, err := db.ExecContext(ctx, query); err != nil {
			t.Fatal(err)
		}
	}
	for _, dsn := range dsns { // as an older leafd left them
		exec(dsn, "UPDATE leafd_shard SET members = NULL")
		exec(dsn, "DELETE FROM leafd_database")
	}
	s := openSharded(t, driver, dsns, shardSlots)
	if err := s.Verify(ctx); err != nil {
		t.Fatalf("Verify before the lists are filled in: %v", err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	for _, dsn := range dsns {
		db := testdb.SQL(t, driver, dsn)
		var n int
		err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM leafd_shard WHERE members LIKE '%,%,%'").Scan(&n)
		if err != nil || n != 1 {
			t.Fatalf("%s: %d records with a list of three databases (%v)", dsn, n, err)
		}
	}
	// Checked from now on: the second database emptied and used again
	// under its own place has another id.
	exec(dsns[1], "DELETE FROM leafd_database")
	exec(dsns[1], "INSERT INTO leafd_database (id, uid) VALUES (1, 'another')")
	err := openSharded(t, driver, dsns, shardSlots).Verify(ctx)
	if !errors.Is(err, sharded.ErrMismatch) || !strings.Contains(err.Error(), "store.shards[1] is not the database the deployment recorded") {
		t.Fatalf("Verify with another database at place 1: %v", err)
	}
}

// The databases of a sharded store agree on a tag's definition, or the tag
// is refused. A tag is not created while a database does not answer (it
// would lack the tag, and could later be given another definition): 503,
// nothing written. A tag that any database has is 409 tag_exists, store.shards[0]
// lacking it or not. A tag that databases define differently (written by
// SQL or by hand) is looked up as tag_conflict, left out of the list, and
// never served in either definition.
func TestShardedTagDefinitionsAgree(t *testing.T) {
	for _, driver := range store.FallbackDrivers() { // the engines a fault proxy can come between
		t.Run(driver, func(t *testing.T) {
			dsns := shardDSNs(t, driver, 2)
			var proxy *faultproxy.Proxy
			direct := dsns[0]
			dsns[0], proxy = proxied(t, driver, dsns[0])
			s := openSharded(t, driver, dsns, shardSlots)
			ctx := context.Background()
			if err := s.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			plain := make([]store.Store, 2)
			for i, dsn := range []string{direct, dsns[1]} {
				p, err := store.Open(driver, dsn)
				if err != nil {
					t.Fatal(err)
				}
				defer p.Close()
				plain[i] = p
			}
			opaque := leafd.Tag{Name: "user", Step: 10, Format: "opaque", Digits: 9, KeyFingerprint: "f00d"}

			proxy.Down()
			_, err := s.CreateTag(ctx, opaque)
			if leafd.ErrorCode(err) != leafd.EStoreUnavailable || !strings.Contains(leafd.ErrorMessage(err), "store.shards[0] does not answer") {
				t.Fatalf("CreateTag with store.shards[0] down: %v, want store_unavailable naming it", err)
			}
			proxy.Up()
			if _, err := plain[1].LookupTag(ctx, "user"); leafd.ErrorCode(err) != leafd.EUnknownTag {
				t.Fatalf("store.shards[1] after a refused creation: %v, want unknown_tag (nothing written)", err)
			}

			// Created in every database once store.shards[0] answers (a
			// connection the proxy cut fails a try first); again, in any
			// format, it exists.
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				_, err = s.CreateTag(ctx, opaque)
				if leafd.ErrorCode(err) != leafd.EStoreUnavailable || time.Now().After(deadline) {
					break
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			_, err = s.CreateTag(ctx, leafd.Tag{Name: "user", Step: 10})
			if leafd.ErrorCode(err) != leafd.ETagExists {
				t.Fatalf("CreateTag of an existing tag as sequential: %v, want tag_exists", err)
			}
			// A tag only store.shards[1] has (store.shards[0] missed it).
			if _, err := plain[1].CreateTag(ctx, opaque); err == nil {
				t.Fatal("the engine's CreateTag of a tag it has succeeded")
			}
			if _, err := plain[1].CreateTag(ctx, leafd.Tag{Name: "late", Step: 10, Format: "opaque", KeyFingerprint: "f00d"}); err != nil {
				t.Fatal(err)
			}
			_, err = s.CreateTag(ctx, leafd.Tag{Name: "late", Step: 10})
			if leafd.ErrorCode(err) != leafd.ETagExists {
				t.Fatalf("CreateTag of a tag store.shards[1] alone has: %v, want tag_exists", err)
			}
			if _, err := plain[0].LookupTag(ctx, "late"); leafd.ErrorCode(err) != leafd.EUnknownTag {
				t.Fatalf("store.shards[0] after the refused creation: %v, want unknown_tag (no second definition)", err)
			}

			// Two definitions of one tag, written past the sharded store.
			if _, err := plain[0].CreateTag(ctx, leafd.Tag{Name: "split", Step: 10}); err != nil {
				t.Fatal(err)
			}
			if _, err := plain[1].CreateTag(ctx, leafd.Tag{Name: "split", Step: 10, Format: "opaque", KeyFingerprint: "f00d"}); err != nil {
				t.Fatal(err)
			}
			_, err = s.LookupTag(ctx, "split")
			if leafd.ErrorCode(err) != leafd.ETagConflict || !strings.Contains(leafd.ErrorMessage(err), "store.shards[1]: an opaque tag below 2^53") {
				t.Fatalf("LookupTag of a tag defined differently: %v, want tag_conflict naming both", err)
			}
			tags, err := s.ListTags(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tag := range tags {
				names = append(names, tag.Name)
			}
			if strings.Join(names, " ") != "late user" {
				t.Fatalf("ListTags = %v, want late and user, not split", names)
			}
			if got, err := s.LookupTag(ctx, "user"); err != nil || got.Format != "opaque" {
				t.Fatalf("LookupTag of a tag that agrees: %+v, %v", got, err)
			}
		})
	}
}

// rawExec runs queries on one database of driver, past the store.
func rawExec(t *testing.T, driver, dsn string, queries ...string) {
	t.Helper()
	db := testdb.SQL(t, driver, dsn)
	defer db.Close()
	for _, q := range queries {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// A tag's high-water mark holds on a sharded store as on one database: a
// tag whose max_id was lowered by SQL (or that was deleted and inserted
// again the Leaf way) before the database grew into store.shards, or after,
// before a slot's first range of it (also one deleted before and created
// again after), continues above every ID it issued.
func TestShardedKeepsHighWaterMark(t *testing.T) {
	forEachDriver(t, store.Drivers(), func(t *testing.T, driver string) {
		dsns := shardDSNs(t, driver, 2)
		ctx := context.Background()
		plain, err := store.Open(driver, dsns[0])
		if err != nil {
			t.Fatal(err)
		}
		defer plain.Close()
		if err := plain.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		ledger := map[string]*idLedger{"before": {}, "after": {}, "deleted": {}}
		for _, name := range []string{"before", "after", "deleted"} {
			if _, err := plain.CreateTag(ctx, leafd.Tag{Name: name, Step: 100}); err != nil {
				t.Fatal(err)
			}
			for range 5 {
				a, err := plain.Allocate(ctx, name, 100)
				if err != nil {
					t.Fatal(err)
				}
				a.Stride = 1 // contiguous
				ledger[name].add(t, "one database "+name, a)
			}
		}
		// Lowered before sharding: the one database refuses it.
		rawExec(t, driver, dsns[0], `UPDATE leaf_alloc SET max_id = 1 WHERE biz_tag = 'before'`)
		if _, err := plain.Allocate(ctx, "before", 100); leafd.ErrorCode(err) != leafd.ETagRewound {
			t.Fatalf("a lowered tag on one database: %v, want tag_rewound", err)
		}
		// Deleted before sharding, created again after, then lowered.
		rawExec(t, driver, dsns[0], `DELETE FROM leaf_alloc WHERE biz_tag = 'deleted'`)
		s := openSharded(t, driver, dsns, shardSlots)
		if err := s.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := s.CreateTag(ctx, leafd.Tag{Name: "deleted", Step: 100}); err != nil {
			t.Fatal(err)
		}
		// Lowered after, in every database, before any slot loaded it.
		for _, dsn := range dsns {
			rawExec(t, driver, dsn, `UPDATE leaf_alloc SET max_id = 1 WHERE biz_tag IN ('after', 'deleted')`)
		}
		for _, name := range []string{"before", "after", "deleted"} {
			for range 2 * shardSlots {
				// In any order, as for an opaque tag (or a server's first
				// range): no floor of this server's raises the slot.
				a, err := s.AllocateAnyOrder(ctx, name, 10)
				if err != nil {
					t.Fatal(err)
				}
				if a.Start <= 500 {
					t.Errorf("tag %q: range [%d, %d) from a sharded store, below its mark, 501", name, a.Start, a.End)
				}
				ledger[name].add(t, "sharded "+name, a)
			}
		}
	})
}

// A move stopped once the slot was active in its target, then run to a
// third database: the slot's counters come from where it served last, and
// it ends active in the third database alone, no ID twice. A move stopped
// before its target was activated, run back to where the slot was: it
// serves there again, not lost.
func TestShardedMoveSlotElsewhere(t *testing.T) {
	forEachDriver(t, store.Drivers(), func(t *testing.T, driver string) {
		dsns := shardDSNs(t, driver, 3)
		ctx := context.Background()
		a, b := openSharded(t, driver, dsns, shardSlots), openSharded(t, driver, dsns, shardSlots)
		if err := a.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := a.CreateTag(ctx, leafd.Tag{Name: "t", Step: 10}); err != nil {
			t.Fatal(err)
		}
		var ledger idLedger
		load := func(s *sharded.Store, who string, n int) {
			t.Helper()
			for range n {
				al, err := s.AllocateAnyOrder(ctx, "t", 10)
				if err != nil {
					t.Fatalf("%s: Allocate: %v", who, err)
				}
				ledger.add(t, who, al)
			}
		}
		load(a, "a", 3*shardSlots)
		const slot = 2 // in store.shards[2] after initialisation
		crash := errors.New("crash injected")
		err := a.MoveSlot(ctx, slot, 1, func(s sharded.MoveStep) error {
			if s == sharded.MoveActivated {
				return crash
			}
			return nil
		})
		if !errors.Is(err, crash) {
			t.Fatalf("move stopped once activated: %v", err)
		}
		load(b, "b", 3*shardSlots) // slot 2 served by store.shards[1]
		if err := a.MoveSlot(ctx, slot, 0, nil); err != nil {
			t.Fatalf("the move run to another database: %v", err)
		}
		for _, st := range a.Status(ctx) {
			if slices.Contains(st.Active, slot) != (st.Index == 0) {
				t.Fatalf("after the move to store.shards[0]: store.shards[%d] is %+v", st.Index, st)
			}
		}
		c := openSharded(t, driver, dsns, shardSlots)
		load(c, "c", 3*shardSlots)

		// A move stopped before its target was activated, run back to the
		// database it left: active there again.
		err = a.MoveSlot(ctx, 1, 2, func(s sharded.MoveStep) error {
			if s == sharded.MoveLeaving {
				return crash
			}
			return nil
		})
		if !errors.Is(err, crash) {
			t.Fatalf("move stopped once leaving: %v", err)
		}
		if err := a.MoveSlot(ctx, 1, 1, nil); err != nil {
			t.Fatalf("the move run back: %v", err)
		}
		for _, st := range a.Status(ctx) {
			if slices.Contains(st.Active, 1) != (st.Index == 1) {
				t.Fatalf("after the move back to store.shards[1]: store.shards[%d] is %+v", st.Index, st)
			}
		}
		load(c, "c", 3*shardSlots)
		served := map[int64]bool{}
		for id := range ledger.seen {
			served[id%shardSlots] = true
		}
		if len(served) != shardSlots {
			t.Fatalf("slots served: %v, want all %d", served, shardSlots)
		}
	})
}

// A server checking the databases' records while another initialises
// sharding takes the new deployment for what it is, whichever of its
// reads the initialisation falls between: a database it read without a
// record before another showed ready is read again, and is not taken for
// one emptied or replaced.
func TestShardedInitialisedWhileRecordsRead(t *testing.T) {
	forEachDriver(t, store.Drivers(), func(t *testing.T, driver string) {
		for k := 1; k <= 4; k++ {
			t.Run(fmt.Sprintf("after read %d", k), func(t *testing.T) {
				ctx := context.Background()
				dsns := shardDSNs(t, driver, 2)
				a, b := openSharded(t, driver, dsns, shardSlots), openSharded(t, driver, dsns, shardSlots)
				reads, initialised := 0, false
				initialise := func() {
					initialised = true
					if err := b.Migrate(ctx); err != nil {
						t.Errorf("the other server's initialisation: %v", err)
					}
				}
				sharded.SetAfterMetaRead(a, func(int) {
					if reads++; reads == k && !initialised {
						initialise()
					}
				})
				if err := a.Migrate(ctx); err != nil {
					t.Fatalf("Migrate while another server initialised after its read %d: %v", k, err)
				}
				if !initialised {
					initialise()
				}
				sharded.SetAfterMetaRead(a, nil)
				for _, s := range []*sharded.Store{a, b} {
					if err := s.Migrate(ctx); err != nil {
						t.Fatalf("Migrate again: %v", err)
					}
					if err := s.Verify(ctx); err != nil {
						t.Fatalf("Verify: %v", err)
					}
				}
			})
		}
	})
}
