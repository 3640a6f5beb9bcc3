package snowflake

import (
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Defaults of the layout: Twitter's and Leaf's, so that leafd's IDs continue
// above theirs.
const (
	DefaultEpoch        = 1288834974657 // 2010-11-04 01:42:54.657 UTC, in Unix ms
	DefaultTimeBits     = 41
	DefaultWorkerBits   = 10
	DefaultSequenceBits = 12
)

// idBits is the width of an ID: 63 bits, so that every ID is positive.
const idBits = 63

// Errors of Layout.Validate. Each names the configuration key it is about.
var (
	ErrInvalidBits   = errors.New("snowflake.time_bits + snowflake.worker_bits + snowflake.sequence_bits must add up to 63, each at least 1")
	ErrEpochFuture   = errors.New("snowflake.epoch is in the future")
	ErrLayoutExpired = errors.New("snowflake.time_bits from snowflake.epoch have run out")
)

// Layout is how an ID's 63 bits are split: time since Epoch in
// milliseconds, then the worker id, then the sequence within the
// millisecond. The zero value means the default layout, 41/10/12 bits from
// Twitter's epoch.
type Layout struct {
	// Epoch is the Unix time in milliseconds that time 0 stands for.
	Epoch int64
	// TimeBits, WorkerBits and SequenceBits add up to 63.
	TimeBits, WorkerBits, SequenceBits int
}

// DefaultLayout returns the layout of the zero value, spelled out.
func DefaultLayout() Layout {
	return Layout{Epoch: DefaultEpoch, TimeBits: DefaultTimeBits, WorkerBits: DefaultWorkerBits, SequenceBits: DefaultSequenceBits}
}

func (l Layout) orDefault() Layout {
	if l == (Layout{}) {
		return DefaultLayout()
	}
	return l
}

// Validate checks the layout against the time now: the bits add up to 63
// with at least one for each part, the epoch is not in the future, and the
// time bits have not run out. It returns ErrInvalidBits, ErrEpochFuture or
// ErrLayoutExpired, wrapped with the values.
func (l Layout) Validate(now time.Time) error {
	l = l.orDefault()
	if l.TimeBits < 1 || l.WorkerBits < 1 || l.SequenceBits < 1 || l.TimeBits+l.WorkerBits+l.SequenceBits != idBits {
		return fmt.Errorf("%w (got %d + %d + %d)", ErrInvalidBits, l.TimeBits, l.WorkerBits, l.SequenceBits)
	}
	if l.Epoch > now.UnixMilli() {
		return fmt.Errorf("%w: %d is %s", ErrEpochFuture, l.Epoch, formatMs(l.Epoch))
	}
	if end := l.End(); !now.Before(end) {
		return fmt.Errorf("%w: they ended on %s", ErrLayoutExpired, end.Format(time.RFC3339))
	}
	return nil
}

// describe spells the layout out with its configuration keys.
func (l Layout) describe() string {
	l = l.orDefault()
	return fmt.Sprintf("snowflake.epoch %d (%s), snowflake.time_bits %d, snowflake.worker_bits %d, snowflake.sequence_bits %d",
		l.Epoch, formatMs(l.Epoch), l.TimeBits, l.WorkerBits, l.SequenceBits)
}

// End returns the first instant the layout cannot express.
func (l Layout) End() time.Time {
	l = l.orDefault()
	return time.UnixMilli(l.Epoch + l.maxTime() + 1).UTC()
}

// Workers returns how many worker ids the layout has: 2^WorkerBits.
func (l Layout) Workers() int64 { return 1 << l.orDefault().WorkerBits }

// Sequences returns how many IDs one worker can issue in one millisecond:
// 2^SequenceBits.
func (l Layout) Sequences() int64 { return 1 << l.orDefault().SequenceBits }

func (l Layout) maxTime() int64 { return 1<<l.TimeBits - 1 }

// ID composes the ID of Unix millisecond ms, worker and sequence. The
// caller keeps each part within its bits.
func (l Layout) ID(ms, worker, seq int64) ID {
	l = l.orDefault()
	return ID((ms-l.Epoch)<<(l.WorkerBits+l.SequenceBits) | worker<<l.SequenceBits | seq)
}

// Decode splits id into its parts. Any non-negative id decodes; whether it
// was ever issued is another matter.
func (l Layout) Decode(id ID) Parts {
	l = l.orDefault()
	ms := int64(id)>>(l.WorkerBits+l.SequenceBits) + l.Epoch
	return Parts{
		ID:       id,
		UnixMs:   ms,
		Time:     time.UnixMilli(ms).UTC(),
		WorkerID: int64(id) >> l.SequenceBits & (1<<l.WorkerBits - 1),
		Sequence: int64(id) & (1<<l.SequenceBits - 1),
	}
}

// ID is a snowflake ID. Its JSON form is a decimal string, since a 63-bit
// number does not survive a JavaScript number.
type ID int64

// String returns the ID in decimal.
func (id ID) String() string { return strconv.FormatInt(int64(id), 10) }

// MarshalJSON returns the ID as a quoted decimal string.
func (id ID) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 22)
	b = append(b, '"')
	b = strconv.AppendInt(b, int64(id), 10)
	return append(b, '"'), nil
}

// UnmarshalJSON accepts the ID as a quoted decimal string or a bare number.
func (id *ID) UnmarshalJSON(b []byte) error {
	s := string(b)
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		s = s[1 : len(s)-1]
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return fmt.Errorf("snowflake: ID %s is not a decimal integer", b)
	}
	*id = ID(n)
	return nil
}

// Parts is a decoded ID.
type Parts struct {
	ID ID `json:"id"`
	// Time is UnixMs as a time in UTC.
	Time     time.Time `json:"-"`
	UnixMs   int64     `json:"unix_ms"`
	WorkerID int64     `json:"worker_id"`
	Sequence int64     `json:"sequence"`
}

func formatMs(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02 15:04:05.000 UTC")
}
