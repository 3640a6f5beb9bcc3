package segment

import (
	"fmt"
	"sync"

	"github.com/leafd/leafd"
)

// issuedMarks remembers, per tag name and for the allocator's life, the
// highest ID of the highest range the store handed it: belt and braces
// beside the store's own high-water mark, so that a server never serves a
// range that starts at or below an ID it already issued for the tag, even
// from a store that keeps no mark. A name keeps its mark when the tag is
// deleted and created again: that is the case it is for.
//
// The mark is the last ID of a range, not its End: a strided range ends
// Stride past its last ID, and a sharded store may hand out the next range
// of the tag anywhere above that ID (in the same slot or another).
//
// A range handed out in any order (AnyOrderStore, for an opaque tag) need
// only lie above the IDs it could share with the ranges before: those of
// its own residue modulo its stride, and every ID of a range of another
// stride.
type issuedMarks struct {
	mu sync.Mutex
	// above holds, per tag, the lowest ID the next range may start at: the
	// last ID of the highest range plus one.
	above map[string]int64
	// classes holds the same per tag and class of IDs, for the tags of a
	// strided store only: a contiguous range holds IDs of every class, so
	// above says all there is. A tag's first strided range finds the
	// contiguous ones before it, if any, as class {1, 0}.
	classes map[string]map[idClass]int64
}

// idClass is the IDs of a range of stride IDs: those ≡ residue (mod stride).
type idClass struct{ stride, residue int64 }

// admit records a, a range of tag name just handed out by the store, and
// returns nil; or, when a starts at or below the last ID of a range handed
// out before that could hold the same IDs (the tag was rewound), records
// nothing and returns tag_rewound. A range handed out in order must start
// above every range before; one handed out in any order (anyOrder), above
// those of its class. A range that is malformed (a negative stride, no ID,
// or a width that is not a multiple of its stride) is refused with an
// error without a code: a store failure.
func (m *issuedMarks) admit(name string, a Allocation, anyOrder bool) error {
	if a.Stride < 0 || a.End <= a.Start || (a.End-a.Start)%a.stride() != 0 {
		return fmt.Errorf("segment: the store handed out a malformed range of tag %q: start %d, end %d, stride %d", name, a.Start, a.End, a.Stride)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	class := idClass{a.stride(), a.Start % a.stride()}
	top := m.above[name]
	if anyOrder && class.stride > 1 && m.classes[name] != nil {
		top = 0
		for c, t := range m.classes[name] {
			if c.stride != class.stride || c.residue == class.residue {
				top = max(top, t) // the same IDs may be in both
			}
		}
	}
	if a.Start < top {
		return leafd.Errorf(leafd.ETagRewound,
			"tag %q was rewound: the store handed out [%d, %d), but this server already issued IDs of the tag up to %d — "+
				"its max_id was lowered by an UPDATE, or the tag was deleted and created again; the range was dropped. "+
				"Repair it with POST /api/tags/%s/repair (or leafd tag repair %s), which raises max_id to the tag's high-water mark; "+
				"or by SQL: UPDATE leaf_alloc SET max_id = %d WHERE biz_tag = '%s'",
			name, a.Start, a.End, top-1, name, name, top, name)
	}
	if m.above == nil {
		m.above, m.classes = map[string]int64{}, map[string]map[idClass]int64{}
	}
	if cs := m.classes[name]; cs != nil || class.stride > 1 {
		if cs == nil {
			cs = map[idClass]int64{{1, 0}: m.above[name]}
			m.classes[name] = cs
		}
		cs[class] = max(cs[class], a.Last()+1)
	}
	m.above[name] = max(m.above[name], a.Last()+1)
	return nil
}
