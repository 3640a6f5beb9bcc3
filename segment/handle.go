package segment

import (
	"context"
	"sync/atomic"

	"github.com/leafd/leafd"
)

// Handle serves one tag of an Allocator without looking the tag up by name
// on every call: for a program that embeds the allocator and asks for IDs
// of a tag it knows in advance, Handle.Next is an atomic add on the current
// buffer, where Allocator.Next is a map lookup plus that add.
//
// A Handle follows its tag across refreshes: when the tag is deleted from
// the store it answers unknown_tag, and when a tag of that name is created
// again it serves the new one. It is safe for concurrent use.
type Handle struct {
	a    *Allocator
	name string
	t    atomic.Pointer[tag] // the tag last found under name; nil if none
}

// Handle returns a Handle for the tag name. The tag need not exist yet:
// Next reports unknown_tag until it does.
//
// Errors: invalid_tag when name is not a valid tag (leafd.ValidateTag).
func (a *Allocator) Handle(name string) (*Handle, error) {
	if err := leafd.ValidateTag(name); err != nil {
		return nil, err
	}
	h := &Handle{a: a, name: name}
	h.t.Store((*a.tags.Load())[name])
	return h, nil
}

// Tag returns the name of the tag h serves.
func (h *Handle) Tag() string { return h.name }

// Next returns the next ID of h's tag. Its errors are Allocator.Next's.
func (h *Handle) Next(ctx context.Context) (int64, error) {
	t := h.t.Load()
	if id, ok, preload := t.takeOne(); ok {
		if preload != nil {
			h.a.preload(t, preload)
		}
		if t.opaque != nil {
			return t.opaque.id(t.name, id)
		}
		return id, nil
	}
	id, err := h.a.nextSlow(ctx, h.name)
	h.follow()
	return id, err
}

// NextN reserves n IDs of h's tag and appends them to dst, as
// Allocator.NextN does, with its errors.
func (h *Handle) NextN(ctx context.Context, n int, dst []Range) ([]Range, error) {
	dst, err := h.a.NextN(ctx, h.name, n, dst)
	h.follow()
	return dst, err
}

// follow points h at the tag now served under its name, after a slow path
// in which the tag may have been deleted or created again.
func (h *Handle) follow() {
	if t := (*h.a.tags.Load())[h.name]; t != h.t.Load() {
		h.t.Store(t)
	}
}
