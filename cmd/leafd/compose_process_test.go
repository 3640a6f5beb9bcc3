package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

// leafd compose prints the JSON of GET /snowflake/at/{time} with the
// configured layout, and agrees with leafd decode: first decodes to the
// time at worker 0 sequence 0, next-1 to the time's last ID, next to the
// millisecond after.
func TestComposeCommand(t *testing.T) {
	dir := t.TempDir()
	code, out := runLeafd(t, dir, nil, "compose", "2026-11-23T01:50:53.738999+01:00")
	want := `{"time":"2026-11-23T00:50:53.738Z","unix_ms":1795395053738,"first":"2124666965929754624","next":"2124666965933948928"}`
	if code != 0 || strings.TrimSpace(out) != want {
		t.Fatalf("leafd compose: exit %d, output %q; want %s", code, out, want)
	}
	for _, layout := range [][]string{nil, {"LEAFD_SNOWFLAKE_WORKER_BITS=8", "LEAFD_SNOWFLAKE_SEQUENCE_BITS=14"},
		{"LEAFD_SNOWFLAKE_EPOCH=1700000000000", "LEAFD_SNOWFLAKE_TIME_BITS=40", "LEAFD_SNOWFLAKE_WORKER_BITS=5", "LEAFD_SNOWFLAKE_SEQUENCE_BITS=18"}} {
		for _, ms := range []int64{1700000000000, 1795395053738} {
			code, out := runLeafd(t, dir, layout, "compose", strconv.FormatInt(ms, 10))
			var c struct {
				UnixMs      int64 `json:"unix_ms"`
				First, Next string
			}
			if err := json.Unmarshal([]byte(out), &c); code != 0 || err != nil || c.UnixMs != ms {
				t.Fatalf("%v: leafd compose %d: exit %d, output %q", layout, ms, code, out)
			}
			next, err := strconv.ParseInt(c.Next, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range []struct {
				id     string
				unixMs int64
				first  bool
			}{{c.First, ms, true}, {strconv.FormatInt(next-1, 10), ms, false}, {c.Next, ms + 1, true}} {
				if d.id == "0" { // the epoch's first ID, which decode refuses as no ID issued
					if ms != 1700000000000 {
						t.Errorf("%v: first of %d is 0", layout, ms)
					}
					continue
				}
				code, out := runLeafd(t, dir, layout, "decode", d.id)
				var p struct {
					UnixMs   int64 `json:"unix_ms"`
					WorkerID int64 `json:"worker_id"`
					Sequence int64 `json:"sequence"`
				}
				if err := json.Unmarshal([]byte(out), &p); code != 0 || err != nil || p.UnixMs != d.unixMs ||
					d.first != (p.WorkerID == 0 && p.Sequence == 0) {
					t.Errorf("%v: leafd decode %s (composed of %d): exit %d, output %q; want unix_ms %d", layout, d.id, ms, code, out, d.unixMs)
				}
			}
		}
	}
	for _, bad := range [][]string{{"x"}, {"2026-11-23"}, {"--", "-1"}, {"1.5"}, {"2010-11-04T01:42:54.656Z"}, {"2080-07-10T17:30:30.209Z"}, {}, {"1", "2"}} {
		code, out := runLeafd(t, dir, nil, append([]string{"compose"}, bad...)...)
		if code != 2 || !strings.HasPrefix(out, "leafd: ") {
			t.Errorf("leafd compose %s: exit %d, output %q; want exit 2 and a message", bad, code, out)
		}
	}
}
