// Package storetest is the one test suite of leafd's stores. Run executes
// the same cases with the same assertions against any backend: store_test
// runs it against SQLite always, and against MySQL and PostgreSQL whenever
// a server is reachable (CI requires both). RunSharded runs them against
// the sharded store over databases of each engine.
package storetest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/segment"
	"github.com/leafd/leafd/store"
)

// Store is what the suite tests: everything a store does.
type Store = store.Store

// Database is one fresh, empty database (no tables) of a backend; for
// RunSharded, the fresh databases of a sharded store, of which Raw,
// HoldMigrateLock and LeafTable concern the first: it holds the worker id
// leases, their layout and the tokens, and Migrate takes it first.
type Database struct {
	// Open opens a new store on the database, with its own connection
	// pool, as another server sharing the database would. The suite closes
	// it.
	Open func() (Store, error)
	// OpenUnreachable opens a store on a database that cannot be reached
	// (nothing listens at its address, or its file cannot be opened). The
	// suite closes it.
	OpenUnreachable func() (Store, error)
	// Raw is a plain connection pool on the database, outside any store,
	// for setup and checks, opened with the driver name sqlx knows for the
	// engine's placeholders ("mysql", "sqlite", "pgx"): the suite writes
	// its queries with '?' and rebinds them. The backend closes it.
	Raw *sqlx.DB
	// HoldMigrateLock, when not nil, takes the lock that Migrate takes, as
	// another server migrating would, and returns the function that
	// releases it.
	HoldMigrateLock func(t *testing.T) (release func())
	// AfterLayoutRead makes a store of the database run f in each of its
	// claims of a worker id after the claim read the recorded snowflake
	// layout and before it writes (f nil: nothing), for the tests that
	// force two claims to interleave there. Nil is right for a store of
	// package store; a store built over those (the sharded store) sets
	// its own.
	AfterLayoutRead func(s Store, f func())
	// LeafTable is the CREATE TABLE of leaf_alloc as a database that Java
	// Leaf already uses holds it (for SQLite, which Leaf does not run on:
	// the same columns without anything leafd's migration adds).
	LeafTable string
	// Shards describes the databases of a sharded store (RunSharded); nil
	// for a store of one database (Run).
	Shards *Shards
	// Conflicts is true when the stores opened write through different
	// primaries of one database (Galera multi-primary): many loads of one
	// tag at once can then fail store_unavailable once the store's
	// retries of their conflicts run out, which the concurrent cases
	// retry, as the allocator does. Their ranges must still hold.
	Conflicts bool
}

// Shards describes the databases of a sharded store (store.shards).
type Shards struct {
	// Raw is a plain pool on every database, in store.shards order, as
	// Database.Raw is on the first. The backend closes them.
	Raw []*sqlx.DB
	// Slots is S (store.shard_slots): the stride of every range.
	Slots int64
}

// Run runs the suite against a store of one database. newDatabase returns
// a fresh, empty database for each case.
func Run(t *testing.T, newDatabase func(t *testing.T) *Database) {
	run(t, newDatabase, false)
}

// RunSharded runs the suite against a sharded store (store/sharded).
// newDatabase returns fresh, empty databases for each case, described by
// Database.Shards. The cases whose assertions are a property of one
// database that sharding deliberately changes are skipped, saying why.
func RunSharded(t *testing.T, newDatabase func(t *testing.T) *Database) {
	run(t, newDatabase, true)
}

// RunDated runs the suite's cases of dated tags, and of the high-water
// marks that keep their counters from coming back, against a store of one
// database: for a backend whose every other property another test covers
// (a Galera cluster, whose nodes each take writes). newDatabase is as for
// Run; the cases use Open and Raw only.
func RunDated(t *testing.T, newDatabase func(t *testing.T) *Database) {
	for _, c := range datedCases {
		t.Run(c.name, func(t *testing.T) {
			c.test(t, &harness{t: t, db: newDatabase(t)})
		})
	}
}

// datedCases are the cases RunDated runs, all in Run too.
var datedCases = []suiteCase{
	{"DatedAllocate", testDatedAllocate},
	{"DatedWithin", testDatedWithin},
	{"DatedRewound", testDatedRewound},
	{"DatedTag", testDatedTag},
	{"DatedRecreate", testDatedRecreate},
	{"DatedConcurrent", testDatedConcurrent},
}

// suiteCase is one case of the suite.
type suiteCase struct {
	name string
	test func(t *testing.T, h *harness)
}

