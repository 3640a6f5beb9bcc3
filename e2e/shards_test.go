package e2e

import (
	"context"
	"database/sql"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/leafd/leafd/internal/testkit/galera"
	shardstore "github.com/leafd/leafd/store/sharded"
)

// Scenario 9: store.shards over three independent MariaDB servers of the
// scenario's own (internal/testkit/galera, standalone). Three leafd servers
// initialise sharding together at start-up and serve under load; one
// database is killed with kill -9 and restarted; then a slot is moved to
// another database under load. No request may fail while a database is up
// (at most 0.1% do, within the kill); no ID twice; each server's IDs of a
// tag increasing; the restarted database serves again afterwards.
func TestShards(t *testing.T) {
	enabled(t)
	dbs := galera.MustStart(t, galera.Options{Nodes: 3, Standalone: true, Logf: t.Logf})
	var dsns []string
	for i := range 3 {
		root, err := sql.Open("mysql", dbs.Node(i).DSN("")+"?timeout=2s")
		if err != nil {
			t.Fatal(err)
		}
		_, err = root.Exec("CREATE DATABASE leafd")
		root.Close()
		if err != nil {
			t.Fatal(err)
		}
		dsns = append(dsns, dbs.Node(i).DSN("leafd")+"?timeout=2s")
	}
	const slots = 12
	shards := strings.Join(dsns, " ")
	var killed windows
	c := newCluster(t, "9 store.shards: a database killed, a slot moved", clusterOptions{
		database: dsns[0],
		shards:   dsns,
		store: func(int) (string, []string) {
			return dsns[0], []string{"LEAFD_STORE_SHARDS=" + shards, "LEAFD_STORE_SHARD_SLOTS=12"}
		},
		env: []string{"LEAFD_SEGMENT_SEED_TAGS=a:20 b:100 c:500", "LEAFD_SEGMENT_REFILL_MIN=500ms", "LEAFD_SEGMENT_REFILL_MAX=1s",
			"LEAFD_SEGMENT_MAX_STEP=2000", "LEAFD_SNOWFLAKE_LEASE_TTL=10s"},
	})
	// Snowflake leases live in the first database, which stays up.
	c.allowed = func(o *outcome) bool {
		return o.mode == modeSegment && o.code == "segment_unavailable" && killed.overlap(o)
	}
	c.startAll()
	l := c.startLoad(loadSpec{tags: segTags, snowflake: true})
	time.Sleep(prof.phase)

	// The second database killed mid-load, down for 2 s, restarted.
	from := time.Now()
	if err := dbs.Kill(1); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := dbs.Restart(ctx, 1); err != nil {
		t.Fatal(err)
	}
	killed.add(from, time.Now().Add(time.Second))
	before := slotProgress(t, dsns[1])
	time.Sleep(prof.phase + 2*time.Second)
	if after := slotProgress(t, dsns[1]); after <= before {
		c.violate("the restarted database was not used again: its slots' counters stayed at %d", after)
	}

	// A slot of the second database moved to the third, under load.
	sh, err := shardstore.Open("mysql", dsns, shardstore.Options{Slots: slots, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer sh.Close()
	if err := sh.MoveSlot(ctx, 1, 2, nil); err != nil {
		t.Fatalf("moving slot 1 under load: %v", err)
	}
	time.Sleep(prof.phase + time.Second)
	l.Stop()

	failed := len(c.outcomesOf(func(o *outcome) bool { return o.status != 200 }))
	total := len(c.outcomesOf(func(*outcome) bool { return true }))
	if total > 0 && float64(failed) > 0.001*float64(total) {
		c.violate("%d of %d requests failed, more than 0.1%%", failed, total)
	}
	c.note("3 independent MariaDB servers, %d slots; database 1 killed with kill -9 and restarted after 2s; slot 1 moved from database 1 to 2 under load; %d of %d requests failed",
		slots, failed, total)
	c.finish()
}

// slotProgress sums the slot counters of one database.
func slotProgress(t *testing.T, dsn string) int64 {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var sum sql.NullInt64
	if err := db.QueryRow("SELECT SUM(max_id) FROM leafd_slot_alloc").Scan(&sum); err != nil {
		t.Fatalf("reading the slots of %s: %v", dsn, err)
	}
	return sum.Int64
}
