package leafd

import (
	"fmt"
	"time"
	"unicode/utf8"
)

// MaxTagLen is the longest tag leafd accepts, the width of leaf_alloc.biz_tag.
const MaxTagLen = 128

// Tag is one row of the leaf_alloc table: a business tag and its counter.
type Tag struct {
	Name string
	// MaxID is the first ID not yet handed to any server.
	MaxID int64
	// Step is the table step: the smallest range a server takes.
	Step        int64
	Description string
	UpdateTime  time.Time
	// Format is "sequential" (the default; "" reads as it), "opaque"
	// (each counter value is mapped through a keyed bijection to the ID
	// handed out) or "dated" (an ID is the date number of its period
	// followed by a counter that starts at 1 in each period). Digits is an
	// opaque tag's domain in decimal digits (0: IDs below 2^53), or a dated
	// tag's counter width; KeyFingerprint the fingerprint of the key an
	// opaque tag was created with. Period ("day", "month" or "year") and
	// Zone (an IANA time zone, "" for UTC) are a dated tag's; MaxStep, when
	// not 0, caps the step servers choose for a dated tag (1: one
	// transaction per number). These live in leafd's own table, not in
	// leaf_alloc.
	Format         string
	Digits         int
	KeyFingerprint string
	Period, Zone   string
	MaxStep        int64
}

// UnknownTagError is the unknown_tag error for a tag the store was found
// not to have.
func UnknownTagError(name string) *Error {
	return Errorf(EUnknownTag, "tag %q is not defined in the store; create it with POST /api/tags or leafd tag add", name)
}

// ValidateTag reports whether name is a valid tag: 1 to 128 characters from
// A-Z a-z 0-9 _ . : -, not all of them dots. It returns an invalid_tag
// *Error otherwise. It does no allocation for a valid name, so it is cheap
// enough for the ID hot path.
//
// A name of dots only is refused because a URL cannot carry it: "." and
// ".." are dot segments, which clients and proxies remove from a path
// (/segment/.. is sent as /), and a longer run of dots is refused with them
// so that the rule stays one a person can remember.
func ValidateTag(name string) error {
	if len(name) == 0 || len(name) > MaxTagLen {
		return tagError(name)
	}
	dots := true
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !tagByte(c) {
			return tagError(name)
		}
		dots = dots && c == '.'
	}
	if dots {
		return dotsError(name)
	}
	return nil
}

func tagByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == ':' || c == '-'
}

func tagError(name string) error {
	return Errorf(EInvalidTag, "tag %q is not valid: use 1 to %d characters from A-Z a-z 0-9 _ . : -", shownTag(name), MaxTagLen)
}

func dotsError(name string) error {
	return Errorf(EInvalidTag, "tag %q is not valid: a name of dots only is a path segment that URLs drop (/segment/.. is sent as /); use at least one character other than the dot", shownTag(name))
}

// shownTag is name cut short enough for a message.
func shownTag(name string) string {
	if len(name) > 40 {
		return name[:40] + "…"
	}
	return name
}

// MaxDescriptionLen is the longest description, in characters: the width of
// leaf_alloc.description.
const MaxDescriptionLen = 256

// ValidateDescription checks a tag's description: UTF-8, at most
// MaxDescriptionLen characters. It returns an invalid_body *Error
// otherwise.
func ValidateDescription(d string) error {
	if !utf8.ValidString(d) {
		return Errorf(EInvalidBody, "description is not UTF-8")
	}
	if n := utf8.RuneCountInString(d); n > MaxDescriptionLen {
		return Errorf(EInvalidBody, "description has %d characters: use at most %d", n, MaxDescriptionLen)
	}
	return nil
}

// MaxID is the largest ID leafd ever issues, 2^63-1.
const MaxID = int64(^uint64(0) >> 1)

// ValidateStep checks a table step: at least 1 and at most max.
func ValidateStep(step, max int64) error {
	if step < 1 || step > max {
		return Errorf(EInvalidBody, "step %d is out of range: use 1 to %d", step, max)
	}
	return nil
}

// TagUpdate is a change to a tag: each field that is not nil is set.
type TagUpdate struct {
	// Step is the new table step: the smallest range a server takes.
	Step *int64
	// Description is the new description; "" clears it.
	Description *string
}

// String returns the tag's name and counter for logs.
func (t Tag) String() string { return fmt.Sprintf("%s(max_id=%d step=%d)", t.Name, t.MaxID, t.Step) }
