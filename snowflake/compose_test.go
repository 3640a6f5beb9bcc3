package snowflake_test

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/snowflake"
)

// Compose gives the smallest ID of a millisecond and of the next one; every
// ID of the millisecond, any worker and sequence, lies in [first, next) and
// decodes to that millisecond.
func TestCompose(t *testing.T) {
	layouts := []snowflake.Layout{
		{},
		snowflake.DefaultLayout(),
		{Epoch: 1700000000000, TimeBits: 39, WorkerBits: 8, SequenceBits: 16},
		{Epoch: 0, TimeBits: 61, WorkerBits: 1, SequenceBits: 1},
		{Epoch: 1600000000000, TimeBits: 1, WorkerBits: 31, SequenceBits: 31},
	}
	for _, l := range layouts {
		d := l
		if d == (snowflake.Layout{}) {
			d = snowflake.DefaultLayout()
		}
		last := d.End().UnixMilli() - 1
		for _, ms := range []int64{d.Epoch, d.Epoch + 1, (d.Epoch + last) / 2, last - 1, last} {
			first, next, err := l.Compose(ms)
			if err != nil {
				t.Fatalf("%+v: Compose(%d): %v", l, ms, err)
			}
			if want := l.ID(ms, 0, 0); first != want {
				t.Errorf("%+v: Compose(%d) first = %d, want %d", l, ms, first, want)
			}
			if p := l.Decode(first); p.UnixMs != ms || p.WorkerID != 0 || p.Sequence != 0 {
				t.Errorf("%+v: first %d decodes to %+v, want %d worker 0 sequence 0", l, first, p, ms)
			}
			top := l.ID(ms, l.Workers()-1, l.Sequences()-1)
			if uint64(top)+1 != next || l.Decode(top).UnixMs != ms {
				t.Errorf("%+v: Compose(%d) next = %d, want %d (one past the last ID %d)", l, ms, next, uint64(top)+1, top)
			}
			if ms < last {
				if f2, _, _ := l.Compose(ms + 1); uint64(f2) != next {
					t.Errorf("%+v: next of %d is %d, but the first of %d is %d", l, ms, next, ms+1, f2)
				}
			} else if next != 1<<63 {
				t.Errorf("%+v: next of the last millisecond = %d, want 2^63", l, next)
			}
		}
		if first, _, _ := l.Compose(d.Epoch); first != 0 {
			t.Errorf("%+v: the epoch's first ID = %d, want 0", l, first)
		}
		for _, ms := range []int64{d.Epoch - 1, last + 1, math.MinInt64, math.MaxInt64} {
			first, next, err := l.Compose(ms)
			if leafd.ErrorCode(err) != leafd.EInvalidTime || first != 0 || next != 0 {
				t.Errorf("%+v: Compose(%d) = %d, %d, %v; want an invalid_time error", l, ms, first, next, err)
				continue
			}
			if msg := leafd.ErrorMessage(err); !strings.Contains(msg, "is outside the ID layout") {
				t.Errorf("%+v: Compose(%d): message %q", l, ms, msg)
			}
		}
	}
}

func TestParseTime(t *testing.T) {
	for _, c := range []struct {
		raw  string
		want int64
	}{
		{"1795395053738", 1795395053738},
		{"0", 0},
		{"0001795395053738", 1795395053738},
		{"9223372036854775807", math.MaxInt64},
		{"2026-11-23T00:50:53.738Z", 1795395053738},
		{"2026-11-23T00:50:53Z", 1795395053000},
		{"2026-11-23T00:50:53.7389999Z", 1795395053738},
		{"2026-11-23T00:50:53.738999999Z", 1795395053738},
		{"2026-11-23T01:50:53.738+01:00", 1795395053738},
		{"2026-11-22T19:20:53.738123456-05:30", 1795395053738},
		{"1969-12-31T23:59:59.9995Z", -1},
	} {
		if ms, err := snowflake.ParseTime(c.raw); err != nil || ms != c.want {
			t.Errorf("ParseTime(%q) = %d, %v; want %d", c.raw, ms, err, c.want)
		}
	}
	for _, raw := range []string{"", "-1", "+1", "1.5", "1e3", " 1", "9223372036854775808", "2026-11-23", "2026-11-23T00:50:53",
		"2026-11-23 00:50:53Z", "2026-11-23T25:00:00Z", "2026-11-23T00:50:53.738+0100", "now", strings.Repeat("9", 40)} {
		ms, err := snowflake.ParseTime(raw)
		if leafd.ErrorCode(err) != leafd.EInvalidTime || ms != 0 {
			t.Errorf("ParseTime(%q) = %d, %v; want an invalid_time error", raw, ms, err)
			continue
		}
		if msg := leafd.ErrorMessage(err); !strings.Contains(msg, "use RFC 3339 with a zone") {
			t.Errorf("ParseTime(%q): message %q does not say what to use", raw, msg)
		}
	}
	_, err := snowflake.ParseTime(strings.Repeat("x", 100))
	if want := `time "` + strings.Repeat("x", 32) + `…" is not valid`; !strings.HasPrefix(leafd.ErrorMessage(err), want) {
		t.Errorf("ParseTime of 100 bytes: message %q, want it to start %q", leafd.ErrorMessage(err), want)
	}
}

func TestComposeJSON(t *testing.T) {
	c, err := snowflake.ComposeJSON(snowflake.Layout{}, "2026-11-23T01:50:53.738999+01:00")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(c)
	first := (int64(1795395053738) - snowflake.DefaultEpoch) << 22
	want := `{"time":"2026-11-23T00:50:53.738Z","unix_ms":1795395053738,"first":"` + snowflake.ID(first).String() +
		`","next":"` + snowflake.ID(first+1<<22).String() + `"}`
	if string(b) != want {
		t.Errorf("ComposeJSON = %s, want %s", b, want)
	}
	// The layout's last millisecond: next is 2^63, past every ID.
	l := snowflake.DefaultLayout()
	c, err = snowflake.ComposeJSON(l, "2080-07-10T17:30:30.208Z")
	if err != nil || c.Next != 1<<63 || c.UnixMs != l.End().UnixMilli()-1 {
		t.Fatalf("the last millisecond: %+v, %v", c, err)
	}
	if b, _ := json.Marshal(c); !strings.HasSuffix(string(b), `"next":"9223372036854775808"}`) {
		t.Errorf("the last millisecond: %s", b)
	}
	for _, raw := range []string{"2010-11-04T01:42:54.656Z", "2080-07-10T17:30:30.209Z", "x"} {
		if _, err := snowflake.ComposeJSON(l, raw); leafd.ErrorCode(err) != leafd.EInvalidTime {
			t.Errorf("ComposeJSON(%q): %v, want invalid_time", raw, err)
		}
	}
}
