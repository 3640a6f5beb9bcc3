package segment

import (
	"sync"

	"github.com/leafd/leafd"
)

// issuedMarks remembers, per tag name and for the allocator's life, the end
// of the highest range the store handed it: belt and braces beside the
// store's own high-water mark, so that a server never serves a range that
// starts at or below an ID it already issued for the tag, even from a store
// that keeps no mark. A name keeps its mark when the tag is deleted and
// created again: that is the case it is for.
type issuedMarks struct {
	mu  sync.Mutex
	end map[string]int64
}

// admit records a, a range of tag name just handed out by the store, and
// returns nil; or, when a starts below the end of a range handed out before
// (the tag was rewound), records nothing and returns tag_rewound.
func (m *issuedMarks) admit(name string, a Allocation) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	top := m.end[name]
	if a.Start < top {
		return leafd.Errorf(leafd.ETagRewound,
			"tag %q was rewound: the store handed out [%d, %d), but this server already issued IDs of the tag up to %d — "+
				"its max_id was lowered by an UPDATE, or the tag was deleted and created again; the range was dropped. "+
				"Raise it above them: UPDATE leaf_alloc SET max_id = %d WHERE biz_tag = '%s'",
			name, a.Start, a.End, top-1, top, name)
	}
	if m.end == nil {
		m.end = map[string]int64{}
	}
	m.end[name] = a.End
	return nil
}
