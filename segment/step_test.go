package segment

import (
	"testing"
	"time"
)

func TestStepPolicy(t *testing.T) {
	p := stepPolicy{refillMin: 15 * time.Minute, refillMax: 30 * time.Minute, maxStep: 1_000_000}
	const table = 1000
	// rate returns consumed for a step of prev lasting `lasts` over period.
	tests := []struct {
		name     string
		prev     int64
		table    int64
		consumed int64
		period   time.Duration
		want     int64
	}{
		{"FirstLoadUsesTableStep", 0, table, 0, 0, table},
		{"InsideWindowKeeps", 2000, table, 2000, 20 * time.Minute, 2000},
		// 2000 IDs in 10m: a range would last 10m; the middle of the window
		// (22.5m) needs 4500.
		{"ShortGrowsToRate", 2000, table, 2000, 10 * time.Minute, 4500},
		// Lasting 14m would need only x1.6; Leaf's x2 is the least.
		{"ShortGrowsAtLeastDouble", 2000, table, 2000, 14 * time.Minute, 4000},
		// A 100x burst moves the step x10 at most.
		{"BurstDamped", 2000, table, 200_000, 20 * time.Minute, 20_000},
		{"NeverAboveMax", 500_000, table, 500_000, time.Minute, 1_000_000},
		// 2000 IDs in 90m: ideal 500, but at most /4 per load, and the
		// table step is the floor.
		{"LongShrinksDamped", 8000, table, 8000, 90 * time.Minute, 2000},
		{"LongShrinksAtLeastHalf", 8000, table, 8000, 31 * time.Minute, 4000},
		{"NeverBelowTable", 1500, table, 10, 60 * time.Minute, table},
		{"IdleShrinks", 8000, table, 0, 60 * time.Minute, 2000},
		{"TableAboveMaxWins", 100, 2_000_000, 100, time.Minute, 2_000_000},
		{"RaisedTableStepIsFloor", 1000, 5000, 1000, 20 * time.Minute, 5000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := p.next(tt.prev, tt.table, tt.consumed, tt.period)
			if got != tt.want {
				t.Fatalf("next(%d, %d, %d, %v) = %d, want %d", tt.prev, tt.table, tt.consumed, tt.period, got, tt.want)
			}
		})
	}
}

// A sustained 100x rise must be back inside the refill window within three
// loads (docs/contract.md section 5).
func TestStepPolicySustainedRise(t *testing.T) {
	p := stepPolicy{refillMin: 15 * time.Minute, refillMax: 30 * time.Minute, maxStep: 100_000_000}
	rate := 1000.0 / (22.5 * 60) // IDs per second, so that 1000 lasts 22.5m
	step := int64(1000)
	rate *= 100
	for load := 1; load <= 3; load++ {
		lasts := time.Duration(float64(step) / rate * float64(time.Second))
		step = p.next(step, 1000, step, lasts)
		if l := time.Duration(float64(step) / rate * float64(time.Second)); l >= p.refillMin && l <= p.refillMax {
			return
		}
	}
	t.Fatalf("after three loads a range lasts %v, outside %v..%v", time.Duration(float64(step)/rate*float64(time.Second)), p.refillMin, p.refillMax)
}