func run(t *testing.T, newDatabase func(t *testing.T) *Database, sharded bool) {
	cases := []suiteCase{
		{"NewTagRanges", testNewTagRanges},
		{"MaxIDBelowOne", testMaxIDBelowOne},
		{"NearMaxInt64", testNearMaxInt64},
		{"UnknownTag", testUnknownTag},
		{"LookupTag", testLookupTag},
		{"StepBelowOne", testStepBelowOne},
		{"ConcurrentAllocate", testConcurrentAllocate},
		{"HugeStep", testHugeStep},
		{"AllocateRefusedOnShard", testAllocateRefusedOnShard},
		{"Tags", testTags},
		{"CreateTagInvalid", testCreateTagInvalid},
		{"UpdateTag", testUpdateTag},
		{"UpdateTagExactCase", testUpdateTagExactCase},
		{"CreateTagCaseTwin", testCreateTagCaseTwin},
		{"AllocatorExactCase", testAllocatorExactCase},
		{"TagFormat", testTagFormat},
		{"RecreateTag", testRecreateTag},
	}
	cases = append(cases, datedCases...)
	cases = append(cases, []suiteCase{
		{"UpdateTimeRefreshed", testUpdateTimeRefreshed},
		{"MigrateTwice", testMigrateTwice},
		{"MigrateConcurrently", testMigrateConcurrently},
		{"MigrateLeafTable", testMigrateLeafTable},
		{"MigrateWaitsForLock", testMigrateWaitsForLock},
		{"Unreachable", testUnreachable},
		{"RowLockedNoRange", testRowLockedNoRange},
		{"RewoundByUpdate", testRewoundByUpdate},
		{"RewoundByRecreate", testRewoundByRecreate},
		{"RewoundConcurrently", testRewoundConcurrently},
		{"HighWaterMarkOfLeafTable", testHighWaterMarkOfLeafTable},
		{"HighWaterTableMissing", testHighWaterTableMissing},
		{"RepairTag", testRepairTag},
		{"RepairUnderLoad", testRepairUnderLoad},
		{"ClaimLowestFirst", testClaimLowestFirst},
		{"ClaimLiveLeaseNotTaken", testClaimLiveLeaseNotTaken},
		{"ClaimExpiredLease", testClaimExpiredLease},
		{"ClaimWatermarkAhead", testClaimWatermarkAhead},
		{"RenewWorker", testRenewWorker},
		{"DatabaseClock", testDatabaseClock},
		{"ReleaseWorker", testReleaseWorker},
		{"ConcurrentClaims", testConcurrentClaims},
		{"ConcurrentClaimsScarce", testConcurrentClaimsScarce},
		{"MigrateTwiceKeepsWorkers", testMigrateTwiceKeepsWorkers},
		{"ClaimFixedWorker", testClaimFixedWorker},
		{"ClaimFixedWorkerHeld", testClaimFixedWorkerHeld},
		{"ClaimSkipsFixedWorker", testClaimSkipsFixedWorker},
		{"ConcurrentFixedClaims", testConcurrentFixedClaims},
		{"SnowflakeLayout", testSnowflakeLayout},
		{"SnowflakeLayoutOfOlderLeases", testSnowflakeLayoutOfOlderLeases},
		{"SnowflakeLayoutRace", testSnowflakeLayoutRace},
		{"SnowflakeLayoutChangedUnderLease", testSnowflakeLayoutChangedUnderLease},
		{"Tokens", testTokens},
		{"TokenInvalid", testTokenInvalid},
	}...)
	if sharded {
		cases = append(cases, shardedCases...)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if why := unsharded[c.name]; sharded && why != "" {
				t.Skip(why)
			}
			db := newDatabase(t)
			if sharded != (db.Shards != nil) {
				t.Fatalf("Database.Shards is %v: set it for RunSharded, and only for it", db.Shards)
			}
			c.test(t, &harness{t: t, db: db})
		})
	}
}

// unsharded says why each case that does not apply to a sharded store does
// not: each is a documented property of sharding (docs/contract.md,
// "Independent databases", and docs/shards.md).
var unsharded = func() map[string]string {
	const (
		base = "a sharded store hands out strided IDs from its slots' counters (leafd_slot_alloc) and leaves " +
			"leaf_alloc.max_id and update_time as the tag's base (docs/contract.md, \"Independent databases\"); this case checks one counter's exact ranges and max_id"
		marks = "a sharded store's loads write no high-water mark (its slots' counters only grow, and a mark only sets where " +
			"a slot's first range starts): nothing is tag_rewound, and RepairTag is range_unsupported (docs/contract.md, \"Independent databases\")"
		one = "this case is a store of one database that became part of store.shards; " +
			"a sharded store is the other side of it (docs/shards.md, \"What you give up\")"
		lock = "a sharded store's load takes a slot of another database when one does not answer in time " +
			"(docs/shards.md, \"How it works\"): one transaction holding a row does not stop it"
		dated = "a sharded store serves no dated tag: its counter starts at 1 in each period in one database " +
			"(DatedSharded checks the refusals)"
	)
	return map[string]string{
		"NewTagRanges": base, "MaxIDBelowOne": base, "NearMaxInt64": base, "ConcurrentAllocate": base,
		"UpdateTag": base, "UpdateTimeRefreshed": base, "MigrateLeafTable": base,
		"RecreateTag": marks, "RewoundByUpdate": marks, "RewoundByRecreate": marks, "RewoundConcurrently": marks,
		"HighWaterMarkOfLeafTable": marks, "HighWaterTableMissing": marks, "RepairTag": marks, "RepairUnderLoad": marks,
		"AllocateRefusedOnShard": one,
		"RowLockedNoRange":       lock,
		"DatedAllocate":          dated, "DatedWithin": dated, "DatedRewound": dated, "DatedTag": dated,
		"DatedRecreate": dated, "DatedConcurrent": dated,
	}
}()

