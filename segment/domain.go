package segment

import (
	"errors"
	"math"

	"github.com/leafd/leafd"
)

// The domain of an opaque tag. Its counter values 1..N map to its IDs; the
// store knows nothing of N and hands out ranges of its counter as for any
// tag. IDs of a range that a server does not issue (it stopped, or its
// buffers were dropped) are lost to the tag for good, so that a range as
// large as the step policy would choose (up to segment.max_step, a million
// by default) could throw away most of a 6-digit domain at one restart.
//
// So a range of an opaque tag holds at most 1/domainShare of the domain
// left: N less the last ID of the tag's last range on this server (its
// top), divided by the stride of its ranges on a sharded store (the slot's
// share), but never less than one ID, so that the last IDs are issued too.
// That bound wins over the table step and the step policy. A server that
// stops gives up at most its two buffers, each at most 1/64 of the domain
// left when it was loaded: together less than 1/31 of what was left. Near
// the end of the domain ranges shrink to a single ID, each a load of its
// own: the last 127 IDs (about 128·S with S slots) come at the pace of the
// database.
//
// A range reaching past N is cut at N when it is loaded, and one starting
// past it means the tag is exhausted (tag_exhausted, final). On a sharded
// store each slot hands out IDs of its own residue modulo the stride, and
// the slots reach N at different times: a range past N only marks its slot
// spent, and the tag is exhausted once every slot is. (The slots are used
// evenly only because the ranges of an opaque tag are asked in any order:
// see AnyOrderStore.)

// domain is what a server knows of an opaque tag's domain.
type domain struct {
	n int64 // N, the largest counter value
	// top is the highest counter value handed to this server for the tag
	// (the last ID of its last range, or the row's max_id-1 before its
	// first), and stride the stride of its last range (1 before): the
	// tag's ranges are sized from them (domainCapLocked).
	top, stride int64
	// spent holds the residues, modulo the stride, of the slots of a
	// sharded store that have passed N (see fitDomain).
	spent map[int64]bool
}

// domainShare is the fraction of an opaque tag's domain left that one
// range may hold at most: 1/64, so that a restart gives up less than 1/31
// of it, while a 6-digit domain still takes ranges of up to 15,624 IDs.
const domainShare = 64

// errSlotSpent is a range of an opaque tag from a slot of a sharded store
// that has passed the tag's domain while other slots have not: the load
// asks again, and the store's next slot answers.
var errSlotSpent = errors.New("segment: the slot has passed the opaque domain")

// domainCapLocked returns the largest step the next load of t may ask
// for: unbounded for a sequential tag. The caller holds t.mu.
func (t *tag) domainCapLocked() int64 {
	d := t.dom
	if d == nil {
		return math.MaxInt64
	}
	return max(1, max(d.n-d.top, 0)/(domainShare*d.stride))
}

// fitDomain returns a, a range just loaded for t, cut at the end of t's
// domain. A range that starts past the end is tag_exhausted, or, from a
// slot of a sharded store while another slot may still hold IDs of the
// domain, errSlotSpent.
func (t *tag) fitDomain(a Allocation) (Allocation, error) {
	d := t.dom
	if d == nil || a.Last() <= d.n { // n never changes: read without mu
		return a, nil
	}
	if a.Start <= d.n {
		a.End = a.Start + ((d.n-a.Start)/a.stride()+1)*a.stride()
		return a, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := a.stride(); s > 1 {
		if d.spent == nil {
			d.spent = map[int64]bool{}
		}
		d.spent[a.Start%s] = true
		if int64(len(d.spent)) < s {
			return Allocation{}, errSlotSpent
		}
	}
	d.top = d.n
	return Allocation{}, leafd.Errorf(leafd.ETagExhausted,
		"tag %q is exhausted: every ID of its opaque domain, 1 to %d, was handed out (or given up by a server that stopped); create a tag with more digits",
		t.name, d.n)
}

// domainLocked returns how many IDs of t's domain (t.dom is set) are used (handed out
// for good, as far as this server knows: the domain below its top, less
// its buffers) and reserved (in its buffers, not yet issued). The caller
// holds t.mu.
func (t *tag) domainLocked() (used, reserved int64) {
	reserved = t.bufs.reserved()
	return max(min(t.dom.top, t.dom.n)-reserved, 0), reserved
}
