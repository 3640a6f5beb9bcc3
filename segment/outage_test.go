package segment_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/internal/testkit/faultproxy"
	"github.com/leafd/leafd/internal/testkit/testdb"
	"github.com/leafd/leafd/segment"
	"github.com/leafd/leafd/store"
)

// A real network outage between the allocator and its database, made by a
// proxy that cuts every connection: the buffers keep serving, requests
// past them fail with segment_unavailable within wait_timeout, and the
// allocator recovers by itself once the network is back. On every engine
// reached at network addresses.
func TestOutageThroughProxy(t *testing.T) {
	for _, driver := range store.FallbackDrivers() { // the engines a fault proxy can come between
		t.Run(driver, func(t *testing.T) { testOutageThroughProxy(t, driver) })
	}
}

func testOutageThroughProxy(t *testing.T, driver string) {
	dsn := testdb.DSN(t, driver)
	direct := openStore(t, driver, dsn)
	ctx := context.Background()
	if err := direct.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := direct.CreateTag(ctx, tagRow("t", 100)); err != nil {
		t.Fatal(err)
	}
	proxy := faultproxy.New(t, testdb.Addr(t, driver, dsn))
	proxied := testdb.WithAddr(t, driver, dsn, proxy.Addr())

	sc := fastConfig()
	sc.MaxStep = 100
	sc.WaitTimeout = 300 * time.Millisecond
	a := newAllocator(t, openStore(t, driver, proxied), sc)
	if _, err := a.NextN(ctx, "t", 20, nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() bool { st, _ := a.TagState("t"); return st.Buffers[1-st.Current].Ready }, "next buffer loaded")

	proxy.Down()
	for i := range 180 {
		if _, err := a.Next(ctx, "t"); err != nil {
			t.Fatalf("request %d during an outage shorter than the buffers: %v", i, err)
		}
	}
	var last error
	for range 30 {
		if _, last = a.Next(ctx, "t"); last != nil {
			break
		}
	}
	if code(last) != leafd.ESegmentUnavailable {
		t.Fatalf("after the buffers ran dry: %v, want segment_unavailable", last)
	}
	start := time.Now()
	if _, err := a.Next(ctx, "t"); code(err) != leafd.ESegmentUnavailable || time.Since(start) > 2*time.Second {
		t.Fatalf("a request during the outage took %v and got %v", time.Since(start), err)
	}
	// The store cannot be reached and an asked-for tag is dry: the server
	// is not ready.
	if err := a.Ready(); code(err) != leafd.ENotReady {
		t.Fatalf("Ready during the outage with a dry tag: %v, want not_ready", err)
	}

	proxy.Up()
	eventually(t, func() bool {
		_, err := a.Next(ctx, "t")
		return err == nil
	}, "recovery once the database is reachable")
}

// A load that hangs rather than fails (here: another session holds the
// tag's row, or the whole SQLite file, locked) is bounded like a failure:
// requests get segment_unavailable within wait_timeout and each attempt
// gives up after LoadTimeout. It is the tag's trouble, not the server's:
// the store answers, so the server stays ready while the tag is reported
// failing with a cause that points at the lock, the other tags serve, and
// all recovers when the lock goes.
func TestRowLockedStaysReady(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, db *database) {
		db.addTag(t, "t", 1, 10)
		db.addTag(t, "other", 1, 1000)
		cfg := fastConfig()
		cfg.WaitTimeout = 100 * time.Millisecond
		cfg.LoadTimeout = 300 * time.Millisecond
		a := newAllocator(t, db.store(t), cfg)

		ctx := context.Background()
		if _, err := a.Next(ctx, "other"); err != nil {
			t.Fatal(err)
		}
		conn, err := db.raw.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		// An UPDATE in an open transaction: the row's write lock on a
		// server, the file's on an engine of files.
		lock, unlock := "BEGIN; UPDATE leaf_alloc SET step = step WHERE biz_tag = 't'", "ROLLBACK"
		for _, q := range splitSQL(lock) {
			if _, err := conn.ExecContext(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		start := time.Now()
		_, err = a.Next(ctx, "t")
		if code(err) != leafd.ESegmentUnavailable {
			t.Fatalf("with the row locked: %v, want segment_unavailable", err)
		}
		if waited := time.Since(start); waited > time.Second {
			t.Fatalf("failing took %v, wait_timeout is %v", waited, cfg.WaitTimeout)
		}
		eventually(t, func() bool {
			st, _ := a.TagState("t")
			return st.Status == segment.StatusFailing && st.Err != nil
		}, "the locked tag reported failing")
		st, _ := a.TagState("t")
		if msg := st.Err.Error(); !strings.Contains(msg, "lock") {
			t.Errorf("the locked tag's error does not point at the lock: %s", msg)
		}
		// Several load timeouts long: the tag stays dry, the server ready,
		// and the other tag serves (from its buffer: on SQLite the lock
		// holds the whole file).
		for deadline := time.Now().Add(4 * cfg.LoadTimeout); time.Now().Before(deadline); {
			if err := a.Ready(); err != nil {
				t.Fatalf("Ready while one tag's row is locked: %v", err)
			}
			if _, err := a.Next(ctx, "other"); err != nil {
				t.Fatalf("another tag while one row is locked: %v", err)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if _, err := conn.ExecContext(ctx, unlock); err != nil {
			t.Fatal(err)
		}
		eventually(t, func() bool { _, err := a.Next(ctx, "t"); return err == nil }, "serving after the lock is gone")
		if err := a.Ready(); err != nil {
			t.Fatalf("Ready after recovery: %v", err)
		}
	})
}

func splitSQL(q string) []string {
	var out []string
	for _, s := range strings.Split(q, ";") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}