// shardedCases hold for a sharded store what the cases it skips hold for
// one database.
var shardedCases = []suiteCase{
	{"ShardedBase", testShardedBase},
	{"ShardedLeafTable", testShardedLeafTable},
	{"DatedSharded", testDatedSharded},
}

// harness runs one case against one database.
type harness struct {
	t  *testing.T
	db *Database
}

// open opens a store, closed when the test ends.
func (h *harness) open() Store {
	h.t.Helper()
	s, err := h.db.Open()
	if err != nil {
		h.t.Fatalf("open: %v", err)
	}
	h.t.Cleanup(func() {
		if err := s.Close(); err != nil {
			h.t.Errorf("close: %v", err)
		}
	})
	return s
}

// migrated opens a store and migrates the database.
func (h *harness) migrated() Store {
	h.t.Helper()
	s := h.open()
	if err := s.Migrate(context.Background()); err != nil {
		h.t.Fatalf("migrate: %v", err)
	}
	return s
}

func (h *harness) exec(query string, args ...any) {
	h.t.Helper()
	if _, err := h.db.Raw.Exec(h.db.Raw.Rebind(query), args...); err != nil {
		h.t.Fatalf("%s: %v", query, err)
	}
}

// insert adds a row by SQL, as an operator would: on a sharded store in
// every database, each of which holds every tag (docs/shards.md).
func (h *harness) insert(tag string, maxID, step int64) {
	h.t.Helper()
	const query = "INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES (?, ?, ?)"
	if h.db.Shards == nil {
		h.exec(query, tag, maxID, step)
		return
	}
	for i, raw := range h.db.Shards.Raw {
		if _, err := raw.Exec(raw.Rebind(query), tag, maxID, step); err != nil {
			h.t.Fatalf("store.shards[%d]: %s: %v", i, query, err)
		}
	}
}

// maxID reads a tag's max_id by SQL.
func (h *harness) maxID(tag string) int64 {
	h.t.Helper()
	var v int64
	if err := h.db.Raw.QueryRow(h.db.Raw.Rebind("SELECT max_id FROM leaf_alloc WHERE biz_tag = ?"), tag).Scan(&v); err != nil {
		h.t.Fatalf("read max_id of %q: %v", tag, err)
	}
	return v
}

// firstID reports whether id can be the first ID handed out of a tag whose
// max_id is 1: 1, or on a sharded store the first ID of the slot its first
// load takes, 1 to S (docs/contract.md, "Independent databases": a slot's
// first range starts at the first of its IDs at or above max_id).
func (h *harness) firstID(id int64) bool {
	if h.db.Shards != nil {
		return id >= 1 && id <= h.db.Shards.Slots
	}
	return id == 1
}

func create(t *testing.T, s Store, tag leafd.Tag) leafd.Tag {
	t.Helper()
	got, err := s.CreateTag(context.Background(), tag)
	if err != nil {
		t.Fatalf("CreateTag(%v): %v", tag, err)
	}
	return got
}

// allocate asks for a range and checks it: the contiguous range want, or
// on a sharded store a range of as many IDs strided by S, whose IDs stay
// at or above 1 and below 2^63-1, with want's table step (docs/contract.md,
// "Independent databases": which of the tag's IDs a load hands out depends
// on the slot it takes).
func (h *harness) allocate(s Store, tag string, step int64, want segment.Allocation) {
	t := h.t
	t.Helper()
	got, err := s.Allocate(context.Background(), tag, step)
	if err != nil {
		t.Fatalf("Allocate(%q, %d): %v", tag, step, err)
	}
	if sh := h.db.Shards; sh != nil {
		if got.Stride != sh.Slots || got.Count() != want.Count() || got.TableStep != want.TableStep || got.Format != want.Format ||
			got.Start < 1 || got.Last() >= leafd.MaxID || got.End-got.Start != want.Count()*sh.Slots {
			t.Fatalf("Allocate(%q, %d) = %+v, want %d IDs strided by %d from 1 on, table step %d, format %q", tag, step, got, want.Count(), sh.Slots, want.TableStep, want.Format)
		}
		return
	}
	if got != want {
		t.Fatalf("Allocate(%q, %d) = %+v, want %+v", tag, step, got, want)
	}
}

