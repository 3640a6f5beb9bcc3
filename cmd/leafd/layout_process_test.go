package main

import (
	"strings"
	"testing"

	"github.com/leafd/leafd/internal/testkit/testdb"
	"github.com/leafd/leafd/store"
)

// A server whose snowflake epoch or bits differ from the layout recorded
// with the worker id leases of its database refuses to start: exit 1 and a
// message naming both layouts and the keys to change, leased or fixed. The
// first server keeps issuing, and one with its layout starts beside it.
func TestSnowflakeLayoutRefusedProcess(t *testing.T) {
	testdb.Each(t, store.Drivers(), func(t *testing.T, driver, dsn string) {
		env := []string{"LEAFD_STORE_DRIVER=" + driver, "LEAFD_STORE_DSN=" + dsn,
			"LEAFD_SNOWFLAKE_ENABLED=true", "LEAFD_SEGMENT_ENABLED=false"}
		with := func(extra ...string) []string { return append(append([]string{}, env...), extra...) }

		first := startLeafd(t, env...)
		waitReady(t, first)

		for name, extra := range map[string][]string{
			"Epoch": {"LEAFD_SNOWFLAKE_EPOCH=1600000000000"},
			"BitsFixed": {"LEAFD_SNOWFLAKE_WORKER_BITS=11", "LEAFD_SNOWFLAKE_SEQUENCE_BITS=11",
				"LEAFD_SNOWFLAKE_WORKER_ID=3"},
		} {
			code, out := runLeafdFor(t, with(extra...)...)
			if code != 1 || !strings.Contains(out, "leafd: this server's snowflake layout is snowflake.epoch ") ||
				!strings.Contains(out, "recorded with snowflake.epoch 1288834974657 (2010-11-04 01:42:54.657 UTC), "+
					"snowflake.time_bits 41, snowflake.worker_bits 10, snowflake.sequence_bits 12") ||
				!strings.Contains(out, "set snowflake.epoch, snowflake.time_bits, snowflake.worker_bits and snowflake.sequence_bits") {
				t.Fatalf("%s: exit %d, want 1 naming both layouts and the keys; output:\n%s", name, code, out)
			}
			if name == "Epoch" && !strings.Contains(out, "snowflake.epoch 1600000000000 (2020-09-13") {
				t.Fatalf("the refusal does not name this server's epoch; output:\n%s", out)
			}
		}

		second := startLeafd(t, env...)
		waitReady(t, second)
		if w := snowflakeLoad(t, []*process{first, second}); w[0] == w[1] {
			t.Fatalf("both servers issue under worker id %d", w[0])
		}
	})
}
