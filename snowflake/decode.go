package snowflake

import (
	"strconv"

	"github.com/leafd/leafd"
)

// ParseID reads a snowflake ID: a positive decimal integer that fits in 63
// bits. It returns an invalid_id *leafd.Error otherwise, whose message
// quotes raw (its first 32 bytes).
func ParseID(raw string) (ID, error) {
	n, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || n < 1 {
		return 0, leafd.Errorf(leafd.EInvalidID, "id %q is not valid: use a positive decimal integer below 2^63", truncate(raw))
	}
	return ID(n), nil
}

// Decoded is an ID's parts in the JSON of GET /snowflake/{id} and of
// `leafd decode`, its fields in that order.
type Decoded struct {
	ID ID `json:"id"`
	// Time is UnixMs in UTC, RFC 3339 to the millisecond.
	Time     string `json:"time"`
	UnixMs   int64  `json:"unix_ms"`
	WorkerID int64  `json:"worker_id"`
	Sequence int64  `json:"sequence"`
}

// DecodeJSON returns id decoded under layout, ready to marshal as GET
// /snowflake/{id} answers it.
func DecodeJSON(layout Layout, id ID) Decoded {
	p := layout.Decode(id)
	return Decoded{ID: id, Time: p.Time.Format(rfc3339Milli), UnixMs: p.UnixMs, WorkerID: p.WorkerID, Sequence: p.Sequence}
}

const rfc3339Milli = "2006-01-02T15:04:05.000Z07:00"

// truncate cuts what a client sent to 32 bytes before an error message
// quotes it.
func truncate(s string) string {
	if len(s) > 32 {
		return s[:32] + "…"
	}
	return s
}
