package e2e

import (
	"testing"
	"time"

	"github.com/leafd/leafd/internal/testkit/pgserver"
)

// Scenario 8: PostgreSQL. Three servers over one PostgreSQL database of the
// scenario's own (internal/testkit/pgserver), under load with small steps: one
// server killed with kill -9 and restarted, then the database itself
// crashed (an immediate shutdown: every session cut, nothing checkpointed)
// and started again, replaying its write-ahead log, 2 or 8 times. Segment
// requests may fail with segment_unavailable only between a crash and the
// recovery after it; snowflake (a 10 s lease) never; no ID twice.
func TestPostgres(t *testing.T) {
	enabled(t)
	pg := pgserver.Start(t)
	if err := pg.CreateDatabase("leafd"); err != nil {
		t.Fatal(err)
	}
	dsn := pg.DSN("leafd")
	const wait = 500 * time.Millisecond
	c := newCluster(t, "8 PostgreSQL: kill -9, database crashed", clusterOptions{
		driver:      "postgres",
		database:    dsn,
		store:       func(int) (string, []string) { return dsn + "&connect_timeout=2", nil },
		waitTimeout: wait,
		env: []string{
			"LEAFD_SEGMENT_SEED_TAGS=a:20 b:100 c:500", "LEAFD_SEGMENT_REFILL_MIN=500ms", "LEAFD_SEGMENT_REFILL_MAX=1s",
			"LEAFD_SEGMENT_MAX_STEP=2000", "LEAFD_SNOWFLAKE_LEASE_TTL=10s"},
	})
	var crashes windows
	c.allowed = func(o *outcome) bool {
		return o.mode == modeSegment && o.code == "segment_unavailable" && crashes.overlap(o)
	}
	c.startAll()
	l := c.startLoad(loadSpec{tags: segTags, snowflake: true})
	time.Sleep(prof.phase)

	s := c.servers[1]
	s.kill()
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(prof.phase)

	var slowest time.Duration
	for i := range prof.dbRestarts {
		from := time.Now()
		if err := pg.Crash(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		if err := pg.Start(); err != nil {
			t.Fatalf("crash %d: PostgreSQL did not start again: %v", i+1, err)
		}
		up := time.Now()
		recovered, err := c.allReady(30*time.Second, segTags, true)
		if err != nil {
			t.Fatalf("crash %d: no recovery: %v", i+1, err)
		}
		crashes.add(from, recovered)
		slowest = max(slowest, recovered.Sub(up))
		time.Sleep(prof.phase)
	}
	l.Stop()
	c.note("1 kill -9 and restart; %d PostgreSQL crashes (immediate shutdown, down 1s, WAL replayed at start); "+
		"every load had succeeded again at most %v after the database was back", prof.dbRestarts, slowest.Round(10*time.Millisecond))
	c.finish()
}
