package sharded_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leafd/leafd/internal/testkit/testdb"
	"github.com/leafd/leafd/snowflake"
	"github.com/leafd/leafd/store"
	"github.com/leafd/leafd/store/sharded"
	"github.com/leafd/leafd/store/storetest"
)

// A sharded store leases worker ids in its first database and records the
// snowflake layout there, beside them: servers of one deployment with
// different layouts started together get exactly one of them leasing
// (the race forced as in the suite), and the others' databases hold no
// record.
func TestShardedSnowflakeLayout(t *testing.T) {
	forEachDriver(t, store.Drivers(), func(t *testing.T, driver string) {
		dsns := shardDSNs(t, driver, 3)
		a := openSharded(t, driver, dsns, shardSlots)
		b := openSharded(t, driver, dsns, shardSlots)
		if err := a.Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
		storetest.LayoutRace(t, a, b, sharded.AfterLayoutRead, false)
		for i, dsn := range dsns {
			raw := testdb.SQL(t, driver, dsn)
			var n int
			err := raw.QueryRow("SELECT COUNT(*) FROM leafd_snowflake_layout").Scan(&n)
			raw.Close()
			if err != nil {
				t.Fatal(err)
			}
			want := 0
			if i == 0 {
				want = 1
			}
			if n != want {
				t.Fatalf("database %d holds %d recorded layouts, want %d", i, n, want)
			}
		}
		// A fixed worker id is leased there too, under the same record.
		now := time.Now().UnixMilli()
		_, err := b.ClaimFixedWorker(context.Background(), snowflake.FixedClaim{WorkerID: 9, Owner: "fixed:c#1", TTL: time.Hour,
			NowMs: now, WatermarkMs: now + 3000, Layout: snowflake.Layout{Epoch: 1, TimeBits: 41, WorkerBits: 10, SequenceBits: 12}})
		if !errors.Is(err, snowflake.ErrLayoutMismatch) {
			t.Fatalf("a fixed claim with another epoch: %v, want snowflake.ErrLayoutMismatch", err)
		}
	})
}

// Worker ids are leased from store.shards[0] only once its record shows it
// is the deployment's first database: two servers whose lists start with
// different databases, on databases migrated but not initialised
// (store.migrate false), would otherwise each lease worker id 0 from a
// table of its own and issue the same IDs.
func TestShardedLeasesNeedTheFirstDatabase(t *testing.T) {
	driver := store.DefaultDriver()
	ctx := context.Background()
	dsns := shardDSNs(t, driver, 2)
	for _, dsn := range dsns {
		p, err := store.Open(driver, dsn)
		if err != nil {
			t.Fatal(err)
		}
		err = p.Migrate(ctx)
		p.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	a := openSharded(t, driver, dsns, shardSlots)
	b := openSharded(t, driver, []string{dsns[1], dsns[0]}, shardSlots)
	now := time.Now().UnixMilli()
	claim := func(s *sharded.Store, owner string) (snowflake.Lease, error) {
		return s.ClaimWorker(ctx, snowflake.Claim{Owner: owner, Workers: 4, TTL: time.Hour, NowMs: now, WatermarkMs: now + 3000})
	}
	fixed := func(s *sharded.Store, owner string) (snowflake.Lease, error) {
		return s.ClaimFixedWorker(ctx, snowflake.FixedClaim{WorkerID: 3, Owner: "fixed:" + owner, TTL: time.Hour, NowMs: now, WatermarkMs: now + 3000})
	}
	for _, s := range []*sharded.Store{a, b} {
		if l, err := claim(s, "early#1"); err == nil {
			t.Fatalf("a worker id leased before sharding was initialised: %+v", l)
		}
		if l, err := fixed(s, "early#1"); err == nil {
			t.Fatalf("a fixed worker id leased before sharding was initialised: %+v", l)
		}
	}
	if err := a.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := claim(a, "a#1"); err != nil {
		t.Fatal(err)
	}
	if l, err := claim(b, "b#1"); err == nil {
		t.Fatalf("a server whose store.shards starts with the deployment's second database leased %+v", l)
	}
	if l, err := fixed(b, "b#1"); err == nil {
		t.Fatalf("a server whose store.shards starts with the deployment's second database leased %+v", l)
	}

	// store.shards[0] emptied while a runs, and migrated again (a new id,
	// no leases): a's next claim is refused rather than take worker id 0
	// again, which a server may still hold from the lost table.
	db := testdb.SQL(t, driver, dsns[0])
	for _, q := range []string{"DELETE FROM leaf_worker", "DELETE FROM leafd_snowflake_layout", "DELETE FROM leafd_database",
		"INSERT INTO leafd_database (id, uid) VALUES (1, 'new')"} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if l, err := claim(a, "a#2"); !errors.Is(err, sharded.ErrMismatch) {
		t.Fatalf("a claim in an emptied store.shards[0]: %+v, %v; want a mismatch", l, err)
	}
}
