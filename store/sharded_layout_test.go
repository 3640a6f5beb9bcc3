package store_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/leafd/leafd/snowflake"
	"github.com/leafd/leafd/store"
	"github.com/leafd/leafd/store/storetest"
)

// A sharded store leases worker ids in its first database and records the
// snowflake layout there, beside them: servers of one deployment with
// different layouts started together get exactly one of them leasing
// (the race forced as in the suite), and the others' databases hold no
// record.
func TestShardedSnowflakeLayout(t *testing.T) {
	forEachShardDriver(t, func(t *testing.T, driver string) {
		dsns := shardDSNs(t, driver, 3)
		a := openSharded(t, driver, dsns, shardSlots)
		b := openSharded(t, driver, dsns, shardSlots)
		if err := a.Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
		storetest.LayoutRace(t, a, b, store.AfterLayoutRead, false)
		sqlDriver := driver
		if driver == "postgres" {
			sqlDriver = "pgx"
		}
		for i, dsn := range dsns {
			raw, err := sql.Open(sqlDriver, dsn)
			if err != nil {
				t.Fatal(err)
			}
			var n int
			err = raw.QueryRow("SELECT COUNT(*) FROM leafd_snowflake_layout").Scan(&n)
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
