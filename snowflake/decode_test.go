package snowflake_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/snowflake"
)

func TestParseID(t *testing.T) {
	for _, c := range []struct {
		raw  string
		want snowflake.ID
	}{
		{"1", 1},
		{"1234567890123456789", 1234567890123456789},
		{"9223372036854775807", 1<<63 - 1},
	} {
		if id, err := snowflake.ParseID(c.raw); err != nil || id != c.want {
			t.Errorf("ParseID(%q) = %d, %v; want %d", c.raw, id, err, c.want)
		}
	}
	for _, raw := range []string{"", "0", "-1", "1e9", "0x10", " 1", "12a", "9223372036854775808", strings.Repeat("9", 40)} {
		id, err := snowflake.ParseID(raw)
		if leafd.ErrorCode(err) != leafd.EInvalidID || id != 0 {
			t.Errorf("ParseID(%q) = %d, %v; want an invalid_id error", raw, id, err)
			continue
		}
		if msg := leafd.ErrorMessage(err); !strings.Contains(msg, "use a positive decimal integer below 2^63") {
			t.Errorf("ParseID(%q): message %q does not say what to use", raw, msg)
		}
	}
	// What a client sent is quoted cut to 32 bytes.
	_, err := snowflake.ParseID(strings.Repeat("x", 100))
	if want := `id "` + strings.Repeat("x", 32) + `…" is not valid`; !strings.HasPrefix(leafd.ErrorMessage(err), want) {
		t.Errorf("ParseID of 100 bytes: message %q, want it to start %q", leafd.ErrorMessage(err), want)
	}
}

// The JSON of GET /snowflake/{id} and `leafd decode`, byte for byte.
func TestDecodeJSON(t *testing.T) {
	layout := snowflake.DefaultLayout()
	id := layout.ID(1700000000123, 7, 42) // 2023-11-14T22:13:20.123Z
	b, err := json.Marshal(snowflake.DecodeJSON(layout, id))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"` + id.String() + `","time":"2023-11-14T22:13:20.123Z","unix_ms":1700000000123,"worker_id":7,"sequence":42}`
	if string(b) != want {
		t.Fatalf("DecodeJSON = %s\nwant %s", b, want)
	}
	// Another layout splits the same ID differently.
	small := snowflake.Layout{Epoch: snowflake.DefaultEpoch, TimeBits: 41, WorkerBits: 18, SequenceBits: 4}
	if d := snowflake.DecodeJSON(small, small.ID(1700000000000, 1<<17, 15)); d.WorkerID != 1<<17 || d.Sequence != 15 ||
		d.Time != "2023-11-14T22:13:20.000Z" {
		t.Fatalf("DecodeJSON under a 41/18/4 layout = %+v", d)
	}
}