// wantCode checks that err is a *leafd.Error with code.
func wantCode(t *testing.T, what string, err error, code string) {
	t.Helper()
	var le *leafd.Error
	if !errors.As(err, &le) || le.Code != code {
		t.Fatalf("%s: error %v (code %q), want code %q", what, err, leafd.ErrorCode(err), code)
	}
}

func testNewTagRanges(t *testing.T, h *harness) {
	s := h.migrated()
	create(t, s, leafd.Tag{Name: "order", MaxID: 1, Step: 1000})
	h.allocate(s, "order", 1000, segment.Allocation{Start: 1, End: 1001, TableStep: 1000})
	h.allocate(s, "order", 1000, segment.Allocation{Start: 1001, End: 2001, TableStep: 1000})
	// The server's own step, larger or smaller than the table's.
	h.allocate(s, "order", 5000, segment.Allocation{Start: 2001, End: 7001, TableStep: 1000})
	h.allocate(s, "order", 1, segment.Allocation{Start: 7001, End: 7002, TableStep: 1000})
	if got := h.maxID("order"); got != 7002 {
		t.Fatalf("max_id = %d, want 7002", got)
	}
	// Another store on the same database continues where this one stopped.
	h.allocate(h.open(), "order", 1000, segment.Allocation{Start: 7002, End: 8002, TableStep: 1000})
}

func testMaxIDBelowOne(t *testing.T, h *harness) {
	s := h.migrated()
	h.insert("zero", 0, 10)
	h.insert("negative", -12345, 10)
	h.insert("min", leafd.MaxID*-1-1, 10)
	for _, tag := range []string{"zero", "negative", "min"} {
		h.allocate(s, tag, 100, segment.Allocation{Start: 1, End: 101, TableStep: 10})
		h.allocate(s, tag, 100, segment.Allocation{Start: 101, End: 201, TableStep: 10})
	}
	// A step that fits only from 1 on.
	h.insert("huge", -5, 1)
	h.allocate(s, "huge", leafd.MaxID-1, segment.Allocation{Start: 1, End: leafd.MaxID, TableStep: 1})
}

func testNearMaxInt64(t *testing.T, h *harness) {
	s := h.migrated()
	ctx := context.Background()
	const m = leafd.MaxID
	h.insert("edge", m-2500, 1000)
	h.allocate(s, "edge", 1000, segment.Allocation{Start: m - 2500, End: m - 1500, TableStep: 1000})
	h.allocate(s, "edge", 1000, segment.Allocation{Start: m - 1500, End: m - 500, TableStep: 1000})
	_, err := s.Allocate(ctx, "edge", 1000)
	wantCode(t, "a range past 2^63-1", err, leafd.ETagExhausted)
	if got := h.maxID("edge"); got != m-500 {
		t.Fatalf("max_id after tag_exhausted = %d, want %d (unchanged)", got, m-500)
	}
	// The last range that fits ends exactly at 2^63-1 (exclusive).
	h.allocate(s, "edge", 500, segment.Allocation{Start: m - 500, End: m, TableStep: 1000})
	for _, step := range []int64{1, 1000, m} {
		_, err = s.Allocate(ctx, "edge", step)
		wantCode(t, fmt.Sprintf("step %d at max_id 2^63-1", step), err, leafd.ETagExhausted)
	}
	if got := h.maxID("edge"); got != m {
		t.Fatalf("max_id = %d, want %d", got, m)
	}

	// A step so large that max_id + step would overflow from the start.
	for tag, maxID := range map[string]int64{"wide": 1, "wide-neg": -7} {
		h.insert(tag, maxID, 1000)
		_, err = s.Allocate(ctx, tag, m)
		wantCode(t, "step 2^63-1 on "+tag, err, leafd.ETagExhausted)
		if got := h.maxID(tag); got != maxID {
			t.Fatalf("max_id of %s changed from %d to %d", tag, maxID, got)
		}
	}
}

func testUnknownTag(t *testing.T, h *harness) {
	s := h.migrated()
	_, err := s.Allocate(context.Background(), "nope", 1000)
	wantCode(t, "Allocate of a missing tag", err, leafd.EUnknownTag)
	if msg := leafd.ErrorMessage(err); !strings.Contains(msg, "create it with POST /api/tags or leafd tag add") {
		t.Fatalf("message %q does not say how to create the tag", msg)
	}
}

