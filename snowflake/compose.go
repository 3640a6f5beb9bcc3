package snowflake

import (
	"strconv"
	"time"

	"github.com/leafd/leafd"
)

// Compose returns the IDs of Unix millisecond unixMs under the layout:
// first, the smallest (worker 0, sequence 0), and next, the smallest of the
// following millisecond, so that [first, next) holds every ID of that
// millisecond, of any worker. It is what a range query over time needs:
// the IDs issued from t1 up to t2 are those with first(t1) ≤ id < first(t2).
//
// next is a uint64 because the layout's last millisecond ends at 2^63, one
// past the largest ID. A millisecond before the epoch or past the layout's
// end is an invalid_time *leafd.Error.
func (l Layout) Compose(unixMs int64) (first ID, next uint64, err error) {
	l = l.orDefault()
	if unixMs < l.Epoch || unixMs-l.Epoch > l.maxTime() {
		return 0, 0, leafd.Errorf(leafd.EInvalidTime,
			"time %s is outside the ID layout: its IDs hold the times from %s to %s (snowflake.epoch, snowflake.time_bits)",
			formatMsRFC(unixMs), formatMsRFC(l.Epoch), formatMsRFC(l.Epoch+l.maxTime()))
	}
	shift := l.WorkerBits + l.SequenceBits
	t := uint64(unixMs - l.Epoch)
	return ID(t << shift), (t + 1) << shift, nil
}

// Composed is the JSON of GET /snowflake/at/{time} and of `leafd compose`,
// its fields in that order.
type Composed struct {
	// Time is UnixMs in UTC, RFC 3339 to the millisecond.
	Time   string `json:"time"`
	UnixMs int64  `json:"unix_ms"`
	// First is the smallest ID of the millisecond, Next the smallest of
	// the next one (2^63 after the layout's last millisecond); both are
	// decimal strings.
	First ID     `json:"first"`
	Next  uint64 `json:"next,string"`
}

// ComposeJSON returns the IDs of raw, a time as ParseTime reads it, under
// layout, ready to marshal as GET /snowflake/at/{time} answers them. Its
// errors are invalid_time *leafd.Error.
func ComposeJSON(layout Layout, raw string) (Composed, error) {
	ms, err := ParseTime(raw)
	if err != nil {
		return Composed{}, err
	}
	first, next, err := layout.Compose(ms)
	if err != nil {
		return Composed{}, err
	}
	return Composed{Time: formatMsRFC(ms), UnixMs: ms, First: first, Next: next}, nil
}

// ParseTime reads a time as GET /snowflake/at/{time} takes it and returns
// it in Unix milliseconds: RFC 3339 with a zone (Z or ±hh:mm) and any
// fractional seconds, truncated to the millisecond, or Unix milliseconds
// as digits alone. Anything else is an invalid_time *leafd.Error whose
// message quotes raw (its first 32 bytes).
func ParseTime(raw string) (int64, error) {
	if raw != "" && allDigits(raw) {
		ms, err := strconv.ParseInt(raw, 10, 64)
		if err == nil {
			return ms, nil
		}
	} else if t, err := time.Parse(time.RFC3339Nano, raw); err == nil {
		return t.UnixMilli(), nil
	}
	return 0, leafd.Errorf(leafd.EInvalidTime,
		"time %q is not valid: use RFC 3339 with a zone, such as 2026-11-23T00:50:53.738Z or 2026-11-23T01:50:53+01:00, or Unix milliseconds, such as 1795395053738",
		truncate(raw))
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// formatMsRFC formats Unix millisecond ms as the JSON answers give times.
func formatMsRFC(ms int64) string { return time.UnixMilli(ms).UTC().Format(rfc3339Milli) }
