package segment

import "time"

// Damping of the step policy: one load changes the step by at most these
// factors, so that a single burst cannot throw the step to max_step and a
// lull cannot throw it to the table step. A sustained 100x rise in the rate
// is absorbed in two loads (x10, x10).
const (
	maxGrowth = 10
	maxShrink = 4
)

// stepPolicy sizes ranges so that one lasts between refillMin and refillMax.
type stepPolicy struct {
	refillMin, refillMax time.Duration
	maxStep              int64
}

// next returns the step of the next range.
//
// prev is the step of the last range this server loaded (0 before the first
// load), table the step column it last read, consumed the number of IDs
// issued since the previous load began and period the time since then,
// less any time the tag spent with both buffers empty (then requests wait,
// and the rate they could have been served at does not show; the caller
// leaves that time out).
//
// From consumed/period it predicts how long a range of prev IDs would last.
// Shorter than refillMin: the step grows to what would last the middle of the
// window, at least x2 (Leaf's rule) and at most x10. Longer than refillMax: it
// shrinks the same way, at least /2 and at most /4. Inside the window it stays.
// The result is never below table and never above maxStep, unless table
// itself is larger, which then wins.
func (p stepPolicy) next(prev, table, consumed int64, period time.Duration) int64 {
	upper := max(p.maxStep, table)
	step := prev
	if prev > 0 && period > 0 {
		target := float64(p.refillMin+p.refillMax) / 2
		// rate in IDs per nanosecond; ideal is the step that lasts target.
		ideal := float64(consumed) / float64(period) * target
		lifetime := time.Duration(float64(period) * float64(prev) / max(float64(consumed), 1))
		fprev, fupper := float64(prev), float64(upper)
		switch {
		case lifetime < p.refillMin:
			step = int64(min(max(ideal, 2*fprev), maxGrowth*fprev, fupper))
		case lifetime > p.refillMax:
			step = int64(min(max(min(ideal, fprev/2), fprev/maxShrink), fupper))
		}
	}
	step = min(step, upper)
	step = max(step, table, 1)
	return step
}