// LookupTag finds one row by its exact name: a name that differs only in
// letter case is another tag, even where the collation (MySQL's default)
// compares them equal.
func testLookupTag(t *testing.T, h *harness) {
	s := h.migrated()
	ctx := context.Background()
	h.insert("order", 77, 500)
	got, err := s.LookupTag(ctx, "order")
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "order" || got.MaxID != 77 || got.Step != 500 || got.UpdateTime.IsZero() {
		t.Fatalf("LookupTag(order) = %+v", got)
	}
	for _, name := range []string{"ORDER", "Order", "nope"} {
		_, err := s.LookupTag(ctx, name)
		wantCode(t, "LookupTag("+name+")", err, leafd.EUnknownTag)
	}
}

func testStepBelowOne(t *testing.T, h *harness) {
	s := h.migrated()
	h.insert("t", 1, 10)
	for _, step := range []int64{0, -1, -leafd.MaxID} {
		if a, err := s.Allocate(context.Background(), "t", step); err == nil {
			t.Fatalf("Allocate with step %d = %+v, want an error", step, a)
		}
	}
	if got := h.maxID("t"); got != 1 {
		t.Fatalf("max_id = %d after refused steps, want 1", got)
	}
}

// Several stores (standing in for servers) allocate from one database at
// once: every range of a tag is disjoint from the others and together they
// cover 1..max_id exactly.
func testConcurrentAllocate(t *testing.T, h *harness) {
	const (
		stores     = 4
		goroutines = 8
		perG       = 15
	)
	tags := map[string][]int64{"a": {1, 7, 100}, "b": {1000}, "c": {3, 5000, 10}}
	first := h.migrated()
	for name := range tags {
		create(t, first, leafd.Tag{Name: name, MaxID: 1, Step: 1})
	}
	var (
		mu     sync.Mutex
		ranges = map[string][]segment.Allocation{}
		wg     sync.WaitGroup
		errs   = make(chan error, stores*goroutines)
	)
	names := []string{"a", "b", "c"}
	for i := range stores {
		s := first
		if i > 0 {
			s = h.open()
		}
		for g := range goroutines {
			wg.Go(func() {
				for n := range perG {
					name := names[(g+n)%len(names)]
					step := tags[name][(i+n)%len(tags[name])]
					a, err := s.Allocate(context.Background(), name, step)
					if err != nil {
						errs <- fmt.Errorf("store %d: Allocate(%q, %d): %w", i, name, step, err)
						return
					}
					if a.End-a.Start != step {
						errs <- fmt.Errorf("range %+v for step %d", a, step)
						return
					}
					mu.Lock()
					ranges[name] = append(ranges[name], a)
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	for _, name := range names {
		rs := ranges[name]
		slices.SortFunc(rs, func(a, b segment.Allocation) int { return cmp.Compare(a.Start, b.Start) })
		next := int64(1)
		for _, r := range rs {
			if r.Start != next {
				t.Fatalf("tag %s: range %+v follows %d: a gap or an overlap", name, r, next)
			}
			next = r.End
		}
		if got := h.maxID(name); got != next {
			t.Fatalf("tag %s: max_id %d, but the ranges end at %d", name, got, next)
		}
	}
}

// A step whose range cannot fit below 2^63-1 (on a sharded store a range
// spans step×S) is tag_exhausted: every range handed out holds exactly the
// IDs asked for, above those handed out before, however large the step.
func testHugeStep(t *testing.T, h *harness) {
	s := h.migrated()
	create(t, s, leafd.Tag{Name: "t", MaxID: 1, Step: 10})
	var last int64
	for _, step := range []int64{1 << 58, 1 << 62, 1<<62 + 1, leafd.MaxID / 3, leafd.MaxID/2 + 7, leafd.MaxID - 1, leafd.MaxID} {
		a, err := s.Allocate(context.Background(), "t", step)
		switch {
		case leafd.ErrorCode(err) == leafd.ETagExhausted:
		case err != nil:
			t.Fatalf("Allocate(t, %d): %v", step, err)
		case a.Count() != step || a.Start <= last || a.Last() >= leafd.MaxID:
			t.Fatalf("Allocate(t, %d) = %+v (%d IDs), after IDs up to %d: want %d IDs above them, below 2^63-1, or tag_exhausted",
				step, a, a.Count(), last, step)
		default:
			last = a.Last()
		}
	}
	if last == 0 {
		t.Fatal("no step was handed out: the case checks nothing")
	}
}

func testTags(t *testing.T, h *harness) {
	s := h.migrated()
	ctx := context.Background()
	names, err := s.TagNames(ctx)
	if err != nil || len(names) != 0 {
		t.Fatalf("TagNames of an empty table = %q, %v", names, err)
	}
	if tags, err := s.ListTags(ctx); err != nil || len(tags) != 0 {
		t.Fatalf("ListTags of an empty table = %v, %v", tags, err)
	}
	before := time.Now().Add(-time.Minute)
	created := map[string]leafd.Tag{}
	for _, tag := range []leafd.Tag{
		{Name: "pay", MaxID: 500, Step: 20, Description: "payments — 支付"},
		{Name: "Order", MaxID: 0, Step: 1000},
		{Name: "a.b:c-d_e", MaxID: -3, Step: 1, Description: strings.Repeat("x", 256)},
	} {
		got := create(t, s, tag)
		want := tag
		want.MaxID = max(tag.MaxID, 1)
		want.UpdateTime = got.UpdateTime
		if got != want {
			t.Fatalf("CreateTag returned %+v, want %+v", got, want)
		}
		created[tag.Name] = got
	}
	_, err = s.CreateTag(ctx, leafd.Tag{Name: "pay", MaxID: 1, Step: 5})
	wantCode(t, "CreateTag of an existing tag", err, leafd.ETagExists)

	tags, err := s.ListTags(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantNames := []string{"Order", "a.b:c-d_e", "pay"}
	if len(tags) != len(wantNames) {
		t.Fatalf("ListTags = %v, want %q", tags, wantNames)
	}
	for i, tag := range tags {
		if tag.Name != wantNames[i] {
			t.Fatalf("ListTags[%d] = %q, want %q (sorted by name)", i, tag.Name, wantNames[i])
		}
		if tag != created[tag.Name] {
			t.Fatalf("ListTags has %+v, CreateTag returned %+v", tag, created[tag.Name])
		}
		if tag.UpdateTime.Location() != time.UTC {
			t.Fatalf("update_time %v is not in UTC", tag.UpdateTime)
		}
		if tag.UpdateTime.Before(before) || tag.UpdateTime.After(time.Now().Add(time.Minute)) {
			t.Fatalf("update_time %v of a tag created now is not recent", tag.UpdateTime)
		}
	}
	if tags[2].MaxID != 500 || tags[2].Step != 20 {
		t.Fatalf("pay = %+v", tags[2])
	}
	names, err = s.TagNames(ctx)
	if err != nil || !slices.Equal(names, wantNames) {
		t.Fatalf("TagNames = %q, %v; want %q", names, err, wantNames)
	}
	// The table step is what Allocate reports.
	h.allocate(s, "pay", 7, segment.Allocation{Start: 500, End: 507, TableStep: 20})
}

func testCreateTagInvalid(t *testing.T, h *harness) {
	s := h.migrated()
	for _, c := range []struct {
		name string
		tag  leafd.Tag
		code string
	}{
		{"EmptyName", leafd.Tag{Name: "", Step: 1}, leafd.EInvalidTag},
		{"BadName", leafd.Tag{Name: "a b", Step: 1}, leafd.EInvalidTag},
		{"LongName", leafd.Tag{Name: strings.Repeat("a", 129), Step: 1}, leafd.EInvalidTag},
		{"StepZero", leafd.Tag{Name: "t", Step: 0}, leafd.EInvalidBody},
		{"StepTooLarge", leafd.Tag{Name: "t", Step: 1 << 31}, leafd.EInvalidBody},
		{"LongDescription", leafd.Tag{Name: "t", Step: 1, Description: strings.Repeat("é", 257)}, leafd.EInvalidBody},
		{"DescriptionNotUTF8", leafd.Tag{Name: "t", Step: 1, Description: "\xff"}, leafd.EInvalidBody},
	} {
		_, err := s.CreateTag(context.Background(), c.tag)
		wantCode(t, c.name, err, c.code)
	}
	if names, err := s.TagNames(context.Background()); err != nil || len(names) != 0 {
		t.Fatalf("after refused tags: TagNames = %q, %v", names, err)
	}
	create(t, s, leafd.Tag{Name: strings.Repeat("a", 128), Step: 1<<31 - 1})
}

func testUpdateTimeRefreshed(t *testing.T, h *harness) {
	s := h.migrated()
	h.insert("t", 1, 10)
	h.exec("UPDATE leaf_alloc SET update_time = '2001-02-03 04:05:06' WHERE biz_tag = 't'")
	tags, err := s.ListTags(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC); !tags[0].UpdateTime.Equal(want) {
		t.Fatalf("update_time = %v, want %v", tags[0].UpdateTime, want)
	}
	h.allocate(s, "t", 10, segment.Allocation{Start: 1, End: 11, TableStep: 10})
	tags, err = s.ListTags(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := tags[0].UpdateTime; time.Since(got) > time.Minute || time.Until(got) > time.Minute {
		t.Fatalf("update_time after Allocate = %v, want now", got)
	}
}

func testMigrateTwice(t *testing.T, h *harness) {
	s := h.migrated()
	create(t, s, leafd.Tag{Name: "t", MaxID: 1, Step: 10})
	for range 2 {
		if err := s.Migrate(context.Background()); err != nil {
			t.Fatalf("migrate again: %v", err)
		}
	}
	if err := h.open().Migrate(context.Background()); err != nil {
		t.Fatalf("migrate from a second store: %v", err)
	}
	h.allocate(s, "t", 10, segment.Allocation{Start: 1, End: 11, TableStep: 10})
}

func testMigrateConcurrently(t *testing.T, h *harness) {
	const n = 6
	stores := make([]Store, n)
	for i := range stores {
		stores[i] = h.open()
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, s := range stores {
		wg.Go(func() { errs[i] = s.Migrate(context.Background()) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("store %d: migrate: %v", i, err)
		}
	}
	if t.Failed() {
		return
	}
	create(t, stores[0], leafd.Tag{Name: "t", MaxID: 1, Step: 10})
	h.allocate(stores[n-1], "t", 10, segment.Allocation{Start: 1, End: 11, TableStep: 10})
}

// Migrate waits while another server holds the migration lock, and
// migrates once it is released.
func testMigrateWaitsForLock(t *testing.T, h *harness) {
	if h.db.HoldMigrateLock == nil {
		t.Skip("this backend cannot take the migration lock from outside")
	}
	s := h.open()
	release := h.db.HoldMigrateLock(t)
	defer release()

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := s.Migrate(ctx); err == nil {
		t.Fatal("Migrate succeeded while another server held the migration lock")
	}
	var n int
	if err := h.db.Raw.QueryRow("SELECT COUNT(*) FROM leaf_alloc").Scan(&n); err == nil {
		t.Fatal("leaf_alloc was created while another server held the migration lock")
	}

	done := make(chan error, 1)
	go func() { done <- s.Migrate(context.Background()) }()
	select {
	case err := <-done:
		t.Fatalf("Migrate returned %v while another server held the migration lock", err)
	case <-time.After(100 * time.Millisecond):
	}
	release()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Migrate after the lock was released: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Migrate did not finish after the lock was released")
	}
	create(t, s, leafd.Tag{Name: "t", MaxID: 1, Step: 10})
}

// A database that Java Leaf already uses: the table exists with rows, and
// goose has never run. Migrating keeps the rows and they allocate on.
func testMigrateLeafTable(t *testing.T, h *harness) {
	h.exec(h.db.LeafTable)
	h.exec("INSERT INTO leaf_alloc (biz_tag, max_id, step, description) VALUES ('leaf-segment-test', 5001, 2000, 'Test leaf Segment Mode Get Id')")
	s := h.migrated()
	h.allocate(s, "leaf-segment-test", 2000, segment.Allocation{Start: 5001, End: 7001, TableStep: 2000})
	tags, err := s.ListTags(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(tags) != 1 || tags[0].Description != "Test leaf Segment Mode Get Id" || tags[0].MaxID != 7001 {
		t.Fatalf("ListTags after migrating Leaf's table = %+v", tags)
	}
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatalf("migrate again: %v", err)
	}
}

// A store whose database cannot be reached opens, and every method reports
// store_unavailable, quickly.
func testUnreachable(t *testing.T, h *harness) {
	s, err := h.db.OpenUnreachable()
	if err != nil {
		t.Fatalf("open a store on an unreachable database: %v", err)
	}
	defer s.Close()
	ctx := context.Background()
	start := time.Now()
	wantCode(t, "Ping", s.Ping(ctx), leafd.EStoreUnavailable)
	_, err = s.Allocate(ctx, "t", 10)
	wantCode(t, "Allocate", err, leafd.EStoreUnavailable)
	if msg := leafd.ErrorMessage(err); !strings.Contains(msg, "cannot be reached") {
		t.Fatalf("Allocate: message %q", msg)
	}
	_, err = s.ListTags(ctx)
	wantCode(t, "ListTags", err, leafd.EStoreUnavailable)
	_, err = s.TagNames(ctx)
	wantCode(t, "TagNames", err, leafd.EStoreUnavailable)
	_, err = s.LookupTag(ctx, "t")
	wantCode(t, "LookupTag", err, leafd.EStoreUnavailable)
	_, err = s.CreateTag(ctx, leafd.Tag{Name: "t", Step: 10})
	wantCode(t, "CreateTag", err, leafd.EStoreUnavailable)
	wantCode(t, "Migrate", s.Migrate(ctx), leafd.EStoreUnavailable)
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("the calls took %v", d)
	}
}

// While another transaction holds the tag's row, Allocate cannot complete
// its transaction: it fails within its context's deadline, hands out no
// range and writes nothing; once the row is free the next range follows the
// last one handed out.
func testRowLockedNoRange(t *testing.T, h *harness) {
	s := h.migrated()
	h.insert("t", 1, 10)
	h.allocate(s, "t", 10, segment.Allocation{Start: 1, End: 11, TableStep: 10})

	tx, err := h.db.Raw.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.Exec("UPDATE leaf_alloc SET step = step WHERE biz_tag = 't'"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	a, err := s.Allocate(ctx, "t", 10)
	if err == nil {
		t.Fatalf("Allocate while the row is locked = %+v, want an error", a)
	}
	wantCode(t, "Allocate while the row is locked", err, leafd.EStoreUnavailable)
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Allocate while the row is locked took %v", d)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if got := h.maxID("t"); got != 11 {
		t.Fatalf("max_id = %d after a failed Allocate, want 11", got)
	}
	h.allocate(s, "t", 10, segment.Allocation{Start: 11, End: 21, TableStep: 10})
}

func testUpdateTag(t *testing.T, h *harness) {
	s := h.migrated()
	ctx := context.Background()
	orig := create(t, s, leafd.Tag{Name: "order", MaxID: 77, Step: 100, Description: "orders"})
	if _, err := s.Allocate(ctx, "order", 100); err != nil {
		t.Fatal(err)
	}
	step, desc, empty := int64(2500), "order IDs — 订单", ""

	old, got, err := s.UpdateTag(ctx, "order", leafd.TagUpdate{Step: &step})
	if err != nil {
		t.Fatal(err)
	}
	if old.Step != 100 || old.Description != "orders" || old.MaxID != 177 {
		t.Fatalf("old = %+v, want the row before the update", old)
	}
	if got.Step != 2500 || got.Description != "orders" || got.MaxID != 177 || got.Name != "order" {
		t.Fatalf("updated = %+v: only the step may change, never max_id", got)
	}
	if got.UpdateTime.Before(orig.UpdateTime) {
		t.Fatalf("update_time went back: %v before %v", got.UpdateTime, orig.UpdateTime)
	}
	// The new table step is what the next allocation reads.
	a, err := s.Allocate(ctx, "order", 10)
	if err != nil || a.TableStep != 2500 {
		t.Fatalf("Allocate after the step change = %+v, %v; want table step 2500", a, err)
	}

	_, got, err = s.UpdateTag(ctx, "order", leafd.TagUpdate{Description: &desc})
	if err != nil || got.Description != desc || got.Step != 2500 {
		t.Fatalf("description update = %+v, %v", got, err)
	}
	_, got, err = s.UpdateTag(ctx, "order", leafd.TagUpdate{Description: &empty})
	if err != nil || got.Description != "" {
		t.Fatalf("clearing the description = %+v, %v", got, err)
	}
	var isNull bool
	if err := h.db.Raw.QueryRow("SELECT description IS NULL FROM leaf_alloc WHERE biz_tag = 'order'").Scan(&isNull); err != nil || !isNull {
		t.Fatalf("a cleared description is stored as NULL: %v, %v", isNull, err)
	}

	zero, huge, long := int64(0), int64(1)<<31, strings.Repeat("d", 257)
	for name, tt := range map[string]struct {
		tag  string
		u    leafd.TagUpdate
		code string
	}{
		"Nothing":         {"order", leafd.TagUpdate{}, leafd.EInvalidBody},
		"StepZero":        {"order", leafd.TagUpdate{Step: &zero}, leafd.EInvalidBody},
		"StepOverInt":     {"order", leafd.TagUpdate{Step: &huge}, leafd.EInvalidBody},
		"DescriptionLong": {"order", leafd.TagUpdate{Description: &long}, leafd.EInvalidBody},
		"UnknownTag":      {"nope", leafd.TagUpdate{Step: &step}, leafd.EUnknownTag},
	} {
		_, _, err := s.UpdateTag(ctx, tt.tag, tt.u)
		wantCode(t, name, err, tt.code)
	}
	if got := h.maxID("order"); got != 187 {
		t.Fatalf("max_id = %d after updates, want 187: updates never touch it", got)
	}
}

// A database that became part of store.shards (its leafd_shard record
// written while a server of it alone runs) serves that server no range: a
// load is store_unavailable and leaves max_id as it was, since the slots
// hand out IDs above it.
func testAllocateRefusedOnShard(t *testing.T, h *harness) {
	s := h.migrated()
	h.insert("t", 1, 100)
	ctx := context.Background()
	if _, err := s.Allocate(ctx, "t", 100); err != nil {
		t.Fatal(err)
	}
	h.exec("INSERT INTO leafd_shard (id, deployment, slots, db_index, db_count, state) VALUES (1, 'd', 4, 0, 2, 'ready')")
	a, err := s.Allocate(ctx, "t", 100)
	if leafd.ErrorCode(err) != leafd.EStoreUnavailable || !strings.Contains(err.Error(), "store.shards") {
		t.Fatalf("Allocate on a database of store.shards: %+v, %v; want store_unavailable naming store.shards", a, err)
	}
	if got := h.maxID("t"); got != 101 {
		t.Fatalf("max_id %d after the refused load, want 101", got)
	}
}
