package leafd_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/leafd/leafd"
)

// tagPattern and dotsOnly are the tag rule of docs/contract.md section 4:
// a valid tag matches the first and not the second.
var (
	tagPattern = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,128}$`)
	dotsOnly   = regexp.MustCompile(`^\.+$`)
)

func TestValidateTag(t *testing.T) {
	for _, ok := range []string{"a", "order", "Order.v2:pay-in_CN", strings.Repeat("z", 128), ".a", "a..", "..-", "_", ":"} {
		if err := leafd.ValidateTag(ok); err != nil {
			t.Errorf("ValidateTag(%q) = %v, want nil", ok, err)
		}
	}
	for _, bad := range []string{"", " ", "a b", "a/b", "ä", "a\x00", strings.Repeat("z", 129), "tag?x=1", "%41", "%2E"} {
		if err := leafd.ValidateTag(bad); leafd.ErrorCode(err) != leafd.EInvalidTag {
			t.Errorf("ValidateTag(%q) = %v, want invalid_tag", bad, err)
		}
	}
}

// A name of dots only is a path segment that a URL normaliser removes
// (a client asked for /segment/.. sends /): refused, with a message that
// says why.
func TestValidateTagDotsOnly(t *testing.T) {
	for _, bad := range []string{".", "..", "...", strings.Repeat(".", 128)} {
		err := leafd.ValidateTag(bad)
		if leafd.ErrorCode(err) != leafd.EInvalidTag {
			t.Fatalf("ValidateTag(%q) = %v, want invalid_tag", bad, err)
		}
		if msg := leafd.ErrorMessage(err); !strings.Contains(msg, "dots only") || len(msg) > 200 {
			t.Fatalf("ValidateTag(%q): message %q does not say that a name of dots only is refused", bad, msg)
		}
	}
}

// ValidateTag runs on every ID request: a valid name costs no allocation.
func TestValidateTagAllocatesNothing(t *testing.T) {
	for _, name := range []string{"order", "a.b:c-d_e", "x.", strings.Repeat("z", 128)} {
		if n := testing.AllocsPerRun(1000, func() { _ = leafd.ValidateTag(name) }); n != 0 {
			t.Errorf("ValidateTag(%.20q): %v allocations, want 0", name, n)
		}
	}
}

// FuzzValidateTag checks ValidateTag against the rule of docs/contract.md section 4.
// The seed corpus (testdata/fuzz) runs with the ordinary tests.
func FuzzValidateTag(f *testing.F) {
	for _, s := range []string{"order", "", "a b", strings.Repeat("x", 128), strings.Repeat("x", 129), "é", "a:b.c-d_e", ".", "..", "..x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		err := leafd.ValidateTag(s)
		if want := tagPattern.MatchString(s) && !dotsOnly.MatchString(s); (err == nil) != want {
			t.Fatalf("ValidateTag(%q) = %v; the pattern says valid=%v", s, err, want)
		}
		if err != nil && (leafd.ErrorCode(err) != leafd.EInvalidTag || leafd.ErrorMessage(err) == "") {
			t.Fatalf("ValidateTag(%q) = %v: want an invalid_tag error with a message", s, err)
		}
	})
}

func TestValidateDescription(t *testing.T) {
	if err := leafd.ValidateDescription(strings.Repeat("订", 256)); err != nil {
		t.Fatalf("256 characters: %v", err)
	}
	for _, bad := range []string{strings.Repeat("a", 257), "\xff"} {
		if err := leafd.ValidateDescription(bad); leafd.ErrorCode(err) != leafd.EInvalidBody {
			t.Fatalf("ValidateDescription(%.20q) = %v, want invalid_body", bad, err)
		}
	}
}
