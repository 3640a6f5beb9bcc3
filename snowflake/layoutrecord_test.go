package snowflake_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leafd/leafd/snowflake"
)

// A generator whose layout (or epoch alone) differs from the one recorded
// with the worker id leases stops for good, leased or fixed, pool or not,
// naming both layouts, and issues nothing; one with the recorded layout
// runs beside the first.
func TestLayoutMismatchStops(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, db *leaseDB) {
		recorded := snowflake.Layout{Epoch: 1_600_000_000_000, TimeBits: 40, WorkerBits: 11, SequenceBits: 12}
		a := newGenerator(t, snowflake.Settings{Leases: db.store(t), Layout: recorded, Owner: "server-a", LeaseTTL: 2 * time.Second})
		waitReady(t, a)
		mustNext(t, a)

		epochOnly := recorded
		epochOnly.Epoch = snowflake.DefaultEpoch
		for name, set := range map[string]snowflake.Settings{
			"Default": {Owner: "server-b"},
			"Epoch":   {Layout: epochOnly, Owner: "server-c"},
			"Fixed":   {Layout: epochOnly, Fixed: true, WorkerID: 5, Owner: "server-d"},
		} {
			t.Run(name, func(t *testing.T) {
				set.Leases, set.LeaseTTL = db.store(t), 2*time.Second
				g := newGenerator(t, set)
				err := waitDone(t, g)
				var m *snowflake.LayoutMismatchError
				if !errors.As(err, &m) || m.Recorded != recorded || m.RecordedBy != "server-a#1" {
					t.Fatalf("error %v, want a *snowflake.LayoutMismatchError naming %+v recorded by server-a#1", err, recorded)
				}
				if msg := err.Error(); !strings.Contains(msg, "snowflake.epoch 1600000000000") ||
					!strings.Contains(msg, "snowflake.epoch 1288834974657") {
					t.Fatalf("the refusal says %q: it must name both epochs", msg)
				}
				if _, err := g.Next(t.Context()); err == nil {
					t.Fatal("the refused generator issued an ID")
				}
			})
		}
		pool, err := snowflake.NewPool(snowflake.Settings{Leases: db.store(t), Owner: "server-e", LeaseTTL: 2 * time.Second, Logger: quiet}, 3)
		if err != nil {
			t.Fatal(err)
		}
		pool.Start()
		t.Cleanup(func() { pool.Close() })
		select {
		case <-pool.Done():
			if !errors.Is(pool.Err(), snowflake.ErrLayoutMismatch) {
				t.Fatalf("the pool stopped with %v, want snowflake.ErrLayoutMismatch", pool.Err())
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a pool with another layout did not stop within 10 s")
		}

		b := newGenerator(t, snowflake.Settings{Leases: db.store(t), Layout: recorded, Owner: "server-f", LeaseTTL: 2 * time.Second})
		waitReady(t, b)
		notDone(t, a)
		mustNext(t, a)
		mustNext(t, b)
	})
}

// The refusal names both layouts with their keys, and who recorded the
// other when that is known.
func TestLayoutMismatchErrorMessage(t *testing.T) {
	recorded := snowflake.Layout{Epoch: 1_600_000_000_000, TimeBits: 40, WorkerBits: 11, SequenceBits: 12}
	for _, c := range []struct {
		by   string
		want string
	}{
		{"host/1/ab#1", " (by host/1/ab#1 on 2020-09-13 12:26:40.000 UTC): "},
		{"", "snowflake.sequence_bits 12: the IDs"},
	} {
		err := error(&snowflake.LayoutMismatchError{Own: snowflake.Layout{}, Recorded: recorded, RecordedBy: c.by, RecordedMs: recorded.Epoch})
		msg := err.Error()
		for _, want := range []string{c.want,
			"this server's snowflake layout is snowflake.epoch 1288834974657 (2010-11-04 01:42:54.657 UTC), snowflake.time_bits 41, snowflake.worker_bits 10, snowflake.sequence_bits 12, ",
			"recorded with snowflake.epoch 1600000000000 (2020-09-13 12:26:40.000 UTC), snowflake.time_bits 40, snowflake.worker_bits 11, snowflake.sequence_bits 12",
		} {
			if !strings.Contains(msg, want) {
				t.Errorf("%q does not say %q", msg, want)
			}
		}
		if !errors.Is(err, snowflake.ErrLayoutMismatch) {
			t.Errorf("%v is not ErrLayoutMismatch", err)
		}
	}
}
