package snowflake_test

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/leafd/leafd/snowflake"
)

func TestLayoutValidate(t *testing.T) {
	now := time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		layout snowflake.Layout
		want   error
	}{
		{"Default", snowflake.Layout{}, nil},
		{"DefaultSpelledOut", snowflake.DefaultLayout(), nil},
		{"ErrInvalidBitsSum", snowflake.Layout{Epoch: snowflake.DefaultEpoch, TimeBits: 41, WorkerBits: 10, SequenceBits: 13}, snowflake.ErrInvalidBits},
		{"ErrInvalidBitsZeroWorker", snowflake.Layout{Epoch: snowflake.DefaultEpoch, TimeBits: 51, WorkerBits: 0, SequenceBits: 12}, snowflake.ErrInvalidBits},
		{"ErrEpochFuture", snowflake.Layout{Epoch: now.Add(time.Hour).UnixMilli(), TimeBits: 41, WorkerBits: 10, SequenceBits: 12}, snowflake.ErrEpochFuture},
		// uid-generator's trap: 28 bits of seconds ran out; here 31 bits of
		// milliseconds from 2020 last under 25 days.
		{"ErrLayoutExpired", snowflake.Layout{Epoch: time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli(), TimeBits: 31, WorkerBits: 20, SequenceBits: 12}, snowflake.ErrLayoutExpired},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.layout.Validate(now)
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Fatalf("Validate = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestLayoutEnd(t *testing.T) {
	// 1288834974657 + 2^41 = 3487858230209 ms: 2080-07-10T17:30:30.209Z.
	want := time.Date(2080, 7, 10, 17, 30, 30, 209_000_000, time.UTC)
	if got := snowflake.DefaultLayout().End(); !got.Equal(want) {
		t.Fatalf("End = %v, want %v", got, want)
	}
}

func TestDecodeRoundTrip(t *testing.T) {
	layouts := []snowflake.Layout{
		snowflake.DefaultLayout(),
		{Epoch: 0, TimeBits: 43, WorkerBits: 8, SequenceBits: 12},
		{Epoch: 1600000000000, TimeBits: 39, WorkerBits: 16, SequenceBits: 8},
		{Epoch: snowflake.DefaultEpoch, TimeBits: 61, WorkerBits: 1, SequenceBits: 1},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, l := range layouts {
		for range 2000 {
			ms := l.Epoch + rng.Int64N(1<<l.TimeBits)
			worker := rng.Int64N(l.Workers())
			seq := rng.Int64N(l.Sequences())
			id := l.ID(ms, worker, seq)
			if id < 0 {
				t.Fatalf("layout %+v: ID(%d, %d, %d) = %d is negative", l, ms, worker, seq, id)
			}
			p := l.Decode(id)
			if p.UnixMs != ms || p.WorkerID != worker || p.Sequence != seq || p.ID != id || p.Time.UnixMilli() != ms {
				t.Fatalf("layout %+v: Decode(ID(%d, %d, %d)) = %+v", l, ms, worker, seq, p)
			}
		}
	}
	// The extremes of the default layout.
	l := snowflake.DefaultLayout()
	max := l.ID(l.Epoch+1<<41-1, 1023, 4095)
	if max != 1<<63-1 {
		t.Fatalf("largest default ID = %d, want 2^63-1", max)
	}
}

func TestIDJSON(t *testing.T) {
	id := snowflake.ID(1<<62 + 12345)
	b, err := json.Marshal(id)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `"4611686018427400249"` {
		t.Fatalf("JSON = %s, want a quoted decimal string", b)
	}
	var back snowflake.ID
	if err := json.Unmarshal(b, &back); err != nil || back != id {
		t.Fatalf("Unmarshal(%s) = %d, %v", b, back, err)
	}
	if err := json.Unmarshal([]byte(`"12x"`), &back); err == nil {
		t.Fatal("Unmarshal accepted a non-number")
	}
}
